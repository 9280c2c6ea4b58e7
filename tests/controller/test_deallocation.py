"""The live side of DynamicResources' PostFilter (``koordpy.controller.deallocation``): the claim shown
deallocated at once, the status patch conditional on the claim as seen, the assumption forgotten when
the write does not go through; and the loop's ``match`` carrying a ``Deallocate`` out."""

from __future__ import annotations

import dataclasses
from typing import Any

from koordpy.api.dra import DELETE_PROTECTION, Consumer, ResourceClaim
from koordpy.controller import claimwrites
from koordpy.controller.cache import Cache
from koordpy.controller.deallocation import Deallocation
from koordpy.controller.loop import SchedulerLoop
from koordpy.controller.writer import Conflict
from koordpy.core.decisions import Deallocate
from tests.controller.test_binding import NAMES, FakeClaims, _allocation, _claims_cache, _shown

KEY = "default/c1"


class Api(FakeClaims):
    """FakeClaims that also takes a ``null`` reservedFor (the field cleared, as a strategic merge patch does)."""

    spawned: list[Any]

    def spawn(self, coro: Any) -> None:
        self.spawned = [*getattr(self, "spawned", []), coro]

    async def patch_claim(self, claim_key: str, body: dict[str, Any], what: str,
                          status: bool = False) -> dict[str, Any]:
        st = body.get("status", {})
        if st.get("reservedFor", ()) is not None:
            return await super().patch_claim(claim_key, body, what, status)
        sent = {**body, "status": {k: v for k, v in st.items() if k != "reservedFor"}}
        try:
            return await super().patch_claim(claim_key, sent, what, status)
        finally:
            self.patches[-1] = (claim_key, what, body)  # as sent
            claim, rv = self.claims[claim_key]
            if claim.allocation is None:  # the write landed: the reservations went with it
                self.claims[claim_key] = (dataclasses.replace(claim, reserved_for=()), rv)


def _stale(*reserved: Consumer) -> ResourceClaim:
    return ResourceClaim("default", "c1", uid="uid-c1", allocation=_allocation(), reserved_for=reserved,
                         finalizers=(DELETE_PROTECTION,))


def _setup(*reserved: Consumer, watch: bool = True) -> tuple[Cache, Api]:
    cache = _claims_cache()
    api = Api(cache, watch=watch)
    api.put(_stale(*reserved))
    return cache, api


async def test_a_deallocation_is_shown_at_once_and_written_against_the_claim_as_seen() -> None:
    cache, api = _setup(Consumer("pods", "p", "uid-p"), watch=False)
    giving_up = Deallocation(cache, api, Deallocate(KEY, "uid-c1", "default/p"))  # type: ignore[arg-type]
    assert giving_up.assume()
    assert _shown(cache, KEY).allocation is None and _shown(cache, KEY).reserved_for == ()
    await giving_up.write()
    [(_, what, body)] = api.patches
    assert what == "deallocation" and body == claimwrites.deallocate("uid-c1", "10")
    assert body["status"] == {"allocation": None, "reservedFor": None, "devices": None}
    claim, _ = api.claims[KEY]
    assert claim.allocation is None and claim.reserved_for == () and claim.finalizers == (DELETE_PROTECTION,)
    # The watch has not brought it yet: still shown deallocated.
    assert _shown(cache, KEY).allocation is None


async def test_a_deallocation_refused_as_a_conflict_shows_the_claim_as_it_is() -> None:
    cache, api = _setup()
    api.fail[(KEY, "deallocation")] = Conflict("deallocation of ResourceClaim default/c1", "modified")
    giving_up = Deallocation(cache, api, Deallocate(KEY, "uid-c1", "default/p"))  # type: ignore[arg-type]
    assert giving_up.assume()
    await giving_up.write()
    assert _shown(cache, KEY).allocation == _allocation()


def test_a_claim_reserved_meanwhile_for_another_pod_or_made_again_is_not_touched() -> None:
    cache, api = _setup(Consumer("pods", "q", "uid-q"))
    assert not Deallocation(cache, api, Deallocate(KEY, "uid-c1", "default/p")).assume()  # type: ignore[arg-type]
    cache, api = _setup()
    assert not Deallocation(cache, api, Deallocate(KEY, "uid-old", "default/p")).assume()  # type: ignore[arg-type]
    assert _shown(cache, KEY).allocation == _allocation() and api.patches == []


async def test_the_loop_carries_a_deallocate_out() -> None:
    cache, api = _setup()
    loop = SchedulerLoop(cache, api, NAMES)  # type: ignore[arg-type]
    loop._apply(Deallocate(KEY, "uid-c1", "default/p"), lambda key: "", 0.0, {})
    assert _shown(cache, KEY).allocation is None
    [write] = api.spawned
    await write
    assert api.claims[KEY][0].allocation is None


# -- kube-scheduler's PodGroupPostFilter: a Workload PodGroup's claim --------------------------------------

GROUP = Consumer("podgroups", "train", "uid-train", "scheduling.k8s.io")


async def test_a_claim_reserved_for_the_group_alone_is_deallocated_for_the_group() -> None:
    cache, api = _setup(GROUP, watch=False)
    assert not Deallocation(cache, api, Deallocate(KEY, "uid-c1", "default/t-0")).assume()  # type: ignore[arg-type]
    giving_up = Deallocation(cache, api, Deallocate(KEY, "uid-c1", "default/t-0", group=GROUP))  # type: ignore[arg-type]
    assert giving_up.assume()
    assert _shown(cache, KEY).allocation is None
    await giving_up.write()
    [(_, what, body)] = api.patches
    assert what == "deallocation" and body == claimwrites.deallocate("uid-c1", "10")


async def test_the_groups_reservation_alone_is_dropped_by_its_uid_and_the_allocation_kept() -> None:
    cache, api = _setup(GROUP, Consumer("pods", "other", "uid-other"), watch=False)
    dropping = Deallocation(cache, api, Deallocate(KEY, "uid-c1", "default/t-0", group=GROUP,  # type: ignore[arg-type]
                                                   unreserve=True))
    assert dropping.assume()
    assert _shown(cache, KEY).reserved_for == (Consumer("pods", "other", "uid-other"),)
    assert _shown(cache, KEY).allocation == _allocation()
    await dropping.write()
    [(_, what, body)] = api.patches
    assert what == "unreservation" and body == claimwrites.unreserve("uid-c1", "uid-train", False)
    claim, _ = api.claims[KEY]
    assert claim.reserved_for == (Consumer("pods", "other", "uid-other"),) and claim.allocation == _allocation()
