"""The core's device seam (koordpy.core.claims): a pod's claims resolved as kube-scheduler's DynamicResources
PreFilter resolves them, in its words; per-node reasons; Reserve recorded in the job's transaction (a job
rolled back holds no device); a preemption victim's devices freed only when it is its claim's only
consumer; how many pods a node's devices take."""

from __future__ import annotations

from typing import Any

from koordpy.api.dra import DeviceClass, Devices, ResourceClaim, ResourceSlice
from koordpy.api.objects import Node, Pod
from koordpy.core.claims import DeviceRules
from koordpy.core.txn import Txn
from tests.builders import node, pod
from tests.sim.test_dra import DRIVER, claim, claiming, gpu_class, gpu_slice


def devices(*claims: dict[str, Any], classes: tuple[dict[str, Any], ...] | None = None,
            slices: tuple[dict[str, Any], ...] | None = None) -> Devices:
    made = Devices()
    for raw in classes if classes is not None else (gpu_class(),):
        c = DeviceClass.from_raw(raw)
        made.classes[c.name] = c
    for raw in slices if slices is not None else (gpu_slice("n0"),):
        s = ResourceSlice.from_raw(raw)
        made.slices[s.name] = s
    for raw in claims:
        rc = ResourceClaim.from_raw(raw)
        made.claims[rc.key] = rc
    return made


def claimer(name: str, claim_name: str = "", uid: str = "", statuses: dict[str, str] | None = None) -> Pod:
    body = claiming(pod(name, cpu="1"), claim_name=claim_name, template_name="" if claim_name else "gpus")
    if uid:
        body["metadata"]["uid"] = uid
    if statuses is not None:
        body["status"] = {"resourceClaimStatuses": [{"name": k, "resourceClaimName": v} for k, v in statuses.items()]}
    return Pod.from_raw(body)


N0 = Node.from_raw(node("n0", cpu="64"))
N1 = Node.from_raw(node("n1", cpu="64"))


def allocated(name: str, holders: list[str], devices_: int = 8) -> dict[str, Any]:
    results = [{"request": "gpus", "driver": DRIVER, "pool": "n0", "device": f"gpu-{d}"} for d in range(devices_)]
    made = claim(name, allocation={"devices": {"results": results}, "nodeSelector": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]}]}},
        reservedFor=[{"resource": "pods", "name": h, "uid": f"uid-{h}"} for h in holders])
    made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]  # a scheduler allocated it
    return made


# -- PreFilter, in kube-scheduler's words ----------------------------------------------------------------

def test_prefilter_reasons_name_the_claim_as_kube_scheduler_does() -> None:
    rules = DeviceRules(devices(claim("c")))
    assert rules.resolve(claimer("p", "missing")).prefilter == 'resourceclaim.resource.k8s.io "missing" not found'
    assert rules.resolve(claimer("p")).prefilter == 'pod "default/p": ResourceClaim not created yet'
    assert rules.resolve(claimer("p", statuses={"gpus": ""})).claims == ()  # no claim needed: nothing to do
    assert rules.resolve(claimer("p", "c")).prefilter is None


def test_a_template_claim_another_pod_owns_is_refused() -> None:
    made = claim("p-gpus")
    made["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "other", "uid": "u2",
                                            "controller": True}]
    rules = DeviceRules(devices(made))
    why = rules.resolve(claimer("p", uid="u1", statuses={"gpus": "p-gpus"})).prefilter
    assert why == "ResourceClaim default/p-gpus was not created for Pod default/p (Pod is not owner)"


def test_a_claim_reserved_for_as_many_others_as_it_may_have_is_in_use() -> None:
    rules = DeviceRules(devices(allocated("c", [f"o-{i}" for i in range(256)])))
    why = rules.resolve(claimer("p", "c")).prefilter
    assert why is not None and why.startswith("resourceclaim in use")
    assert rules.resolve(claimer("o-3", "c", uid="uid-o-3")).prefilter is None  # one of its consumers


def test_a_missing_class_and_a_deleted_claim_rule_out_every_node() -> None:
    gone = claim("c")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    gone["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    rules = DeviceRules(devices(gone))
    assert rules.reasons(claimer("p", "c"), [N0, N1]) == ['resourceclaim "c" is being deleted'] * 2
    rules = DeviceRules(devices(claim("c"), classes=()))
    why = rules.resolve(claimer("p", "c")).prefilter
    assert why is not None and why.startswith(f"request gpus: device class {DRIVER} does not exist")


# -- Filter ----------------------------------------------------------------------------------------------

def test_a_node_without_devices_and_an_allocated_claim_elsewhere_are_said_apart() -> None:
    rules = DeviceRules(devices(claim("c", count=4), allocated("held", ["o"], 2)))
    assert rules.reasons(claimer("p", "c"), [N0, N1]) == [
        None, "cannot allocate all claims (no ResourceSlice publishes devices for the node)"]
    assert rules.reasons(claimer("o", "held", uid="uid-o"), [N0, N1]) == [
        None, "resourceclaim not available on the node"]


# -- Reserve and its undo ----------------------------------------------------------------------------------

def test_reserve_takes_devices_for_the_pods_after_it_and_a_rollback_gives_them_back() -> None:
    rules = DeviceRules(devices(claim("a"), claim("b")))
    first, second = claimer("p", "a", uid="u1"), claimer("q", "b", uid="u2")
    txn = Txn()
    assert rules.reserve(first, N0, txn) is None
    binding = rules.bindings["default/p"]
    assert binding.node == "n0" and [w.claim for w in binding.claims] == ["default/a"]
    write = binding.claims[0]
    assert write.allocation is not None and len(write.allocation.results) == 8
    assert (write.consumer.resource, write.consumer.name, write.consumer.uid) == ("pods", "p", "u1")
    assert rules.claims["default/a"].allocation == write.allocation
    why = rules.reasons(second, [N0])[0]
    assert why is not None and why.startswith("cannot allocate all claims (claim gpus, request gpus")
    assert rules.reserve(second, N0, txn) == why
    txn.rollback(0)  # the job is rolled back: it holds no device, and nothing is written
    assert rules.bindings == {} and rules.claims["default/a"].allocation is None
    assert rules.reasons(second, [N0]) == [None]


def test_a_shared_claim_is_allocated_once_and_the_next_pod_only_reserves_it() -> None:
    rules = DeviceRules(devices(claim("shared", count=2)))
    txn = Txn()
    assert rules.reserve(claimer("p", "shared"), N0, txn) is None
    assert rules.reserve(claimer("q", "shared"), N0, txn) is None
    assert rules.bindings["default/q"].claims[0].allocation is None  # allocated by p: q is only reserved
    assert [c.name for c in rules.claims["default/shared"].reserved_for] == ["p", "q"]
    assert rules.reserve(claimer("r", "shared"), N1, txn) == "resourceclaim not available on the node"


# -- preemption's what-if ----------------------------------------------------------------------------------

def test_a_victims_devices_are_freed_only_when_it_is_its_claims_only_consumer() -> None:
    rules = DeviceRules(devices(claim("new"), allocated("alone", ["v"]), allocated("shared", ["w", "x"], 0)))
    incoming = claimer("n", "new")
    assert rules.reasons(incoming, [N0])[0] is not None
    txn = Txn()
    rules.release([claimer("w", "shared", uid="uid-w")], txn)
    assert rules.claims["default/shared"].allocation is not None  # x still holds it
    rules.release([claimer("v", "alone", uid="uid-v")], txn)
    assert rules.claims["default/alone"].allocation is None
    assert rules.reasons(incoming, [N0]) == [None]
    txn.rollback(0)
    assert rules.reasons(incoming, [N0])[0] is not None
    assert rules.reasons(incoming, [N0], loose=True) == [None]  # what removing pods could free


# -- what the topology search counts ------------------------------------------------------------------------

def test_capacity_counts_the_pods_a_nodes_devices_take() -> None:
    import numpy as np

    rules = DeviceRules(devices(claim("a", count=4), claim("b", count=4), claim("c", count=4),
                                slices=(gpu_slice("n0"), gpu_slice("n1", n=4))))
    pods = [claimer("p", "a"), claimer("q", "b"), claimer("r", "c")]
    got = rules.capacity(pods, [N0, N1], np.array([True, True]), 3)
    assert got is not None and got.tolist() == [2, 1]
    shared = [claimer("p", "a"), claimer("q", "a")]
    assert rules.capacity(shared, [N0, N1], np.array([True, True]), 2) is None  # allocated once, by the first


def test_pods_with_claims_of_one_spec_share_one_cached_answer() -> None:
    rules = DeviceRules(devices(claim("a"), claim("b")))
    assert rules.key(claimer("p", "a")) == rules.key(claimer("q", "b"))
    assert rules.key(claimer("p", "a")) != rules.key(claimer("p", "missing"))


def test_a_claim_using_an_alpha_field_is_refused_naming_it() -> None:
    body = claim("c")
    body["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"] = [{"name": "x"}]
    rules = DeviceRules(devices(body))
    why = rules.resolve(claimer("p", "c")).prefilter
    assert why is not None and "spec.devices.requests[0].exactly.derivedAttributes" in why
    assert why.startswith("resourceclaim default/c uses ")


def test_the_pools_are_built_again_when_a_shell_changes_its_slices_in_place() -> None:
    made = devices(claim("c"))
    first = DeviceRules(made)
    assert first.reasons(claimer("p", "c"), [N1])[0] is not None  # no slice reaches n1
    again = DeviceRules(made, first)
    assert again.pools is first.pools  # nothing changed: the pools (and their CEL verdicts) are kept
    extra = ResourceSlice.from_raw(gpu_slice("n1"))
    made.slices[extra.name] = extra  # the same dict, changed in place, as a shell's store may be
    assert DeviceRules(made, again).reasons(claimer("p", "c"), [N1]) == [None]


def test_two_victims_sharing_a_claim_free_it_together() -> None:
    rules = DeviceRules(devices(claim("new"), allocated("shared", ["v", "w"])))
    incoming, txn = claimer("n", "new"), Txn()
    rules.release([claimer("v", "shared", uid="uid-v")], txn)
    assert rules.reasons(incoming, [N0])[0] is not None  # w still holds it
    rules.release([claimer("w", "shared", uid="uid-w")], txn)
    assert rules.reasons(incoming, [N0]) == [None]
    txn.rollback(0)
    assert [c.name for c in rules.claims["default/shared"].reserved_for] == ["v", "w"]
