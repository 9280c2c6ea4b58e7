"""The live binding cycle (``koordpy.controller.binding``): reserve, pre-bind steps, bind, and on a
failure at any step the steps before it undone in reverse, with the pod back in the queue."""

from __future__ import annotations

import asyncio
import dataclasses
from fractions import Fraction
from typing import Any, cast

import pytest

from koordpy.api.dra import (
    DELETE_PROTECTION,
    AllocatedConfig,
    Allocation,
    Consumer,
    DeviceCondition,
    DeviceResult,
    DeviceToleration,
    OpaqueConfig,
    Quantity,
    ResourceClaim,
)
from koordpy.api.objects import NodeSelectorTerm, Requirement
from koordpy.controller import binding as binding_module
from koordpy.controller import claimwrites
from koordpy.controller.binding import Binder
from koordpy.controller.cache import ASSUME_TTL, CLAIMS, Cache
from koordpy.controller.writer import Conflict
from koordpy.core.decisions import Bind, ClaimWrite, DeviceBinding, VolumeBinding
from tests.builders import node, pod
from tests.core.test_volumes import one_pv_cache, pv, pvc, sc

NAMES = frozenset({"koordpy"})


class FakeWriter:
    """What a binding cycle asks of its writer, recorded; ``refuse`` makes the bind fail as a pod
    deleted meanwhile does (False)."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[tuple[Any, ...]] = []
        self.conditions: dict[str, str] = {}
        self.events: list[tuple[str, ...]] = []

    async def claim_volume(self, pv: str, ns: str, claim: str, claim_uid: str, resource_version: str = "") -> None:
        self.calls.append(("claim_volume", pv, f"{ns}/{claim}"))

    async def select_node(self, claim_key: str, node_name: str) -> None:
        self.calls.append(("select_node", claim_key, node_name))

    async def bind(self, pod_key: str, uid: str, node_name: str) -> bool:
        self.calls.append(("bind", pod_key, node_name))
        return not self.refuse

    def bound(self, pod_key: str) -> None:
        self.calls.append(("bound", pod_key))

    def unschedulable(self, pod_key: str, message: str, reason: str = "Unschedulable") -> None:
        self.conditions[pod_key] = message

    def spawn_owed(self, coro: Any) -> None:
        coro.close()

    def event(self, kind: str, obj: str, uid: str, type_: str, reason: str, message: str) -> Any:
        self.events.append((kind, obj, uid, type_, reason, message))
        return asyncio.sleep(0)


async def test_a_bind_written_after_the_volume_prebind_confirms_the_pod() -> None:
    cache, writer = one_pv_cache("p", "data"), FakeWriter()
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)))
    binder.reserve(d)
    assert cache.assumed["default/p"][0] == "a" and cache.storage.volumes["only"].claim_ref is not None
    await binder.run(d, "uid-p")
    assert [c[0] for c in writer.calls] == ["claim_volume", "bind", "bound"]
    assert "default/p" in cache.assumed and cache.storage.volumes["only"].claim_ref is not None


async def test_a_bind_refused_after_the_volume_prebind_undoes_the_volume_assumption() -> None:
    """kube-scheduler's Unreserve reverts the volumes it assumed when the bind fails; the loop kept the
    PersistentVolume's claimRef assumed (the next cycles saw it taken by a pod that is pending again)."""
    cache, writer = one_pv_cache("p", "data"), FakeWriter(refuse=True)
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)))
    binder.reserve(d)
    await binder.run(d, "uid-p")
    assert "default/p" not in cache.assumed
    assert cache.storage.volumes["only"].claim_ref is None


async def test_a_failed_volume_write_puts_the_pod_back_with_kube_schedulers_words() -> None:
    cache = one_pv_cache("p", "data")

    class Failing(FakeWriter):
        async def claim_volume(self, pv: str, ns: str, claim: str, claim_uid: str,
                               resource_version: str = "") -> None:
            raise OSError("connection refused")

    writer = Failing()
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)))
    binder.reserve(d)
    await binder.run(d, "uid-p")
    assert [c[0] for c in writer.calls] == []
    assert writer.conditions["default/p"] == 'running PreBind plugin "VolumeBinding": connection refused'
    assert "default/p" not in cache.assumed and cache.storage.volumes["only"].claim_ref is None


# -- the claims step (DRA) -----------------------------------------------------------------------

RC = "ResourceClaim"
POD_UID = "uid-p"


def _result(device: str = "gpu-0", **extra: Any) -> DeviceResult:
    return DeviceResult(request="gpu", driver="gpu.example.com", pool="node-a", device=device, **extra)


def _allocation(*results: DeviceResult) -> Allocation:
    selector = (NodeSelectorTerm(match_fields=(Requirement(key="metadata.name", operator="In", values=("a",)),)),)
    return Allocation(results=results or (_result(),), node_selector=selector, timestamp=1_800_000_000.0)


class FakeClaims(FakeWriter):
    """The API server's side of the claims' writes, enough of it: the patches claimwrites makes applied
    to the claims it holds (a resourceVersion that no longer holds is a Conflict), each write then
    brought to the cache by the 'watch' unless ``watch`` is off. ``fail`` names writes that raise."""

    def __init__(self, cache: Cache, refuse: bool = False, watch: bool = True) -> None:
        super().__init__(refuse)
        self.cache = cache
        self.watch = watch
        self.claims: dict[str, tuple[ResourceClaim, int]] = {}
        self.fail: dict[tuple[str, str], Exception] = {}
        self.patches: list[tuple[str, str, dict[str, Any]]] = []

    def put(self, claim: ResourceClaim, rv: int = 10) -> None:
        self.claims[claim.key] = (claim, rv)
        _file(self.cache, claim, rv)

    async def patch_claim(self, claim_key: str, body: dict[str, Any], what: str,
                          status: bool = False) -> dict[str, Any]:
        self.calls.append(("patch_claim", claim_key, what))
        self.patches.append((claim_key, what, body))
        if (claim_key, what) in self.fail:
            raise self.fail[(claim_key, what)]
        claim, rv = self.claims[claim_key]
        meta = body.get("metadata", {})
        if meta.get("resourceVersion") and meta["resourceVersion"] != str(rv):
            _file(self.cache, claim, rv)  # the watch brings the claim as it is now
            raise Conflict(f"{what} of ResourceClaim {claim_key}", "the object has been modified")
        finalizers = list(claim.finalizers)
        if DELETE_PROTECTION in meta.get("finalizers", ()) and DELETE_PROTECTION not in finalizers:
            finalizers.append(DELETE_PROTECTION)
        if DELETE_PROTECTION in meta.get("$deleteFromPrimitiveList/finalizers", ()):
            finalizers.remove(DELETE_PROTECTION)
        st = body.get("status", {})
        reserved = list(claim.reserved_for)
        for entry in st.get("reservedFor", ()):
            if entry.get("$patch") == "delete":
                reserved = [c for c in reserved if c.uid != entry["uid"]]
            elif all(c.uid != entry["uid"] for c in reserved):
                reserved.append(Consumer(entry["resource"], entry["name"], entry["uid"], entry.get("apiGroup", "")))
        allocation = claim.allocation
        if "allocation" in st:
            allocation = None if st["allocation"] is None else _parsed_allocation(st["allocation"])
        new = dataclasses.replace(claim, finalizers=tuple(finalizers), reserved_for=tuple(reserved),
                                  allocation=allocation)
        self.claims[claim_key] = (new, rv + 1)
        if self.watch:
            _file(self.cache, new, rv + 1)
        return self._raw(claim_key)

    def _raw(self, claim_key: str) -> dict[str, Any]:
        claim, rv = self.claims[claim_key]
        status: dict[str, Any] = {"reservedFor": [{"uid": c.uid} for c in claim.reserved_for]}
        if claim.allocation is not None:
            status["allocation"] = {"devices": {}}
        return {"metadata": {"resourceVersion": str(rv)}, "status": status}


def _parsed_allocation(raw: dict[str, Any]) -> Allocation:
    """Enough of a written allocation read back for these tests: its devices."""
    return Allocation(results=tuple(DeviceResult(r["request"], r["driver"], r["pool"], r["device"],
                                                 binding_conditions=tuple(r.get("bindingConditions", ())),
                                                 binding_failure_conditions=tuple(
                                                     r.get("bindingFailureConditions", ())))
                                    for r in raw["devices"]["results"]))


def _file(cache: Cache, claim: ResourceClaim, rv: int) -> None:
    """What the claims' watch does: the claim filed in its store at ``rv``, with the cache's hook."""
    cache.stores.setdefault(CLAIMS, {})[claim.key] = claim
    cache.versions[(RC, claim.key)] = rv
    Cache._claim_filed(cache, claim.key, claim, {})


def _claims_cache() -> Cache:
    cache = Cache()
    cache.stores.setdefault(CLAIMS, {})
    cache.observe("Node", "ADDED", node("a"))
    cache.observe("Pod", "ADDED", pod("p"))
    return cache


def _write(claim: str, allocation: Allocation | None = None, uid: str = POD_UID) -> ClaimWrite:
    return ClaimWrite(f"default/{claim}", Consumer("pods", "p", uid), allocation)


def _devices(*writes: ClaimWrite) -> Bind:
    return Bind("default/p", "a", devices=DeviceBinding("a", writes))


def _reserve(cache: Cache, api: FakeClaims, d: Bind) -> Binder:
    """A Binder on ``api`` with the bind ``d`` reserved, as the cycle hands it over."""
    binder = Binder(cache, api)  # type: ignore[arg-type]
    binder.reserve(d)
    return binder


def _reserved(cache: Cache, api: FakeClaims, *writes: ClaimWrite) -> tuple[Binder, Bind]:
    """``_reserve`` of the pod's claim ``writes``."""
    d = _devices(*writes)
    return _reserve(cache, api, d), d


def _sharer(binder: Binder) -> Bind:
    """Pod q's devices reserved on ``binder``: claim ``shared``, allocated by pod p's bind (none of its own)."""
    q = Consumer("pods", "q", "uid-q")
    d = Bind("default/q", "a", devices=DeviceBinding("a", (ClaimWrite("default/shared", q),)))
    binder.reserve(d)
    return d


def _attaching() -> Allocation:
    """gpu-0 of a driver that attaches it: the bind waits for ``Attached``; ``Failed`` ends the wait."""
    return _allocation(_result(binding_conditions=("Attached",), binding_failure_conditions=("Failed",)))


def _condition(kind: str) -> DeviceCondition:
    """The driver's condition ``kind`` on gpu-0, True."""
    return DeviceCondition("gpu.example.com", "node-a", "gpu-0", kind, "True")


async def _attaching_bind(monkeypatch: pytest.MonkeyPatch, wait: float = 0.05
                          ) -> tuple[Cache, FakeClaims, asyncio.Future[None]]:
    """The pod's bind started on claim c1 allocated ``_attaching()``, and left ``wait`` seconds to
    reach the wait for the driver's conditions."""
    monkeypatch.setattr(binding_module, "PREBIND_POLL", 0.01)
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    binder, d = _reserved(cache, api, _write("c1", _attaching()))
    task = asyncio.ensure_future(binder.run(d, POD_UID))
    await asyncio.sleep(wait)
    return cache, api, task


def _shown(cache: Cache, key: str) -> ResourceClaim:
    return cast(ResourceClaim, cache.stores[CLAIMS][key])


async def test_the_claims_step_writes_finalizer_then_allocation_with_reservation_then_binds() -> None:
    cache = _claims_cache()
    api = FakeClaims(cache, watch=False)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    api.put(ResourceClaim("default", "c2", uid="uid-c2"))
    binder = Binder(cache, api)  # type: ignore[arg-type]
    alloc = _allocation()
    d = _devices(_write("c1", alloc), _write("c2", _allocation(_result("gpu-1"))))
    binder.reserve(d)
    # Assumed at once: the next cycle sees both claims allocated and reserved for the pod.
    shown = _shown(cache, "default/c1")
    assert shown.allocation == alloc and [c.uid for c in shown.reserved_for] == [POD_UID]
    assert DELETE_PROTECTION in shown.finalizers
    await binder.run(d, POD_UID)
    assert [c[1:] for c in api.calls if c[0] == "patch_claim"] == [
        ("default/c1", "finalizer"), ("default/c1", "allocation and reservation"),
        ("default/c2", "finalizer"), ("default/c2", "allocation and reservation")]
    assert [c[0] for c in api.calls][-2:] == ["bind", "bound"]
    _, _, body = api.patches[1]
    assert body["metadata"] == {"uid": "uid-c1", "resourceVersion": "11"}  # after the finalizer's patch
    assert body["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": POD_UID}]
    assert body["status"]["allocation"]["devices"]["results"] == [
        {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}]
    # Still assumed (the watch has not brought the writes): the devices stay taken.
    assert _shown(cache, "default/c1").allocation == alloc


async def test_a_claim_allocated_already_gets_only_the_reservation() -> None:
    cache = _claims_cache()
    api = FakeClaims(cache)
    other = Consumer("pods", "q", "uid-q")
    api.put(ResourceClaim("default", "shared", uid="uid-s", allocation=_allocation(), reserved_for=(other,),
                          finalizers=(DELETE_PROTECTION,)))
    binder, d = _reserved(cache, api, _write("shared"))
    await binder.run(d, POD_UID)
    [(_, what, body)] = api.patches
    assert what == "allocation and reservation" and "allocation" not in body["status"]
    assert "resourceVersion" not in body["metadata"]  # a reservation is merged by uid: never a conflict
    assert [c.uid for c in _shown(cache, "default/shared").reserved_for] == ["uid-q", POD_UID]


async def test_the_finalizers_version_from_the_watch_keeps_the_allocation_assumed() -> None:
    """The finalizer's patch comes back before the status does: the claim it brings (unallocated) must
    not show the devices free while the allocation is in flight."""
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    binder = Binder(cache, api)  # type: ignore[arg-type]
    seen: list[Allocation | None] = []

    async def status_slow(claim_key: str, body: dict[str, Any], what: str, status: bool = False) -> dict[str, Any]:
        seen.append(_shown(cache, claim_key).allocation)  # the finalizer's version was filed by now
        return await FakeClaims.patch_claim(api, claim_key, body, what, status)

    api.patch_claim = status_slow  # type: ignore[method-assign]
    d = _devices(_write("c1", _allocation()))
    binder.reserve(d)
    await binder.run(d, POD_UID)
    assert seen == [_allocation(), _allocation()]
    assert not cache._claim_assumptions  # the written claim came back: nothing assumed any more


async def test_a_bind_refused_after_the_claims_were_written_unreserves_and_deallocates() -> None:
    cache = _claims_cache()
    api = FakeClaims(cache, refuse=True)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    await binder.run(d, POD_UID)
    assert [w for _, w, _ in api.patches] == ["finalizer", "allocation and reservation", "reservation", "finalizer"]
    _, _, undo = api.patches[2]
    assert undo["status"] == {"reservedFor": [{"$patch": "delete", "uid": POD_UID}], "allocation": None}
    assert undo["metadata"]["resourceVersion"] == "12"  # deallocated only as nobody else holds it
    claim, _ = api.claims["default/c1"]
    assert claim.allocation is None and claim.reserved_for == () and claim.finalizers == ()
    assert _shown(cache, "default/c1").allocation is None and "default/p" not in cache.assumed
    assert api.events == []  # no device with binding conditions: no BindingConditionsPending Event


async def test_unreserve_leaves_the_allocation_to_another_consumer() -> None:
    cache = _claims_cache()
    api = FakeClaims(cache, refuse=True)
    other = Consumer("pods", "q", "uid-q")
    api.put(ResourceClaim("default", "shared", uid="uid-s", allocation=_allocation(), reserved_for=(other,),
                          finalizers=(DELETE_PROTECTION,)))
    binder, d = _reserved(cache, api, _write("shared"))
    await binder.run(d, POD_UID)
    claim, _ = api.claims["default/shared"]
    assert claim.allocation == _allocation() and claim.reserved_for == (other,)
    assert claim.finalizers == (DELETE_PROTECTION,)


async def test_a_failure_at_a_later_claim_undoes_the_earlier_ones_and_the_volumes_in_reverse() -> None:
    cache = _claims_cache()
    cache.observe("StorageClass", "ADDED", sc("local"))
    cache.observe("PersistentVolume", "ADDED", pv("only", on="a"))
    cache.observe("PersistentVolumeClaim", "ADDED", pvc("data"))
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    api.put(ResourceClaim("default", "c2", uid="uid-c2"))
    api.fail[("default/c2", "allocation and reservation")] = OSError("connection refused")
    binder = Binder(cache, api)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)),
             DeviceBinding("a", (_write("c1", _allocation()), _write("c2", _allocation(_result("gpu-1"))))))
    binder.reserve(d)
    await binder.run(d, POD_UID)
    assert [(k, w) for k, w, _ in api.patches] == [
        ("default/c1", "finalizer"), ("default/c1", "allocation and reservation"),
        ("default/c2", "finalizer"), ("default/c2", "allocation and reservation"),
        ("default/c1", "reservation"), ("default/c1", "finalizer"), ("default/c2", "finalizer")]
    assert all(c.allocation is None and not c.finalizers for c, _ in api.claims.values())
    assert all(c.allocation is None for c in cache.stores[CLAIMS].values())
    assert cache.storage.volumes["only"].claim_ref is None and "default/p" not in cache.assumed
    assert "bind" not in [c[0] for c in api.calls]
    assert api.conditions["default/p"] == 'running PreBind plugin "DynamicResources": connection refused'


async def test_a_claim_allocated_elsewhere_meanwhile_is_not_overwritten() -> None:
    cache = _claims_cache()
    api = FakeClaims(cache, watch=False)
    api.put(ResourceClaim("default", "c1", uid="uid-c1", finalizers=(DELETE_PROTECTION,)))
    theirs = dataclasses.replace(api.claims["default/c1"][0], allocation=_allocation(_result("gpu-7")),
                                 reserved_for=(Consumer("pods", "q", "uid-q"),))
    api.claims["default/c1"] = (theirs, 11)  # kube-scheduler got there first; our watch has not seen it
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    await binder.run(d, POD_UID)
    assert api.claims["default/c1"][0] is theirs
    assert "allocated elsewhere" in api.conditions["default/p"]


async def test_binding_conditions_hold_the_bind_until_they_are_true(monkeypatch: pytest.MonkeyPatch) -> None:
    _, api, task = await _attaching_bind(monkeypatch, 0.1)
    assert "bind" not in [c[0] for c in api.calls]  # waiting for the driver
    claim, rv = api.claims["default/c1"]
    ready = dataclasses.replace(claim, device_conditions=(_condition("Attached"),))
    api.put(ready, rv + 1)
    await asyncio.wait_for(task, 2.0)
    assert [c[0] for c in api.calls][-2:] == ["bind", "bound"]
    # kube-scheduler's Normal Event, said once as the wait began.
    assert api.events == [("Pod", "default/p", POD_UID, "Normal", "BindingConditionsPending",
                           "waiting for binding conditions for device on node a")]


async def test_a_binding_failure_condition_unreserves(monkeypatch: pytest.MonkeyPatch) -> None:
    _, api, task = await _attaching_bind(monkeypatch)
    claim, rv = api.claims["default/c1"]
    api.put(dataclasses.replace(claim, device_conditions=(_condition("Failed"),)), rv + 1)
    await asyncio.wait_for(task, 2.0)
    assert "bind" not in [c[0] for c in api.calls]
    assert api.claims["default/c1"][0].allocation is None
    assert "binding failure condition Failed" in api.conditions["default/p"]


def test_an_allocation_on_the_wire() -> None:
    alloc = Allocation(
        results=(DeviceResult("gpu/big", "gpu.example.com", "node-a", "gpu-0", admin_access=True,
                              tolerations=(DeviceToleration(key="k", operator="Exists", effect="NoSchedule"),),
                              binding_conditions=("Attached",), binding_failure_conditions=("Failed",),
                              share_id="4d1c", consumed_capacity={"memory": Quantity(Fraction(2**30), "1Gi"),
                                                                  "cores": Quantity(Fraction(1, 2), "")}),),
        config=(AllocatedConfig("FromClass", OpaqueConfig("gpu.example.com", '{"a": [1]}')),
                AllocatedConfig("FromClaim", OpaqueConfig("gpu.example.com", '{"b": true}', ("gpu",)))),
        node_selector=(NodeSelectorTerm(match_expressions=(Requirement(key="zone", operator="In", values=("z1",)),)),),
        timestamp=1_800_000_000.0)
    assert claimwrites.allocation(alloc, 0.0) == {
        "devices": {
            "results": [{"request": "gpu/big", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0",
                         "adminAccess": True,
                         "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                         "bindingConditions": ["Attached"], "bindingFailureConditions": ["Failed"],
                         "shareID": "4d1c", "consumedCapacity": {"memory": "1Gi", "cores": "500m"}}],
            "config": [{"source": "FromClass", "opaque": {"driver": "gpu.example.com", "parameters": {"a": [1]}}},
                       {"source": "FromClaim", "requests": ["gpu"],
                        "opaque": {"driver": "gpu.example.com", "parameters": {"b": True}}}]},
        "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["z1"]}]}]},
        "allocationTimestamp": "2027-01-15T08:00:00Z"}
    assert claimwrites.allocation(Allocation(), 1_800_000_000.0)["allocationTimestamp"] == "2027-01-15T08:00:00Z"


def _raw_claim(rv: int, allocated: bool = False, finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "c1", "namespace": "default", "uid": "uid-c1", "resourceVersion": str(rv),
                     "finalizers": list(finalizers)},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu"}}]}}}
    if allocated:
        raw["status"] = {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}]}},
            "reservedFor": [{"resource": "pods", "name": "p", "uid": POD_UID}]}
    return raw


def test_the_claims_watch_keeps_an_assumption_until_it_brings_the_write() -> None:
    """Through the registry's store and the watch: a claim assumed allocated stays so while the watch
    brings versions without the write (the finalizer's), and the assumption ends with the written one."""
    cache = _claims_cache()
    cache.observe(RC, "ADDED", _raw_claim(10))
    step_write = _write("c1", _allocation())
    assumed = cache.assume_claim("default/c1", lambda c: dataclasses.replace(c, allocation=step_write.allocation,
                                                                             reserved_for=(step_write.consumer,)),
                                 lambda c: any(r.uid == POD_UID for r in c.reserved_for))
    assert assumed is not None
    cache.observe(RC, "MODIFIED", _raw_claim(11, finalizers=(DELETE_PROTECTION,)))
    shown = cache.devices.claims["default/c1"]
    assert shown.allocation == step_write.allocation and shown.finalizers == (DELETE_PROTECTION,)
    assert cache.claim("default/c1") is not None and cache.claim("default/c1").allocation is None  # type: ignore[union-attr]
    cache.observe(RC, "MODIFIED", _raw_claim(12, allocated=True, finalizers=(DELETE_PROTECTION,)))
    assert not cache._claim_assumptions and cache.devices.claims["default/c1"].allocation is not None
    assert cache.devices.claims["default/c1"].allocation != step_write.allocation  # the written one, as read
    cache.forget_claim(assumed)  # too late to undo: nothing changes
    assert cache.devices.claims["default/c1"].allocation is not None


async def test_unreserve_before_the_watch_brought_the_write_still_deallocates() -> None:
    """Found live: the bind refused before the watch brought the claim as written, the undo was made
    against the version the cache held (older than our own writes), refused as a conflict, and left
    the allocation behind. The writes' answers say which version the claim is at."""
    cache = _claims_cache()
    api = FakeClaims(cache, refuse=True, watch=False)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    await binder.run(d, POD_UID)
    claim, _ = api.claims["default/c1"]
    assert claim.allocation is None and claim.reserved_for == () and claim.finalizers == ()


async def test_a_pod_sharing_a_claim_reserves_it_once_the_other_pods_allocation_is_written() -> None:
    """Two pods of one cycle share a claim: the first's binding cycle writes the allocation, the second
    only its reservation, which the API server refuses on a claim not yet allocated. The second waits
    for the first's write, whichever task runs first."""
    cache = _claims_cache()
    cache.observe("Pod", "ADDED", pod("q"))
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "shared", uid="uid-s"))
    order: list[str] = []
    original = api.patch_claim

    async def recorded(claim_key: str, body: dict[str, Any], what: str, status: bool = False) -> dict[str, Any]:
        if status and not api.claims[claim_key][0].allocation and "allocation" not in body["status"]:
            raise AssertionError("reservedFor may not be specified when allocated is not set")
        order.append(f"{body['status']['reservedFor'][0]['name']}: {what}" if status else what)
        return await original(claim_key, body, what, status)

    api.patch_claim = recorded  # type: ignore[method-assign]
    binder, first = _reserved(cache, api, _write("shared", _allocation()))
    second = _sharer(binder)
    await asyncio.gather(binder.run(second, "uid-q"), binder.run(first, POD_UID))  # the second one first
    assert order == ["finalizer", "p: allocation and reservation", "q: allocation and reservation"]
    assert {c.uid for c in api.claims["default/shared"][0].reserved_for} == {POD_UID, "uid-q"}
    assert not binder.allocating


async def test_a_pod_sharing_an_allocation_never_written_gives_up_without_writing() -> None:
    cache = _claims_cache()
    cache.observe("Pod", "ADDED", pod("q"))
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "shared", uid="uid-s"))
    api.fail[("default/shared", "allocation and reservation")] = OSError("connection refused")
    binder, first = _reserved(cache, api, _write("shared", _allocation()))
    second = _sharer(binder)
    await asyncio.gather(binder.run(second, "uid-q"), binder.run(first, POD_UID))
    assert [w for _, w, _ in api.patches] == ["finalizer", "allocation and reservation", "finalizer"]
    assert "was not written" in api.conditions["default/q"]
    assert "bind" not in [c[0] for c in api.calls]


async def test_a_podgroups_reservation_stays_when_one_members_bind_fails() -> None:
    """kube-scheduler's Unreserve leaves a claim reserved for the PodGroup: its other members use it."""
    cache = _claims_cache()
    api = FakeClaims(cache, refuse=True)
    group = Consumer("podgroups", "g", "uid-g", "scheduling.k8s.io")
    api.put(ResourceClaim("default", "g-gpu", uid="uid-c"))
    d = Bind("default/p", "a", devices=DeviceBinding("a", (ClaimWrite("default/g-gpu", group, _allocation()),)))
    binder = _reserve(cache, api, d)
    await binder.run(d, POD_UID)
    claim, _ = api.claims["default/g-gpu"]
    assert claim.reserved_for == (group,) and claim.allocation is not None
    assert [w for _, w, _ in api.patches] == ["finalizer", "allocation and reservation"]


async def test_an_allocation_refused_as_a_conflict_is_written_against_the_claim_as_the_watch_brings_it() -> None:
    """The claim changed (not allocated) since the cache saw it: the write is refused as a conflict and
    made again against the version the watch brings, with no GET (the chart grants list and watch)."""
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1", finalizers=(DELETE_PROTECTION,)))
    claim, rv = api.claims["default/c1"]
    api.claims["default/c1"] = (dataclasses.replace(claim, annotations={"touched": "yes"}), rv + 5)
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    await binder.run(d, POD_UID)
    versions = [body["metadata"].get("resourceVersion") for _, _, body in api.patches]
    assert versions == ["10", "15"]
    assert api.claims["default/c1"][0].allocation is not None
    assert [c[0] for c in api.calls][-2:] == ["bind", "bound"]


async def test_a_pod_deleted_while_its_devices_attach_unreserves(monkeypatch: pytest.MonkeyPatch) -> None:
    cache, api, task = await _attaching_bind(monkeypatch)
    cache.observe("Pod", "DELETED", pod("p"))
    await asyncio.wait_for(task, 2.0)
    assert "bind" not in [c[0] for c in api.calls]
    assert api.claims["default/c1"][0].allocation is None and api.claims["default/c1"][0].reserved_for == ()


async def test_a_claim_allocated_before_waits_for_its_binding_conditions_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """A restart finds its predecessor's allocation written and the device not ready yet: the bind still
    waits for the conditions (kube-scheduler checks every claim of the pod, not only those it allocated)."""
    monkeypatch.setattr(binding_module, "PREBIND_POLL", 0.01)
    cache = _claims_cache()
    api = FakeClaims(cache)
    alloc = dataclasses.replace(_allocation(_result(binding_conditions=("Attached",),
                                                    binding_failure_conditions=("Failed",))), timestamp=None)
    api.put(ResourceClaim("default", "c1", uid="uid-c1", allocation=alloc, finalizers=(DELETE_PROTECTION,),
                          reserved_for=(Consumer("pods", "p", POD_UID),)))
    binder, d = _reserved(cache, api, _write("c1"))
    task = asyncio.ensure_future(binder.run(d, POD_UID))
    await asyncio.sleep(0.1)
    assert "bind" not in [c[0] for c in api.calls]
    claim, rv = api.claims["default/c1"]
    api.put(dataclasses.replace(claim, device_conditions=(_condition("Attached"),)), rv + 1)
    await asyncio.wait_for(task, 2.0)
    assert [c[0] for c in api.calls][-2:] == ["bind", "bound"]


def test_a_claim_assumption_the_watch_never_confirms_ends_assume_ttl_after_the_write() -> None:
    cache = _claims_cache()
    cache.observe(RC, "ADDED", _raw_claim(10))
    allocation = _allocation()
    assumed = cache.assume_claim("default/c1", lambda c: dataclasses.replace(c, allocation=allocation),
                                 lambda c: c.allocation is not None)
    assert assumed is not None
    cache.snapshot(NAMES)
    assert cache.devices.claims["default/c1"].allocation == allocation  # in flight: no TTL yet
    cache.claim_written(assumed)
    assumed.since -= ASSUME_TTL + 1  # written long ago, and the watch never brought it
    snap = cache.snapshot(NAMES)
    assert snap.devices.claims["default/c1"].allocation is None and not cache._claim_assumptions


# -- the claim of DRA-backed extended resources ----------------------------------------------------

class FakeCreating(FakeClaims):
    """FakeClaims that also creates claims (named from generateName), deletes them and patches a pod's
    extendedResourceClaimStatus."""

    async def create_claim(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        name = body["metadata"]["generateName"] + "x7k2q"
        self.calls.append(("create_claim", f"{namespace}/{name}", body))
        owner = body["metadata"]["ownerReferences"][0]
        self.put(ResourceClaim(namespace, name, uid="uid-made", owner=(owner["kind"], owner["name"], owner["uid"]),
                               annotations=body["metadata"]["annotations"]))
        return {"metadata": {"name": name, "uid": "uid-made", "resourceVersion": "10"}}

    async def delete_claim(self, claim_key: str, uid: str) -> None:
        self.calls.append(("delete_claim", claim_key, uid))
        self.claims.pop(claim_key, None)

    async def extended_claim_status(self, pod_key: str, uid: str, status: dict[str, Any]) -> None:
        self.calls.append(("extended_claim_status", pod_key, status))


def _extended() -> Bind:
    from koordpy.api.dra import ClaimSpec, DeviceRequest, ExactRequest
    from koordpy.core.decisions import ExtendedClaim
    spec = ClaimSpec(requests=(DeviceRequest("container-0-request-0", ExactRequest("gpu.example.com", count=2)),))
    alloc = _allocation(*(DeviceResult("container-0-request-0", "gpu.example.com", "node-a", f"gpu-{i}")
                          for i in range(2)))
    ext = ExtendedClaim("default", "p-extended-resources-", "p", POD_UID, spec, alloc, Consumer("pods", "p", POD_UID),
                        (("c", "example.com/gpu", "container-0-request-0"),))
    return Bind("default/p", "a", devices=DeviceBinding("a", (), ext))


async def test_the_extended_resources_claim_is_created_allocated_and_named_in_the_pods_status() -> None:
    cache = _claims_cache()
    api = FakeCreating(cache, watch=False)
    d = _extended()
    binder = _reserve(cache, api, d)
    # Shown at once under its generateName: the next cycle sees its devices taken.
    assert _shown(cache, "default/p-extended-resources-").allocation is not None
    await binder.run(d, POD_UID)
    names = [c[0] for c in api.calls]
    assert names == ["create_claim", "patch_claim", "patch_claim", "extended_claim_status", "bind", "bound"]
    created = api.calls[0][2]
    assert created["metadata"]["generateName"] == "p-extended-resources-"
    assert created["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": POD_UID, "controller": True}]
    assert created["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert created["spec"] == {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
        "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2}}]}}
    assert [w for _, w, _ in api.patches] == ["finalizer", "allocation and reservation"]
    claim, _ = api.claims["default/p-extended-resources-x7k2q"]
    assert claim.allocation is not None and [c.uid for c in claim.reserved_for] == [POD_UID]
    assert api.calls[3][2] == {"requestMappings": [{"containerName": "c", "resourceName": "example.com/gpu",
                                                    "requestName": "container-0-request-0"}],
                               "resourceClaimName": "p-extended-resources-x7k2q"}
    # Until the watch brings the created claim allocated, the provisional one holds the devices.
    assert "default/p-extended-resources-" in cache.stores[CLAIMS]
    _file(cache, claim, 12)
    assert "default/p-extended-resources-" not in cache.stores[CLAIMS]


async def test_a_bind_refused_deletes_the_extended_resources_claim_we_created() -> None:
    cache = _claims_cache()
    api = FakeCreating(cache, refuse=True)
    d = _extended()
    binder = _reserve(cache, api, d)
    await binder.run(d, POD_UID)
    assert ("delete_claim", "default/p-extended-resources-x7k2q", "uid-made") in api.calls
    assert "default/p-extended-resources-x7k2q" not in api.claims
    assert "default/p-extended-resources-" not in cache.stores[CLAIMS] and "default/p" not in cache.assumed


def _end(cache: Cache, placed: dict[str, Any], change: str) -> None:
    """The watch brings pod ``placed`` Failed (``change`` "failed") or being deleted ("deleting")."""
    ended = {**placed, "metadata": {**placed["metadata"], "resourceVersion": "9"}}
    if change == "failed":
        ended["status"] = {"phase": "Failed", "reason": "UnschedulableOnAssignedNode"}
    else:
        ended["metadata"]["deletionTimestamp"] = "2026-11-28T00:00:00Z"
    cache.observe("Pod", "MODIFIED", ended)


@pytest.mark.parametrize("change", ["failed", "deleting"])
async def test_a_pod_that_ended_since_it_was_placed_is_not_bound(change: str) -> None:
    # Kueue marks a pending pod Failed when the node it assigned fails, and a suspended Job's pods are
    # deleted: the binding subresource checks no phase, so the bind must not go out.
    cache, writer = Cache(), FakeWriter()
    cache.observe("Node", "ADDED", node("a"))
    placed = pod("p", cpu="1")
    cache.observe("Pod", "ADDED", placed)
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a")
    binder.reserve(d)
    _end(cache, placed, change)
    await binder.run(d, "uid-p")
    assert [c[0] for c in writer.calls] == []
    assert "default/p" not in cache.assumed and "default/p" not in writer.conditions


@pytest.mark.parametrize("change", ["failed", "deleting"])
async def test_no_claim_is_reserved_for_a_pod_that_ended_since_it_was_placed(change: str) -> None:
    # The same pod with a claim to allocate: its pre-bind steps would reserve the claim for a pod no
    # kubelet will run (and protect it with a finalizer) before the bind is dropped.
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    assert _shown(cache, "default/c1").allocation is not None  # assumed at once
    _end(cache, pod("p"), change)
    await binder.run(d, POD_UID)
    assert api.calls == [] and api.patches == []
    claim, _ = api.claims["default/c1"]
    assert claim.allocation is None and claim.reserved_for == () and claim.finalizers == ()
    shown = _shown(cache, "default/c1")
    assert shown.allocation is None and shown.reserved_for == ()  # the assumption undone
    assert "default/p" not in cache.assumed and "default/p" not in api.conditions


@pytest.mark.parametrize("change", ["failed", "deleting"])
async def test_no_volume_is_bound_for_a_pod_that_ended_since_it_was_placed(change: str) -> None:
    from tests.core.test_volumes import using

    cache, writer = one_pv_cache("p", "data"), FakeWriter()
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)))
    binder.reserve(d)
    assert cache.storage.volumes["only"].claim_ref is not None  # assumed at once
    _end(cache, using("p", "data"), change)
    await binder.run(d, "uid-p")
    assert writer.calls == []
    assert cache.storage.volumes["only"].claim_ref is None and "default/p" not in cache.assumed
    assert "default/p" not in writer.conditions
