"""Issue 20, two fixes found in review of the Workload PodGroup dialect: a ``basic`` group without a
topology constraint gets its ``PodGroupInitiallyScheduled`` condition as every group kube-scheduler
v1.37 schedules does (its group cycle takes a basic group with a minimum of 1); and a gang waiting for
``minCount`` of its pods to exist says so in kube-scheduler's terms, not Koordinator's."""

from __future__ import annotations

from koordpy.core.cycle import schedule
from koordpy.core.messages import render
from koordpy.core.state import SchedulerState
from koordpy.core.verdicts import TooFewMembers
from tests.builders import node
from tests.core.dialects.test_upstream import group, member, run
from tests.core.dialects.test_upstream_status import NAMES, updates, world, written


def test_a_basic_group_without_a_topology_gets_initially_scheduled_true_once_a_pod_binds() -> None:
    w = world(node("n0"), group(), member("t-0"), member("t-1"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    assert len(result.binds) == 1  # one node of 8 CPUs, two 8-CPU pods: one binds
    cond = written(result)
    assert (cond.status, cond.reason, cond.message) == ("True", "Scheduled", "")


def test_a_basic_group_without_a_topology_none_of_whose_pods_fit_is_unschedulable() -> None:
    w = world(node("n0", cpu="4"), group(), member("t-0"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    assert result.binds == []
    cond = written(result)
    assert (cond.status, cond.reason) == ("False", "Unschedulable")
    assert cond.message == result.waiting["default/t-0"]


def test_a_basic_group_still_binds_its_pods_one_by_one_without_a_quorum() -> None:
    out = run(node("n0"), node("n1"), group(), *(member(f"t-{i}") for i in range(3)))
    assert len(out.bound) == 2 and len(out.pending) == 1
    assert "minCount" not in out.pending[next(iter(out.pending))]


def test_a_gang_waiting_for_its_pods_uses_kube_schedulers_terms() -> None:
    w = world(node("n0"), node("n1"), node("n2"), group(min_count=3), member("t-0"), member("t-1"))
    result = schedule(w.snapshot(NAMES), SchedulerState(), w.now)
    assert result.waiting["default/t-0"] == ("waiting for minCount pods of PodGroup default/train to exist: "
                                             "2 of minCount 3 created")
    assert "default/train" in updates(result)


def test_other_gangs_waiting_for_their_pods_keep_koordinators_words() -> None:
    assert render(TooFewMembers("default/g", 2, 4)).startswith("gang child pod not collect enough")
    assert render(TooFewMembers("default/g", 2, 4, "PodGroup scheduling.sigs.k8s.io")).startswith(
        "gang child pod not collect enough")
