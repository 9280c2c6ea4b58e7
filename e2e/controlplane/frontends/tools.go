//go:build tools

// Package tools pins the commands ../build.sh builds from this module.
package tools

import (
	_ "sigs.k8s.io/jobset"
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
