"""Issue 31 item 3, from its review: the allocator's first fit against its search (and kube-scheduler's)."""

from __future__ import annotations

from koordpy.api.dra import Allocation, Capacity
from koordpy.devices.reasons import Unallocatable
from tests.devices.helpers import World, claim, dev, q, req, result, slice_


def test_first_fit_skips_a_device_whose_capacity_a_share_consumes() -> None:
    """A device with capacity (no policy) that does not allow multiple allocations now, with a share
    holding part of its capacity (made while it did): the search's capacity_ok counts what the share
    consumes (kube-scheduler's CmpRequestOverCapacity adds the aggregated capacity) and skips it;
    the first fit takes it."""
    cap = {"mem": Capacity(q(4))}
    held = claim("held", allocation=Allocation(results=(
        result("r", "d0", share_id="s-1", consumed_capacity={"mem": q(2)}),)))
    w = World([slice_("s", [dev("d0", capacity=cap), dev("d1", capacity=cap)])], allocated=[held])
    want = [claim("c", req("r", count=1))]
    first = w.allocate(want)
    w.allocator._first_fit = lambda *args: None  # type: ignore[method-assign]
    search = w.allocate(want)
    assert not isinstance(search, Unallocatable), search
    assert [r.device for r in search[0].results] == ["d1"]
    assert not isinstance(first, Unallocatable), first
    assert [r.device for r in first[0].results] == ["d1"]
