"""The invariant checker of the differential test (``tests/devices/checker.py``): silent on a valid
allocation, and each rule speaks when an allocation breaks it."""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

import pytest

from koordpy.api.dra import Allocation, DeviceClass, DeviceResult, Quantity, ResourceClaim, ResourceSlice
from koordpy.api.objects import Node, NodeSelectorTerm, Requirement
from tests.devices.checker import violations

GPU = "gpu.example.com"
NODE = Node(name="node-0", labels={"rack": "r0"})
CLASS = DeviceClass.from_raw({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                              "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}})


def _slice(name: str, devices: list[dict[str, Any]], *, pool: str = "p", generation: int = 1, count: int = 1,
           where: dict[str, Any] | None = None, counters: list[dict[str, Any]] | None = None) -> ResourceSlice:
    spec: dict[str, Any] = {"driver": GPU,
                            "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}
    spec.update(where or {"nodeName": "node-0"})
    if counters is not None:
        spec["sharedCounters"] = counters
    else:
        spec["devices"] = devices
    return ResourceSlice.from_raw({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                   "metadata": {"name": name}, "spec": spec})


def _gpu(name: str, numa: int = 0, **extra: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"numa": {"int": numa}, "model": {"string": "a100"}}, **extra}


def _claim(requests: list[dict[str, Any]], constraints: list[dict[str, Any]] | None = None,
           name: str = "c") -> ResourceClaim:
    devices: dict[str, Any] = {"requests": requests}
    if constraints:
        devices["constraints"] = constraints
    return ResourceClaim.from_raw({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                                   "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": devices}})


def _exact(count: int = 1, **extra: Any) -> dict[str, Any]:
    return {"deviceClassName": "gpu", "allocationMode": "ExactCount", "count": count, **extra}


def _result(device: str, request: str = "r", pool: str = "p", **extra: Any) -> DeviceResult:
    return DeviceResult(request=request, driver=GPU, pool=pool, device=device, **extra)


def _check(slices: list[ResourceSlice], claim: ResourceClaim, *results: DeviceResult,
           in_use: tuple[ResourceClaim, ...] = (), **alloc: Any) -> list[str]:
    return violations(NODE, slices, {"gpu": CLASS}, in_use, [claim], [Allocation(results=results, **alloc)])


def _held(*results: DeviceResult) -> ResourceClaim:
    return dataclasses.replace(_claim([{"name": "r", "exactly": _exact()}], name="other"),
                               allocation=Allocation(results=results))


TWO = [_slice("s", [_gpu("gpu-0", 0), _gpu("gpu-1", 1)])]
ONE_REQUEST = _claim([{"name": "r", "exactly": _exact()}])


def test_a_valid_allocation_breaks_nothing() -> None:
    assert _check(TWO, ONE_REQUEST, _result("gpu-0")) == []
    # Admin access may use a device another claim holds.
    admin = _claim([{"name": "r", "exactly": _exact(adminAccess=True)}])
    assert _check(TWO, admin, _result("gpu-0", admin_access=True), in_use=(_held(_result("gpu-0")),)) == []


@pytest.mark.parametrize(("slices", "claim", "results", "in_use", "said"), [
    (TWO, ONE_REQUEST, [_result("gpu-9")], (), "not in the newest generation"),
    ([_slice("old", [_gpu("gpu-0")], generation=1), _slice("new", [_gpu("gpu-1")], generation=2)],
     ONE_REQUEST, [_result("gpu-0")], (), "not in the newest generation"),
    ([_slice("s", [_gpu("gpu-0")], count=2)], ONE_REQUEST, [_result("gpu-0")], (), "incomplete or invalid"),
    ([_slice("a", [_gpu("gpu-0")], count=2), _slice("b", [_gpu("gpu-0")], count=2)], ONE_REQUEST,
     [_result("gpu-0")], (), "incomplete or invalid"),
    ([_slice("s", [_gpu("gpu-0")], where={"nodeName": "node-1"})], ONE_REQUEST, [_result("gpu-0")], (),
     "cannot be used on node-0"),
    ([_slice("s", [_gpu("gpu-0")], where={"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "rack", "operator": "In", "values": ["r1"]}]}]}})], ONE_REQUEST, [_result("gpu-0")], (),
     "cannot be used on node-0"),
    (TWO, _claim([{"name": "r", "exactly": _exact(selectors=[
        {"cel": {"expression": f'device.attributes["{GPU}"].numa == 1'}}])}]), [_result("gpu-0")], (),
     "does not match"),
    (TWO, _claim([{"name": "r", "exactly": _exact(2)}]), [_result("gpu-0")], (), "1 devices for count 2"),
    (TWO, _claim([{"name": "r", "exactly": {"deviceClassName": "gpu", "allocationMode": "All"}}]),
     [_result("gpu-0")], (), "All gave"),
    (TWO, ONE_REQUEST, [_result("gpu-0")], (_held(_result("gpu-0")),), "allocated twice"),
    (TWO, _claim([{"name": "r", "exactly": _exact(2)}]), [_result("gpu-0"), _result("gpu-0")], (), "allocated twice"),
    ([_slice("s", [_gpu("gpu-0", taints=[{"key": "k", "effect": "NoSchedule"}])])], ONE_REQUEST,
     [_result("gpu-0")], (), "not tolerated"),
    (TWO, _claim([{"name": "a", "exactly": _exact()}, {"name": "b", "exactly": _exact()}],
                 [{"matchAttribute": f"{GPU}/numa"}]),
     [_result("gpu-0", "a"), _result("gpu-1", "b")], (), "matchAttribute"),
    ([_slice("s", [_gpu("gpu-0", 0), _gpu("gpu-1", 0)])],
     _claim([{"name": "r", "exactly": _exact(2)}], [{"distinctAttribute": f"{GPU}/numa"}]),
     [_result("gpu-0"), _result("gpu-1")], (), "distinctAttribute"),
    (TWO, _claim([{"name": "r", "exactly": _exact()}], [{"matchAttribute": f"{GPU}/missing"}]),
     [_result("gpu-0")], (), "lacks the constraint's attribute"),
    (TWO, ONE_REQUEST, [], (), "no result"),
    (TWO, _claim([{"name": "r", "firstAvailable": [{"name": "x", **_exact()}, {"name": "y", **_exact()}]}]),
     [_result("gpu-0", "r/x"), _result("gpu-1", "r/y")], (), "several subrequests"),
    (TWO, ONE_REQUEST, [_result("gpu-0", "nope")], (), "unknown request"),
    ([_slice("s", [_gpu("gpu-0", bindingConditions=["ready"], bindingFailureConditions=["failed"])])],
     ONE_REQUEST, [_result("gpu-0")], (), "binding conditions"),
    (TWO, ONE_REQUEST, [_result("gpu-0", share_id="s1")], (), "does not allow multiple allocations"),
])
def test_each_rule_speaks(slices: list[ResourceSlice], claim: ResourceClaim, results: list[DeviceResult],
                          in_use: tuple[ResourceClaim, ...], said: str) -> None:
    found = _check(slices, claim, *results, in_use=in_use)
    assert any(said in v for v in found), found


def test_counters_are_not_overdrawn() -> None:
    counters = [{"name": "set", "counters": {"mem": {"value": "80Gi"}}}]
    half = [{"counterSet": "set", "counters": {"mem": {"value": "40Gi"}}}]
    whole = [{"counterSet": "set", "counters": {"mem": {"value": "80Gi"}}}]
    slices = [_slice("c", [], count=2, counters=counters),
              _slice("d", [_gpu("half-0", consumesCounters=half), _gpu("half-1", consumesCounters=half),
                           _gpu("whole", consumesCounters=whole)], count=2)]
    two = _claim([{"name": "r", "exactly": _exact(2)}])
    assert _check(slices, two, _result("half-0"), _result("half-1")) == []
    found = _check(slices, two, _result("half-0"), _result("whole"))
    assert any("counter set/mem consumed" in v for v in found), found
    found = _check(slices, ONE_REQUEST, _result("whole"), in_use=(_held(_result("half-1")),))
    assert any("counter set/mem consumed" in v for v in found), found


def test_shares_stay_within_capacity_and_follow_the_request_policy() -> None:
    policy = {"default": "10Gi", "validValues": ["10Gi", "20Gi", "40Gi"]}
    slices = [_slice("s", [_gpu("gpu-0", allowMultipleAllocations=True,
                                capacity={"memory": {"value": "40Gi", "requestPolicy": policy}})])]
    asks = _claim([{"name": "r", "exactly": _exact(capacity={"requests": {"memory": "15Gi"}})}])
    gi = 1024 ** 3

    def share(n: int, sid: str) -> DeviceResult:
        return _result("gpu-0", share_id=sid, consumed_capacity={"memory": Quantity(Fraction(n * gi), f"{n}Gi")})

    assert _check(slices, asks, share(20, "a"), in_use=(_held(share(20, "b")),)) == []
    found = _check(slices, asks, share(15, "a"))
    assert any("the policy makes it" in v for v in found), found
    found = _check(slices, asks, share(20, "a"), in_use=(_held(share(40, "b")),))
    assert any(f"capacity {GPU}/memory consumed" in v for v in found), found
    found = _check(slices, asks, _result("gpu-0"))
    assert any("got no share id" in v for v in found), found


def test_a_fractional_range_is_whole_numbers_without_the_gate() -> None:
    policy = {"default": "500m", "validRange": {"min": "500m", "max": "1500m", "step": "250m"}}
    slices = [_slice("s", [_gpu("gpu-0", allowMultipleAllocations=True,
                                capacity={"cores": {"value": "4", "requestPolicy": policy}})])]
    asks = _claim([{"name": "r", "exactly": _exact(capacity={"requests": {"cores": "1100m"}})}])
    found = _check(slices, asks, _result("gpu-0", share_id="a",
                                         consumed_capacity={"cores": Quantity(Fraction(5, 4), "1250m")}))
    assert any("refuses the request" in v for v in found), found


def test_the_allocation_pins_the_node_and_a_kept_allocation_stays() -> None:
    elsewhere = (NodeSelectorTerm(match_fields=(Requirement(key="metadata.name", operator="In", values=("node-1",)),)),)
    found = _check(TWO, ONE_REQUEST, _result("gpu-0"), node_selector=elsewhere)
    assert any("does not admit node-0" in v for v in found), found
    kept = dataclasses.replace(ONE_REQUEST, allocation=Allocation(results=(_result("gpu-0"),)))
    assert violations(NODE, TWO, {"gpu": CLASS}, (), [kept], [kept.allocation]) == []  # type: ignore[list-item]
    found = violations(NODE, TWO, {"gpu": CLASS}, (), [kept], [Allocation(results=(_result("gpu-1"),))])
    assert any("given another allocation" in v for v in found), found
    binds = [_slice("s", [_gpu("gpu-0", bindsToNode=True, bindingConditions=["ready"],
                               bindingFailureConditions=["failed"])])]
    found = _check(binds, ONE_REQUEST, _result("gpu-0", binding_conditions=("ready",),
                                               binding_failure_conditions=("failed",)))
    assert any("binds to the node" in v for v in found), found
