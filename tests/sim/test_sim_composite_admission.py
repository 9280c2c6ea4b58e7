"""Adversarial review of issue 29, item 12 (simulate refuses what the API server refuses). Each test names
the defect it shows; each fails on the code reviewed."""

from __future__ import annotations

import pytest

from koordpy.sim.errors import InputError
from koordpy.sim.simulator import World
from tests.builders import priority_class
from tests.core.dialects.test_upstream_composite import composite


def test_a_composite_podgroup_the_priority_admission_refuses_is_refused() -> None:
    # Defect: v1.37.2's Priority admission (plugin/pkg/admission/priority, admitCompositePodGroup) treats a
    # CompositePodGroup as it treats a PodGroup: a PriorityClass that does not exist, or a
    # preemptionPolicy other than the one it computes from the class, is refused. The simulator plays
    # that admission for PodGroups (World._admit_podgroup) and not at all for CompositePodGroups: both
    # are accepted, and the composite's gang is scheduled as if the API server had let it in.
    never = priority_class("never", 1000, policy="Never")
    with pytest.raises(InputError, match=r"spec\.preemptionPolicy"):
        World.from_objects([("t.yaml", o) for o in (
            never, composite(priorityClassName="never", preemptionPolicy="PreemptLowerPriority"))])
    with pytest.raises(InputError, match=r"spec\.priorityClassName"):
        World.from_objects([("t.yaml", composite(priorityClassName="nosuch"))])
