#!/usr/bin/env bash
# Stops kube-apiserver of the control plane in DIR, waits SECONDS, starts it again with the
# same flags and waits until it is ready: a fault for the tests to survive.
#
#   restart-apiserver.sh DIR [SECONDS]
set -euo pipefail
dir=$1; pause=${2:-2}
# shellcheck disable=SC1091
. "$dir/env"
pid=$(cat "$dir/apiserver.pid")
kill "$pid" 2>/dev/null || true
for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
sleep "$pause"
# The saved command line is shell-quoted; rebuild the array so that $! is kube-apiserver itself
# (not a subshell around it, which down.sh would kill while the server lives on).
eval "apiserver=($(cat "$dir/apiserver.cmd"))"
# shellcheck disable=SC2154  # assigned by the eval above
"${apiserver[@]}" >> "$dir/logs/kube-apiserver.log" 2>&1 &
echo $! > "$dir/apiserver.pid"
for _ in $(seq 1 240); do
  "$KUBECTL" --kubeconfig "$KUBECONFIG" get --raw /readyz >/dev/null 2>&1 && exit 0
  sleep 0.5
done
echo "restart-apiserver.sh: kube-apiserver not ready after 120s" >&2
exit 1
