"""The allocator against kube-scheduler v1.37.2's structured allocator: our own translation of the
cases of upstream's table (``structured/internal/allocatortesting``) that apply with v1.37.2's
default feature gates, grouped by feature, each named after the upstream case it follows."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.dra import (
    Allocation,
    DeviceCondition,
    DeviceConstraint,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    NodeSelection,
    OpaqueConfig,
    ResourceClaim,
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
    local,
    node,
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
    assert why(w.allocate([claim()])) != ""


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


def test_per_device_node_selection_node_name() -> None:
    w = World([slice_("s1", [dev("device-1", node_sel=NodeSelection(node_name=NODE2)),
                             dev("device-2", node_sel=NodeSelection(node_name="node-1"))], per_device=True)])
    got = w.allocate([claim()])
    assert isinstance(got, list)
    assert got[0].results[0].device == "device-2"
    assert got[0].node_selector == local()


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
    w = World([slice_("slice-1", [dev("device-1")], count=2)])
    got = w.allocate([claim("claim-0", all_req())])  # type: ignore[arg-type]
    assert isinstance(got, Unallocatable)
    assert (got.why, got.request, got.detail) == ("pool-incomplete", "req-0", "driver-a/pool-1")


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


def test_taint_rule_of_another_pool_does_not_apply() -> None:
    rule = DeviceTaintRule(name="rule", driver="driver-a", pool="pool-9", taint=NO_EXECUTE)
    w = World([slice_("slice-1", devs(1, 1))], rules=[rule])
    assert w.devices_of([claim()]) == [[("req-0", "device-1")]]


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


def test_invalid_cel_one_device() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    with pytest.raises(DeviceError, match="claim default/claim-0: selector #0 on device driver-a/pool-1/device-1"):
        w.allocate([claim("claim-0", req(selectors=["runtime-error"]))])


def test_invalid_cel_one_device_class() -> None:
    w = World([slice_("slice-1", [dev("device-1")])], classes=[cls("class-a", "driver-a", "runtime-error")])
    with pytest.raises(DeviceError, match="class class-a: selector #1 on device"):
        w.allocate([claim()])


def test_invalid_cel_all_devices() -> None:
    w = World([slice_("slice-1", [dev("device-1")])])
    with pytest.raises(DeviceError, match="CEL runtime error"):
        w.allocate([claim("claim-0", all_req(selectors=["runtime-error"]))])  # type: ignore[arg-type]


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


def test_with_distinct_constraints_attribute_not_set() -> None:
    w = World([slice_("slice-1", [dev("device-1"), dev("device-2")])])
    c = claim("claim-0", req("req-0"), req("req-1"), constraints=[DeviceConstraint(distinct_attribute="driver-a/n")])
    assert isinstance(w.allocate([c]), Unallocatable)


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
