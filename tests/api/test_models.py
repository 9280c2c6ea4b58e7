"""Parsing raw objects: good input becomes models, bad input names the object and the field."""

from typing import Any

import pytest

from koordpy.api import ClusterNetworkTopology, Node, ParseError, Pod, PodGroup
from koordpy.api.podgroup import gang_config_from_pod, gang_config_from_podgroup, topology_index
from koordpy.api.topology import parse_network_topology_spec
from tests.builders import SPINE_BLOCK_CNT, cnt, node, pod, podgroup


def test_node_allocatable_and_conditions() -> None:
    raw = node("n1", cpu="4", memory="8Gi", extra={"nvidia.com/gpu": "8"})
    raw["spec"] = {"unschedulable": True, "taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]}
    raw["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    n = Node.from_raw(raw)
    assert n.allocatable["cpu"] == 4000 and n.allocatable["nvidia.com/gpu"] == 8
    assert n.allocatable["memory"] == 8 * 2**30 and n.allocatable["pods"] == 110
    assert n.unschedulable and not n.ready and n.taints[0].key == "gpu"


def test_pod_requests_sum_containers_take_max_init_and_default_to_limits() -> None:
    raw = pod("p", cpu="1")
    raw["spec"]["containers"].append({"name": "side", "resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "2"}}})
    raw["spec"]["initContainers"] = [{"name": "init", "resources": {"requests": {"cpu": "4"}}}]
    p = Pod.from_raw(raw)
    assert p.requests["cpu"] == 4000  # init container 4 > 1 + 0.5
    assert p.requests["nvidia.com/gpu"] == 2 and p.requests["memory"] == 2**30
    assert p.requests["pods"] == 1


@pytest.mark.parametrize(("mutate", "field"), [
    (lambda r: r["spec"]["containers"][0]["resources"]["requests"].update(cpu="lots"),
     "spec.containers[0].resources.requests.cpu"),
    (lambda r: r["spec"].update(tolerations=[{"key": "a", "operator": "Maybe"}]), "spec.tolerations[0].operator"),
    (lambda r: r["metadata"].update(labels=["x"]), "metadata.labels"),
    (lambda r: r["spec"].update(preemptionPolicy="Sometimes"), "spec.preemptionPolicy"),
    (lambda r: r["spec"].update(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Near"}]}]}}}),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].operator"),
])
def test_bad_pods_name_object_and_field(mutate: Any, field: str) -> None:
    raw = pod("bad-pod")
    mutate(raw)
    with pytest.raises(ParseError) as err:
        Pod.from_raw(raw)
    assert err.value.obj == "Pod default/bad-pod"
    assert err.value.field == field


def test_podgroup_spec_and_annotations_override() -> None:
    raw = podgroup("g", 4, timeout=120, groups=["default/g", "other/h"],
                   annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict",
                                "gang.scheduling.koordinator.sh/total-number": "6"})
    cfg = gang_config_from_podgroup(PodGroup.from_raw(raw))
    assert cfg.min_member == 4 and cfg.total_number == 6 and cfg.mode == "NonStrict"
    assert cfg.waiting_seconds == 120 and cfg.group_keys == ("default/g", "other/h")


def test_podgroup_default_waiting_time_is_600s() -> None:
    assert gang_config_from_podgroup(PodGroup.from_raw(podgroup("g", 1, timeout=None))).waiting_seconds == 600


@pytest.mark.parametrize(("raw", "field", "words"), [
    (podgroup("g", 0), "spec.minMember", "at least 1"),
    (podgroup("g", 2, annotations={"gang.scheduling.koordinator.sh/groups": "[default/g"}),
     "metadata.annotations[gang.scheduling.koordinator.sh/groups]", "JSON array"),
    (podgroup("g", 2, annotations={"gang.scheduling.koordinator.sh/mode": "Loose"}),
     "metadata.annotations[gang.scheduling.koordinator.sh/mode]", "Strict or NonStrict"),
    (podgroup("g", 2, annotations={"gang.scheduling.koordinator.sh/network-topology-spec": "{not json"}),
     "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]", "invalid JSON"),
    (podgroup("g", 2, gather=[{"layer": "BlockLayer", "strategy": "Gather"}]),
     "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]", "PreferGather or MustGather"),
    (podgroup("g", 2, gather=[{"layer": "BlockLayer", "strategy": "MustGather", "podCountMultiple": 0}]),
     "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-spec]", "podCountMultiple"),
])
def test_bad_podgroups(raw: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ParseError) as err:
        PodGroup.from_raw(raw)
    assert err.value.obj == "PodGroup default/g" and err.value.field == field and words in err.value.message


def test_annotation_gang_and_compat_keys() -> None:
    cfg = gang_config_from_pod("Pod default/p", "default", {
        "gang.scheduling.koordinator.sh/name": "gang-a", "gang.scheduling.koordinator.sh/min-available": "5",
        "gang.scheduling.koordinator.sh/waiting-time": "3600s", "gang.scheduling.koordinator.sh/match-policy":
        "waiting-and-running", "gang.scheduling.koordinator.sh/groups": '["namespaceA/gang-a", "namespaceB/gang-b"]'},
        None)
    assert cfg is not None
    assert (cfg.key, cfg.min_member, cfg.total_number, cfg.waiting_seconds) == ("default/gang-a", 5, 5, 3600)
    assert cfg.match_policy == "waiting-and-running" and "namespaceB/gang-b" in cfg.groups
    compat = gang_config_from_pod("Pod default/p", "default", {
        "pod-group.scheduling.sigs.k8s.io/name": "g", "pod-group.scheduling.sigs.k8s.io/min-available": "2"}, None)
    assert compat is not None and compat.min_member == 2


def test_pod_annotations_override_the_podgroup() -> None:
    pg = PodGroup.from_raw(podgroup("g", 4))
    cfg = gang_config_from_pod("Pod default/p", "default", {"gang.scheduling.koordinator.sh/min-available": "2"}, pg)
    assert cfg is not None and cfg.min_member == 2 and cfg.from_crd


@pytest.mark.parametrize(("ann", "field"), [
    ({"gang.scheduling.koordinator.sh/name": "g", "gang.scheduling.koordinator.sh/min-available": "two"},
     "metadata.annotations[gang.scheduling.koordinator.sh/min-available]"),
    ({"gang.scheduling.koordinator.sh/name": "g"},
     "metadata.annotations[gang.scheduling.koordinator.sh/min-available]"),
    ({"gang.scheduling.koordinator.sh/name": "Not_RFC1123", "gang.scheduling.koordinator.sh/min-available": "1"},
     "metadata.annotations[gang.scheduling.koordinator.sh/name]"),
    ({"gang.scheduling.koordinator.sh/name": "g", "gang.scheduling.koordinator.sh/min-available": "1",
      "gang.scheduling.koordinator.sh/waiting-time": "soon"},
     "metadata.annotations[gang.scheduling.koordinator.sh/waiting-time]"),
])
def test_bad_gang_annotations(ann: dict[str, str], field: str) -> None:
    with pytest.raises(ParseError) as err:
        gang_config_from_pod("Pod default/p", "default", ann, None)
    assert err.value.field == field


def test_topology_index() -> None:
    assert topology_index("Pod default/p", {"gang.scheduling.koordinator.sh/network-topology-index": "7"}) == 7
    assert topology_index("Pod default/p", {}) is None
    with pytest.raises(ParseError):
        topology_index("Pod default/p", {"gang.scheduling.koordinator.sh/network-topology-index": "first"})


def test_cluster_network_topology_orders_layers_top_down() -> None:
    shuffled = cnt(("BlockLayer", "SpineLayer", "b"), ("NodeTopologyLayer", "BlockLayer", None),
                   ("SpineLayer", None, "s"))
    t = ClusterNetworkTopology.from_raw(shuffled)
    assert [layer.layer for layer in t.layers] == ["SpineLayer", "BlockLayer", "NodeTopologyLayer"]
    assert ClusterNetworkTopology.from_raw(SPINE_BLOCK_CNT).layer_names[0] == "ClusterTopologyLayer"


@pytest.mark.parametrize(("raw", "words"), [
    (cnt(("SpineLayer", None, "s"), ("BlockLayer", "SpinLayer", "b")), "not declared"),
    (cnt(("A", "B", "a"), ("B", "A", "b")), "cycle"),
    (cnt(("A", None, "a"), ("B", "A", "b"), ("C", "A", "c")), "chain"),
    (cnt(("A", None, None), ("B", "A", "b")), "no labelKey"),
    (cnt(("A", None, "a"), ("A", None, "b")), "twice"),
])
def test_bad_cluster_network_topology(raw: dict[str, Any], words: str) -> None:
    with pytest.raises(ParseError) as err:
        ClusterNetworkTopology.from_raw(raw)
    assert err.value.obj == "ClusterNetworkTopology default" and words in err.value.message


def test_network_topology_spec() -> None:
    spec = parse_network_topology_spec('{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "MustGather", '
                                       '"podCountMultiple": 8}]}')
    assert spec.gather[0].pod_count_multiple == 8
    with pytest.raises(ValueError, match="unknown keys"):
        parse_network_topology_spec('{"gather": []}')
