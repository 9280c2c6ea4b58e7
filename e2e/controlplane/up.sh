#!/usr/bin/env bash
# Starts a local control plane: etcd, kube-apiserver (RBAC on, client-certificate identities),
# kube-controller-manager (the default controllers: ReplicaSet, Deployment, Job, PV binding,
# garbage collector...) and kwok (fake kubelets: fast node and pod stages, pod-delete so deletions
# complete). kube-scheduler is not started: tests and benchmarks run it when they compare against
# it, with $FEATURE_GATES from DIR/env. Builds the binaries first if they are missing (./build.sh).
#
#   up.sh [DIR]      state folder (default $KOORDPY_CONTROLPLANE or /tmp/koordpy-controlplane)
#
# Writes DIR/kubeconfig (the admin, group system:masters), DIR/env (paths and ports to
# source) and DIR/pki (the CA that ./mint-user.sh signs other identities with). Stop with
# ./down.sh DIR. Starting again on a running DIR is a no-op.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-${KOORDPY_CONTROLPLANE:-/tmp/koordpy-controlplane}}
mkdir -p "$dir/pki" "$dir/logs"
dir=$(cd "$dir" && pwd)

if [ -f "$dir/env" ]; then
  # shellcheck disable=SC1091
  . "$dir/env"
  if kill -0 "$(cat "$dir/apiserver.pid" 2>/dev/null || echo 0)" 2>/dev/null &&
     "$KUBECTL" --kubeconfig "$dir/kubeconfig" get --raw /readyz >/dev/null 2>&1; then
    echo "$dir"
    exit 0
  fi
  "$here/down.sh" "$dir" >/dev/null 2>&1 || true
fi

bindir=$("$here/build.sh")
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
etcd_port=$(free_port); etcd_peer=$(free_port); api_port=$(free_port)

# The gates the workload-aware scheduling APIs need (k8s.io/kubernetes pkg/features, v1.37):
# GenericWorkload (beta, off by default) serves Workload and PodGroup and a pod's schedulingGroup;
# TopologyAwareWorkloadScheduling, WorkloadWithJob (the Job controller creates a Workload and a
# PodGroup per Job), PodGroupPreemptionPolicy and CompositePodGroup are alpha. kube-apiserver,
# kube-controller-manager and kube-scheduler must agree on them, so every one gets this list.
# DRAWorkloadResourceClaims (beta, off by default) keeps a PodGroup's spec.resourceClaims (the API
# server drops the field without it), lets the ResourceClaim controller make a PodGroup's claims
# and kube-scheduler reserve them for the group. resource.k8s.io/v1 (DRA, GA) is served by default,
# DeviceTaintRule included (DRADeviceTaintRules, GA in v1.37), and kube-controller-manager's default
# controllers ('*') include the ResourceClaim controller, which makes pods' claims from templates.
gates=GenericWorkload=true,TopologyAwareWorkloadScheduling=true,WorkloadWithJob=true
gates+=,PodGroupPreemptionPolicy=true,CompositePodGroup=true,DRAWorkloadResourceClaims=true

pki=$dir/pki
if [ ! -f "$pki/ca.key" ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=koordpy-e2e-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout "$pki/apiserver.key" \
    -out "$pki/apiserver.csr" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\n' > "$pki/apiserver.ext"
  openssl x509 -req -in "$pki/apiserver.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -extfile "$pki/apiserver.ext" -out "$pki/apiserver.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
fi

cat > "$dir/env" <<ENV
BINDIR=$bindir
KUBECTL=$bindir/kubectl
HELM=$bindir/helm
KUBE_SCHEDULER=$bindir/kube-scheduler
KUBE_CONTROLLER_MANAGER=$bindir/kube-controller-manager
FEATURE_GATES=$gates
ETCD_PORT=$etcd_port
API_PORT=$api_port
API_SERVER=https://127.0.0.1:$api_port
KUBECONFIG=$dir/kubeconfig
ENV

"$bindir/etcd" --name e2e --data-dir "$dir/etcd" \
  --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
  --listen-peer-urls "http://127.0.0.1:$etcd_peer" --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
  --initial-cluster "e2e=http://127.0.0.1:$etcd_peer" --unsafe-no-fsync \
  --quota-backend-bytes 4294967296 > "$dir/logs/etcd.log" 2>&1 &
echo $! > "$dir/etcd.pid"

# The audit log records every request a ServiceAccount makes (who, verb, resource, status), so
# tests can check which calls the scheduler's own identity made and that none was refused; the
# admin's and the control plane's requests are left out.
cat > "$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: None
POLICY

# ServiceAccount and TaintNodesByCondition admission are off: the first refuses a pod until the
# controller manager has made its namespace's default ServiceAccount (tests create namespaces and
# pods at once) and the second taints every new node not-ready until the node controller sees it
# Ready, so a test's node would be unusable for a moment; the tests' pods need neither. Priority
# admission stays on (it resolves PriorityClasses). A v1.37 kube-apiserver refuses a loopback
# --advertise-address unless it stops reconciling the kubernetes Service's endpoints
# (--endpoint-reconciler-type none): no pod here talks to that Service.
# shellcheck disable=SC2054  # the commas are in flag values (Node,RBAC), not between elements
apiserver=("$bindir/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
  --cert-dir "$dir/pki" --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
  --client-ca-file "$pki/ca.crt" --authorization-mode Node,RBAC \
  --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$pki/sa.pub" \
  --service-account-signing-key-file "$pki/sa.key" --service-cluster-ip-range 10.96.0.0/16 \
  --disable-admission-plugins ServiceAccount,TaintNodesByCondition --max-requests-inflight 2000 \
  --endpoint-reconciler-type none --feature-gates "$gates" \
  --runtime-config scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true \
  --max-mutating-requests-inflight 1000 \
  --audit-policy-file "$dir/audit-policy.yaml" --audit-log-path "$dir/logs/audit.log")
printf '%q ' "${apiserver[@]}" > "$dir/apiserver.cmd"  # for restart-apiserver.sh
"${apiserver[@]}" > "$dir/logs/kube-apiserver.log" 2>&1 &
echo $! > "$dir/apiserver.pid"

"$here/mint-user.sh" "$dir" admin system:masters > "$dir/kubeconfig"

for _ in $(seq 1 240); do
  if "$bindir/kubectl" --kubeconfig "$dir/kubeconfig" get --raw /readyz >/dev/null 2>&1; then break; fi
  if ! kill -0 "$(cat "$dir/apiserver.pid")" 2>/dev/null; then
    echo "up.sh: kube-apiserver exited; see $dir/logs/kube-apiserver.log" >&2; tail -20 "$dir/logs/kube-apiserver.log" >&2
    exit 1
  fi
  sleep 0.5
done
"$bindir/kubectl" --kubeconfig "$dir/kubeconfig" get --raw /readyz >/dev/null || {
  echo "up.sh: kube-apiserver not ready after 120s; see $dir/logs" >&2; exit 1; }

# kube-controller-manager with every default controller, as one identity in system:masters (no
# per-controller ServiceAccounts). It signs ServiceAccount tokens with the API server's key. No
# leader election: it is the only one, and restart-apiserver.sh would make it lose a lease and exit.
# The node lifecycle controller waits an hour, not 50 s, before it calls a silent node unreachable
# and taints it: kwok's default stages refresh a node's status only every 10 to 20 minutes and
# renew no Lease, and some tests' nodes have no kubelet on purpose (test_preemption.py's held
# nodes); nothing here is about nodes dying. It still taints cordoned nodes as in any cluster.
# Its client is not held to the default 20 requests/s: the ResourceClaim controller makes a claim and
# writes a pod's status for every pod with a claim template, and at 20/s it, not the scheduler, set
# the pace of a DRA benchmark (scheduler_perf runs that controller at 5000/s too).
"$here/mint-user.sh" "$dir" system:kube-controller-manager system:masters > "$dir/controller-manager.kubeconfig"
"$bindir/kube-controller-manager" --kubeconfig "$dir/controller-manager.kubeconfig" --secure-port 0 \
  --leader-elect=false --use-service-account-credentials=false --controllers '*' \
  --kube-api-qps 5000 --kube-api-burst 5000 \
  --service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
  --cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
  --service-cluster-ip-range 10.96.0.0/16 --feature-gates "$gates" \
  --flex-volume-plugin-dir "$dir/flexvolume" --node-monitor-grace-period 1h --node-startup-grace-period 1h \
  > "$dir/logs/kube-controller-manager.log" 2>&1 &
echo $! > "$dir/controller-manager.pid"
# Its controllers are running once the ServiceAccount controller has made default/default: tests
# that rely on a controller (a Deployment's pods, a Job's, a PV bind) may then start.
for _ in $(seq 1 240); do
  if "$bindir/kubectl" --kubeconfig "$dir/kubeconfig" get serviceaccount default -n default >/dev/null 2>&1; then break; fi
  if ! kill -0 "$(cat "$dir/controller-manager.pid")" 2>/dev/null; then
    echo "up.sh: kube-controller-manager exited; see $dir/logs/kube-controller-manager.log" >&2
    tail -20 "$dir/logs/kube-controller-manager.log" >&2
    exit 1
  fi
  sleep 0.5
done
"$bindir/kubectl" --kubeconfig "$dir/kubeconfig" get serviceaccount default -n default >/dev/null || {
  echo "up.sh: kube-controller-manager made no default ServiceAccount in 120s; see $dir/logs" >&2; exit 1; }

# kwok manages the nodes annotated kwok.x-k8s.io/node=fake with its default fast stages
# (nodes Ready, bound pods Running, deleted pods finalized at once).
"$bindir/kwok" --kubeconfig "$dir/kubeconfig" --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
  --cidr 10.0.0.1/16 --node-ip 10.0.0.1 --node-port 0 \
  > "$dir/logs/kwok.log" 2>&1 &
echo $! > "$dir/kwok.pid"
echo "$dir"
