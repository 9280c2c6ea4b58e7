"""Issue 31 item 3, from its review at the devices level: the counts' taken array against the allocator's own view
of which devices are free."""

from __future__ import annotations

from koordpy.api.dra import Allocation
from koordpy.devices.counts import Counts, plain
from koordpy.devices.reasons import Unallocatable
from tests.devices.helpers import World, claim, dev, node, req, result, slice_


def test_a_device_held_by_a_share_only_is_free_for_the_allocator_and_for_the_counts() -> None:
    """A device that does not allow multiple allocations (now), held by an allocation with a shareID
    (made while it did): kube-scheduler's deviceInUse looks at AllocatedDevices only (a result with
    a shareID goes to AllocatedSharedDeviceIDs), koordpy's search at ``InUse.exclusive``; the counts'
    taken array at ``InUse.allocated`` counts it taken."""
    held = claim("held", allocation=Allocation(results=(result("r", "d0", share_id="s-1"),)))
    w = World([slice_("s", [dev("d0"), dev("d1")])], allocated=[held])
    want = [claim("c", req("r", count=2))]
    got = w.allocate(want)
    assert not isinstance(got, Unallocatable), got  # the allocator takes d0 and d1
    kind = plain(want, dict(w.devices.classes))
    assert kind is not None
    fits = Counts(w.allocator).fit(kind, [node()])
    assert fits is not None
    assert bool(fits[1][0]) or int(fits[0][0]) == 1  # left to the allocator, or counted as it counts

