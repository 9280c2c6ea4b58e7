"""DRA objects (resource.k8s.io/v1) parse as kube-apiserver v1.37.2 accepts them: what it refuses is a
ParseError naming the field, and a field of a feature alpha in v1.37.2 is recorded, not dropped."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from koordpy.api import ParseError
from koordpy.api.dra import (
    DeviceClass,
    DeviceTaintRule,
    NodeSelection,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
    SemVer,
)
from koordpy.api.quantity import exact_quantity

DRIVER = "gpu.example.com"


def device_class(name: str = "gpu", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}], **spec}}


def slice_(name: str = "n1-gpus", devices: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"driver": DRIVER, "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                            "nodeName": "n1"}
    body["devices"] = devices if devices is not None else [
        {"name": "gpu-0", "attributes": {"model": {"string": "h100"}, "index": {"int": 0},
                                         "driverVersion": {"version": "1.2.3-rc.1"}, "nvlink": {"bool": True}},
         "capacity": {"memory": {"value": "80Gi"}, "f": {"value": "100m"}}}]
    body.update(spec)
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": body}


def claim_spec(**exactly: Any) -> dict[str, Any]:
    return {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", **exactly}}]}}


def claim(name: str = "c", spec: dict[str, Any] | None = None, **status: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                           "metadata": {"name": name, "namespace": "ns"}, "spec": spec or claim_spec()}
    if status:
        raw["status"] = status
    return raw


def refused(parse: Any, raw: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ParseError) as e:
        parse(raw)
    assert e.value.field == field, e.value
    assert words in e.value.message, e.value


# -- quantities -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "value"), [
    ("100m", Fraction(1, 10)), ("1.5Gi", Fraction(3 * 2**29)), ("0.1n", Fraction(1, 10**9)),
    ("1e-999", Fraction(1, 10**9)),
    ("1e999999", Fraction(2**63 - 1)), ("-2", Fraction(-2)), (3, Fraction(3)), ("2.5", Fraction(5, 2)),
])
def test_exact_quantities_are_what_apimachinery_keeps(text: object, value: Fraction) -> None:
    assert exact_quantity(text) == value


# -- DeviceClass ------------------------------------------------------------------------------------

def test_a_device_class_and_its_extended_resources() -> None:
    c = DeviceClass.from_raw(device_class(extendedResourceName="example.com/gpu",
                                          config=[{"opaque": {"driver": DRIVER, "parameters": {"a": 1}}}]))
    assert c.selectors == (f'device.driver == "{DRIVER}"',)
    assert c.config[0].driver == DRIVER and c.config[0].parameters == '{"a":1}'
    assert c.extended_resources == ("example.com/gpu", "deviceclass.resource.kubernetes.io/gpu")
    assert DeviceClass.from_raw(device_class()).extended_resources == ("deviceclass.resource.kubernetes.io/gpu",)


@pytest.mark.parametrize(("spec", "field", "words"), [
    ({"extendedResourceName": "cpu"}, "spec.extendedResourceName", "valid extended resource name"),
    ({"extendedResourceName": "kubernetes.io/gpu"}, "spec.extendedResourceName", "valid extended resource name"),
    ({"selectors": [{}]}, "spec.selectors[0].cel", "required"),
    ({"selectors": [{"cel": {"expression": "x" * 10241}}]}, "spec.selectors[0].cel.expression", "10240"),
    ({"config": [{"opaque": {"driver": DRIVER}}]}, "spec.config[0].opaque.parameters", "required"),
    ({"config": [{"opaque": {"driver": DRIVER, "parameters": [1]}}]}, "spec.config[0].opaque.parameters",
     "JSON object"),
    ({"config": [{"opaque": {"driver": "Bad_Driver", "parameters": {}}}]}, "spec.config[0].opaque.driver", "RFC 1123"),
])
def test_a_device_class_the_api_server_refuses(spec: dict[str, Any], field: str, words: str) -> None:
    refused(DeviceClass.from_raw, device_class(**spec), field, words)


# -- ResourceSlice ----------------------------------------------------------------------------------

def test_a_slice_reads_its_devices_exactly() -> None:
    s = ResourceSlice.from_raw(slice_())
    assert (s.driver, s.pool, s.generation, s.slice_count) == (DRIVER, "n1", 1, 1)
    assert s.node == NodeSelection(node_name="n1")
    d = s.devices[0]
    assert d.attributes == {"model": "h100", "index": 0, "driverVersion": SemVer("1.2.3-rc.1"), "nvlink": True}
    assert d.capacity["memory"].value.value == 80 * 2**30 and d.capacity["f"].value.value == Fraction(1, 10)
    assert s.alpha_fields == ()


def test_a_slice_per_device_node_selection_and_counters() -> None:
    raw = slice_(devices=[{"name": "p0", "allNodes": True,
                           "consumesCounters": [{"counterSet": "gpu-0", "counters": {"mem": {"value": "40Gi"}}}]},
                          {"name": "p1", "nodeSelector": {"nodeSelectorTerms": [
                              {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}]}}])
    raw["spec"].pop("nodeName")
    raw["spec"]["perDeviceNodeSelection"] = True
    s = ResourceSlice.from_raw(raw)
    assert s.node is None
    assert s.devices[0].node == NodeSelection(all_nodes=True)
    assert s.devices[1].node is not None and s.devices[1].node.node_selector is not None
    assert s.devices[0].consumes_counters[0].counters["mem"].value == 40 * 2**30
    counters = ResourceSlice.from_raw(slice_(devices=[], sharedCounters=[{"name": "gpu-0", "counters": {
        "mem": {"value": "80Gi"}}}]))
    assert counters.shared_counters[0].counters["mem"].value == 80 * 2**30


def _with(raw: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """``raw`` with the dotted ``path`` (ints index lists) set to ``value``; None removes it."""
    raw = copy.deepcopy(raw)
    *head, last = [int(p) if p.isdigit() else p for p in path.split(".")]
    target: Any = raw
    for p in head:
        target = target[p]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return raw


SLICE_REFUSED: list[tuple[str, Any, str, str]] = [
    ("spec.driver", "Bad_Driver!", "spec.driver", "RFC 1123"),
    ("spec.driver", None, "spec.driver", "required"),
    ("spec.pool.name", "a//b", "spec.pool.name", "RFC 1123"),
    ("spec.pool.resourceSliceCount", 0, "spec.pool.resourceSliceCount", "greater than zero"),
    ("spec.pool.generation", -1, "spec.pool.generation", "negative"),
    ("spec.allNodes", True, "spec", "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection`"),
    ("spec.nodeName", None, "spec", "is required"),
    ("spec.allNodes", False, "spec.allNodes", "unset or set to true"),
    ("spec.nodeName", "", "spec.nodeName", "non-empty"),
    ("spec.devices.0.name", "GPU_0", "spec.devices[0].name", "RFC 1123"),
    ("spec.devices.0.attributes.model", {"string": "a", "int": 1}, "spec.devices[0].attributes[model]",
     "exactly one value"),
    ("spec.devices.0.attributes.model", {}, "spec.devices[0].attributes[model]", "exactly one value"),
    ("spec.devices.0.attributes.model", {"string": "x" * 65}, "spec.devices[0].attributes[model].string", "64"),
    ("spec.devices.0.attributes.model", {"version": "1.2"}, "spec.devices[0].attributes[model].version", "semver"),
    ("spec.devices.0.attributes.model", {"int": "1"}, "spec.devices[0].attributes[model].int", "integer"),
    ("spec.devices.0.attributes.model", {"strings": []}, "spec.devices[0].attributes[model].strings", "not be empty"),
    ("spec.devices.0.attributes.1bad", {"int": 1}, "spec.devices[0].attributes[1bad]", "C identifier"),
    ("spec.devices.0.attributes./x", {"int": 1}, "spec.devices[0].attributes[/x]", "domain must not be empty"),
    ("spec.devices.0.capacity.memory", {"value": "lots"}, "spec.devices[0].capacity[memory].value", "not a quantity"),
    ("spec.devices.0.capacity.memory", {"value": "1", "requestPolicy": {"default": "1"}},
     "spec.devices[0].capacity[memory].requestPolicy", "allowMultipleAllocations"),
    ("spec.devices.0.allNodes", True, "spec.devices[0]", "only be set if `perDeviceNodeSelection`"),
    ("spec.devices.0.taints", [{"key": "k", "effect": "Sometimes"}], "spec.devices[0].taints[0].effect", "unsupported"),
    ("spec.devices.0.taints", [{"key": "k"}], "spec.devices[0].taints[0].effect", "required"),
    ("spec.devices.0.bindingConditions", ["ready"], "spec.devices[0].bindingFailureConditions", "together"),
    ("spec.devices.0.consumesCounters", [{"counterSet": "s"}], "spec.devices[0].consumesCounters[0].counters",
     "required"),
]


@pytest.mark.parametrize(("path", "value", "field", "words"), SLICE_REFUSED)
def test_a_slice_the_api_server_refuses(path: str, value: Any, field: str, words: str) -> None:
    refused(ResourceSlice.from_raw, _with(slice_(), path, value), field, words)


def test_a_slice_with_duplicate_devices_or_too_many_is_refused() -> None:
    refused(ResourceSlice.from_raw, slice_(devices=[{"name": "a"}, {"name": "a"}]), "spec.devices[1]", "duplicate")
    refused(ResourceSlice.from_raw, slice_(devices=[{"name": f"d{i}"} for i in range(129)]), "spec.devices", "128")
    tainted = [{"name": f"d{i}", "taints": [{"key": "k", "effect": "NoSchedule"}]} for i in range(65)]
    refused(ResourceSlice.from_raw, slice_(devices=tainted), "spec.devices", "64")
    both = slice_(sharedCounters=[{"name": "s", "counters": {"c": {"value": "1"}}}])
    refused(ResourceSlice.from_raw, both, "spec", "only one of `sharedCounters` or `devices`")


def test_a_slice_node_selector_has_exactly_one_term() -> None:
    term = {"matchExpressions": [{"key": "a", "operator": "Exists"}]}
    raw = _with(slice_(), "spec.nodeName", None)
    raw["spec"]["nodeSelector"] = {"nodeSelectorTerms": [term, term]}
    refused(ResourceSlice.from_raw, raw, "spec.nodeSelector.nodeSelectorTerms", "exactly one")


def test_consumable_capacity_policy() -> None:
    policy = {"default": "1Gi", "validRange": {"min": "1Gi", "step": "1Gi"}}
    raw = _with(slice_(), "spec.devices.0.capacity.memory", {"value": "80Gi", "requestPolicy": policy})
    raw["spec"]["devices"][0]["allowMultipleAllocations"] = True
    cap = ResourceSlice.from_raw(raw).devices[0].capacity["memory"]
    assert cap.policy is not None and cap.policy.valid_step is not None and cap.policy.valid_step.value == 2**30
    bad = _with(raw, "spec.devices.0.capacity.memory.requestPolicy.default", "1.5Gi")
    refused(ResourceSlice.from_raw, bad, "spec.devices[0].capacity[memory].requestPolicy.default", "multiple")
    bad = _with(raw, "spec.devices.0.capacity.memory.requestPolicy.default", None)
    refused(ResourceSlice.from_raw, bad, "spec.devices[0].capacity[memory].requestPolicy.default", "required")
    bad = _with(raw, "spec.devices.0.capacity.memory.requestPolicy", {"default": "2", "validValues": ["1", "3"]})
    refused(ResourceSlice.from_raw, bad, "spec.devices[0].capacity[memory].requestPolicy.default", "not valid")


def test_a_fractional_request_policy_is_kept_and_checked_in_whole_numbers() -> None:
    # DRAFractionalCapacityRange is off in a v1.37.2 API server started without flags: fractional
    # bounds are kept, and its checks read each quantity rounded up to a whole number (Value()).
    def cores(policy: dict[str, Any]) -> dict[str, Any]:
        raw = _with(slice_(), "spec.devices.0.capacity.cores", {"value": "4", "requestPolicy": policy})
        raw["spec"]["devices"][0]["allowMultipleAllocations"] = True
        return raw

    # 600m - 500m is no multiple of 250m, but 1 - 1 is one of 1: kept.
    kept = cores({"default": "600m", "validRange": {"min": "500m", "max": "1500m", "step": "250m"}})
    cap = ResourceSlice.from_raw(kept).devices[0].capacity["cores"]
    assert cap.policy is not None and cap.policy.valid_min is not None and cap.policy.valid_min.text == "500m"
    # 3 - 0 is a multiple of 1500m, but not of 2: refused.
    where = "spec.devices[0].capacity[cores]"
    refused(ResourceSlice.from_raw, cores({"default": "0", "validRange": {"min": "0", "max": "3", "step": "1500m"}}),
            f"{where}.requestPolicy.validRange.max", "value is not a multiple of a given step (1500m) from (0)")
    # 250m and 1 are one option when rounded up.
    refused(ResourceSlice.from_raw, cores({"default": "250m", "validValues": ["250m", "1"]}),
            f"{where}.requestPolicy.validValues[1]", "duplicate")


def test_alpha_fields_of_a_slice_are_recorded() -> None:
    raw = slice_(partitionTypeAttribute="gpu.example.com/type", skipNodeOperations=["Prepare"])
    raw["spec"]["devices"][0]["attributes"]["links"] = {"ints": [1, 2]}
    raw["spec"]["devices"][0]["nodeAllocatableResources"] = {"memory": {"overhead": {"perPod": "1Gi"}}}
    raw["spec"]["devices"][0]["consumesCounters"] = [{"counterSet": "s", "counters": {"c": {"value": "1"}},
                                                      "compatibilityGroups": ["mig"]}]
    s = ResourceSlice.from_raw(raw)
    assert s.devices[0].attributes["links"] == (1, 2)
    assert set(s.alpha_fields) == {
        "spec.partitionTypeAttribute", "spec.skipNodeOperations", "spec.devices[0].attributes[links].ints",
        "spec.devices[0].nodeAllocatableResources", "spec.devices[0].consumesCounters[0].compatibilityGroups"}


# -- ResourceClaim, ResourceClaimTemplate -----------------------------------------------------------

def test_a_claim_and_its_status() -> None:
    spec = {"devices": {
        "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": 2, "adminAccess": False,
                                                  "tolerations": [{"key": "k", "operator": "Exists"}],
                                                  "capacity": {"requests": {"memory": "10Gi"}}}},
                     {"name": "nic", "firstAvailable": [{"name": "fast", "deviceClassName": "nic"},
                                                        {"name": "any", "deviceClassName": "nic",
                                                         "allocationMode": "All"}]}],
        "constraints": [{"requests": ["gpu", "nic/fast"], "matchAttribute": "gpu.example.com/numa"}],
        "config": [{"requests": ["gpu"], "opaque": {"driver": DRIVER, "parameters": {"m": "x"}}}]}}
    status: dict[str, Any] = {"allocation": {"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1",
                                                      "device": "gpu-0", "consumedCapacity": {"memory": "10Gi"}}],
                                         "config": [{"source": "FromClaim", "requests": ["gpu"],
                                                     "opaque": {"driver": DRIVER, "parameters": {"m": "x"}}}]},
                             "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                                 {"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]},
                             "allocationTimestamp": "2026-01-01T00:00:00Z"},
              "reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}
    raw = claim(spec=spec, **status)
    raw["metadata"].update(finalizers=["resource.kubernetes.io/delete-protection"], ownerReferences=[
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "controller": True}],
        annotations={"resource.kubernetes.io/pod-claim-name": "gpu"})
    c = ResourceClaim.from_raw(raw)
    gpu, nic = c.spec.requests
    assert gpu.exactly is not None and (gpu.exactly.count, gpu.exactly.mode) == (2, "ExactCount")
    assert gpu.exactly.capacity["memory"].value == 10 * 2**30 and gpu.exactly.tolerations[0].operator == "Exists"
    assert [(s.name, s.mode, s.count) for s in nic.first_available] == [("fast", "ExactCount", 1), ("any", "All", 0)]
    assert c.spec.constraints[0].requests == ("gpu", "nic/fast")
    assert c.spec.config[0].requests == ("gpu",)
    assert c.allocation is not None and c.allocation.results[0].device_id == f"{DRIVER}/n1/gpu-0"
    assert c.allocation.config[0].source == "FromClaim" and c.allocation.timestamp is not None
    assert c.allocation.node_selector is not None
    assert c.reserved_for[0].uid == "u1" and c.owner == ("Pod", "p", "u1")
    assert c.finalizers == ("resource.kubernetes.io/delete-protection",) and c.alpha_fields == ()


def _request(**fields: Any) -> dict[str, Any]:
    return claim(spec={"devices": {"requests": [{"name": "gpu", **fields}]}})


CLAIM_REFUSED = [
    (_request(), "spec.devices.requests[0]", "exactly one of `exactly` or `firstAvailable` is required"),
    (_request(exactly={"deviceClassName": "gpu"}, firstAvailable=[{"name": "a", "deviceClassName": "gpu"}]),
     "spec.devices.requests[0]", "multiple fields are set"),
    (_request(exactly={}), "spec.devices.requests[0].exactly.deviceClassName", "required"),
    (_request(exactly={"deviceClassName": "gpu", "count": -1}), "spec.devices.requests[0].exactly.count",
     "greater than zero"),
    (_request(exactly={"deviceClassName": "gpu", "allocationMode": "All", "count": 2}),
     "spec.devices.requests[0].exactly.count", "must not be specified"),
    (_request(exactly={"deviceClassName": "gpu", "allocationMode": "Some"}),
     "spec.devices.requests[0].exactly.allocationMode", "unsupported"),
    (_request(exactly={"deviceClassName": "gpu", "tolerations": [{"operator": "Exists", "value": "v"}]}),
     "spec.devices.requests[0].exactly.tolerations[0].value", "empty for operator `Exists`"),
    (_request(exactly={"deviceClassName": "gpu", "tolerations": [{"operator": "Maybe"}]}),
     "spec.devices.requests[0].exactly.tolerations[0].operator", "unsupported"),
    (_request(firstAvailable=[{"name": f"s{i}", "deviceClassName": "gpu"} for i in range(9)]),
     "spec.devices.requests[0].firstAvailable", "at most 8"),
    (_request(firstAvailable=[{"name": "s", "deviceClassName": "gpu"}, {"name": "s", "deviceClassName": "gpu"}]),
     "spec.devices.requests[0].firstAvailable[1].name", "duplicate"),
    (_request(name="GPU", exactly={"deviceClassName": "gpu"}), "spec.devices.requests[0].name", "RFC 1123"),
    (claim(spec={"devices": {"requests": [{"name": "a", "exactly": {"deviceClassName": "gpu"}}],
                             "constraints": [{"requests": ["b"], "matchAttribute": "x.com/y"}]}}),
     "spec.devices.constraints[0].requests[0]", "must be the name of a request"),
    (claim(spec={"devices": {"requests": [], "constraints": [{"matchAttribute": "numa"}]}}),
     "spec.devices.constraints[0].matchAttribute", "fully qualified"),
    (claim(spec={"devices": {"requests": [], "constraints": [{}]}}),
     "spec.devices.constraints[0]", 'exactly one of "matchAttribute" or "distinctAttribute"'),
    (claim(reservedFor=[{"resource": "pods", "name": "p"}]), "status.reservedFor[0].uid", "required"),
    (claim(reservedFor=[{"resource": "pods", "name": f"p{i}", "uid": f"u{i}"} for i in range(257)]),
     "status.reservedFor", "at most 256"),
    (claim(allocation={"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1"}]}}),
     "status.allocation.devices.results[0].device", "required"),
    (claim(allocation={"devices": {"results": [{"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "d",
                                                "shareID": "ABC"}]}}),
     "status.allocation.devices.results[0].shareID", "RFC 4122"),
]


@pytest.mark.parametrize(("raw", "field", "words"), CLAIM_REFUSED)
def test_a_claim_the_api_server_refuses(raw: dict[str, Any], field: str, words: str) -> None:
    refused(ResourceClaim.from_raw, raw, field, words)


def test_alpha_fields_of_a_claim_are_recorded() -> None:
    derived = [{"name": "gpu.example.com/x", "expression": "1"}]
    raw = claim(spec={"devices": {"requests": [
        {"name": "a", "exactly": {"deviceClassName": "gpu", "derivedAttributes": derived}},
        {"name": "b", "firstAvailable": [{"name": "s", "deviceClassName": "gpu", "derivedAttributes": derived}]}]}},
        allocation={"devices": {"results": [{"request": "a", "driver": DRIVER, "pool": "n1", "device": "d",
                                             "skipNodeOperations": ["Prepare"]}]}})
    assert ResourceClaim.from_raw(raw).alpha_fields == (
        "spec.devices.requests[0].exactly.derivedAttributes",
        "spec.devices.requests[1].firstAvailable[0].derivedAttributes",
        "status.allocation.devices.results[0].skipNodeOperations")


def test_a_claim_template() -> None:
    raw: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                           "metadata": {"name": "t", "namespace": "ns"},
                           "spec": {"metadata": {"labels": {"a": "b"}}, "spec": claim_spec(count=8)}}
    t = ResourceClaimTemplate.from_raw(raw)
    assert t.key == "ns/t" and t.labels == {"a": "b"}
    assert t.spec.requests[0].exactly is not None and t.spec.requests[0].exactly.count == 8
    refused(ResourceClaimTemplate.from_raw, _with(raw, "spec.spec.devices.requests.0.exactly.count", -3),
            "spec.spec.devices.requests[0].exactly.count", "greater than zero")
    raw["spec"]["spec"]["devices"]["requests"][0]["exactly"]["derivedAttributes"] = [{"name": "a.b/c"}]
    assert ResourceClaimTemplate.from_raw(raw).alpha_fields == (
        "spec.spec.devices.requests[0].exactly.derivedAttributes",)


# -- DeviceTaintRule --------------------------------------------------------------------------------

def test_a_device_taint_rule() -> None:
    raw: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
           "spec": {"deviceSelector": {"driver": DRIVER, "pool": "n1"},
                    "taint": {"key": "example.com/broken", "value": "yes", "effect": "NoExecute"}}}
    rule = DeviceTaintRule.from_raw(raw)
    assert (rule.driver, rule.pool, rule.device, rule.taint.effect) == (DRIVER, "n1", "", "NoExecute")
    assert rule.selects(DRIVER, "n1", "gpu-3") and not rule.selects(DRIVER, "n2", "gpu-3")
    refused(DeviceTaintRule.from_raw, _with(raw, "spec.taint.effect", "Never"), "spec.taint.effect", "unsupported")
    # No selector selects no device; an empty one selects every device (the ResourceSlice tracker's reading).
    assert not DeviceTaintRule.from_raw(_with(raw, "spec.deviceSelector", None)).selects(DRIVER, "n1", "gpu-3")
    assert DeviceTaintRule.from_raw(_with(raw, "spec.deviceSelector", {})).selects(DRIVER, "n2", "gpu-3")
    refused(DeviceTaintRule.from_raw, _with(raw, "spec.taint", None), "spec.taint", "required")
    refused(DeviceTaintRule.from_raw, _with(raw, "spec.deviceSelector.device", "Bad_Name"),
            "spec.deviceSelector.device", "RFC 1123")
