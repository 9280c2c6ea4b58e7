"""The DRA allocation checker (``tests.integration.dra_checker``): each rule it states catches a
state that breaks it, and a state that keeps them all passes. bench_dra's "allocations checked"
column is this checker's count for koordpy and kube-scheduler alike: a rule that never fires would
make it meaningless. The objects are bench_dra's builders (upstream's templates, rewritten)."""

from __future__ import annotations

import copy
from collections.abc import Sequence

from benchmarks.bench_dra import (
    CLASS,
    MEASURED_NS,
    PREFIX,
    allocation,
    basic_slice,
    claim,
    counter_slice,
    device_class,
    node_body,
    partitioned_slice,
    pod,
    podgroup,
    podgroup_slice,
)
from tests.integration.checker import Obj
from tests.integration.dra_checker import dra_violations, selector_verdict

NODES = [node_body(i) for i in range(3)]
CLASSES = [device_class()]


def bound(p: Obj, node: int, uid: str) -> Obj:
    p["metadata"].update({"namespace": MEASURED_NS, "uid": uid})
    p["spec"]["nodeName"] = f"{PREFIX}{node}"
    return p


def allocated(c: Obj, node: int, devices: list[str], *reserved: Obj) -> Obj:
    c["metadata"]["namespace"] = MEASURED_NS
    c["status"] = {"allocation": allocation(node, devices), "reservedFor": list(reserved)}
    return c


def for_pod(p: Obj) -> Obj:
    return {"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}


def one_pod_state(node: int = 0, device: str = "basic-device-0") -> tuple[list[Obj], list[Obj]]:
    p = bound(pod("p0", claim_name="c0"), node, "u0")
    return [p], [allocated(claim("c0"), node, [device], for_pod(p))]


SLICES = [basic_slice(i, devices=2) for i in range(3)]


def check(pods: list[Obj], claims: list[Obj], slices: list[Obj] = SLICES, classes: list[Obj] = CLASSES,
          groups: Sequence[Obj] = ()) -> list[str]:
    return dra_violations(NODES, pods, claims, slices, classes, groups)


def test_a_pod_whose_claim_is_allocated_on_its_node_and_reserved_for_it_passes() -> None:
    pods, claims = one_pod_state()
    assert check(pods, claims) == []


def test_a_device_of_another_node_is_caught() -> None:
    pods, claims = one_pod_state()
    claims[0]["status"]["allocation"]["devices"]["results"][0]["pool"] = "resourceslice-1"
    problems = check(pods, claims)
    assert any("not usable on node dra-node-0" in p for p in problems), problems


def test_an_allocation_for_other_nodes_is_caught() -> None:
    pods, claims = one_pod_state()
    pods[0]["spec"]["nodeName"] = f"{PREFIX}1"
    problems = check(pods, claims)
    assert any("allocation of bench-dra-0/c0 is for other nodes" in p for p in problems), problems


def test_a_claim_not_reserved_for_its_pod_is_caught() -> None:
    pods, claims = one_pod_state()
    claims[0]["status"]["reservedFor"] = [{"resource": "pods", "name": "p0", "uid": "someone-else"}]
    problems = check(pods, claims)
    assert problems == ["bench-dra-0/p0 is bound but bench-dra-0/c0 is not reserved for pods/p0"], problems


def test_a_bound_pod_whose_claim_is_missing_or_unallocated_is_caught() -> None:
    pods, claims = one_pod_state()
    assert any("does not exist" in p for p in check(pods, []))
    del claims[0]["status"]["allocation"]
    assert any("is not allocated" in p for p in check(pods, claims))
    templated = bound(pod("p1", template=True), 0, "u1")
    assert any("unresolved" in p for p in check([templated], []))
    # The controller's "no claim needed" (a status without a claim name) is no violation.
    templated["status"] = {"resourceClaimStatuses": [{"name": "resource"}]}
    assert check([templated], []) == []


def test_a_device_allocated_twice_is_caught() -> None:
    pods, claims = one_pod_state()
    p1 = bound(pod("p1", claim_name="c1"), 0, "u1")
    claims.append(allocated(claim("c1"), 0, ["basic-device-0"], for_pod(p1)))
    problems = check([*pods, p1], claims)
    assert problems == ["device test-driver.cdi.k8s.io/resourceslice-0/basic-device-0 allocated 2 times: "
                        "bench-dra-0/c0, bench-dra-0/c1"], problems
    claims[1]["status"]["allocation"]["devices"]["results"][0]["device"] = "basic-device-1"
    assert check([*pods, p1], claims) == []


def test_the_count_of_a_request_is_checked() -> None:
    p = bound(pod("p0", claim_name="c0"), 0, "u0")
    two = allocated(claim("c0", 2), 0, ["basic-device-0"], for_pod(p))
    problems = check([p], [two])
    assert problems == ["claim bench-dra-0/c0: request req-0 (ExactCount) has 1 results, not 2"], problems
    two["status"]["allocation"] = allocation(0, ["basic-device-0", "basic-device-1"])
    assert check([p], [two]) == []


def test_a_result_for_a_request_the_claim_lacks_or_a_device_no_slice_has_is_caught() -> None:
    pods, claims = one_pod_state()
    claims[0]["status"]["allocation"]["devices"]["results"][0]["request"] = "req-9"
    assert any("which the claim lacks" in p for p in check(pods, claims))
    pods, claims = one_pod_state(device="basic-device-7")
    assert any("in no slice of its pool's newest generation" in p for p in check(pods, claims))
    # A newer generation of the pool replaces the old one's devices.
    newer = copy.deepcopy(SLICES[0])
    newer["metadata"]["name"] = "newer"
    newer["spec"]["pool"]["generation"] = 2
    newer["spec"]["devices"] = newer["spec"]["devices"][1:]
    pods, claims = one_pod_state()
    assert any("newest generation" in p for p in check(pods, claims, [newer, *SLICES[1:], SLICES[0]]))


def test_an_incomplete_pool_is_caught() -> None:
    pods, claims = one_pod_state()
    half = copy.deepcopy(SLICES)
    half[0]["spec"]["pool"]["resourceSliceCount"] = 2
    assert any("incomplete pool" in p for p in check(pods, claims, half))


def test_a_device_of_another_driver_fails_the_class_selector_and_unknown_selectors_are_reported() -> None:
    pods, claims = one_pod_state()
    other = [device_class()]
    other[0]["spec"]["selectors"][0]["cel"]["expression"] = 'device.driver == "gpu.example.com"'
    assert any("does not match selector" in p for p in check(pods, claims, classes=other))
    other[0]["spec"]["selectors"][0]["cel"]["expression"] = "device.attributes['x'].y == 1"
    assert any("not checked" in p for p in check(pods, claims, classes=other))
    assert any("which does not exist" in p for p in check(pods, claims, classes=[]))
    assert selector_verdict('device.driver == "a" && device.driver == "a"', "a") is True
    assert selector_verdict('device.driver == "a" && device.driver == "b"', "a") is False


def test_shared_counters_overdrawn_are_caught() -> None:
    """PartitionableBacktracking's pool: devices 2-8 take 70Gi of 70Gi; device 1 instead of one of
    them takes 80Gi."""
    slices = [counter_slice(0), partitioned_slice(0)]
    p = bound(pod("p0", template=True), 0, "u0")
    p["status"] = {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": "p0-resource"}]}
    fits = allocated(claim("p0-resource", 7), 0, [f"device-{k}" for k in range(2, 9)], for_pod(p))
    assert check([p], [fits], slices) == []
    over = allocated(claim("p0-resource", 7), 0, [f"device-{k}" for k in range(1, 8)], for_pod(p))
    problems = check([p], [over], slices)
    assert problems == ["pool test-driver.cdi.k8s.io/resourceslice-0: counter counter-set-for-mem/mem is "
                        "75161927680, its allocated devices take 85899345920"], problems


def test_a_pod_group_claim_must_be_reserved_for_the_pod_group_only_when_the_entries_are_identical() -> None:
    g = podgroup("test-dra-0")
    g["metadata"]["namespace"] = MEASURED_NS
    p = bound(pod("p0", template=True, group="test-dra-0"), 1, "u0")
    p["status"] = {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": "test-dra-0-resource"}]}
    c = claim("test-dra-0-resource")
    c["metadata"]["namespace"] = MEASURED_NS
    c["status"] = {"allocation": {"devices": {"results": [{"request": "req-0", "driver": "test-driver.cdi.k8s.io",
                                                           "pool": "resourceslice-0", "device": "device"}]},
                                  "nodeSelector": podgroup_slice(0)["spec"]["nodeSelector"]},
                   "reservedFor": [{"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "test-dra-0",
                                    "uid": "g0"}]}
    slices = [podgroup_slice(0)]
    assert check([p], [c], slices, groups=[g]) == []
    # Without the PodGroup's identical entry the claim is the pod's: reserved for the group is wrong.
    g["spec"]["resourceClaims"][0]["name"] = "other"
    problems = check([p], [c], slices, groups=[g])
    assert problems == ["bench-dra-0/p0 is bound but bench-dra-0/test-dra-0-resource is not reserved for pods/p0"]


def test_extended_resources_need_their_special_claim_with_the_quantity_asked() -> None:
    classes = [device_class(f"{CLASS}-0", "example.com/gpu-0")]
    p = bound(pod("p0", extended="example.com/gpu-0"), 0, "u0")
    problems = check([p], [], classes=classes)
    assert problems == ["bench-dra-0/p0 is bound with extended resources ['example.com/gpu-0'] served by DRA but "
                        "no status.extendedResourceClaimStatus"], problems
    p["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "p0-extended-resources-x", "requestMappings": [
        {"containerName": "pause", "resourceName": "example.com/gpu-0", "requestName": "container-0-request-0"}]}}
    special: Obj = {"metadata": {"name": "p0-extended-resources-x", "namespace": MEASURED_NS},
               "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                   "deviceClassName": f"{CLASS}-0", "allocationMode": "ExactCount", "count": 1}}]}},
               "status": {"allocation": allocation(0, ["basic-device-0"]), "reservedFor": [for_pod(p)]}}
    special["status"]["allocation"]["devices"]["results"][0]["request"] = "container-0-request-0"
    assert check([p], [special], classes=classes) == []
    special["status"]["allocation"]["devices"]["results"] = []
    problems = check([p], [special], classes=classes)
    assert "bench-dra-0/p0: example.com/gpu-0 x1 got 0 devices in bench-dra-0/p0-extended-resources-x" in problems
    # A node that publishes the resource serves it itself (a device plugin): no claim is needed.
    NODES[0]["status"]["allocatable"]["example.com/gpu-0"] = "8"
    try:
        assert check([bound(pod("p1", extended="example.com/gpu-0"), 0, "u1")], [], classes=classes) == []
    finally:
        del NODES[0]["status"]["allocatable"]["example.com/gpu-0"]
