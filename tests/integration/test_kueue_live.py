"""Issue 34, live: Kueue v0.19.2 and JobSet v0.12.0 in front of ``koordpy run`` on the local control
plane (the ``frontends`` fixture starts them with their real webhooks; ``tests/integration/frontends.py``).

A Job's pods are one gang here by the way Kubernetes v1.37 itself says so: the Job states
``spec.scheduling.schedulingPolicy.gang`` and, with ``WorkloadWithJob`` on, the Job controller makes a
``scheduling.k8s.io`` Workload and PodGroup for it and names the PodGroup in each pod's
``spec.schedulingGroup`` (koordpy's "upstream" dialect). Kueue creates the Job suspended; the Job
controller makes the two objects at its first look at the Job all the same (a Job that has not
started), and Kueue keeps ``spec.scheduling`` although its own Job type (k8s.io/api v0.36) has no
such field.

The nodes have no kubelet (``held``: kwok would complete a Job's pods at once, and Kueue would then
admit the next Job): a bound pod stays bound, so what holds the quota is plain to see.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.builders import node
from tests.integration.frontends import KUEUE_OBJECTS, NAMESPACE_LABEL, Frontends
from tests.integration.kube import ROOT, Kube, Scheduler, check_invariants, settle, wait_for, when
from tests.integration.test_preemption import CLASSES, held, nominations

GUIDE = ROOT / "examples" / "kueue"  # docs/behind-kueue.md's files
# Kueue's Configuration for this module (the fixture sets it over its own): the guide's
# (``examples/kueue/kueue-config.yaml``: fair sharing, and waitForPodsReady with a 10-minute timeout,
# which no test here reaches).
KUEUE_CONFIG = {k: v for k, v in yaml.safe_load((GUIDE / "kueue-config.yaml").read_text()).items()
                if k not in ("apiVersion", "kind")}
NS = "kueue-live"
GPU = "nvidia.com/gpu"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
KUEUE_WORKLOADS = "workloads.kueue.x-k8s.io"
POD_GROUPS = "podgroups.scheduling.k8s.io"
TIMEOUT = 60.0
Obj = dict[str, Any]


def queues(gpus: int) -> list[Obj]:
    """One ResourceFlavor, one ClusterQueue with ``gpus`` GPUs (CPU and memory plenty), two LocalQueues."""
    quota = [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"},
             {"name": GPU, "nominalQuota": str(gpus)}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {NAMESPACE_LABEL: "true"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpus"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "shared"},
         "spec": {"cohortName": "pool", "namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": "gpus", "resources": quota}]}]}},
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": q, "namespace": NS},
           "spec": {"clusterQueue": "shared"}} for q in ("team-a", "team-b")),
    ]


def gang_job(name: str, queue: str, pods: int, gpus: int) -> Obj:
    """A Job of ``pods`` pods of ``gpus`` GPUs each, all or nothing, in ``queue``, scheduled by koordpy."""
    resources = {"requests": {"cpu": "1", "memory": "1Gi", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "labels": {QUEUE_LABEL: queue}},
            "spec": {"parallelism": pods, "completions": pods,
                     "scheduling": {"schedulingPolicy": {"gang": {"minCount": pods}}},
                     "template": {"spec": {"schedulerName": "koordpy", "restartPolicy": "Never",
                                           "terminationGracePeriodSeconds": 0, "containers": [
                                               {"name": "main", "image": "busybox", "resources": resources}]}}}}


def kueue_workloads(kube: Kube) -> dict[str, Obj]:
    """Kueue's Workloads by the name of the Job each belongs to."""
    out = {}
    for w in kube.get(KUEUE_WORKLOADS, namespace=NS)["items"]:
        [owner] = [r for r in w["metadata"]["ownerReferences"] if r["kind"] == "Job"]
        out[owner["name"]] = w
    return out


def condition(obj: Obj, kind: str) -> Obj:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind), {})


def admitted(kube: Kube) -> set[str]:
    """The Jobs there whose Workload Kueue admitted: a deleted Job's Workload may outlive it a moment
    with its Admitted condition (Kueue's finalizer), its quota released already."""
    jobs = {j["metadata"]["name"] for j in kube.get("jobs.batch", namespace=NS)["items"]
            if not j["metadata"].get("deletionTimestamp")}
    return {job for job, w in kueue_workloads(kube).items()
            if condition(w, "Admitted").get("status") == "True" and not w["metadata"].get("deletionTimestamp")
            and job in jobs}


def job_pods(kube: Kube, job: str, namespace: str = NS) -> dict[str, Obj]:
    return {n: p for n, p in kube.pods(namespace).items() if p["metadata"].get("labels", {}).get("job-name") == job}


def pod_states(kube: Kube, namespace: str = NS) -> dict[str, str]:
    """What each pod of the namespace shows: its node, or why it waits; whether it is being deleted."""
    return {n: (p["spec"].get("nodeName") or condition(p, "PodScheduled").get("message", "pending"))
            + (" (deleting)" if p["metadata"].get("deletionTimestamp") else "")
            for n, p in kube.pods(namespace).items()}


def bound_pods(kube: Kube, job: str, pods: int, namespace: str = NS) -> dict[str, Obj]:
    """The Job's ``pods`` pods once all are bound; a timeout names every pod's state."""
    def members() -> dict[str, Obj]:
        return job_pods(kube, job, namespace)
    try:
        return wait_for(lambda: when(len(members()) == pods and all(p["spec"].get("nodeName")
                                                                   for p in members().values()), members()),
                        f"all {pods} pods of {job} bound", timeout=TIMEOUT)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; pods now: {json.dumps(pod_states(kube, namespace), indent=1)}") from None


def bindings(log: Path) -> list[Obj]:
    """koordpy's binding decisions, as its log states them (one line per gang placed)."""
    lines = (json.loads(line) for line in log.read_text(errors="replace").splitlines() if line.startswith("{"))
    return [e for e in lines if e.get("event") == "binding"]


def assert_bound_as_one_gang(kube: Kube, scheduler: Scheduler, job: str, pods: int) -> None:
    """All ``pods`` of the Job bound, each naming the Job's gang PodGroup; koordpy placed them in one
    decision for that PodGroup, and the PodGroup says it was scheduled."""
    members = bound_pods(kube, job, pods)
    groups = {p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in members.values()}
    assert len(groups) == 1 and None not in groups, groups
    [group] = groups
    raw = kube.get(POD_GROUPS, group, NS)
    assert raw["spec"]["schedulingPolicy"] == {"gang": {"minCount": pods}}, raw["spec"]
    assert [r["name"] for r in raw["metadata"]["ownerReferences"] if r["kind"] == "Job"] == [job]
    decided = [b for b in bindings(scheduler.log) if b.get("job") == f"{NS}/{group}"]
    assert [b["pods"] for b in decided] == [pods], decided
    scheduled = wait_for(lambda: when(condition(kube.get(POD_GROUPS, group, NS), "PodGroupInitiallyScheduled")
                                      .get("status") == "True", True), f"{group} marked scheduled")
    assert scheduled


def cleanup(kube: Kube) -> None:
    """The test's Jobs and JobSets, then Kueue's objects, while Kueue runs (its finalizers)."""
    kube.kubectl("delete", "jobsets.jobset.x-k8s.io,jobs.batch", "--all", "-n", NS, "--cascade=foreground",
                 "--timeout=60s", check=False)
    kube.kubectl("delete", KUEUE_OBJECTS, "--all", "--all-namespaces", "--timeout=60s", check=False)


def test_jobs_are_admitted_up_to_the_quota_and_each_admitted_job_is_bound_as_one_gang(
        frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """A ClusterQueue of 8 GPUs behind two LocalQueues; four Jobs of 2 pods x 2 GPUs (4 GPUs each), two
    per queue, on four nodes of 4 GPUs (16 GPUs: the quota, not the nodes, is what runs out). Kueue
    admits two Jobs and leaves two suspended with its own reason; koordpy binds each admitted Job's
    pods whole. Deleting an admitted Job frees its quota: Kueue admits a waiting one and koordpy binds
    it whole too."""
    try:
        kube.apply(queues(8), held([node(f"g{i}", cpu="16", memory="64Gi", extra={GPU: "4"}) for i in range(4)]))
        wait_for(lambda: condition(kube.get("clusterqueues.kueue.x-k8s.io", "shared", None), "Active")
                 .get("status") == "True", "the ClusterQueue active")
        # Stored as v1beta2, read as v1beta1: only Kueue's conversion webhook turns cohortName into cohort.
        old = kube.get("clusterqueues.v1beta1.kueue.x-k8s.io", "shared", None)
        assert old["spec"].get("cohort") == "pool", old["spec"]
        jobs = {"a1": "team-a", "b1": "team-b", "a2": "team-a", "b2": "team-b"}
        for name, queue in jobs.items():
            kube.apply(gang_job(name, queue, pods=2, gpus=2))

        def counts() -> tuple[int, int] | None:
            status = kube.get("clusterqueues.kueue.x-k8s.io", "shared", None).get("status") or {}
            pair = (status.get("admittedWorkloads"), status.get("pendingWorkloads"))
            return when(pair == (2, 2) and len(kueue_workloads(kube)) == 4, (2, 2))

        # What `kubectl get clusterqueue` shows: two admitted, two pending; and it stays so.
        wait_for(counts, "the ClusterQueue with two Jobs admitted and two pending", timeout=TIMEOUT)
        assert len(settle(lambda: admitted(kube), 3.0)) == 2
        running = admitted(kube)
        waiting = set(jobs) - running
        # Kueue states its reason on the Workload it tried: the quota. Under BestEffortFIFO it does not
        # try another Workload asking the same until something changes, so that one may carry none yet.
        reasons = {j: condition(kueue_workloads(kube)[j], "QuotaReserved") for j in waiting}
        told = {j for j, r in reasons.items() if r}
        assert told, reasons
        for job in sorted(told):
            assert reasons[job]["status"] == "False" and reasons[job]["reason"] == "Pending", reasons[job]
            assert reasons[job]["message"].startswith("couldn't assign flavors to pod set main: insufficient unused "
                                                      f"quota for {GPU} in flavor gpus"), reasons[job]
        for job in sorted(waiting):
            assert kube.get("jobs.batch", job, NS)["spec"]["suspend"] is True
            assert job_pods(kube, job) == {}
        for job in sorted(running):
            assert kube.get("jobs.batch", job, NS)["spec"]["suspend"] is False
            assert_bound_as_one_gang(kube, scheduler, job, pods=2)

        gone = sorted(running)[0]
        kube.kubectl("delete", "jobs.batch", gone, "-n", NS, "--cascade=foreground", "--timeout=60s")
        [nxt] = wait_for(lambda: when(len(admitted(kube) & waiting) == 1, admitted(kube) & waiting),
                         "a waiting Job admitted once an admitted one is gone", timeout=TIMEOUT)
        assert_bound_as_one_gang(kube, scheduler, nxt, pods=2)
        # Still no more than the quota: the other waiting Job waits on.
        assert settle(lambda: admitted(kube), 3.0) == (running - {gone}) | {nxt}
        [still] = waiting - {nxt}
        assert job_pods(kube, still) == {}
    finally:
        cleanup(kube)


def test_a_jobset_of_two_replicated_jobs_is_bound(frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """JobSet smoke case: JobSet's controller makes two Jobs of 2 pods each (its webhooks on the way),
    and koordpy binds all four pods. A child Job has a controller (the JobSet), so the Job controller
    makes it no PodGroup; the JobSet dialect makes the four pods one gang (issue 34, item 3: asserted,
    with the exclusive placement and a restart, in test_jobset_live.py)."""
    try:
        kube.apply(queues(8)[0], held([node("n0", cpu="8")]))
        template = {"spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
            "schedulerName": "koordpy", "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}}
        kube.apply({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                    "metadata": {"name": "train", "namespace": NS},
                    "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2, "template": template}]}})

        def all_bound() -> dict[str, str | None] | None:
            pods = {n: p for n, p in kube.pods(NS).items()
                    if p["metadata"].get("labels", {}).get("jobset.sigs.k8s.io/jobset-name") == "train"}
            where = {n: p["spec"].get("nodeName") for n, p in pods.items()}
            return when(len(where) == 4 and all(where.values()), where)

        bound = wait_for(all_bound, "the JobSet's 4 pods bound", timeout=TIMEOUT)
        assert set(bound.values()) == {"n0"}
        jobs = {j["metadata"]["name"] for j in kube.get("jobs.batch", namespace=NS)["items"]}
        assert jobs == {"train-workers-0", "train-workers-1"}
    finally:
        cleanup(kube)


# -- Kueue's topology-aware scheduling (TAS) ---------------------------------------------------------

BLOCK, RACK = "example.com/block", "example.com/rack"
POOL = "koordpy-test/pool"  # the TAS ResourceFlavor's node label
TOPOLOGIES = "topologies.kueue.x-k8s.io"


def tas_queues(gpus: int) -> list[Obj]:
    """A Kueue Topology of blocks and racks (v1beta2, the version Kueue v0.19.2 stores), a TAS
    ResourceFlavor over the nodes labelled ``POOL=tas``, a ClusterQueue of ``gpus`` GPUs on it and one
    LocalQueue."""
    quota = [{"name": "cpu", "nominalQuota": "256"}, {"name": "memory", "nominalQuota": "1Ti"},
             {"name": GPU, "nominalQuota": str(gpus)}]
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {NAMESPACE_LABEL: "true"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "racks"},
         "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "tas"},
         "spec": {"nodeLabels": {POOL: "tas"}, "topologyName": "racks"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "tas"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [{
             "coveredResources": ["cpu", "memory", GPU], "flavors": [{"name": "tas", "resources": quota}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "tas", "namespace": NS},
         "spec": {"clusterQueue": "tas"}},
    ]


def rack_nodes(blocks: int = 2, racks: int = 2, per_rack: int = 2, gpus: int = 4) -> list[Obj]:
    """``t-b<B>-r<R>-<N>``: Ready nodes with no kubelet (a bound pod stays bound, and Kueue's TAS counts
    only Ready nodes), labelled with their block and rack (rack values unique across blocks)."""
    return [node(f"t-b{b}-r{r}-{n}", cpu="32", memory="128Gi", extra={GPU: str(gpus)},
                 labels={POOL: "tas", BLOCK: f"b{b}", RACK: f"b{b}-r{r}"})
            for b in range(blocks) for r in range(racks) for n in range(per_rack)]


def rack_of(name: str) -> str:
    return name.rsplit("-", 1)[0].removeprefix("t-")


def outsider(name: str, on: str, gpus: int, labels: dict[str, str] | None = None) -> Obj:
    """A pod Kueue did not admit, already on node ``on`` (as if another scheduler had put it there):
    Kueue's TAS counts it against the node (its non-TAS usage) and koordpy does too."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS, "labels": labels or {}},
            "spec": {"nodeName": on, "terminationGracePeriodSeconds": 0, "containers": [{
                "name": "main", "image": "busybox",
                "resources": {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}}


def tas_job(name: str, pods: int, gpus: int, level: str, how: str = "required",
            spec: Obj | None = None) -> Obj:
    """``gang_job`` in the TAS queue, asking Kueue for a ``how`` (required / preferred) topology at
    ``level`` on its pod template, as Kueue's users write it."""
    job = gang_job(name, "tas", pods, gpus)
    template = job["spec"]["template"]
    template["metadata"] = {"annotations": {f"kueue.x-k8s.io/podset-{how}-topology": level}}
    template["spec"].update(spec or {})
    return job


def assert_inside_assignment(kube: Kube, job: str, pods: int) -> dict[str, str]:
    """Every pod of the Job bound on a node its ``nodeSelector`` matches, the selector naming the rack
    Kueue's topology assignment gave it (the ungater writes the assigned domain's level labels there
    when it removes the ``kueue.x-k8s.io/topology`` gate); returns pod -> node."""
    members = bound_pods(kube, job, pods)
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.get("nodes", namespace=None)["items"]}
    where = {}
    for name, p in members.items():
        selector = p["spec"].get("nodeSelector") or {}
        assert RACK in selector and BLOCK in selector, (name, selector)  # Kueue's assignment, on the pod
        assert not any(g.get("name") == "kueue.x-k8s.io/topology" for g in p["spec"].get("schedulingGates") or [])
        labels = nodes[p["spec"]["nodeName"]]
        assert all(labels.get(k) == v for k, v in selector.items()), (name, selector, p["spec"]["nodeName"])
        where[name] = p["spec"]["nodeName"]
    levels = [psa.get("topologyAssignment", {}).get("levels") for psa in
              kueue_workloads(kube)[job]["status"]["admission"]["podSetAssignments"]]
    assert levels == [[BLOCK, RACK]], levels
    return where


def test_kueue_topology_assignments_are_kept_required_and_preferred(
        frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """Kueue's TAS over 2 blocks x 2 racks x 2 nodes of 4 GPUs. Rack b0-r0 has 2 GPUs taken by a pod
    Kueue did not admit. A Job requiring a rack for 4 pods x 2 GPUs fits only a free rack: Kueue
    assigns one, and koordpy binds the 4 pods whole inside it. A Job preferring a rack for 6 pods x 2
    GPUs fits no rack: Kueue assigns racks of one block, pod counts per rack; koordpy binds each pod
    inside its own rack, so all inside that block."""
    try:
        # The outsider first, the queues after: Kueue's TAS cache counts it (no status shows when) before
        # any Job asks, with the queues' start and a settle on top.
        kube.apply(tas_queues(64)[0], rack_nodes(), outsider("other", "t-b0-r0-0", gpus=2))
        kube.apply(tas_queues(64)[1:])
        wait_for(lambda: condition(kube.get("clusterqueues.kueue.x-k8s.io", "tas", None), "Active")
                 .get("status") == "True", "the TAS ClusterQueue active")
        settle(lambda: None, 3.0)

        kube.apply(tas_job("rack", pods=4, gpus=2, level=RACK))
        placed = assert_inside_assignment(kube, "rack", 4)
        assert len({rack_of(n) for n in placed.values()}) == 1, placed
        assert rack_of(next(iter(placed.values()))) != "b0-r0", placed  # 6 GPUs free there, not 8
        assert_bound_as_one_gang(kube, scheduler, "rack", pods=4)

        kube.apply(tas_job("spread", pods=6, gpus=2, level=RACK, how="preferred"))
        spread = assert_inside_assignment(kube, "spread", 6)
        assert len({rack_of(n) for n in spread.values()}) > 1, spread  # 12 GPUs: no rack has them
        assert len({rack_of(n).split("-")[0] for n in spread.values()}) == 1, spread  # one block has
        assert_bound_as_one_gang(kube, scheduler, "spread", pods=6)
    finally:
        cleanup(kube)


def test_a_kueue_assignment_koordpy_cannot_meet_is_said_and_holds_nothing(
        frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """Kueue's TAS does not weigh inter-pod anti-affinity; koordpy does. Every rack but b1-r1 is full
    (pods Kueue did not admit); b1-r1's first node runs a pod the Job's members repel. Kueue assigns
    the Job (4 pods x 2 GPUs, a rack required) to b1-r1, the only rack with 8 GPUs free; koordpy
    cannot place it there (only the second node is left: 4 GPUs of 8), binds none of it, and says so
    naming Kueue's assignment, as pods that wait for Kueue to recover the workload."""
    try:
        full = [outsider(f"full-{n}", n, gpus=4) for b in range(2) for r in range(2) for n in
                (f"t-b{b}-r{r}-0", f"t-b{b}-r{r}-1") if (b, r) != (1, 1)]
        kube.apply(tas_queues(64)[0], rack_nodes(), *full, outsider("repelled", "t-b1-r1-0", gpus=0,
                                                                      labels={"app": "repelled"}))
        kube.apply(tas_queues(64)[1:])
        wait_for(lambda: condition(kube.get("clusterqueues.kueue.x-k8s.io", "tas", None), "Active")
                 .get("status") == "True", "the TAS ClusterQueue active")
        settle(lambda: None, 3.0)  # Kueue's TAS cache counts the outsiders (see above)
        anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "repelled"}}, "topologyKey": "kubernetes.io/hostname"}]}}}
        kube.apply(tas_job("repels", pods=4, gpus=2, level=RACK, spec=anti))

        def told() -> dict[str, str] | None:
            pods = job_pods(kube, "repels")
            said = {n: condition(p, "PodScheduled").get("message", "") for n, p in pods.items()}
            return when(len(pods) == 4 and all("Kueue" in m for m in said.values()), said)

        said = wait_for(told, "the Job's 4 pods told why Kueue's assignment cannot take it", timeout=TIMEOUT)
        assert condition(kueue_workloads(kube)["repels"], "Admitted").get("status") == "True"
        for message in said.values():
            assert f"{RACK}=b1-r1" in message, message  # the domain Kueue assigned, by its label
            assert "Kueue's topology assignment" in message and "cannot take the job now" in message, message
        assert all(not p["spec"].get("nodeName") for p in settle(lambda: job_pods(kube, "repels"), 3.0).values())
    finally:
        cleanup(kube)


# -- fair sharing, and Kueue's preemption beside koordpy's nominations --------------------------------


def cohort_queues() -> list[Obj]:
    """Two ClusterQueues of 8 GPUs in one cohort, each with a LocalQueue of its name: team-a may borrow
    team-b's unused quota; team-b reclaims it by Kueue's preemption (fair sharing decides whom)."""
    def cq(name: str) -> Obj:
        quota = [{"name": "cpu", "nominalQuota": "64"}, {"name": "memory", "nominalQuota": "256Gi"},
                 {"name": GPU, "nominalQuota": "8"}]
        return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": name},
                "spec": {"cohortName": "pool", "namespaceSelector": {},
                         "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "LowerPriority"},
                         "resourceGroups": [{"coveredResources": ["cpu", "memory", GPU],
                                             "flavors": [{"name": "gpus", "resources": quota}]}]}}
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {NAMESPACE_LABEL: "true"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "gpus"}},
        cq("team-a"), cq("team-b"),
        *({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": q, "namespace": NS},
           "spec": {"clusterQueue": q}} for q in ("team-a", "team-b")),
    ]


def gpu_pod(name: str, gpus: int, priority_class: str, on: str | None = None) -> Obj:
    """A pod Kueue does not manage (no queue), of ``gpus`` GPUs, already on ``on`` or for koordpy."""
    spec: Obj = {"priorityClassName": priority_class, "terminationGracePeriodSeconds": 30, "containers": [{
        "name": "main", "image": "busybox",
        "resources": {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}}}]}
    spec.update({"nodeName": on} if on else {"schedulerName": "koordpy"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def terminating(kube: Kube) -> dict[str, str]:
    """Pods being deleted that still hold their node (no kubelet here finishes a deletion)."""
    return {n: p["spec"]["nodeName"] for n, p in kube.pods(NS).items()
            if p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName")}


def force_gone(kube: Kube, *names: str) -> None:
    """Finishes the deletion of pods a kubelet would have stopped."""
    kube.kubectl("delete", "pod", *names, "-n", NS, "--grace-period=0", "--force", "--wait=true", check=False)


def test_kueue_reclaims_quota_while_koordpy_holds_a_nomination_and_nothing_is_double_booked(
        frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """Five nodes of 4 GPUs, no kubelet (a deleted pod stays terminating until the test finishes it).
    Team A runs two Jobs of 2 pods x 4 GPUs (8 of its own quota, 8 borrowed from team B) on g0-g3; g4
    runs a low-priority pod Kueue does not manage. An urgent pod (not Kueue's) preempts it: koordpy
    nominates g4 for it while the victim terminates. Team B then submits a Job of 2 x 4 GPUs: Kueue's
    fair sharing reclaims B's quota by evicting one of A's Jobs, whose pods start terminating, and
    admits B's Job at once. B's gang binds nothing while A's pods still hold their nodes and never
    takes g4's nominated room; once A's evicted pods are gone it binds whole where they were; once the
    low pod is gone the urgent one binds on g4. No nomination outlives its pod's binding, no node is
    over its GPUs, no gang is partial (the ``kube`` fixture checks the last two after the test too)."""
    try:
        gpus = {GPU: "4"}
        kube.apply(CLASSES, cohort_queues(), held([node(f"g{i}", cpu="16", memory="64Gi", extra=gpus)
                                                   for i in range(5)]))
        def active(name: str) -> bool:
            return condition(kube.get("clusterqueues.kueue.x-k8s.io", name, None), "Active").get("status") == "True"

        wait_for(lambda: active("team-a") and active("team-b"), "both ClusterQueues active")
        kube.apply(gpu_pod("low", 4, "low", on="g4"))
        for job in ("a1", "a2"):
            spec = gang_job(job, "team-a", pods=2, gpus=4)
            spec["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
            kube.apply(spec)
        for job in ("a1", "a2"):
            assert_bound_as_one_gang(kube, scheduler, job, pods=2)
        a_nodes = {p["spec"]["nodeName"] for j in ("a1", "a2") for p in job_pods(kube, j).values()}
        assert a_nodes == {"g0", "g1", "g2", "g3"}, a_nodes

        kube.apply(gpu_pod("urgent", 4, "high"))
        wait_for(lambda: when(nominations(kube, NS).get("urgent") == "g4" and "low" in terminating(kube), True),
                 "urgent nominated to g4 while low terminates", timeout=TIMEOUT)

        spec = gang_job("b1", "team-b", pods=2, gpus=4)
        spec["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = 30
        kube.apply(spec)
        evicted = wait_for(lambda: when(any(condition(w, "Evicted").get("status") == "True"
                                            for w in kueue_workloads(kube).values()),
                                        [j for j, w in kueue_workloads(kube).items()
                                         if condition(w, "Evicted").get("status") == "True"]),
                           "Kueue evicting one of team A's Jobs", timeout=TIMEOUT)
        assert len(evicted) == 1 and evicted[0] in ("a1", "a2"), evicted
        [gone] = evicted
        freed = {p["spec"]["nodeName"] for p in job_pods(kube, gone).values()}
        wait_for(lambda: when(len(job_pods(kube, "b1")) == 2, True), "team B's Job admitted and its pods made",
                 timeout=TIMEOUT)
        # While the evicted pods terminate on their nodes and low on g4, B's gang binds nothing: koordpy
        # has looked at it (each pod says why it waits), and a few seconds on it still waits.
        wait_for(lambda: all(condition(p, "PodScheduled").get("status") == "False"
                             for p in job_pods(kube, "b1").values()), "koordpy's answer on B's pods", timeout=TIMEOUT)
        held_pods = settle(lambda: job_pods(kube, "b1"), 3.0)
        assert all(not p["spec"].get("nodeName") for p in held_pods.values()), held_pods
        assert set(terminating(kube).values()) >= freed | {"g4"}, terminating(kube)
        assert nominations(kube, NS).get("urgent") == "g4"
        assert not {n for n, where in nominations(kube, NS).items() if where == "g4"} - {"urgent"}

        # The evicted pods' room, then low's: the urgent pod, of higher priority, may take whichever
        # comes first (kube-scheduler's nominated pods may bind elsewhere too); B's gang the rest, whole.
        force_gone(kube, *(n for n in job_pods(kube, gone)))
        # With low still terminating on g4, nothing is put there yet (g4 has no room until it goes).
        assert not any(p["spec"].get("nodeName") == "g4" for n, p in settle(lambda: kube.pods(NS), 3.0).items()
                       if n != "low"), pod_states(kube)
        assert check_invariants(kube) == []
        force_gone(kube, "low")
        assert_bound_as_one_gang(kube, scheduler, "b1", pods=2)
        urgent = wait_for(lambda: kube.pods(NS).get("urgent", {}).get("spec", {}).get("nodeName"), "urgent bound",
                          timeout=TIMEOUT)
        b_nodes = {p["spec"]["nodeName"] for p in job_pods(kube, "b1").values()}
        assert b_nodes | {urgent} == freed | {"g4"} and urgent not in b_nodes, (b_nodes, urgent, freed)
        # No nomination outlives its pod's binding: nothing is left pending, so none holds room.
        pending = settle(lambda: {n: s for n, s in pod_states(kube).items() if s not in {f"g{i}" for i in range(5)}},
                         2.0)
        assert pending == {}, pending
    finally:
        cleanup(kube)


# -- the guide (docs/behind-kueue.md), as written ---------------------------------------------------


def test_the_guides_manifests_work_as_written(frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """``kubectl apply -f examples/kueue/queues.yaml`` and ``-f examples/kueue/job.yaml`` on GPU nodes
    labelled as the guide says (2 blocks x 2 racks x 2 nodes of 4 GPUs): Kueue admits the Job in
    team-a's queue and assigns it a rack; koordpy binds both pods whole inside it, each on the node its
    nodeSelector names. The namespaces are made first with the label that lets this control plane's
    webhooks see them (a real Kueue's see every namespace)."""
    teams = ("team-a", "team-b")
    try:
        nodes = [node(f"gpu-b{b}-r{r}-{n}", cpu="32", memory="128Gi", extra={GPU: "4"},
                      labels={"nvidia.com/gpu.present": "true", "cloud.provider.com/topology-block": f"b{b}",
                              "cloud.provider.com/topology-rack": f"b{b}-r{r}"})
                 for b in range(2) for r in range(2) for n in range(2)]
        kube.apply(*({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": t, "labels": {
            NAMESPACE_LABEL: "true"}}} for t in teams), nodes)
        kube.kubectl("apply", "-f", str(GUIDE / "queues.yaml"))
        wait_for(lambda: all(condition(kube.get("clusterqueues.kueue.x-k8s.io", t, None), "Active")
                             .get("status") == "True" for t in teams), "the guide's ClusterQueues active")
        labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in kube.get("nodes", namespace=None)["items"]}
        for job, name in (("job.yaml", "train"), ("job-podgroup.yaml", "train-pg")):
            kube.kubectl("apply", "-f", str(GUIDE / job))
            members = bound_pods(kube, name, 2, namespace="team-a")
            racks = set()
            for p in members.values():
                selector = p["spec"]["nodeSelector"]
                on = labels[p["spec"]["nodeName"]]
                # Kueue's rack (the Topology's lowest level), and koordpy's node inside it.
                assert "cloud.provider.com/topology-rack" in selector and "kubernetes.io/hostname" not in selector
                assert all(on.get(k) == v for k, v in selector.items()), (selector, on)
                racks.add(on["cloud.provider.com/topology-rack"])
            assert len(racks) == 1, (job, racks)
            # One binding decision for the gang: the guide's PodGroup (the label), else the one the Job
            # controller made (spec.schedulingGroup; this control plane's gates make one for any Job).
            groups = {f"team-a/{g}" for p in members.values()
                      for g in (p["metadata"]["labels"].get("pod-group.scheduling.sigs.k8s.io"),
                                (p["spec"].get("schedulingGroup") or {}).get("podGroupName")) if g}
            decided = [b["pods"] for b in bindings(scheduler.log) if b.get("job") in groups]
            assert decided == [2], (job, groups, decided)
        workloads = kube.get(KUEUE_WORKLOADS, namespace="team-a")["items"]
        assert len(workloads) == 2 and all(condition(w, "Admitted").get("status") == "True" for w in workloads)
    finally:
        kube.kubectl("delete", "jobs.batch", "--all", "-n", "team-a", "--cascade=foreground", "--timeout=60s",
                     check=False)
        cleanup(kube)
        kube.kubectl("delete", "namespace", *teams, "--ignore-not-found", "--timeout=60s", check=False)
