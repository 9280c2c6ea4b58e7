"""Issue 29, item 1: kube-scheduler v1.37 tries every queued pod of a PodGroup (each placed with the
ones before it assumed), passes over a pod that fits nowhere, gives up only once the minimum can no
longer be met, and then binds each pod whose own placement succeeded
(``podGroupSchedulingDefaultAlgorithm``). Koordinator's Strict gangs keep the longest rank-order
prefix that fits (``Gang.skips`` is the dialect's choice)."""

from __future__ import annotations

from typing import Any

from tests.builders import node, pod, podgroup, priority_class
from tests.core.dialects.test_upstream import RACK, group, member, run

NOWHERE = {"example.com/pool": "absent"}  # a label no node has


def three(*, stray: int = 1, cpu: str = "8", **kw: Any) -> list[dict[str, Any]]:
    """t-0, t-1, t-2 of group ``train``; pod ``stray`` asks for a label no node has."""
    out = [member(f"t-{i}", cpu=cpu, **kw) for i in range(3)]
    out[stray]["spec"]["nodeSelector"] = NOWHERE
    return out


def free_nodes(n: int = 3, **labels: str) -> list[dict[str, Any]]:
    return [node(f"n{i}", labels=dict(labels)) for i in range(n)]


def test_a_basic_group_binds_the_pods_that_fit_past_one_that_fits_nowhere() -> None:
    # What the Job controller makes for a plain Job: a basic group. The middle pod fits nowhere; the
    # other two bind (the prefix rule stopped at t-1 and bound t-0 alone).
    out = run(free_nodes(), group(), three())
    assert set(out.bound) == {"default/t-0", "default/t-2"}
    # The pod passed over says why, in kube-scheduler's words for that pod.
    assert out.pending["default/t-1"] == "0/3 nodes are available: 3 node(s) didn't match Pod's node " \
                                         "affinity/selector."


def test_the_first_pod_fitting_nowhere_does_not_hold_the_others() -> None:
    out = run(free_nodes(), group(), three(stray=0))
    assert set(out.bound) == {"default/t-1", "default/t-2"}


def test_a_gang_binds_when_the_pods_that_fit_meet_min_count() -> None:
    out = run(free_nodes(), group(min_count=2), three())
    assert set(out.bound) == {"default/t-0", "default/t-2"}
    assert "didn't match Pod's node affinity/selector" in out.pending["default/t-1"]


def test_a_gang_binds_none_when_the_pods_that_fit_fall_short_of_min_count() -> None:
    out = run(free_nodes(), group(min_count=3), three())
    assert out.bound == {}
    assert "didn't match Pod's node affinity/selector" in out.pending["default/t-1"]
    # The others quote it, in kube-scheduler's words (its group cycle's "pod group is unschedulable").
    assert out.pending["default/t-0"].startswith("pod group default/train is unschedulable: pod default/t-1: ")


def test_room_for_fewer_than_min_count_binds_none_and_room_for_more_binds_every_pod_that_fits() -> None:
    # Like pods: the room decides, the search stays a prefix (t-0 and t-1, in rank order).
    pods = [member(f"t-{i}") for i in range(4)]
    assert run(free_nodes(2), group(min_count=3), pods).bound == {}
    out = run(free_nodes(3), group(min_count=2), pods)
    assert set(out.bound) == {"default/t-0", "default/t-1", "default/t-2"}


def test_with_a_topology_key_the_pods_that_fit_in_the_chosen_domain_bind() -> None:
    # r1 holds two nodes, r2 one; t-1 fits nowhere. The group binds t-0 and t-2 in one rack, as
    # kube-scheduler evaluates each rack and passes over the pod that fits in none.
    racked = [node(f"{r}-{i}", labels={RACK: r}) for r, n in (("r1", 2), ("r2", 1)) for i in range(n)]
    for least in (None, 2):
        out = run(racked, group(topology=RACK, min_count=least), three())
        assert set(out.bound) == {"default/t-0", "default/t-2"}
        assert {n[:2] for n in out.bound.values()} == {"r1"}
    assert run(racked, group(topology=RACK, min_count=3), three()).bound == {}


def test_a_pod_that_fits_only_outside_the_chosen_domain_is_passed_over() -> None:
    # t-0 asks for the label only r2's node has; r1 takes the other two. minCount 2: r1 with t-1 and
    # t-2 meets it; t-0 waits (it cannot join them in r1).
    special = {"example.com/special": "yes"}
    racked = [node("r1-0", labels={RACK: "r1"}), node("r1-1", labels={RACK: "r1"}),
              node("r2-0", labels={RACK: "r2", **special})]
    pods = [member("t-0", nodeSelector=special), member("t-1"), member("t-2")]
    out = run(racked, group(topology=RACK, min_count=2), pods)
    assert set(out.bound) == {"default/t-1", "default/t-2"}
    assert set(out.pending) == {"default/t-0"}


def test_preemption_makes_room_for_the_pods_that_can_use_it() -> None:
    # Two nodes, each full with a low pod; a high gang of minCount 2 whose middle pod fits nowhere:
    # preemption evicts for t-0 and t-2 (kube-scheduler's group PostFilter runs the same cycle), and
    # they bind once the victims are gone.
    low = [pod(f"low-{i}", node_name=f"n{i}", priority_class="low") for i in range(2)]
    out = run(priority_class("low", 10), priority_class("high", 1000), free_nodes(2), low,
              group(min_count=2, priorityClassName="high"), three(priority_class="high"))
    assert sorted(out.preempted) == ["default/low-0", "default/low-1"]
    assert {out.bound["default/t-0"], out.bound["default/t-2"]} == {"n0", "n1"}
    assert "default/t-1" in out.pending


def test_a_koordinator_strict_gang_keeps_the_prefix_rule() -> None:
    # The same three pods in a Koordinator gang of minMember 2: the longest rank-order prefix that
    # fits is t-0 alone, short of the minimum, so none binds (seed 001's all-or-nothing in rank order).
    pods = [pod(f"t-{i}", group="train") for i in range(3)]
    pods[1]["spec"]["nodeSelector"] = NOWHERE
    out = run(free_nodes(), podgroup("train", 2), pods)
    assert out.bound == {}
