//go:build tools

// Package tools pins the command ../build.sh builds from this module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
