#!/usr/bin/env bash
# Stops the control plane that up.sh started in DIR and removes its etcd data; Kueue and JobSet too,
# had tests/integration/frontends.py started them there and not stopped them.
set -uo pipefail
dir=${1:-${KOORDPY_CONTROLPLANE:-/tmp/koordpy-controlplane}}
for name in kueue jobset kwok controller-manager apiserver etcd; do
  pidfile="$dir/$name.pid"
  [ -f "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  kill "$pid" 2>/dev/null
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
  rm -f "$pidfile"
done
rm -rf "$dir/etcd" "$dir/env"
