"""Which devices a pod's claims get on one node: kube-scheduler v1.37.2's structured allocator
(``k8s.io/dynamic-resource-allocation/structured``, the variant its default feature gates select)
with the DynamicResources plugin's checks of claims allocated already.

Belongs here: the search (claims in order, requests in order, devices in pool/slice/device order,
first fit with backtracking, each request's devices tried as combinations, never permutations),
what makes a device usable for a request (class and request selectors, per-device node selection,
taints and tolerations, in use or not, admin access, shared counters, consumable capacity), the
requests' alternatives (``firstAvailable``), constraints (matchAttribute, distinctAttribute), the
allocation written back (results, config, node selector, timestamp), how many pods with fresh
claims a node can take (``capacity``), and why not (``reasons``). Not here: pools (``pools``), what is
allocated (``state``), how claims meet pods, gangs and the cycle (the core's device seam).
"""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from fractions import Fraction

from koordpy.api.dra import (
    FRACTIONAL_CAPACITY_RANGE,
    INT64_MAX,
    RESERVED_FOR_MAX,
    AllocatedConfig,
    Allocation,
    AttrValue,
    Capacity,
    CapacityPolicy,
    ClaimSpec,
    Consumer,
    DeviceClass,
    DeviceConstraint,
    DeviceResult,
    ExactRequest,
    OpaqueConfig,
    Quantity,
    ResourceClaim,
    SemVer,
)
from koordpy.api.objects import Node, NodeSelectorTerm, Requirement
from koordpy.devices.cel import CelError
from koordpy.devices.pools import DeviceEntry, Num, Pools, PoolView, SelectorError, node_matches
from koordpy.devices.reasons import DeviceError, Unallocatable
from koordpy.devices.state import InUse

RESULTS_MAX = 32  # AllocationResultsMaxSize: devices one allocation may hold
FILTER_TIMEOUT = 10.0  # kube-scheduler's DynamicResources filterTimeout default, seconds
BINDING_TIMEOUT = 600.0  # its bindingTimeout default, seconds
_CHECK_EVERY = 256  # search steps between two looks at the clock

_DONE, _FAIL, _MAX = 1, 0, 2  # a search step's outcome; _MAX: the allocation would exceed RESULTS_MAX


class _Timeout(Exception):
    pass


class _OutOfSteps(_Timeout):
    pass


class Budget:
    """What an enumeration may spend (``Allocator.solutions``), shared by the runs of a gang's search:
    a deadline on the allocator's clock and search steps left."""

    __slots__ = ("deadline", "steps")

    def __init__(self, deadline: float, steps: int) -> None:
        self.deadline = deadline
        self.steps = steps


class SearchStopped(Exception):
    """An enumeration (``Allocator.solutions``) ran out of its bound: ``steps`` when its step count
    did, else its deadline."""

    def __init__(self, steps: bool) -> None:
        super().__init__("steps" if steps else "time")
        self.steps = steps


class _Req:
    """A request, or one alternative of a ``firstAvailable`` request, being allocated."""

    __slots__ = ("admin", "all_devices", "all_mode", "base", "capacity", "ci", "cls", "count",
                 "exact", "name", "sub", "tolerations")

    def __init__(self, ci: int, base: str, exact: ExactRequest, cls: DeviceClass) -> None:
        self.ci = ci
        self.base = base
        self.sub = exact.name
        self.name = f"{base}/{exact.name}" if exact.name else base
        self.exact = exact
        self.cls = cls
        self.all_mode = exact.mode == "All"
        self.count = exact.count
        self.admin = exact.admin_access and not exact.name
        self.tolerations = exact.tolerations
        self.capacity = exact.capacity
        self.all_devices: list[DeviceEntry] = []


class _Slot:
    """A request of a claim: one ``_Req``, or its alternatives in order."""

    __slots__ = ("alts", "first_available", "name", "selected")

    def __init__(self, name: str, alts: list[_Req], first_available: bool) -> None:
        self.name = name
        self.alts = alts
        self.first_available = first_available
        self.selected = 0


class _Result:
    __slots__ = ("consumed", "entry", "req", "share_id")

    def __init__(self, req: _Req, entry: DeviceEntry, share_id: str, consumed: dict[str, Fraction] | None) -> None:
        self.req = req
        self.entry = entry
        self.share_id = share_id
        self.consumed = consumed


class _Constraint:
    __slots__ = ("attribute", "count", "distinct", "keys", "requests", "seen", "value")

    def __init__(self, c: DeviceConstraint) -> None:
        self.distinct = bool(c.distinct_attribute)
        self.attribute = c.distinct_attribute or c.match_attribute
        self.requests = frozenset(c.requests)
        self.value: AttrValue | None = None
        self.count = 0
        # distinctAttribute: the values taken, as _value_key (a stack for remove, a set to look up:
        # a value is only ever added when no equal one is there, so the two hold the same values).
        self.seen: list[tuple[type, object]] = []
        self.keys: set[tuple[type, object]] = set()

    def applies(self, req: _Req) -> bool:
        return not self.requests or req.base in self.requests or (bool(req.sub) and req.name in self.requests)

    def add(self, req: _Req, e: DeviceEntry) -> bool:
        if not self.applies(req):
            return True
        value = e.qattrs.get(self.attribute)
        if value is None:
            return False
        if self.distinct:
            if self.seen and not _known(value):
                return False
            key = _value_key(value)
            if key in self.keys:
                return False
            self.seen.append(key)
            self.keys.add(key)
            return True
        if self.count == 0:
            self.value = value
            self.count = 1
            return True
        if not _known(value) or self.value is None or not _same_value(value, self.value):
            return False
        self.count += 1
        return True

    def remove(self, req: _Req) -> None:
        if not self.applies(req):
            return
        if self.distinct:
            self.keys.discard(self.seen.pop())
        else:
            self.count -= 1


def _known(v: AttrValue) -> bool:
    return not isinstance(v, tuple)  # list attributes are alpha (DRAListTypeAttributes), off in v1.37


def _value_key(v: AttrValue) -> tuple[type, object]:
    """What _same_value compares, hashable: the type (bool is an int in Python) and the value (a
    version's text)."""
    return (type(v), v.text if isinstance(v, SemVer) else v)


def _same_value(a: AttrValue, b: AttrValue) -> bool:
    # bool is an int in Python; an attribute's type is part of its value.
    return type(a) is type(b) and (a.text == b.text if isinstance(a, SemVer) and isinstance(b, SemVer) else a == b)


class Allocator:
    """One snapshot's allocator: pools, classes and what is in use, asked node by node."""

    def __init__(self, pools: Pools, classes: Mapping[str, DeviceClass], in_use: InUse, *,
                 timeout: float = FILTER_TIMEOUT, share_id: Callable[[], str] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pools = pools
        self.classes = classes
        self.in_use = in_use
        self.timeout = timeout
        self.share_id = share_id or (lambda: str(uuid.uuid4()))
        self.clock = clock
        # id(view) -> (view, InUse.version, counters left): a pool's view differs by node (which
        # of its slices reach the node), so the counters left are the view's.
        self._avail: dict[int, tuple[PoolView, int, dict[tuple[str, str], Num], bool]] = {}
        self.steps = 0  # search steps of the last allocate (kube-scheduler's allocateOne invocations)

    # -- the API ---------------------------------------------------------------------------------

    def allocate(self, node: Node, claims: Sequence[ResourceClaim], now: float,
                 consumer: Consumer | None = None, deadline: float | None = None) -> list[Allocation] | Unallocatable:
        """One allocation per claim, in order, or why not. A claim allocated already is checked (its
        node selector admits the node, its binding has not failed or timed out, and with
        ``consumer`` given, it can take one more) and returned unchanged. The search gives up at
        ``deadline`` (on ``clock``; default: ``timeout`` from now)."""
        out: list[Allocation | None] = []
        todo: list[ResourceClaim] = []
        for claim in claims:
            a = claim.allocation
            if a is None:
                out.append(None)
                todo.append(claim)
                continue
            why = _check_allocated(claim, a, node, now, consumer)
            if why is not None:
                return why
            out.append(a)
        if todo:
            got = self._allocate(node, todo, now, self.clock() + self.timeout if deadline is None else deadline)
            if isinstance(got, Unallocatable):
                return got
            it = iter(got)
            out = [a if a is not None else next(it) for a in out]
        return [a for a in out if a is not None]

    def fits(self, node: Node, claims: Sequence[ResourceClaim], now: float,
             consumer: Consumer | None = None, deadline: float | None = None) -> Unallocatable | None:
        """Whether ``allocate`` would succeed (None) or why not, without making the allocations:
        what a filter over many nodes asks."""
        todo: list[ResourceClaim] = []
        for claim in claims:
            if claim.allocation is None:
                todo.append(claim)
                continue
            why = _check_allocated(claim, claim.allocation, node, now, consumer)
            if why is not None:
                return why
        if not todo:
            return None
        got = self._allocate(node, todo, now, self.clock() + self.timeout if deadline is None else deadline,
                             build=False)
        return got if isinstance(got, Unallocatable) else None

    def solutions(self, node: Node, claims: Sequence[ResourceClaim], now: float,
                  budget: Budget) -> Iterator[list[Allocation]]:
        """Every allocation of ``claims`` (none allocated yet) on ``node``, in the search's own order:
        the first is ``allocate``'s. Lazy: the search is run again for more, each time asked for twice
        as many (it is deterministic, so a run repeats the ones before; the repeats cost at most as
        much as the last run). The devices in use must be as they were at the first when more are
        asked for. Raises ``SearchStopped`` at the budget's deadline (on ``clock``) or once its steps
        are spent (each run takes its steps from it; both looked at every few hundred steps),
        ``DeviceError`` as ``allocate`` does; an ``Unallocatable`` ends it."""
        given, want = 0, 1
        while True:
            # Looked at between runs too: a run on a small node may end before its first look.
            if budget.steps <= 0:
                raise SearchStopped(True)
            if self.clock() > budget.deadline:
                raise SearchStopped(False)
            found: list[list[Allocation]] = []

            def keep(got: list[Allocation], found: list[list[Allocation]] = found, want: int = want) -> bool:
                found.append(got)
                return len(found) >= want
            self.steps = 0
            try:
                self._allocate(node, claims, now, budget.deadline, each=keep, max_steps=budget.steps)
            finally:
                budget.steps -= self.steps
            yield from found[given:]
            if len(found) < want:
                return
            given, want = len(found), want * 2

    def capacity(self, node: Node, claims: Sequence[ClaimSpec], limit: int, now: float) -> int:
        """How many pods, each with fresh claims of these specs, ``node`` can take (0..limit), one
        after another as kube-scheduler would allocate them. The count shares one time bound: a
        search that runs out of it ends the count there."""
        if limit <= 0:
            return 0
        fast = self._capacity_fast(node, claims, limit)
        if fast is not None:
            return fast
        fresh = [ResourceClaim(namespace="", name=f"#{i}", spec=s) for i, s in enumerate(claims)]
        undo: list[Callable[[], None]] = []
        n = 0
        deadline = self.clock() + self.timeout
        try:
            while n < limit:
                try:
                    got = self.allocate(node, fresh, now, deadline=deadline)
                except DeviceError:
                    break
                if isinstance(got, Unallocatable):
                    break
                n += 1
                if not any(a.results for a in got):
                    return limit
                undo.extend(self.in_use.add(a) for a in got)
        finally:
            for u in reversed(undo):
                u()
        return n

    # -- claims allocated already ------------------------------------------------------------------

    def _capacity_fast(self, node: Node, claims: Sequence[ClaimSpec], limit: int) -> int | None:
        """N identical-looking pods without constraints: free matching devices divided by what one
        pod asks, per kind of request (when kinds draw on disjoint devices). None: use the search."""
        need: dict[tuple[object, ...], int] = {}
        sets: dict[tuple[object, ...], list[DeviceEntry]] = {}
        kinds: dict[tuple[object, ...], ExactRequest] = {}
        for spec in claims:
            if spec.constraints:
                return None
            total = 0
            for r in spec.requests:
                x = r.exactly
                if x is None or x.mode != "ExactCount" or x.admin_access or x.capacity:
                    return None
                cls = self.classes.get(x.device_class)
                if cls is None:
                    return None
                key = (x.device_class, x.selectors, x.tolerations)
                if key not in sets:
                    cands, errors = self._candidates(node, cls, x, "")
                    # Shares, counters and capacity policies make a device's use depend on others'.
                    if errors or any(e.allow_multiple or e.device.consumes_counters
                                     or any(c.policy is not None for c in e.device.capacity.values())
                                     for e in cands):
                        return None
                    sets[key] = cands
                    kinds[key] = x
                need[key] = need.get(key, 0) + x.count
                total += x.count
            if total > RESULTS_MAX:
                return None
        if len(sets) > 1:
            seen: set[str] = set()
            for cands in sets.values():
                ids = {e.id for e in cands}
                if ids & seen:
                    return None
                seen |= ids
        best = limit
        for kind, n in need.items():
            if n:
                x = kinds[kind]
                free = sum(1 for e in sets[kind] if not self.in_use.exclusive(e.id) and _tolerated(e, x))
                best = min(best, free // n)
        return best

    # -- the search --------------------------------------------------------------------------------

    def _allocate(self, node: Node, claims: Sequence[ResourceClaim], now: float,
                  deadline: float, build: bool = True, each: Callable[[list[Allocation]], bool] | None = None,
                  max_steps: int = 0) -> list[Allocation] | Unallocatable:
        """The search. With ``each``, each solution is built and handed to it in turn until it says
        stop (True); the search then goes on past the ones it declines, as though they had failed."""
        views = self.pools.for_node(node)
        plan: list[list[_Slot]] = []
        for ci, claim in enumerate(claims):
            slots: list[_Slot] = []
            for r in claim.spec.requests:
                if r.exactly is not None:
                    alts = [r.exactly]
                elif r.first_available:
                    alts = list(r.first_available)
                else:
                    raise DeviceError(f"claim {claim.key}, request {r.name}: unknown request type", claim.key, r.name)
                reqs = []
                for x in alts:
                    name = f"{r.name}/{x.name}" if x.name else r.name
                    if not x.device_class:
                        raise DeviceError(f"claim {claim.key}, request {name}: missing device class name", claim.key,
                                          name)
                    cls = self.classes.get(x.device_class)
                    if cls is None:
                        return Unallocatable("class-missing", claim.key, name, x.device_class)
                    reqs.append(_Req(ci, r.name, x, cls))
                slots.append(_Slot(r.name, reqs, r.exactly is None))
            plan.append(slots)
        if each is None and build:
            fit = self._first_fit(node, claims, plan, now)
            if fit is not None:
                return fit
        search = _Search(self, node, views, claims, plan, deadline)
        if each is not None:
            search.found = lambda: each([self._result(node, c, plan[ci], search.results[ci], now)
                                          for ci, c in enumerate(claims)])
            search.max_steps = max(max_steps, 1)
        for ci, claim in enumerate(claims):
            total = 0
            for slot in plan[ci]:
                least = math.inf
                for req in slot.alts:
                    if req.all_mode:
                        search.gather_all(req)
                        req.count = len(req.all_devices)
                    least = min(least, req.count)
                if least > RESULTS_MAX - total:
                    raise DeviceError(
                        f"claim {claim.key}, request {slot.name}: adding {least} devices exceeds the claim limit "
                        f"of {RESULTS_MAX}, with {total} already accounted for", claim.key, slot.name)
                total += int(least)
            for c in claim.spec.constraints:
                if not c.match_attribute and not c.distinct_attribute:
                    raise DeviceError(f"claim {claim.key}: empty constraint (unsupported constraint type?)", claim.key)
            search.constraints.append([_Constraint(c) for c in claim.spec.constraints])
        try:
            outcome = search.one(0, 0, 0, 0, False, 0)
        except _OutOfSteps:
            raise SearchStopped(True) from None
        except _Timeout:
            if each is not None:
                raise SearchStopped(False) from None
            # An error in kube-scheduler ("potentially transient": retried with backoff), which
            # ends the pod's attempt on every node, not this node's unschedulable verdict.
            raise DeviceError(f"node {node.name}: the device search ran out of its time bound") from None
        finally:
            self.steps = search.steps
        if each is not None:
            return []
        if outcome == _MAX:
            raise DeviceError(f"allocation on node {node.name}: more than {RESULTS_MAX} devices in one claim")
        if outcome != _DONE:
            found = search.diagnose()
            for v in views:
                if v.invalid:
                    # kube-scheduler blames the invalid pool for the node; the claim and request that
                    # came up short are named with it, as every other reason names them.
                    return Unallocatable("pool-invalid", found.claim or claims[0].key, found.request,
                                         f"{v.key}: {v.invalid}")
            return found
        if not build:
            return []
        return [self._result(node, claim, plan[ci], search.results[ci], now) for ci, claim in enumerate(claims)]

    def _first_fit(self, node: Node, claims: Sequence[ResourceClaim], plan: list[list[_Slot]],
                   now: float) -> list[Allocation] | None:
        """The search's answer without the search, when every request is one ExactCount request
        without admin access or capacity of its own, no claim has constraints, and each request's
        candidates are all ``plain``: any free candidate then does, so the search's first solution is
        each request's first free candidates in order, which this takes. None when that does not
        apply or comes up short (the search then says why, or finds what overlapping requests leave)."""
        total = 0
        for ci, claim in enumerate(claims):
            if claim.spec.constraints:
                return None
            for slot in plan[ci]:
                if slot.first_available:
                    return None
                req = slot.alts[0]
                if not taken_first_fit(req.exact):
                    return None
                total += req.count
        if total > RESULTS_MAX:
            return None
        held, shared = self.in_use.exclusive, self.in_use.shared
        taking: set[str] = set()
        found: list[list[_Result]] = []
        for ci in range(len(claims)):
            mine: list[_Result] = []
            for slot in plan[ci]:
                req = slot.alts[0]
                _, cands, _, plain = self.selection(node, req.cls, req.exact)
                if not plain:
                    return None
                want = req.count
                for e in cands:
                    if held(e.id) or e.id in taking:
                        continue
                    if shared(e.id):  # shares of a device that allowed them: its capacity is the search's
                        return None
                    taking.add(e.id)
                    mine.append(_Result(req, e, "", None))
                    want -= 1
                    if not want:
                        break
                if want:
                    return None
            found.append(mine)
        self.steps = len(taking)
        return [self._result(node, claim, plan[ci], found[ci], now) for ci, claim in enumerate(claims)]

    def selection(self, node: Node, cls: DeviceClass,
                  x: ExactRequest) -> tuple[Node, list[DeviceEntry], dict[str, SelectorError], bool]:
        """``_candidates`` as kept: (the node, the devices, the CEL errors by device id, whether every
        device is ``plain`` and no selector failed)."""
        # Kept with the pools: they outlive this allocator while slices, classes and rules do not
        # change (claims change with every bind).
        cache = self.pools.candidates
        key = (node.name, cls.name, cls.selectors, x.selectors)
        hit = cache.get(key)
        if hit is not None and hit[0] is node:
            return hit
        cands: list[DeviceEntry] = []
        found: dict[str, SelectorError] = {}
        for view in self.pools.for_node(node):
            if view.incomplete or view.invalid:
                continue
            for e in view.devices:
                try:
                    ok = _selectable(e, cls, x)
                except SelectorError as err:
                    found[e.id] = err
                    cands.append(e)
                    continue
                if ok and (e.own_node is None or node_matches(e.own_node, node)):
                    cands.append(e)
        got = cache[key] = (node, cands, found, not found and all(e.plain for e in cands))
        return got

    def _candidates(self, node: Node, cls: DeviceClass, x: ExactRequest,
                    claim: str) -> tuple[list[DeviceEntry], dict[str, DeviceError]]:
        """The devices of the node's complete, valid pools that pass the class's and the request's
        selectors and can be used on the node, in kube-scheduler's order, and the CEL errors met
        (raised only when the search reaches that device, as kube-scheduler evaluates lazily).
        Taints are not looked at here."""
        got = self.selection(node, cls, x)
        if not got[2]:
            return got[1], {}
        return got[1], {k: v.for_claim(claim) for k, v in got[2].items()}

    def available_counters(self, view: PoolView) -> tuple[dict[tuple[str, str], Num], bool]:
        """A pool's counters less what its allocated devices consume, by (counter set, counter), and
        whether one is overdrawn already (then no device of the pool that consumes counters can be
        added: kube-scheduler compares every counter of the pool at each addition)."""
        got = self._avail.get(id(view))
        if got is not None and got[0] is view and got[1] == self.in_use.version:
            return got[2], got[3]
        avail = dict(view.counters)
        for e in (*view.devices, *view.others):
            if e.uses and self.in_use.allocated(e.id):
                for k, v in e.uses:
                    if k in avail:
                        avail[k] -= v
        overdrawn = any(v < 0 for v in avail.values())
        self._avail[id(view)] = (view, self.in_use.version, avail, overdrawn)
        return avail, overdrawn

    # -- the allocation written back ---------------------------------------------------------------

    def _result(self, node: Node, claim: ResourceClaim, slots: list[_Slot], found: list[_Result],
                now: float) -> Allocation:
        results = tuple(_made(r) if not r.share_id and not r.consumed else DeviceResult(
                request=r.req.name, driver=r.entry.driver, pool=r.entry.pool, device=r.entry.name,
                admin_access=r.req.admin, tolerations=r.req.tolerations,
                binding_conditions=r.entry.device.binding_conditions,
                binding_failure_conditions=r.entry.device.binding_failure_conditions,
                share_id=r.share_id,
                consumed_capacity={k: _quantity(v) for k, v in r.consumed.items()} if r.consumed else {},
            ) for r in found)
        chosen = [s.alts[s.selected] for s in slots]
        # Class configuration first, each class once, naming the requests it applies to.
        class_configs: list[tuple[str, OpaqueConfig, list[str]]] = []
        class_index: dict[str, tuple[int, int]] = {}
        for req in chosen:
            at = class_index.get(req.cls.name)
            if at is not None:
                for i in range(*at):
                    class_configs[i][2].append(req.name)
                continue
            start = len(class_configs)
            for cfg in req.cls.config:
                class_configs.append(("FromClass", cfg, [req.name]))
            class_index[req.cls.name] = (start, len(class_configs))
        configs: list[tuple[str, OpaqueConfig, list[str]]] = list(class_configs)
        for cfg in claim.spec.config:
            if not cfg.requests or any(s.name in cfg.requests or (s.first_available and req.name in cfg.requests)
                                       for s, req in zip(slots, chosen, strict=True)):
                configs.append(("FromClaim", cfg, list(cfg.requests)))
        out_configs = []
        for source, cfg, names in configs:
            if names and all(s.name in names or (s.first_available and req.name in names)
                             for s, req in zip(slots, chosen, strict=True)):
                names = []
            out_configs.append(AllocatedConfig(
                "FromClass" if source == "FromClass" else "FromClaim",
                OpaqueConfig(cfg.driver, cfg.parameters, tuple(names))))
        return Allocation(results=results, config=tuple(out_configs),
                          node_selector=self._node_selector(node, found), timestamp=now)

    def _node_selector(self, node: Node, found: list[_Result]) -> tuple[NodeSelectorTerm, ...] | None:
        fields: list[Requirement] = []
        exprs: list[Requirement] = []
        for r in found:
            e = r.entry
            if e.node_local:
                got = self.pools.pinned.get(node.name)
                if got is None:
                    got = self.pools.pinned[node.name] = (NodeSelectorTerm(match_fields=(
                        Requirement(key="metadata.name", operator="In", values=(node.name,)),)),)
                return got
            if e.node_selector:
                if len(e.node_selector) > 1:
                    raise DeviceError(f"device {e.id}: a node selector of {len(e.node_selector)} terms "
                                      "cannot be carried into an allocation")
                term = e.node_selector[0]
                for have, new in ((fields, term.match_fields), (exprs, term.match_expressions)):
                    for req in new:
                        if not any(h.key == req.key and h.operator == req.operator
                                   and set(h.values) == set(req.values) for h in have):
                            have.append(req)
        if fields or exprs:
            return (NodeSelectorTerm(match_expressions=tuple(exprs), match_fields=tuple(fields)),)
        return None


FIRST_AVAILABLE_MAX = 8  # FirstAvailableDeviceRequestMaxSize: alternatives one request may list


def taken_first_fit(x: ExactRequest) -> bool:
    """Whether a request takes any free candidate (one ExactCount request of at least one device,
    without admin access or capacity of its own): first fit is then the search's first answer where
    its candidates are all ``DeviceEntry.plain`` (``Allocator._first_fit``, ``counts.plain``)."""
    return x.mode == "ExactCount" and not x.admin_access and not x.capacity and x.count >= 1


def _made(r: _Result) -> DeviceResult:
    """The result of an exclusive device for a request: the same value each time, kept on the device."""
    e, req = r.entry, r.req
    made = e.made
    if made is None:
        made = e.made = {}
    key = (req.name, req.admin, req.tolerations)
    got = made.get(key)
    if got is None:
        got = made[key] = DeviceResult(
            request=req.name, driver=e.driver, pool=e.pool, device=e.name, admin_access=req.admin,
            tolerations=req.tolerations, binding_conditions=e.device.binding_conditions,
            binding_failure_conditions=e.device.binding_failure_conditions, share_id="", consumed_capacity={})
    assert isinstance(got, DeviceResult)
    return got


def first_available_score(claims: Sequence[ResourceClaim], allocations: Sequence[Allocation]) -> int:
    """A node's score for the alternatives its allocations got (kube-scheduler's DynamicResources
    Score with prioritized lists): each ``firstAvailable`` request adds 8 for its first alternative,
    7 for the second, and so on; ``allocations`` are the claims' own, in order (``allocate``'s)."""
    score = 0
    for claim, allocation in zip(claims, allocations, strict=True):
        got = {r.request for r in allocation.results if "/" in r.request}
        if not got:
            continue
        for request in claim.spec.requests:
            for i, sub in enumerate(request.first_available):
                if f"{request.name}/{sub.name}" in got:
                    score += FIRST_AVAILABLE_MAX - i
    return score


def _selectable(e: DeviceEntry, cls: DeviceClass, x: ExactRequest) -> bool:
    """Whether the class's and then the request's selectors admit ``e`` (raises ``SelectorError``)."""
    for owner, selectors in ((cls, cls.selectors), (None, x.selectors)):
        for i, expr in enumerate(selectors):
            try:
                if not e.selected(expr):
                    return False
            except CelError as err:
                raise SelectorError(owner, i, e.id, err) from err
    return True


def _tolerated(e: DeviceEntry, req: _Req | ExactRequest) -> bool:
    """Whether the request tolerates every taint of the device that keeps it from being allocated
    (NoSchedule, NoExecute; a taint with effect None only informs)."""
    for t in e.taints:
        if t.effect in ("NoSchedule", "NoExecute") and not any(tol.tolerates(t) for tol in req.tolerations):
            return False
    return True


def _check_allocated(claim: ResourceClaim, a: Allocation, node: Node, now: float,
                     consumer: Consumer | None) -> Unallocatable | None:
    if a.node_selector is not None and not any(t.matches(node.name, node.labels) for t in a.node_selector):
        return Unallocatable("not-on-node", claim.key)
    if consumer is not None and len(claim.reserved_for) >= RESERVED_FOR_MAX and not any(
            c.uid == consumer.uid and c.name == consumer.name for c in claim.reserved_for):
        return Unallocatable("too-many-consumers", claim.key, detail=str(RESERVED_FOR_MAX))
    return binding_broken(claim, a, now)


def binding_broken(claim: ResourceClaim, a: Allocation, now: float) -> Unallocatable | None:
    """Why the allocation's devices will not bind (a binding failure condition is true, or the binding
    conditions are still unmet after the binding timeout), else None: kube-scheduler's Filter then
    finds the claim not available on any node."""
    ready = True
    for r in a.results:
        if not r.binding_conditions:
            continue
        conds = {c.type: c.status for c in claim.device_conditions
                 if c.driver == r.driver and c.pool == r.pool and c.device == r.device}
        if any(conds.get(t) == "True" for t in r.binding_failure_conditions):
            return Unallocatable("binding-failed", claim.key, r.request, r.device_id)
        if not all(conds.get(t) == "True" for t in r.binding_conditions):
            ready = False
    if not ready and a.timestamp is not None and a.timestamp + BINDING_TIMEOUT < now:
        return Unallocatable("binding-timeout", claim.key)
    return None


def _quantity(v: Fraction) -> Quantity:
    if v.denominator == 1:
        return Quantity(v, str(v.numerator))
    milli = v * 1000
    if milli.denominator == 1:
        return Quantity(v, f"{milli.numerator}m")
    return Quantity(v, str(float(v)))


# -- consumable capacity -------------------------------------------------------------------------

def _consumed(requested: Quantity | None, cap: Capacity) -> Fraction:
    """What one allocation consumes of a capacity, given what the request asks (None: nothing)."""
    pol = cap.policy
    if requested is None:
        return pol.default.value if pol is not None and pol.default is not None else cap.value.value
    want = requested.value
    if pol is None:
        return want
    if pol.valid_min is not None:
        low = pol.valid_min.value
        if want < low:
            return low
        if pol.valid_step is None:
            return want
        step = pol.valid_step.value
        # kube-scheduler rounds in int64 arithmetic (whole numbers with DRAFractionalCapacityRange
        # off): a request or a rounded value beyond it is an error, not a device that does not fit.
        scale = 1000 if _milli(pol) else 1
        if scale == 1:
            want, step, low = Fraction(math.ceil(want)), Fraction(math.ceil(step)), Fraction(math.ceil(low))
        elif (want * 1000).denominator != 1:
            raise DeviceError(f"capacity request {requested.text} cannot be represented in milli units")
        if want * scale > INT64_MAX:
            raise DeviceError(f"capacity request {requested.text} cannot be represented in the device's range "
                              "arithmetic")
        got = low + step * math.ceil((want - low) / step)
        if got * scale > INT64_MAX:
            raise DeviceError(f"capacity request {requested.text} cannot be represented: rounding it up to the "
                              "next step passes the range arithmetic's limit")
        return got
    if pol.valid_values:
        for v in pol.valid_values:
            if want <= v.value:
                return v.value
    return want


def _milli(pol: CapacityPolicy) -> bool:
    """Whether a range's arithmetic is in milli units (with DRAFractionalCapacityRange on: every
    bound and the step whole milli values, the step at least one); else whole numbers, each bound,
    the step and the request rounded up to one."""
    if not FRACTIONAL_CAPACITY_RANGE:
        return False
    for q in (pol.valid_min, pol.valid_max, pol.valid_step):
        if q is not None and (q.value * 1000).denominator != 1:
            return False
    return pol.valid_step is None or pol.valid_step.value >= Fraction(1, 1000)


def _violates(v: Fraction, cap: Capacity) -> bool:
    pol = cap.policy
    if pol is None:
        return False
    if pol.default is not None and v == pol.default.value:
        return False
    if pol.valid_min is not None:
        if pol.valid_max is not None and v > pol.valid_max.value:
            return True
        if pol.valid_step is not None:
            low, step = pol.valid_min.value, pol.valid_step.value
            if _milli(pol):
                if (v * 1000).denominator != 1:
                    return True
            else:
                v, step, low = Fraction(math.ceil(v)), Fraction(math.ceil(step)), Fraction(math.ceil(low))
            if (v - low) % step != 0:
                return True
        return False
    if pol.valid_values:
        return not any(v == q.value for q in pol.valid_values)
    return False


class _Search:
    """One allocate call's search state."""

    def __init__(self, a: Allocator, node: Node, views: tuple[PoolView, ...], claims: Sequence[ResourceClaim],
                 plan: list[list[_Slot]], deadline: float) -> None:
        self.a = a
        self.node = node
        self.views = views
        self.claims = claims
        self.plan = plan
        self.in_use = a.in_use
        self.constraints: list[list[_Constraint]] = []
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.allocating: dict[str, int] = {}  # device id -> claims taking it in this search
        self.allocating_for: set[tuple[str, int]] = set()  # (device id, claim index)
        self.allocating_cap: dict[str, dict[str, Fraction]] = {}
        self.counters: dict[str, dict[tuple[str, str], Num]] = {}  # pool -> (set, counter) -> consumed
        self._view_of: dict[tuple[str, str], PoolView] | None = None
        self.steps = 0
        self.work = 0  # steps and devices looked at since the clock was last read
        self.deadline = deadline
        self.found: Callable[[], bool] | None = None  # an enumeration's: each solution, until it says stop
        self.max_steps = 0  # an enumeration's step bound (0: none)

    def tick(self) -> None:
        self.work = 0
        if self.max_steps and self.steps > self.max_steps:
            raise _OutOfSteps
        if self.a.clock() > self.deadline:
            raise _Timeout

    # -- "All" requests ----------------------------------------------------------------------------

    def gather_all(self, req: _Req) -> None:
        claim = self.claims[req.ci].key
        for v in self.views:
            # kube-scheduler cannot say what "all" is while a pool is in flux or broken, and says
            # so as an error (the pod's attempt ends), not as a node that does not fit.
            if v.incomplete:
                raise DeviceError(f"claim {claim}, request {req.name}: all devices are asked for, but pool {v.key} "
                                  "is being updated (it has fewer ResourceSlices than it announces)", claim, req.name)
            if v.invalid:
                raise DeviceError(f"claim {claim}, request {req.name}: all devices are asked for, but pool {v.key} "
                                  f"is invalid ({v.invalid})", claim, req.name)
            for e in v.devices:
                try:
                    if not _selectable(e, req.cls, req.exact):
                        continue
                except SelectorError as err:
                    raise err.for_claim(claim) from err
                if e.own_node is not None and not node_matches(e.own_node, self.node):
                    continue
                if not self.capacity_ok(req, e, static=True):
                    continue
                req.all_devices.append(e)
        return None

    # -- the recursion -----------------------------------------------------------------------------

    def one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: int) -> int:
        self.steps += 1
        self.work += 1
        if self.work >= _CHECK_EVERY:
            self.tick()
        if ci >= len(self.plan):
            return _DONE if self.found is None or self.found() else _FAIL
        slots = self.plan[ci]
        if ri >= len(slots):
            got = self.one(ci + 1, 0, 0, 0, False, 0)
            return _FAIL if got == _MAX else got
        slot = slots[ri]
        if slot.first_available and not in_sub:
            all_max = True
            for s in range(len(slot.alts)):
                slot.selected = s  # before: an enumeration builds its solutions below
                got = self.one(ci, ri, s, 0, True, 0)
                if got == _MAX:
                    continue
                all_max = False
                if got == _DONE:
                    return _DONE
            return _MAX if all_max else _FAIL
        req = slot.alts[si]
        if req.all_mode and not req.all_devices:
            return _FAIL
        if di >= req.count:
            return self.one(ci, ri + 1, 0, 0, False, 0)
        if req.count - di > RESULTS_MAX - len(self.results[ci]):
            return _MAX
        if req.all_mode:
            undo = self.take(req, req.all_devices[di], must=True)
            if undo is None:
                return _FAIL
            got = self.one(ci, ri, si, di + 1, in_sub, 0)
            if got != _DONE:
                undo()
            return got
        cands, errors = self.a._candidates(self.node, req.cls, req.exact, self.claims[ci].key)
        # The hot loop: its lookups bound to locals (the sets and dicts are changed in place only).
        admin, held, allocating, allocating_for = req.admin, self.in_use.exclusive, self.allocating, self.allocating_for
        for idx in range(start, len(cands)):
            # A step may look at thousands of devices: the clock is read by devices looked at too.
            self.work += 1
            if self.work >= _CHECK_EVERY:
                self.tick()
            e = cands[idx]
            if admin:
                if (e.id, ci) in allocating_for:
                    continue
            elif held(e.id) or e.id in allocating:
                continue
            if errors:
                err = errors.get(e.id)
                if err is not None:
                    raise err
            if not _tolerated(e, req):
                continue
            if e.device.capacity and not self.capacity_ok(req, e):
                continue
            undo = self.take(req, e, must=False)
            if undo is None:
                continue
            got = self.one(ci, ri, si, di + 1, in_sub, idx + 1)
            if got == _DONE:
                return _DONE
            undo()
            if got == _MAX:
                return _MAX
        return _FAIL

    # -- taking one device -------------------------------------------------------------------------

    def take(self, req: _Req, e: DeviceEntry, must: bool) -> Callable[[], None] | None:
        """Take ``e`` for ``req`` if it can be taken now, returning the undo. ``must``: an "All"
        request's device (a constraint it breaks is an error); else the search's loop, which has
        looked at whether the device is free and its taints tolerated already."""
        ci = req.ci
        multi = e.allow_multiple
        if must:
            if not multi and req.admin and (e.id, ci) in self.allocating_for:
                return None
            if not req.admin and (self.in_use.exclusive(e.id) or self.allocating.get(e.id)):
                return None
        uses = e.device.consumes_counters
        charged = False
        if uses and not (multi and self.capacity_in_use(e.id)):
            if not self.charge(e, 1):
                return None
            charged = True
        if must and e.taints and not _tolerated(e, req):
            if charged:
                self.charge(e, -1)
            return None
        added: list[_Constraint] = []
        for c in self.constraints[ci]:
            if not c.add(req, e):
                for d in reversed(added):
                    d.remove(req)
                if charged:
                    self.charge(e, -1)
                if must:
                    raise DeviceError(f"claim {self.claims[ci].key}, request {req.name}: cannot add device {e.id} "
                                      "because a claim constraint would not be satisfied",
                                      self.claims[ci].key, req.name)
                return None
            added.append(c)
        if not multi:
            self.allocating[e.id] = self.allocating.get(e.id, 0) + 1
            self.allocating_for.add((e.id, ci))
        consumed: dict[str, Fraction] | None = None
        share = ""
        if e.device.capacity or req.capacity:
            if not self.capacity_ok(req, e):
                self._untake(req, e, added, charged, multi, None)
                return None
            if multi:
                consumed = {name: _consumed(req.capacity.get(name), cap) for name, cap in e.device.capacity.items()}
                have = self.allocating_cap.setdefault(e.id, {})
                for k, v in consumed.items():
                    have[k] = have.get(k, Fraction(0)) + v
        if multi:
            share = self.a.share_id()
            if consumed is None:
                self.allocating_cap.setdefault(e.id, {})
                consumed = {}
        out = self.results[ci]
        out.append(_Result(req, e, share, consumed or None))

        def undo() -> None:
            out.pop()
            self._untake(req, e, added, charged, multi, consumed)
        return undo

    def _untake(self, req: _Req, e: DeviceEntry, added: list[_Constraint], charged: bool, multi: bool,
                consumed: dict[str, Fraction] | None) -> None:
        if consumed is not None:
            have = self.allocating_cap[e.id]
            for k, v in consumed.items():
                have[k] -= v
            if self._shares_in_search(e.id) == 0:
                del self.allocating_cap[e.id]
        if not multi:
            n = self.allocating[e.id] - 1
            if n:
                self.allocating[e.id] = n
            else:
                del self.allocating[e.id]
            self.allocating_for.discard((e.id, req.ci))
        for d in reversed(added):
            d.remove(req)
        if charged:
            self.charge(e, -1)

    def _shares_in_search(self, device_id: str) -> int:
        # Called after the result was popped: the shares this search still holds of the device.
        return sum(1 for rs in self.results for r in rs if r.entry.id == device_id and r.share_id)

    def capacity_in_use(self, device_id: str) -> bool:
        return self.in_use.shared(device_id) or device_id in self.allocating_cap

    def capacity_ok(self, req: _Req, e: DeviceEntry, static: bool = False) -> bool:
        """Whether ``e`` has the capacity ``req`` asks for (kube-scheduler's CmpRequestOverCapacity);
        ``static``: against the device's capacity alone."""
        caps = e.device.capacity
        if any(name not in caps for name in req.capacity):
            return False
        used = None if static else self.in_use.consumed(e.id)
        taking = None if static else self.allocating_cap.get(e.id)
        consumed = {}
        for name, cap in caps.items():
            v = _consumed(req.capacity.get(name), cap)
            if v < 0:
                raise DeviceError(f"claim {self.claims[req.ci].key}, request {req.name}: capacity {name!r}: "
                                  "capacity value is negative", self.claims[req.ci].key, req.name)
            consumed[name] = v
        for name, cap in caps.items():
            v = consumed[name]
            if _violates(v, cap):
                return False
            total = v + (used.get(name, 0) if used else 0) + (taking.get(name, 0) if taking else 0)
            if total > cap.value.value:
                return False
        return True

    def view_of(self, e: DeviceEntry) -> PoolView:
        if self._view_of is None:
            self._view_of = {(v.driver, v.pool): v for v in self.views}
        return self._view_of[(e.driver, e.pool)]

    def charge(self, e: DeviceEntry, sign: int) -> bool:
        """Add (sign 1) the counters ``e`` consumes to this search's, failing (and undoing) when a
        counter of its pool would be overdrawn; sign -1 takes them back. Only the counters ``e``
        touches need a look: every earlier addition was checked and nothing else changed since."""
        view = self.view_of(e)
        mine = self.counters.get(view.key)
        if mine is None:
            mine = self.counters[view.key] = {}
        if sign < 0:
            for k, v in e.uses:
                mine[k] -= v
            return True
        avail, overdrawn = self.a.available_counters(view)
        if overdrawn:
            return False
        for k, v in e.uses:
            mine[k] = mine.get(k, 0) + v
        for k, _ in e.uses:
            if avail.get(k, 0) < mine[k]:
                for k2, v2 in e.uses:
                    mine[k2] -= v2
                return False
        return True

    # -- why not -----------------------------------------------------------------------------------

    def diagnose(self) -> Unallocatable:
        """The first request that cannot be met even alone, and why; else the claims' constraints
        or requests competing for the same devices."""
        incomplete = next((v.key for v in self.views if v.incomplete), "")
        for ci, slots in enumerate(self.plan):
            claim = self.claims[ci].key
            for slot in slots:
                best: Unallocatable | None = None
                for req in slot.alts:
                    why = self._alone(req, claim, incomplete)
                    if why is None:
                        best = None
                        break
                    if best is None:
                        best = why
                if best is not None:
                    return best
        # Each request alone could be met: take devices first fit, request after request, without
        # constraints; the request that comes up short competes with the earlier ones.
        used: set[str] = set()
        for ci, slots in enumerate(self.plan):
            claim = self.claims[ci].key
            for slot in slots:
                short: Unallocatable | None = None
                for req in slot.alts:
                    free = [e for e in self._usable(req, claim) if e.id not in used]
                    want = len(req.all_devices) if req.all_mode else req.count
                    if len(free) >= want:
                        if not req.admin:
                            used.update(e.id for e in free[:want] if not e.allow_multiple)
                        short = None
                        break
                    if short is None:
                        short = Unallocatable("all-taken", claim, req.name, f"{len(free)}/{want}")
                if short is not None:
                    return short
        claim = next((self.claims[ci].key for ci, cs in enumerate(self.constraints) if cs),
                     self.claims[0].key if self.claims else "")
        return Unallocatable("constraint-unmet", claim)

    def _usable(self, req: _Req, claim: str) -> list[DeviceEntry]:
        if req.all_mode:
            matching = req.all_devices
        else:
            try:
                matching, _ = self.a._candidates(self.node, req.cls, req.exact, claim)
            except DeviceError:
                return []
        return [e for e in matching if _tolerated(e, req) and (req.admin or not self.in_use.exclusive(e.id))
                and (not e.device.capacity or self.capacity_ok(req, e)) and self._counters_left(e)]

    def _counters_left(self, e: DeviceEntry) -> bool:
        """Whether the pool's counters left (what allocated devices leave) cover what ``e`` consumes."""
        if not e.uses or (e.allow_multiple and self.in_use.shared(e.id)):
            return True
        avail, overdrawn = self.a.available_counters(self.view_of(e))
        return not overdrawn and all(v <= avail.get(k, 0) for k, v in e.uses)

    def _alone(self, req: _Req, claim: str, incomplete: str) -> Unallocatable | None:
        if req.all_mode:
            matching = req.all_devices
            if not matching:
                return Unallocatable("no-device-matches", claim, req.name, "0/1")
        else:
            try:
                matching, _ = self.a._candidates(self.node, req.cls, req.exact, claim)
            except DeviceError:
                matching = []
        want = max(req.count, 1)
        if len(matching) < want:
            if incomplete:
                return Unallocatable("pool-incomplete", claim, req.name, incomplete)
            return Unallocatable("no-device-matches", claim, req.name, f"{len(matching)}/{want}")
        tolerated = [e for e in matching if _tolerated(e, req)]
        if len(tolerated) < want:
            return Unallocatable("taint-not-tolerated", claim, req.name)
        free = self._usable(req, claim)
        if len(free) < want or (req.all_mode and len(free) < len(matching)):
            if incomplete:
                return Unallocatable("pool-incomplete", claim, req.name, incomplete)
            return Unallocatable("all-taken", claim, req.name, f"{len(free)}/{want}")
        return None
