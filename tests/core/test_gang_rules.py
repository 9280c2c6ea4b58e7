"""Gang rules of issue 6: Strict gangs with more pods than their minimum, bound members and
once-satisfied, one-sided GangGroup claims, and one bad job never stopping the queue."""

from typing import Any

import pytest

from koordpy.api import Node, Pod, PodGroup
from koordpy.core import cycle as cycle_module
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Event, SetPodScheduledFalse
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from tests.builders import SEED_12, SPINE_BLOCK_CNT, node, pod, podgroup, run, spine_block_nodes

TWO = [node("n0"), node("n1")]
ANN_GROUPS = "gang.scheduling.koordinator.sh/groups"


def snap(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], pgs: list[dict[str, Any]]) -> Snapshot:
    return Snapshot(nodes=[Node.from_raw(n) for n in nodes], pods=[Pod.from_raw(p) for p in pods],
                    podgroups={f"{g['metadata']['namespace']}/{g['metadata']['name']}": PodGroup.from_raw(g)
                               for g in pgs})


# -- Strict gangs with more pods than minMember ------------------------------------------------

def test_strict_gang_binds_its_minimum_in_rank_order_and_the_rest_wait() -> None:
    pods = [pod(f"p-{i}", group="g", index=i) for i in (2, 0, 1)]
    out = run(TWO, podgroup("g", 2), pods)
    assert out.bound == {"default/p-0": "n0", "default/p-1": "n1"}
    assert "Insufficient cpu" in out.pending["default/p-2"]
    assert out.groups["default/g"]["phase"] == "Scheduled"


def test_strict_gang_below_its_minimum_releases_everything() -> None:
    out = run(TWO, podgroup("g", 3), [pod(f"p-{i}", group="g") for i in range(4)])
    assert out.bound == {}
    assert set(out.pending) == {f"default/p-{i}" for i in range(4)}


def test_strict_gang_with_topology_binds_the_largest_prefix_that_gathers() -> None:
    # MustGather in one spine: spine-0 has 5 nodes, so 5 of 7 whole-node pods fit (>= minMember 4).
    must_spine = [{"layer": "SpineLayer", "strategy": "MustGather"}]
    out = run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT, podgroup("g", 4, gather=must_spine),
              [pod(f"p-{i}", group="g", index=i) for i in range(7)])
    assert {out.bound[f"default/p-{i}"] for i in range(5)} == {f"node-{i}" for i in range(5)}
    # Once satisfied, the last two are ordinary pods (seed 001, "After Gang") and go anywhere.
    assert {f"default/p-{i}" for i in (5, 6)} <= set(out.bound)


def test_the_members_left_over_say_the_minimum_was_reached() -> None:
    nodes = [node("n0"), node("n1"), node("n2", cpu="4")]
    out = run(nodes, podgroup("g", 2), [pod(f"p-{i}", group="g", index=i) for i in range(4)])
    assert len(out.bound) == 2
    messages = [out.pending[f"default/p-{i}"] for i in (2, 3)]
    assert any("Insufficient cpu" in m for m in messages)


# -- once-satisfied counts bound members -------------------------------------------------------

def test_once_satisfied_annotation_gang_with_bound_members_schedules_new_pods_alone() -> None:
    ann = {"gang.scheduling.koordinator.sh/name": "g", "gang.scheduling.koordinator.sh/min-available": "3"}
    bound = [pod(f"g-{i}", annotations=ann, node_name=f"n{i}") for i in range(3)]
    out = run([*TWO, node("n2"), node("n3")], bound, pod("g-new", annotations=ann))
    assert out.bound == {"default/g-new": "n3"}


def test_once_satisfied_holds_after_a_restart_with_fresh_state() -> None:
    # A replaced pod of a satisfied gang: the scheduler's memory is empty, the bound members decide.
    bound = [pod(f"g-{i}", group="g", node_name=f"n{i}") for i in range(2)]
    result = schedule(snap([*TWO, node("n2")], [*bound, pod("g-replaced", group="g")], [podgroup("g", 2)]),
                      SchedulerState(), 0.0)
    assert [(b.pod, b.node) for b in result.binds] == [("default/g-replaced", "n2")]


# -- GangGroups: only mutual claims tie gangs together -----------------------------------------

def _pg(ns: str, name: str, min_member: int, groups: list[str] | None = None) -> dict[str, Any]:
    pg = podgroup(name, min_member, groups=groups)
    pg["metadata"]["namespace"] = ns
    return pg


def _member(ns: str, name: str, group: str) -> dict[str, Any]:
    p = pod(name, group=group)
    p["metadata"]["namespace"] = ns
    return p


def test_a_one_sided_claim_from_another_namespace_never_blocks_the_claimed_gang() -> None:
    victim = [_pg("team-b", "victim", 2), _member("team-b", "v-0", "victim"), _member("team-b", "v-1", "victim")]
    attacker = [_pg("team-a", "attacker", 1, groups=["team-a/attacker", "team-b/victim"]),
                _member("team-a", "a-0", "attacker")]
    result = schedule(snap([node(f"n{i}") for i in range(4)], [p for p in [*attacker, *victim] if p["kind"] == "Pod"],
                           [p for p in [*attacker, *victim] if p["kind"] == "PodGroup"]), SchedulerState(), 0.0)
    assert sorted(b.pod for b in result.binds) == ["team-b/v-0", "team-b/v-1"]
    msg = result.pending["team-a/a-0"]
    assert '"team-b/victim" in another namespace' in msg and "does not name it back" in msg


def test_the_claiming_gang_follows_once_the_claimed_gang_is_bound() -> None:
    out = run([node(f"n{i}") for i in range(4)], _pg("team-b", "victim", 2), _member("team-b", "v-0", "victim"),
              _member("team-b", "v-1", "victim"),
              _pg("team-a", "attacker", 1, groups=["team-a/attacker", "team-b/victim"]),
              _member("team-a", "a-0", "attacker"))
    assert set(out.bound) == {"team-b/v-0", "team-b/v-1", "team-a/a-0"}


def test_mutual_claims_across_namespaces_still_form_one_ganggroup() -> None:
    groups = ["ns-a/a", "ns-b/b"]
    out = run(TWO, _pg("ns-a", "a", 1, groups), _pg("ns-b", "b", 2, groups), _member("ns-a", "a-0", "a"),
              _member("ns-b", "b-0", "b"), _member("ns-b", "b-1", "b"))
    assert out.bound == {}  # three whole-node pods, two nodes: the GangGroup binds nothing
    assert all('GangGroup "ns-a/a,ns-b/b"' in m or m.startswith("0/2 nodes") for m in out.pending.values())


# -- one job's failure never stops the queue ---------------------------------------------------

def test_a_job_whose_evaluation_raises_is_isolated_and_the_rest_schedule(monkeypatch: pytest.MonkeyPatch) -> None:
    real = cycle_module.Cycle._job

    def exploding(self: cycle_module.Cycle, job: Any, preempt: bool = True) -> None:
        if job.id == "default/bad":
            self.placer.binpack(job.pods[:1], Statement(self.cluster))  # half-done work
            raise RuntimeError("boom")
        real(self, job, preempt)

    monkeypatch.setattr(cycle_module.Cycle, "_job", exploding)
    state = SchedulerState()
    s = snap([node("n0"), node("n1")], [pod("bad-0", group="bad"), pod("good-0", group="good"),
                                       pod("good-1", group="good")], [podgroup("bad", 1), podgroup("good", 2)])
    result = schedule(s, state, 0.0)
    assert sorted(b.pod for b in result.binds) == ["default/good-0", "default/good-1"]
    assert "boom" in result.pending["default/bad-0"]
    assert any(isinstance(d, SetPodScheduledFalse) and d.pod == "default/bad-0" for d in result.decisions)
    assert any(isinstance(d, Event) and d.reason == "FailedScheduling" and "boom" in d.message
               for d in result.decisions)


def test_what_a_job_that_raises_added_to_the_result_is_gone_and_the_jobs_before_it_keep_theirs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The result's rollback (issue 32): job c raises once bound, job e once preemption planned for it;
    their binds, decisions, gangs placed and preemption attempts are gone with their transactions, and
    what jobs a (bound), b (waiting, one preemption attempt) and d (bound after c) added stays."""
    real_bind, real_post_filter = cycle_module.Cycle.bind, cycle_module.Cycle.post_filter

    def bind(self: cycle_module.Cycle, placed: dict[str, int]) -> None:
        real_bind(self, placed)
        if "default/c-0" in placed:
            raise RuntimeError("c boom")

    def post_filter(self: cycle_module.Cycle, job: Any, *args: Any) -> Any:
        plan = real_post_filter(self, job, *args)
        if job.id == "default/e":
            raise RuntimeError("e boom")
        return plan

    monkeypatch.setattr(cycle_module.Cycle, "bind", bind)
    monkeypatch.setattr(cycle_module.Cycle, "post_filter", post_filter)
    sizes = {"a": (1, 1), "b": (5, 5), "c": (1, 1), "d": (1, 1), "e": (3, 3)}  # gang -> (pods, minMember)
    s = snap([node(f"n{i}") for i in range(4)],
             [pod(f"{g}-{i}", group=g) for g, (n, _) in sizes.items() for i in range(n)],
             [podgroup(g, least) for g, (_, least) in sizes.items()])
    result = schedule(s, SchedulerState(), 0.0)
    assert set(result.job_errors) == {"default/c", "default/e"}
    assert sorted(b.pod for b in result.binds) == ["default/a-0", "default/d-0"]
    assert sorted(result.bound) == ["default/a-0", "default/d-0"]
    assert result.gangs_placed == ["default/a", "default/d"]
    assert result.preemption_attempts == 1  # b's: e's plan went with it
    assert all("insufficient" in result.waiting[f"default/b-{i}"].lower() for i in range(5))
    assert "c boom" in result.waiting["default/c-0"]
    assert all("e boom" in result.waiting[f"default/e-{i}"] for i in range(3))
    said = [d.pod for d in result.decisions if isinstance(d, SetPodScheduledFalse)]
    assert said == [*(f"default/b-{i}" for i in range(5)), "default/c-0", *(f"default/e-{i}" for i in range(3))]
