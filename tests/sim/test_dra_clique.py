"""Issue 31 item 2: a gang whose pods claim GPUs and a ComputeDomain channel, held to one NVLink clique
(one value of the node label ``nvidia.com/gpu.clique``, as GPU Feature Discovery sets it) because its
topology request names that label as a required level, in every dialect: Koordinator (a
ClusterNetworkTopology layer keyed by the label), Volcano (tier-1 HyperNodes whose members are picked
by ``labelMatch`` on it), KAI (a Kueue Topology level), Kubernetes' own PodGroup
(``schedulingConstraints.topology``). The devices are published as NVIDIA's DRA driver publishes them:
``gpu.nvidia.com`` GPUs and a ``compute-domain.nvidia.com`` pool per node with ``channel-0``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from koordpy.sim.simulator import SimulationResult
from tests.builders import node, pod, podgroup, run

CLIQUE = "nvidia.com/gpu.clique"
FABRIC = "6f1c5a3e-4b2d-4e8a-9c7f-1d2e3f4a5b6c"  # the NVLink fabric's cluster UUID, <uuid>.<cliqueId>
GPU, CD = "gpu.nvidia.com", "compute-domain.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
NODES = {"n0": "0", "n1": "0", "n2": "0", "n3": "1", "n4": "1", "n5": "1"}  # node -> cliqueId


def classes() -> list[dict[str, Any]]:
    def cls(name: str, expression: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}
    return [cls(GPU, f"device.driver == '{GPU}' && device.attributes['{GPU}'].type == 'gpu'"),
            cls(CHANNEL_CLASS, f"device.driver == '{CD}' && device.attributes['{CD}'].type == 'channel' "
                               f"&& device.attributes['{CD}'].id == 0")]


def slices(name: str) -> list[dict[str, Any]]:
    """``name``'s two pools: its four GPUs, and the ComputeDomain plugin's channel-0 and daemon-0."""
    gpus = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"}, "index": {"int": i},
                                                 "productName": {"string": "NVIDIA GB200"}},
             "capacity": {"memory": {"value": "189471Mi"}}} for i in range(4)]
    cd = [{"name": "channel-0", "attributes": {"type": {"string": "channel"}, "id": {"int": 0}}},
          {"name": "daemon-0", "attributes": {"type": {"string": "daemon"}, "id": {"int": 0}}}]
    return [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{name}-{driver}"},
             "spec": {"driver": driver, "nodeName": name, "pool": {"name": name, "generation": 1,
                                                                   "resourceSliceCount": 1}, "devices": devices}}
            for driver, devices in ((GPU, gpus), (CD, cd))]


def templates() -> list[dict[str, Any]]:
    """The GPUs' template, and the channel's as the ComputeDomain controller writes it."""
    gpus = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpus", "exactly": {"deviceClassName": GPU, "allocationMode": "ExactCount", "count": 4}}]}}}}
    channel = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
               "metadata": {"name": "imex-channel", "namespace": "default",
                            "labels": {"resource.nvidia.com/computeDomain": "uid-cd",
                                       "resource.nvidia.com/computeDomainTarget": "Workload"}},
               "spec": {"spec": {"devices": {
                   "requests": [{"name": "channel", "exactly": {"deviceClassName": CHANNEL_CLASS}}],
                   "config": [{"requests": ["channel"], "opaque": {"driver": CD, "parameters": {
                       "apiVersion": "resource.nvidia.com/v1beta1", "kind": "ComputeDomainChannelConfig",
                       "domainID": "uid-cd", "allocationMode": "Single"}}}]}}}}
    return [gpus, channel]


def cluster(busy: tuple[str, ...] = ("n1",)) -> list[dict[str, Any]]:
    """Two cliques of three 4-GPU nodes; the GPUs of ``busy`` are held by a running pod each, so
    clique 0 has two free nodes and clique 1 three. Nodes are taken by name when nothing else tells
    them apart, so a gang of three that ignored the clique would take n0, n2 and n3."""
    objs: list[dict[str, Any]] = [*classes(), *templates()]
    for name, clique in NODES.items():
        objs += [node(name, cpu="64", labels={CLIQUE: f"{FABRIC}.{clique}"}), *slices(name)]
    for name in busy:
        holder = f"busy-{name}"
        results = [{"request": "gpus", "driver": GPU, "pool": name, "device": f"gpu-{d}"} for d in range(4)]
        objs.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                     "metadata": {"name": f"{holder}-gpus", "namespace": "default"},
                     "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                         "deviceClassName": GPU, "allocationMode": "ExactCount", "count": 4}}]}},
                     "status": {"allocation": {"devices": {"results": results}},
                                "reservedFor": [{"resource": "pods", "name": holder, "uid": f"uid-{holder}"}]}})
        running = pod(holder, cpu="1", node_name=name)
        running["metadata"]["uid"] = f"uid-{holder}"
        running["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimName": f"{holder}-gpus"}]
        running["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
        objs.append(running)
    return objs


def member(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` claiming four GPUs and the ComputeDomain's channel, each from its template."""
    body["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "gpus"},
                                      {"name": "channel", "resourceClaimTemplateName": "imex-channel"}]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}, {"name": "channel"}]
    return body


# -- each dialect's way of naming the clique as a required level ----------------------------------------

def koordinator(n: int) -> list[dict[str, Any]]:
    topology = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
                "metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
                    {"topologyLayer": "CliqueLayer", "labelKey": [CLIQUE]},
                    {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "CliqueLayer"}]}}
    group = podgroup("train", n, gather=[{"layer": "CliqueLayer", "strategy": "MustGather"}])
    return [topology, group, *[member(pod(f"train-{i}", cpu="1", group="train", index=i)) for i in range(n)]]


def volcano(n: int) -> list[dict[str, Any]]:
    def hypernode(name: str, tier: int, members: list[dict[str, Any]]) -> dict[str, Any]:
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                "spec": {"tier": tier, "members": members}}
    cliques = [hypernode(f"clique-{c}", 1, [{"type": "Node", "selector": {
        "labelMatch": {"matchLabels": {CLIQUE: f"{FABRIC}.{c}"}}}}]) for c in ("0", "1")]
    root = hypernode("fabric", 2, [{"type": "HyperNode", "selector": {"exactMatch": {"name": f"clique-{c}"}}}
                                   for c in ("0", "1")])
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "default"},
             "spec": {"minMember": n, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}
    pods = [member(pod(f"train-{i}", cpu="1", annotations={"scheduling.k8s.io/group-name": "train"}))
            for i in range(n)]
    return [*cliques, root, group, *pods]


def kai(n: int) -> list[dict[str, Any]]:
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "nvlink"},
                "spec": {"levels": [{"nodeLabel": CLIQUE}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "default"},
             "spec": {"minMember": n, "topologyConstraint": {"topology": "nvlink", "requiredTopologyLevel": CLIQUE}}}
    pods = [member(pod(f"train-{i}", cpu="1", annotations={"pod-group-name": "train"})) for i in range(n)]
    return [topology, group, *pods]


def upstream(n: int) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": n}},
                      "schedulingConstraints": {"topology": [{"key": CLIQUE}]}}}
    pods = [member(pod(f"train-{i}", cpu="1", schedulingGroup={"podGroupName": "train"})) for i in range(n)]
    return [group, *pods]


DIALECTS: list[Callable[[int], list[dict[str, Any]]]] = [koordinator, volcano, kai, upstream]


def cliques_of(out: SimulationResult, prefix: str = "default/train-") -> set[str]:
    return {NODES[n] for k, n in out.bound.items() if k.startswith(prefix)}


@pytest.mark.parametrize("gang", DIALECTS, ids=lambda f: f.__name__)
def test_the_gang_and_its_channels_are_placed_inside_one_clique(gang: Callable[[int], list[dict[str, Any]]]) -> None:
    out = run(cluster(), gang(3))
    assert sorted(out.bound[f"default/train-{i}"] for i in range(3)) == ["n3", "n4", "n5"], out.pending
    assert out.allocations is not None
    for i in range(3):
        where = out.bound[f"default/train-{i}"]
        assert len(out.allocations[f"default/train-{i}-gpus"]) == 4
        assert {d.split("/")[1] for d in out.allocations[f"default/train-{i}-gpus"]} == {where}
        assert out.allocations[f"default/train-{i}-channel"] == [f"{CD}/{where}/channel-0"]


@pytest.mark.parametrize("gang", DIALECTS, ids=lambda f: f.__name__)
def test_a_gang_no_clique_can_take_waits_whole_holding_no_device(
        gang: Callable[[int], list[dict[str, Any]]]) -> None:
    # Five free nodes in all, but neither clique has four.
    out = run(cluster(), gang(4))
    assert not any(k.startswith("default/train-") for k in out.bound), out.bound
    assert out.allocations is not None and set(out.allocations) == {"default/busy-n1-gpus"}


def test_without_the_clique_level_the_same_gang_straddles_cliques() -> None:
    # The control for the tests above: nothing but the required level keeps the gang in one clique.
    group = podgroup("train", 3)
    out = run(cluster(), group, *[member(pod(f"train-{i}", cpu="1", group="train")) for i in range(3)])
    assert len(out.bound) == 3 and cliques_of(out) == {"0", "1"}


# -- explain: the clique that came closest, and what it lacked ------------------------------------------

CLOSEST = {"koordinator": f"CliqueLayer/{FABRIC}.1", "volcano": "clique-1", "kai": f"{FABRIC}.1",
           "upstream": f"{FABRIC}.1"}
NO_GPUS = "cannot allocate all claims (claim gpus, request gpus: too few of the devices that match are free (0 of 4))"


@pytest.mark.parametrize("gang", DIALECTS, ids=lambda f: f.__name__)
def test_explain_names_the_clique_that_came_closest_and_the_devices_it_lacked(
        gang: Callable[[int], list[dict[str, Any]]]) -> None:
    from koordpy.core.explain import explain_podgroup
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    # Clique 0 keeps one free node, clique 1 two: a gang of three fits neither.
    world = World.from_objects([("t", o) for o in (*cluster(busy=("n1", "n2", "n5")), *gang(3))])
    exp = explain_podgroup(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, "default/train")
    assert exp is not None and exp.diagnosis is not None
    closest = exp.diagnosis.closest
    assert closest is not None
    assert (closest.domain, closest.offers, closest.nodes) == (CLOSEST[gang.__name__], 2, 3)
    assert closest.lacks == ((NO_GPUS, 1),)
    # The GPUs the busy pods hold count as free once every other pod is gone, as their CPU does.
    assert exp.diagnosis.fits_empty is True
    said = [c for c in exp.changes if c.startswith("room for 1 more pod(s)")]
    assert said == [f"room for 1 more pod(s) in {CLOSEST[gang.__name__]}: it offers 2 of the 3 needed (the best of "
                    f"2 domain(s)); of its 3 node(s), 1 {NO_GPUS}"], exp.changes
    json = exp.to_json()["diagnosis"]["closest"]
    assert json == {"domain": CLOSEST[gang.__name__], "offerslots": 2, "nodes": 3,
                    "lacks": [{"reason": NO_GPUS, "nodes": 1}]}


def test_explain_says_when_the_closest_clique_rules_out_no_node_but_holds_too_few() -> None:
    from koordpy.core.explain import explain_podgroup
    from koordpy.core.messages import lacked
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    world = World.from_objects([("t", o) for o in (*cluster(), *upstream(4))])
    exp = explain_podgroup(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, "default/train")
    assert exp is not None and exp.diagnosis is not None and exp.diagnosis.closest is not None
    closest = exp.diagnosis.closest
    assert (closest.domain, closest.offers, closest.nodes, closest.lacks) == (f"{FABRIC}.1", 3, 3, ())
    assert lacked(closest) == "none of its 3 node(s) is ruled out: it holds too few"
