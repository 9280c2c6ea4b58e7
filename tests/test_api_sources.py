"""The Volcano and KAI/Kueue objects: what is refused (naming object and field), and the registry."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.kinds import KINDS, kind_for, watched
from koordpy.api.kueue import KaiPodGroup, Topology
from koordpy.api.owners import Owner
from koordpy.api.raw import Reader
from koordpy.api.selectors import LabelSelector
from koordpy.api.volcano import HyperNode, VolcanoPodGroup, network_topology_from_annotations


def hn(spec: dict[str, Any], name: str = "h") -> dict[str, Any]:
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": spec}


def member(kind: str, **selector: Any) -> dict[str, Any]:
    return {"type": kind, "selector": selector}


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"tier": 1, "members": []}, "spec.members", "at least one member"),
    ({"members": [member("Node", exactMatch={"name": "n"})]}, "spec.tier", "required"),
    ({"tier": -1, "members": [member("Node", exactMatch={"name": "n"})]}, "spec.tier", "negative"),
    ({"tier": 1, "members": [member("Node")]}, "spec.members[0].selector", "exactly one"),
    ({"tier": 1, "members": [member("Node", exactMatch={"name": "n"}, regexMatch={"pattern": "n"})]},
     "spec.members[0].selector", "exactly one"),
    ({"tier": 1, "members": [member("Node", regexMatch={"pattern": "node-("})]},
     "spec.members[0].selector.regexMatch.pattern", "invalid regular expression"),
    ({"tier": 2, "members": [member("HyperNode", labelMatch={"matchLabels": {"a": "b"}})]},
     "spec.members[0].selector", "exactMatch only"),
    ({"tier": 2, "members": [member("HyperNode", regexMatch={"pattern": "s.*"})]},
     "spec.members[0].selector", "exactMatch only"),
    ({"tier": 1, "members": [member("Switch", exactMatch={"name": "n"})]}, "spec.members[0].type",
     "Node or HyperNode"),
    ({"tier": "1", "members": [member("Node", exactMatch={"name": "n"})]}, "spec.tier", ""),
    ({"tier": 1, "members": [member("Node", labelMatch={"matchExpressions": [{"key": "a", "operator": "In"}]})]},
     "spec.members[0].selector.labelMatch.matchExpressions[0].values", "non-empty"),
])
def test_hypernode_refused_as_volcanos_webhook_refuses(spec: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ParseError) as err:
        HyperNode.from_raw(hn(spec))
    assert err.value.field == field and words in str(err.value) and "HyperNode h" in str(err.value)


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


def test_volcano_annotations() -> None:
    assert network_topology_from_annotations("x", {}) is None
    nt = network_topology_from_annotations("x", {"volcano.sh/network-topology-highest-tier": "2"})
    assert nt is not None and (nt.mode, nt.highest_tier) == ("hard", 2)
    for bad, words in [({"volcano.sh/network-topology-mode": "maybe"}, "hard or soft"),
                       ({"volcano.sh/network-topology-highest-tier": "two"}, "whole number"),
                       ({"volcano.sh/network-topology-highest-tier": "1",
                         "volcano.sh/network-topology-highest-tier-name": "spine"}, "cannot both")]:
        with pytest.raises(ParseError, match=words):
            network_topology_from_annotations("PodGroup ns/x", bad)


def topo(levels: list[str], api: str = "kueue.x-k8s.io/v1beta1") -> dict[str, Any]:
    return {"apiVersion": api, "kind": "Topology", "metadata": {"name": "net"},
            "spec": {"levels": [{"nodeLabel": k} for k in levels]}}


@pytest.mark.parametrize(("levels", "words"), [
    ([], "1 to 16 levels"),
    (["kubernetes.io/hostname", "example.com/rack"], "only be the lowest"),
    (["example.com/rack", "example.com/rack"], "twice"),
    (["not a key"], "not a valid label key"),
])
def test_topology_refused(levels: list[str], words: str) -> None:
    with pytest.raises(ParseError, match=words):
        Topology.from_raw(topo(levels))


def test_topology_levels_by_key_or_last_segment() -> None:
    t = Topology.from_raw(topo(["example.com/zone", "example.com/rack", "other.io/rack", "kubernetes.io/hostname"],
                               api="kai.scheduler/v1alpha1"))
    assert (t.group, t.version) == ("kai.scheduler", "v1alpha1")
    assert t.resolve_level("example.com/zone") == 0 and t.resolve_level("zone") == 0
    assert t.resolve_level("hostname") == 3
    with pytest.raises(ValueError, match="ambiguous"):
        t.resolve_level("rack")
    with pytest.raises(ValueError, match=r"levels: example\.com/zone, example\.com/rack"):
        t.resolve_level("row")


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
