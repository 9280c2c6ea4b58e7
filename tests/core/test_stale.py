"""Stale gangs (koordpy.core.stale, issue 33 item 1), translated from KAI-Scheduler's own tests:
``TestPodGroupInfo_IsStale`` (which gangs are stale) and ``TestStaleGangEviction`` (which are evicted
after their grace), their sub-groups as a CompositePodGroup's children. KAI's "stale for N seconds"
is a stale-since kept on the gang's object, as KAI keeps it; KAI's per-job grace is its PodGroup's
``spec.stalenessGracePeriod``. One cycle at a time, at a time of the test's choosing."""

from __future__ import annotations

from typing import Any

from koordpy.api.objects import Pod
from koordpy.api.podgroup import GangConfig
from koordpy.api.raw import rfc3339
from koordpy.core.cycle import schedule
from koordpy.core.decisions import CycleResult, Event, Evict, ObjectAnnotate
from koordpy.core.liveness import loss
from koordpy.core.model import Gang
from koordpy.core.stale import Health, health
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import DEFAULT_EPOCH, World
from tests.builders import node, pod, podgroup
from tests.core.dialects.test_upstream import member
from tests.core.dialects.test_upstream_composite import child, composite

T = DEFAULT_EPOCH + 3600.0  # the time of the cycle
STALE_SINCE = "koordpy.io/stale-since"
KAI_STALE_SINCE = "kai.scheduler/stale-podgroup-timestamp"


def status(raw: dict[str, Any], phase: str, reason: str = "") -> dict[str, Any]:
    raw["status"] = {"phase": phase, **({"reason": reason} if reason else {})}
    return raw


def running(name: str, group: str = "job-1", node_name: str = "node-1") -> dict[str, Any]:
    return status(pod(name, cpu="1", group=group, node_name=node_name), "Running")


def failed(name: str, group: str = "job-1", reason: str = "") -> dict[str, Any]:
    return status(pod(name, cpu="1", group=group, node_name="node-1"), "Failed", reason)


def succeeded(name: str, group: str = "job-1") -> dict[str, Any]:
    return status(pod(name, cpu="1", group=group, node_name="node-1"), "Succeeded")


def stale_for(seconds: float | None, annotation: str = STALE_SINCE) -> dict[str, str]:
    """The object's annotation that says it has been stale ``seconds`` at the cycle (None: not stale)."""
    return {} if seconds is None else {annotation: rfc3339(T - seconds)}


def job(min_member: int, stale: float | None = None) -> dict[str, Any]:
    return podgroup("job-1", min_member, annotations=stale_for(stale))


def kai_job(min_member: int, grace: str | None, stale: float | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": "q-1"}
    if grace is not None:
        spec["stalenessGracePeriod"] = grace
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "job-1", "namespace": "default", "annotations": stale_for(stale, KAI_STALE_SINCE)},
            "spec": spec}


def kai(raw: dict[str, Any]) -> dict[str, Any]:
    """A pod of KAI's PodGroup job-1 rather than the scheduler-plugins one."""
    raw["metadata"]["labels"].pop("pod-group.scheduling.sigs.k8s.io", None)
    raw["metadata"]["annotations"]["pod-group-name"] = "job-1"
    return raw


def child_pod(name: str, group: str, phase: str) -> dict[str, Any]:
    return status(member(name, cpu="1", group_name=group, node_name="node-1"), phase)


def train(stale: float | None = None, grace: str | None = None) -> dict[str, Any]:
    """A CompositePodGroup of two children, sub-group-0 (minCount 2) and sub-group-1 (minCount 1)."""
    made = composite("job-1", count=2)
    made["metadata"]["annotations"] = {**stale_for(stale),
                                       **({"koordpy.io/staleness-grace-period": grace} if grace else {})}
    return made


def sub_groups(*phases: str, stale: float | None = None, grace: str | None = None) -> list[dict[str, Any]]:
    """job-1-0..2 in sub-group-0, job-1-3 in sub-group-1, in these phases."""
    groups = ["sub-group-0"] * 3 + ["sub-group-1"]
    return [train(stale, grace), child("sub-group-0", 2, parent="job-1"), child("sub-group-1", 1, parent="job-1"),
            *(child_pod(f"job-1-{i}", g, phase) for i, (g, phase) in enumerate(zip(groups, phases, strict=True)))]


def cycle(*objects: dict[str, Any], now: float = T, state: SchedulerState | None = None,
          grace: float = 60.0, world: World | None = None) -> CycleResult:
    world = world if world is not None else World.from_objects([("test", o) for o in objects])
    snap = world.snapshot(frozenset({"koordpy"}))
    snap.stale_grace = grace
    return schedule(snap, state if state is not None else SchedulerState(), now)


def evicted(result: CycleResult) -> set[str]:
    return {d.pod.removeprefix("default/") for d in result.decisions if isinstance(d, Evict)}


def events(result: CycleResult, reason: str) -> list[Event]:
    return [d for d in result.decisions if isinstance(d, Event) and d.reason == reason]


NODE = node("node-1", cpu="64")


# -- IsStale (TestPodGroupInfo_IsStale) ---------------------------------------------------------

def _pod(name: str, phase: str, bound: bool = True) -> Pod:
    raw = pod(name, cpu="1", node_name="n1" if bound else None)
    return Pod.from_raw(status(raw, phase))


def _gang(min_member: int, *pods: Pod, parts: Any = None) -> Gang:
    """A gang as the view builds it: its non-terminal members, which of them no longer count
    (``liveness.loss`` on node n1 at T) and how many Succeeded."""
    live = [p for p in pods if p.phase not in ("Succeeded", "Failed")]
    gang = Gang("default/g", GangConfig(key="default/g", min_member=min_member, total_number=len(pods)), live,
                0.0, parts=parts)
    gang.lost = frozenset(p.key for p in live if p.node_name and loss(p, Node_n1, T) is not None)
    gang.succeeded = sum(1 for p in pods if p.phase == "Succeeded")
    return gang


def _reading(gang: Gang) -> Health | None:
    return health(gang, {})


Node_n1 = World.from_objects([("test", node("n1"))]).snapshot(frozenset()).nodes[0]


def test_is_stale_an_empty_gang_is_not() -> None:
    reading = _reading(_gang(1))
    assert reading is not None and not reading.stale


def test_is_stale_a_gang_with_no_running_member_is_not() -> None:
    # Nothing runs (all pending): nothing to evict.
    reading = _reading(_gang(2, _pod("a", "Pending", bound=False), _pod("b", "Pending", bound=False)))
    assert reading is not None and not reading.stale


def test_is_stale_a_gang_with_a_succeeded_member_is_not() -> None:
    reading = _reading(_gang(2, _pod("a", "Running"), _pod("b", "Succeeded")))
    assert reading is not None and not reading.stale


def test_is_stale_a_gang_running_below_its_minimum_is() -> None:
    reading = _reading(_gang(2, _pod("a", "Running"), _pod("b", "Failed")))
    assert reading is not None and reading.stale and (reading.live, reading.minimum) == (1, 2)


def test_is_stale_a_gang_running_its_minimum_is_not() -> None:
    reading = _reading(_gang(2, _pod("a", "Running"), _pod("b", "Running"), _pod("c", "Failed")))
    assert reading is not None and not reading.stale


def test_is_stale_a_gang_with_a_part_below_its_minimum_is() -> None:
    a, b, c = _pod("a", "Running"), _pod("b", "Running"), _pod("c", "Running")
    parts = (2, ((frozenset({a.key, b.key}), 2), (frozenset({c.key, "default/d"}), 2)))
    reading = _reading(_gang(3, a, b, c, parts=parts))
    assert reading is not None and reading.stale and reading.parts == (1, 2)


def test_is_stale_a_gang_whose_parts_all_meet_their_minimum_is_not() -> None:
    a, b, c = _pod("a", "Running"), _pod("b", "Running"), _pod("c", "Running")
    parts = (2, ((frozenset({a.key, b.key}), 2), (frozenset({c.key}), 1)))
    reading = _reading(_gang(3, a, b, c, parts=parts))
    assert reading is not None and not reading.stale


def test_is_stale_terminating_members_do_not_count_and_all_terminating_is_not_stale() -> None:
    leaving = _pod("b", "Running").model_copy(update={"deleting": True})
    reading = _reading(_gang(2, _pod("a", "Running"), leaving))
    assert reading is not None and reading.stale and reading.evictable == ("default/a",)
    only = _reading(_gang(2, leaving))
    assert only is not None and not only.stale


# -- TestStaleGangEviction ----------------------------------------------------------------------

def test_sanity_a_whole_gang_is_left_alone() -> None:
    result = cycle(NODE, job(1), running("job-1-0"))
    assert evicted(result) == set() and not events(result, "GangStale")


def test_a_recently_stale_gang_is_not_evicted() -> None:
    result = cycle(NODE, job(2, stale=10), running("job-1-0"), failed("job-1-1"))
    assert evicted(result) == set()
    assert not events(result, "GangStale")  # it was stale before this cycle: nothing new to say
    assert result.next_deadline == T + 50  # woken when its grace ends


def test_a_gang_stale_long_ago_is_evicted_but_its_failed_member_is_not_touched() -> None:
    result = cycle(NODE, job(2, stale=120), running("job-1-0"), failed("job-1-1"))
    assert evicted(result) == {"job-1-0"}
    [told] = events(result, "StaleGangEvicted")
    assert (told.kind, told.obj) == ("PodGroup", "default/job-1")
    assert "1 member running, minimum 2" in told.message and "grace of 60s" in told.message
    [evict] = [d for d in result.decisions if isinstance(d, Evict)]
    assert evict.reason == "StaleGangEviction" and evict.message == told.message


def test_a_gang_that_meets_its_minimum_is_not_evicted_and_its_old_stale_since_is_cleared() -> None:
    result = cycle(NODE, job(1, stale=120), running("job-1-0"), failed("job-1-1"))
    assert evicted(result) == set()
    [clear] = [d for d in result.decisions if isinstance(d, ObjectAnnotate)]
    assert (clear.key, clear.annotation, clear.value) == ("default/job-1", STALE_SINCE, None)


def test_a_stale_gang_with_sub_groups_is_evicted() -> None:
    # sub-group-1 (minCount 1) lost its only member: the composite runs one of the two parts it needs.
    result = cycle(NODE, *sub_groups("Running", "Running", "Running", "Failed", stale=120))
    assert evicted(result) == {"job-1-0", "job-1-1", "job-1-2"}


def test_a_gang_whose_sub_groups_meet_their_minimums_is_not_evicted() -> None:
    result = cycle(NODE, *sub_groups("Running", "Running", "Failed", "Running", stale=120))
    assert evicted(result) == set()


def test_a_job_grace_shorter_than_the_default_evicts() -> None:
    result = cycle(NODE, kai_job(2, "10s", stale=20), kai(running("job-1-0")), kai(failed("job-1-1")))
    assert evicted(result) == {"job-1-0"}


def test_a_job_grace_longer_than_the_default_does_not_evict() -> None:
    result = cycle(NODE, kai_job(2, "120s", stale=90), kai(running("job-1-0")), kai(failed("job-1-1")))
    assert evicted(result) == set()
    assert result.next_deadline == T + 30


def test_a_negative_job_grace_never_evicts() -> None:
    result = cycle(NODE, kai_job(2, "-1s", stale=3600), kai(running("job-1-0")), kai(failed("job-1-1")))
    assert evicted(result) == set()
    assert result.next_deadline is None


def test_a_zero_job_grace_evicts_at_once() -> None:
    # Stale for the first time in this cycle, evicted in it; since is kept where KAI keeps it.
    result = cycle(NODE, kai_job(2, "0s"), kai(running("job-1-0")), kai(failed("job-1-1")))
    assert evicted(result) == {"job-1-0"}
    [mark] = [d for d in result.decisions if isinstance(d, ObjectAnnotate)]
    assert (mark.kind.group, mark.annotation, mark.value) == ("scheduling.run.ai", KAI_STALE_SINCE, rfc3339(T))
    assert [e.reason for e in result.decisions if isinstance(e, Event)] == ["GangStale", "StaleGangEvicted"]
    assert events(result, "GangStale")[0].obj == "default/job-1-0"  # KAI's PodGroup takes no Event: its first pod


def test_a_job_grace_with_sub_groups_evicts_only_the_running_members() -> None:
    result = cycle(NODE, *sub_groups("Running", "Running", "Running", "Failed", stale=10, grace="5s"))
    assert evicted(result) == {"job-1-0", "job-1-1", "job-1-2"}


def test_a_gang_with_a_succeeded_member_is_not_evicted() -> None:
    result = cycle(NODE, job(3, stale=120), succeeded("job-1-0"), running("job-1-1"), running("job-1-2"))
    assert evicted(result) == set()


def test_a_gang_with_one_member_left_running_after_the_others_succeeded_is_not_evicted() -> None:
    result = cycle(NODE, job(3, stale=120), succeeded("job-1-0"), succeeded("job-1-1"), running("job-1-2"))
    assert evicted(result) == set()


def test_a_gang_with_a_succeeded_member_in_one_sub_group_is_not_evicted() -> None:
    result = cycle(NODE, *sub_groups("Succeeded", "Running", "Running", "Failed", stale=120))
    assert evicted(result) == set()


# -- explain ------------------------------------------------------------------------------------

def _explained(*objects: dict[str, Any], grace: float = 60.0) -> dict[str, str]:
    from koordpy.core.explain import explain_podgroup

    snap = World.from_objects([("test", o) for o in objects]).snapshot(frozenset({"koordpy"}))
    snap.stale_grace = grace
    found = explain_podgroup(snap, SchedulerState(), T, "default/job-1")
    assert found is not None
    [gang] = found.gangs
    return dict(gang.details)


def test_explain_says_since_when_a_gang_is_stale_and_when_it_is_evicted() -> None:
    facts = _explained(NODE, job(2, stale=10), running("job-1-0"), failed("job-1-1"))
    assert facts["stale"] == (f"gang default/job-1 is stale since {rfc3339(T - 10)}: 1 member running, minimum 2; "
                              f"its running members are evicted at {rfc3339(T + 50)} unless replacements bind")
    assert "stale" not in _explained(NODE, job(1), running("job-1-0"), failed("job-1-1"))


def test_explain_says_a_gang_with_a_negative_grace_is_only_reported() -> None:
    facts = _explained(NODE, job(2), running("job-1-0"), failed("job-1-1"), grace=-1)
    assert facts["stale"].endswith("its grace is negative: reported only, never evicted")
    assert f"stale since {rfc3339(T)}" in facts["stale"]  # not kept anywhere yet: it would be from now


# -- what a cycle reads again -----------------------------------------------------------------

def test_a_node_that_fails_under_a_running_gang_is_noticed_though_no_pod_changed() -> None:
    # Two cycles on one standing state: the second sees only node-2 change (a NoExecute taint its
    # member does not tolerate, as the node lifecycle controller puts on a node it lost): the gang
    # is read again through the nodes its members are on.
    objs = [NODE, node("node-2", cpu="64"), job(2), running("job-1-0"), running("job-1-1", node_name="node-2")]
    w = World.from_objects([("test", o) for o in objs])
    state = SchedulerState()
    first = cycle(world=w, state=state)
    assert not events(first, "GangStale") and state.stale_since == {}
    tainted = node("node-2", cpu="64")
    tainted["spec"] = {"taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
                                   "timeAdded": rfc3339(T)}]}
    w.stores["nodes"]["node-2"] = Node_of(tainted)
    second = cycle(world=w, state=state, now=T + 1)
    assert [e.obj for e in events(second, "GangStale")] == ["default/job-1"]
    assert state.stale_since == {"default/job-1": T + 1}
    assert second.next_deadline == T + 61
    # Nothing changes: the next cycles read the stale gang alone, and evict it at its grace's end.
    assert evicted(cycle(world=w, state=state, now=T + 30)) == set()
    assert evicted(cycle(world=w, state=state, now=T + 61)) == {"job-1-0", "job-1-1"}


def Node_of(raw: dict[str, Any]) -> Any:
    return World.from_objects([("test", raw)]).stores["nodes"][raw["metadata"]["name"]]


def test_another_schedulers_gang_is_neither_judged_nor_has_its_stale_since_cleared() -> None:
    # KAI's own gang (its pods are KAI's), stale since long ago by KAI's clock: koordpy leaves it be.
    def theirs(raw: dict[str, Any]) -> dict[str, Any]:
        raw["spec"]["schedulerName"] = "kai-scheduler"
        return kai(raw)

    result = cycle(NODE, kai_job(2, None, stale=120), theirs(running("job-1-0")), theirs(failed("job-1-1")))
    assert evicted(result) == set() and not [d for d in result.decisions if isinstance(d, ObjectAnnotate)]
    whole = cycle(NODE, kai_job(1, None, stale=120), theirs(running("job-1-0")))
    assert not [d for d in whole.decisions if isinstance(d, ObjectAnnotate)]
