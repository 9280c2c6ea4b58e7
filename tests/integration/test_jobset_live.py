"""Issue 34, item 3, live: JobSet v0.12.0 in front of ``koordpy run`` on the local control plane (the
``frontends`` fixture starts its controller and its webhooks; ``tests/integration/frontends.py``).

A JobSet's pods are one gang by their owner chain (Pod -> Job -> JobSet): the JobSet controller makes
the Jobs, the Job controller their pods, and koordpy binds them all in one decision. With JobSet's
exclusive placement (``alpha.jobset.sigs.k8s.io/exclusive-topology``), JobSet's pod webhook gives
each Job's leader (completion index 0) an affinity to its own Job and an anti-affinity to the other
Jobs over the key, and refuses the Job's other pods until the leader is bound, then pins them to the
leader's domain: koordpy binds the leaders together, each in a rack where its whole Job fits, and
the followers join them. A failed Job restarts the JobSet (``failurePolicy.maxRestarts``): the new
attempt is a new gang, placed by the same rules.

The nodes have no kubelet: a bound pod stays bound (Pending), so where the pods went is plain to see,
and a pod is made to fail by writing its status.
"""

from __future__ import annotations

from typing import Any

from tests.builders import node
from tests.integration.frontends import NAMESPACE_LABEL, Frontends
from tests.integration.kube import ROOT, Kube, Scheduler, wait_for, when
from tests.integration.test_kueue_live import bindings

NS = "jobset-live"
RACK = "example.com/rack"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART = "jobset.sigs.k8s.io/restart-attempt"
JOBSETS = "jobsets.jobset.x-k8s.io"
TIMEOUT = 90.0
Obj = dict[str, Any]


def namespace() -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS, "labels": {NAMESPACE_LABEL: "true"}}}


def jobset(name: str, jobs: int, pods: int, exclusive: str | None = None, max_restarts: int | None = None) -> Obj:
    """A JobSet of one replicatedJob, ``jobs`` Jobs of ``pods`` pods of 1 CPU, scheduled by koordpy; a
    failed pod fails its Job (backoffLimit 0)."""
    template = {"spec": {"parallelism": pods, "completions": pods, "backoffLimit": 0, "template": {"spec": {
        "schedulerName": "koordpy", "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]}}}}
    spec: Obj = {"replicatedJobs": [{"name": "workers", "replicas": jobs, "template": template}]}
    if max_restarts is not None:
        spec["failurePolicy"] = {"maxRestarts": max_restarts}
    meta: Obj = {"name": name, "namespace": NS}
    if exclusive:
        meta["annotations"] = {EXCLUSIVE: exclusive}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": spec}


def racks() -> list[Obj]:
    """Rack r0: one node of 2 CPUs (room for a leader, not for a Job of 3); r1: two nodes of 2 CPUs;
    r2: one node of 4. Ready, with no kubelet."""
    return [node("r0-0", cpu="2", labels={RACK: "r0"}), node("r1-0", cpu="2", labels={RACK: "r1"}),
            node("r1-1", cpu="2", labels={RACK: "r1"}), node("r2-0", cpu="4", labels={RACK: "r2"})]


def pods_of(kube: Kube, name: str, attempt: int | None = None) -> dict[str, Obj]:
    """The JobSet's pods (of one restart attempt), not being deleted."""
    out = {}
    for n, p in kube.pods(NS).items():
        labels = p["metadata"].get("labels", {})
        if labels.get(JOBSET_NAME) != name or p["metadata"].get("deletionTimestamp"):
            continue
        if attempt is None or labels.get(RESTART) == str(attempt):
            out[n] = p
    return out


def all_bound(kube: Kube, name: str, count: int, attempt: int | None = None) -> dict[str, Obj]:
    def done() -> dict[str, Obj] | None:
        pods = pods_of(kube, name, attempt)
        return when(len(pods) == count and all(p["spec"].get("nodeName") for p in pods.values()), pods)

    return wait_for(done, f"the {count} pods of JobSet {name} bound", timeout=TIMEOUT)


def racks_by_job(pods: dict[str, Obj]) -> dict[str, set[str]]:
    """Each Job (by its index) -> the racks its pods are on (the node names say the rack)."""
    out: dict[str, set[str]] = {}
    for p in pods.values():
        out.setdefault(p["metadata"]["labels"][JOB_INDEX], set()).add(p["spec"]["nodeName"].split("-")[0])
    return out


def assert_exclusive(pods: dict[str, Obj]) -> None:
    """Each Job's pods in one rack, a rack of its own, never r0 (too small for a Job)."""
    where = racks_by_job(pods)
    assert all(len(r) == 1 for r in where.values()), where
    used = [next(iter(r)) for r in where.values()]
    assert sorted(used) == ["r1", "r2"], where


def cleanup(kube: Kube) -> None:
    """The JobSets first (their controller would make the Jobs again), then what is left of their Jobs."""
    kube.kubectl("delete", f"{JOBSETS},jobs.batch", "--all", "-n", NS, "--cascade=foreground", "--timeout=60s",
                 check=False)


def test_a_jobset_of_two_replicated_jobs_is_bound_as_one_gang(frontends: Frontends, kube: Kube,
                                                              scheduler: Scheduler) -> None:
    """Two Jobs of 2 pods: koordpy binds the 4 pods in one decision for the JobSet's gang."""
    try:
        kube.apply(namespace(), node("n0", cpu="8"))
        kube.apply(jobset("train", jobs=2, pods=2))
        bound = all_bound(kube, "train", 4)
        assert {p["spec"]["nodeName"] for p in bound.values()} == {"n0"}
        decided = [b for b in bindings(scheduler.log) if b.get("job") == f"{NS}/JobSet/train/attempt-0"]
        assert [b["pods"] for b in decided] == [4], decided
    finally:
        cleanup(kube)


def test_exclusive_placement_puts_each_job_alone_in_a_rack_where_it_fits_whole(frontends: Frontends, kube: Kube,
                                                                              scheduler: Scheduler) -> None:
    """Two Jobs of 3 pods, exclusive over racks: the two leaders bind together (JobSet's webhook refuses
    the followers until then), in r1 and r2, not in r0, which has room for a leader but not for its Job;
    the followers then join their leaders' racks."""
    try:
        kube.apply(namespace(), racks())
        kube.apply(jobset("excl", jobs=2, pods=3, exclusive=RACK))
        assert_exclusive(all_bound(kube, "excl", 6))
        gang = f"{NS}/JobSet/excl/attempt-0"
        decided = [b["pods"] for b in bindings(scheduler.log) if b.get("job") == gang]
        assert decided[0] == 2 and sum(decided) == 6, decided  # the leaders first, together
    finally:
        cleanup(kube)


def test_a_failed_job_restarts_the_jobset_and_the_new_pods_are_placed_by_the_same_rules(
        frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """A follower fails (its status written Failed): its Job fails (backoffLimit 0), the JobSet restarts
    (maxRestarts 1), deleting its Jobs and making them again as restart attempt 1. The new pods are a
    new gang, placed by the same exclusive rules."""
    try:
        kube.apply(namespace(), racks())
        kube.apply(jobset("again", jobs=2, pods=3, exclusive=RACK, max_restarts=1))
        first = all_bound(kube, "again", 6, attempt=0)
        assert_exclusive(first)
        follower = next(n for n, p in sorted(first.items())
                        if p["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index") != "0")
        kube.kubectl("patch", "pod", follower, "-n", NS, "--subresource=status", "--type=merge",
                     "-p", '{"status": {"phase": "Failed"}}')
        wait_for(lambda: (kube.get(JOBSETS, "again", NS).get("status") or {}).get("restarts") == 1,
                 "the JobSet restarted", timeout=TIMEOUT)
        assert_exclusive(all_bound(kube, "again", 6, attempt=1))
        decided = [b["pods"] for b in bindings(scheduler.log) if b.get("job") == f"{NS}/JobSet/again/attempt-1"]
        assert decided[0] == 2 and sum(decided) == 6, decided
    finally:
        cleanup(kube)


def test_the_guides_jobset_works_as_written(frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """``kubectl apply -f examples/jobset/jobset.yaml`` (docs/jobset.md) on GPU racks labelled as the
    guide says: r0 one node of 4 GPUs (a leader's room, not a Job's), r1 two nodes of 4, r2 one node of
    8. Each of the two Jobs lands whole in a rack of its own, r1 and r2. The namespace is made first with
    the label that lets this control plane's webhooks see it (a real JobSet's see every namespace)."""
    key = "cloud.provider.com/topology-rack"
    try:
        gpu = {"nvidia.com/gpu": "4"}
        kube.apply({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "training", "labels": {NAMESPACE_LABEL: "true"}}},
                   [node("r0-0", cpu="8", labels={key: "r0"}, extra=gpu), node("r1-0", cpu="8", labels={key: "r1"},
                                                                                extra=gpu),
                    node("r1-1", cpu="8", labels={key: "r1"}, extra=gpu),
                    node("r2-0", cpu="8", labels={key: "r2"}, extra={"nvidia.com/gpu": "8"})])
        kube.kubectl("apply", "-f", str(ROOT / "examples" / "jobset" / "jobset.yaml"))

        def done() -> dict[str, Obj] | None:
            pods = {n: p for n, p in kube.pods("training").items()
                    if p["metadata"].get("labels", {}).get(JOBSET_NAME) == "llm"}
            return when(len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods.values()), pods)

        pods = wait_for(done, "the guide's JobSet's 4 pods bound", timeout=TIMEOUT)
        where: dict[str, set[str]] = {}
        for p in pods.values():
            where.setdefault(p["metadata"]["labels"][JOB_INDEX], set()).add(p["spec"]["nodeName"].split("-")[0])
        assert sorted(r for racks in where.values() for r in racks) == ["r1", "r2"], where
    finally:
        # The guide's pods keep the default 30 s grace, and no kubelet here ends a deletion: the JobSet's
        # foreground deletion and the namespace's would wait on them for good, so they are forced.
        kube.kubectl("delete", JOBSETS, "--all", "-n", "training", "--wait=false", check=False)
        kube.kubectl("delete", "jobs.batch", "--all", "-n", "training", "--wait=false", check=False)
        kube.kubectl("delete", "pods", "--all", "-n", "training", "--grace-period=0", "--force", check=False)
        kube.kubectl("delete", "namespace", "training", "--ignore-not-found", "--timeout=60s", check=False)
