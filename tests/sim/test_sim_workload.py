"""Issue 20: ``koordpy simulate`` and Kubernetes' own PodGroups (``scheduling.k8s.io/v1beta1``). The
Priority admission applies to a PodGroup on its way in as it does to a pod (v1.37: a group without
``priority`` gets its PriorityClass's value, or the global default class and its value; a class
that does not exist refuses it); a ``PodGroupInitiallyScheduled=True`` read from a manifest is
terminal, and the group's later pods are held to ``minCount`` all the same (issue 29)."""

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


def test_initially_scheduled_true_read_does_not_lower_the_quorum_of_replacements() -> None:
    # Issue 29, item 2: minCount 4 met once (the condition says so, as koordpy writes it after the first
    # bind), two members running, two replacements pending, room for one: kube-scheduler binds none
    # ("minCount (4) cannot be satisfied"), since it counts assigned and placed pods every time and
    # reads no condition. Koordpy used to bind one and leave the gang at 3 of 4 holding a node.
    running = [member(f"t-{i}", node_name=f"n{i}") for i in range(2)]
    replacements = [member(f"t-{i}") for i in range(2, 4)]
    out = simulate(world(*(node(f"n{i}") for i in range(3)), scheduled(group(min_count=4)), *running,
                         *replacements))
    assert not set(out.bound) - {"default/t-0", "default/t-1"}
    assert set(out.pending) == {"default/t-2", "default/t-3"}
    # Room for both: they bind together.
    out = simulate(world(*(node(f"n{i}") for i in range(4)), scheduled(group(min_count=4)), *running,
                         *replacements))
    assert {out.bound["default/t-2"], out.bound["default/t-3"]} == {"n2", "n3"}


def test_initially_scheduled_true_still_holds_later_pods_to_the_groups_domain() -> None:
    nodes = [node("r1-0", labels={RACK: "r1"}), node("r2-0", labels={RACK: "r2"})]
    running = member("t-0", node_name="r1-0", cpu="4")
    out = simulate(world(*nodes, scheduled(group(min_count=2, topology=RACK)), running,
                         member("t-1", cpu="4"), member("t-2", cpu="8")))
    assert out.bound == {"default/t-1": "r1-0"}  # t-2 does not fit in r1 and does not leave it
    assert set(out.pending) == {"default/t-2"}


def test_simulate_keeps_a_true_condition_it_read_when_the_later_pods_wait() -> None:
    w = world(node("n0", cpu="1"), scheduled(group(min_count=1)), member("t-0"))
    out = simulate(w)
    assert out.bound == {}
    kept = upstream.groups(w.snapshot(frozenset()))["default/train"].condition(INITIALLY_SCHEDULED)
    assert kept is not None and (kept.status, kept.reason) == ("True", "Scheduled")
