"""Issue 34, item 3: a JobSet's pods are one gang by their owner chain (Pod -> Job -> JobSet), of what
the JobSet runs at once; one that starts its replicatedJobs in turn is a gang per replicatedJob; a
restart is a new gang; and JobSet's exclusive placement puts each Job's leader, together with the
other leaders, alone in a domain where its whole Job fits, the Job's other pods then joining it.

The worlds are written as JobSet v0.12.0 leaves them: its controller's labels and annotations on the
Jobs' pods (``pkg/controllers``), its pod webhook's affinities on a leader placed exclusively and
the nodeSelector on a follower, which the webhook admits only once the leader is bound
(``pkg/webhooks/pod_webhook.go``).
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.core.cycle import schedule
from koordpy.core.explain import explain_podgroup
from koordpy.core.gang import gangs_named, resolve_gangs
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import node, pod, priority_class

RACK = "example.com/rack"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
PRIORITY = "jobset.sigs.k8s.io/priority"
Obj = dict[str, Any]


def jobset(name: str, replicated: list[tuple[str, int, int]], *, exclusive: str | None = None,
           in_order: bool = False, completions: dict[str, int] | None = None,
           depends: dict[str, str] | None = None) -> Obj:
    """A JobSet of ``(replicatedJob, Jobs, parallelism)``; ``completions`` where they differ from the
    parallelism; ``depends``: replicatedJob -> the one it is created after."""
    done = completions or {}
    rjobs = []
    for rjob, replicas, parallel in replicated:
        item: Obj = {"name": rjob, "replicas": replicas, "template": {"spec": {
            "parallelism": parallel, "completions": done.get(rjob, parallel), "completionMode": "Indexed",
            "template": {"spec": {"containers": []}}}}}
        if depends and rjob in depends:
            item["dependsOn"] = [{"name": depends[rjob], "status": "Ready"}]
        rjobs.append(item)
    spec: Obj = {"replicatedJobs": rjobs}
    if in_order:
        spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    meta: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if exclusive:
        meta["annotations"] = {EXCLUSIVE: exclusive}
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta, "spec": spec}


def job(js: str, rjob: str, index: int, parallel: int, attempt: int = 0) -> Obj:
    """One of the JobSet's Jobs as its controller makes it (started: the simulator makes no pods for it)."""
    name = f"{js}-{rjob}-{index}"
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}-{attempt}", "ownerReferences": [
                {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": js, "uid": f"uid-{js}",
                 "controller": True}]},
            "spec": {"parallelism": parallel, "completions": parallel, "completionMode": "Indexed",
                     "template": {"spec": {"containers": []}}},
            "status": {"startTime": "2026-01-01T00:00:00Z"}}


def member(js: str, rjob: str, index: int, completion: int, *, attempt: int = 0, cpu: str = "2",
           exclusive: str | None = None, node_name: str | None = None, selector: dict[str, str] | None = None,
           webhook: bool = True) -> Obj:
    """The pod of completion index ``completion`` of the JobSet's Job ``rjob``-``index``, with JobSet's
    labels; placed exclusively, the leader carries the affinities JobSet's webhook gives it
    (``webhook``), and ``selector`` is the nodeSelector the webhook gives a follower."""
    job_name = f"{js}-{rjob}-{index}"
    key = f"hash-{job_name}-{attempt}"  # JobSet hashes namespace/name: one value per Job
    labels = {"jobset.sigs.k8s.io/jobset-name": js, "jobset.sigs.k8s.io/replicatedjob-name": rjob,
              "jobset.sigs.k8s.io/job-index": str(index), JOB_KEY: key,
              "jobset.sigs.k8s.io/restart-attempt": str(attempt), PRIORITY: "0"}
    annotations = {"batch.kubernetes.io/job-completion-index": str(completion)}
    extra: Obj = {}
    if exclusive:
        annotations[EXCLUSIVE] = exclusive
        if completion == 0 and webhook:
            extra["affinity"] = {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": [key]}]},
                    "topologyKey": exclusive, "namespaceSelector": {}}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                    "labelSelector": {"matchExpressions": [
                        {"key": JOB_KEY, "operator": "Exists"},
                        {"key": JOB_KEY, "operator": "NotIn", "values": [key]},
                        {"key": PRIORITY, "operator": "In", "values": ["0"]}]},
                    "topologyKey": exclusive, "namespaceSelector": {}}]}}
    if selector:
        extra["nodeSelector"] = selector
    raw = pod(f"{job_name}-{completion}-a{attempt}", cpu=cpu, labels=labels, annotations=annotations,
              node_name=node_name, **extra)
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": job_name,
                                           "uid": f"uid-{job_name}-{attempt}", "controller": True}]
    return raw


def run(*objects: Obj | list[Obj], stale_grace: float = -1) -> SimulationResult:
    flat: list[Obj] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    out = simulate(World.from_objects([("test", o) for o in flat]), stale_grace=stale_grace)
    full = simulate(World.from_objects([("test", o) for o in flat]), incremental=False, stale_grace=stale_grace)
    assert (out.bound, out.pending) == (full.bound, full.pending)
    return out


def members_of(objects: list[Obj]) -> dict[str, str]:
    """Each pod of ``objects`` -> the gang the core puts it in."""
    world = World.from_objects([("test", o) for o in objects])
    return resolve_gangs(world.snapshot(frozenset({"koordpy"})))[1]


def rack_of(name: str) -> str:
    return name.split("-")[0]


# -- one gang per JobSet -------------------------------------------------------------------------


def train(*, completions: dict[str, int] | None = None) -> list[Obj]:
    """JobSet train: replicatedJob workers (2 Jobs of 2 pods) and ps (1 Job, parallelism 3, 2 completions:
    it never runs more than 2 pods), 6 pods of 2 CPUs in all, and its Jobs."""
    return [jobset("train", [("workers", 2, 2), ("ps", 1, 3)], completions=completions or {"ps": 2}),
            job("train", "workers", 0, 2), job("train", "workers", 1, 2), job("train", "ps", 0, 2)]


def train_pods(skip: int = 0) -> list[Obj]:
    pods = [member("train", "workers", j, c) for j in range(2) for c in range(2)]
    pods += [member("train", "ps", 0, c) for c in range(2)]
    return pods[:len(pods) - skip]


def test_a_jobsets_pods_are_one_gang_of_all_it_runs_at_once() -> None:
    # Room for 5 of its 6 pods: none binds (pod by pod, 5 would); the gang is named by its JobSet.
    out = run(node("n0", cpu="8"), node("n1", cpu="2"), train(), train_pods())
    assert out.bound == {}
    said = out.pending["default/train-workers-0-0-a0"]
    assert said.startswith('GangGroup "default/JobSet/train/attempt-0" gets rejected'), said
    assert set(members_of([node("n0"), *train(), *train_pods()]).values()) == {"default/JobSet/train/attempt-0"}


def test_with_room_for_all_the_jobsets_pods_bind_together() -> None:
    # The minimum caps a Job at its completions (ps: parallelism 3, 2 completions): 6 pods, all there.
    out = run(node("n0", cpu="8"), node("n1", cpu="4"), train(), train_pods())
    assert len(out.bound) == 6


def test_the_gang_waits_for_the_pods_the_jobset_runs_not_those_there_now() -> None:
    # One pod not created yet: the 5 there do not bind, though they fit.
    out = run(node("n0", cpu="16"), train(), train_pods(skip=1))
    assert out.bound == {}
    # Said in the JobSet's terms, not Koordinator's ("gang child pod not collect enough").
    assert out.pending["default/train-workers-0-0-a0"] == (
        "waiting for JobSet train's pods (restart attempt 0) to exist: 5 created, minimum 6, what its Jobs "
        "still run at once")


def test_a_kai_topology_on_the_jobset_keeps_its_pods_in_kais_gang() -> None:
    # Another declaration first (the dialects' order): KAI's group of the top-level owner.
    js = jobset("k", [("w", 1, 2)])
    js["metadata"]["annotations"] = {"kai.scheduler/topology": "network"}
    gangs = members_of([node("n0"), js, job("k", "w", 0, 2), member("k", "w", 0, 0), member("k", "w", 0, 1)])
    assert set(gangs.values()) == {"default/JobSet/k"}
    # And its words are KAI's gang's (Koordinator's), not a JobSet gang's.
    out = run(node("n0"), js, job("k", "w", 0, 2), member("k", "w", 0, 0))
    assert out.pending["default/k-w-0-0-a0"].startswith("gang child pod not collect enough, gangName: default/JobSet/k")


@pytest.mark.parametrize("staging", ["InOrder", "dependsOn"])
def test_a_jobset_that_starts_its_replicated_jobs_in_turn_is_a_gang_per_replicated_job(staging: str) -> None:
    # Its workers are made only once the driver is ready: the driver binds alone, as its own gang.
    js = jobset("io", [("driver", 1, 1), ("workers", 2, 2)], in_order=staging == "InOrder",
                depends={"workers": "driver"} if staging == "dependsOn" else None)
    out = run(node("n0", cpu="8"), js, job("io", "driver", 0, 1), member("io", "driver", 0, 0))
    assert out.bound == {"default/io-driver-0-0-a0": "n0"}
    later = [js, job("io", "driver", 0, 1), job("io", "workers", 0, 2), job("io", "workers", 1, 2),
             member("io", "driver", 0, 0, node_name="n0"),
             *(member("io", "workers", j, c) for j in range(2) for c in range(2))]
    assert set(members_of([node("n0"), *later]).values()) == {"default/JobSet/io/attempt-0/driver",
                                                              "default/JobSet/io/attempt-0/workers"}
    # The workers' gang is both their Jobs: room for 3 of their 4 pods binds none.
    out = run(node("n0", cpu="8"), later)
    assert not any("workers" in p for p in out.bound)


def test_replicated_jobs_made_at_once_with_the_first_are_its_gang() -> None:
    # With dependsOn, the JobSet makes every replicatedJob that depends on none at once with the first:
    # driver and ps are one gang (room for the driver and 1 of ps's 2 pods binds none), workers (made
    # once the driver is ready) another.
    js = jobset("io", [("driver", 1, 1), ("ps", 1, 2), ("workers", 2, 2)], depends={"workers": "driver"})
    objs = [js, job("io", "driver", 0, 1), job("io", "ps", 0, 2)]
    pods = [member("io", "driver", 0, 0), member("io", "ps", 0, 0), member("io", "ps", 0, 1)]
    assert set(members_of([node("n0"), *objs, *pods]).values()) == {"default/JobSet/io/attempt-0/driver"}
    out = run(node("n0", cpu="4"), objs, pods)
    assert out.bound == {}
    assert 'GangGroup "default/JobSet/io/attempt-0/driver"' in out.pending["default/io-driver-0-0-a0"]
    assert len(run(node("n0", cpu="6"), objs, pods).bound) == 3
    # Its words name both; one pod short, it waits for them.
    short = run(node("n0", cpu="6"), objs, pods[:2]).pending["default/io-driver-0-0-a0"]
    assert short.startswith("waiting for JobSet io's pods of replicatedJobs driver, ps (restart attempt 0) to "
                            "exist: 2 created, minimum 3"), short


def test_a_restart_is_a_new_gang_of_the_new_pods() -> None:
    # Restart attempt 1's pods arrive while attempt 0's still run (their deletion not seen yet), with
    # room for 2 of the 4 new ones: the new attempt binds none, not 2 beside the old attempt's as
    # members beyond a minimum those already meet. (Written without uids, as by hand: each pod finds
    # its Job by name, and the Jobs of those names are attempt 1's now.)
    old = [member("train", "workers", j, c, node_name="n0") for j in range(2) for c in range(2)]
    new = [member("train", "workers", j, c, attempt=1) for j in range(2) for c in range(2)]
    js = jobset("train", [("workers", 2, 2)])
    jobs = [job("train", "workers", j, 2, attempt=1) for j in range(2)]
    for o in [*old, *new, *jobs]:
        o["metadata"].pop("uid", None)
        o["metadata"]["ownerReferences"][0].pop("uid")
    del js["metadata"]["uid"]
    gangs = members_of([node("n0"), js, *jobs, *old, *new])
    assert {gangs[f"default/{p['metadata']['name']}"] for p in new} == {"default/JobSet/train/attempt-1"}
    assert {gangs[f"default/{p['metadata']['name']}"] for p in old} == {"default/JobSet/train/attempt-0"}
    # A grace of 0: a stale old attempt would be evicted in this very run (with 3 of its 4 pods it is).
    out = run(node("n0", cpu="8"), node("n1", cpu="4"), js, jobs, old, new, stale_grace=0)
    assert out.bound == {}
    assert 'GangGroup "default/JobSet/train/attempt-1"' in out.pending[f"default/{new[0]['metadata']['name']}"]
    assert out.evicted == {}  # the old attempt is whole: not stale
    assert run(node("n0", cpu="8"), node("n1", cpu="4"), js, jobs, old[:3], new, stale_grace=0).evicted


def test_explain_finds_a_jobsets_gang_by_the_jobsets_name() -> None:
    keys = ["default/JobSet/train/attempt-0", "default/JobSet/train/attempt-1", "default/Job/other"]
    assert gangs_named(keys, "default/train") == keys[:2]
    assert gangs_named(keys, "default/jobset/train") == keys[:2]
    assert gangs_named(keys, "default/JobSet/train/attempt-1") == keys[1:2]
    assert gangs_named(keys, "default/other") == ["default/Job/other"]


# -- pods that finished -------------------------------------------------------------------------


def finished(raw: Obj, phase: str = "Succeeded") -> Obj:
    raw["status"] = {"phase": phase}
    return raw


def test_a_retry_binds_though_a_sibling_succeeded() -> None:
    # One Job of 4 (parallelism = completions = 4): index 0 Succeeded, 1 and 2 run, 3 failed and its
    # retry is pending. The Job runs 3 pods at once now, all there with the retry: it binds (the
    # minimum read from the spec alone, 4, waited for a pod that never comes).
    js = [jobset("s", [("w", 1, 4)]), job("s", "w", 0, 4)]
    ps = [member("s", "w", 0, c, node_name="n0") for c in range(3)]
    finished(ps[0])
    gone = finished(member("s", "w", 0, 3, node_name="n0"), "Failed")
    retry = member("s", "w", 0, 3)
    retry["metadata"]["name"] += "-retry"
    out = run(node("n0", cpu="16"), js, ps, gone, retry, stale_grace=0)
    assert out.bound == {"default/s-w-0-3-a0-retry": "n0"}, out.pending
    assert out.evicted == {}


def test_the_minimum_is_what_a_job_still_runs_at_once_never_less() -> None:
    # Parallelism 2 of 4 completions: 1 succeeded, 3 to go, so the Job still runs 2 at once. Its 2 new
    # pods (nothing running) with room for 1: neither binds; with room for both, both do.
    js = [jobset("q", [("w", 1, 2)], completions={"w": 4}), job("q", "w", 0, 2)]
    done = finished(member("q", "w", 0, 0, node_name="n0"))
    new = [member("q", "w", 0, c) for c in (1, 2)]
    assert run(node("n0", cpu="2"), js, done, new).bound == {}
    assert len(run(node("n0", cpu="4"), js, done, new).bound) == 2


def _cycles(state: SchedulerState, objs: list[dict[str, Any]]) -> dict[str, str]:
    """Three cycles over ``objs`` with one scheduler's memory, as the simulator applies them: the binds."""
    world = World.from_objects([("t", o) for o in objs])
    binds: dict[str, str] = {}
    for _ in range(3):
        result = schedule(world.snapshot(frozenset({"koordpy"})), state, world.now)
        world.apply(result)
        binds.update({d.pod: d.node for d in result.binds})
    return binds


def test_a_scheduler_that_bound_the_jobset_places_a_retry_once_a_job_completed() -> None:
    # The scheduler bound all 8 pods of 2 Jobs itself (it remembers the gang met its minimum); Job 0
    # then completed and a pod of Job 1 failed: its retry binds, in the scheduler's next cycles.
    state = SchedulerState()
    base = [node("n0", cpu="8"), node("n1", cpu="8"), jobset("t", [("w", 2, 4)]),
            *(job("t", "w", j, 4) for j in range(2))]

    first = _cycles(state, [*base, *(member("t", "w", j, c) for j in range(2) for c in range(4))])
    assert len(first) == 8
    later = [member("t", "w", j, c, node_name=first[f"default/t-w-{j}-{c}-a0"]) for j in range(2) for c in range(4)]
    for p in later[:4]:
        finished(p)
    finished(later[7], "Failed")
    retry = member("t", "w", 1, 3)
    retry["metadata"]["name"] += "-retry"
    assert set(_cycles(state, [*base, *later, retry])) == {"default/t-w-1-3-a0-retry"}


# -- exclusive placement ------------------------------------------------------------------------


def racks() -> list[Obj]:
    """Rack a: room for one 2-CPU pod (first by name, and the tightest); b: 2 nodes, room for 4; c: room for 4."""
    return [node("a-0", cpu="2", labels={RACK: "a"}), node("b-0", cpu="4", labels={RACK: "b"}),
            node("b-1", cpu="4", labels={RACK: "b"}), node("c-0", cpu="8", labels={RACK: "c"})]


def exclusive_set(jobs: int = 2, size: int = 4) -> list[Obj]:
    return [jobset("t", [("w", jobs, size)], exclusive=RACK), *(job("t", "w", j, size) for j in range(jobs))]


def leaders(jobs: int = 2, js: str = "t", **kw: Any) -> list[Obj]:
    return [member(js, "w", j, 0, exclusive=RACK, **kw) for j in range(jobs)]


def test_the_leaders_bind_together_each_alone_in_a_rack_where_its_whole_job_fits() -> None:
    # Only the leaders exist (JobSet's webhook refuses the others until they bind). Rack a has room for
    # a leader, not for its Job of 4: it is not used.
    out = run(racks(), exclusive_set(), leaders())
    assert {p: rack_of(n) for p, n in out.bound.items()} == {"default/t-w-0-0-a0": "b", "default/t-w-1-0-a0": "c"}
    # The webhook then admits the followers, pinned to their leader's rack: they join it.
    bound = [member("t", "w", j, 0, exclusive=RACK, node_name=out.bound[f"default/t-w-{j}-0-a0"]) for j in range(2)]
    followers = [member("t", "w", j, c, exclusive=RACK, selector={RACK: rack_of(out.bound[f"default/t-w-{j}-0-a0"])})
                 for j in range(2) for c in range(1, 4)]
    later = run(racks(), exclusive_set(), bound, followers)
    assert len(later.bound) == 6
    assert {p: rack_of(n) for p, n in later.bound.items()} == {
        f"default/t-w-{j}-{c}-a0": "bc"[j] for j in range(2) for c in range(1, 4)}


def test_without_a_rack_of_its_own_for_every_job_no_leader_binds() -> None:
    # Racks a (room for 1) and b (room for 4): the second Job has nowhere to go whole, so neither leader
    # binds, and each says so.
    out = run(racks()[:3], exclusive_set(), leaders())
    assert out.bound == {}
    said = out.pending["default/t-w-1-0-a0"]
    assert said == ("0/3 nodes are available: Job t-w-1 needs a domain of example.com/rack of its own with room "
                    "for all its 4 pods (JobSet exclusive placement); room for them: a 1; held by its JobSet's "
                    "other Jobs: b.")


@pytest.mark.parametrize(("priority", "racks_used"), [("0", None), ("100", ["b", "c"])])
def test_a_rack_running_another_jobsets_job_of_the_same_priority_is_not_taken(priority: str,
                                                                             racks_used: list[str] | None) -> None:
    # Rack c runs a Job of a JobSet in another namespace. At the same priority, its leader's
    # anti-affinity and our leaders' own (any namespace: namespaceSelector {}) keep our Jobs out of c,
    # and with a too small, the second Job has no rack: neither leader binds. At another priority
    # (JobSet's webhook labels the pods with theirs) c is ours to take.
    nodes = [*racks()[:3], node("c-0", cpu="8", labels={RACK: "c"}), node("c-1", cpu="8", labels={RACK: "c"})]
    other = [jobset("o", [("w", 1, 1)], exclusive=RACK), job("o", "w", 0, 1),
             member("o", "w", 0, 0, exclusive=RACK, node_name="c-0")]
    for o in other:
        o["metadata"]["namespace"] = "elsewhere"
    held = other[2]
    held["metadata"]["labels"][PRIORITY] = priority
    held["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "labelSelector"]["matchExpressions"][2]["values"] = [priority]
    out = run(nodes, exclusive_set(), leaders(), other)
    if racks_used is None:
        assert out.bound == {}
    else:
        assert sorted(rack_of(n) for p, n in out.bound.items() if p.startswith("default/")) == racks_used


def test_two_jobs_never_share_a_rack_though_it_has_room_for_both() -> None:
    # Rack b has room for both Jobs of 4, rack a for one pod: the second Job has no rack of its own, so
    # neither leader binds. The leaders carry no affinities (a world written by hand, or leaders made
    # before the webhook ran): the dialect's rule alone keeps the Jobs apart.
    roomy = [node("a-0", cpu="2", labels={RACK: "a"}), node("b-0", cpu="8", labels={RACK: "b"}),
             node("b-1", cpu="8", labels={RACK: "b"})]
    out = run(roomy, exclusive_set(), leaders(webhook=False))
    assert out.bound == {}


def test_followers_join_their_leaders_rack_though_binpacking_would_put_them_elsewhere() -> None:
    # The leaders run in b and c; the followers carry no nodeSelector (made without the webhook). Rack d
    # is the most allocated, where binpacking alone would put them.
    busy = [node("d-0", cpu="8", labels={RACK: "d"}), pod("busy", cpu="6", node_name="d-0")]
    bound = [member("t", "w", j, 0, exclusive=RACK, node_name=n) for j, n in enumerate(["b-0", "c-0"])]
    followers = [member("t", "w", j, c, exclusive=RACK) for j in range(2) for c in range(1, 4)]
    out = run(racks(), busy, exclusive_set(), bound, followers)
    assert {p: rack_of(n) for p, n in out.bound.items()} == {
        f"default/t-w-{j}-{c}-a0": "bc"[j] for j in range(2) for c in range(1, 4)}


def test_followers_wait_whole_when_their_leaders_rack_lacks_room() -> None:
    bound = [member("t", "w", 0, 0, exclusive=RACK, node_name="b-0")]
    followers = [member("t", "w", 0, c, exclusive=RACK) for c in range(1, 4)]
    crowded = [pod("other", cpu="6", node_name="b-1")]
    out = run(racks(), crowded, exclusive_set(jobs=1), bound, followers)
    assert out.bound == {}
    assert out.pending["default/t-w-0-1-a0"] == (
        "0/4 nodes are available: Job t-w-0 runs in example.com/rack=b, which has room for 1 of its 3 pending "
        "pod(s) (JobSet exclusive placement: a Job's pods share its leader's domain).")


def test_a_restarted_jobset_places_its_new_leaders_with_the_same_rules() -> None:
    # Attempt 0 failed (its Job 0's leader Failed on b-0; the rest of it is gone): attempt 1's leaders
    # take b and c again, never a, never both in one rack.
    failed = member("t", "w", 0, 0, exclusive=RACK, node_name="b-0")
    failed["status"] = {"phase": "Failed"}
    new = [member("t", "w", j, 0, exclusive=RACK, attempt=1) for j in range(2)]
    jobs = [job("t", "w", j, 4, attempt=1) for j in range(2)]
    out = run(racks(), jobset("t", [("w", 2, 4)], exclusive=RACK), jobs, failed, new)
    assert {p: rack_of(n) for p, n in out.bound.items()} == {"default/t-w-0-0-a1": "b", "default/t-w-1-0-a1": "c"}


def test_with_every_pod_there_a_job_that_fits_whole_does_not_bind_without_the_others() -> None:
    # A world written without the webhook: both Jobs' pods exist at once. Only rack b takes a Job of 4:
    # the first Job fitting whole does not bind alone, as its leader would not (every Job needs one).
    pods = [member("t", "w", j, c, exclusive=RACK, webhook=False) for j in range(2) for c in range(4)]
    out = run(racks()[:3], exclusive_set(), pods)
    assert out.bound == {}


def test_the_jobsets_other_jobs_go_outside_the_racks_its_exclusive_jobs_take() -> None:
    # Only replicatedJob w is exclusive (its template says so); ps's 2 pods are made at once with w's
    # leader, and go to rack c, not beside the leader in b where binpacking would put them (the
    # leader carries no affinities here: the dialect's rule alone keeps them out).
    js = jobset("m", [("w", 1, 4), ("ps", 1, 2)])
    js["spec"]["replicatedJobs"][0]["template"]["metadata"] = {"annotations": {EXCLUSIVE: RACK}}
    pods = [member("m", "w", 0, 0, exclusive=RACK, webhook=False), member("m", "ps", 0, 0), member("m", "ps", 0, 1)]
    out = run(racks()[1:], js, job("m", "w", 0, 4), job("m", "ps", 0, 2), pods)
    assert {p: rack_of(n) for p, n in out.bound.items()} == {
        "default/m-w-0-0-a0": "b", "default/m-ps-0-0-a0": "c", "default/m-ps-0-1-a0": "c"}


def test_after_a_restart_of_the_scheduler_a_retry_binds_though_another_job_completed() -> None:
    # Job 0 completed (its 4 pods Succeeded in rack b); Job 1 runs 3 pods in c and a failed one's retry
    # is pending, pinned to c by the webhook. A scheduler that never saw the gang meet its minimum
    # places it: Job 0, with nothing to run, is no part the gang waits for.
    done = [finished(member("t", "w", 0, c, exclusive=RACK, node_name="b-0")) for c in range(4)]
    running = [member("t", "w", 1, c, exclusive=RACK, node_name="c-0") for c in range(3)]
    retry = member("t", "w", 1, 3, exclusive=RACK, selector={RACK: "c"})
    out = run(racks(), exclusive_set(), done, running, retry)
    assert out.bound == {"default/t-w-1-3-a0": "c-0"}, out.pending


def test_an_exclusive_replicated_job_with_parallelism_0_has_no_leader_to_wait_for() -> None:
    # Replicated job "paused" runs no pod (parallelism 0): its Job never makes a leader, so w's binds.
    js = jobset("z", [("w", 1, 4), ("paused", 1, 0)], exclusive=RACK)
    out = run(racks(), js, job("z", "w", 0, 4), member("z", "w", 0, 0, exclusive=RACK))
    assert {p: rack_of(n) for p, n in out.bound.items()} == {"default/z-w-0-0-a0": "b"}, out.pending


def test_an_exclusive_key_on_the_pod_template_is_the_jobs_as_the_webhook_reads_it() -> None:
    # The key is on the Job template's pod template only: the pods carry it, JobSet's webhook acts on it
    # (it refuses the followers until their leader binds), so the minimum is the leaders too.
    js = jobset("p", [("w", 2, 4)])
    js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"] = {"annotations": {EXCLUSIVE: RACK}}
    out = run(racks(), js, *(job("p", "w", j, 4) for j in range(2)), leaders(js="p"))
    assert {p: rack_of(n) for p, n in out.bound.items()} == {"default/p-w-0-0-a0": "b", "default/p-w-1-0-a0": "c"}


def test_the_pods_say_whether_their_job_is_exclusive_not_the_jobset_alone() -> None:
    # The JobSet was annotated after its Jobs were made (the pods carry no key: every pod is created at
    # once, no webhook holds them): a gang of all 8, not of 2 leaders. Room for 5: none binds.
    js = jobset("t", [("w", 2, 4)], exclusive=RACK)
    pods = [member("t", "w", j, c) for j in range(2) for c in range(4)]
    out = run(node("n0", cpu="10"), js, *(job("t", "w", j, 4) for j in range(2)), pods)
    assert out.bound == {}, out.bound
    # And the other way: the pods carry it (a webhook of the cluster's added it), the JobSet does not:
    # its leaders are the minimum, and bind.
    out = run(racks(), exclusive_set()[1:], jobset("t", [("w", 2, 4)]), leaders())
    assert {p: rack_of(n) for p, n in out.bound.items()} == {"default/t-w-0-0-a0": "b", "default/t-w-1-0-a0": "c"}


def test_with_the_jobset_not_seen_yet_its_jobs_say_how_much_room_a_leader_needs() -> None:
    # The JobSet is not in the cache (yet), its Jobs are (parallelism 4): a leader still goes only where
    # its whole Job fits, never to rack a, which has room for it alone.
    out = run(racks(), exclusive_set()[1:], leaders())
    assert {p: rack_of(n) for p, n in out.bound.items()} == {"default/t-w-0-0-a0": "b", "default/t-w-1-0-a0": "c"}


# -- what a JobSet's gang is told ------------------------------------------------------------------


def explained(*objects: Obj | list[Obj], key: str = "default/t", stale_grace: float = -1) -> dict[str, Any]:
    flat: list[Obj] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    world = World.from_objects([("test", o) for o in flat])
    snapshot = world.snapshot(frozenset({"koordpy"}))
    snapshot.stale_grace = stale_grace
    exp = explain_podgroup(snapshot, SchedulerState(), world.now, key)
    assert exp is not None
    facts = exp.to_json()
    return {"minimum": facts["job"]["gangs"][0]["declaredMinimum"], "details": dict(exp.gangs[0].details)}


def test_a_leader_waiting_for_the_other_jobs_leaders_is_told_what_the_minimum_counts() -> None:
    # One leader of 2 exists: the minimum counts leaders, not what the Jobs run at once, and says so.
    out = run(racks(), exclusive_set(), leaders(jobs=1))
    assert out.pending["default/t-w-0-0-a0"] == (
        "waiting for JobSet t's pods (restart attempt 0) to exist: 1 created, minimum 2, what its Jobs need "
        "first (a Job placed exclusively counts its leader alone: JobSet's webhook makes its other pods only once "
        "the leader is bound)")
    assert explained(racks(), exclusive_set(), leaders(jobs=1))["minimum"] == (
        "minimum 2, what its Jobs need first (a Job placed exclusively counts its leader alone: JobSet's webhook "
        "makes its other pods only once the leader is bound)")
    assert explained(node("n0", cpu="16"), train(), train_pods(), key="default/train")["minimum"] == (
        "minimum 6, what its Jobs still run at once")


def test_a_stale_exclusive_jobset_is_told_in_jobs() -> None:
    # Job 0 runs in b; Job 1 has no pod left (its leader failed, not yet made again): 1 of the 2 Jobs.
    running = [member("t", "w", 0, c, exclusive=RACK, node_name="b-0") for c in range(2)]
    gone = finished(member("t", "w", 1, 0, exclusive=RACK, node_name="c-0"), "Failed")
    said = explained(racks(), exclusive_set(), running, gone, stale_grace=60)["details"]["stale"]
    # Job 0's follower ran: its whole Job counts (4), Job 1 its leader (1).
    assert "2 members running, minimum 5, 1 of the 2 Jobs it needs with a pod running;" in said, said


# -- an exclusive JobSet once its Jobs ran whole ---------------------------------------------------


def test_an_exclusive_jobset_that_lost_followers_it_cannot_replace_is_stale() -> None:
    # Job 0 runs whole in b; Job 1 ran in c and lost 2 followers, whose replacements (pinned to c by the
    # webhook) find no room there: another scheduler's pod took it. Once a Job's followers ran, its
    # whole Job counts: the JobSet runs 6 of its 8 and is evicted as stale (its leaders alone, 2,
    # would have kept it running 6 of 8 forever).
    nodes = [node("b-0", cpu="8", labels={RACK: "b"}), node("c-0", cpu="8", labels={RACK: "c"})]
    ran = [member("t", "w", 0, c, exclusive=RACK, node_name="b-0") for c in range(4)]
    ran += [member("t", "w", 1, c, exclusive=RACK, node_name="c-0") for c in range(2)]
    again = [member("t", "w", 1, c, exclusive=RACK, selector={RACK: "c"}) for c in range(2, 4)]
    intruder = pod("intruder", cpu="4", node_name="c-0", scheduler="other")
    out = run(nodes, exclusive_set(), ran, again, intruder, stale_grace=0)
    assert out.bound == {}
    assert sorted(out.evicted) == sorted(f"default/{p['metadata']['name']}" for p in ran)


def test_leaders_bound_before_their_followers_exist_are_not_stale() -> None:
    # The webhook makes the followers only once their leader is bound (the Job controller retries, with
    # back-off): until one of them ran, a Job counts its leader alone, so no grace, however short, ends
    # the JobSet in that wait.
    bound = [member("t", "w", j, 0, exclusive=RACK, node_name=n) for j, n in enumerate(["b-0", "c-0"])]
    out = run(racks(), exclusive_set(), bound, stale_grace=0)
    assert out.evicted == {}


def test_preemption_prices_a_follower_of_an_exclusive_jobset_that_ran_as_its_whole_gang() -> None:
    # x (8 pods, 2 Jobs in racks b and c) and y (2 pods) run at the same low priority; a high pod needs
    # 2 CPUs. Evicting one of x's followers breaks x below its minimum (8, its Jobs ran whole): y, the
    # cheaper gang, is the victim. (With leaders alone counted, x's followers looked like members
    # beyond its minimum, free to take.)
    nodes = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in "bc" for i in range(2)] + [node("z-0", cpu="4")]
    xs = [jobset("x", [("w", 2, 4)], exclusive=RACK), *(job("x", "w", j, 4) for j in range(2))]
    xp = [member("x", "w", j, c, exclusive=RACK, node_name=f"{'bc'[j]}-{c // 2}") for j in range(2) for c in range(4)]
    ys = [jobset("y", [("w", 1, 2)]), job("y", "w", 0, 2)]
    yp = [member("y", "w", 0, c, node_name="z-0") for c in range(2)]
    for p in (*xp, *yp):
        p["spec"]["priorityClassName"] = "low"
    classes = [priority_class("low", 1000), priority_class("high", 2000)]
    out = run(classes, nodes, xs, xp, ys, yp, pod("high", cpu="2", priority_class="high"))
    assert out.preempted and all(v.startswith("default/y-") for v in out.preempted), out.preempted


# -- a second review of the fixes (issue 34): leaders made again, work queues, replacements -----------


def _finished(raw: dict[str, Any], phase: str = "Succeeded") -> dict[str, Any]:
    raw["status"] = {"phase": phase}
    return raw


def _retry_of(raw: dict[str, Any], n: int = 1) -> dict[str, Any]:
    raw["metadata"]["name"] += f"-retry{n}"
    return raw


def _work_queue(js: dict[str, Any], rjob: str) -> dict[str, Any]:
    """replicatedJob ``rjob`` made a work-queue Job: completions unset, NonIndexed."""
    for item in js["spec"]["replicatedJobs"]:
        if item["name"] == rjob:
            spec = item["template"]["spec"]
            del spec["completions"]
            spec.pop("completionMode", None)
    return js


def _non_indexed(raw: dict[str, Any]) -> dict[str, Any]:
    raw["metadata"]["annotations"].pop("batch.kubernetes.io/job-completion-index", None)
    return raw


def test_h2_a_job_that_failed_whole_gets_its_new_leader_bound() -> None:
    # Job 0 runs whole in b. Job 1 ran whole in c; all 4 of its pods then Failed (the pod objects stay:
    # the Job controller keeps them) and the Job controller, within backoffLimit, made them again: the
    # webhook admitted the new leader and refuses the followers until it is bound. The minimum counts Job
    # 1 as its leader alone (finished pods count nothing), so the new leader binds, in b again.
    ran = [member("t", "w", 0, c, exclusive=RACK, node_name="c-0") for c in range(4)]
    failed = [_finished(member("t", "w", 1, c, exclusive=RACK, node_name="b-0"), "Failed") for c in range(4)]
    new_leader = _retry_of(member("t", "w", 1, 0, exclusive=RACK))
    out = run(racks(), exclusive_set(), ran, failed, new_leader)
    assert out.bound == {"default/t-w-1-0-a0-retry1": out.bound.get("default/t-w-1-0-a0-retry1", "?")}, out.pending
    assert rack_of(out.bound["default/t-w-1-0-a0-retry1"]) == "b"


def test_h2_a_job_that_lost_its_leader_and_a_follower_gets_its_new_leader_bound() -> None:
    # Job 1 in b: leader and follower 1 Failed, followers 2 and 3 still run. The Job controller makes
    # index 0 and 1 again; JobSet's webhook drops terminal leaders and refuses follower 1 until the new
    # leader is scheduled: Job 1 counts its new leader and the two followers bound, so the leader binds.
    ran = [member("t", "w", 0, c, exclusive=RACK, node_name="c-0") for c in range(4)]
    ran += [member("t", "w", 1, c, exclusive=RACK, node_name="b-0") for c in (2, 3)]
    failed = [_finished(member("t", "w", 1, c, exclusive=RACK, node_name="b-0"), "Failed") for c in (0, 1)]
    new_leader = _retry_of(member("t", "w", 1, 0, exclusive=RACK))
    out = run(racks(), exclusive_set(), ran, failed, new_leader)
    assert list(out.bound) == ["default/t-w-1-0-a0-retry1"], out.pending


def test_h2_the_healthy_job_is_not_evicted_while_the_failed_job_is_made_again() -> None:
    # Same world, grace 0 (the default is 60 s): the healthy Job 0 is not evicted as stale while Job 1's
    # new leader waits to bind.
    ran = [member("t", "w", 0, c, exclusive=RACK, node_name="c-0") for c in range(4)]
    failed = [_finished(member("t", "w", 1, c, exclusive=RACK, node_name="b-0"), "Failed") for c in range(4)]
    new_leader = _retry_of(member("t", "w", 1, 0, exclusive=RACK))
    out = run(racks(), exclusive_set(), ran, failed, new_leader, stale_grace=0)
    assert out.evicted == {}, out.evicted


def test_work_queue_job_that_lost_a_pod_after_a_success_does_not_block_a_siblings_retry() -> None:
    # Work-queue Job wq (completions unset, parallelism 3): a pod Succeeded, then another Failed; the Job
    # controller makes none again once one succeeded, 1 runs. Job w (2/2): index 1 failed, its retry is
    # pending. wq asks no more than the pod it has (not parallelism less successes, 2): the retry binds.
    js = _work_queue(jobset("q", [("wq", 1, 3), ("w", 1, 2)]), "wq")
    wq = [_non_indexed(member("q", "wq", 0, c, node_name="n0")) for c in range(3)]
    _finished(wq[0])
    _finished(wq[1], "Failed")
    w = [member("q", "w", 0, 0, node_name="n0"), _finished(member("q", "w", 0, 1, node_name="n0"), "Failed"),
         _retry_of(member("q", "w", 0, 1))]
    out = run(node("n0", cpu="16"), js, job("q", "wq", 0, 3), job("q", "w", 0, 2), wq, w)
    assert out.bound == {"default/q-w-0-1-a0-retry1": "n0"}, out.pending


def test_replacements_after_a_job_completed_are_still_placed_all_or_none() -> None:
    # The scheduler bound a JobSet of a (1 Job 2/2) and b (1 Job 4/4) itself (satisfied). a completes
    # (2 Succeeded), then 2 of b's pods fail; both retries are pending and there is room for one.
    # Minimum 4 (a: 0, b: 4), whose minimum left a's Succeeded pods out already: the gang is short (2 of
    # 4 live), so both retries go together or not at all: with room for one, none binds.
    state = SchedulerState()
    js = [jobset("t", [("a", 1, 2), ("b", 1, 4)]), job("t", "a", 0, 2), job("t", "b", 0, 4)]


    nodes = [node("n0", cpu="12")]
    first = _cycles(state, [*nodes, *js, *(member("t", "a", 0, c) for c in range(2)),
                    *(member("t", "b", 0, c) for c in range(4))])
    assert len(first) == 6
    later = [_finished(member("t", "a", 0, c, node_name="n0")) for c in range(2)]
    later += [member("t", "b", 0, c, node_name="n0") for c in range(2)]
    later += [_finished(member("t", "b", 0, c, node_name="n0"), "Failed") for c in (2, 3)]
    retries = [_retry_of(member("t", "b", 0, c)) for c in (2, 3)]
    hog = pod("hog", cpu="6", node_name="n0", scheduler="other")  # 12 - 2*2 running - 6: room for one retry
    assert _cycles(state, [*nodes, *js, *later, *retries, hog]) == {}


def test_replacements_after_a_job_completed_bind_together_with_room_for_both() -> None:
    state = SchedulerState()
    js = [jobset("t", [("a", 1, 2), ("b", 1, 4)]), job("t", "a", 0, 2), job("t", "b", 0, 4)]


    nodes = [node("n0", cpu="12")]
    assert len(_cycles(state, [*nodes, *js, *(member("t", "a", 0, c) for c in range(2)),
                       *(member("t", "b", 0, c) for c in range(4))])) == 6
    later = [_finished(member("t", "a", 0, c, node_name="n0")) for c in range(2)]
    later += [member("t", "b", 0, c, node_name="n0") for c in range(2)]
    later += [_finished(member("t", "b", 0, c, node_name="n0"), "Failed") for c in (2, 3)]
    retries = [_retry_of(member("t", "b", 0, c)) for c in (2, 3)]
    hog = pod("hog", cpu="4", node_name="n0", scheduler="other")
    assert len(_cycles(state, [*nodes, *js, *later, *retries, hog])) == 2
