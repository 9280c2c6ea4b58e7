"""The allocator against kube-scheduler v1.37.2's structured allocator: our own translation of the
cases of upstream's table (``structured/internal/allocatortesting``) that apply with v1.37.2's
default feature gates, grouped by feature, each named after the upstream case it follows."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from koordpy.api.dra import (
    Allocation,
    Capacity,
    CapacityPolicy,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceCondition,
    DeviceConstraint,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    NodeSelection,
    OpaqueConfig,
    ResourceClaim,
    ResourceSlice,
    SemVer,
)
from koordpy.devices.reasons import DeviceError, Unallocatable
from tests.devices.helpers import (
    CLASS_B,
    DRIVER_B,
    NODE2,
    World,
    claim,
    cls,
    dev,
    devs,
    exact,
    first_available,
    local,
    node,
    q,
    region_selector,
    req,
    result,
    slice_,
    why,
)

# -- basics ------------------------------------------------------------------------------------


def test_simple() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    (a,) = got
    assert [(r.request, r.driver, r.pool, r.device) for r in a.results] == [("req-0", "driver-a", "pool-1", "device-1")]
    assert a.node_selector == local()
    assert a.timestamp == 1000.0
    assert a.config == ()


def test_other_node() -> None:
    w = World([slice_("slice-1", [dev("device-1")], driver=DRIVER_B),
               slice_("slice-2", [dev("device-1")], node=NODE2, pool="pool-2")])
    got = w.allocate([claim()], node(NODE2, "region-2"))
    assert isinstance(got, list)
    assert got[0].results == (result("req-0", "device-1", pool="pool-2"),)
    assert got[0].node_selector == local(NODE2)


def test_small_and_large_backtrack_requests() -> None:
    # The large device comes first: the small request takes it, the large request finds nothing,
    # and the search undoes the first choice.
    small = 'device.attributes["driver-a"].small == true'
    large = 'device.attributes["driver-a"].large == true'
    w = World([slice_("slice-1", [dev("device-2", {"small": True, "large": True}),
                                  dev("device-1", {"small": True, "large": False})])])
    c = claim("claim-0", req("req-0", selectors=[small]), req("req-1", selectors=[large]))
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1", "device-2")]]


def test_small_and_large_backtrack_claims() -> None:
    small = 'device.attributes["driver-a"].small == true'
    large = 'device.attributes["driver-a"].large == true'
    w = World([slice_("slice-1", [dev("device-2", {"small": True, "large": True}),
                                  dev("device-1", {"small": True, "large": False})])])
    c0 = claim("claim-0", req("req-0", selectors=[small]))
    c1 = claim("claim-1", req("req-1", selectors=[large]))
    assert w.devices_of([c0, c1]) == [[("req-0", "device-1")], [("req-1", "device-2")]]


def test_devices_split_across_different_slices() -> None:
    w = World([slice_("slice-1", [dev("device-1")]), slice_("slice-2", [dev("device-1")], pool="pool-2")])
    got = w.allocate([claim("claim-0", req(count=2))])
    assert isinstance(got, list)
    assert [(r.pool, r.device) for r in got[0].results] == [("pool-1", "device-1"), ("pool-2", "device-1")]


def test_no_slices() -> None:
    assert why(World([]).allocate([claim()])) == "no-device-matches"


def test_not_enough_suitable_devices() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    got = w.allocate([claim("claim-0"), claim("claim-1", req("req-1"))])
    assert why(got) == "all-taken"
    assert isinstance(got, Unallocatable)
    assert (got.claim, got.request, got.detail) == ("default/claim-1", "req-1", "0/1")


def test_several_different_drivers() -> None:
    w = World([slice_("slice-1", devs(2)), slice_("slice-1b", [dev("device-1")], driver=DRIVER_B)],
              classes=[cls(), cls(CLASS_B, DRIVER_B)])
    got = w.allocate([claim("claim-0"), claim("claim-1", req("req-0", CLASS_B))])
    assert isinstance(got, list)
    assert [(r.driver, r.device) for a in got for r in a.results] == [("driver-a", "device-0"),
                                                                      ("driver-b", "device-1")]


def test_already_allocated_devices() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", [dev("device-1")])], allocated=[taken])
    assert why(w.allocate([claim()])) == "all-taken"


def test_no_claims_to_allocate() -> None:
    assert World([slice_("slice-1", [dev("device-1")])]).allocate([]) == []


def test_combinations_not_permutations_in_one_request() -> None:
    # check-combinations-with-backtracking: a constraint that only the last two devices meet; the
    # search tries combinations of the request's devices in order and finds them.
    w = World([slice_("slice-1", [dev("device-0", {"numa": 1}), dev("device-1", {"numa": 2}),
                                  dev("device-2", {"numa": 3}), dev("device-3", {"numa": 3})])])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(match_attribute="driver-a/numa")])
    assert w.devices_of([c]) == [[("req-0", "device-2"), ("req-0", "device-3")]]


# -- classes -------------------------------------------------------------------------------------


def test_unknown_class() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    got = w.allocate([claim("claim-0", req("req-0", "unknown-class"))])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.request, got.detail) == ("class-missing", "req-0", "unknown-class")


def test_no_classes() -> None:
    w = World([slice_("slice-1", [dev("device-1")])], classes=[])
    assert why(w.allocate([claim()])) == "class-missing"


def test_class_selector_and_request_selector_both_apply() -> None:
    w = World([slice_("slice-1", [dev("device-0", {"model": "a"}), dev("device-1", {"model": "b"})]),
               slice_("slice-b", [dev("device-2", {"model": "b"})], driver=DRIVER_B)])
    c = claim("claim-0", req(selectors=['device.attributes["driver-a"].model == "b"']))
    assert w.devices_of([c]) == [[("req-0", "device-1")]]


def test_class_selector_not_matched() -> None:
    w = World([slice_("slice-1", [dev("device-1")], driver=DRIVER_B)])
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.detail) == ("no-device-matches", "0/1")


# -- pools: generations, incomplete, invalid ------------------------------------------------------


def test_obsolete_slice() -> None:
    # Two slices of one pool announcing two slices; the newer generation makes the older one
    # obsolete and leaves the pool incomplete: nothing is allocated from it.
    w = World([slice_("slice-1-old", [dev("device-1")], count=2),
               slice_("slice-1-new", [dev("device-2")], count=2, generation=2)])
    assert why(w.allocate([claim()])) == "pool-incomplete"


def test_newest_generation_only() -> None:
    w = World([slice_("slice-old", [dev("device-1")], generation=1),
               slice_("slice-new", [dev("device-2")], generation=2)])
    assert w.devices_of([claim()]) == [[("req-0", "device-2")]]


# upstream: duplicate-slice, invalid-pool-is-error-if-no-other-device-can-be-allocated
def test_duplicate_slice_makes_the_pool_invalid() -> None:
    w = World([slice_("slice-1", [dev("device-1")], count=2), slice_("slice-1-2", [dev("device-1")], count=2)])
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert got.why == "pool-invalid"
    assert "duplicate device name device-1" in got.detail


def test_invalid_pool_is_ok_if_devices_can_be_allocated_from_other() -> None:
    w = World([slice_("slice-1", [dev("device-1"), dev("device-1")]),
               slice_("slice-2", [dev("device-1")], pool="pool-2")])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].results[0].pool == "pool-2"


def test_no_allocation_from_incomplete_pools() -> None:
    w = World([slice_("slice-1", [dev("device-1")], count=2)])
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.detail) == ("pool-incomplete", "driver-a/pool-1")


def test_incomplete_pool_does_not_stop_another_pool() -> None:
    w = World([slice_("slice-1", [dev("device-1")], count=2), slice_("slice-2", [dev("device-1")], pool="pool-2")])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].results[0].pool == "pool-2"


def test_multi_host_resource_pool_with_stale_slice_for_current_node() -> None:
    w = World([slice_("slice-1", [dev("device-1")], count=2, generation=1),
               slice_("slice-2", [dev("device-2")], node=NODE2, count=2, generation=2)])
    # node-1's slice is of an older generation than node-2's: obsolete, so node-1 has no pool.
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.detail) == ("no-device-matches", "0/1")


def test_multi_host_resource_pool_complete_update_from_node_2_to_node_1() -> None:
    w = World([slice_("slice-1a", [dev("device-1")], node=NODE2, count=2, generation=1),
               slice_("slice-1b", [dev("device-2")], node=NODE2, count=2, generation=1),
               slice_("slice-2a", [dev("device-1")], count=2, generation=2),
               slice_("slice-2b", [dev("device-2")], count=2, generation=2)])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


def test_multi_host_resource_pool_complete_update_from_node_1_to_node_2() -> None:
    # kube-scheduler's view per node: the old generation's slices on node-1 are complete on their
    # own, so node-1 still allocates from them (as it would before it saw the update).
    w = World([slice_("slice-1a", [dev("device-1")], count=2, generation=1),
               slice_("slice-1b", [dev("device-2")], count=2, generation=1),
               slice_("slice-2a", [dev("device-1")], node=NODE2, count=2, generation=2),
               slice_("slice-2b", [dev("device-2")], node=NODE2, count=2, generation=2)])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


def test_different_resourceslices_in_pool_can_target_different_nodes() -> None:
    w = World([slice_("slice-1", [dev("device-1")], count=2),
               slice_("slice-2", [dev("device-2")], node=NODE2, count=2)])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]
    assert w.devices_of([claim()], node(NODE2)) == [[("req-0", "device-2")]]


# -- where devices can be used --------------------------------------------------------------------


def test_network_attached_device() -> None:
    w = World([slice_("slice-1", [dev("device-1")], selector=region_selector())])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].node_selector == region_selector()


def test_unsuccessful_allocation_network_attached_device() -> None:
    w = World([slice_("slice-1", [dev("device-1")], selector=region_selector())])
    assert why(w.allocate([claim()], node(NODE2, "region-2"))) == "no-device-matches"


def test_all_nodes_device_has_no_node_selector() -> None:
    w = World([slice_("slice-1", [dev("device-1")], all_nodes=True)])
    got = w.allocate([claim()], node("anywhere"))
    assert isinstance(got, list)
    assert got[0].node_selector is None


def test_many_network_attached_devices() -> None:
    from koordpy.api.objects import NodeSelectorTerm, Requirement
    planet = (NodeSelectorTerm(match_expressions=(Requirement(key="planet", operator="In", values=("earth",)),)),)
    w = World([slice_("s1", [dev("device-1")], selector=region_selector()),
               slice_("s2", [dev("device-1")], pool="pool-2", all_nodes=True),
               slice_("s3", [dev("device-1")], pool="pool-3", selector=planet),
               slice_("s4", [dev("device-1")], pool="pool-4", selector=local())])
    got = w.allocate([claim("claim-0", req(count=4))])
    assert isinstance(got, list)
    (term,) = got[0].node_selector or ()
    assert [(r.key, r.values) for r in term.match_expressions] == [("region", ("region-1",)), ("planet", ("earth",))]
    assert [(r.key, r.values) for r in term.match_fields] == [("metadata.name", ("node-1",))]


def test_local_and_network_attached_devices() -> None:
    w = World([slice_("s1", [dev("device-1")], selector=region_selector()),
               slice_("s2", [dev("device-1")], pool="pool-2")])
    got = w.allocate([claim("claim-0", req(count=2))])
    assert isinstance(got, list)
    assert got[0].node_selector == local()


# upstream: partitionable-devices-per-device-node-selection-nodename
def test_per_device_node_selection_node_name() -> None:
    w = World([slice_("s1", [dev("device-1", node_sel=NodeSelection(node_name=NODE2)),
                             dev("device-2", node_sel=NodeSelection(node_name="node-1"))], per_device=True)])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].results[0].device == "device-2"
    assert got[0].node_selector == local()


# upstream: partitionable-devices-per-device-node-selection-node-selector
def test_per_device_node_selection_node_selector() -> None:
    w = World([slice_("s1", [dev("device-1", node_sel=NodeSelection(node_selector=region_selector("region-2"))),
                             dev("device-2", node_sel=NodeSelection(node_selector=region_selector()))],
                      per_device=True)])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].results[0].device == "device-2"
    assert got[0].node_selector == region_selector()


def test_per_device_node_selection_all_nodes() -> None:
    w = World([slice_("s1", [dev("device-1", node_sel=NodeSelection(all_nodes=True))], per_device=True)])
    got = w.allocate([claim()], node("elsewhere"))
    assert isinstance(got, list)
    assert got[0].node_selector is None


def test_binds_to_node_pins_the_allocation_to_the_node() -> None:
    w = World([slice_("s1", [dev("device-1", binds_to_node=True)], all_nodes=True)])
    got = w.allocate([claim()], node("chosen"))
    assert isinstance(got, list)
    assert got[0].node_selector == local("chosen")


# -- allocation mode All --------------------------------------------------------------------------


def all_req(name: str = "req-0", cls_name: str = "class-a", **kw: object) -> object:
    return req(name, cls_name, mode="All", **kw)  # type: ignore[arg-type]


def test_all_devices_single() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    assert w.devices_of([claim("claim-0", all_req())]) == [[("req-0", "device-1")]]  # type: ignore[arg-type]


def test_all_devices_many() -> None:
    w = World([slice_("slice-1", [dev("device-1")]), slice_("slice-2", [dev("device-1")], pool="pool-2")])
    got = w.allocate([claim("claim-0", all_req())])  # type: ignore[arg-type]
    assert isinstance(got, list)
    assert [(r.pool, r.device) for r in got[0].results] == [("pool-1", "device-1"), ("pool-2", "device-1")]


def test_all_devices_of_the_incomplete_pool() -> None:
    # An error in kube-scheduler (the pod's attempt ends), not a node that does not fit.
    w = World([slice_("slice-1", [dev("device-1")], count=2)])
    with pytest.raises(DeviceError, match="claim default/claim-0, request req-0: all devices are asked for, but "
                                          "pool driver-a/pool-1 is being updated") as err:
        w.allocate([claim("claim-0", all_req())])  # type: ignore[arg-type]
    assert (err.value.claim, err.value.request) == ("default/claim-0", "req-0")


def test_all_devices_of_an_invalid_pool() -> None:
    w = World([slice_("slice-1", devs(1), count=2), slice_("slice-2", devs(1), count=2)])
    with pytest.raises(DeviceError, match="request req-0: all devices are asked for, but pool driver-a/pool-1 is "
                                          r"invalid \(duplicate device name device-0\)"):
        w.allocate([claim("claim-0", all_req())])  # type: ignore[arg-type]
    # A request for a count from the same pool: the node does not fit, no error.
    assert why(w.allocate([claim()])) == "pool-invalid"


# upstream: all-devices-plus-another(-reversed), all-devices-many-plus-another(-reversed)
@pytest.mark.parametrize("reverse", [False, True])
def test_all_devices_plus_another(reverse: bool) -> None:
    w = World([slice_("slice-1", devs(2, 1)), slice_("slice-b", [dev("device-1")], driver=DRIVER_B)],
              classes=[cls(), cls(CLASS_B, DRIVER_B)])
    everything = claim("claim-0", all_req())  # type: ignore[arg-type]
    one = claim("claim-1", req("req-0", CLASS_B))
    claims = [one, everything] if reverse else [everything, one]
    got = w.devices_of(claims)
    want = [[("req-0", "device-1"), ("req-0", "device-2")], [("req-0", "device-1")]]
    assert got == (want[::-1] if reverse else want)


# upstream: all-devices-no-solution(-reversed)
@pytest.mark.parametrize("reverse", [False, True])
def test_all_devices_no_solution(reverse: bool) -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    claims = [claim("claim-1"), claim("claim-0", all_req())]  # type: ignore[arg-type]
    got = w.allocate(claims[::-1] if reverse else claims)
    assert isinstance(got, Unallocatable)


def test_all_devices_slice_without_devices() -> None:
    w = World([slice_("slice-1", [])])
    assert why(w.allocate([claim("claim-0", all_req())])) == "no-device-matches"  # type: ignore[arg-type]


def test_all_devices_some_allocated() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", devs(2, 1))], allocated=[taken])
    assert why(w.allocate([claim("claim-0", all_req())])) == "all-taken"  # type: ignore[arg-type]


# -- admin access ---------------------------------------------------------------------------------


# upstream: admin-access-enabled
def test_admin_access_enabled_uses_devices_in_use() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", [dev("device-1")])], allocated=[taken])
    got = w.allocate([claim("claim-0", req(admin=True))])
    assert isinstance(got, list)
    assert got[0].results == (result("req-0", "device-1", admin_access=True),)


def test_all_devices_some_allocated_admin_access() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", devs(2, 1))], allocated=[taken])
    got = w.allocate([claim("claim-0", all_req(admin=True))])  # type: ignore[arg-type]
    assert isinstance(got, list)
    assert [(r.device, r.admin_access) for r in got[0].results] == [("device-1", True), ("device-2", True)]


def test_all_devices_some_allocating_admin_access() -> None:
    # Within one claim an admin request does not take a device another admin request of the
    # same claim already took: "All" then cannot have every device.
    w = World([slice_("slice-1", devs(2, 1))])
    c = claim("claim-0", req("req-0", admin=True), all_req("req-1", admin=True))  # type: ignore[arg-type]
    assert isinstance(w.allocate([c]), Unallocatable)


def test_count_devices_some_allocated_admin_access() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", devs(2, 1))], allocated=[taken])
    assert w.devices_of([claim("claim-0", req(count=2, admin=True))]) == [[("req-0", "device-1"),
                                                                           ("req-0", "device-2")]]


def test_separate_claims_share_device_admin_access() -> None:
    w = World([slice_("slice-1", devs(2, 1))])
    got = w.devices_of([claim("claim-0", req(admin=True)), claim("claim-1", req(admin=True))])
    assert got == [[("req-0", "device-1")], [("req-0", "device-1")]]


def test_admin_access_claims_device_allocating_for_non_admin_access() -> None:
    w = World([slice_("slice-1", devs(2, 1))])
    got = w.devices_of([claim("claim-0"), claim("claim-1", req(admin=True))])
    assert got == [[("req-0", "device-1")], [("req-0", "device-1")]]


def test_admin_access_allocation_does_not_take_the_device() -> None:
    admin = claim("admin", allocation=Allocation(results=(result("req-0", "device-1", admin_access=True),)))
    w = World([slice_("slice-1", [dev("device-1")])], allocated=[admin])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


# -- taints and tolerations -----------------------------------------------------------------------

NO_SCHEDULE = DeviceTaint(key="example.com/taint", value="tainted", effect="NoSchedule")
NO_EXECUTE = DeviceTaint(key="example.com/taint", value="tainted", effect="NoExecute")
TOLERATE_ALL = DeviceToleration(key="example.com/taint", operator="Exists")


def test_tainted_two_devices() -> None:
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE])])])
    assert why(w.allocate([claim()])) == "taint-not-tolerated"


def test_tainted_one_device_two_taints() -> None:
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE, NO_EXECUTE])])])
    assert why(w.allocate([claim()])) == "taint-not-tolerated"


def test_tainted_two_devices_tolerated() -> None:
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE])])])
    got = w.allocate([claim("claim-0", req(tolerations=[TOLERATE_ALL]))])
    assert isinstance(got, list)
    assert got[0].results == (result("req-0", "device-1", tolerations=(TOLERATE_ALL,)),)


def test_tainted_no_effect() -> None:
    w = World([slice_("slice-1", [dev("device-1", taints=[DeviceTaint(key="k", effect="None")])])])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


def test_tainted_one_device_two_taints_one_tolerated() -> None:
    other = DeviceTaint(key="other", effect="NoExecute")
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE, other])])])
    assert why(w.allocate([claim("claim-0", req(tolerations=[TOLERATE_ALL]))])) == "taint-not-tolerated"


def test_tainted_one_device_two_taints_both_tolerated() -> None:
    tol = [TOLERATE_ALL, DeviceToleration(key="other", operator="Exists", effect="NoExecute")]
    other = DeviceTaint(key="other", effect="NoExecute")
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE, other])])])
    assert w.devices_of([claim("claim-0", req(tolerations=tol))]) == [[("req-0", "device-1")]]


def test_toleration_of_the_wrong_effect() -> None:
    tol = DeviceToleration(key="example.com/taint", operator="Exists", effect="NoExecute")
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE])])])
    assert why(w.allocate([claim("claim-0", req(tolerations=[tol]))])) == "taint-not-tolerated"


def test_toleration_equal_value() -> None:
    ok = DeviceToleration(key="example.com/taint", operator="Equal", value="tainted")
    wrong = DeviceToleration(key="example.com/taint", operator="Equal", value="other")
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE])])])
    assert w.devices_of([claim("claim-0", req(tolerations=[ok]))]) == [[("req-0", "device-1")]]
    assert why(w.allocate([claim("claim-0", req(tolerations=[wrong]))])) == "taint-not-tolerated"


def test_tainted_admin_access() -> None:
    # Admin access does not bypass taints.
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE])])])
    assert why(w.allocate([claim("claim-0", req(admin=True))])) == "taint-not-tolerated"


def test_tainted_all_devices_single() -> None:
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE])])])
    assert why(w.allocate([claim("claim-0", all_req())])) == "taint-not-tolerated"  # type: ignore[arg-type]


def test_taint_rule_taints_selected_devices() -> None:
    rule = DeviceTaintRule(name="rule", driver="driver-a", pool="pool-1", device="device-1", taint=NO_SCHEDULE)
    w = World([slice_("slice-1", devs(2, 1))], rules=[rule])
    assert w.devices_of([claim()]) == [[("req-0", "device-2")]]
    assert w.devices_of([claim("claim-0", req(tolerations=[TOLERATE_ALL]))]) == [[("req-0", "device-1")]]


def test_taint_rule_for_a_whole_driver() -> None:
    rule = DeviceTaintRule(name="rule", driver="driver-a", taint=NO_EXECUTE)
    w = World([slice_("slice-1", devs(2, 1))], rules=[rule])
    assert why(w.allocate([claim()])) == "taint-not-tolerated"


def test_taint_rule_without_a_device_selector_taints_no_device() -> None:
    # No spec.deviceSelector selects no device (as the ResourceSlice tracker reads a rule); an empty
    # one, every device. The live differential test (seed 33) found the allocator tainting every
    # device of the cluster with such a rule, as DeviceTaintRule.selects no longer did.
    rule = DeviceTaintRule(name="rule", taint=NO_SCHEDULE, has_selector=False)
    w = World([slice_("slice-1", devs(1, 1))], rules=[rule])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]
    w = World([slice_("slice-1", devs(1, 1))], rules=[replace(rule, has_selector=True)])
    assert why(w.allocate([claim()])) == "taint-not-tolerated"


def test_taint_rule_of_another_pool_does_not_apply() -> None:
    rule = DeviceTaintRule(name="rule", driver="driver-a", pool="pool-9", taint=NO_EXECUTE)
    w = World([slice_("slice-1", devs(1, 1))], rules=[rule])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


def test_taint_rule_without_a_device_selector_taints_nothing_and_an_empty_one_everything() -> None:
    # The API: without spec.deviceSelector no device is matched; {} matches every device.
    bare = DeviceTaintRule(name="rule", taint=NO_SCHEDULE, has_selector=False)
    w = World([slice_("slice-1", devs(1, 1))], rules=[bare])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]
    empty = DeviceTaintRule(name="rule", taint=NO_SCHEDULE)
    w = World([slice_("slice-1", devs(1, 1))], rules=[empty])
    assert why(w.allocate([claim()])) == "taint-not-tolerated"


# -- claims allocated already ---------------------------------------------------------------------


def allocated_claim(name: str = "shared", sel: object = None, **kw: Any) -> ResourceClaim:
    a = Allocation(results=(result("req-0", "device-1"),), node_selector=sel, timestamp=100.0)  # type: ignore[arg-type]
    return claim(name, allocation=a, **kw)


def test_allocated_claim_is_returned_unchanged() -> None:
    c = allocated_claim(sel=local())
    w = World([slice_("slice-1", [dev("device-1")])], allocated=[c])
    got = w.allocate([c])
    assert isinstance(got, list)
    assert got[0] is c.allocation


def test_allocated_claim_on_another_node() -> None:
    c = allocated_claim(sel=local(NODE2))
    w = World([slice_("slice-1", [dev("device-1")])], allocated=[c])
    got = w.allocate([c])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.claim) == ("not-on-node", "default/shared")


def test_allocated_claim_reserved_for_others_is_shared() -> None:
    from koordpy.api.dra import Consumer
    others = tuple(Consumer("pods", f"p{i}", f"u{i}") for i in range(3))
    c = allocated_claim(sel=local(), reserved_for=others)
    w = World([slice_("slice-1", [dev("device-1")])], allocated=[c])
    got = w.allocator.allocate(node(), [c], 1000.0, consumer=Consumer("pods", "me", "me"))
    assert isinstance(got, list)


def test_allocated_claim_with_256_consumers_takes_no_more() -> None:
    from koordpy.api.dra import Consumer
    others = tuple(Consumer("pods", f"p{i}", f"u{i}") for i in range(256))
    c = allocated_claim(sel=local(), reserved_for=others)
    w = World([slice_("slice-1", [dev("device-1")])], allocated=[c])
    assert why(w.allocator.allocate(node(), [c], 1000.0, consumer=Consumer("pods", "me", "me"))) == "too-many-consumers"
    # One of the 256 is fine.
    assert isinstance(w.allocator.allocate(node(), [c], 1000.0, consumer=others[7]), list)


def test_allocated_and_fresh_claims_together() -> None:
    c = allocated_claim(sel=local())
    w = World([slice_("slice-1", devs(2, 1))], allocated=[c])
    got = w.allocate([claim("fresh"), c])
    assert isinstance(got, list)
    assert got[0].results[0].device == "device-2"
    assert got[1] is c.allocation


def test_allocated_claim_binding_failed() -> None:
    a = Allocation(results=(result("req-0", "device-1", binding_conditions=("ready",),
                                   binding_failure_conditions=("failed",)),), timestamp=100.0)
    c = claim("shared", allocation=a, device_conditions=(
        DeviceCondition("driver-a", "pool-1", "device-1", "failed", "True"),))
    assert why(World([]).allocate([c])) == "binding-failed"


def test_allocated_claim_binding_timeout() -> None:
    a = Allocation(results=(result("req-0", "device-1", binding_conditions=("ready",)),), timestamp=100.0)
    c = claim("shared", allocation=a)
    assert isinstance(World([]).allocate([c], now=600.0), list)  # still within the 600 s
    assert why(World([]).allocate([c], now=701.0)) == "binding-timeout"
    ready = claim("shared", allocation=a, device_conditions=(
        DeviceCondition("driver-a", "pool-1", "device-1", "ready", "True"),))
    assert isinstance(World([]).allocate([ready], now=701.0), list)


# -- configuration --------------------------------------------------------------------------------

CFG_A = OpaqueConfig("driver-a", '{"classAttribute":"A"}')
CFG_B = OpaqueConfig("driver-b", '{"classAttribute":"B"}')


def test_with_class_device_config() -> None:
    w = World([slice_("slice-1", [dev("device-1")])], classes=[cls(config=[CFG_A])])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    (c,) = got[0].config
    assert (c.source, c.config.driver, c.config.requests) == ("FromClass", "driver-a", ())


def test_with_class_device_config_with_multiple_request_and_configs() -> None:
    w = World([slice_("slice-1", devs(2)), slice_("slice-b", [dev("device-1")], driver=DRIVER_B)],
              classes=[cls(config=[CFG_A]), cls(CLASS_B, DRIVER_B, config=[CFG_B])])
    c = claim("claim-0", req("req-0"), req("req-1"), req("req-2", CLASS_B))
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(x.source, x.config.parameters, x.config.requests) for x in got[0].config] == [
        ("FromClass", CFG_A.parameters, ("req-0", "req-1")), ("FromClass", CFG_B.parameters, ("req-2",))]


def test_with_claim_config_for_two_requests() -> None:
    cfg = OpaqueConfig("driver-a", '{"deviceAttribute":1}', ("req-0", "req-1"))
    w = World([slice_("slice-1", devs(3))])
    got = w.allocate([claim("claim-0", req("req-0"), req("req-1"), req("req-2"), config=[cfg])])
    assert isinstance(got, list)
    assert [(x.source, x.config.requests) for x in got[0].config] == [("FromClaim", ("req-0", "req-1"))]


def test_claim_with_device_config() -> None:
    cfg = OpaqueConfig("driver-a", '{"deviceAttribute":1}', ("req-0",))
    w = World([slice_("slice-1", [dev("device-1")])], classes=[cls(config=[CFG_A])])
    got = w.allocate([claim("claim-0", config=[cfg])])
    assert isinstance(got, list)
    # Class config first, then the claim's; one naming every request names none (all).
    assert [(x.source, x.config.requests) for x in got[0].config] == [("FromClass", ()), ("FromClaim", ())]


def test_claim_config_for_another_request_only() -> None:
    cfg = OpaqueConfig("driver-a", "{}", ("req-9",))
    w = World([slice_("slice-1", [dev("device-1")])])
    got = w.allocate([claim("claim-0", config=[cfg])])
    assert isinstance(got, list)
    assert got[0].config == ()


# -- errors kube-scheduler reports ----------------------------------------------------------------


def test_unknown_constraint() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    with pytest.raises(DeviceError, match="empty constraint"):
        w.allocate([claim("claim-0", constraints=[DeviceConstraint()])])


MISSING = 'device.attributes["driver-a"].missing == 1'  # no such key: a runtime error


# upstream: invalid-CEL-one-device (compile)
def test_invalid_cel_compile_error() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    with pytest.raises(DeviceError, match="undeclared reference"):
        w.allocate([claim("claim-0", req(selectors=["noSuchVar"]))])


def test_invalid_cel_one_device() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    with pytest.raises(DeviceError, match="claim default/claim-0: selector #0 on device driver-a/pool-1/device-1"):
        w.allocate([claim("claim-0", req(selectors=[MISSING]))])


def test_invalid_cel_one_device_class() -> None:
    w = World([slice_("slice-1", [dev("device-1")])], classes=[cls("class-a", "driver-a", MISSING)])
    with pytest.raises(DeviceError, match="class class-a: selector #1 on device"):
        w.allocate([claim()])


def test_invalid_cel_all_devices() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    with pytest.raises(DeviceError, match="CEL runtime error"):
        w.allocate([claim("claim-0", all_req(selectors=[MISSING]))])  # type: ignore[arg-type]


def test_cel_error_on_a_device_in_use_is_not_reached() -> None:
    # kube-scheduler evaluates selectors lazily, after the in-use check: a device taken never
    # raises its CEL error.
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", [dev("device-1")]), slice_("slice-2", [dev("device-1", {"ok": True})], pool="pool-2")],
              allocated=[taken])
    sel = 'device.attributes["driver-a"].ok == true'
    got = w.allocate([claim("claim-0", req(selectors=[sel]))])
    assert isinstance(got, list)
    assert got[0].results[0].pool == "pool-2"


def test_too_many_devices_single_request() -> None:
    with pytest.raises(DeviceError, match="exceeds the claim limit"):
        World([]).allocate([claim("claim-0", req(count=500))])


def test_too_many_devices_total() -> None:
    w = World([slice_("slice-1", devs(33))])
    with pytest.raises(DeviceError, match="exceeds the claim limit"):
        w.allocate([claim("claim-0", req("req-0", count=32), req("req-1"))])


def test_exact_count_sum_exceeds_claim_limit() -> None:
    with pytest.raises(DeviceError, match="request req-1: adding 20 devices exceeds the claim limit"):
        World([]).allocate([claim("claim-0", req("req-0", count=20), req("req-1", count=20))])


# upstream: many-devices-okay, max-number-devices, exact-count-sum-exactly-fills-claim-limit
def test_many_devices_okay_and_sum_exactly_fills_claim_limit() -> None:
    w = World([slice_("slice-1", devs(32))])
    got = w.devices_of([claim("claim-0", req("req-0", count=16), req("req-1", count=16))])
    assert [d for _, d in got[0]] == [f"device-{i}" for i in range(32)]


# -- constraints ----------------------------------------------------------------------------------

ATTRS = {"driverVersion": SemVer("1.0.0"), "numa": 1, "stringAttribute": "stringAttributeValue", "boolAttribute": True}


def test_with_constraint() -> None:
    w = World([slice_("slice-1", [dev("device-1", ATTRS), dev("device-2", ATTRS)])])
    cons = [DeviceConstraint(match_attribute=f"driver-a/{k}") for k in ATTRS]
    c = claim("claim-0", req("req-0"), req("req-1"), constraints=cons)
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1", "device-2")]]


def test_with_constraint_non_existent_attribute() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    c = claim("claim-0", constraints=[DeviceConstraint(match_attribute="driver-a/nonExistent")])
    assert why(w.allocate([c])) == "constraint-unmet"


@pytest.mark.parametrize("attr,a,b", [("numa", 1, 2), ("stringAttribute", "x", "y"), ("boolAttribute", True, False),
                                      ("driverVersion", SemVer("1.0.0"), SemVer("2.0.0"))])
# upstream: with-constraint-not-matching-{int,string,bool,version}-attribute
def test_with_constraint_not_matching_attribute(attr: str, a: object, b: object) -> None:
    w = World([slice_("slice-1", [dev("device-1", {attr: a}), dev("device-2", {attr: b})])])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(match_attribute=f"driver-a/{attr}")])
    assert isinstance(w.allocate([c]), Unallocatable)


def test_constraint_compares_types_not_only_values() -> None:
    # An int 1 and a bool true are different attribute values.
    w = World([slice_("slice-1", [dev("device-1", {"x": 1}), dev("device-2", {"x": True})])])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(match_attribute="driver-a/x")])
    assert isinstance(w.allocate([c]), Unallocatable)


def test_with_constraint_not_matching_int_attribute_all_devices() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2})])])
    c = claim("claim-0", all_req(), constraints=[DeviceConstraint(match_attribute="driver-a/numa")])  # type: ignore[arg-type]
    with pytest.raises(DeviceError, match="cannot add device driver-a/pool-1/device-2 because a claim constraint"):
        w.allocate([c])


def test_with_constraint_for_request() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2})])])
    c = claim("claim-0", req("req-0"), req("req-1"),
              constraints=[DeviceConstraint(requests=("req-0",), match_attribute="driver-a/numa")])
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1", "device-2")]]


def test_with_constraint_for_request_retry() -> None:
    # The first device has no numa attribute: the constraint on req-0 skips it, req-1 takes it.
    w = World([slice_("slice-1", [dev("device-0"), dev("device-1", {"numa": 1})])])
    c = claim("claim-0", req("req-0"), req("req-1"),
              constraints=[DeviceConstraint(requests=("req-0",), match_attribute="driver-a/numa")])
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1", "device-0")]]


def test_constraint_attribute_in_another_domain() -> None:
    rack = {"example.com/rack": "r1"}
    w = World([slice_("slice-1", [dev("device-1", rack), dev("device-2", rack)])])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(match_attribute="example.com/rack")])
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-0", "device-2")]]


def test_with_distinct_constraints() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"numa": 1}), dev("device-2", {"numa": 1}),
                                  dev("device-3", {"numa": 2})])])
    c = claim("claim-0", req("req-0"), req("req-1"), constraints=[DeviceConstraint(distinct_attribute="driver-a/numa")])
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1", "device-3")]]


def test_distinct_constraint_single_request_count_3_not_distinct() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}), dev("device-2", {"n": 2}), dev("device-3", {"n": 2})])])
    c = claim("claim-0", req(count=3), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert why(w.allocate([c])) == "constraint-unmet"


def test_distinct_constraint_single_request_count_3_all_distinct() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}), dev("device-2", {"n": 2}), dev("device-3", {"n": 3})])])
    c = claim("claim-0", req(count=3), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert len(w.devices_of([c])[0]) == 3


# upstream:
#   with-distinct-constraints-attribute-not-set, distinct-constraint-single-request-multiple-devices-attribute-not-set
def test_with_distinct_constraints_attribute_not_set() -> None:
    w = World([slice_("slice-1", [dev("device-1"), dev("device-2")])])
    c = claim("claim-0", req("req-0"), req("req-1"), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert isinstance(w.allocate([c]), Unallocatable)


# upstream: distinct-constraint-single-request-not-enough-distinct-values
def test_distinct_constraint_not_enough_distinct_values() -> None:
    w = World([slice_("slice-1", [dev(f"device-{i}", {"n": i % 2}) for i in range(4)])])
    c = claim("claim-0", req(count=3), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert isinstance(w.allocate([c]), Unallocatable)


def test_constraints_are_per_claim() -> None:
    # A constraint binds the requests of its own claim only.
    w = World([slice_("slice-1", [dev("device-1", {"numa": 1}), dev("device-2", {"numa": 2})])])
    c0 = claim("claim-0", constraints=[DeviceConstraint(match_attribute="driver-a/numa")])
    c1 = claim("claim-1", constraints=[DeviceConstraint(match_attribute="driver-a/numa")])
    assert w.devices_of([c0, c1]) == [[("req-0", "device-1")], [("req-0", "device-2")]]


# -- how many pods a node can take (capacity) -----------------------------------------------------


def spec(*requests: Any, **kw: Any) -> Any:
    return claim("x", *requests, **kw).spec


def test_capacity_counts_free_devices_divided_by_what_a_pod_asks() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-0"),)))
    w = World([slice_("slice-1", devs(8))], allocated=[taken])
    assert w.allocator.capacity(node(), [spec(req(count=2))], 10, 0.0) == 3  # 7 free // 2
    assert w.allocator.capacity(node(), [spec(req(count=2))], 2, 0.0) == 2  # the limit
    assert w.allocator.capacity(node(), [spec(req(count=2)), spec(req(count=1))], 10, 0.0) == 2


def test_capacity_leaves_what_is_in_use_as_it_was() -> None:
    w = World([slice_("slice-1", [dev(f"device-{i}", {"numa": i // 2}) for i in range(4)])])
    constrained = spec(req(count=2), constraints=[DeviceConstraint(match_attribute="driver-a/numa")])
    assert w.allocator.capacity(node(), [constrained], 10, 0.0) == 2  # the search, pod after pod
    assert w.devices_of([claim()]) == [[("req-0", "device-0")]]


def test_capacity_fast_path_agrees_with_the_search() -> None:
    # Taints, other classes and devices in use: the count agrees with allocating pod after pod.
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    slices = [slice_("slice-1", [dev(f"device-{i}", taints=[NO_SCHEDULE] if i % 3 == 0 else []) for i in range(10)]),
              slice_("slice-b", devs(3), driver=DRIVER_B)]
    w = World(slices, classes=[cls(), cls(CLASS_B, DRIVER_B)], allocated=[taken])
    specs = [spec(req("req-0", count=2), req("req-1", CLASS_B))]
    fast = w.allocator.capacity(node(), specs, 10, 0.0)
    pods = 0
    while True:
        got = w.allocate([ResourceClaim(namespace="", name=f"p{pods}", spec=specs[0])])
        if isinstance(got, Unallocatable):
            break
        w.in_use.add(got[0])
        pods += 1
    assert fast == pods == 2  # 5 untainted free devices of class-a, 2 a pod


def test_capacity_zero_when_a_class_is_missing() -> None:
    w = World([slice_("slice-1", devs(2))])
    assert w.allocator.capacity(node(), [spec(req("req-0", "nope"))], 10, 0.0) == 0


def test_capacity_of_claims_without_requests_is_the_limit() -> None:
    assert World([]).allocator.capacity(node(), [ClaimSpecEmpty], 5, 0.0) == 5


ClaimSpecEmpty = ResourceClaim(namespace="", name="e").spec


# -- firstAvailable (prioritized list) -------------------------------------------------------------


def test_prioritized_list_first_unavailable() -> None:
    w = World([slice_("slice-1", [dev("device-1")])], classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(CLASS_B, name="subReq-0"), exact(name="subReq-1")))
    got = w.allocate([c])
    assert isinstance(got, list)
    assert got[0].results == (result("req-0/subReq-1", "device-1"),)


def test_prioritized_list_first_available_wins() -> None:
    w = World([slice_("slice-1", devs(2))])
    c = claim("claim-0", first_available("req-0", exact(count=2, name="subReq-0"), exact(name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-0", "device-0"), ("req-0/subReq-0", "device-1")]]


def test_prioritized_list_non_available() -> None:
    w = World([slice_("slice-1", [dev("device-1")]), slice_("slice-2", [dev("device-1")], pool="pool-2",
                                                             driver=DRIVER_B)],
              classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(CLASS_B, 2, name="subReq-0"), exact(count=2, name="subReq-1")))
    got = w.allocate([c])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.request) == ("no-device-matches", "req-0/subReq-0")


def test_prioritized_list_device_config() -> None:
    foo = OpaqueConfig("driver-a", "foo", ("req-0/subReq-0",))
    bar = OpaqueConfig("driver-b", "bar", ("req-0/subReq-1",))
    w = World([slice_("slice-1", devs(2, 1), driver=DRIVER_B)], classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(name="subReq-0"), exact(CLASS_B, 2, name="subReq-1")),
              config=[foo, bar])
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(r.request, r.device) for r in got[0].results] == [("req-0/subReq-1", "device-1"),
                                                                ("req-0/subReq-1", "device-2")]
    assert [(x.source, x.config.parameters, x.config.requests) for x in got[0].config] == [("FromClaim", "bar", ())]


def test_prioritized_list_class_config() -> None:
    w = World([slice_("slice-1", devs(2, 1), driver=DRIVER_B), slice_("slice-2", [dev("device-3")], pool="pool-2")],
              classes=[cls(config=[OpaqueConfig("driver-a", "foo")]),
                       cls(CLASS_B, DRIVER_B, config=[OpaqueConfig("driver-b", "bar")])])
    c = claim("claim-0", first_available("req-0", exact(count=2, name="subReq-0"), exact(CLASS_B, 2, name="subReq-1")))
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(x.source, x.config.parameters, x.config.requests) for x in got[0].config] == [("FromClass", "bar", ())]


@pytest.mark.parametrize(("requests", "kept"), [
    pytest.param(("req-0/subReq-0", "req-0/subReq-1"), ("req-0/subReq-0", "req-0/subReq-1"),
                 id="scoped to subrequests of one request"),
    pytest.param(("req-0/subReq-0", "req-1"), (), id="covering all requests is cleared"),
])
def test_claim_config_requests(requests: tuple[str, ...], kept: tuple[str, ...]) -> None:
    w = World([slice_("slice-1", devs(2))], classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(name="subReq-0"), exact(CLASS_B, name="subReq-1")),
              req("req-1"), config=[OpaqueConfig("driver-a", "params", requests)])
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(x.source, x.config.requests) for x in got[0].config] == [("FromClaim", kept)]


MEM = {"device-1": 2, "device-2": 2, "device-3": 1}


def mem_at_least(n: int) -> str:
    return f'device.attributes["driver-a"].mem >= {n}'


def test_prioritized_list_subrequests_with_expressions() -> None:
    w = World([slice_("slice-1", [dev(d, {"mem": m}) for d, m in MEM.items()])])
    c = claim("claim-0", req("req-0", selectors=[mem_at_least(1)]),
              first_available("req-1", exact(name="subReq-0", selectors=[mem_at_least(4)]),
                              exact(count=2, name="subReq-1", selectors=[mem_at_least(2)])))
    # req-0 first takes device-1; the 2-device alternative then needs device-1 too, so req-0 moves on.
    assert w.devices_of([c]) == [[("req-0", "device-3"), ("req-1/subReq-1", "device-1"),
                                  ("req-1/subReq-1", "device-2")]]


# upstream: prioritized-list-subrequests-with-constraints-ref-parent-request, -ref-sub-request
@pytest.mark.parametrize("names,second", [(("req-0", "req-1"), "device-3"), (("req-0", "req-1/subReq-0"), "device-2")])
def test_prioritized_list_subrequests_with_constraints(names: tuple[str, str], second: str) -> None:
    # ref-parent-request and ref-sub-request: a constraint naming the parent binds whichever
    # alternative is chosen; one naming an alternative binds only that one.
    w = World([slice_("slice-1", [dev("device-1", {"mem": 8, "driverVersion": SemVer("1.0.0")})]),
               slice_("slice-2", [dev("device-2", {"mem": 2, "driverVersion": SemVer("2.0.0")}),
                                  dev("device-3", {"mem": 1, "driverVersion": SemVer("1.0.0")})], pool="pool-2")])
    c = claim("claim-0", req("req-0", selectors=[mem_at_least(8)]),
              first_available("req-1", exact(name="subReq-0", selectors=[mem_at_least(2)]),
                              exact(name="subReq-1", selectors=[mem_at_least(1)])),
              constraints=[DeviceConstraint(requests=names, match_attribute="driver-a/driverVersion")])
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(r.request, r.pool, r.device) for r in got[0].results] == [
        ("req-0", "pool-1", "device-1"), ("req-1/subReq-1", "pool-2", second)]


def test_prioritized_list_subrequests_with_allocation_mode_all() -> None:
    w = World([slice_("slice-1", devs(2, 1))])
    c = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0", selectors=["false"]),
                                         exact(name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-1")]]
    c2 = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0"), exact(name="subReq-1")))
    assert w.devices_of([c2]) == [[("req-0/subReq-0", "device-1"), ("req-0/subReq-0", "device-2")]]


def test_prioritized_list_multi_request() -> None:
    w = World([slice_("slice-1", devs(3))], classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(CLASS_B, name="subReq-0"), exact(name="subReq-1")),
              first_available("req-1", exact(count=3, name="subReq-0"), exact(count=2, name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-0"), ("req-1/subReq-1", "device-1"),
                                  ("req-1/subReq-1", "device-2")]]


def test_prioritized_list_with_backtracking_across_claims() -> None:
    # The first claim's preferred alternative takes the only big device; the second claim needs
    # it, so the first falls back to its second alternative.
    w = World([slice_("slice-1", [dev("device-1", {"mem": 8}), dev("device-2", {"mem": 1})])])
    c0 = claim("claim-0", first_available("req-0", exact(name="subReq-0", selectors=[mem_at_least(8)]),
                                          exact(name="subReq-1")))
    c1 = claim("claim-1", req("req-0", selectors=[mem_at_least(8)]))
    assert w.devices_of([c0, c1]) == [[("req-0/subReq-1", "device-2")], [("req-0", "device-1")]]


def test_prioritized_list_too_many_in_first_subrequest() -> None:
    w = World([slice_("slice-1", [dev("device-1")])], classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(CLASS_B, 500, name="subReq-0"), exact(name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-1")]]


def test_prioritized_list_minimum_sum_exceeds_claim_limit() -> None:
    c = claim("claim-0", req("req-0", count=20),
              first_available("req-1", exact(count=20, name="subReq-0"), exact(count=24, name="subReq-1")))
    with pytest.raises(DeviceError, match="request req-1: adding 20 devices exceeds the claim limit"):
        World([]).allocate([c])


def test_prioritized_list_max_allocation_limit_request() -> None:
    w = World([slice_("slice-1", devs(64))])
    c = claim("claim-0", first_available("req-0", exact(count=32, name="subReq-0"), exact(count=16, name="subReq-1")),
              first_available("req-1", exact(count=32, name="subReq-0"), exact(count=16, name="subReq-1")))
    got = w.devices_of([c])
    assert [r for r, _ in got[0]] == ["req-0/subReq-1"] * 16 + ["req-1/subReq-1"] * 16
    assert [d for _, d in got[0]] == [f"device-{i}" for i in range(32)]
    assert w.allocator.steps == 75  # upstream's count of allocateOne calls


def test_tainted_prioritized_list() -> None:
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE])]),
               slice_("slice-2", [dev("device-2")], pool="pool-2", driver=DRIVER_B)],
              classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(name="subReq-0"), exact(CLASS_B, name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-2")]]
    tolerant = claim("claim-0", first_available("req-0", exact(name="subReq-0", tolerations=[TOLERATE_ALL]),
                                                exact(CLASS_B, name="subReq-1")))
    got = w.allocate([tolerant])
    assert isinstance(got, list)
    assert got[0].results == (result("req-0/subReq-0", "device-1", tolerations=(TOLERATE_ALL,)),)


# upstream: with-distinct-constraints-with-subrequests
def test_distinct_constraint_with_subrequests() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}), dev("device-2", {"n": 1}), dev("device-3", {"n": 2})])])
    c = claim("claim-0", req("req-0"), first_available("req-1", exact(name="subReq-0")),
              constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1/subReq-0", "device-3")]]


# -- partitionable devices (shared counters) -------------------------------------------------------


def uses(n: str | int, counter_set: str = "counter-set-1", name: str = "memory") -> CounterConsumption:
    return CounterConsumption(counter_set, {name: q(n)})


def counters(n: str | int, counter_set: str = "counter-set-1", name: str = "memory") -> CounterSet:
    return CounterSet(counter_set, {name: q(n)})


def partitioned(*devices: Any, total: str | int = "8Gi", count: int = 2, **kw: Any) -> list[ResourceSlice]:
    return [slice_("slice-1", devices, count=count, **kw),
            slice_("slice-2", [], count=count, counters=[counters(total)], **kw)]


def test_partitionable_devices_single_device() -> None:
    w = World(partitioned(dev("device-1", counters=[uses("4Gi")])))
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


def test_partitionable_devices_multiple_devices() -> None:
    w = World(partitioned(*(dev(f"device-{i}", counters=[uses("4Gi")]) for i in range(3))))
    assert w.devices_of([claim("claim-0", req(count=2))]) == [[("req-0", "device-0"), ("req-0", "device-1")]]
    # Each device alone fits the counters, three together do not: requests competing.
    assert why(w.allocate([claim("claim-0", req(count=3))])) == "constraint-unmet"


def test_partitionable_devices_no_capacity_available() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World(partitioned(dev("device-1", counters=[uses("4Gi")]), dev("device-2", counters=[uses("6Gi")])),
              allocated=[taken])
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.detail) == ("all-taken", "0/1")


def test_partitionable_devices_overallocated_capacity_pool() -> None:
    # Counters that do not add up: the device consumes more than its pool has. The reason says
    # the matching device is not free rather than blaming constraints the claim does not have.
    w = World(partitioned(dev("device-1", counters=[uses("9Gi")])))
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.detail) == ("all-taken", "0/1")


def test_partitionable_devices_counters_of_an_allocated_device_in_another_slice() -> None:
    # Counters are the pool's: a device allocated from a slice that does not reach this node
    # still consumes them (DeviceSlicesNotTargetingNode).
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-9"),)))
    slices = [slice_("slice-1", [dev("device-1", counters=[uses("4Gi")])], count=3),
              slice_("slice-3", [dev("device-9", counters=[uses("6Gi")])], node=NODE2, count=3),
              slice_("slice-2", [], count=3, counters=[counters("8Gi")], all_nodes=True)]
    w = World(slices, allocated=[taken])
    assert isinstance(w.allocate([claim()]), Unallocatable)
    assert isinstance(World(slices).allocate([claim()]), list)


def test_partitionable_devices_multiple_counters() -> None:
    two = [CounterConsumption("counter-set-1", {"memory": q("4Gi"), "cores": q(2)})]
    w = World([slice_("slice-1", [dev(f"device-{i}", counters=two) for i in range(3)], count=2),
               slice_("slice-2", [], count=2, counters=[CounterSet("counter-set-1",
                                                                   {"memory": q("16Gi"), "cores": q(4)})])])
    assert len(w.devices_of([claim("claim-0", req(count=2))])[0]) == 2
    assert isinstance(w.allocate([claim("claim-0", req(count=3))]), Unallocatable)  # cores run out


def test_partitionable_devices_unused_counters_in_counter_set() -> None:
    w = World([slice_("slice-1", [dev("device-1", counters=[uses("4Gi")])], count=2),
               slice_("slice-2", [], count=2, counters=[CounterSet("counter-set-1",
                                                                   {"memory": q("8Gi"), "unused": q(1)})])])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


def test_partitionable_devices_taint_releases_counter() -> None:
    w = World(partitioned(dev("device-1", counters=[uses(1, name="c")], taints=[NO_SCHEDULE]),
                          dev("device-2", counters=[uses(1, name="c")]), total=1))
    # slice-2's counter set is named "memory" by default: use one named "c".
    w = World([slice_("slice-1", [dev("device-1", counters=[uses(1, name="c")], taints=[NO_SCHEDULE]),
                                  dev("device-2", counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")])])
    assert w.devices_of([claim()]) == [[("req-0", "device-2")]]


def test_partitionable_devices_constraint_releases_counter() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"s": "red"}, counters=[uses(1, name="c")]),
                                  dev("device-2", {"s": "blue"}, counters=[uses(1, name="c")]),
                                  dev("device-3", {"s": "blue"}, counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(2, name="c")])])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(match_attribute="driver-a/s")])
    assert w.devices_of([c]) == [[("req-0", "device-2"), ("req-0", "device-3")]]


def test_partitionable_all_mode_constraint_must_error_with_reserved_counter() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"numa": 1}),
                                  dev("device-2", {"numa": 2}, counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")])])
    c = claim("claim-0", req(mode="All"), constraints=[DeviceConstraint(match_attribute="driver-a/numa")])
    with pytest.raises(DeviceError, match="cannot add device driver-a/pool-1/device-2"):
        w.allocate([c])


def test_all_devices_with_consumed_counters() -> None:
    w = World(partitioned(dev("device-1", counters=[uses("4Gi")])))
    assert w.devices_of([claim("claim-0", req(mode="All"))]) == [[("req-0", "device-1")]]


def test_partitionable_devices_prioritized_list() -> None:
    w = World(partitioned(dev("device-1", counters=[uses("4Gi")]), dev("device-2", counters=[uses("6Gi")])))
    c = claim("claim-0", req("req-0"), first_available("req-1", exact(name="subReq-0"), exact(name="subReq-1")))
    # device-1 then device-2 overdraw the 8Gi: no alternative fits beside req-0's device.
    assert isinstance(w.allocate([c]), Unallocatable)
    assert w.devices_of([claim("claim-0", first_available("req-0", exact(count=2, name="subReq-0"),
                                                          exact(name="subReq-1")))]) == [[("req-0/subReq-1",
                                                                                          "device-1")]]


# upstream: partitionable-devices-same-counter-set-name-in-different-resource-slices
def test_partitionable_devices_same_counter_set_name_in_different_slices_is_invalid() -> None:
    w = World([slice_("slice-1", [dev("device-1", counters=[uses("4Gi")])], count=3),
               slice_("slice-2", [], count=3, counters=[counters("8Gi")]),
               slice_("slice-3", [], count=3, counters=[counters("8Gi")])])
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.detail) == ("pool-invalid", "driver-a/pool-1: duplicate counter set name counter-set-1")


# upstream: partitionable-devices-device-counter-consumption-references-unknown-counter-set
def test_partitionable_devices_unknown_counter_set_is_invalid() -> None:
    w = World(partitioned(dev("device-1", counters=[uses("4Gi", counter_set="nope")])))
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert got.detail.endswith("counter set nope not found")


# upstream: partitionable-devices-device-counter-consumption-references-unknown-counter-in-counter-set
def test_partitionable_devices_unknown_counter_in_counter_set_is_invalid() -> None:
    w = World(partitioned(dev("device-1", counters=[uses("4Gi", name="nope")])))
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert got.detail.endswith("counter nope not found in counter set counter-set-1")


# upstream: partitionable-devices-device-counter-consumption-references-counter-set-in-other-pool
def test_partitionable_devices_counter_set_in_other_pool_is_invalid() -> None:
    w = World([slice_("slice-1", [dev("device-1", counters=[uses("4Gi")])]),
               slice_("slice-2", [], pool="pool-2", counters=[counters("8Gi")])])
    assert why(w.allocate([claim()])) == "pool-invalid"


# upstream: partitionable-devices-devices-on-different-nodes-consume-same-counter-set,
#   -devices-consume-counter-set-in-different-nodes
def test_partitionable_devices_devices_on_different_nodes_consume_same_counter_set() -> None:
    slices = [slice_("slice-1", [dev("device-1", counters=[uses("6Gi")])], count=3),
              slice_("slice-2", [dev("device-2", counters=[uses("6Gi")])], node=NODE2, count=3),
              slice_("slice-3", [], count=3, counters=[counters("8Gi")], all_nodes=True)]
    w = World(slices)
    got = w.allocate([claim()])
    assert isinstance(got, list)
    w.in_use.add(got[0])
    assert isinstance(w.allocate([claim()], node(NODE2)), Unallocatable)


# -- consumable capacity ----------------------------------------------------------------------------


def cap(value: str | int, *, default: str | int | None = None, min_: str | int | None = None,
        max_: str | int | None = None, step: str | int | None = None,
        values: Sequence[str | int] = ()) -> Capacity:
    if default is None and min_ is None and not values:
        return Capacity(q(value))
    return Capacity(q(value), CapacityPolicy(
        default=q(default) if default is not None else None, valid_values=tuple(q(v) for v in values),
        valid_min=q(min_) if min_ is not None else None, valid_max=q(max_) if max_ is not None else None,
        valid_step=q(step) if step is not None else None))


def ranged(value: str | int) -> Capacity:
    return cap(value, default=2, min_=2, step=2, max_=4)  # upstream's policy range (2, 2, 4)


def shared(name: str, **caps: Capacity) -> Device:
    return dev(name, capacity=caps, multi=True)


def consumed(a: Allocation) -> list[tuple[str, str, dict[str, Any]]]:
    return [(r.device, r.share_id, {k: v.value for k, v in r.consumed_capacity.items()}) for r in a.results]


def both(w: World, c0: ResourceClaim, c1: ResourceClaim) -> list[list[tuple[str, str, dict[str, Any]]]]:
    got = w.allocate([c0, c1])
    assert isinstance(got, list), got
    return [consumed(a) for a in got]


# upstream: consumable-capacity-multi-allocatable-device-without-capacity-without-capacity-request
def test_multi_allocatable_device_without_capacity_is_shared() -> None:
    w = World([slice_("slice-1", [shared("device-1")])])
    assert both(w, claim("claim-0"), claim("claim-1")) == [[("device-1", "share-1", {})],
                                                          [("device-1", "share-2", {})]]


# upstream: consumable-capacity-multi-allocatable-device-without-policy-without-capacity-request(-block)
def test_multi_allocatable_device_without_policy_without_request_takes_it_all() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(1)), shared("device-2", c=cap(1))])])
    assert both(w, claim("claim-0"), claim("claim-1")) == [[("device-1", "share-1", {"c": 1})],
                                                          [("device-2", "share-2", {"c": 1})]]
    w = World([slice_("slice-1", [shared("device-1", c=cap(2))])])
    assert isinstance(w.allocate([claim("claim-0"), claim("claim-1")]), Unallocatable)


# upstream: consumable-capacity-multi-allocatable-device-without-policy-with-capacity-request
def test_multi_allocatable_device_without_policy_with_capacity_request() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(2))])])
    one = claim("claim-0", req(capacity={"c": "1"}))
    assert both(w, one, claim("claim-1", req(capacity={"c": "1"}))) == [[("device-1", "share-1", {"c": 1})],
                                                                        [("device-1", "share-2", {"c": 1})]]


# upstream: consumable-capacity-multi-allocatable-device-with-policy-without-capacity-request
def test_multi_allocatable_device_with_policy_without_capacity_request() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4))])])
    assert both(w, claim("claim-0"), claim("claim-1")) == [[("device-1", "share-1", {"c": 2})],
                                                          [("device-1", "share-2", {"c": 2})]]


# upstream: consumable-capacity-multi-allocatable-device-with-zero-request-policy, -violates-zero-request-policy
def test_multi_allocatable_device_with_zero_request_policy() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(1, default=0, values=[0]))])])
    assert both(w, claim("claim-0"), claim("claim-1")) == [[("device-1", "share-1", {"c": 0})],
                                                          [("device-1", "share-2", {"c": 0})]]
    assert isinstance(w.allocate([claim("claim-0", req(capacity={"c": "1"}))]), Unallocatable)


# upstream: consumable-capacity-multi-allocatable-device-with-range-policy-step
def test_multi_allocatable_device_with_range_policy_step_rounds_up() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4))])])
    got = w.allocate([claim("claim-0", req(capacity={"c": "3"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "share-1", {"c": 4})]


# upstream: consumable-capacity-multi-allocatable-device-with-request-over-max-sharing-policy
def test_multi_allocatable_device_with_request_over_max_sharing_policy() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(10))])])
    assert isinstance(w.allocate([claim("claim-0", req(capacity={"c": "6"}))]), Unallocatable)


# upstream: consumable-capacity-multi-allocatable-device-with-valid-values-policy(-round-up)
def test_multi_allocatable_device_with_valid_values_policy() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(4, default=1, values=[1, 2]))])])
    got = w.allocate([claim("claim-0", req(capacity={"c": "2"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "share-1", {"c": 2})]
    w = World([slice_("slice-1", [shared("device-1", c=cap(3, default=1, values=[1, 3]))])])
    got = w.allocate([claim("claim-0", req(capacity={"c": "2"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "share-1", {"c": 3})]


# upstream: consumable-capacity-multi-allocatable-device-with-exceeded-consumable-capacity-request
def test_multi_allocatable_device_with_exceeded_consumable_capacity_request() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(2))])])
    assert isinstance(w.allocate([claim("claim-0", req(capacity={"c": "1"})),
                                  claim("claim-1", req(capacity={"c": "2"}))]), Unallocatable)


def share_of(device: str, amount: int, share: str = "s0") -> ResourceClaim:
    return claim(f"holder-{share}", allocation=Allocation(results=(
        result("req-0", device, share_id=share, consumed_capacity={"c": q(amount)}),)))


# upstream: consumable-capacity-multi-allocatable-device-with-allocated-capacity-use-remaining
def test_multi_allocatable_device_with_allocated_capacity_use_remaining() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4))])], allocated=[share_of("device-1", 2)])
    got = w.allocate([claim("claim-0", req(capacity={"c": "2"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "share-1", {"c": 2})]


# upstream: consumable-capacity-multi-allocatable-device-with-allocated-capacity-next-device
def test_multi_allocatable_device_with_allocated_capacity_next_device() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(2)), shared("device-2", c=ranged(2))])],
              allocated=[share_of("device-1", 2)])
    got = w.allocate([claim("claim-0", req(capacity={"c": "2"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-2", "share-1", {"c": 2})]


# upstream: consumable-capacity-multi-allocatable-device-with-no-available-consumable-capacity
def test_multi_allocatable_device_with_no_available_consumable_capacity() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4))])],
              allocated=[share_of("device-1", 2, "a"), share_of("device-1", 2, "b")])
    got = w.allocate([claim("claim-0", req(capacity={"c": "2"}))])
    assert isinstance(got, Unallocatable)
    assert got.why == "all-taken"


# upstream: consumable-capacity-multi-allocatable-device-with-missing-capacity-request,
#   -allocation-mode-all-with-missing-capacity-request
def test_multi_allocatable_device_with_missing_capacity_request() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(1))])])
    assert isinstance(w.allocate([claim("claim-0", req(capacity={"other": "1"}))]), Unallocatable)
    assert isinstance(w.allocate([claim("claim-0", req(mode="All", capacity={"other": "1"}))]), Unallocatable)


# upstream: consumable-capacity-multi-allocatable-device-allocation-mode-all-filter-out-insufficient-capacity
def test_multi_allocatable_device_allocation_mode_all_filter_out_insufficient_capacity() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(1)), shared("device-2", c=cap(2))])])
    got = w.allocate([claim("claim-0", req(mode="All", capacity={"c": "2"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-2", "share-1", {"c": 2})]


# upstream: consumable-capacity-multi-allocatable-device-allocation-mode-all-in-use-insufficient, -in-use-sufficient
def test_multi_allocatable_device_allocation_mode_all_in_use_insufficient() -> None:
    # A device whose static capacity fits but whose remaining capacity does not stays among "all"
    # and makes the request fail.
    w = World([slice_("slice-1", [shared("device-1", c=cap(2))])], allocated=[share_of("device-1", 1)])
    assert isinstance(w.allocate([claim("claim-0", req(mode="All", capacity={"c": "2"}))]), Unallocatable)
    got = w.allocate([claim("claim-0", req(mode="All", capacity={"c": "1"}))])
    assert isinstance(got, list)


# upstream: consumable-capacity-dedicated-device-with-consumable-capacity-request
def test_consumable_capacity_dedicated_device_with_capacity_request() -> None:
    w = World([slice_("slice-1", [dev("device-1", capacity={"c": cap(1)}), dev("device-2", capacity={"c": cap(2)})])])
    got = w.allocate([claim("claim-0", req(capacity={"c": "2"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-2", "", {})]  # a dedicated device: no share, nothing consumed


# upstream: consumable-capacity-with-multi-allocatable-device-backtrack
def test_consumable_capacity_with_multi_allocatable_device_backtrack() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(2), ), dev("device-2", {"x": 1})])])
    c = claim("claim-0", req("req-0", capacity={"c": "1"}), req("req-1", capacity={"c": "2"}))
    got = w.allocate([c])
    assert isinstance(got, Unallocatable)


# upstream: allow-multiple-allocations-not-allocate-multi-allocatable-device-which-already-dedicated
def test_allow_multiple_allocations_not_allocate_device_which_already_dedicated() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", [shared("device-1", c=cap(4))])], allocated=[taken])
    assert isinstance(w.allocate([claim("claim-0", req(capacity={"c": "1"}))]), Unallocatable)


# upstream: allow-multiple-allocations-exclude-multi-allocatable-device-by-class-selector
def test_allow_multiple_allocations_exclude_by_class_selector() -> None:
    multi_only = cls("class-a", "driver-a", "device.allowMultipleAllocations == true")
    w = World([slice_("slice-1", [dev("device-1"), shared("device-2")])], classes=[multi_only])
    assert w.devices_of([claim()]) == [[("req-0", "device-2")]]


# upstream: allow-multiple-allocations-with-partitionable-device
def test_allow_multiple_allocations_with_partitionable_device_charges_counters_once() -> None:
    w = World([slice_("slice-1", [dev("device-1", multi=True, counters=[uses(1, name="c")]),
                                  dev("device-2", counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")])])
    # Two shares of device-1 take its counter once; device-2 then finds none left.
    got = w.allocate([claim("claim-0"), claim("claim-1")])
    assert isinstance(got, list)
    assert [r.device for a in got for r in a.results] == ["device-1", "device-1"]
    w.in_use.add(got[0])
    again = w.allocate([claim("claim-2")])
    assert isinstance(again, list)
    assert again[0].results[0].device == "device-1"  # the counter is not charged again across cycles


def test_partitionable_empty_capacity_multiple_share_backtrack_keeps_counter_ownership() -> None:
    kind = 'device.attributes["driver-a"].kind == '
    w = World([slice_("slice-1", [dev("device-1", {"kind": "shared", "s": "red"}, multi=True,
                                      counters=[uses(1, name="c")]),
                                  dev("device-2", {"kind": "fallback", "s": "blue"}),
                                  dev("device-3", {"kind": "gate", "s": "blue"})], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")])])
    c0 = claim("claim-0", req("req-0", selectors=[kind + '"shared"']))
    c1 = claim("claim-1", req("req-1", selectors=['device.attributes["driver-a"].s != ""']),
               req("req-2", selectors=[kind + '"gate"']), req("req-3", selectors=[kind + '"shared"']),
               constraints=[DeviceConstraint(requests=("req-1", "req-2"), match_attribute="driver-a/s")])
    got = w.allocate([c0, c1])
    assert isinstance(got, list)
    assert [[(r.request, r.device) for r in a.results] for a in got] == [
        [("req-0", "device-1")], [("req-1", "device-2"), ("req-2", "device-3"), ("req-3", "device-1")]]


def test_consumable_capacity_negative_request_aborts() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(10))])])
    with pytest.raises(DeviceError, match="negative"):
        w.allocate([claim("claim-0", req(capacity={"c": "-5"}))])


# upstream: consumable-capacity-range-policy-request-above-int64-rejected, -rounded-value-overflow-rejected,
#   -overflow-aborts-not-skip, -allocation-mode-all-overflow-aborts
@pytest.mark.parametrize("amount", ["18446744073709551616", "9223372036854775807"])
def test_consumable_capacity_range_policy_overflow_is_an_error(amount: str) -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4)),
                                  shared("device-2", c=cap("36893488147419103232"))])])
    with pytest.raises(DeviceError, match="cannot be represented"):
        w.allocate([claim("claim-0", req(capacity={"c": amount}))])
    with pytest.raises(DeviceError, match="cannot be represented"):
        w.allocate([claim("claim-0", req(mode="All", capacity={"c": amount}))])


# upstream: consumable-capacity-fractional-range-gate-disabled. DRAFractionalCapacityRange is off in
# kube-scheduler v1.37.2 by default, so the range is computed in whole numbers, each rounded up
# (Quantity.Value()): min 200m and step 100m are 1 and 1, and 200m or 250m consume 1 (with the
# gate on, upstream's -gate-enabled-round-up, 250m would consume 300m).
def test_consumable_capacity_fractional_range_is_whole_numbers_with_the_gate_off() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(1, default="200m", min_="200m", step="100m", max_=1))])])
    for asked, share in (("200m", "share-1"), ("250m", "share-2")):
        got = w.allocate([claim("claim-0", req(capacity={"c": asked}))])
        assert isinstance(got, list)
        assert consumed(got[0]) == [("device-1", share, {"c": Fraction(1)})]
        assert got[0].results[0].consumed_capacity["c"].text == "1"
    got = w.allocate([claim("claim-0")])  # no request: the default, as it is
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "share-3", {"c": Fraction(1, 5)})]


def test_consumable_capacity_requests_are_not_modified() -> None:
    c = claim("claim-0", req(capacity={"c": "3"}))
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4))])])
    w.allocate([c])
    assert c.spec.requests[0].exactly is not None
    assert c.spec.requests[0].exactly.capacity["c"].value == 3


# upstream: distinct-constraint-two-multi-allocatable-devices-with-distinct-constraint
def test_distinct_constraint_two_multi_allocatable_devices() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}, multi=True), dev("device-2", {"n": 2}, multi=True)])])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-0", "device-2")]]


# upstream: distinct-constraint-one-multi-allocatable-device-with-distinct-constraint
def test_distinct_constraint_one_multi_allocatable_device() -> None:
    # One shareable device cannot serve two requests that must differ.
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}, multi=True)])])
    c = claim("claim-0", req("req-0"), req("req-1"), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert isinstance(w.allocate([c]), Unallocatable)


# -- binding conditions -----------------------------------------------------------------------------


# upstream: device-binding-conditions
def test_device_binding_conditions_are_copied() -> None:
    w = World([slice_("slice-1", [dev("device-1", binding=["IsPrepare"], binding_failure=["BindingFailed"])])])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    (r,) = got[0].results
    assert (r.binding_conditions, r.binding_failure_conditions) == (("IsPrepare",), ("BindingFailed",))


def test_binding_conditions_with_and_without() -> None:
    w = World([slice_("slice-1", [dev("device-1"), dev("device-2", binding=["IsPrepare"])])])
    got = w.allocate([claim("claim-0", req("req-0"), req("req-1"))])
    assert isinstance(got, list)
    assert [r.binding_conditions for r in got[0].results] == [(), ("IsPrepare",)]


def test_devices_that_bind_at_once_are_preferred() -> None:
    # Pools with binding conditions come after the others, whatever their names.
    w = World([slice_("slice-1", [dev("device-1", binding=["IsPrepare"])], pool="pool-0"),
               slice_("slice-2", [dev("device-1")], pool="pool-9")])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].results[0].pool == "pool-9"


# upstream: node-restriction
def test_node_restriction_binds_to_node() -> None:
    from koordpy.api.objects import NodeSelectorTerm, Requirement
    earth = (NodeSelectorTerm(match_expressions=(Requirement(key="planet", operator="In", values=("earth",)),)),)
    w = World([slice_("slice-1", [dev("device-1", binds_to_node=True)], selector=earth)])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].node_selector == local()


# -- hostile input and the time bound ---------------------------------------------------------------


def test_a_pool_of_10000_devices_allocates_quickly() -> None:
    import time
    w = World([slice_("slice-1", devs(10_000))])
    start = time.process_time()
    got = w.allocate([claim("claim-0", req(count=32))])
    assert isinstance(got, list)
    assert time.process_time() - start < 2.0


def test_a_search_that_cannot_succeed_stops_at_the_time_bound() -> None:
    # 40 devices with 15 distinct values, 16 wanted all distinct: the search would try every
    # combination of distinct devices; the clock (one tick a look) stops it and the node says so.
    ticks = iter(range(10**9))
    w = World([slice_("slice-1", [dev(f"device-{i:02}", {"n": i % 15}) for i in range(40)])])
    w.allocator.clock = lambda: float(next(ticks))
    w.allocator.timeout = 100.0
    c = claim("claim-0", req(count=16), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    # An error in kube-scheduler ("potentially transient"), not a node that does not fit.
    with pytest.raises(DeviceError, match="node node-1: the device search ran out of its time bound"):
        w.allocate([c])


def test_duplicate_device_names_across_slices_make_the_pool_invalid() -> None:
    w = World([slice_("slice-1", devs(3), count=2), slice_("slice-2", devs(3, 2), count=2)])
    got = w.allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert got.why == "pool-invalid"
    assert "duplicate device name device-2" in got.detail


def test_capacity_shares_one_time_bound() -> None:
    # The count gives every pod's search the same deadline rather than 10 s each.
    w = World([slice_("slice-1", [dev(f"device-{i}", {"n": i}) for i in range(6)])])
    seen: list[float | None] = []
    inner = w.allocator.allocate

    def spy(*args: Any, **kw: Any) -> Any:
        seen.append(kw.get("deadline"))
        return inner(*args, **kw)

    w.allocator.allocate = spy  # type: ignore[method-assign]
    constrained = spec(req(count=2), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert w.allocator.capacity(node(), [constrained], 10, 0.0) == 3
    assert len(seen) == 4 and len(set(seen)) == 1 and seen[0] is not None


def test_a_deadline_already_past_stops_a_long_search() -> None:
    w = World([slice_("slice-1", [dev(f"device-{i:02}", {"n": i % 15}) for i in range(40)])])
    c = claim("claim-0", req(count=16), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    with pytest.raises(DeviceError, match="ran out of its time bound"):
        w.allocator.allocate(node(), [c], 0.0, deadline=w.allocator.clock() - 1)
    assert w.allocator.steps <= 256


def test_capacity_fast_path_skips_devices_whose_policy_refuses_a_whole_device() -> None:
    # A device whose capacity policy admits no request without an amount (no default, the full
    # value not a valid value) is not usable; the count must not include it.
    odd = cap(4, values=[1, 2])
    w = World([slice_("slice-1", [dev("device-1", capacity={"c": odd}), dev("device-2")])])
    assert w.allocator.capacity(node(), [spec(req())], 10, 0.0) == 1


# -- more of upstream's table ------------------------------------------------------------------------


def test_empty_class() -> None:
    with pytest.raises(DeviceError, match="request req-0: missing device class name"):
        World([slice_("slice-1", [dev("device-1")])]).allocate([claim("claim-0", req("req-0", ""))])


# upstream: exact-count-total-overflows-claim-limit, exact-count-total-would-wrap-to-zero
@pytest.mark.parametrize("n", [2, 4])
def test_exact_count_totals_too_large_for_the_claim(n: int) -> None:
    huge = 2**62 + 1
    c = claim("claim-0", *(req(f"req-{i}", count=huge) for i in range(n)))
    with pytest.raises(DeviceError, match="exceeds the claim limit"):
        World([]).allocate([c])


def test_all_devices_no_slices() -> None:
    assert why(World([]).allocate([claim("claim-0", req(mode="All"))])) == "no-device-matches"


# upstream: all-devices-slice-without-devices-prioritized-list, all-devices-no-slices-prioritized-list
def test_all_devices_slice_without_devices_prioritized_list() -> None:
    w = World([slice_("slice-1", [])], classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0"), exact(CLASS_B, name="subReq-1")))
    got = w.allocate([c])
    assert isinstance(got, Unallocatable)


def test_all_devices_some_allocated_prioritized_list() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", devs(2, 1))], allocated=[taken])
    c = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0"), exact(name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-2")]]


def test_prioritized_list_overflowing_first_subrequest_is_pruned() -> None:
    w = World([slice_("slice-1", devs(2, 1))])
    c = claim("claim-0", req("req-0"), first_available("req-1", exact(count=2**62, name="subReq-0"),
                                                       exact(name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1/subReq-1", "device-2")]]
    assert w.allocator.steps == 8  # upstream's count of allocateOne calls


def test_prioritized_list_allocation_mode_all_multiple_requests() -> None:
    w = World([slice_("slice-1", devs(2, 1))])
    c = claim("claim-0", req("req-0"),
              first_available("req-1", exact(mode="All", name="subReq-0"), exact(name="subReq-1")))
    # req-0 holds device-1, so "All" cannot have every device: the second alternative gets one.
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1/subReq-1", "device-2")]]


def test_prioritized_list_allocation_mode_all_with_selectors_multiple_pools() -> None:
    big = 'device.attributes["driver-a"].big == true'
    w = World([slice_("slice-1", [dev("device-1", {"big": True}), dev("device-2", {"big": False})]),
               slice_("slice-2", [dev("device-3", {"big": True})], pool="pool-2")])
    c = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0", selectors=[big]),
                                         exact(name="subReq-1")))
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(r.request, r.pool, r.device) for r in got[0].results] == [("req-0/subReq-0", "pool-1", "device-1"),
                                                                        ("req-0/subReq-0", "pool-2", "device-3")]


# upstream: prioritized-list-allocation-mode-all-with-selectors-multiple-pools-across-nodes
def test_prioritized_list_allocation_mode_all_multiple_pools_across_nodes() -> None:
    # Only the devices that reach the node count for "All".
    w = World([slice_("slice-1", [dev("device-1")]), slice_("slice-2", [dev("device-2")], node=NODE2, pool="pool-2")])
    c = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0"), exact(name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-0", "device-1")]]


def test_prioritized_list_max_allocation_allocation_mode_all() -> None:
    # "All" would be 31 devices and req-1 two more: past 32, so the second alternative is taken.
    w = World([slice_("slice-1", devs(31)), slice_("slice-b", devs(2), pool="pool-2", driver=DRIVER_B)],
              classes=[cls(), cls(CLASS_B, DRIVER_B)])
    c = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0"), exact(count=2, name="subReq-1")),
              req("req-1", CLASS_B, 2))
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-0"), ("req-0/subReq-1", "device-1"),
                                  ("req-1", "device-0"), ("req-1", "device-1")]]
    assert w.allocator.steps == 42  # upstream's count of allocateOne calls


def test_allocation_mode_all_with_multi_host_resource_pool() -> None:
    w = World([slice_("slice-1", [dev("device-1")], count=2),
               slice_("slice-2", [dev("device-2")], node=NODE2, count=2)])
    assert w.devices_of([claim("claim-0", req(mode="All"))]) == [[("req-0", "device-1")]]


# upstream: multi-host-resource-pool-incomplete-update-from-node-1-to-node-2, -from-node-2-to-node-1
@pytest.mark.parametrize("first,second", [("node-1", NODE2), (NODE2, "node-1")])
def test_multi_host_resource_pool_incomplete_update(first: str, second: str) -> None:
    w = World([slice_("slice-1a", [dev("device-1")], node=first, count=2, generation=1),
               slice_("slice-1b", [dev("device-2")], node=first, count=2, generation=1),
               slice_("slice-2a", [dev("device-1")], node=second, count=2, generation=2)])
    got = w.allocate([claim()])
    if first == "node-1":
        # node-1 sees only its own two slices: complete by themselves, the old generation.
        assert isinstance(got, list)
    else:
        # node-1 has one slice of the new generation out of two: incomplete.
        assert why(got) == "pool-incomplete"


def test_partitionable_devices_counter_cache_scoped_by_pool_id() -> None:
    w = World([slice_("slice-1", [dev("device-1", counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")]),
               slice_("slice-3", [dev("device-2", counters=[uses(2, name="c")])], count=2, driver=DRIVER_B),
               slice_("slice-4", [], count=2, counters=[counters(2, name="c")], driver=DRIVER_B)],
              classes=[cls(), cls(CLASS_B, DRIVER_B)])
    got = w.devices_of([claim("claim-0"), claim("claim-1", req("req-1", CLASS_B))])
    assert got == [[("req-0", "device-1")], [("req-1", "device-2")]]


def test_partitionable_devices_counter_quantities_are_not_modified() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    slices = [slice_("slice-1", [dev("device-1", counters=[uses("9000000000000000000", name="c")]),
                                 dev("device-2", counters=[uses(1, name="c")])], count=2),
              slice_("slice-2", [], count=2, counters=[counters("9000000000000000001", name="c")])]
    w = World(slices, allocated=[taken])
    assert w.devices_of([claim()]) == [[("req-0", "device-2")]]
    assert slices[1].shared_counters[0].counters["c"].value == 9000000000000000001
    assert w.devices_of([claim()]) == [[("req-0", "device-2")]]  # and again: nothing was spent


def test_partitionable_devices_multiple_pools() -> None:
    w = World([slice_("slice-1", [dev("device-1", counters=[uses("6Gi")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters("8Gi")]),
               slice_("slice-3", [dev("device-2", counters=[uses("6Gi")])], count=2, pool="pool-2"),
               slice_("slice-4", [], count=2, counters=[counters("8Gi")], pool="pool-2")])
    got = w.allocate([claim("claim-0", req(count=2))])
    assert isinstance(got, list)
    assert [(r.pool, r.device) for r in got[0].results] == [("pool-1", "device-1"), ("pool-2", "device-2")]


def test_partitionable_devices_multiple_counter_sets() -> None:
    w = World([slice_("slice-1", [dev("device-1", counters=[uses("4Gi"), uses("4Gi", counter_set="counter-set-2")]),
                                  dev("device-2", counters=[uses("4Gi", counter_set="counter-set-2")])], count=2),
               slice_("slice-2", [], count=2,
                      counters=[counters("8Gi"), counters("6Gi", counter_set="counter-set-2")])])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]
    assert isinstance(w.allocate([claim("claim-0", req(count=2))]), Unallocatable)  # counter-set-2: 8Gi > 6Gi


def test_partitionable_devices_validation_error_on_non_targeting_slice() -> None:
    w = World([slice_("slice-1", [], count=3, counters=[counters("8Gi")]),
               slice_("slice-2", [dev("device-1", counters=[uses("6Gi")])], count=3),
               slice_("slice-3", [dev("device-3", counters=[uses("6Gi", counter_set="counter-set-2")])], node=NODE2,
                      count=3)])
    assert why(w.allocate([claim()])) == "pool-invalid"


# upstream: partitionable-devices-per-device-node-selection-node-selector-multiple-devices
def test_partitionable_devices_per_device_node_selection_multiple_devices() -> None:
    w = World([slice_("slice-1", [dev("device-1", node_sel=NodeSelection(node_name=NODE2), counters=[uses("4Gi")]),
                                  dev("device-2", node_sel=NodeSelection(node_name="node-1"), counters=[uses("4Gi")]),
                                  dev("device-3", node_sel=NodeSelection(all_nodes=True), counters=[uses("4Gi")])],
                      per_device=True, count=2),
               slice_("slice-2", [], count=2, counters=[counters("8Gi")], all_nodes=True)])
    got = w.allocate([claim("claim-0", req(count=2))])
    assert isinstance(got, list)
    assert [r.device for r in got[0].results] == ["device-2", "device-3"]
    assert got[0].node_selector == local()


# upstream: partitionable-devices-with-binding-conditions-and-taints(-tolerated)
def test_partitionable_devices_with_binding_conditions_and_taints() -> None:
    w = World(partitioned(dev("device-1", counters=[uses("4Gi")], binding=["IsPrepare"], taints=[NO_SCHEDULE])))
    assert why(w.allocate([claim()])) == "taint-not-tolerated"
    got = w.allocate([claim("claim-0", req(tolerations=[TOLERATE_ALL]))])
    assert isinstance(got, list)
    assert got[0].results[0].binding_conditions == ("IsPrepare",)


def test_partitionable_consumable_capacity_shared_device_counter_not_recharged() -> None:
    existing = claim("holder", allocation=Allocation(results=(result("req-0", "device-1", share_id="s0"),)))
    w = World([slice_("slice-1", [dev("device-1", multi=True, counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")])], allocated=[existing])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "share-1", {})]


def test_allow_multiple_allocations_with_shared_device_counter_cross_cycle() -> None:
    # device-1 (shared, in use) holds the pool's only counter; device-2 would need it too.
    existing = claim("holder", allocation=Allocation(results=(
        result("req-0", "device-1", share_id="s0", consumed_capacity={"c": q(1)}),)))
    mode_b = 'device.attributes["driver-a"].mode == "b"'
    w = World([slice_("slice-1", [dev("device-1", {"mode": "a"}, capacity={"c": cap(1)}, multi=True,
                                      counters=[uses(1, name="c")]),
                                  dev("device-2", {"mode": "b"}, capacity={"c": cap(1)}, multi=True,
                                      counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")])], allocated=[existing])
    assert isinstance(w.allocate([claim("claim-0", req(selectors=[mode_b], capacity={"c": "1"}))]), Unallocatable)


def test_allow_multiple_allocations_not_allocate_dedicated_device_which_change_from_multi_allocatable() -> None:
    existing = claim("holder", allocation=Allocation(results=(
        result("req-0", "device-1", share_id="s0", consumed_capacity={"c": q(1)}),)))
    w = World([slice_("slice-1", [dev("device-1", capacity={"c": ranged(2)})])], allocated=[existing])
    assert isinstance(w.allocate([claim("claim-0", req(capacity={"c": "1"}))]), Unallocatable)


def test_consumable_capacity_multi_allocatable_device_with_subrequest() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4))])])
    c = claim("claim-0", first_available("req-0", exact(name="subReq-0", capacity={"c": "6"}),
                                         exact(name="subReq-1", capacity={"c": "1"})))
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(r.request, {k: v.value for k, v in r.consumed_capacity.items()}) for r in got[0].results] == [
        ("req-0/subReq-1", {"c": Fraction(2)})]


# upstream:
#   consumable-capacity-multi-allocatable-device-allocation-mode-all-allocating-sufficient, -allocating-insufficient
@pytest.mark.parametrize("held,ok", [(0, True), (2, False)])
def test_consumable_capacity_allocation_mode_all_allocating(held: int, ok: bool) -> None:
    # Another claim of the same pod takes part of the device first (allocating-sufficient /
    # allocating-insufficient).
    w = World([slice_("slice-1", [shared("device-1", c=cap(4))])])
    first = claim("claim-0", req(capacity={"c": str(2 + held)}))
    every = claim("claim-1", req(mode="All", capacity={"c": "2"}))
    assert isinstance(w.allocate([first, every]), list) is ok


def test_check_combinations_across_slices_and_pools() -> None:
    # The two devices that match each other sit in different pools, after others that do not.
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}), dev("device-2", {"n": 2})]),
               slice_("slice-2", [dev("device-3", {"n": 3})], pool="pool-2"),
               slice_("slice-3", [dev("device-4", {"n": 2})], pool="pool-3")])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(match_attribute="driver-a/n")])
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(r.pool, r.device) for r in got[0].results] == [("pool-1", "device-2"), ("pool-3", "device-4")]


def test_check_combinations_with_prioritized_list() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}), dev("device-2", {"n": 2}), dev("device-3", {"n": 2})])])
    c = claim("claim-0", first_available("req-0", exact(count=3, name="subReq-0"), exact(count=2, name="subReq-1")),
              constraints=[DeviceConstraint(match_attribute="driver-a/n")])
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-2"), ("req-0/subReq-1", "device-3")]]


def test_distinct_constraint_single_request_multiple_devices_attribute_set() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"n": 1}), dev("device-2"), dev("device-3", {"n": 2})])])
    c = claim("claim-0", req(count=2), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-0", "device-3")]]


def test_tainted_two_devices_prioritized_list_tolerated() -> None:
    w = World([slice_("slice-1", [dev("device-1", taints=[NO_SCHEDULE]), dev("device-2", taints=[NO_EXECUTE])])])
    c = claim("claim-0", first_available("req-0", exact(count=2, name="subReq-0", tolerations=[TOLERATE_ALL]),
                                         exact(name="subReq-1")))
    assert w.devices_of([c]) == [[("req-0/subReq-0", "device-1"), ("req-0/subReq-0", "device-2")]]


# -- the search's work: upstream's counts of allocateOne calls ---------------------------------------


# upstream:
#   check-combinations-within-single-request-{single-pool-single-slice,single-pool-multiple-slices,multiple-pools-multip
#   le-slices,many-pools}
@pytest.mark.parametrize("layout", ["one-slice", "two-slices", "pools-and-slices", "four-pools"])
def test_check_combinations_within_single_request(layout: str) -> None:
    # Five wanted, four exist: every combination is tried once, never a permutation (16 steps).
    one = [dev(f"device-{i}") for i in range(1, 5)]
    slices = {
        "one-slice": [slice_("slice-1", one)],
        "two-slices": [slice_("slice-1", one[:2], count=2), slice_("slice-2", one[2:], count=2)],
        "pools-and-slices": [slice_("slice-1", one[:1], count=2), slice_("slice-2", one[1:2], count=2),
                             slice_("slice-3", one[2:], pool="pool-2")],
        "four-pools": [slice_(f"slice-{i}", [d], pool=f"pool-{i}") for i, d in enumerate(one, 1)],
    }[layout]
    w = World(slices)
    assert isinstance(w.allocate([claim("claim-0", req(count=5))]), Unallocatable)
    assert w.allocator.steps == 16


TYPE_X = 'device.attributes["driver-a"].type == "X"'
TYPE_Y = 'device.attributes["driver-a"].type == "Y"'


# upstream: check-combinations-with-backtracking
def test_check_combinations_with_backtracking_counts() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"type": "X"}), dev("device-2", {"type": "Y"}),
                                  dev("device-3", {"type": "Y"})])])
    c = claim("claim-0", req("req-1", count=2), req("req-2", selectors=[TYPE_X]))
    assert w.devices_of([c]) == [[("req-1", "device-2"), ("req-1", "device-3"), ("req-2", "device-1")]]
    assert w.allocator.steps == 12


# upstream: check-combinations-with-backtracking-across-slices-and-pools
def test_check_combinations_with_backtracking_across_slices_and_pools_counts() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"type": "X"})], count=2),
               slice_("slice-2", [dev("device-2", {"type": "Y"})], count=2),
               slice_("slice-3", [dev("device-3", {"type": "Y"}, binding=["IsPrepare"])], pool="pool-2")])
    c = claim("claim-0", req("req-1", count=2), req("req-2", selectors=[TYPE_X]))
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(r.request, r.pool, r.device, r.binding_conditions) for r in got[0].results] == [
        ("req-1", "pool-1", "device-2", ()), ("req-1", "pool-2", "device-3", ("IsPrepare",)),
        ("req-2", "pool-1", "device-1", ())]
    assert w.allocator.steps == 12


# upstream: check-combinations-with-prioritized-list
def test_check_combinations_with_prioritized_list_counts() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"type": "X"}), dev("device-2", {"type": "Y"}),
                                  dev("device-3", {"type": "Y"})])])
    c = claim("claim-0",
              first_available("req-1", exact(count=3, name="subReq-0", selectors=[TYPE_Y]),
                              exact(count=2, name="subReq-1")),
              first_available("req-2", exact(count=2, name="subReq-0"), exact(name="subReq-1", selectors=[TYPE_X])))
    assert w.devices_of([c]) == [[("req-1/subReq-1", "device-2"), ("req-1/subReq-1", "device-3"),
                                  ("req-2/subReq-1", "device-1")]]
    assert w.allocator.steps == 26


def test_fits_answers_as_allocate_does_without_allocations() -> None:
    taken = claim("other", allocation=Allocation(results=(result("req-0", "device-1"),)))
    w = World([slice_("slice-1", devs(2, 1))], allocated=[taken])
    assert w.allocator.fits(node(), [claim()], 0.0) is None
    got = w.allocator.fits(node(), [claim("claim-0", req(count=2))], 0.0)
    assert isinstance(got, Unallocatable)
    assert got == w.allocate([claim("claim-0", req(count=2))])
    assert why(w.allocator.fits(node(), [allocated_claim(sel=local(NODE2))], 0.0)) == "not-on-node"


# -- the node score of prioritized lists (the plugin's *-prioritized-list-scoring cases) -------------


def scores(w: World, claims: Sequence[ResourceClaim], nodes: Sequence[str]) -> dict[str, int]:
    from koordpy.devices.allocator import first_available_score
    out = {}
    for name in nodes:
        got = w.allocate(claims, node(name))
        assert isinstance(got, list), got
        out[name] = first_available_score(claims, got)
    return out


def per_node(counts: dict[str, int]) -> list[ResourceSlice]:
    return [slice_(f"slice-{n}", [dev(f"instance-{i}") for i in range(1, k + 1)], node=n, pool=n)
            for n, k in counts.items()]


def test_single_claim_prioritized_list_scoring() -> None:
    flag = 'device.attributes["driver-a"].flag == true'
    w = World([slice_("slice-1", [dev("instance-1", {"flag": True})], node="node-1", pool="node-1"),
               slice_("slice-2", [dev("instance-1", {"flag": False})], node=NODE2, pool=NODE2)])
    c = claim("claim-0", first_available("req-1", exact(name="subreq-1", selectors=[flag]), exact(name="subreq-2")))
    assert scores(w, [c], ["node-1", NODE2]) == {"node-1": 8, NODE2: 7}


def test_multiple_claims_prioritized_list_scoring() -> None:
    w = World(per_node({"node-1": 4, NODE2: 2, "node-3": 1}))
    c1 = claim("claim-1", first_available("req-1", exact(name="subreq-1")))
    c2 = claim("claim-2", first_available("req-1", *(exact(count=4 - i, name=f"subreq-{i + 1}") for i in range(4))))
    assert scores(w, [c1, c2], ["node-1", NODE2]) == {"node-1": 15, NODE2: 13}
    assert isinstance(w.allocate([c1, c2], node("node-3")), Unallocatable)


def test_multiple_requests_prioritized_list_scoring() -> None:
    w = World(per_node({"node-1": 4, NODE2: 3, "node-3": 2}))
    c = claim("claim-0", first_available("req-1", exact(count=2, name="subreq-1"), exact(name="subreq-2")),
              first_available("req-2", exact(count=2, name="subreq-1"), exact(name="subreq-2")))
    assert scores(w, [c], ["node-1", NODE2, "node-3"]) == {"node-1": 16, NODE2: 15, "node-3": 14}


def test_cel_runtime_error_in_kube_schedulers_words() -> None:
    # The plugin's CEL-runtime-error-for-one-of-two-nodes: the claim, the selector, the device and
    # CEL's own hint.
    w = World([slice_("slice-1", [dev("instance-1")], pool="worker", driver="some-driver")],
              classes=[cls("class-a", "some-driver")])
    c = ResourceClaim(namespace="default", name="my-pod-my-resource",
                      spec=claim("x", req(selectors=['device.attributes["some-driver"].healthy'])).spec)
    with pytest.raises(DeviceError) as got:
        w.allocate([c])
    assert got.value.message == (
        "claim default/my-pod-my-resource: selector #0 on device some-driver/worker/instance-1: CEL runtime "
        "error: no such key: healthy. consider using CEL optional chaining (.? followed by orValue()) or "
        "guarding the check with has() for optional fields")
    assert got.value.claim == "default/my-pod-my-resource"
    # Another node whose device has the attribute is fine.
    ok = World([slice_("slice-2", [dev("instance-1", {"healthy": True})], node=NODE2, pool="worker2",
                       driver="some-driver")], classes=[cls("class-a", "some-driver")])
    assert isinstance(ok.allocate([c], node(NODE2)), list)


def test_the_time_bound_holds_when_each_step_looks_at_many_devices() -> None:
    # 10,000 devices with 7 values, 8 wanted all distinct: each step of the search looks at
    # thousands of devices; the clock is read by devices looked at, so the bound holds.
    import time
    w = World([slice_("slice-1", [dev(f"device-{i}", {"n": i % 7}) for i in range(10_000)])])
    w.allocator.timeout = 0.5
    start = time.monotonic()
    with pytest.raises(DeviceError, match="ran out of its time bound"):
        w.allocate([claim("claim-0", req(count=8), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])])
    assert time.monotonic() - start < 1.5


# -- the last of upstream's table that applies --------------------------------------------------------


def test_partitionable_devices_counter_cache_not_crossed_between_driver_schemas() -> None:
    w = World([slice_("slice-1", [dev("device-1", counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")]),
               slice_("slice-3", [dev("device-2", counters=[uses(2, counter_set="counter-set-2", name="d")])], count=2,
                      driver=DRIVER_B),
               slice_("slice-4", [], count=2, counters=[counters(1, counter_set="counter-set-2", name="d")],
                      driver=DRIVER_B)],
              classes=[cls(), cls(CLASS_B, DRIVER_B)])
    assert isinstance(w.allocate([claim("claim-0"), claim("claim-1", req("req-1", CLASS_B))]), Unallocatable)


def test_partitionable_consumable_capacity_backtrack_releases_counter() -> None:
    kind = 'device.attributes["driver-a"].kind == '
    w = World([slice_("slice-1", [dev("device-1", {"kind": "shared"}, multi=True, counters=[uses(1, name="c")]),
                                  dev("device-2", {"kind": "shared"}),
                                  dev("device-3", {"kind": "counteronly"}, counters=[uses(1, name="c")])], count=2),
               slice_("slice-2", [], count=2, counters=[counters(1, name="c")])])
    c = claim("claim-0", req("req-0", selectors=[kind + '"shared"']), req("req-1", selectors=[kind + '"counteronly"']))
    assert w.devices_of([c]) == [[("req-0", "device-2"), ("req-1", "device-3")]]


def mem_cap(gi: int) -> str:
    return f'device.capacity["driver-a"].memory.compareTo(quantity("{gi}Gi")) >= 0'


def test_partitionable_devices_multiple_capacity_pools() -> None:
    def d(name: str, gi: int, cpus: int) -> Device:
        return dev(name, capacity={"memory": cap(f"{gi}Gi"), "cpus": cap(cpus)},
                   counters=[uses(f"{gi}Gi"), uses(cpus, counter_set="counter-set-2", name="cpus")])
    w = World([slice_("slice-1", [d("device-1", 4, 4), d("device-2", 6, 6), d("device-3", 4, 4)], count=2),
               slice_("slice-2", [], count=2, counters=[counters("18Gi"), counters(8, counter_set="counter-set-2",
                                                                                  name="cpus")])])
    c = claim("claim-0", req("req-0"), first_available("req-1", exact(name="subReq-0", selectors=[mem_cap(6)]),
                                                       exact(name="subReq-1", selectors=[mem_cap(4)])))
    assert w.devices_of([c]) == [[("req-0", "device-1"), ("req-1/subReq-1", "device-3")]]


def test_prioritized_list_allocation_mode_all_with_selectors_deviceclass_subset() -> None:
    gen = 'device.attributes["driver-a"].generation == '
    picky = cls("class-a", "driver-a", 'device.attributes["driver-a"].selected')
    w = World([slice_("slice-1", [dev("device-1", {"generation": "v6", "selected": False}),
                                  dev("device-2", {"generation": "v5", "selected": False}),
                                  dev("device-3", {"generation": "v5", "selected": True})])], classes=[picky])
    c = claim("claim-0", first_available("req-0", exact(mode="All", name="subReq-0", selectors=[gen + '"v6"']),
                                         exact(mode="All", name="subReq-1", selectors=[gen + '"v5"'])))
    assert w.devices_of([c]) == [[("req-0/subReq-1", "device-3")]]


def test_consumable_capacity_with_partitionable_device_multiple_capacity_pools() -> None:
    def d(name: str, c0: int) -> Device:
        return dev(name, capacity={"c0": cap(c0), "c1": ranged(4)}, multi=True,
                   counters=[uses(c0, name="c0"), uses(4, counter_set="counter-set-2", name="c1")])
    w = World([slice_("slice-1", [d("device-1", 2), d("device-2", 4), d("device-3", 2)], count=2),
               slice_("slice-2", [], count=2, counters=[counters(4, name="c0"),
                                                        counters(8, counter_set="counter-set-2", name="c1")])])
    at_least = 'device.capacity["driver-a"].c0.compareTo(quantity("{}")) >= 0'
    c = claim("claim-0", req("req-0", capacity={"c0": "1"}), req("req-2", capacity={"c0": "2"}),
              first_available("req-1", exact(name="subReq-0", selectors=[at_least.format(4)], capacity={"c0": "1"}),
                              exact(name="subReq-1", selectors=[at_least.format(2)], capacity={"c0": "1"})))
    got = w.allocate([c])
    assert isinstance(got, list)
    assert [(r.request, r.device, {k: v.value for k, v in r.consumed_capacity.items()}) for r in got[0].results] == [
        ("req-0", "device-1", {"c0": Fraction(1), "c1": Fraction(2)}),
        ("req-2", "device-3", {"c0": Fraction(2), "c1": Fraction(2)}),
        ("req-1/subReq-1", "device-1", {"c0": Fraction(1), "c1": Fraction(2)})]


def test_distinct_constraint_two_requests_with_count_not_distinct() -> None:
    w = World([slice_("slice-1", [dev("device-1", {"s": "value1"}), dev("device-2", {"s": "value2"}),
                                  dev("device-3", {"s": "value1"})])])
    c = claim("claim-0", req("req-0", count=2), req("req-1"),
              constraints=[DeviceConstraint(requests=("req-0", "req-1"), distinct_attribute="driver-a/s")])
    assert why(w.allocate([c])) == "constraint-unmet"


def test_binding_conditions_multiple_devices() -> None:
    w = World([slice_("slice-1", [dev(f"device-{i}", binding=[f"IsPrepare{i}"], binding_failure=[f"BindingFailed{i}"])
                                  for i in range(1, 4)])])
    got = w.allocate([claim("claim-0", req("req-0", count=2), req("req-1"))])
    assert isinstance(got, list)
    assert [(r.request, r.device, r.binding_conditions, r.binding_failure_conditions) for r in got[0].results] == [
        ("req-0", "device-1", ("IsPrepare1",), ("BindingFailed1",)),
        ("req-0", "device-2", ("IsPrepare2",), ("BindingFailed2",)),
        ("req-1", "device-3", ("IsPrepare3",), ("BindingFailed3",))]


def test_partitionable_devices_with_binding_conditions_multi_slices() -> None:
    # Slices are taken in name order within the pool: device-2 (slice-2) before device-1 (slice-4).
    w = World([slice_("slice-4", [dev("device-1", counters=[uses("4Gi")], binding=["IsPrepare"],
                                      binding_failure=["BindingFailed"])], count=4),
               slice_("slice-3", [], count=4, counters=[counters("8Gi")]),
               slice_("slice-2", [dev("device-2", counters=[uses("4Gi", counter_set="counter-set-2")])], count=4),
               slice_("slice-1", [], count=4, counters=[counters("8Gi", counter_set="counter-set-2")])])
    got = w.allocate([claim("claim-0", req(count=2))])
    assert isinstance(got, list)
    assert [(r.device, r.binding_conditions) for r in got[0].results] == [("device-2", ()),
                                                                          ("device-1", ("IsPrepare",))]


def test_partitionable_devices_with_attribute_selector() -> None:
    def d(name: str, special: bool, cpu: str) -> Device:
        return dev(name, {"special": special}, counters=[uses(1, name=cpu),
                                                         uses("10Gi", counter_set="counter-set-2", name="mem")])
    w = World([slice_("slice-1", [d("device-1", True, "cpu1"), d("device-2", False, "cpu2"),
                                  d("device-3", False, "cpu3")], count=2),
               slice_("slice-2", [], count=2, counters=[
                   CounterSet("counter-set-1", {"cpu1": q(1), "cpu2": q(1), "cpu3": q(1)}),
                   counters("30Gi", counter_set="counter-set-2", name="mem")])])
    c = claim("claim-0", req("req-0", count=2), req("req-1", selectors=['device.attributes["driver-a"].special']))
    assert w.devices_of([c]) == [[("req-0", "device-2"), ("req-0", "device-3"), ("req-1", "device-1")]]


def test_consumable_capacity_dedicated_device_with_multiple_consumable_capacity_request() -> None:
    dedicated = cls("class-a", "driver-a", "device.allowMultipleAllocations == false")
    w = World([slice_("slice-1", [dev("device-1", capacity={"c": ranged(2)})])], classes=[dedicated])
    one = req(capacity={"c": "1"})
    assert isinstance(w.allocate([claim("claim-0", one), claim("claim-1", one)]), Unallocatable)
    got = w.allocate([claim("claim-0", one)])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "", {})]


def test_consumable_capacity_multi_allocatable_device_with_range_policy_with_capacity_request() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=ranged(4))])])
    one = req(capacity={"c": "1"})
    assert both(w, claim("claim-0", one), claim("claim-1", one)) == [[("device-1", "share-1", {"c": 2})],
                                                                    [("device-1", "share-2", {"c": 2})]]


def test_partitionable_devices_with_binding_conditions_some_devices_no_conditions() -> None:
    # upstream: also partitionable-devices-with-binding-conditions-multiple
    w = World(partitioned(
        dev("device-1", counters=[uses("2Gi")], binding=["IsPrepare"], binding_failure=["BindingFailed"]),
        dev("device-2", counters=[uses("2Gi")]),
        dev("device-3", counters=[uses("2Gi")], binding=["IsReady"], binding_failure=["BindingTimeout"])))
    got = w.allocate([claim("claim-0", req(count=3))])
    assert isinstance(got, list)
    assert [(r.device, r.binding_conditions, r.binding_failure_conditions) for r in got[0].results] == [
        ("device-1", ("IsPrepare",), ("BindingFailed",)), ("device-2", (), ()),
        ("device-3", ("IsReady",), ("BindingTimeout",))]


def test_consumable_capacity_multi_allocatable_device_allocation_mode_all_filter_out_no_capacity() -> None:
    w = World([slice_("slice-1", [shared("device-1", c=cap(2)), shared("device-2")])])
    got = w.allocate([claim("claim-0", req(mode="All", capacity={"c": "2"}))])
    assert isinstance(got, list)
    assert consumed(got[0]) == [("device-1", "share-1", {"c": 2})]


def test_consumable_capacity_rejection_rolls_back_constraints() -> None:
    # claim-1's "All" alternative passes its constraint on device-1, then finds no capacity left
    # (claim-0 took it): the constraint must forget device-1 before the next alternative.
    attr = 'device.attributes["driver-a"].s == '
    w = World([slice_("slice-1", [dev("device-1", {"s": "cap"}, capacity={"c": cap(2)}, multi=True),
                                  dev("device-2", {"s": "fb"})])])
    c0 = claim("claim-0", req("req-0", selectors=[attr + '"cap"'], capacity={"c": "2"}))
    c1 = claim("claim-1", first_available("req-0", exact(mode="All", name="subReq-0", selectors=[attr + '"cap"'],
                                                         capacity={"c": "2"}),
                                          exact(name="subReq-1", selectors=[attr + '"fb"'])),
               constraints=[DeviceConstraint(match_attribute="driver-a/s")])
    got = w.allocate([c0, c1])
    assert isinstance(got, list)
    assert [[(r.request, r.device) for r in a.results] for a in got] == [[("req-0", "device-1")],
                                                                         [("req-0/subReq-1", "device-2")]]


def test_an_overdrawn_counter_stops_every_device_of_its_pool() -> None:
    # The pool's counters shrank under devices already allocated: kube-scheduler compares every
    # counter of the pool whenever it adds a device, so a device drawing on another counter set
    # of that pool is refused too; a pool whose counters add up is not affected.
    held = claim("held", allocation=Allocation(results=(result("r", "device-0"),)))
    slices = [slice_("slice-1", [dev("device-0", counters=[uses(2, name="a")]),
                                 dev("device-1", counters=[uses(1, counter_set="counter-set-2", name="b")])], count=2),
              slice_("slice-2", [], count=2, counters=[counters(1, name="a"),
                                                       counters(1, counter_set="counter-set-2", name="b")])]
    got = World(slices, allocated=[held]).allocate([claim()])
    assert isinstance(got, Unallocatable)
    assert (got.why, got.detail) == ("all-taken", "0/1")
    fine = [slices[0], slice_("slice-2", [], count=2, counters=[counters(2, name="a"),
                                                                 counters(1, counter_set="counter-set-2", name="b")])]
    assert World(fine, allocated=[held]).devices_of([claim()]) == [[("req-0", "device-1")]]
