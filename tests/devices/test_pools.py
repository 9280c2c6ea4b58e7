"""Pools: the per-node view and the CEL verdict cache kept across builds."""

from __future__ import annotations

from koordpy.api.dra import Devices
from koordpy.devices.pools import Pools
from tests.devices.helpers import NODE2, dev, node, slice_


def test_verdicts_are_kept_for_unchanged_slices_only() -> None:
    s1 = slice_("slice-1", [dev("device-1")])
    s2 = slice_("slice-2", [dev("device-1")], pool="pool-2")
    first = Pools.build(Devices(slices={"slice-1": s1, "slice-2": s2}))
    for sl in (s1, s2):
        for e in first.entries(sl):
            assert e.selected('device.driver == "driver-a"')
    s2b = slice_("slice-2", [dev("device-1")], pool="pool-2")  # equal, but a new object: a new slice
    second = Pools.build(Devices(slices={"slice-1": s1, "slice-2": s2b}), previous=first)
    assert second.entries(s1)[0].verdicts == {'device.driver == "driver-a"': True}
    assert second.entries(s2b)[0].verdicts == {}


def test_node_view_is_cached_per_node_object() -> None:
    pools = Pools.build(Devices(slices={"s": slice_("s", [dev("device-1")])}))
    n = node()
    assert pools.for_node(n) is pools.for_node(n)
    assert [v.key for v in pools.for_node(n)] == ["driver-a/pool-1"]
    assert pools.for_node(node(NODE2)) == ()


def test_pools_with_binding_conditions_come_last() -> None:
    pools = Pools.build(Devices(slices={
        "a": slice_("a", [dev("device-1", binding=["ready"])], pool="pool-a"),
        "b": slice_("b", [dev("device-1")], pool="pool-b")}))
    assert [v.pool for v in pools.for_node(node())] == ["pool-b", "pool-a"]


def test_candidates_outlive_an_allocator_and_name_each_claim_in_errors() -> None:
    import pytest

    from koordpy.devices.allocator import Allocator
    from koordpy.devices.reasons import DeviceError
    from koordpy.devices.state import InUse
    from tests.devices.helpers import claim, cls, req, slice_

    broken = 'device.attributes["driver-a"].missing == 1'
    devices = Devices(classes={"class-a": cls()}, slices={"s": slice_("s", [dev("device-1"), dev("device-2")])})
    pools = Pools.build(devices)
    here = node()
    first = Allocator(pools, devices.classes, InUse())
    first.allocate(here, [claim("claim-0")], 0.0)
    (cached,) = pools.candidates.values()
    # The claims change with every bind; a new allocator over the same pools reuses the candidates.
    second = Allocator(pools, devices.classes, InUse())
    second.allocate(here, [claim("claim-1")], 0.0)
    assert next(iter(pools.candidates.values()))[1] is cached[1]
    for name in ("claim-a", "claim-b"):
        with pytest.raises(DeviceError, match=f"claim default/{name}: selector #0 on device driver-a/pool-1/device-1"):
            second.allocate(here, [claim(name, req(selectors=[broken]))], 0.0)
