"""Review of the live claims step (issue 30): a device never shown free while the API server holds it,
no write that changes nothing, a claim recreated under its name, a restart's allocation whose devices
failed, and the API server's refusals in its own words. The fakes are ``test_binding``'s."""

from __future__ import annotations

import asyncio
import dataclasses
from functools import partial
from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.dra import DELETE_PROTECTION, Consumer, ResourceClaim
from koordpy.controller import binding as binding_module
from koordpy.controller.binding import Binder
from koordpy.controller.cache import Cache
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.writer import ApiWriter, ClaimRefused, Conflict
from koordpy.core.decisions import Bind, ClaimWrite, DeviceBinding, VolumeBinding
from tests.builders import node, pod
from tests.controller.test_binding import (
    POD_UID,
    FakeClaims,
    _allocation,
    _attaching,
    _claims_cache,
    _condition,
    _file,
    _reserved,
    _result,
    _shown,
    _write,
)
from tests.controller.test_cycle_cap_loop import NAMES, _rv

ME = Consumer("pods", "p", POD_UID)


async def test_a_deallocation_that_fails_leaves_the_claim_shown_allocated() -> None:
    """The bind refused, unreserve showed the claim deallocated at once and kept showing it so for
    ASSUME_TTL though its write failed: the API server still held the devices for the claim, and the
    next cycle could give them to another claim (a device handed out twice)."""
    cache = _claims_cache()
    api = FakeClaims(cache, refuse=True)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    api.fail[("default/c1", "reservation")] = OSError("connection refused")
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    await binder.run(d, POD_UID)
    assert api.claims["default/c1"][0].allocation is not None  # the undo did not get through
    assert _shown(cache, "default/c1").allocation is not None


async def test_a_deallocation_refused_because_another_pod_reserved_the_claim_keeps_it_allocated() -> None:
    """The claim got a second consumer between our write and our unreserve: the conditional deallocation
    is refused, only our reservation goes, and the claim must not be shown deallocated meanwhile (the
    watch brings it allocated, which the deallocation's assumption never accepted: it stayed for 60 s)."""
    cache = _claims_cache()
    api = FakeClaims(cache, refuse=True)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    other = Consumer("pods", "q", "uid-q")
    original = api.patch_claim

    async def racing(claim_key: str, body: dict[str, Any], what: str, status: bool = False) -> dict[str, Any]:
        if what == "reservation" and body["status"].get("allocation", 0) is None:
            claim, rv = api.claims[claim_key]  # q's reservation lands first
            api.claims[claim_key] = (dataclasses.replace(claim, reserved_for=(*claim.reserved_for, other)), rv + 1)
        return await original(claim_key, body, what, status)

    api.patch_claim = racing  # type: ignore[method-assign]
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    await binder.run(d, POD_UID)
    claim, _ = api.claims["default/c1"]
    assert claim.allocation is not None and claim.reserved_for == (other,)
    assert _shown(cache, "default/c1").allocation is not None


async def test_a_podgroup_claim_another_member_reserved_is_not_written_again() -> None:
    """kube-scheduler's PreBind skips a claim reserved for the pod or its PodGroup already; each member
    of a gang sharing a PodGroup claim patched the same reservedFor entry again (N-1 writes that change
    nothing on a shared API server)."""
    cache = _claims_cache()
    api = FakeClaims(cache)
    group = Consumer("podgroups", "g", "uid-g", "scheduling.k8s.io")
    api.put(ResourceClaim("default", "g-gpu", uid="uid-c", allocation=_allocation(), reserved_for=(group,),
                          finalizers=(DELETE_PROTECTION,)))
    binder = Binder(cache, api)  # type: ignore[arg-type]
    d = Bind("default/p", "a", devices=DeviceBinding("a", (ClaimWrite("default/g-gpu", group),)))
    binder.reserve(d)
    await binder.run(d, POD_UID)
    assert api.patches == []
    assert [c[0] for c in api.calls][-2:] == ["bind", "bound"]


async def test_a_claim_reserved_for_the_pod_before_a_restart_is_not_written_again() -> None:
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1", allocation=_allocation(), reserved_for=(ME,),
                          finalizers=(DELETE_PROTECTION,)))
    binder, d = _reserved(cache, api, _write("c1"))
    await binder.run(d, POD_UID)
    assert api.patches == [] and [c[0] for c in api.calls][-2:] == ["bind", "bound"]


async def test_a_reservation_being_taken_back_is_written_again() -> None:
    """The skip trusts the watch only when no other write is in flight on the claim: an unreserve whose
    removal the watch has not brought yet must not leave the pod bound on a claim not reserved for it."""
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1", allocation=_allocation(), reserved_for=(ME,),
                          finalizers=(DELETE_PROTECTION,)))
    cache.assume_claim("default/c1", partial(binding_module._without, POD_UID, False),
                       partial(binding_module._unreserved, POD_UID, False))
    binder, d = _reserved(cache, api, _write("c1"))
    await binder.run(d, POD_UID)
    assert [w for _, w, _ in api.patches] == ["allocation and reservation"]


class StrictUids(FakeClaims):
    """The API server's uid precondition: a body naming another uid than the claim's is a conflict."""

    async def patch_claim(self, claim_key: str, body: dict[str, Any], what: str,
                          status: bool = False) -> dict[str, Any]:
        claim, rv = self.claims[claim_key]
        uid = body.get("metadata", {}).get("uid")
        if uid and uid != claim.uid:
            self.patches.append((claim_key, what, body))
            _file(self.cache, claim, rv)  # the watch brings the claim as it is now
            raise Conflict(f"{what} of ResourceClaim {claim_key}", "Precondition failed: UID in precondition")
        return await super().patch_claim(claim_key, body, what, status)


async def test_a_claim_recreated_under_its_name_fails_at_once_saying_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deleted and created again while the allocation was in flight: the conflict retries wrote against
    the new claim's version with the old claim's uid, were refused again and again, and the pod waited
    out CONFLICT_WAIT to read 'the watch did not bring it'."""
    monkeypatch.setattr(binding_module, "CONFLICT_WAIT", 0.2)
    cache = _claims_cache()
    api = StrictUids(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-old", finalizers=(DELETE_PROTECTION,)))
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    api.claims["default/c1"] = (ResourceClaim("default", "c1", uid="uid-new"), 20)  # our watch is behind
    await binder.run(d, POD_UID)
    assert "got deleted in the meantime" in api.conditions["default/p"]
    assert [w for _, w, _ in api.patches] == ["allocation and reservation"]
    assert api.claims["default/c1"][0].allocation is None and "bind" not in [c[0] for c in api.calls]


def _failed_for(consumer: Consumer) -> ResourceClaim:
    """Claim c1 allocated before a restart and reserved for ``consumer``; its device's binding failure
    condition is True."""
    return ResourceClaim("default", "c1", uid="uid-c1", allocation=_attaching(), reserved_for=(consumer,),
                         finalizers=(DELETE_PROTECTION,), device_conditions=(_condition("Failed"),))


async def test_a_restarts_allocation_whose_device_failed_is_deallocated(monkeypatch: pytest.MonkeyPatch) -> None:
    """A predecessor allocated the claim and reserved it for the pod; the device's binding failure
    condition is True. kube-scheduler finds the claim unavailable and deallocates it (PostFilter, the
    pod its only consumer); unreserve kept the allocation, and every later attempt failed on it again."""
    monkeypatch.setattr(binding_module, "PREBIND_POLL", 0.01)
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(_failed_for(ME))
    binder, d = _reserved(cache, api, _write("c1"))
    await asyncio.wait_for(binder.run(d, POD_UID), 2.0)
    assert "binding failure condition Failed" in api.conditions["default/p"]
    claim, _ = api.claims["default/c1"]
    assert claim.allocation is None and claim.reserved_for == () and claim.finalizers == ()


async def test_a_failed_device_another_pod_holds_stays_allocated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding_module, "PREBIND_POLL", 0.01)
    cache = _claims_cache()
    api = FakeClaims(cache)
    other = Consumer("pods", "q", "uid-q")
    api.put(_failed_for(other))
    binder, d = _reserved(cache, api, _write("c1"))
    await asyncio.wait_for(binder.run(d, POD_UID), 2.0)
    claim, _ = api.claims["default/c1"]
    assert claim.allocation is not None and claim.reserved_for == (other,)


class Refusing:
    """The custom-objects client of an API server that refuses every claim write with ``status``."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status, self.body = status, body

    async def patch_namespaced_custom_object_status(self, *args: Any, **kwargs: Any) -> Any:
        exc = ApiException(status=self.status, reason="Forbidden" if self.status == 403 else "Invalid")
        exc.body = self.body
        raise exc


@pytest.mark.parametrize("status, said", [
    (403, 'resourceclaims.resource.k8s.io "c1" is forbidden: User "system:serviceaccount:k:koordpy" cannot '
          'patch resource "resourceclaims/binding"'),
    (422, 'ResourceClaim.resource.k8s.io "c1" is invalid: status.reservedFor: Forbidden: may not be '
          'specified when `allocated` is not set')])
async def test_a_claim_write_the_api_server_refuses_says_why_in_its_words(status: int, said: str) -> None:
    """The pod's condition quoted the client's dump of the response ('(403)\\nReason: ...\\nHTTP
    response body: b'{...}''), not the API server's message."""
    writer = ApiWriter(api=object())
    body = ('{"kind": "Status", "status": "Failure", "message": ' + __import__("json").dumps(said) + "}").encode()
    writer.custom = Refusing(status, body)
    with pytest.raises(ClaimRefused) as refused:
        await writer.patch_claim("default/c1", {"status": {}}, "allocation and reservation", status=True)
    assert str(refused.value) == f"allocation and reservation of ResourceClaim default/c1: {said} ({status})"
    assert "\n" not in str(refused.value)


async def test_a_restarts_allocation_whose_binding_timed_out_is_deallocated(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same for a device whose binding conditions were not met within the timeout, counted from the
    allocation's timestamp (kube-scheduler's isClaimTimeout)."""
    monkeypatch.setattr(binding_module, "PREBIND_POLL", 0.01)
    cache = _claims_cache()
    api = FakeClaims(cache)
    alloc = dataclasses.replace(_allocation(_result(binding_conditions=("Attached",))), timestamp=1_000_000_000.0)
    api.put(ResourceClaim("default", "c1", uid="uid-c1", allocation=alloc, reserved_for=(ME,),
                          finalizers=(DELETE_PROTECTION,)))
    binder, d = _reserved(cache, api, _write("c1"))
    await asyncio.wait_for(binder.run(d, POD_UID), 2.0)
    assert "not met within" in api.conditions["default/p"]
    claim, _ = api.claims["default/c1"]
    assert claim.allocation is None and claim.reserved_for == ()


async def test_a_pod_whose_claim_write_is_refused_backs_off_before_it_is_tried_again() -> None:
    """A refusal that will not change by itself (a 403 for a missing RBAC rule) failed the binding cycle,
    the pod was pending again in the next snapshot and placed again at once: three writes per cycle on
    the API server for as long as it lasted. kube-scheduler puts the pod in its backoff queue (1 s,
    doubling to 10 s); the snapshots leave it out as long."""
    cache = _claims_cache()
    api = FakeClaims(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    api.fail[("default/c1", "allocation and reservation")] = ClaimRefused("forbidden (403)")
    binder, d = _reserved(cache, api, _write("c1", _allocation()))
    await binder.run(d, POD_UID)
    assert "forbidden (403)" in api.conditions["default/p"]
    assert "default/p" not in [p.key for p in cache.snapshot(NAMES).pods]  # backing off
    first = cache.backing_off["default/p"]
    binder.reserve(d)
    await binder.run(d, POD_UID)
    assert cache.backing_off["default/p"] - first == pytest.approx(1.0, abs=0.5)  # 1 s, then 2 s
    cache.end_back_off("default/p")
    assert "default/p" in [p.key for p in cache.snapshot(NAMES).pods] and cache.changed.is_set()


async def test_the_loop_does_not_try_a_pod_whose_binding_cycle_failed_at_every_cycle() -> None:
    cache = Cache()
    cache.observe("Node", None, _rv(node("n0", cpu="8"), 1))
    cache.observe("Pod", None, _rv(pod("p", cpu="1"), 2))
    writer = ApiWriter(api=object())
    binds: list[str] = []

    async def bind(pod_key: str, uid: str, node_name: str) -> bool:
        binds.append(pod_key)
        raise ClaimRefused("forbidden (403)")

    writer.bind = bind  # type: ignore[method-assign,assignment]
    loop = SchedulerLoop(cache, writer, NAMES)
    for _ in range(20):
        await loop.cycle()
        await asyncio.sleep(0.01)
    assert binds == ["default/p"]
    cache.end_back_off("default/p")
    await loop.cycle()
    await asyncio.sleep(0.01)
    assert binds == ["default/p", "default/p"]


async def test_a_volume_step_that_fails_takes_back_the_claims_steps_assumptions_too() -> None:
    """Reserve lays every step's assumptions; a failure at the volumes (the first step) undid only the
    steps that had run: the claims stayed shown allocated with no TTL (never written, never forgotten),
    their devices lost to every later cycle, and pods sharing the allocation waited PREBIND_TIMEOUT."""
    from tests.core.test_volumes import pv, pvc, sc

    cache = _claims_cache()
    cache.observe("StorageClass", "ADDED", sc("local"))
    cache.observe("PersistentVolume", "ADDED", pv("only", on="a"))
    cache.observe("PersistentVolumeClaim", "ADDED", pvc("data"))

    class VolumeRefused(FakeClaims):
        async def claim_volume(self, pv: str, ns: str, claim: str, claim_uid: str,
                               resource_version: str = "") -> None:
            raise OSError("connection refused")

    api = VolumeRefused(cache)
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    binder = Binder(cache, api)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)),
             DeviceBinding("a", (_write("c1", _allocation()),)))
    binder.reserve(d)
    assert _shown(cache, "default/c1").allocation is not None
    await binder.run(d, POD_UID)
    assert api.patches == []
    assert _shown(cache, "default/c1").allocation is None and not cache.claim_assumptions("default/c1")
    assert not binder.allocating


async def test_a_pod_deleted_while_its_claims_are_written_gets_no_more_of_them() -> None:
    """The pod deleted after its first claim was written: the second was still allocated and reserved
    for it (two writes, and two more to take them back, on the shared API server)."""
    cache = _claims_cache()
    api = FakeClaims(cache, refuse=True)  # the bind of a deleted pod: 404
    api.put(ResourceClaim("default", "c1", uid="uid-c1"))
    api.put(ResourceClaim("default", "c2", uid="uid-c2"))
    original = api.patch_claim

    async def deleting(claim_key: str, body: dict[str, Any], what: str, status: bool = False) -> dict[str, Any]:
        written = await original(claim_key, body, what, status)
        if claim_key == "default/c1" and status:
            cache.observe("Pod", "DELETED", pod("p"))
        return written

    api.patch_claim = deleting  # type: ignore[method-assign]
    binder, d = _reserved(cache, api, _write("c1", _allocation()), _write("c2", _allocation(_result("gpu-1"))))
    await binder.run(d, POD_UID)
    assert "default/c2" not in [k for k, _, _ in api.patches]
    assert all(c.allocation is None and c.reserved_for == () for c, _ in api.claims.values())
