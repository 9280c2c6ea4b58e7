"""Issue 30: pods' ResourceClaims allocated as kube-scheduler v1.37 allocates them, end to end through
``koordpy simulate``'s World: a lone pod, a gang of each dialect (Koordinator, Volcano, KAI, Kubernetes'
own PodGroup) whose members each claim a node's GPUs, the topology search counting devices, all or
nothing (a gang that waits holds no device), preemption freeing a victim's devices, and why a pod waits."""

from __future__ import annotations

from typing import Any

from koordpy.sim.simulator import SimulationResult
from tests.builders import node, pod, podgroup, priority_class, run

DRIVER = "gpu.example.com"
SPINE, BLOCK = "network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"


def gpu_class(name: str = DRIVER) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def gpu_slice(node_name: str, n: int = 8, model: str = "h100", taint: bool = False) -> dict[str, Any]:
    devices = []
    for i in range(n):
        device: dict[str, Any] = {"name": f"gpu-{i}", "attributes": {"model": {"string": model}, "index": {"int": i}}}
        if taint:
            device["taints"] = [{"key": f"{DRIVER}/unhealthy", "effect": "NoSchedule"}]
        devices.append(device)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": node_name,
                     "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1}, "devices": devices}}


def _request(count: int, selector: str | None) -> dict[str, Any]:
    exactly: dict[str, Any] = {"deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": count}
    if selector:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}}


def claim(name: str, count: int = 8, selector: str | None = None, **status: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": name, "namespace": "default"}, "spec": _request(count, selector)}
    if status:
        body["status"] = status
    return body


def template(name: str = "gpus", count: int = 8, selector: str | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"spec": _request(count, selector)}}


def claiming(body: dict[str, Any], *, claim_name: str = "", template_name: str = "") -> dict[str, Any]:
    """``body`` (a pod) with one claim ``gpus``: a ResourceClaim by name, or one made from a template."""
    entry: dict[str, Any] = {"name": "gpus"}
    if claim_name:
        entry["resourceClaimName"] = claim_name
    else:
        entry["resourceClaimTemplateName"] = template_name
    body["spec"]["resourceClaims"] = [entry]
    body["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpus"}]
    return body


def gpu_nodes(*names: str, labels: dict[str, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    return [node(n, cpu="64", labels=(labels or {}).get(n)) for n in names]


def allocated_on(result: SimulationResult, claim_key: str) -> set[str]:
    """The nodes (pools) of the devices a claim holds at the end."""
    assert result.allocations is not None
    return {d.split("/")[1] for d in result.allocations.get(claim_key, [])}


# -- a lone pod ------------------------------------------------------------------------------------

def test_a_pods_claim_goes_where_its_selector_finds_devices_and_is_allocated_there() -> None:
    out = run(gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a", model="a100"), gpu_slice("node-b"),
              claim("train-gpus", 4, f'device.attributes["{DRIVER}"].model == "h100"'),
              claiming(pod("train", cpu="1"), claim_name="train-gpus"))
    assert out.bound == {"default/train": "node-b"}
    assert out.allocations is not None and len(out.allocations["default/train-gpus"]) == 4
    assert allocated_on(out, "default/train-gpus") == {"node-b"}
    assert out.devices["default/train"] == out.allocations["default/train-gpus"]
    assert out.to_json()["allocations"] == out.allocations


def test_a_template_claim_is_made_for_the_pod_and_named_after_it() -> None:
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), template(count=2),
              claiming(pod("train", cpu="1"), template_name="gpus"))
    assert out.bound == {"default/train": "node-a"}
    assert out.allocations is not None and len(out.allocations["default/train-gpus"]) == 2


def test_two_pods_never_get_the_same_device() -> None:
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a", n=8), template(count=4),
              *[claiming(pod(f"p-{i}", cpu="1"), template_name="gpus") for i in range(3)])
    assert len(out.bound) == 2 and list(out.pending) == ["default/p-2"]
    assert out.allocations is not None
    held = [d for key in ("default/p-0-gpus", "default/p-1-gpus") for d in out.allocations[key]]
    assert len(held) == len(set(held)) == 8
    assert "cannot allocate all claims" in out.pending["default/p-2"]
    assert "default/p-2-gpus" not in out.allocations


# -- why a pod waits ---------------------------------------------------------------------------------

def test_a_missing_claim_says_kube_schedulers_words() -> None:
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), claiming(pod("p", cpu="1"), claim_name="nope"))
    assert out.pending["default/p"] == '0/1 nodes are available: resourceclaim.resource.k8s.io "nope" not found.'


def test_a_missing_class_says_which_request_names_it() -> None:
    body = claim("c")
    body["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "missing.example.com"
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), body, claiming(pod("p", cpu="1"), claim_name="c"))
    assert "request gpus: device class missing.example.com does not exist" in out.pending["default/p"]


def test_tainted_devices_and_a_selector_no_device_meets_are_told_apart_per_node() -> None:
    out = run(gpu_nodes("node-a", "node-b", "node-c"), gpu_class(), gpu_slice("node-a", taint=True),
              gpu_slice("node-b", model="a100"),
              claim("c", 8, f'device.attributes["{DRIVER}"].model == "h100"'),
              claiming(pod("p", cpu="1"), claim_name="c"))
    said = out.pending["default/p"]
    assert said.startswith("0/3 nodes are available: ")
    assert "claim gpus, request gpus" in said
    assert "taints it does not tolerate" in said and "too few devices match" in said
    assert "1 cannot allocate all claims (no ResourceSlice publishes devices for the node)" in said
    assert out.allocations == {}


# -- gangs: all or nothing, gathered where the devices are ------------------------------------------------

def koord_gang(name: str, n: int, *, via_template: bool = True, index: bool = False) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        body = pod(f"{name}-{i}", cpu="1", group=name, index=i if index else None)
        out.append(claiming(body, template_name="gpus") if via_template
                   else claiming(body, claim_name=f"{name}-{i}-gpus"))
    return out


def test_a_gang_takes_nodes_whose_devices_are_healthy_and_a_gang_too_big_holds_nothing() -> None:
    out = run(gpu_nodes("node-a", "node-b", "node-c"), gpu_class(), gpu_slice("node-a"), gpu_slice("node-b"),
              gpu_slice("node-c", taint=True), template(),
              podgroup("trainer", 2), *koord_gang("trainer", 2), podgroup("big", 3), *koord_gang("big", 3))
    assert sorted(out.bound.values()) == ["node-a", "node-b"]
    assert {k for k in out.bound} == {"default/trainer-0", "default/trainer-1"}
    assert set(out.pending) == {"default/big-0", "default/big-1", "default/big-2"}
    assert out.allocations is not None and not any(k.startswith("default/big") for k in out.allocations)


def topology_cluster() -> list[dict[str, Any]]:
    """Two blocks of two GPU nodes; block b1's nodes have their GPUs taken by a running pod each."""
    where = {f"n{i}": {SPINE: "s1", BLOCK: "b1" if i < 2 else "b2"} for i in range(4)}
    objs: list[dict[str, Any]] = [*gpu_nodes(*where, labels=where), gpu_class(), template(),
                                  *[gpu_slice(n) for n in where]]
    for i in range(2):  # running pods, their claims allocated already
        name = f"busy-{i}"
        results = [{"request": "gpus", "driver": DRIVER, "pool": f"n{i}", "device": f"gpu-{d}"} for d in range(8)]
        objs.append(claim(f"{name}-gpus", allocation={"devices": {"results": results}, "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [f"n{i}"]}]}]}},
            reservedFor=[{"resource": "pods", "name": name, "uid": f"uid-{name}"}]))
        running = claiming(pod(name, cpu="1", node_name=f"n{i}"), claim_name=f"{name}-gpus")
        running["metadata"]["uid"] = f"uid-{name}"
        objs.append(running)
    return objs


SPINE_BLOCK = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
               "metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
                   {"topologyLayer": "SpineLayer", "labelKey": [SPINE]},
                   {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": [BLOCK]},
                   {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"}]}}


def test_a_koordinator_gang_gathers_in_the_block_whose_gpus_are_free() -> None:
    # The CPU and pods columns favour block b1 (binpacking: its nodes run pods); only the devices say
    # it cannot take the gang. MustGather on the block: the search must count devices, not fail.
    gang = podgroup("train", 2, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}])
    out = run(topology_cluster(), SPINE_BLOCK, gang, *koord_gang("train", 2, index=True))
    assert sorted(out.bound[f"default/train-{i}"] for i in range(2)) == ["n2", "n3"]
    assert allocated_on(out, "default/train-0-gpus") | allocated_on(out, "default/train-1-gpus") == {"n2", "n3"}


def test_a_gang_whose_block_has_no_free_gpus_waits_holding_nothing() -> None:
    objs = topology_cluster()
    gang = podgroup("train", 3, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}])
    out = run(objs, SPINE_BLOCK, gang, *koord_gang("train", 3, index=True))
    assert not any(k.startswith("default/train") for k in out.bound)
    assert out.allocations is not None and set(out.allocations) == {"default/busy-0-gpus", "default/busy-1-gpus"}


def volcano_gang(name: str, n: int) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": n}}
    pods = []
    for i in range(n):
        body = claiming(pod(f"{name}-{i}", cpu="1", annotations={"scheduling.k8s.io/group-name": name}),
                        template_name="gpus")
        pods.append(body)
    return [group, *pods]


def kai_gang(name: str, n: int) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": n}}
    pods = [claiming(pod(f"{name}-{i}", cpu="1", annotations={"pod-group-name": name}), template_name="gpus")
            for i in range(n)]
    return [group, *pods]


def upstream_gang(name: str, n: int) -> list[dict[str, Any]]:
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": name, "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": n}}}}
    pods = [claiming(pod(f"{name}-{i}", cpu="1", schedulingGroup={"podGroupName": name}), template_name="gpus")
            for i in range(n)]
    return [group, *pods]


def test_every_dialects_gang_gets_its_devices_together_or_not_at_all() -> None:
    for make in (volcano_gang, kai_gang, upstream_gang):
        fits = run(gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a"), gpu_slice("node-b"), template(),
                   *make("g", 2))
        assert sorted(fits.bound.values()) == ["node-a", "node-b"], (make.__name__, fits.pending)
        assert fits.allocations is not None and set(fits.allocations) == {"default/g-0-gpus", "default/g-1-gpus"}
        too_big = run(gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a"), gpu_slice("node-b"),
                      template(), *make("g", 3))
        assert not too_big.bound, make.__name__
        assert too_big.allocations == {}, make.__name__


# -- preemption frees devices ----------------------------------------------------------------------------

def test_a_preemption_victims_devices_go_to_the_preemptor_and_its_claim_is_deallocated() -> None:
    low = claiming(pod("low", cpu="1", priority_class="low"), template_name="gpus")
    high = claiming(pod("high", cpu="1", priority_class="high"), template_name="gpus")
    first = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), template(), priority_class("low", 1),
                priority_class("high", 1000), low)
    assert first.bound == {"default/low": "node-a"}
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), template(), priority_class("low", 1),
              priority_class("high", 1000), _running(low, "node-a"), high)
    assert out.preempted == ["default/low"]
    assert out.bound.get("default/high") == "node-a"
    assert out.allocations is not None and set(out.allocations) == {"default/high-gpus"}


def _running(body: dict[str, Any], node_name: str) -> list[dict[str, Any]]:
    """``body`` running on ``node_name`` with its template's claim allocated all 8 GPUs there."""
    name = body["metadata"]["name"]
    body = {**body, "metadata": {**body["metadata"], "uid": f"uid-{name}"},
            "spec": {**body["spec"], "nodeName": node_name},
            "status": {"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}]}}
    results = [{"request": "gpus", "driver": DRIVER, "pool": node_name, "device": f"gpu-{d}"} for d in range(8)]
    made = claim(f"{name}-gpus", allocation={"devices": {"results": results}},
                 reservedFor=[{"resource": "pods", "name": name, "uid": f"uid-{name}"}])
    made["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": f"uid-{name}",
                                            "controller": True}]
    made["metadata"]["annotations"] = {"resource.kubernetes.io/pod-claim-name": "gpus"}
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]  # kube-scheduler's, as it allocated
    return [made, body]


# -- a Workload PodGroup's own claims (KEP-5729, DRAWorkloadResourceClaims) ---------------------------------

def channel_objects() -> list[dict[str, Any]]:
    """A network-attached channel device usable on rack r1's nodes (a ComputeDomain's, say), its class
    and a template asking for it."""
    rack = "topology.kubernetes.io/rack"
    nodes = [node(n, cpu="64", labels={rack: r}) for n, r in (("r1-0", "r1"), ("r1-1", "r1"), ("r2-0", "r2"))]
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "channel"},
           "spec": {"selectors": [{"cel": {"expression": 'device.driver == "channel.example.com"'}}]}}
    sl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "domain-r1"},
          "spec": {"driver": "channel.example.com",
                   "pool": {"name": "domain-r1", "generation": 1, "resourceSliceCount": 1},
                   "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                       {"key": rack, "operator": "In", "values": ["r1"]}]}]},
                   "devices": [{"name": "channel-0"}]}}
    tpl = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "channel", "namespace": "default"},
           "spec": {"spec": {"devices": {"requests": [{"name": "ch", "exactly": {"deviceClassName": "channel"}}]}}}}
    return [*nodes, cls, sl, tpl]


def channel_gang(uid: str = "") -> list[dict[str, Any]]:
    """The PodGroup ``train`` (a gang of 2) with the claim ``channel`` from ``channel_objects``' template
    (``uid``: the group's, where no API server gives one), and its members t-0 and t-1, each naming
    the group's entry (40 CPUs each: one a node)."""
    entry = [{"name": "channel", "resourceClaimTemplateName": "channel"}]
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "default", **({"uid": uid} if uid else {})},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": entry}}
    members = []
    for i in range(2):
        body = pod(f"t-{i}", cpu="40", schedulingGroup={"podGroupName": "train"})
        body["spec"]["resourceClaims"] = entry
        members.append(body)
    return [group, *members]


def test_a_podgroups_claim_is_allocated_once_for_its_members_and_reserved_for_the_group() -> None:
    from koordpy.sim.simulator import World, simulate

    world = World.from_objects([("t", o) for o in (*channel_objects(), *channel_gang("uid-train"))])
    out = simulate(world)
    assert sorted(out.bound.values()) == ["r1-0", "r1-1"]  # one member a node, both where the channel reaches
    assert out.allocations == {"default/train-channel": ["channel.example.com/domain-r1/channel-0"]}
    made = world.devices.claims["default/train-channel"]
    assert [(c.resource, c.name, c.api_group) for c in made.reserved_for] == [
        ("podgroups", "train", "scheduling.k8s.io")]


def test_a_gang_preempts_for_devices_inside_one_block() -> None:
    # Every node's GPUs are held by a low-priority pod; block b2's pods also hold more CPU. The gang
    # (MustGather on the block) evicts exactly the two GPU holders of one block, and their claims go.
    where = {f"n{i}": {SPINE: "s1", BLOCK: "b1" if i < 2 else "b2"} for i in range(4)}
    objs: list[dict[str, Any]] = [*gpu_nodes(*where, labels=where), gpu_class(), template(),
                                  *[gpu_slice(n) for n in where], priority_class("low", 1),
                                  priority_class("high", 1000)]
    for i, n in enumerate(where):
        objs += _running(claiming(pod(f"low-{i}", cpu="1", priority_class="low"), template_name="gpus"), n)
    gang = podgroup("train", 2, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}])
    members = [claiming(pod(f"train-{i}", cpu="1", group="train", index=i, priority_class="high"),
                        template_name="gpus") for i in range(2)]
    out = run(objs, SPINE_BLOCK, gang, *members)
    assert len(out.preempted) == 2
    victims_nodes = {f"n{out.preempted[0][-1]}", f"n{out.preempted[1][-1]}"}
    assert victims_nodes in ({"n0", "n1"}, {"n2", "n3"})  # one block's
    assert {out.bound["default/train-0"], out.bound["default/train-1"]} == victims_nodes
    assert out.allocations is not None
    assert not any(f"default/{v.split('/')[1]}-gpus" in out.allocations for v in out.preempted)


def test_a_nonstrict_gang_holds_room_but_no_device_while_it_waits_and_gets_them_at_bind() -> None:
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState
    from koordpy.sim.simulator import World

    gang = podgroup("g", 3, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"})

    def world(*names: str) -> World:
        objs = [*gpu_nodes(*names), gpu_class(), template(), *[gpu_slice(n) for n in names], gang,
                *koord_gang("g", 3)]
        return World.from_objects([("t", o) for o in objs])

    state = SchedulerState()
    two = world("n0", "n1")
    first = schedule(two.snapshot(frozenset({"koordpy"})), state, two.now)
    assert first.binds == [] and len(state.reserved) == 2  # room held on two nodes
    assert state.view is not None and state.view.devices is not None
    assert not any(c.allocation for c in state.view.devices.claims.values())  # and no device
    three = world("n0", "n1", "n2")
    second = schedule(three.snapshot(frozenset({"koordpy"})), state, three.now + 1)
    assert sorted(b.node for b in second.binds) == ["n0", "n1", "n2"]
    for bind in second.binds:
        assert bind.devices is not None and bind.devices.node == bind.node
        (write,) = bind.devices.claims
        assert write.allocation is not None and {r.pool for r in write.allocation.results} == {bind.node}


def test_a_workload_podgroup_with_a_topology_key_goes_to_the_rack_whose_gpus_are_free() -> None:
    # kube-scheduler's group cycle per domain of the key: rack r1 has more free CPU, but its GPUs are
    # taken; the group goes to r2 whole.
    rack = "topology.kubernetes.io/rack"
    names = {"a0": "r1", "a1": "r1", "a2": "r1", "b0": "r2", "b1": "r2"}
    objs: list[dict[str, Any]] = [*[node(n, cpu="64", labels={rack: r}) for n, r in names.items()], gpu_class(),
                                  template(), *[gpu_slice(n) for n in names]]
    for i, n in enumerate(("a0", "a1", "a2")):
        objs += _running(claiming(pod(f"busy-{i}", cpu="1"), template_name="gpus"), n)
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 2}},
                      "schedulingConstraints": {"topology": [{"key": rack}]}}}
    members = [claiming(pod(f"g-{i}", cpu="1", schedulingGroup={"podGroupName": "g"}), template_name="gpus")
               for i in range(2)]
    out = run(objs, group, *members)
    assert sorted(out.bound[f"default/g-{i}"] for i in range(2)) == ["b0", "b1"]


def test_a_kai_gang_with_a_required_rack_goes_where_the_gpus_are_free() -> None:
    rack = "example.com/rack"
    names = {"a0": "r1", "a1": "r1", "a2": "r1", "b0": "r2", "b1": "r2"}
    topology = {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "network"},
                "spec": {"levels": [{"nodeLabel": rack}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    objs: list[dict[str, Any]] = [*[node(n, cpu="64", labels={rack: r}) for n, r in names.items()], gpu_class(),
                                  template(), *[gpu_slice(n) for n in names], topology]
    for i, n in enumerate(("a0", "a1", "a2")):
        objs += _running(claiming(pod(f"busy-{i}", cpu="1"), template_name="gpus"), n)
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default",
                          "annotations": {"kai.scheduler/topology": "network",
                                          "kai.scheduler/topology-required-placement": rack}},
             "spec": {"minMember": 2}}
    members = [claiming(pod(f"g-{i}", cpu="1", annotations={"pod-group-name": "g"}), template_name="gpus")
               for i in range(2)]
    out = run(objs, group, *members)
    assert sorted(out.bound[f"default/g-{i}"] for i in range(2)) == ["b0", "b1"], out.pending


def _asking_gpus(name: str, n: int, resource: str = "example.com/gpu") -> dict[str, Any]:
    body = pod(name, cpu="1")
    body["spec"]["containers"][0]["resources"]["requests"][resource] = str(n)
    return body


def _backed(name: str = DRIVER, resource: str = "example.com/gpu") -> dict[str, Any]:
    body = gpu_class(name)
    body["spec"]["extendedResourceName"] = resource
    return body


def test_a_dra_backed_extended_resource_is_allocated_through_the_pods_special_claim() -> None:
    # No node lists example.com/gpu: the class backs it, the pod's claim gets two devices of node-a.
    out = run(gpu_nodes("node-a"), _backed(), gpu_slice("node-a"), _asking_gpus("p", 2))
    assert out.bound == {"default/p": "node-a"}, out.pending
    assert out.allocations == {"default/p-extended-resources": [f"{DRIVER}/node-a/gpu-0", f"{DRIVER}/node-a/gpu-1"]}
    assert out.devices == {"default/p": [f"{DRIVER}/node-a/gpu-0", f"{DRIVER}/node-a/gpu-1"]}


def test_the_implicit_extended_resource_of_a_class_is_backed_too() -> None:
    out = run(gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"),
              _asking_gpus("p", 3, f"deviceclass.resource.kubernetes.io/{DRIVER}"))
    assert out.bound == {"default/p": "node-a"}, out.pending
    assert len(out.allocations["default/p-extended-resources"]) == 3  # type: ignore[index]


def test_a_node_whose_device_plugin_lists_the_resource_serves_it_without_a_claim() -> None:
    listed = run(node("node-a", cpu="64", extra={"example.com/gpu": "2"}), _backed(), gpu_slice("node-a"),
                 _asking_gpus("p", 2))
    assert listed.bound == {"default/p": "node-a"}
    assert listed.allocations == {}  # a device plugin's resource, counted as any other
    full = run(node("node-a", cpu="64", extra={"example.com/gpu": "1"}), _backed(), gpu_slice("node-a"),
               _asking_gpus("p", 2))
    assert "Insufficient example.com/gpu" in full.pending["default/p"]  # the devices do not stand in for it


def test_pods_asking_for_more_backed_devices_than_are_free_wait_naming_the_special_claim() -> None:
    out = run(gpu_nodes("node-a"), _backed(), gpu_slice("node-a", n=4), _asking_gpus("p1", 3), _asking_gpus("p2", 3))
    assert len(out.bound) == 1 and len(out.pending) == 1, (out.bound, out.pending)
    (why,) = out.pending.values()
    assert "claim <extended-resources>" in why and "(1 of 3)" in why, why


def test_a_gang_of_backed_requests_gathers_in_the_block_whose_gpus_are_free() -> None:
    # As test_a_koordinator_gang_gathers_in_the_block_whose_gpus_are_free, each member asking
    # example.com/gpu: 8 that the class backs: the search counts each node's devices for the special claim.
    gang = podgroup("train", 2, gather=[{"layer": "BlockLayer", "strategy": "MustGather"}])
    members = [_asking_gpus(f"train-{i}", 8) for i in range(2)]
    for i, m in enumerate(members):
        m["metadata"]["labels"] = pod("x", cpu="1", group="train", index=i)["metadata"]["labels"]
        m["metadata"]["annotations"] = pod("x", cpu="1", group="train", index=i)["metadata"].get("annotations", {})
    objs = [_backed() if o["kind"] == "DeviceClass" else o for o in topology_cluster()]
    out = run(*objs, SPINE_BLOCK, gang, *members)
    assert sorted(out.bound[f"default/train-{i}"] for i in range(2)) == ["n2", "n3"], out.pending
    assert allocated_on(out, "default/train-0-extended-resources") | allocated_on(
        out, "default/train-1-extended-resources") == {"n2", "n3"}


def test_a_special_claim_left_by_a_failed_binding_is_deleted_and_the_pod_tried_anew() -> None:
    # kube-scheduler's PostFilter: the claim of the pod's extended resources found for a pending pod is
    # what a try whose binding failed left; it is deleted (not allocated again), then the pod is placed.
    asking = _asking_gpus("p", 2)
    asking["metadata"]["uid"] = "uid-p"
    left = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": "p-extended-resources-abcde", "namespace": "default",
                         "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p",
                                              "controller": True}]},
            "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
                "deviceClassName": DRIVER, "allocationMode": "ExactCount", "count": 2}}]}}}
    out = run(gpu_nodes("node-a"), _backed(), gpu_slice("node-a"), left, asking)
    assert out.bound == {"default/p": "node-a"}, out.pending
    assert out.allocations == {"default/p-extended-resources": [f"{DRIVER}/node-a/gpu-0", f"{DRIVER}/node-a/gpu-1"]}


def test_a_victims_extended_resources_claim_frees_its_devices_for_the_preemptor() -> None:
    # A running pod whose 8 GPUs came through the claim of its DRA-backed extended resources; a pod of
    # higher priority asking for them preempts it, and the victim's claim goes with it.
    low = _asking_gpus("low", 8)
    low["spec"]["priorityClassName"] = "low"
    low["metadata"]["uid"] = "uid-low"
    low["spec"]["nodeName"] = "node-a"
    low["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "low-extended-resources", "requestMappings": [
        {"containerName": "main", "resourceName": "example.com/gpu", "requestName": "container-0-request-1"}]}}
    results = [{"request": "container-0-request-1", "driver": DRIVER, "pool": "node-a", "device": f"gpu-{d}"}
               for d in range(8)]
    made = claim("low-extended-resources", allocation={"devices": {"results": results}},
                 reservedFor=[{"resource": "pods", "name": "low", "uid": "uid-low"}])
    made["metadata"].update(ownerReferences=[{"apiVersion": "v1", "kind": "Pod", "name": "low", "uid": "uid-low",
                                              "controller": True}],
                            annotations={"resource.kubernetes.io/extended-resource-claim": "true"},
                            finalizers=["resource.kubernetes.io/delete-protection"])
    high = _asking_gpus("high", 8)
    high["spec"]["priorityClassName"] = "high"
    out = run(gpu_nodes("node-a"), _backed(), gpu_slice("node-a"), priority_class("low", 1),
              priority_class("high", 1000), made, low, high)
    assert out.preempted == ["default/low"], out.pending
    assert out.bound.get("default/high") == "node-a", out.pending
    assert out.allocations is not None and set(out.allocations) == {"default/high-extended-resources"}
