"""An allocation's validity by the DRA API's rules, independent of any allocator.

Written from the API's documentation (``k8s.io/api/resource/v1`` types), not from kube-scheduler's
allocator nor koordpy's: given the ResourceSlices, the DeviceClasses, the claims in use (allocated),
one node, a pod's claims and the allocation found for each of them, ``violations`` lists every rule
the allocation breaks (empty: valid). The differential test checks both allocators' answers with it.

The rules: a result names a request (or ``request/subrequest``) of its claim, one subrequest per
request; its device exists in the newest generation of a complete, valid pool and can be used on the
node; it matches its class's and its request's selectors and capacity requests; an ExactCount request has ``count``
results, an All request exactly the devices on the node that match; a device is not taken twice
(claims in use included) unless with admin access or as shares of a device that allows multiple
allocations, whose consumed capacity is what the request policy makes of the request and adds up to
at most the device's capacity; a capacity request fits a device's capacity; taints with effect
NoSchedule or NoExecute are tolerated; matchAttribute / distinctAttribute hold within the claim;
counters consumed by allocated devices stay within their pool's shared counter sets; a result carries
its device's binding conditions, and a device that binds to the node pins the allocation; the
allocation's node selector admits the node; a claim allocated before keeps its allocation.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from koordpy.api.dra import (
    Allocation,
    AttrValue,
    Capacity,
    Device,
    DeviceClass,
    DeviceResult,
    DeviceTaintRule,
    ExactRequest,
    NodeSelection,
    ResourceClaim,
    ResourceSlice,
)
from koordpy.api.objects import Node

T = TypeVar("T")

# DRAFractionalCapacityRange: beta in v1.37 but on by default only from --min-compatibility-version
# 1.37, so off in a v1.37.2 kube-scheduler started without flags (test_draref_runs_the_scheduler_
# default_features). Off, a request policy's range is computed in whole numbers (Quantity.Value(),
# rounded up), as the API's CapacityRequestPolicyRange says.
FRACTIONAL_CAPACITY_RANGE = False

# (driver, attributes, capacity, allow_multiple_allocations, expression) -> whether the device matches.
SelectorEval = Callable[[str, Mapping[str, AttrValue], Mapping[str, Capacity], bool, str], bool]


def cel_matches(driver: str, attributes: Mapping[str, AttrValue], capacity: Mapping[str, Capacity],
                multiple: bool, expression: str) -> bool:
    """B's CEL environment (``koordpy.devices.cel``)."""
    from koordpy.devices import cel

    return bool(cel.compile_selector(expression).matches(driver, attributes, capacity, multiple))


@dataclass(frozen=True)
class _Located:
    slice: ResourceSlice
    device: Device


def _qualified(driver: str, name: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _lookup(driver: str, table: Mapping[str, T], qualified: str) -> T | None:
    for key, value in table.items():
        if _qualified(driver, key) == qualified:
            return value
    return None


def _usable(selection: NodeSelection | None, node: Node) -> bool:
    if selection is None:
        return False
    if selection.all_nodes:
        return True
    if selection.node_name:
        return selection.node_name == node.name
    if selection.node_selector is not None:
        return any(t.matches(node.name, dict(node.labels)) for t in selection.node_selector)
    return False


class Pools:
    """The newest generation of every (driver, pool), and whether it is complete and valid."""

    def __init__(self, slices: Sequence[ResourceSlice]) -> None:
        by_pool: dict[tuple[str, str], list[ResourceSlice]] = defaultdict(list)
        for s in slices:
            by_pool[(s.driver, s.pool)].append(s)
        self.devices: dict[tuple[str, str, str], _Located] = {}
        self.usable_pool: dict[tuple[str, str], bool] = {}
        self.counters: dict[tuple[str, str, str, str], Fraction] = {}  # driver, pool, set, counter
        self.newest: dict[tuple[str, str], list[ResourceSlice]] = {}
        for key, group in by_pool.items():
            top = max(s.generation for s in group)
            newest = [s for s in group if s.generation == top]
            self.newest[key] = newest
            complete = len(newest) == newest[0].slice_count and all(s.slice_count == newest[0].slice_count
                                                                     for s in newest)
            names = [d.name for s in newest for d in s.devices]
            valid = len(names) == len(set(names))
            self.usable_pool[key] = complete and valid
            for s in newest:
                for d in s.devices:
                    self.devices[(s.driver, s.pool, d.name)] = _Located(s, d)
                for cs in s.shared_counters:
                    for cname, q in cs.counters.items():
                        self.counters[(s.driver, s.pool, cs.name, cname)] = q.value

    def on_node(self, node: Node) -> list[tuple[tuple[str, str, str], _Located]]:
        """Every device of a complete pool usable on ``node``."""
        out = []
        for key, loc in self.devices.items():
            sel = loc.slice.node if loc.slice.node is not None else loc.device.node
            if self.usable_pool[(key[0], key[1])] and _usable(sel, node):
                out.append((key, loc))
        return out


def _request_of(claim: ResourceClaim, name: str) -> tuple[ExactRequest, str] | None:
    """The ExactRequest a result's request name stands for, and its main request's name."""
    main, _, sub = name.partition("/")
    for r in claim.spec.requests:
        if r.name != main:
            continue
        if not sub:
            return (r.exactly, main) if r.exactly is not None else None
        for s in r.first_available:
            if s.name == sub:
                return s, main
    return None


def _policy_consumption(cap: Capacity, requested: Fraction | None) -> Fraction | None:
    """What one share consumes of a capacity by its request policy (None: the policy refuses it)."""
    p = cap.policy
    if requested is None:
        if p is not None and p.default is not None:
            return p.default.value
        return cap.value.value
    if p is None:
        return requested
    if p.valid_values:
        fits = [v.value for v in p.valid_values if v.value >= requested]
        return min(fits) if fits else None
    if p.valid_min is not None:
        low = p.valid_min.value
        if requested < low:
            amount = low
        elif p.valid_step is None:
            amount = requested
        else:
            step = p.valid_step.value
            fractional = any(q is not None and q.value.denominator != 1
                             for q in (p.valid_min, p.valid_max, p.valid_step))
            if not (FRACTIONAL_CAPACITY_RANGE and fractional):
                # Without the gate the API rounds every quantity up to a whole number first.
                requested, low, step = Fraction(math.ceil(requested)), Fraction(math.ceil(low)), \
                    Fraction(math.ceil(step))
            amount = low + step * math.ceil((requested - low) / step)
        if p.valid_max is not None and amount > p.valid_max.value:
            return None
        return amount
    return requested


def _selected(loc: _Located, req: ExactRequest, classes: Mapping[str, DeviceClass],
              evaluate: SelectorEval) -> bool:
    cls = classes.get(req.device_class)
    if cls is None:
        return False
    d, driver = loc.device, loc.slice.driver
    for expr in (*cls.selectors, *req.selectors):
        if not evaluate(driver, d.attributes, d.capacity, d.allow_multiple_allocations, expr):
            return False
    # A capacity request filters as a selector would (the API: "semantically equivalent to a CEL
    # selector" comparing the capacity), after the request policy has rounded it up.
    for name, q in req.capacity.items():
        cap = _lookup(driver, d.capacity, _qualified(driver, name))
        if cap is None:
            return False
        amount = _policy_consumption(cap, q.value) if d.allow_multiple_allocations else q.value
        if amount is None or amount > cap.value.value:
            return False
    return True


def violations(node: Node, slices: Sequence[ResourceSlice], classes: Mapping[str, DeviceClass],
               in_use: Sequence[ResourceClaim], claims: Sequence[ResourceClaim],
               allocations: Sequence[Allocation], evaluate: SelectorEval = cel_matches,
               taint_rules: Sequence[DeviceTaintRule] = ()) -> list[str]:
    """Every API rule the allocations (one per claim, in order) break on ``node``. A DeviceTaintRule
    adds its taint to every device its selector picks (each field set must match); give only rules
    with a selector (a rule without one picks no device, which the record cannot tell)."""
    pools = Pools(slices)
    out: list[str] = []
    if len(claims) != len(allocations):
        return [f"{len(allocations)} allocations for {len(claims)} claims"]

    exclusive: dict[tuple[str, str, str], str] = {}  # device -> the claim holding it whole
    shares: dict[tuple[str, str, str], int] = defaultdict(int)
    consumed: dict[tuple[str, str, str, str], Fraction] = defaultdict(Fraction)
    counted: set[tuple[str, str, str]] = set()  # devices whose counters are consumed

    def take(claim_key: str, r: DeviceResult, loc: _Located | None) -> None:
        dev = (r.driver, r.pool, r.device)
        if r.admin_access:
            return
        if r.share_id:
            if dev in exclusive:
                out.append(f"{claim_key}: {r.device_id} shared while {exclusive[dev]} holds it whole")
            shares[dev] += 1
            for name, q in r.consumed_capacity.items():
                consumed[(*dev, _qualified(r.driver, name))] += q.value
        else:
            if dev in exclusive or shares[dev]:
                holder = exclusive.get(dev, "shares")
                out.append(f"{claim_key}: {r.device_id} allocated twice (held by {holder})")
            exclusive[dev] = claim_key
        if loc is not None and dev not in counted:
            counted.add(dev)
            for cc in loc.device.consumes_counters:
                for cname, q in cc.counters.items():
                    consumed[(r.driver, r.pool, "counter:" + cc.counter_set, cname)] += q.value

    for c in in_use:
        if c.allocation is not None:
            for r in c.allocation.results:
                take(c.key, r, pools.devices.get((r.driver, r.pool, r.device)))

    on_node = pools.on_node(node)
    for claim, alloc in zip(claims, allocations, strict=True):
        ck = claim.key
        if alloc.node_selector is not None and not any(
                t.matches(node.name, dict(node.labels)) for t in alloc.node_selector):
            out.append(f"{ck}: the allocation's node selector does not admit {node.name}")
        if claim.allocation is not None:
            # Allocated before: it is kept as it is, and what it holds is in use.
            if alloc != claim.allocation:
                out.append(f"{ck}: allocated already, but given another allocation")
            for r in claim.allocation.results:
                take(ck, r, pools.devices.get((r.driver, r.pool, r.device)))
            continue
        per_request: dict[str, list[DeviceResult]] = defaultdict(list)
        chosen: dict[str, set[str]] = defaultdict(set)  # main request -> request names used
        devices_of: dict[str, list[tuple[DeviceResult, _Located]]] = defaultdict(list)
        for r in alloc.results:
            found = _request_of(claim, r.request)
            if found is None:
                out.append(f"{ck}: result for unknown request {r.request!r}")
                continue
            req, main = found
            per_request[r.request].append(r)
            chosen[main].add(r.request)
            loc = pools.devices.get((r.driver, r.pool, r.device))
            if loc is None:
                out.append(f"{ck}/{r.request}: {r.device_id} is not in the newest generation of its pool")
                take(ck, r, None)
                continue
            devices_of[main].append((r, loc))
            if not pools.usable_pool[(r.driver, r.pool)]:
                out.append(f"{ck}/{r.request}: {r.device_id}'s pool is incomplete or invalid")
            sel = loc.slice.node if loc.slice.node is not None else loc.device.node
            if not _usable(sel, node):
                out.append(f"{ck}/{r.request}: {r.device_id} cannot be used on {node.name}")
            if not _selected(loc, req, classes, evaluate):
                out.append(f"{ck}/{r.request}: {r.device_id} does not match the class's or request's selectors")
            if r.admin_access != req.admin_access:
                out.append(f"{ck}/{r.request}: adminAccess {r.admin_access} for a request asking {req.admin_access}")
            ruled = tuple(rule.taint for rule in taint_rules if rule.selects(r.driver, r.pool, r.device))
            for t in (*loc.device.taints, *ruled):
                if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in req.tolerations):
                    out.append(f"{ck}/{r.request}: {r.device_id}'s taint {t.key}={t.value}:{t.effect} not tolerated")
            d = loc.device
            if (r.binding_conditions, r.binding_failure_conditions) != (d.binding_conditions,
                                                                         d.binding_failure_conditions):
                out.append(f"{ck}/{r.request}: {r.device_id}'s binding conditions not carried to the result")
            if d.binds_to_node and alloc.node_selector is None:
                out.append(f"{ck}/{r.request}: {r.device_id} binds to the node, the allocation is not pinned")
            if r.share_id and not d.allow_multiple_allocations:
                out.append(f"{ck}/{r.request}: {r.device_id} shared but does not allow multiple allocations")
            if d.allow_multiple_allocations and not r.share_id and not r.admin_access:
                out.append(f"{ck}/{r.request}: {r.device_id} allows multiple allocations but got no share id")
            for name, q in req.capacity.items():
                cap = _lookup(r.driver, d.capacity, _qualified(r.driver, name))
                if cap is None:
                    out.append(f"{ck}/{r.request}: {r.device_id} has no capacity {name}")
                elif not d.allow_multiple_allocations and q.value > cap.value.value:
                    out.append(f"{ck}/{r.request}: {r.device_id}'s {name} {cap.value.text} < requested {q.text}")
            if r.share_id:
                for name, cap in d.capacity.items():
                    q_req = _lookup(r.driver, req.capacity, _qualified(r.driver, name))
                    want = _policy_consumption(cap, q_req.value if q_req is not None else None)
                    got = _lookup(r.driver, r.consumed_capacity, _qualified(r.driver, name))
                    if want is None:
                        out.append(f"{ck}/{r.request}: {r.device_id}'s policy for {name} refuses the request")
                    elif got is not None and got.value != want:
                        out.append(f"{ck}/{r.request}: {r.device_id} consumes {got.text} of {name}, "
                                   f"the policy makes it {want}")
            take(ck, r, loc)
        for request in claim.spec.requests:
            used = chosen.get(request.name, set())
            if len(used) > 1:
                out.append(f"{ck}/{request.name}: results from several subrequests {sorted(used)}")
                continue
            if not used:
                out.append(f"{ck}/{request.name}: no result")
                continue
            (name,) = used
            found = _request_of(claim, name)
            assert found is not None
            req = found[0]
            results = per_request[name]
            if req.mode == "ExactCount" and len(results) != req.count:
                out.append(f"{ck}/{name}: {len(results)} devices for count {req.count}")
            if req.mode == "All":
                matching = {k for k, loc in on_node if _selected(loc, req, classes, evaluate)}
                given = {(r.driver, r.pool, r.device) for r in results}
                if matching != given or len(results) != len(given):
                    out.append(f"{ck}/{name}: All gave {sorted(given)}, the matching devices are {sorted(matching)}")
        for con in claim.spec.constraints:
            attr = con.match_attribute or con.distinct_attribute
            scope = []
            for main, located in devices_of.items():
                for r, loc in located:
                    if not con.requests or main in con.requests or r.request in con.requests:
                        scope.append((r, loc))
            values = []
            for r, loc in scope:
                v = _lookup(r.driver, loc.device.attributes, attr)
                if v is None:
                    out.append(f"{ck}: {r.device_id} lacks the constraint's attribute {attr}")
                values.append(v)
            present = [v for v in values if v is not None]
            if con.match_attribute and len(set(map(repr, present))) > 1:
                out.append(f"{ck}: matchAttribute {attr} differs: {present}")
            if con.distinct_attribute and len(set(map(repr, present))) != len(present):
                out.append(f"{ck}: distinctAttribute {attr} repeats: {present}")

    for key, total in consumed.items():
        driver, pool, what, name = key
        if what.startswith("counter:"):
            limit = pools.counters.get((driver, pool, what[len("counter:"):], name))
            if limit is None:
                out.append(f"{driver}/{pool}: counter set {what[8:]} / {name} does not exist")
            elif total > limit:
                out.append(f"{driver}/{pool}: counter {what[8:]}/{name} consumed {total} > {limit}")
        else:
            loc = pools.devices.get((driver, pool, what))
            if loc is None:
                continue
            cap = _lookup(driver, loc.device.capacity, name)
            if cap is not None and total > cap.value.value:
                out.append(f"{driver}/{pool}/{what}: capacity {name} consumed {total} > {cap.value.text}")
    return out
