"""The Volcano, Kueue/KAI and owner models refuse what Volcano's webhook and the API server
refuse, name the object and field at fault, and the registry parses every kind it lists."""

from collections.abc import Callable
from typing import Any

import pytest

from koordpy.api import Node, ParseError, Pod, PodGroup, PriorityClass
from koordpy.api.disruption import PodDisruptionBudget
from koordpy.api.dra import DeviceClass, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from koordpy.api.kinds import KINDS, kind_for, object_key, roles
from koordpy.api.kueue import (
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_TOPOLOGY,
    KaiPodGroup,
    KaiQueue,
    Topology,
    TopologyConstraint,
    kai_constraint_from_annotations,
)
from koordpy.api.objects import Namespace
from koordpy.api.owners import Owner, OwnerRef, ReplicatedJob, controller_ref, pod_owner_refs
from koordpy.api.raw import Reader
from koordpy.api.selectors import LabelSelector
from koordpy.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.api.volcano import (
    ANN_HIGHEST_TIER,
    ANN_HIGHEST_TIER_NAME,
    ANN_MODE,
    GROUP_NAME_ANN,
    HyperNode,
    NetworkTopology,
    VolcanoPodGroup,
    network_topology_from_annotations,
    pod_volcano_group,
)
from koordpy.api.workload import CompositePodGroup, WorkloadPodGroup
from tests.builders import node, pod

Raw = dict[str, Any]


def refused(parse: Callable[[Raw], object], raw: Raw, field: str, words: str) -> ParseError:
    """Parses ``raw`` expecting a ParseError at ``field`` whose message contains ``words``."""
    with pytest.raises(ParseError) as err:
        parse(raw)
    assert err.value.field == field, str(err.value)
    assert words in err.value.message, str(err.value)
    return err.value


def pod_in(namespace: str) -> Raw:
    raw = pod("w0")
    raw["metadata"]["namespace"] = namespace
    return raw


# -- label selectors --------------------------------------------------------------------------


def selector(raw: Any) -> LabelSelector:
    return LabelSelector.from_raw(Reader("HyperNode s1"), raw, "spec.members[0].selector.labelMatch")


def test_an_empty_selector_matches_every_label_set() -> None:
    assert selector({}).matches({}) and selector({}).matches({"a": "b"})
    assert selector(None).empty


def test_selector_operators() -> None:
    sel = selector({"matchLabels": {"zone": "a"},
                    "matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1", "r2"]},
                                         {"key": "gpu", "operator": "NotIn", "values": ["none"]},
                                         {"key": "ib", "operator": "Exists"},
                                         {"key": "drain", "operator": "DoesNotExist"}]})
    good = {"zone": "a", "rack": "r2", "ib": ""}
    assert sel.matches(good)
    assert sel.matches({**good, "gpu": "h100"})
    assert not sel.matches({**good, "zone": "b"})
    assert not sel.matches({k: v for k, v in good.items() if k != "zone"})
    assert not sel.matches({**good, "rack": "r3"})
    assert not sel.matches({**good, "gpu": "none"})
    assert not sel.matches({k: v for k, v in good.items() if k != "ib"})
    assert not sel.matches({**good, "drain": "yes"})


def test_a_match_label_of_an_empty_value_needs_the_key() -> None:
    sel = selector({"matchLabels": {"ib": ""}})
    assert sel.matches({"ib": ""}) and not sel.matches({})


@pytest.mark.parametrize(("expr", "field", "words"), [
    ({"key": "rack", "operator": "In"}, ".values", "must not be empty when the operator is In"),
    ({"key": "rack", "operator": "NotIn", "values": []}, ".values", "must not be empty when the operator is NotIn"),
    ({"key": "rack", "operator": "Exists", "values": ["x"]}, ".values", "must be empty when the operator is Exists"),
    ({"key": "rack", "operator": "DoesNotExist", "values": ["x"]}, ".values", "must be empty"),
    ({"key": "rack", "operator": "Gt", "values": ["1"]}, ".operator", "unknown operator 'Gt'"),
    ({"key": "bad key", "operator": "Exists"}, ".key", "name part"),
    ({"key": "a/b/c", "operator": "Exists"}, ".key", "more than one '/'"),
    ({"key": "Bad_Prefix/x", "operator": "Exists"}, ".key", "prefix"),
    ({"operator": "Exists"}, ".key", "is required"),
    ({"key": "rack", "operator": "In", "values": ["-x"]}, ".values[0]", "label value"),
])
def test_selector_validation(expr: Raw, field: str, words: str) -> None:
    with pytest.raises(ParseError) as err:
        selector({"matchExpressions": [expr]})
    assert err.value.obj == "HyperNode s1"
    assert err.value.field == "spec.members[0].selector.labelMatch.matchExpressions[0]" + field
    assert words in err.value.message


def test_selector_match_labels_validation() -> None:
    with pytest.raises(ParseError) as err:
        selector({"matchLabels": {"rack": "a b"}})
    assert err.value.field == "spec.members[0].selector.labelMatch.matchLabels[rack]"
    with pytest.raises(ParseError) as err:
        selector({"matchLabels": {"rack": 3}})
    assert "quote it" in err.value.message


# -- network topology -------------------------------------------------------------------------


def test_no_volcano_annotation_declares_nothing() -> None:
    assert network_topology_from_annotations("PodGroup ns/pg", {}) is None
    assert network_topology_from_annotations("PodGroup ns/pg", {ANN_MODE: "", ANN_HIGHEST_TIER: ""}) is None


def test_volcano_annotations() -> None:
    assert network_topology_from_annotations("PodGroup ns/pg", {ANN_MODE: "soft"}) == NetworkTopology(mode="soft")
    assert network_topology_from_annotations("PodGroup ns/pg", {ANN_HIGHEST_TIER: "2"}) == NetworkTopology(
        mode="hard", highest_tier=2)
    assert network_topology_from_annotations("PodGroup ns/pg", {ANN_HIGHEST_TIER_NAME: "spine"}) == NetworkTopology(
        highest_tier_name="spine")


@pytest.mark.parametrize(("ann", "field", "words"), [
    ({ANN_MODE: "strict"}, f"metadata.annotations[{ANN_MODE}]", "must be hard or soft"),
    ({ANN_HIGHEST_TIER: "two"}, f"metadata.annotations[{ANN_HIGHEST_TIER}]", "whole number"),
    ({ANN_HIGHEST_TIER: "-1"}, f"metadata.annotations[{ANN_HIGHEST_TIER}]", "must not be negative"),
    ({ANN_HIGHEST_TIER: "99999999999"}, f"metadata.annotations[{ANN_HIGHEST_TIER}]", "out of range for int32"),
    ({ANN_HIGHEST_TIER: "1", ANN_HIGHEST_TIER_NAME: "spine"}, "metadata.annotations", "not both"),
])
def test_volcano_annotation_errors(ann: dict[str, str], field: str, words: str) -> None:
    with pytest.raises(ParseError) as err:
        network_topology_from_annotations("PodGroup ns/pg", ann)
    assert (err.value.obj, err.value.field) == ("PodGroup ns/pg", field)
    assert words in err.value.message


# -- HyperNode --------------------------------------------------------------------------------


def hypernode(name: str, tier: Any, *members: Raw, **spec: Any) -> Raw:
    body: Raw = {"tier": tier, "members": list(members), **spec}
    if tier is None:
        del body["tier"]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": body}


def member(mtype: str, **selector: Any) -> Raw:
    return {"type": mtype, "selector": selector}


def test_the_seed_hypernodes_parse() -> None:
    leaf = HyperNode.from_raw(hypernode("s0", 1, member("Node", exactMatch={"name": "node-0"}),
                                        member("Node", exactMatch={"name": "node-1"})))
    assert leaf.tier == 1 and [m.selector.exact for m in leaf.members] == ["node-0", "node-1"]
    spine = HyperNode.from_raw(hypernode("s4", 2, member("HyperNode", exactMatch={"name": "s0"}),
                                         tierName="spine"))
    assert spine.members[0].hypernode == "s0" and spine.tier_name == "spine"
    rgx = HyperNode.from_raw({**hypernode("s5", 1, member("Node", regexMatch={"pattern": "^gpu-[0-9]+$"})),
                              "status": {"nodeCount": 4, "conditions": [
                                  {"type": "Valid", "status": "True", "observedGeneration": 3,
                                   "lastTransitionTime": "2026-01-01T00:00:00Z"}]}})
    assert rgx.node_count == 4
    assert rgx.conditions[0]["status"] == "True" and rgx.conditions[0]["observedGeneration"] == "3"


def test_a_hypernode_without_members_is_valid_and_empty() -> None:
    absent = hypernode("empty", 2)
    del absent["spec"]["members"]
    assert HyperNode.from_raw(absent).members == ()
    assert HyperNode.from_raw(hypernode("none", 1)).members == ()  # members: []


def test_member_matching() -> None:
    exact = HyperNode.from_raw(hypernode("a", 0, member("Node", exactMatch={"name": "n1"}))).members[0]
    assert exact.matches_node("n1", {}) and not exact.matches_node("n10", {})
    # Unanchored, as Go's MatchString: "gpu" is found inside "a-gpu-1".
    loose = HyperNode.from_raw(hypernode("b", 1, member("Node", regexMatch={"pattern": "gpu-[0-9]"}))).members[0]
    assert loose.matches_node("a-gpu-1", {}) and not loose.matches_node("cpu-1", {})
    anchored = HyperNode.from_raw(hypernode("c", 1, member("Node", regexMatch={"pattern": "^gpu-[0-9]$"})))
    assert not anchored.members[0].matches_node("gpu-12", {})
    # RE2's syntax, as Go reads it: \pL is any letter, \z the end of the text (Python's re refuses both).
    letters = HyperNode.from_raw(hypernode("f", 1, member("Node", regexMatch={"pattern": r"^\pL+-[0-9]\z"})))
    assert letters.members[0].matches_node("gpu-1", {}) and not letters.members[0].matches_node("gpu-12", {})
    assert not letters.members[0].matches_node("10-1", {})
    labels = HyperNode.from_raw(hypernode("d", 1, member("Node", labelMatch={"matchLabels": {"rack": "r1"}})))
    assert labels.members[0].matches_node("x", {"rack": "r1"}) and not labels.members[0].matches_node("x", {})
    child = HyperNode.from_raw(hypernode("e", 2, member("HyperNode", exactMatch={"name": "n1"}))).members[0]
    assert not child.matches_node("n1", {})  # a HyperNode member names a HyperNode, not a node
    assert exact.hypernode is None


@pytest.mark.parametrize(("raw", "field", "words"), [
    (hypernode("h", None, member("Node", exactMatch={"name": "n"})), "spec.tier", "is required"),
    (hypernode("h", -1, member("Node", exactMatch={"name": "n"})), "spec.tier", "must not be negative"),
    (hypernode("h", "1", member("Node", exactMatch={"name": "n"})), "spec.tier", "expected an integer"),
    (hypernode("h", 1, member("Node")), "spec.members[0].selector", "must set one of"),
    (hypernode("h", 1, member("Node", exactMatch={"name": "n"}, regexMatch={"pattern": "n"})),
     "spec.members[0].selector", "only one of"),
    (hypernode("h", 1, member("Node", exactMatch={"name": "n"}), member("Node", regexMatch={"pattern": "(n"})),
     "spec.members[1].selector.regexMatch.pattern", "invalid regular expression"),
    (hypernode("h", 1, member("Node", regexMatch={})), "spec.members[0].selector.regexMatch.pattern", "is required"),
    # What Go's regexp (RE2) refuses, as Volcano's webhook does, though Python's re would take it.
    (hypernode("h", 1, member("Node", regexMatch={"pattern": "^gpu-(?!0)"})),
     "spec.members[0].selector.regexMatch.pattern", "invalid perl operator: (?!"),
    (hypernode("h", 1, member("Node", regexMatch={"pattern": "(?<=rack)-1"})),
     "spec.members[0].selector.regexMatch.pattern", "Go's RE2 syntax"),
    (hypernode("h", 1, member("Node", regexMatch={"pattern": r"(a)-\1"})),
     "spec.members[0].selector.regexMatch.pattern", "invalid escape sequence"),
    (hypernode("h", 1, member("Node", regexMatch={"pattern": r"gpu\C"})),
     "spec.members[0].selector.regexMatch.pattern", "any-byte"),
    (hypernode("h", 1, member("Node", exactMatch={})), "spec.members[0].selector.exactMatch.name", "is required"),
    (hypernode("h", 1, member("Node", exactMatch={"name": "Bad_Name"})),
     "spec.members[0].selector.exactMatch.name", "RFC 1123"),
    (hypernode("h", 2, member("HyperNode", labelMatch={"matchLabels": {"a": "b"}})),
     "spec.members[0].selector.labelMatch", "exactMatch only"),
    (hypernode("h", 2, member("HyperNode", regexMatch={"pattern": "s.*"})),
     "spec.members[0].selector.regexMatch", "exactMatch only"),
    (hypernode("h", 1, member("Switch", exactMatch={"name": "n"})), "spec.members[0].type", "Node or HyperNode"),
    (hypernode("h", 1, {"selector": {"exactMatch": {"name": "n"}}}), "spec.members[0].type", "is required"),
    (hypernode("h", 1, member("Node", labelMatch={"matchExpressions": [{"key": "a", "operator": "In"}]})),
     "spec.members[0].selector.labelMatch.matchExpressions[0].values", "must not be empty"),
    ({**hypernode("h", 1, member("Node", exactMatch={"name": "n"})), "status": {"nodeCount": -1}},
     "status.nodeCount", "must not be negative"),
])
def test_hypernode_validation(raw: Raw, field: str, words: str) -> None:
    assert refused(HyperNode.from_raw, raw, field, words).obj == "HyperNode h"


# -- Volcano PodGroup -------------------------------------------------------------------------


def volcano_podgroup(name: str = "job", **spec: Any) -> Raw:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "team"}, "spec": spec}


def policy(name: str, **extra: Any) -> Raw:
    return {"name": name, **extra}


def test_the_seed_volcano_podgroup_parses() -> None:
    raw = volcano_podgroup(
        minMember=3, minResources={"cpu": "4", "nvidia.com/gpu": 8},
        networkTopology={"mode": "hard", "highestTierAllowed": 2},
        subGroupPolicy=[policy("task0", subGroupSize=3,
                               labelSelector={"matchLabels": {"volcano.sh/task-spec": "task0"}},
                               matchLabelKeys=["volcano.sh/partition-id"],
                               networkTopology={"mode": "hard", "highestTierAllowed": 1}),
                        policy("task1", subGroupSize=2, minSubGroups=2)])
    raw["status"] = {"phase": "Inqueue", "running": 1}
    pg = VolcanoPodGroup.from_raw(raw)
    assert pg.key == "team/job" and pg.min_member == 3 and pg.queue == "default"
    assert pg.min_resources == {"cpu": 4000, "nvidia.com/gpu": 8}
    assert pg.network_topology == NetworkTopology(mode="hard", highest_tier=2)
    task0, task1 = pg.sub_group_policy
    assert task0.sub_group_size == 3 and task0.match_label_keys == ("volcano.sh/partition-id",)
    assert task0.network_topology == NetworkTopology(highest_tier=1)
    part = {"volcano.sh/partition-id": "1"}
    assert task0.match_values({"volcano.sh/task-spec": "task0", **part}) == ["1"]
    assert task0.match_values({"volcano.sh/task-spec": "task1", **part}) is None
    assert task0.match_values({"volcano.sh/task-spec": "task0"}) is None  # no partition: not this policy's
    # No matchLabelKeys: as in Volcano, the policy takes no pod (they stay in the job's default group).
    assert task1.min_sub_groups == 2 and task1.label_selector is None and task1.match_values({"a": "b"}) is None
    assert pg.status.phase == "Inqueue" and pg.status.running == 1


def test_a_volcano_podgroup_may_ask_for_zero_members() -> None:
    assert VolcanoPodGroup.from_raw(volcano_podgroup(minMember=0)).min_member == 0


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"minMember": -1}, "spec.minMember", "must not be negative"),
    ({"subGroupPolicy": [policy("a"), policy("a")]}, "spec.subGroupPolicy[1].name", "declared twice"),
    ({"subGroupPolicy": [policy("")]}, "spec.subGroupPolicy[0].name", "is required"),
    ({"subGroupPolicy": [{"subGroupSize": 2}]}, "spec.subGroupPolicy[0].name", "is required"),
    ({"subGroupPolicy": [policy("a", subGroupSize=0)]}, "spec.subGroupPolicy[0].subGroupSize", "at least 1"),
    ({"subGroupPolicy": [policy("a", minSubGroups=-1)]}, "spec.subGroupPolicy[0].minSubGroups", "not be negative"),
    ({"subGroupPolicy": [policy("a", matchLabelKeys=["ok", "not ok"])]},
     "spec.subGroupPolicy[0].matchLabelKeys[1]", "name part"),
    ({"subGroupPolicy": [policy("a", matchLabelKeys=["k", "k"])]}, "spec.subGroupPolicy[0].matchLabelKeys", "twice"),
    ({"subGroupPolicy": [policy("a", networkTopology={"mode": "loose"})]},
     "spec.subGroupPolicy[0].networkTopology.mode", "must be hard or soft"),
    ({"networkTopology": {"highestTierAllowed": 1, "highestTierName": "spine"}}, "spec.networkTopology", "not both"),
    ({"networkTopology": {"highestTierAllowed": -2}}, "spec.networkTopology.highestTierAllowed", "not be negative"),
    ({"minResources": {"cpu": "lots"}}, "spec.minResources.cpu", ""),
])
def test_volcano_podgroup_validation(spec: Raw, field: str, words: str) -> None:
    assert refused(VolcanoPodGroup.from_raw, volcano_podgroup(**spec), field, words).obj == "PodGroup team/job"


def test_volcano_podgroup_phase_is_checked() -> None:
    raw = {**volcano_podgroup(), "status": {"phase": "Scheduled"}}
    refused(VolcanoPodGroup.from_raw, raw, "status.phase", "Pending, Running, Unknown, Inqueue, Completed")


def test_pods_join_a_volcano_podgroup_by_annotation() -> None:
    raw = pod_in("team")
    assert pod_volcano_group(Pod.from_raw(raw)) is None
    raw["metadata"]["annotations"] = {GROUP_NAME_ANN: "job"}
    assert pod_volcano_group(Pod.from_raw(raw)) == "team/job"


# -- Kueue / KAI Topology ---------------------------------------------------------------------


def topology(*levels: str, api: str = "kueue.x-k8s.io/v1beta1", name: str = "network") -> Raw:
    return {"apiVersion": api, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": level} for level in levels]}}


RACKS = ("example.com/block", "example.com/rack", "kubernetes.io/hostname")


@pytest.mark.parametrize("api", ["kueue.x-k8s.io/v1alpha1", "kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2",
                                 "kai.scheduler/v1alpha1"])
def test_topologies_of_every_api_parse(api: str) -> None:
    topo = Topology.from_raw(topology(*RACKS, api=api))
    assert topo.api_version == api and topo.levels == RACKS and topo.name == "network"


def test_a_raw_topology_without_api_version_takes_the_callers() -> None:
    raw = topology("rack")
    del raw["apiVersion"]
    assert Topology.from_raw(raw, "kai.scheduler/v1alpha1").group == "kai.scheduler"
    refused(Topology.from_raw, raw, "apiVersion", "must be one of")


@pytest.mark.parametrize(("raw", "field", "words"), [
    (topology(), "spec.levels", "1 to 16 levels, got 0"),
    (topology(*(f"example.com/l{i}" for i in range(17))), "spec.levels", "1 to 16 levels, got 17"),
    (topology("example.com/rack", "example.com/rack"), "spec.levels[1].nodeLabel", "already level 0"),
    (topology("kubernetes.io/hostname", "example.com/rack"), "spec.levels[0].nodeLabel", "only be the last"),
    (topology("example.com/ rack"), "spec.levels[0].nodeLabel", "name part"),
    (topology("example.com/rack", ""), "spec.levels[1].nodeLabel", "is required"),
    (topology("rack", api="kueue.x-k8s.io/v1"), "apiVersion", "must be one of"),
])
def test_topology_validation(raw: Raw, field: str, words: str) -> None:
    assert refused(Topology.from_raw, raw, field, words).obj == "Topology network"


def test_resolve_level_by_full_key_and_last_segment() -> None:
    topo = Topology.from_raw(topology(*RACKS))
    assert topo.resolve_level("example.com/rack") == 1
    assert topo.resolve_level("rack") == 1
    assert topo.resolve_level("block") == 0
    assert topo.resolve_level("hostname") == 2
    assert topo.resolve_level("kubernetes.io/hostname") == 2


def test_resolve_level_unknown_lists_the_levels() -> None:
    topo = Topology.from_raw(topology(*RACKS))
    with pytest.raises(ValueError, match="no level 'zone'") as err:
        topo.resolve_level("zone")
    assert "example.com/block, example.com/rack, kubernetes.io/hostname" in str(err.value)
    with pytest.raises(ValueError, match="no level 'com/rack'"):
        topo.resolve_level("com/rack")


def test_resolve_level_ambiguous_last_segment() -> None:
    topo = Topology.from_raw(topology("a.example.com/rack", "b.example.com/rack", "node"))
    with pytest.raises(ValueError, match="ambiguous") as err:
        topo.resolve_level("rack")
    assert "a.example.com/rack and b.example.com/rack" in str(err.value)
    assert "levels, top first: a.example.com/rack, b.example.com/rack, node" in str(err.value)
    assert topo.resolve_level("b.example.com/rack") == 1  # the full key always resolves


# -- KAI constraints and PodGroup -------------------------------------------------------------


def test_kai_annotations_give_only_the_keys_they_set() -> None:
    assert kai_constraint_from_annotations({}) == {}
    assert kai_constraint_from_annotations({ANN_TOPOLOGY: "network", ANN_PREFERRED: "rack", ANN_REQUIRED: "",
                                            "other": "x"}) == {"topology": "network", "preferred": "rack"}


def test_constraint_layers_first_setter_wins() -> None:
    pod_layer = kai_constraint_from_annotations({ANN_PREFERRED: "rack"})
    group_layer = kai_constraint_from_annotations({ANN_PREFERRED: "block", ANN_REQUIRED: "zone"})
    owner_layer = kai_constraint_from_annotations({ANN_TOPOLOGY: "network", ANN_REQUIRED: "dc"})
    assert TopologyConstraint.layered(pod_layer, group_layer, owner_layer) == TopologyConstraint(
        topology="network", required="zone", preferred="rack")
    assert TopologyConstraint.layered() == TopologyConstraint()


def kai_podgroup(**spec: Any) -> Raw:
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
            "metadata": {"name": "pg", "namespace": "ml"}, "spec": spec}


@pytest.mark.parametrize("spelling", ["topologyConstraint", "topologyConstraints"])
def test_kai_podgroup_reads_both_spellings(spelling: str) -> None:
    raw = kai_podgroup(minMember=4, **{spelling: {"topology": "network", "requiredTopologyLevel": "block",
                                                  "preferredTopologyLevel": "rack"}})
    pg = KaiPodGroup.from_raw(raw)
    assert pg.key == "ml/pg" and pg.min_member == 4
    assert pg.topology_constraint == TopologyConstraint(topology="network", required="block", preferred="rack")


def test_kai_podgroup_without_constraint() -> None:
    pg = KaiPodGroup.from_raw(kai_podgroup(minMember=1))
    assert pg.topology_constraint is None and pg.constraint_keys() == {}


def test_kai_podgroup_spec_wins_over_its_annotations() -> None:
    raw = kai_podgroup(topologyConstraint={"requiredTopologyLevel": "block"})
    raw["metadata"]["annotations"] = {ANN_REQUIRED: "zone", ANN_TOPOLOGY: "network"}
    assert KaiPodGroup.from_raw(raw).constraint_keys() == {"required": "block", "topology": "network"}


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"topologyConstraint": {}, "topologyConstraints": {}}, "spec", "not both"),
    ({"topologyConstraint": {"topology": 3}}, "spec.topologyConstraint.topology", "expected a string"),
    ({"topologyConstraints": ["rack"]}, "spec.topologyConstraints", "expected a mapping"),
    ({"minMember": -1}, "spec.minMember", "must not be negative"),
])
def test_kai_podgroup_validation(spec: Raw, field: str, words: str) -> None:
    assert refused(KaiPodGroup.from_raw, kai_podgroup(**spec), field, words).obj == "PodGroup ml/pg"


# -- owners -----------------------------------------------------------------------------------


def owner(api: str, kind: str, name: str = "o", **spec: Any) -> Raw:
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": "ml", "uid": "u-" + name},
            "spec": spec}


def test_job_replicas_are_its_parallelism() -> None:
    assert Owner.from_raw(owner("batch/v1", "Job")).replicas == 1
    assert Owner.from_raw(owner("batch/v1", "Job", parallelism=8, completions=16)).replicas == 8


@pytest.mark.parametrize("kind", ["ReplicaSet", "Deployment", "StatefulSet"])
def test_apps_replicas(kind: str) -> None:
    assert Owner.from_raw(owner("apps/v1", kind)).replicas == 1
    assert Owner.from_raw(owner("apps/v1", kind, replicas=5)).replicas == 5


def test_jobset_replicas_sum_its_replicated_jobs() -> None:
    raw = owner("jobset.x-k8s.io/v1alpha2", "JobSet", replicatedJobs=[
        {"name": "leader", "template": {"spec": {}}},
        {"name": "workers", "replicas": 3, "template": {"spec": {"parallelism": 4}}},
    ])
    assert Owner.from_raw(raw).replicas == 1 + 3 * 4


def test_a_jobsets_jobs_never_count_more_pods_than_they_complete() -> None:
    raw = owner("jobset.x-k8s.io/v1alpha2", "JobSet", replicatedJobs=[
        {"name": "ps", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 3}}}])
    assert Owner.from_raw(raw).replicas == 2 * 3


EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"


def test_a_jobset_says_its_replicated_jobs_their_exclusive_placement_and_start_order() -> None:
    # As the JobSet controller copies them to each Job: the JobSet's exclusive key, a template's over
    # it, and none for the node-selector strategy (the nodes labelled per Job hold the pods instead).
    raw = owner("jobset.x-k8s.io/v1alpha2", "JobSet", startupPolicy={"startupPolicyOrder": "InOrder"}, replicatedJobs=[
        {"name": "driver", "template": {"spec": {}}},
        {"name": "workers", "replicas": 3, "dependsOn": [{"name": "driver", "status": "Ready"}],
         "template": {"metadata": {"annotations": {EXCLUSIVE: "zone"}}, "spec": {"parallelism": 4, "completions": 6}}},
        {"name": "pinned", "template": {"metadata": {"annotations": {EXCLUSIVE: "rack", STRATEGY: "true"}},
                                        "spec": {}}},
    ])
    raw["metadata"]["annotations"] = {EXCLUSIVE: "rack"}
    found = Owner.from_raw(raw)
    assert found.in_order
    assert found.replicated_jobs == (
        ReplicatedJob(name="driver", replicas=1, pods=1, exclusive="rack"),
        ReplicatedJob(name="workers", replicas=3, pods=4, completions=6, exclusive="zone", depends_on=("driver",)),
        ReplicatedJob(name="pinned", replicas=1, pods=1))
    plain = Owner.from_raw(owner("jobset.x-k8s.io/v1alpha2", "JobSet", replicatedJobs=[{"template": {}}]))
    assert not plain.in_order and plain.replicated_jobs == (ReplicatedJob(name="0", replicas=1, pods=1),)
    assert Owner.from_raw(owner("batch/v1", "Job")).replicated_jobs == ()


def test_a_pod_templates_exclusive_key_is_its_jobs_under_the_jobsets_and_the_job_templates() -> None:
    # The JobSet controller keeps the pod template's annotations and copies the JobSet's pair, then
    # the Job template's, over them: the pods (and JobSet's webhook) see the last.
    def rjob(name: str, job_ann: dict[str, str], pod_ann: dict[str, str]) -> dict[str, object]:
        return {"name": name, "template": {"metadata": {"annotations": job_ann},
                                           "spec": {"template": {"metadata": {"annotations": pod_ann}}}}}

    raw = owner("jobset.x-k8s.io/v1alpha2", "JobSet", replicatedJobs=[
        rjob("pod", {}, {EXCLUSIVE: "rack"}), rjob("job", {EXCLUSIVE: "zone"}, {EXCLUSIVE: "rack"}),
        rjob("strategy", {EXCLUSIVE: "zone"}, {STRATEGY: "true"})])
    assert [(j.name, j.exclusive) for j in Owner.from_raw(raw).replicated_jobs] == [
        ("pod", "rack"), ("job", "zone"), ("strategy", "")]
    raw["metadata"]["annotations"] = {EXCLUSIVE: "block"}
    assert [(j.name, j.exclusive) for j in Owner.from_raw(raw).replicated_jobs] == [
        ("pod", "block"), ("job", "zone"), ("strategy", "")]


def test_other_owners_have_no_replica_count() -> None:
    raw = owner("kubeflow.org/v1", "PyTorchJob", pytorchReplicaSpecs={"Worker": {"replicas": 4}})
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Thing", "name": "t", "uid": "1",
                                           "controller": True}]
    o = Owner.from_raw(raw)
    assert o.replicas is None and o.key == "ml/o"
    assert controller_ref(o.owner_refs) == OwnerRef(api_version="v1", kind="Thing", name="t", uid="1",
                                                     controller=True)


@pytest.mark.parametrize(("raw", "field", "words"), [
    (owner("batch/v1", "Job", parallelism=-1), "spec.parallelism", "must not be negative"),
    (owner("apps/v1", "Deployment", replicas="3"), "spec.replicas", "expected an integer"),
    (owner("jobset.x-k8s.io/v1alpha2", "JobSet", replicatedJobs=[{"replicas": 2, "template": {"spec": {
        "parallelism": -3}}}]), "spec.replicatedJobs[0].template.spec.parallelism", "must not be negative"),
    ({**owner("batch/v1", "Job"), "metadata": {"name": "o", "namespace": "ml", "ownerReferences": [
        {"apiVersion": "v1", "name": "x"}]}}, "metadata.ownerReferences[0].kind", "is required"),
    ({**owner("batch/v1", "Job"), "metadata": {"name": "o", "namespace": "ml", "ownerReferences": [
        {"apiVersion": "v1", "kind": "X", "name": "x", "controller": "yes"}]}},
     "metadata.ownerReferences[0].controller", "true or false"),
])
def test_owner_validation(raw: Raw, field: str, words: str) -> None:
    assert refused(Owner.from_raw, raw, field, words).obj.endswith(" ml/o")


def test_an_owner_needs_its_api_version_and_kind() -> None:
    raw = owner("batch/v1", "Job")
    del raw["apiVersion"], raw["kind"]
    refused(Owner.from_raw, raw, "apiVersion", "is required")
    assert Owner.from_raw(raw, "batch/v1", "Job").kind == "Job"


def test_pod_owner_refs() -> None:
    raw = pod_in("ml")
    raw["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "1"},
        {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "2", "controller": True,
         "blockOwnerDeletion": True},
    ]
    refs = pod_owner_refs(Pod.from_raw(raw))
    assert [(r.kind, r.controller) for r in refs] == [("ConfigMap", False), ("Job", True)]
    assert controller_ref(refs) == refs[1]
    assert controller_ref(refs[:1]) is None


def test_pod_owner_refs_name_the_pod() -> None:
    raw = pod_in("ml")
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "name": "train"}]
    with pytest.raises(ParseError) as err:
        pod_owner_refs(Pod.from_raw(raw))
    assert (err.value.obj, err.value.field) == ("Pod ml/w0", "metadata.ownerReferences[0].kind")


# -- the registry -----------------------------------------------------------------------------

MINIMAL: dict[str, Raw] = {
    "Node": node("n1"),
    "Pod": pod("p1"),
    "Namespace": {"metadata": {"name": "team-a", "labels": {"team": "a"}}},
    "PriorityClass": {"metadata": {"name": "high"}, "value": 1000},
    "PodGroup.scheduling.sigs.k8s.io": {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 2}},
    "ClusterNetworkTopology": {"metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
        {"topologyLayer": "SpineLayer", "parentTopologyLayer": "ClusterTopologyLayer", "labelKey": ["spine"]}]}},
    "HyperNode": {"metadata": {"name": "s0"}, "spec": {"tier": 1, "members": [
        {"type": "Node", "selector": {"exactMatch": {"name": "n1"}}}]}},
    "PodGroup.scheduling.volcano.sh": {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 2}},
    "Topology": {"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": "example.com/rack"}]}},
    "PodGroup.scheduling.k8s.io": {"metadata": {"name": "g", "namespace": "ns"},
                                   "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}},
    "PodGroup.scheduling.run.ai": {"metadata": {"name": "g", "namespace": "ns"}, "spec": {"minMember": 2}},
    "Queue": {"metadata": {"name": "team"}, "spec": {"parentQueue": "org", "preemptMinRuntime": "10m"}},
    "CompositePodGroup": {"metadata": {"name": "c", "namespace": "ns"}, "spec": {
        "workloadRef": {"workloadName": "w", "templateName": "t"}, "schedulingPolicy": {"gang": {"minGroupCount": 2}}}},
    "Job": {"metadata": {"name": "j", "namespace": "ns"}, "spec": {"parallelism": 3}},
    "ReplicaSet": {"metadata": {"name": "rs", "namespace": "ns"}, "spec": {"replicas": 3}},
    "Deployment": {"metadata": {"name": "d", "namespace": "ns"}, "spec": {"replicas": 3}},
    "StatefulSet": {"metadata": {"name": "ss", "namespace": "ns"}, "spec": {"replicas": 3}},
    "JobSet": {"metadata": {"name": "js", "namespace": "ns"}, "spec": {"replicatedJobs": [
        {"replicas": 3, "template": {"spec": {}}}]}},
    "PersistentVolumeClaim": {"metadata": {"name": "data", "namespace": "ns"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
    "PersistentVolume": {"metadata": {"name": "pv1"}, "spec": {"capacity": {"storage": "1Gi"},
                                                             "accessModes": ["ReadWriteOnce"]}},
    "StorageClass": {"metadata": {"name": "fast"}, "provisioner": "example.com/csi"},
    "CSINode": {"metadata": {"name": "n1"}, "spec": {"drivers": []}},
    "DeviceClass": {"metadata": {"name": "gpu"}, "spec": {}},
    "ResourceSlice": {"metadata": {"name": "n1-gpu"}, "spec": {
        "driver": "gpu.example.com", "nodeName": "n1", "pool": {"name": "n1", "resourceSliceCount": 1}}},
    "ResourceClaim": {"metadata": {"name": "c", "namespace": "ns"}, "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}},
    "ResourceClaimTemplate": {"metadata": {"name": "t", "namespace": "ns"}, "spec": {"spec": {"devices": {}}}},
    "DeviceTaintRule": {"metadata": {"name": "r"}, "spec": {"taint": {"key": "k", "effect": "NoSchedule"}}},
    "PodDisruptionBudget": {"metadata": {"name": "db", "namespace": "ns"}, "spec": {
        "minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}},
}
ROLE_TYPES: dict[str, type] = {
    "node": Node, "pod": Pod, "priorityclass": PriorityClass, "podgroup": PodGroup, "cnt": ClusterNetworkTopology,
    "hypernode": HyperNode, "volcano-podgroup": VolcanoPodGroup, "topology": Topology,
    "kai-podgroup": KaiPodGroup, "kai-queue": KaiQueue, "owner": Owner, "namespace": Namespace,
    "pvc": PersistentVolumeClaim,
    "pv": PersistentVolume, "storageclass": StorageClass, "csinode": CSINode, "workload-podgroup": WorkloadPodGroup,
    "composite-podgroup": CompositePodGroup, "deviceclass": DeviceClass, "resourceslice": ResourceSlice,
    "resourceclaim": ResourceClaim, "claimtemplate": ResourceClaimTemplate, "devicetaintrule": DeviceTaintRule,
    "pdb": PodDisruptionBudget,
}


def minimal(kind_name: str, group: str) -> Raw:
    return MINIMAL.get(f"{kind_name}.{group}") or MINIMAL[kind_name]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.kind}.{k.api_version}")
def test_every_kind_parses_a_minimal_object(kind: Any) -> None:
    parsed = kind.parse(minimal(kind.kind, kind.group))  # no apiVersion in the raw object, as in a list
    assert kind.role in roles()
    assert isinstance(parsed, ROLE_TYPES[kind.role])
    if isinstance(parsed, Topology | Owner):
        assert parsed.api_version == kind.api_version
    if isinstance(parsed, Owner):
        assert parsed.kind == kind.kind and parsed.replicas == 3
    with_type = {"apiVersion": kind.api_version, "kind": kind.kind, **minimal(kind.kind, kind.group)}
    assert kind.parse(with_type) == parsed


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: f"{k.kind}.{k.api_version}")
def test_kind_for_round_trips(kind: Any) -> None:
    assert kind_for(kind.api_version, kind.kind) is kind


def test_registry_names() -> None:
    assert kind_for("v1", "Pod") is not None and kind_for("v1", "Pod").id == "pods"  # type: ignore[union-attr]
    hn = kind_for("topology.volcano.sh/v1alpha1", "HyperNode")
    assert hn is not None and hn.id == "hypernodes.topology.volcano.sh" and not hn.namespaced
    assert kind_for("scheduling.volcano.sh/v1beta1", "PodGroup") is not kind_for("scheduling.sigs.k8s.io/v1alpha1",
                                                                                   "PodGroup")
    assert kind_for("batch.volcano.sh/v1alpha1", "Job") is None
    assert kind_for("v1", "ConfigMap") is None
    assert len({(k.api_version, k.kind) for k in KINDS}) == len(KINDS)
    assert {k.role for k in KINDS} == roles() == set(ROLE_TYPES)


def test_object_key() -> None:
    pod_kind = kind_for("v1", "Pod")
    node_kind = kind_for("v1", "Node")
    assert pod_kind is not None and node_kind is not None
    assert object_key(pod_kind, {"metadata": {"name": "p", "namespace": "ml"}}) == "ml/p"
    assert object_key(pod_kind, {"metadata": {"name": "p"}}) == "default/p"
    assert object_key(node_kind, {"metadata": {"name": "n1", "namespace": "ignored"}}) == "n1"
    assert object_key(node_kind, {"metadata": "broken"}) == ""
