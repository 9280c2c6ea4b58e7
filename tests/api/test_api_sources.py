"""The Volcano and KAI/Kueue objects beside test_api_volcano_kai: member matching, Volcano
PodGroup sub-groups, owners, selectors, and the registry as the shells read it."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.kinds import KINDS, kind_for, watched
from koordpy.api.kueue import KaiPodGroup
from koordpy.api.owners import Owner
from koordpy.api.raw import Reader
from koordpy.api.selectors import LabelSelector
from koordpy.api.volcano import HyperNode, VolcanoPodGroup


def hn(spec: dict[str, Any], name: str = "h") -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def member(kind: str, **selector: Any) -> dict[str, Any]:
    return {"type": kind, "selector": selector}


def test_hypernode_members_match() -> None:
    h = HyperNode.from_raw(hn({"tier": 1, "tierName": "leaf", "members": [
        member("Node", exactMatch={"name": "n1"}), member("Node", regexMatch={"pattern": "^gpu-[0-9]+$"}),
        member("Node", labelMatch={"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]})]}))
    assert h.tier_name == "leaf"
    assert [m.matches_node("n1", {}) for m in h.members] == [True, False, False]
    assert [m.matches_node("gpu-12", {}) for m in h.members] == [False, True, False]
    assert [m.matches_node("x", {"rack": "r1"}) for m in h.members] == [False, False, True]


def vpg(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"networkTopology": {"highestTierAllowed": 1, "highestTierName": "x"}}, "spec.networkTopology", "both"),
    ({"networkTopology": {"mode": "strict"}}, "spec.networkTopology.mode", "hard or soft"),
    ({"subGroupPolicy": [{"name": "a"}, {"name": "a"}]}, "spec.subGroupPolicy[1].name", "twice"),
    ({"subGroupPolicy": [{"name": "a", "subGroupSize": 0}]}, "spec.subGroupPolicy[0].subGroupSize", "at least 1"),
    ({"subGroupPolicy": [{"subGroupSize": 2}]}, "spec.subGroupPolicy[0].name", ""),
    ({"minMember": -1}, "spec.minMember", "negative"),
])
def test_volcano_podgroup_refused(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ParseError) as err:
        VolcanoPodGroup.from_raw(vpg(spec))
    assert err.value.field == field and words in str(err.value)


def test_volcano_podgroup_reads_sub_groups() -> None:
    pg = VolcanoPodGroup.from_raw(vpg({"minMember": 4, "networkTopology": {"mode": "soft", "highestTierName": "spine"},
                                       "subGroupPolicy": [{"name": "w", "subGroupSize": 2, "minSubGroups": 1,
                                                           "matchLabelKeys": ["volcano.sh/partition-id"],
                                                           "labelSelector": {"matchLabels": {"role": "w"}}}]}))
    assert pg.network_topology is not None and pg.network_topology.mode == "soft"
    assert pg.network_topology.highest_tier_name == "spine"
    policy = pg.sub_group_policy[0]
    assert (policy.sub_group_size, policy.min_sub_groups) == (2, 1)
    assert policy.match_label_keys == ("volcano.sh/partition-id",)
    assert policy.label_selector is not None and policy.label_selector.matches({"role": "w"})


def topo(levels: list[str], api: str = "kueue.x-k8s.io/v1beta1") -> dict[str, Any]:
    return {"apiVersion": api, "kind": "Topology", "metadata": {"name": "net"},
            "spec": {"levels": [{"nodeLabel": k} for k in levels]}}


def test_kai_podgroup_both_spellings_and_not_both() -> None:
    for field in ("topologyConstraint", "topologyConstraints"):
        pg = KaiPodGroup.from_raw({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                                   "metadata": {"name": "p", "namespace": "ns"},
                                   "spec": {"minMember": 2, field: {"topology": "net",
                                                                    "preferredTopologyLevel": "rack"}}})
        assert pg.topology_constraint is not None and pg.topology_constraint.preferred == "rack"
    with pytest.raises(ParseError, match="not both"):
        KaiPodGroup.from_raw({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                              "metadata": {"name": "p", "namespace": "ns"},
                              "spec": {"topologyConstraint": {}, "topologyConstraints": {}}})


def test_owner_replicas() -> None:
    jobset = Owner.from_raw({"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                             "metadata": {"name": "js", "namespace": "ns", "uid": "u"},
                             "spec": {"replicatedJobs": [
                                 {"replicas": 2, "template": {"spec": {"parallelism": 4}}},
                                 {"template": {"spec": {}}}]}})
    assert jobset.replicas == 9
    job = Owner.from_raw({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "ns"},
                          "spec": {}})
    assert job.replicas == 1
    other = Owner.from_raw({"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                            "metadata": {"name": "p", "namespace": "ns"}, "spec": {}})
    assert other.replicas is None


def test_label_selector_operators() -> None:
    sel = LabelSelector.from_raw(Reader("x"), {"matchExpressions": [
        {"key": "a", "operator": "NotIn", "values": ["1"]}, {"key": "b", "operator": "Exists"},
        {"key": "c", "operator": "DoesNotExist"}]}, "sel")
    assert sel.matches({"b": ""}) and sel.matches({"a": "2", "b": "x"})
    assert not sel.matches({"a": "1", "b": ""}) and not sel.matches({"b": "", "c": ""})
    assert LabelSelector().matches({"anything": "at all"})


def test_registry_is_one_table() -> None:
    ids = [k.id for k in watched()]
    assert len(ids) == len(set(ids))
    for k in KINDS:
        assert kind_for(k.api_version, k.kind) is k
    assert kind_for("kueue.x-k8s.io/v1alpha1", "Topology") is not None
    assert kind_for("scheduling.volcano.sh/v1beta1", "PodGroup") is not kind_for("scheduling.sigs.k8s.io/v1alpha1",
                                                                                     "PodGroup")
    assert kind_for("v1", "Secret") is None
