"""DRA's PreBind writes on the real API server (v1.37, kwok nodes, ResourceSlices the test publishes:
no driver is needed, as nothing runs).

The binding cycle's claims step is driven in-process first (a ``Bind`` with its ``DeviceBinding``
made by hand, the controller's own writer and cache): the finalizer, ``status.allocation`` and the
``reservedFor`` entry as kube-apiserver takes them, and their undo when the bind is refused. Then
``koordpy run`` end to end: a pod naming a ResourceClaim is bound, and the claim allocated from its
node's slice and reserved for it; a claim allocated on a node since deleted given up by PostFilter and
allocated again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from koordpy.api.dra import DELETE_PROTECTION, Allocation, Consumer, DeviceResult
from koordpy.api.objects import NodeSelectorTerm, Requirement
from koordpy.controller import listing
from koordpy.controller.binding import Binder
from koordpy.controller.cache import Cache
from koordpy.controller.client import api_client
from koordpy.controller.writer import ApiWriter
from koordpy.core.decisions import Bind, ClaimWrite, DeviceBinding
from tests.builders import node, pod, podgroup
from tests.core.dialects.test_topology_sources import volcano_pg
from tests.integration.kube import ControlPlane, Kube, Scheduler, drop_dra_objects, fake, settle, wait_for, when
from tests.sim.test_dra import channel_gang, channel_objects

DRIVER = "gpu.example.com"
DRA = ("resourceclaims.resource.k8s.io", "resourceslices.resource.k8s.io", "deviceclasses.resource.k8s.io")


@pytest.fixture(autouse=True)
def _no_claims_left(kube: Kube) -> Iterator[None]:
    """Claims keep the delete-protection finalizer until kube-controller-manager drops it: each test's
    DRA objects go, finalizers and all, so the next test starts from none."""
    yield
    drop_dra_objects(kube, DRA)


def _class() -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}


def _slice(on: str, devices: int = 2) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{on}-gpus"},
            "spec": {"driver": DRIVER, "nodeName": on, "pool": {"name": on, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}"} for i in range(devices)]}}


def _claim(name: str) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}


def _user(name: str, claim: str, scheduler: str = "koordpy") -> dict[str, Any]:
    out = pod(name, cpu="1", scheduler=scheduler, resourceClaims=[{"name": "gpu", "resourceClaimName": claim}])
    out["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    return out


def _on(node_name: str) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_fields=(Requirement(key="metadata.name", operator="In", values=(node_name,)),)),)


def _bind_by_hand(cp: ControlPlane, kube: Kube, bind_uid: str | None = None) -> None:
    """The binding cycle of pod ``user`` to node-a with claim ``c1`` allocated device gpu-1 of node-a's
    pool, run in-process with the controller's writer and a cache listed from the API server. The
    bind carries ``bind_uid`` (the pod's own when None)."""
    pod_uid = kube.get("pods", "user")["metadata"]["uid"]

    async def go() -> None:
        api = await api_client(cp.kubeconfig)
        try:
            cache = Cache()
            for kind, group, plural in (("Node", "", "nodes"), ("Pod", "", "pods"),
                                        ("ResourceClaim", "resource.k8s.io", "resourceclaims")):
                await listing.list_into(cache, kind, api, group, "v1", plural)
            allocation = Allocation(results=(DeviceResult("gpu", DRIVER, "node-a", "gpu-1"),),
                                    node_selector=_on("node-a"))
            d = Bind("default/user", "node-a", devices=DeviceBinding("node-a", (
                ClaimWrite("default/c1", Consumer("pods", "user", pod_uid), allocation),)))
            binder = Binder(cache, ApiWriter(api))
            binder.reserve(d)
            await binder.run(d, pod_uid if bind_uid is None else bind_uid)
        finally:
            await api.close()

    asyncio.run(asyncio.wait_for(go(), 120))


def test_the_claims_prebind_writes_as_the_api_server_takes_them(controlplane: ControlPlane, kube: Kube) -> None:
    kube.apply(fake([node("node-a", cpu="4")]), _class(), _slice("node-a"), _claim("c1"),
               _user("user", "c1", scheduler="nobody"))
    _bind_by_hand(controlplane, kube)
    assert kube.bound().get("user") == "node-a"
    claim = kube.get("resourceclaims", "c1")
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]
    allocation = claim["status"]["allocation"]
    assert allocation["devices"]["results"] == [{"request": "gpu", "driver": DRIVER, "pool": "node-a",
                                                 "device": "gpu-1"}]
    assert allocation["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["node-a"]
    assert allocation["allocationTimestamp"]
    pod_uid = kube.get("pods", "user")["metadata"]["uid"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "user", "uid": pod_uid}]


def test_a_refused_bind_takes_the_allocation_back(controlplane: ControlPlane, kube: Kube) -> None:
    kube.apply(fake([node("node-a", cpu="4")]), _class(), _slice("node-a"), _claim("c1"),
               _user("user", "c1", scheduler="nobody"))
    _bind_by_hand(controlplane, kube, bind_uid="not-the-pods-uid")  # refused: the UID precondition fails
    assert "user" not in kube.bound()
    claim = kube.get("resourceclaims", "c1")
    status = claim.get("status") or {}
    assert not status.get("allocation") and not status.get("reservedFor")
    assert DELETE_PROTECTION not in (claim["metadata"].get("finalizers") or [])


def test_koordpy_run_allocates_a_pods_claim_on_its_node(kube: Kube, scheduler: Scheduler) -> None:
    """End to end: needs the core's device seam (branch d-core) to decide the claim's allocation."""
    kube.apply(fake([node("node-a", cpu="4"), node("node-b", cpu="4")]), _class(), _slice("node-b", devices=1),
               _claim("c1"), _user("user", "c1"))
    node_name = wait_for(lambda: kube.bound().get("user"), "the pod bound", timeout=60)
    assert node_name == "node-b"  # the only node with a device
    claim = kube.get("resourceclaims", "c1")
    assert claim["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "node-b", "device": "gpu-0"}]
    pod_uid = kube.get("pods", "user")["metadata"]["uid"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "user", "uid": pod_uid}]
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]


def _allocated_attachable(kube: Kube) -> None:
    """Pod ``user`` asking claim c1 for node-a's one device, which binds to the node once the driver
    sets ``Attached`` (``AttachFailed`` fails it); returns once the allocation is written."""
    attachable = _slice("node-a", devices=1)
    attachable["spec"]["devices"][0].update(bindsToNode=True, bindingConditions=["Attached"],
                                            bindingFailureConditions=["AttachFailed"])
    kube.apply(fake([node("node-a", cpu="4")]), _class(), attachable, _claim("c1"), _user("user", "c1"))
    wait_for(lambda: (kube.get("resourceclaims", "c1").get("status") or {}).get("allocation"),
             "the allocation written", timeout=60)


def _attach(kube: Kube) -> None:
    """The driver (the test) sets ``Attached`` True on c1's device."""
    attached = {"type": "Attached", "status": "True", "reason": "Attached", "message": "",
                "lastTransitionTime": "2026-01-01T00:00:00Z"}
    kube.kubectl("patch", "resourceclaims", "c1", "-n", "default", "--subresource=status", "--type=merge", "-p",
                 json.dumps({"status": {"devices": [{"driver": DRIVER, "pool": "node-a", "device": "gpu-0",
                                                     "conditions": [attached]}]}}))


def test_binding_conditions_hold_the_bind_until_the_driver_says_ready(kube: Kube, scheduler: Scheduler) -> None:
    """A device with binding conditions (an attachable device, say): the allocation is written and the
    pod is bound only once the driver (the test) sets every condition True on the claim."""
    _allocated_attachable(kube)
    assert settle(lambda: kube.bound().get("user"), 2.0) is None  # waiting for the driver
    result = kube.get("resourceclaims", "c1")["status"]["allocation"]["devices"]["results"][0]
    assert result["bindingConditions"] == ["Attached"] and result["bindingFailureConditions"] == ["AttachFailed"]
    _attach(kube)
    wait_for(lambda: kube.bound().get("user") == "node-a", "the pod bound once its device is attached", timeout=30)


def test_a_device_allocated_by_someone_else_is_respected(kube: Kube, scheduler: Scheduler) -> None:
    """A claim allocated and reserved outside koordpy (kube-scheduler, a restart's predecessor) holds its
    device: the next claim gets the other one."""
    kube.apply(fake([node("node-a", cpu="4")]), _class(), _slice("node-a"), _claim("taken"),
               _user("holder", "taken", scheduler="nobody"))
    kube.kubectl("create", "-f", "-", stdin=json.dumps({
        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "holder", "namespace": "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "node-a"}}))
    holder = kube.get("pods", "holder")["metadata"]["uid"]
    kube.kubectl("patch", "resourceclaims", "taken", "-n", "default", "--subresource=status", "--type=merge", "-p",
                 json.dumps({"status": {"allocation": {"devices": {"results": [
                     {"request": "gpu", "driver": DRIVER, "pool": "node-a", "device": "gpu-0"}]}},
                     "reservedFor": [{"resource": "pods", "name": "holder", "uid": holder}]}}))
    kube.apply(_claim("c1"), _user("user", "c1"))
    wait_for(lambda: kube.bound().get("user") == "node-a", "the pod bound", timeout=60)
    results = kube.get("resourceclaims", "c1")["status"]["allocation"]["devices"]["results"]
    assert [r["device"] for r in results] == ["gpu-1"]


TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}}


def _gang(dialect: str, size: int, minimum: int) -> list[dict[str, Any]]:
    """A gang of ``size`` members with ``minimum`` to bind, each member's claim made from TEMPLATE."""
    members = []
    for i in range(size):
        if dialect == "koordinator":
            member = pod(f"worker-{i}", cpu="1", group="job")
        elif dialect == "kai":
            member = pod(f"worker-{i}", cpu="1", annotations={"pod-group-name": "job"})
        else:
            member = pod(f"worker-{i}", cpu="1", annotations={"scheduling.k8s.io/group-name": "job"})
        member["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
        member["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        members.append(member)
    group = podgroup("job", minimum) if dialect == "koordinator" else volcano_pg("job", minimum) \
        if dialect == "volcano" else {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                                      "metadata": {"name": "job", "namespace": "default"},
                                      "spec": {"minMember": minimum}}
    return [TEMPLATE, group, *members]


@pytest.mark.parametrize("dialect", ["koordinator", "volcano", "kai"])
def test_a_gang_gets_a_device_per_member_from_its_template(kube: Kube, scheduler: Scheduler, dialect: str) -> None:
    """A gang of two, each member's claim made from a ResourceClaimTemplate by kube-controller-manager:
    both bound, one per node (each node has one device), each claim allocated on its pod's node and
    reserved for it."""
    kube.apply(fake([node("node-a", cpu="4"), node("node-b", cpu="4")]), _class(), _slice("node-a", devices=1),
               _slice("node-b", devices=1), *_gang(dialect, 2, 2))
    bound = wait_for(lambda: when(len(kube.bound()) == 2, kube.bound()), "both members bound", timeout=90)
    assert sorted(bound.values()) == ["node-a", "node-b"]
    claims = {c["metadata"]["name"]: c for c in kube.get("resourceclaims")["items"]}
    for name, on in bound.items():
        member = kube.get("pods", name)
        [status] = member["status"]["resourceClaimStatuses"]
        claim = claims[status["resourceClaimName"]]
        [result] = claim["status"]["allocation"]["devices"]["results"]
        assert result["pool"] == on
        assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": name,
                                                   "uid": member["metadata"]["uid"]}]


def test_a_gang_that_waits_holds_no_device_and_writes_nothing(kube: Kube, scheduler: Scheduler) -> None:
    """Three members, two devices: no member is bound and none of their claims is written on."""
    kube.apply(fake([node("node-a", cpu="4"), node("node-b", cpu="4")]), _class(), _slice("node-a", devices=1),
               _slice("node-b", devices=1), *_gang("koordinator", 3, 3))
    wait_for(lambda: len(kube.get("resourceclaims")["items"]) == 3, "the members' claims made", timeout=60)
    wait_for(lambda: all(kube.condition_message(f"worker-{i}") for i in range(3)), "the members told why they wait",
             timeout=60)
    assert settle(lambda: kube.bound(), 3.0) == {}
    for claim in kube.get("resourceclaims")["items"]:
        assert not (claim.get("status") or {}).get("allocation"), claim
        assert DELETE_PROTECTION not in (claim["metadata"].get("finalizers") or [])


def test_a_restart_while_devices_attach_binds_once_they_are_ready(kube: Kube, scheduler: Scheduler) -> None:
    """koordpy stopped after writing the allocation, before the device was ready: the next one reads the
    allocation from the claim, holds the pod's bind until the conditions are True, and binds it there."""
    _allocated_attachable(kube)
    scheduler.kill()
    scheduler.start()
    assert settle(lambda: kube.bound().get("user"), 2.0) is None  # the new one waits for the driver too
    _attach(kube)
    wait_for(lambda: kube.bound().get("user") == "node-a", "the pod bound once its device is attached", timeout=30)
    claim = kube.get("resourceclaims", "c1")
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert [c["name"] for c in claim["status"]["reservedFor"]] == ["user"]


def test_a_workload_podgroups_own_claim_is_allocated_once_and_reserved_for_the_group(
        kube: Kube, scheduler: Scheduler) -> None:
    """KEP-5729 (DRAWorkloadResourceClaims, on in the control plane): a scheduling.k8s.io PodGroup's claim
    from a template, made by kube-controller-manager and owned by the group; both members name it with
    an identical entry. It is allocated once (a network-attached channel reaching rack r1's nodes),
    reserved for the PodGroup, and both members bound where the channel reaches."""
    *nodes, channel, domain, template = channel_objects()
    kube.apply(fake(nodes), channel, domain, template, *channel_gang())
    bound = wait_for(lambda: when(len(kube.bound()) == 2, kube.bound()), "both members bound", timeout=90)
    assert sorted(bound.values()) == ["r1-0", "r1-1"]
    [claim] = kube.get("resourceclaims")["items"]
    [owner] = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("PodGroup", "train")
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["channel-0"]
    group_uid = kube.get("podgroups.scheduling.k8s.io", "train")["metadata"]["uid"]
    assert claim["status"]["reservedFor"] == [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups",
                                               "name": "train", "uid": group_uid}]


def test_a_claim_allocated_on_a_node_since_deleted_is_deallocated_and_allocated_again(
        kube: Kube, scheduler: Scheduler) -> None:
    """kube-scheduler's DynamicResources PostFilter: claim c1 was allocated node-a's device (reserved for
    nobody, a scheduler's finalizer on it) and node-a is gone; its pod fits no node, so the allocation is
    cleared and the next cycle allocates node-b's device, where the pod is bound."""
    kube.apply(fake([node("node-a", cpu="4"), node("node-b", cpu="4")]), _class(), _slice("node-a", devices=1),
               _slice("node-b", devices=1), _claim("c1"))
    kube.kubectl("patch", "resourceclaims", "c1", "-n", "default", "--type=merge", "-p",
                 json.dumps({"metadata": {"finalizers": [DELETE_PROTECTION]}}))
    kube.kubectl("patch", "resourceclaims", "c1", "-n", "default", "--subresource=status", "--type=merge", "-p",
                 json.dumps({"status": {"allocation": {
                     "devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "node-a",
                                              "device": "gpu-0"}]},
                     "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                         {"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]}}}}))
    kube.kubectl("delete", "node", "node-a")
    kube.apply(_user("user", "c1"))
    wait_for(lambda: kube.bound().get("user") == "node-b", "the pod bound on node-b", timeout=60)
    claim = kube.get("resourceclaims", "c1")
    assert [r["pool"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["node-b"]
    assert [c["name"] for c in claim["status"]["reservedFor"]] == ["user"]
# -- DRA-backed extended resources ---------------------------------------------------------------

def _backed_class() -> dict[str, Any]:
    out = _class()
    out["spec"]["extendedResourceName"] = "example.com/gpu"
    return out


def _asking(name: str, gpus: int) -> dict[str, Any]:
    out = pod(name, cpu="1", scheduler="koordpy")
    out["spec"]["containers"][0]["resources"]["limits"] = {"example.com/gpu": str(gpus)}
    return out


def test_a_dra_backed_extended_resource_gets_its_claim_created_allocated_and_named(
        kube: Kube, scheduler: Scheduler) -> None:
    """No node lists example.com/gpu; a DeviceClass backs it: koordpy creates the pod's claim (as
    kube-scheduler's PreBind does), allocated from node-a's slice and reserved for the pod, and writes
    the pod's status.extendedResourceClaimStatus."""
    kube.apply(fake([node("node-a", cpu="4")]), _backed_class(), _slice("node-a", devices=2), _asking("user", 2))
    assert wait_for(lambda: kube.bound().get("user"), "the pod bound", timeout=60) == "node-a"
    status = wait_for(lambda: kube.get("pods", "user")["status"].get("extendedResourceClaimStatus"),
                      "the pod's extendedResourceClaimStatus", timeout=30)
    name = status["resourceClaimName"]
    assert name.startswith("user-extended-resources-")
    container = kube.get("pods", "user")["spec"]["containers"][0]["name"]
    assert status["requestMappings"] == [{"containerName": container, "resourceName": "example.com/gpu",
                                          "requestName": "container-0-request-1"}]  # cpu sorts first
    claim = kube.get("resourceclaims", name)
    pod_uid = kube.get("pods", "user")["metadata"]["uid"]
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in claim["metadata"]["ownerReferences"]] == [
        ("Pod", "user", pod_uid, True)]
    assert claim["spec"]["devices"]["requests"] == [{"name": "container-0-request-1", "exactly": {
        "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]
    assert sorted(r["device"] for r in claim["status"]["allocation"]["devices"]["results"]) == ["gpu-0", "gpu-1"]
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "user", "uid": pod_uid}]
    assert DELETE_PROTECTION in claim["metadata"]["finalizers"]


def test_a_node_whose_device_plugin_lists_the_resource_serves_it_without_a_claim(
        kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("node-a", cpu="4", extra={"example.com/gpu": "2"})]), _backed_class(), _asking("user", 2))
    assert wait_for(lambda: kube.bound().get("user"), "the pod bound", timeout=60) == "node-a"
    assert kube.get("resourceclaims", namespace="default")["items"] == []
    assert not kube.get("pods", "user")["status"].get("extendedResourceClaimStatus")


def leave_an_extended_claim(kube: Kube, pod_name: str) -> str:
    """A pod asking example.com/gpu: 2, created gated, with the claim of its extended resources already
    there (what a binding that failed after creating it leaves), then ungated; returns the claim's name."""
    gated = _asking(pod_name, 2)
    gated["spec"]["schedulingGates"] = [{"name": "koordpy.test/hold"}]
    kube.apply(gated)
    uid = kube.get("pods", pod_name)["metadata"]["uid"]
    name = f"{pod_name}-extended-resources-left0"
    kube.apply({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default",
                             "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": uid,
                                                  "controller": True}]},
                "spec": {"devices": {"requests": [{"name": "container-0-request-1", "exactly": {
                    "deviceClassName": "gpu", "allocationMode": "ExactCount", "count": 2}}]}}})
    kube.kubectl("patch", "pod", pod_name, "-n", "default", "--type=json", "-p",
                 '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    return name


def test_a_claim_left_by_a_failed_binding_is_deleted_and_the_pod_bound_with_a_new_one(
        kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("node-a", cpu="4")]), _backed_class(), _slice("node-a", devices=2))
    left = leave_an_extended_claim(kube, "user")
    assert wait_for(lambda: kube.bound().get("user"), "the pod bound", timeout=60) == "node-a"
    names = [c["metadata"]["name"] for c in kube.get("resourceclaims", namespace="default")["items"]]
    assert left not in names and len(names) == 1 and names[0].startswith("user-extended-resources-"), names
    assert kube.get("pods", "user")["status"]["extendedResourceClaimStatus"]["resourceClaimName"] == names[0]
