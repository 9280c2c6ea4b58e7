"""The pools a snapshot's ResourceSlices make, as one node sees them.

Belongs here: which slices of a pool count for a node (kube-scheduler's per-node view: the newest
generation among the slices that reach the node; a pool with fewer of them than it announces is
incomplete, unless the other slices of that generation exist elsewhere; a newer generation
elsewhere makes an incomplete one obsolete), where a device can be used (the slice's nodeName,
nodeSelector, allNodes, or each device's own with perDeviceNodeSelection), a device's taints (its
own and the DeviceTaintRules that select it), pools that are invalid (duplicate device names,
counters that do not add up), the per-device cache of CEL verdicts (by expression), kept from
one build to the next for the slice objects that did not change, so a cycle over unchanged slices
evaluates no CEL, and a class's devices per node as NodeResourcesFit counts them to score an
extended resource the class backs (``of_class``), and what outlives an allocator with the pools (the
candidates per node and request, their arrays for ``counts``, device numbers, pinned node selectors).
Not here: what is allocated (``state``), the search (``allocator``), the counts (``counts``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from koordpy.api.dra import (
    AttrValue,
    Device,
    DeviceClass,
    Devices,
    DeviceTaint,
    DeviceTaintRule,
    NodeSelection,
    ResourceSlice,
)
from koordpy.api.objects import Node, NodeSelectorTerm
from koordpy.devices.cel import CelCompileError, CelError, compile_selector
from koordpy.devices.reasons import DeviceError

Num = int | Fraction  # a counter's value: an int when whole (the common case, and fast), else exact


def num(v: Fraction) -> Num:
    return v.numerator if v.denominator == 1 else v


def node_matches(sel: NodeSelection, node: Node) -> bool:
    """Whether devices published with this selection can be used on ``node``."""
    if sel.node_name:
        return node.name == sel.node_name
    if sel.all_nodes:
        return True
    if sel.node_selector is not None:
        return any(t.matches(node.name, node.labels) for t in sel.node_selector)
    return False


class SelectorError(Exception):
    """A CEL error met on a device: whose selector (the class's or the request's), which, and the error;
    made into a ``DeviceError`` with the claim's name where the search reaches the device."""

    def __init__(self, cls: DeviceClass | None, index: int, device: str, error: CelError) -> None:
        super().__init__(error.message)
        self.cls = cls
        self.index = index
        self.device = device
        self.error = error

    def for_claim(self, claim: str) -> DeviceError:
        kind = "compile" if isinstance(self.error, CelCompileError) else "runtime"
        where = f"class {self.cls.name}" if self.cls is not None else f"claim {claim}"
        return DeviceError(f"{where}: selector #{self.index} on device {self.device}: CEL {kind} error: "
                           f"{self.error.message}", claim)


class DeviceEntry:
    """One published device with what the allocator asks of it, computed once per build."""

    __slots__ = ("allow_multiple", "binding", "device", "driver", "id", "made", "name", "node_local",
                 "node_selector", "own_node", "plain", "pool", "qattrs", "slice", "taints", "uses", "verdicts")

    def __init__(self, sl: ResourceSlice, device: Device, taints: tuple[DeviceTaint, ...],
                 verdicts: dict[str, bool | CelError]) -> None:
        self.slice = sl
        self.device = device
        self.driver = sl.driver
        self.pool = sl.pool
        self.name = device.name
        self.id = f"{sl.driver}/{sl.pool}/{device.name}"
        self.taints = taints
        self.verdicts = verdicts
        self.allow_multiple = device.allow_multiple_allocations
        self.binding = bool(device.binding_conditions)
        # What it consumes of its pool's shared counters, by (counter set, counter).
        self.uses: tuple[tuple[tuple[str, str], Num], ...] = tuple(
            ((u.counter_set, c), num(q.value)) for u in device.consumes_counters for c, q in u.counters.items())
        # Attributes by fully qualified name: an unqualified name belongs to the driver's domain.
        self.qattrs: dict[str, AttrValue] = {
            (k if "/" in k else f"{sl.driver}/{k}"): v for k, v in device.attributes.items()}
        where = device.node if sl.node is None else sl.node
        # With perDeviceNodeSelection a device says where it can be used; the allocator checks it.
        self.own_node: NodeSelection | None = device.node if sl.node is None else None
        # An allocation that includes this device is pinned to the node it was found on when the
        # device is local to one node (or binds to it); a network-attached device carries its
        # slice's selector into the allocation.
        self.node_local = bool(where is not None and where.node_name) or device.binds_to_node
        self.node_selector: tuple[NodeSelectorTerm, ...] | None = (
            where.node_selector if where is not None else None)
        # Taken by one allocation alone, whatever else is taken: no shares, no shared counters, no
        # capacity policy, no taint that keeps it from being allocated. A request without admin access
        # or capacity of its own takes such devices first fit (``koordpy.devices.counts``).
        self.plain = (not self.allow_multiple and not device.consumes_counters
                      and all(c.policy is None and c.value.value >= 0 for c in device.capacity.values())
                      and not any(t.effect in ("NoSchedule", "NoExecute") for t in taints))
        # The results it made, by (request, admin access, tolerations): a result of a plain
        # allocation is the same value each time (``Allocator._first_fit``).
        self.made: dict[tuple[object, ...], object] | None = None

    def selected(self, expression: str) -> bool:
        """Whether the CEL selector ``expression`` admits this device; the verdict (or the runtime
        error) is kept for the next time. Raises ``CelError``."""
        got = self.verdicts.get(expression)
        if got is None:
            try:
                got = compile_selector(expression).matches(self.driver, self.device.attributes,
                                                           self.device.capacity, self.allow_multiple)
            except CelError as e:
                got = e
            self.verdicts[expression] = got
        if isinstance(got, CelError):
            raise got
        return got

    def __repr__(self) -> str:
        return f"DeviceEntry({self.id})"


@dataclass(slots=True)
class PoolView:
    """One pool as a node sees it. ``devices`` are those of the slices that reach the node, in
    kube-scheduler's order (slices by name, devices as listed); ``others`` the devices of the pool's
    slices that do not (they still consume its counters); ``counter_sets`` the pool's shared
    counters. An incomplete or invalid pool offers no device."""

    driver: str
    pool: str
    incomplete: bool = False
    invalid: str = ""  # why the pool is invalid ("" valid)
    devices: tuple[DeviceEntry, ...] = ()
    others: tuple[DeviceEntry, ...] = ()
    counter_sets: Mapping[str, Mapping[str, Fraction]] = field(default_factory=dict)
    counters: Mapping[tuple[str, str], Num] = field(default_factory=dict)  # the same, by (set, counter)
    binding: bool = False  # a device has binding conditions (such pools come last)

    @property
    def key(self) -> str:
        return f"{self.driver}/{self.pool}"


class _Pool:
    """Every slice of one (driver, pool), by generation."""

    __slots__ = ("by_gen", "driver", "pool")

    def __init__(self, driver: str, pool: str) -> None:
        self.driver = driver
        self.pool = pool
        self.by_gen: dict[int, list[ResourceSlice]] = {}


class Pools:
    """A snapshot's ResourceSlices grouped into pools, with a per-node view (``for_node``)."""

    def __init__(self) -> None:
        self._pools: dict[tuple[str, str], _Pool] = {}
        self._local: dict[str, list[ResourceSlice]] = {}  # node name -> its slices
        self._shared: list[ResourceSlice] = []  # slices with a selector, allNodes or per-device
        self._entries: dict[str, tuple[ResourceSlice, tuple[DeviceEntry, ...]]] = {}
        self._rules: tuple[DeviceTaintRule, ...] = ()
        self._views: dict[str, tuple[Node, tuple[PoolView, ...]]] = {}
        self._built: dict[tuple[str, str, int, tuple[str, ...]], PoolView] = {}
        self.slice_count = 0
        # The allocator's candidates per (node, class, selectors): (node, devices, CEL errors by
        # device id). Kept here because they depend on nothing but the pools, the class and the
        # request, and the pools outlive an allocator while slices, classes and rules are the same.
        # The last item: whether every device is ``plain`` and no selector failed.
        self.candidates: dict[tuple[object, ...],
                              tuple[Node, list[DeviceEntry], dict[str, SelectorError], bool]] = {}
        # Per request kind, its candidates on every node as arrays (``koordpy.devices.counts``): kept
        # here for the same reason, with the node list they were made for.
        self.selections: dict[tuple[object, ...], tuple[list[Node], object]] = {}
        self._index: dict[str, int] | None = None
        # An allocation's node selector pinning it to a node by name, per node (values, made once).
        self.pinned: dict[str, tuple[NodeSelectorTerm, ...]] = {}
        self._of_class: dict[str, tuple[DeviceClass, Sequence[Node], ClassDevices]] = {}

    @classmethod
    def build(cls, devices: Devices, previous: Pools | None = None) -> Pools:
        self = cls()
        rules = tuple(devices.taint_rules[k] for k in sorted(devices.taint_rules))
        self._rules = rules
        same_rules = previous is not None and len(previous._rules) == len(rules) and all(
            a is b for a, b in zip(previous._rules, rules, strict=True))
        for sl in devices.slices.values():
            self.slice_count += 1
            p = self._pools.get((sl.driver, sl.pool))
            if p is None:
                p = self._pools[(sl.driver, sl.pool)] = _Pool(sl.driver, sl.pool)
            p.by_gen.setdefault(sl.generation, []).append(sl)
            if sl.node is not None and sl.node.node_name:
                self._local.setdefault(sl.node.node_name, []).append(sl)
            else:
                self._shared.append(sl)
            old = previous._entries.get(sl.name) if previous is not None else None
            if old is not None and old[0] is sl and same_rules:
                self._entries[sl.name] = old
                continue
            old_verdicts = ([e.verdicts for e in old[1]] if old is not None and old[0] is sl
                            else [{} for _ in sl.devices])
            self._entries[sl.name] = (sl, tuple(
                DeviceEntry(sl, d, _taints(sl, d, rules), v)
                for d, v in zip(sl.devices, old_verdicts, strict=True)))
        return self

    def index(self) -> dict[str, int]:
        """A number for each device id the pools publish, 0 up (the arrays of ``counts`` are over these)."""
        if self._index is None:
            index: dict[str, int] = {}
            for _, entries in self._entries.values():
                for e in entries:
                    index.setdefault(e.id, len(index))
            self._index = index
        return self._index

    def entries(self, sl: ResourceSlice) -> tuple[DeviceEntry, ...]:
        return self._entries[sl.name][1]

    def of_class(self, cls: DeviceClass, nodes: Sequence[Node]) -> ClassDevices:
        """The devices of ``cls`` that reach each of ``nodes``, as kube-scheduler's NodeResourcesFit
        counts them to score an extended resource the class backs: every slice published for the node
        (or each device's own selection), whatever its pool's generation or completeness; a node where
        a class selector fails on a device counts none (its scorer gives up on the node). Kept while
        the pools, the class object and the node list are the same."""
        held = self._of_class.get(cls.name)
        if held is not None and held[0] is cls and held[1] is nodes:
            return held[2]
        index = {n.name: i for i, n in enumerate(nodes)}
        total = [0] * len(nodes)
        broken: set[int] = set()
        reaches: dict[str, list[int]] = {}  # device id -> the nodes it reaches (once per slice it is in)
        for _, entries in self._entries.values():
            reach: dict[int, list[int]] = {}  # the selection's id -> the nodes it reaches (one slice's)
            for e in entries:
                sel = e.own_node if e.own_node is not None else e.slice.node
                if sel is None:
                    continue
                at = reach.get(id(sel))
                if at is None:
                    at = reach[id(sel)] = _reached(sel, nodes, index)
                if not at:
                    continue
                try:
                    matches = all(e.selected(x) for x in cls.selectors)
                except CelError:
                    broken.update(at)
                    continue
                if matches:
                    for i in at:
                        total[i] += 1
                    reaches.setdefault(e.id, []).extend(at)
        for i in broken:
            total[i] = 0
        got = ClassDevices(tuple(total), {d: tuple(i for i in at if i not in broken) if broken else tuple(at)
                                          for d, at in reaches.items()})
        self._of_class[cls.name] = (cls, nodes, got)
        return got

    def serves(self, node: Node) -> bool:
        """Whether any slice's devices (of any generation) may be used on ``node``: its own slices
        by name, then the few published with a selector, for all nodes or per device."""
        if node.name in self._local:
            return True
        return any(node_matches(sl.node, node) if sl.node is not None
                   else any(d.node is not None and node_matches(d.node, node) for d in sl.devices)
                   for sl in self._shared)

    def for_node(self, node: Node) -> tuple[PoolView, ...]:
        """The pools whose devices ``node`` may use, sorted by driver and pool name, those with
        binding conditions last (kube-scheduler prefers devices that bind at once)."""
        got = self._views.get(node.name)
        if got is not None and got[0] is node:
            return got[1]
        relevant: dict[tuple[str, str], list[ResourceSlice]] = {}
        for sl in self._local.get(node.name, ()):
            _add(relevant, sl)
        for sl in self._shared:
            if sl.node is not None:
                if node_matches(sl.node, node):
                    _add(relevant, sl)
            elif any(d.node is not None and node_matches(d.node, node) for d in sl.devices):
                _add(relevant, sl)
        views = []
        for key, slices in relevant.items():
            view = self._view(self._pools[key], slices)
            if view is not None:
                views.append(view)
        views.sort(key=lambda v: (v.binding, v.driver, v.pool))
        out = tuple(views)
        self._views[node.name] = (node, out)
        return out

    def _view(self, p: _Pool, slices: list[ResourceSlice]) -> PoolView | None:
        gen = slices[0].generation
        announced = slices[0].slice_count
        names = tuple(sorted(s.name for s in slices))
        key = (p.driver, p.pool, gen, names)
        got = self._built.get(key)
        if got is not None:
            return got
        if len(slices) == announced:
            view = self._make(p, sorted(slices, key=lambda s: s.name), [])
        elif any(g > gen for g in p.by_gen):
            return None  # a newer generation exists elsewhere: these slices are obsolete
        elif len(p.by_gen[gen]) != announced:
            view = PoolView(p.driver, p.pool, incomplete=True)
        else:
            mine = set(names)
            view = self._make(p, sorted(slices, key=lambda s: s.name),
                              [s for s in p.by_gen[gen] if s.name not in mine])
        self._built[key] = view
        return view

    def _make(self, p: _Pool, slices: list[ResourceSlice], others: list[ResourceSlice]) -> PoolView:
        device_slices = [s for s in slices if not s.shared_counters]
        counter_slices = [s for s in slices if s.shared_counters] + [s for s in others if s.shared_counters]
        other_devices = [s for s in others if not s.shared_counters]
        binding = any(d.binding_conditions for s in device_slices for d in s.devices)
        seen: set[str] = set()
        for s in device_slices:
            for d in s.devices:
                if d.name in seen:
                    return PoolView(p.driver, p.pool, invalid=f"duplicate device name {d.name}", binding=binding)
                seen.add(d.name)
        counter_sets: dict[str, dict[str, Fraction]] = {}
        for s in counter_slices:
            for cs in s.shared_counters:
                if cs.name in counter_sets:
                    return PoolView(p.driver, p.pool, invalid=f"duplicate counter set name {cs.name}",
                                    binding=binding)
                counter_sets[cs.name] = {k: q.value for k, q in cs.counters.items()}
        for s in device_slices + other_devices:
            for d in s.devices:
                for use in d.consumes_counters:
                    have = counter_sets.get(use.counter_set)
                    if have is None:
                        return PoolView(p.driver, p.pool, invalid=f"counter set {use.counter_set} not found",
                                        binding=binding)
                    for c in use.counters:
                        if c not in have:
                            return PoolView(p.driver, p.pool, binding=binding,
                                            invalid=f"counter {c} not found in counter set {use.counter_set}")
        return PoolView(
            p.driver, p.pool,
            devices=tuple(e for s in device_slices for e in self._entries[s.name][1]),
            others=tuple(e for s in other_devices for e in self._entries[s.name][1]),
            counter_sets=counter_sets, binding=binding,
            counters={(name, c): num(v) for name, cs in counter_sets.items() for c, v in cs.items()})


@dataclass(frozen=True, slots=True)
class ClassDevices:
    """A class's devices per node (``Pools.of_class``): how many reach each node, and by device id
    the indexes of the nodes it reaches (a node twice when two slices list the id for it), to count
    the allocated ones."""

    total: tuple[int, ...]
    devices: Mapping[str, tuple[int, ...]]


def _reached(sel: NodeSelection, nodes: Sequence[Node], index: Mapping[str, int]) -> list[int]:
    if sel.node_name:
        i = index.get(sel.node_name)
        return [] if i is None else [i]
    if sel.all_nodes:
        return list(range(len(nodes)))
    return [i for i, n in enumerate(nodes) if node_matches(sel, n)]


def _add(relevant: dict[tuple[str, str], list[ResourceSlice]], sl: ResourceSlice) -> None:
    """Keep, per pool, the slices of the newest generation seen so far (kube-scheduler's addSlice)."""
    got = relevant.get((sl.driver, sl.pool))
    if got is None or sl.generation > got[0].generation:
        relevant[(sl.driver, sl.pool)] = [sl]
    elif sl.generation == got[0].generation:
        got.append(sl)


def _taints(sl: ResourceSlice, d: Device, rules: Iterable[DeviceTaintRule]) -> tuple[DeviceTaint, ...]:
    extra = tuple(r.taint for r in rules if r.selects(sl.driver, sl.pool, d.name))
    return d.taints + extra if extra else d.taints
