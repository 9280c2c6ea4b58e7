#!/usr/bin/env bash
# Builds celref (kube-scheduler v1.37.2's DRA CEL, see main.go) from the Go module beside this
# script into a cache folder, skipping it when it is there. Prints the binary's path on stdout.
#
#   KOORDPY_CACHE  cache root (default ~/.cache/koordpy)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KOORDPY_CACHE:-$HOME/.cache/koordpy}
command -v go >/dev/null || { echo "build.sh: Go is required (https://go.dev/dl)" >&2; exit 1; }
export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
# The binary is named by a hash of what it is built from, so a change to either file builds anew.
sum=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" | sha256sum | cut -c1-16)
out="$cache/celref-$sum"
if [ ! -x "$out" ]; then
  mkdir -p "$cache"
  echo "build.sh: building celref (first time only, a minute or two)" >&2
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -o "$out.partial.$$" .)
  mv -f "$out.partial.$$" "$out"
fi
echo "$out"
