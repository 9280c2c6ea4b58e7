"""Issue 20: ``koordpy simulate`` and Kubernetes' own PodGroups (``scheduling.k8s.io/v1beta1``). The
Priority admission applies to a PodGroup on its way in as it does to a pod (v1.37: a group without
``priority`` gets its PriorityClass's value, or the global default class and its value; a class
that does not exist refuses it); a ``PodGroupInitiallyScheduled=True`` read from a manifest is
terminal: the group's later pods are not held to ``minCount`` again."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.workload import INITIALLY_SCHEDULED
from koordpy.core.dialects import upstream
from koordpy.sim.errors import InputError
from koordpy.sim.simulator import World, simulate
from tests.builders import node, priority_class
from tests.core.dialects.test_upstream import group, member

RACK = "topology.kubernetes.io/rack"


def world(*objects: dict[str, Any]) -> World:
    return World.from_objects([("t.yaml", o) for o in objects])


def scheduled(body: dict[str, Any]) -> dict[str, Any]:
    body["status"] = {"conditions": [{"type": INITIALLY_SCHEDULED, "status": "True", "reason": "Scheduled",
                                      "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    return body


def test_a_podgroup_without_priority_gets_its_priority_classes_value() -> None:
    w = world(priority_class("high", 1000), group(min_count=1, priorityClassName="high"))
    assert upstream.groups(w.snapshot(frozenset()))["default/train"].priority == 1000


def test_a_podgroup_without_a_class_gets_the_global_default_and_its_name() -> None:
    default = priority_class("usual", 50)
    default["globalDefault"] = True
    w = world(group(min_count=1), default)  # the class may come after the group
    found = upstream.groups(w.snapshot(frozenset()))["default/train"]
    assert (found.priority, found.priority_class_name) == (50, "usual")
    assert upstream.groups(world(group(min_count=1)).snapshot(frozenset()))["default/train"].priority == 0


def test_a_podgroups_priority_given_is_kept() -> None:
    w = world(priority_class("high", 1000), group(min_count=1, priorityClassName="high", priority=1000))
    assert upstream.groups(w.snapshot(frozenset()))["default/train"].priority == 1000


def test_a_podgroup_naming_a_missing_priority_class_is_refused_like_a_pod() -> None:
    with pytest.raises(InputError) as err:
        world(node("n0"), group(min_count=1, priorityClassName="missing"), member("t-0"))
    assert str(err.value) == ("t.yaml: PodGroup default/train: spec.priorityClassName: no PriorityClass named "
                              "'missing'")


def test_initially_scheduled_true_read_holds_later_pods_to_no_quorum() -> None:
    # minCount 3 met once (the condition says so); one replacement pod exists now: it binds alone,
    # as kube-scheduler's group met its minimum and is not held to it again.
    out = simulate(world(node("n0"), scheduled(group(min_count=3)), member("t-3")))
    assert out.bound == {"default/t-3": "n0"}
    # Not initially scheduled: the same pod waits for minCount pods.
    out = simulate(world(node("n0"), group(min_count=3), member("t-3")))
    assert out.bound == {}


def test_initially_scheduled_true_still_holds_later_pods_to_the_groups_domain() -> None:
    nodes = [node("r1-0", labels={RACK: "r1"}), node("r2-0", labels={RACK: "r2"})]
    running = member("t-0", node_name="r1-0", cpu="4")
    out = simulate(world(*nodes, scheduled(group(min_count=3, topology=RACK)), running,
                         member("t-1", cpu="4"), member("t-2", cpu="8")))
    assert out.bound == {"default/t-1": "r1-0"}  # t-2 does not fit in r1 and does not leave it
    assert set(out.pending) == {"default/t-2"}


def test_simulate_keeps_a_true_condition_it_read_when_the_later_pods_wait() -> None:
    w = world(node("n0", cpu="1"), scheduled(group(min_count=1)), member("t-0"))
    out = simulate(w)
    assert out.bound == {}
    kept = upstream.groups(w.snapshot(frozenset()))["default/train"].condition(INITIALLY_SCHEDULED)
    assert kept is not None and (kept.status, kept.reason) == ("True", "Scheduled")
