#!/usr/bin/env bash
# Creates a kind cluster, installs koordpy's CRDs and the spine/block topology, and runs
# `koordpy run` against it from this checkout. Needs Docker, kind and kubectl on PATH.
#
#   e2e/kind/run.sh            create (or reuse) the cluster "koordpy" and start the scheduler
#   e2e/kind/run.sh delete     delete the cluster
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
name=koordpy
if [ "${1:-}" = delete ]; then exec kind delete cluster --name "$name"; fi
for tool in docker kind kubectl; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is required" >&2; exit 1; }
done
kind get clusters | grep -qx "$name" || kind create cluster --name "$name" --config "$here/kind-config.yaml"
kubeconfig=$(mktemp)
kind get kubeconfig --name "$name" > "$kubeconfig"
kubectl --kubeconfig "$kubeconfig" apply -f "$root/crds"
kubectl --kubeconfig "$kubeconfig" wait --for=condition=Established crd --all --timeout=60s
kubectl --kubeconfig "$kubeconfig" apply -f - <<'YAML'
apiVersion: scheduling.koordinator.sh/v1alpha1
kind: ClusterNetworkTopology
metadata: {name: default}
spec:
  networkTopologySpec:
  - {topologyLayer: SpineLayer, labelKey: [network.topology.nvidia.com/spine]}
  - {topologyLayer: BlockLayer, parentTopologyLayer: SpineLayer, labelKey: [network.topology.nvidia.com/block]}
  - {topologyLayer: NodeTopologyLayer, parentTopologyLayer: BlockLayer}
YAML
"$root/scripts/bootstrap"
echo "run.sh: koordpy is scheduling pods with schedulerName: koordpy (Ctrl-C stops it)" >&2
exec "$root/.venv/bin/koordpy" run --kubeconfig "$kubeconfig"
