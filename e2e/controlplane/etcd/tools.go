//go:build tools

// Package tools pins the command ../build.sh builds from this module.
package tools

import _ "go.etcd.io/etcd/server/v3"
