"""InUse: what claims hold, with undoable add and remove."""

from __future__ import annotations

from fractions import Fraction

from koordpy.api.dra import Allocation
from koordpy.devices.state import InUse
from tests.devices.helpers import claim, q, result

PLAIN = Allocation(results=(result("r", "d0"), result("r", "d1")))
ADMIN = Allocation(results=(result("r", "d2", admin_access=True),))


def share(sid: str, amount: int) -> Allocation:
    return Allocation(results=(result("r", "s0", share_id=sid, consumed_capacity={"c": q(amount)}),))


def test_from_claims_takes_allocated_devices_and_skips_admin_access() -> None:
    held = InUse.from_claims([claim("a", allocation=PLAIN), claim("b", allocation=ADMIN), claim("c")])
    assert held.exclusive("driver-a/pool-1/d0") and held.exclusive("driver-a/pool-1/d1")
    assert not held.allocated("driver-a/pool-1/d2")
    assert held.allocated_ids() == {"driver-a/pool-1/d0", "driver-a/pool-1/d1"}


def test_add_and_remove_return_their_undo() -> None:
    held = InUse()
    v0 = held.version
    undo = held.add(PLAIN)
    assert held.exclusive("driver-a/pool-1/d0") and held.version > v0
    undo()
    assert held.allocated_ids() == set()
    held.add(PLAIN)
    back = held.remove(PLAIN)
    assert not held.allocated("driver-a/pool-1/d0")
    back()
    assert held.exclusive("driver-a/pool-1/d0")


def test_a_device_held_twice_stays_held_until_both_are_gone() -> None:
    held = InUse()
    held.add(PLAIN)
    held.add(PLAIN)  # a conflict the allocator never makes, but a cluster may show
    held.remove(PLAIN)
    assert held.exclusive("driver-a/pool-1/d0")
    held.remove(PLAIN)
    assert not held.allocated("driver-a/pool-1/d0")


def test_shares_sum_their_capacity_and_leave_no_trace_when_gone() -> None:
    held = InUse()
    held.add(share("x", 1))
    undo = held.add(share("y", 2))
    assert held.shared("driver-a/pool-1/s0") and not held.exclusive("driver-a/pool-1/s0")
    assert held.consumed("driver-a/pool-1/s0") == {"c": Fraction(3)}
    undo()
    assert held.consumed("driver-a/pool-1/s0") == {"c": Fraction(1)}
    held.remove(share("x", 1))
    assert not held.allocated("driver-a/pool-1/s0") and held.consumed("driver-a/pool-1/s0") is None


def test_copy_is_independent() -> None:
    held = InUse.from_claims([claim("a", allocation=PLAIN)])
    other = held.copy()
    other.remove(PLAIN)
    assert held.exclusive("driver-a/pool-1/d0") and not other.allocated("driver-a/pool-1/d0")


def test_changed_since_names_the_devices_each_change_touched_while_the_log_holds_them() -> None:
    from koordpy.devices import state

    held = InUse.from_claims([claim("a", allocation=PLAIN)])
    v0 = held.version
    assert held.changed_since(v0) is None  # not tracked: nothing kept (most cycles never ask)
    held.track()
    assert held.changed_since(v0) == set()  # kept from then on
    assert held.changed_since(v0 - 1) is None  # before the log began
    undo = held.add(ADMIN)
    assert held.changed_since(v0) == set()  # an admin-access result takes no device
    undo()
    held.remove(PLAIN)
    assert held.changed_since(v0) == {"driver-a/pool-1/d0", "driver-a/pool-1/d1"}
    for _ in range(state._LOG_MAX + 1):
        held.add(ADMIN)
    assert held.changed_since(v0) is None and held.changed_since(held.version) == set()
