#!/usr/bin/env bash
# koordpy on a local kind cluster, the way a user installs it: builds the image, loads it into
# kind, installs the Helm chart, applies an example as it is (kwok runs its nodes) and waits
# until the pods koordpy should bind are bound where `koordpy simulate` says, printing where.
# Needs docker, kind, kubectl and helm on PATH (and Python 3.11 for the example's expectations).
#
#   e2e/kind/run.sh [EXAMPLE]   create or reuse the cluster "koordpy"; EXAMPLE is a folder of
#                               examples/ (default spine-block; also preemption, volcano-tiers,
#                               kai-rack)
#   e2e/kind/run.sh delete      delete the cluster
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
name=koordpy
image=koordpy:dev
kwok_version=v0.7.0
deadline_seconds=${KOORDPY_KIND_DEADLINE:-300}
if [ "${1:-}" = delete ]; then exec kind delete cluster --name "$name"; fi
example=${1:-spine-block}
[ -d "$root/examples/$example" ] || { echo "run.sh: no example $example in examples/" >&2; exit 2; }
for tool in docker kind kubectl helm; do
  command -v "$tool" >/dev/null || { echo "run.sh: $tool is required on PATH" >&2; exit 1; }
done

kind get clusters | grep -qx "$name" || kind create cluster --name "$name" --config "$here/kind-config.yaml"
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"' EXIT
kind get kubeconfig --name "$name" > "$kubeconfig"
k() { kubectl --kubeconfig "$kubeconfig" "$@"; }

echo "run.sh: building $image" >&2
docker build -t "$image" "$root"
kind load docker-image "$image" --name "$name"

echo "run.sh: installing kwok $kwok_version (fake kubelets for the example's nodes)" >&2
k apply -f "https://github.com/kubernetes-sigs/kwok/releases/download/$kwok_version/kwok.yaml"
k apply -f "https://github.com/kubernetes-sigs/kwok/releases/download/$kwok_version/stage-fast.yaml"
toleration='[{"op":"add","path":"/spec/template/spec/tolerations","value":[{"key":"koordpy.io/system","operator":"Exists","effect":"NoSchedule"}]}]'
k -n kube-system patch deployment kwok-controller --type json -p "$toleration"

echo "run.sh: installing the chart" >&2
helm --kubeconfig "$kubeconfig" upgrade --install koordpy "$root/charts/koordpy" \
  --namespace koordpy-system --create-namespace \
  --set image.repository=koordpy --set image.tag=dev --set image.pullPolicy=Never \
  --set-json 'tolerations=[{"key":"koordpy.io/system","operator":"Exists","effect":"NoSchedule"}]' \
  --wait --timeout 10m

"$root/scripts/bootstrap" >/dev/null
py=$root/.venv/bin/python
echo "run.sh: applying examples/$example as it is" >&2
# The examples' nodes carry kwok.x-k8s.io/node=fake (kwok runs them); a Job's pods come from
# kind's own Job controller, named <job>-<random>.
k apply -f "$root/examples/$example"

expected=$("$root/.venv/bin/koordpy" simulate -f "$root/examples/$example" -o json)
echo "run.sh: waiting up to ${deadline_seconds}s for the pods koordpy should bind" >&2
end=$((SECONDS + deadline_seconds))
while :; do
  if "$py" - "$expected" "$(k get pods -A -o json)" <<'PY'
import collections, json, sys
want = json.loads(sys.argv[1])["bound"]
have, by_job = {}, collections.defaultdict(list)
for p in json.loads(sys.argv[2])["items"]:
    ns, node = p["metadata"]["namespace"], p["spec"].get("nodeName")
    have[f'{ns}/{p["metadata"]["name"]}'] = node
    for ref in p["metadata"].get("ownerReferences") or []:
        if ref.get("kind") == "Job" and ref.get("controller") and node:
            by_job[f'{ns}/{ref["name"]}'].append(node)
# simulate names a Job's pods <job>-<i>, the Job controller <job>-<random>: those are compared
# per Job, as the nodes the Job's pods are on.
missing, per_job = {}, collections.defaultdict(list)
for pod, node in want.items():
    job = pod.rsplit("-", 1)[0]
    if pod not in have and job in by_job:
        per_job[job].append(node)
    elif have.get(pod) != node:
        missing[pod] = node
wrong = len(missing)
for job, nodes in per_job.items():
    if sorted(nodes) != sorted(by_job[job]):
        missing[f"{job}'s pods"] = ",".join(sorted(nodes))
        have[f"{job}'s pods"] = ",".join(sorted(by_job[job]))
        wrong += len(nodes)
if missing:
    print(f"  {len(want) - wrong}/{len(want)} bound as expected; missing: "
          + ", ".join(f"{p} -> {n} (now {have.get(p) or 'pending'})" for p, n in sorted(missing.items())[:5]),
          file=sys.stderr)
    sys.exit(1)
for pod, node in sorted(want.items()):
    print(f"  {pod} -> {node}")
PY
  then
    echo "run.sh: done. Try: kubectl --kubeconfig <(kind get kubeconfig --name $name) get pods -o wide" >&2
    exit 0
  fi
  if [ "$SECONDS" -ge "$end" ]; then
    echo "run.sh: timed out; the scheduler's log:" >&2
    k -n koordpy-system logs deployment/koordpy --tail 50 >&2 || true
    exit 1
  fi
  sleep 5
done
