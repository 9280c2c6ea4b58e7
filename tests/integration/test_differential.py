"""Differential test on the real control plane: koordpy's binds held against an independent checker.

A seeded random workload of lone pods (labels, node selectors and affinity, tolerations, host
ports, required pod affinity and anti-affinity on hostname and zone, namespaces and namespace
selectors, matchLabelKeys, DoNotSchedule topology spread with maxSkew, minDomains and both node
inclusion policies) goes onto KWOK nodes with zones, pools, taints, a cordon and uneven sizes.
``koordpy run`` schedules it until it is quiet; then

(a) koordpy's binds are replayed in the order koordpy made them, and each pod must pass every
    filter of ``checker`` (written from kube-scheduler's rules, not from koordpy's code) against
    the pods bound before it;
(b) no pod koordpy left pending may have a node that passes every filter in the final state;
(c) kube-scheduler (the control plane's own) schedules the same pods, and both bound counts are
    printed: information, not the pass rule.

The order of the binds. koordpy decides a cycle's pods one after another, each against the cluster
with the pods placed before it in the same cycle (the core's Bind decisions are appended in that
order), and logs one ``binding`` line per lone pod in that order, from the cycle's own coroutine,
before any bind is sent; the next cycle's snapshot holds the pods of the previous ones as assumed.
So the order of the ``binding`` lines in its log is exactly the order its decisions were made in,
within a cycle and across cycles. The API server's own clocks cannot give it: the binds of one
cycle are written concurrently (their PodScheduled times and Events land in any order, to the
second), and Scheduled Events are written after the binds. A ``binding`` line for a pod that did
not end up on that node, a pod logged twice, or a bound pod never logged fails the test: the log
would then not be the history of the cluster, and the replay would judge against a wrong state.

Why ``quiet`` means done: a pod that failed waits at most 10 s (koordpy's and kube-scheduler's
longest backoff) once something it may wait for changes; 15 s with no bind and a PodScheduled
condition on every pending pod means every pending pod was tried against the final state.

For kube-scheduler the pods koordpy placed are deleted first and the same pods created again in
the same namespaces (empty nodes, the same namespace names and labels, so namespace terms mean the
same for both); koordpy is stopped before, so it cannot see or touch them.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.integration.checker import key_of, order_free_violations, pending_with_room, replay
from tests.integration.kube import ControlPlane, Kube, Scheduler, fake, wait_for

SEED = 18
PODS = 300
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
NAMESPACES = {"diff-a": {"team": "a", "env": "prod"}, "diff-b": {"team": "b", "env": "dev"}}
APPS = ["web", "api", "db", "cache", "batch", "ml"]
QUIET = 15.0  # seconds without a bind: longer than the longest backoff (10 s)
SETTLE_DEADLINE = 120.0

Obj = dict[str, Any]


# -- the workload -------------------------------------------------------------------------------

def make_nodes(rng: random.Random) -> list[Obj]:
    """32 nodes: zones of 9, 8, 8 and 5 and two without a zone; pools; uneven cpu; taints; a cordon."""
    zones = ["z1"] * 9 + ["z2"] * 8 + ["z3"] * 8 + ["z4"] * 5 + [""] * 2
    nodes: list[Obj] = []
    for i, zone in enumerate(zones):
        name = f"dn{i:02d}"
        labels = {HOST: name, "pool": rng.choice(["general"] * 6 + ["gpu", "highmem"])}
        if zone:
            labels[ZONE] = zone
        if rng.random() < 0.5:
            labels["disk"] = "ssd"
        cpu = rng.choice(["4", "8", "8", "16"])
        alloc = {"cpu": cpu, "memory": "32Gi", "pods": "110"}
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                      "spec": {}, "status": {"allocatable": alloc}})
    for i in rng.sample(range(len(nodes)), 3):
        nodes[i]["status"]["allocatable"]["pods"] = "4"
    picks = rng.sample(range(len(nodes)), 8)
    for i in picks[:4]:
        nodes[i]["spec"]["taints"] = [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]
    nodes[picks[4]]["spec"]["taints"] = [{"key": "maintenance", "effect": "NoExecute"}]
    for i in picks[5:7]:
        nodes[i]["spec"]["taints"] = [{"key": "soft", "value": "yes", "effect": "PreferNoSchedule"}]
    nodes[picks[7]]["spec"]["unschedulable"] = True
    return fake(nodes)


def pod_term(rng: random.Random, app: str, key: str) -> Obj:
    term: Obj = {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}}
    r = rng.random()
    if r < 0.1:
        term["namespaceSelector"] = {}
    elif r < 0.2:
        term["namespaceSelector"] = {"matchLabels": {"team": rng.choice(["a", "b"])}}
    elif r < 0.25:
        term["namespaces"] = ["diff-a", "diff-b"]
    if rng.random() < 0.2:
        term["matchLabelKeys"] = ["version"]
    return term


def make_pod(rng: random.Random, i: int) -> Obj:
    app = rng.choices(APPS, weights=[5, 4, 2, 2, 3, 2])[0]
    labels = {"app": app, "tier": rng.choice(["front", "back"]), "version": rng.choice(["v1", "v2"])}
    container: Obj = {"name": "main", "image": "busybox", "resources": {"requests": {
        "cpu": rng.choices(["100m", "250m", "500m", "1", "1500m", "2", "3"], weights=[2, 3, 3, 4, 2, 2, 1])[0],
        "memory": rng.choice(["128Mi", "512Mi", "1Gi", "2Gi"])}}}
    spec: Obj = {"schedulerName": "koordpy", "containers": [container], "terminationGracePeriodSeconds": 0}
    if rng.random() < 0.1:
        port: Obj = rng.choice([{"containerPort": 8080, "hostPort": 8080},
                                {"containerPort": 9100, "hostPort": 9100, "protocol": "TCP"},
                                {"containerPort": 53, "hostPort": 53, "protocol": "UDP"},
                                {"containerPort": 8080, "hostPort": 8080, "hostIP": "10.0.0.1"}])
        container["ports"] = [port]
    if rng.random() < 0.12:
        spec["nodeSelector"] = rng.choice([{"pool": "general"}, {"pool": "gpu"}, {"pool": "highmem"},
                                           {"disk": "ssd"}])
    if rng.random() < 0.1:
        zones = ["z1", "z2", "z3", "z4"]
        expr = rng.choice([{"key": ZONE, "operator": "In", "values": rng.sample(zones, 2)},
                           {"key": ZONE, "operator": "NotIn", "values": [rng.choice(zones)]},
                           {"key": ZONE, "operator": "Exists"}])
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr]}]}}}
    if rng.random() < 0.2:
        spec["tolerations"] = [rng.choice([
            {"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"},
            {"key": "maintenance", "operator": "Exists"},
            {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
            {"operator": "Exists"}])]
    affinity = spec.setdefault("affinity", {})
    anti: list[Obj] = []
    if rng.random() < 0.2:  # one per node among its own app (a replica set's usual rule)
        anti.append(pod_term(rng, app, HOST))
    if rng.random() < 0.06:
        anti.append(pod_term(rng, rng.choice(APPS), ZONE))
    if anti:
        affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    if rng.random() < 0.12:
        target = app if rng.random() < 0.4 else rng.choice(APPS)  # sometimes a self-affine set
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
            pod_term(rng, target, rng.choice([ZONE, ZONE, HOST]))]}
    if not affinity:
        del spec["affinity"]
    spreads: list[Obj] = []
    if rng.random() < 0.25:
        c: Obj = {"maxSkew": rng.choice([1, 1, 2]), "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                  "labelSelector": {"matchLabels": {"app": app}}}
        if rng.random() < 0.3:
            c["minDomains"] = rng.choice([3, 5])
        if rng.random() < 0.2:
            c["nodeAffinityPolicy"] = "Ignore"
        if rng.random() < 0.3:
            c["nodeTaintsPolicy"] = "Honor"
        if rng.random() < 0.2:
            c["matchLabelKeys"] = ["version"]
        spreads.append(c)
    if rng.random() < 0.05:
        spreads.append({"maxSkew": 2, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": app}}})
    if spreads:
        spec["topologySpreadConstraints"] = spreads
    ns = "diff-b" if rng.random() < 0.2 else "diff-a"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"p{i:03d}-{app}", "namespace": ns, "labels": labels}, "spec": spec}


def workload(seed: int = SEED, count: int = PODS) -> tuple[list[Obj], list[Obj]]:
    rng = random.Random(seed)
    return make_nodes(rng), [make_pod(rng, i) for i in range(count)]


# -- reading the cluster ------------------------------------------------------------------------

def all_pods(kube: Kube) -> dict[str, Obj]:
    out: dict[str, Obj] = {}
    for ns in NAMESPACES:
        for p in kube.get("pods", namespace=ns)["items"]:
            out[key_of(p)] = p
    return out


def scheduled_condition(pod: Obj) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled":
            return dict(c)
    return None


def settle(kube: Kube, who: str, expected: int, deadline: float = SETTLE_DEADLINE) -> tuple[dict[str, Obj], float]:
    """``settle_pods`` on the pods of NAMESPACES, all ``expected`` of them."""
    return settle_pods(lambda: all_pods(kube), who, lambda pods: len(pods) == expected,
                       lambda pods: f"{len(pods)}/{expected} pods seen", deadline, QUIET)


def settle_pods(listed: Callable[[], dict[str, Obj]], who: str, complete: Callable[[dict[str, Obj]], bool],
                seen: Callable[[dict[str, Obj]], str], deadline: float, quiet: float) -> tuple[dict[str, Obj], float]:
    """Waits until the pods ``listed`` (by key) are ``complete``, no bind has happened for ``quiet``
    seconds and every pending pod carries a PodScheduled=False condition (it was tried); returns the
    pods then, and how long after the call the last bind was seen. Past ``deadline`` seconds, an
    AssertionError saying what ``seen`` says of the pods, the binds and the pods not tried."""
    start = time.monotonic()
    last: dict[str, str] = {}
    changed = start
    while True:
        pods = listed()
        bound = {k: p["spec"]["nodeName"] for k, p in pods.items() if p["spec"].get("nodeName")}
        now = time.monotonic()
        if bound != last:
            last, changed = bound, now
        untried = sorted(k for k, p in pods.items() if not p["spec"].get("nodeName")
                         and (scheduled_condition(p) or {}).get("status") != "False")
        if complete(pods) and not untried and now - changed >= quiet:
            return pods, changed - start
        if now - start > deadline:
            raise AssertionError(
                f"{who} did not settle within {deadline:g}s: {seen(pods)}, {len(bound)} bound, "
                f"last bind {now - changed:.0f}s ago, {len(untried)} pending pods without PodScheduled=False "
                f"(first: {untried[:5]})")
        time.sleep(1.0)


def bind_order(log: Path) -> list[tuple[str, str]]:
    """(pod, node) of every ``binding`` line koordpy logged, in the order it logged them."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") == "binding":
            assert "pod" in entry and "node" in entry, f"a binding line for more than one pod: {line}"
            out.append((entry["pod"], entry["node"]))
    return out


def namespace_labels(kube: Kube) -> dict[str, dict[str, str]]:
    return {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {})
            for n in kube.get("namespaces", namespace=None)["items"]}


# -- the test -----------------------------------------------------------------------------------

def test_koordpy_binds_only_where_kube_schedulers_filters_allow(kube: Kube, controlplane: ControlPlane,
                                                                tmp_path: Path) -> None:
    t0 = time.monotonic()
    nodes, pods = workload()
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
                for ns, labels in NAMESPACES.items()])
    kube.apply(nodes)
    wait_for(lambda: len(kube.get("nodes", namespace=None)["items"]) == len(nodes), "the nodes")

    log = tmp_path / "koordpy.log"
    koordpy = Scheduler(controlplane, log, args=("--log-format", "json"))
    koordpy.start()
    try:
        kube.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(pods))
        final, k_last = settle(kube, "koordpy", len(pods))
        assert koordpy.alive(), f"koordpy run exited:\n{log.read_text(errors='replace')[-4000:]}"
    finally:
        koordpy.kill()
    text = log.read_text(errors="replace")
    assert "Traceback" not in text, text[-4000:]

    live_nodes = kube.get("nodes", namespace=None)["items"]
    nss = namespace_labels(kube)
    bound = {k: p for k, p in final.items() if p["spec"].get("nodeName")}
    pending = [p for p in final.values() if not p["spec"].get("nodeName")]

    # The log must be the history of the binds (see the module's docstring).
    order = bind_order(log)
    logged = [k for k, _ in order]
    history = [f"{k} logged twice" for k in sorted({k for k in logged if logged.count(k) > 1})]
    history += [f"{k} logged to {n} but bound to {bound[k]['spec']['nodeName'] if k in bound else 'nothing'}"
                for k, n in order if k not in bound or bound[k]["spec"]["nodeName"] != n]
    history += [f"{k} bound to {p['spec']['nodeName']} but never logged" for k, p in bound.items() if k not in logged]
    assert not history, "koordpy's binding lines are not the cluster's history:\n" + "\n".join(history[:20])

    # (a) every bind passed every filter at its moment.
    broken = replay(live_nodes, nss, bound, logged)
    # (b) nothing left pending that had room in the end.
    roomy = pending_with_room(live_nodes, nss, bound.values(), pending)
    said = {key_of(p): (scheduled_condition(p) or {}).get("message", "") for p in pending}
    problems = [f"(a) {b}" for b in broken]
    problems += [f"(b) {k} left pending although {', '.join(n[:5])} pass every filter; koordpy said: {said[k]}"
                 for k, n in sorted(roomy.items())]
    print(f"\nkoordpy: {len(bound)}/{len(pods)} bound ({len(order)} binds replayed), {len(pending)} pending, "
          f"last bind {k_last:.1f}s after the pods were created; {len(broken)} binds broke a rule, "
          f"{len(roomy)} pending pods had room")
    assert not problems, f"{len(problems)} violations of kube-scheduler's filters:\n" + "\n".join(problems[:40])

    # (c) kube-scheduler on the same pods, for the record.
    ks_bound, ks_last, ks_roomy = run_kube_scheduler(kube, controlplane, pods, live_nodes, nss, tmp_path)
    both = set(bound) & set(ks_bound)
    # The checker judged by kube-scheduler's own result, as a check of the checker: its bind order is
    # unknown, so only the rules no later bind can mend (ORDER_FREE) are audited; and its pending pods.
    disputed = order_free_violations(live_nodes, nss, list(ks_bound.values()))
    for line in disputed[:10] + [f"{k} pending, room on {n[:5]}" for k, n in sorted(ks_roomy.items())][:10]:
        print(f"  the checker disagrees with kube-scheduler: {line}")
    print(f"kube-scheduler: {len(ks_bound)}/{len(pods)} bound, last bind {ks_last:.1f}s after the pods were created "
          f"(the checker: {len(disputed)} of its binds break an order-free rule, {len(ks_roomy)} of its pending "
          f"pods had room); koordpy {len(bound)}/{len(pods)}; "
          f"bound by both {len(both)}, only koordpy {len(set(bound) - both)}, only kube-scheduler "
          f"{len(set(ks_bound) - both)}; "
          f"test took {time.monotonic() - t0:.0f}s")


def run_kube_scheduler(kube: Kube, controlplane: ControlPlane, pods: list[Obj], nodes: list[Obj],
                       nss: dict[str, dict[str, str]], tmp_path: Path
                       ) -> tuple[dict[str, Obj], float, dict[str, list[str]]]:
    for ns in NAMESPACES:
        kube.kubectl("delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force", "--wait=false")
    wait_for(lambda: not all_pods(kube), "koordpy's pods deleted", timeout=60)
    cfg = tmp_path / "kube-scheduler.yaml"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": controlplane.kubeconfig, "qps": 1000, "burst": 1000},
        "leaderElection": {"leaderElect": False}}))
    log = tmp_path / "kube-scheduler.log"
    with open(log, "wb") as out:
        # The control plane's feature gates, as a real cluster's kube-scheduler would have them.
        gates = ["--feature-gates", controlplane.env["FEATURE_GATES"]] if controlplane.env.get("FEATURE_GATES") else []
        proc = subprocess.Popen([controlplane.env["KUBE_SCHEDULER"], "--config", str(cfg), "--secure-port", "0",
                                 *gates], stdout=out, stderr=subprocess.STDOUT)
    try:
        theirs = [{**p, "spec": {**p["spec"], "schedulerName": "default-scheduler"}} for p in pods]
        kube.kubectl("create", "-f", "-", stdin=yaml.safe_dump_all(theirs))
        try:
            final, last = settle(kube, "kube-scheduler", len(pods))
        except AssertionError as exc:  # information only: report what there is
            print(f"kube-scheduler: {exc}\n{log.read_text(errors='replace')[-2000:]}")
            final, last = all_pods(kube), float("nan")
    finally:
        proc.kill()
        proc.wait(timeout=30)
    bound = {k: p for k, p in final.items() if p["spec"].get("nodeName")}
    pending = [p for p in final.values() if not p["spec"].get("nodeName")]
    return bound, last, pending_with_room(nodes, nss, bound.values(), pending)
