"""``simulate`` plays v1.37's Priority admission for CompositePodGroups as for PodGroups: what the
API server refuses is refused."""

from __future__ import annotations

import pytest

from koordpy.sim.errors import InputError
from koordpy.sim.simulator import World
from tests.builders import priority_class
from tests.core.dialects.test_upstream_composite import composite


def test_a_composite_podgroup_the_priority_admission_refuses_is_refused() -> None:
    # v1.37.2's Priority admission (plugin/pkg/admission/priority, admitCompositePodGroup) treats a
    # CompositePodGroup as it treats a PodGroup: a PriorityClass that does not exist, or a
    # preemptionPolicy other than the one it computes from the class, is refused, so the
    # composite's gang never reaches a scheduler.
    never = priority_class("never", 1000, policy="Never")
    with pytest.raises(InputError, match=r"CompositePodGroup default/train.*spec\.preemptionPolicy"):
        World.from_objects([("t.yaml", o) for o in (
            never, composite(priorityClassName="never", preemptionPolicy="PreemptLowerPriority"))])
    with pytest.raises(InputError, match=r"spec\.priorityClassName"):
        World.from_objects([("t.yaml", composite(priorityClassName="nosuch"))])


def test_a_composite_podgroup_admitted_takes_its_priority_class_value() -> None:
    # The admission writes the class's value into spec.priority (the composite's pods are held to it).
    high = priority_class("high", 1000)
    world = World.from_objects([("t.yaml", o) for o in (high, composite(priorityClassName="high"))])
    assert world.stores["composite_podgroups"]["default/train"].priority == 1000
