"""Issue 29, items 6 and 12 (the PodGroup part): input the API server refuses is refused the same way,
by ``koordpy simulate`` (exit 2 naming the field) and, live, as an invalid object whose pods wait
saying why: a ``spec.schedulingPolicy`` naming neither ``basic`` nor ``gang`` (a typo'd gang must not
bind partially as a basic group), fields the policy does not define, a topology key that is no label
key, a PodGroup whose ``preemptionPolicy`` is not the one the Priority admission computes."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from koordpy.cli.main import main
from koordpy.controller.cache import Cache
from koordpy.core.cycle import schedule
from koordpy.core.state import SchedulerState
from koordpy.sim.errors import InputError
from koordpy.sim.simulator import World
from tests.builders import node, priority_class
from tests.core.dialects.test_upstream import group, member

NAMES = frozenset({"koordpy"})


def policy_group(policy: Any, **spec: Any) -> dict[str, Any]:
    body = group(**spec)
    body["spec"]["schedulingPolicy"] = policy
    return body


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("Gang", policy_group({"Gang": {"minCount": 3}}),
     "spec.schedulingPolicy.Gang: unknown field (did you mean 'gang'?); the fields are: basic, gang"),
    ("empty", policy_group({}), "spec.schedulingPolicy: must set exactly one of basic and gang, got neither"),
    ("gang null", policy_group({"gang": None}),
     "spec.schedulingPolicy: must set exactly one of basic and gang, got neither"),
    ("no policy", {**group(), "spec": {}}, "spec.schedulingPolicy: must set exactly one of basic and gang"),
    ("basic minCount", policy_group({"basic": {"minCount": 3}}),
     "spec.schedulingPolicy.basic.minCount: unknown field; the fields are: none"),
    ("gang field", policy_group({"gang": {"minCount": 2, "minMember": 3}}),
     "spec.schedulingPolicy.gang.minMember: unknown field; the fields are: minCount"),
    ("topology key", group(min_count=2, topology="rack zone"),
     "spec.schedulingConstraints.topology[0].key: must be a node label key"),
    ("topology prefix", group(min_count=2, topology="/rack"),
     "spec.schedulingConstraints.topology[0].key: must be a node label key"),
]


@pytest.mark.parametrize(("bad", "error"), [(b, e) for _, b, e in BAD], ids=[i for i, _, _ in BAD])
def test_simulate_refuses_a_podgroup_the_api_server_refuses(bad: dict[str, Any], error: str) -> None:
    with pytest.raises(InputError) as err:
        World.from_objects([("t.yaml", o) for o in (node("n0"), bad, member("t-0"), member("t-1"))])
    assert f"t.yaml: PodGroup default/train: {error}" in str(err.value)


def test_the_command_exits_2_naming_the_field(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump_all([node("n0"), policy_group({"Gang": {"minCount": 2}}), member("t-0"),
                                        member("t-1")]))
    assert main(["simulate", "-f", str(path)]) == 2
    assert "spec.schedulingPolicy.Gang: unknown field" in capsys.readouterr().err


@pytest.mark.parametrize(("bad", "error"), [(b, e) for _, b, e in BAD[:3]], ids=[i for i, _, _ in BAD[:3]])
def test_live_such_a_podgroup_holds_its_pods_with_the_error(bad: dict[str, Any], error: str) -> None:
    # A typo'd gang must not bind partially as a basic group: its pods wait, saying why.
    cache = Cache()
    bad["metadata"]["resourceVersion"] = "2"
    cache.observe("Node", None, {**node("n0"), "metadata": {**node("n0")["metadata"], "resourceVersion": "1"}})
    cache.observe("WorkloadPodGroup", None, bad)
    for i in range(2):
        raw = member(f"t-{i}", cpu="1")
        raw["metadata"]["resourceVersion"] = str(3 + i)
        cache.observe("Pod", None, raw)
    result = schedule(cache.snapshot(NAMES), SchedulerState(), 0.0)
    assert result.binds == []
    for i in range(2):
        said = result.waiting[f"default/t-{i}"]
        assert said.startswith(f"PodGroup default/train is invalid: PodGroup default/train: {error}"), said


def test_a_podgroup_whose_preemption_policy_is_not_its_classes_is_refused() -> None:
    never = priority_class("never", 1000, policy="Never")
    with pytest.raises(InputError) as err:
        World.from_objects([("t.yaml", o) for o in (never, group(min_count=1, priorityClassName="never",
                                                                  preemptionPolicy="PreemptLowerPriority"))])
    assert str(err.value) == ("t.yaml: PodGroup default/train: spec.preemptionPolicy: PreemptLowerPriority differs "
                              "from the Never the Priority admission computes from PriorityClass 'never', and is "
                              "refused")
    # Without a class the admission computes PreemptLowerPriority: Never is refused.
    with pytest.raises(InputError, match=r"spec\.preemptionPolicy: Never differs .* from no PriorityClass"):
        World.from_objects([("t.yaml", group(min_count=1, preemptionPolicy="Never"))])
    # Not set, or set as the class says: admitted.
    for spec in ({}, {"preemptionPolicy": "Never"}):
        World.from_objects([("t.yaml", o) for o in (never, group(min_count=1, priorityClassName="never", **spec))])
