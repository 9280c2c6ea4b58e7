"""Issue 20: reading a CompositePodGroup (``scheduling.k8s.io/v1alpha3``) and a PodGroup's parent, held
to what the v1.37 API server accepts (``workloadRef`` required on the composite and beside
``parentCompositePodGroupName``; exactly one policy; ``minGroupCount`` at least 1)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.kinds import by_id, grants, kind_for
from koordpy.api.workload import CompositePodGroup, WorkloadPodGroup, WorkloadRef

REF = {"workloadName": "train", "templateName": "replicas"}


def raw(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
            "metadata": {"name": "train", "namespace": "ns", "generation": 2}, "spec": spec}


def test_a_composite_is_read_with_its_policy_key_priority_and_workload_ref() -> None:
    c = CompositePodGroup.from_raw(raw(workloadRef=REF, schedulingPolicy={"gang": {"minGroupCount": 3}},
                                       schedulingConstraints={"topology": [{"key": "rack"}]},
                                       priorityClassName="high", priority=7))
    assert (c.key, c.policy, c.min_group_count, c.topology_keys) == ("ns/train", "gang", 3, ("rack",))
    assert (c.priority_class_name, c.priority, c.generation, c.asks) == ("high", 7, 2, ())
    assert c.workload_ref == WorkloadRef(workload_name="train", template_name="replicas")
    basic = CompositePodGroup.from_raw(raw(workloadRef=REF, schedulingPolicy={"basic": {}}))
    assert (basic.policy, basic.min_group_count) == ("basic", 1)


@pytest.mark.parametrize(("spec", "field"), [
    ({"schedulingPolicy": {"gang": {"minGroupCount": 2}}}, "spec.workloadRef"),
    ({"workloadRef": REF, "schedulingPolicy": {}}, "spec.schedulingPolicy"),
    ({"workloadRef": REF, "schedulingPolicy": {"basic": {}, "gang": {"minGroupCount": 1}}}, "spec.schedulingPolicy"),
    ({"workloadRef": REF, "schedulingPolicy": {"gang": {"minGroupCount": 0}}},
     "spec.schedulingPolicy.gang.minGroupCount"),
    ({"workloadRef": {"workloadName": "train"}, "schedulingPolicy": {"basic": {}}}, "spec.workloadRef.templateName"),
    ({"workloadRef": REF, "schedulingPolicy": {"basic": {}},
      "schedulingConstraints": {"topology": [{"key": "a"}, {"key": "b"}]}}, "spec.schedulingConstraints.topology"),
])
def test_a_composite_the_api_server_would_refuse_is_refused(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ParseError) as exc:
        CompositePodGroup.from_raw(raw(**spec))
    assert exc.value.field == field


def test_a_nested_composite_is_read_with_its_parent_as_an_ask() -> None:
    c = CompositePodGroup.from_raw(raw(workloadRef=REF, schedulingPolicy={"basic": {}},
                                       parentCompositePodGroupName="top"))
    assert c.asks == ("spec.parentCompositePodGroupName",)


def child(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "c0", "namespace": "ns"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, **spec}}


def test_a_podgroup_names_its_parent_beside_its_workload_ref() -> None:
    g = WorkloadPodGroup.from_raw(child(parentCompositePodGroupName="train", workloadRef=REF))
    assert (g.parent, g.asks) == ("train", ())
    assert g.workload_ref == WorkloadRef(workload_name="train", template_name="replicas")
    with pytest.raises(ParseError) as exc:
        WorkloadPodGroup.from_raw(child(parentCompositePodGroupName="train"))
    assert exc.value.field == "spec.workloadRef"
    assert WorkloadPodGroup.from_raw(child()).parent is None


def test_the_registry_reads_composites_and_grants_list_watch_and_the_stale_since_patch() -> None:
    kind = kind_for("scheduling.k8s.io/v1alpha3", "CompositePodGroup")
    assert kind is by_id("compositepodgroups.scheduling.k8s.io")
    assert kind.optional and not kind.own_field and kind.change == "gangs" and kind.writes == ("patch",)
    found = {(g, r, v) for g, r, v in grants() if r.startswith("compositepodgroups")}
    assert found == {("scheduling.k8s.io", "compositepodgroups", "list"),
                     ("scheduling.k8s.io", "compositepodgroups", "watch"),
                     ("scheduling.k8s.io", "compositepodgroups", "patch")}
