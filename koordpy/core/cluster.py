"""The snapshot's array form: the ``Cluster`` the kernels and placement read.

``Cluster`` turns a ``Snapshot`` into numpy arrays: allocatable and used resources per node, in a
fixed resource order, with the node order of the topology trees' input (natural name order); which
pods are counted where (``PodIndex``, ``PodMeta``); and the cluster's topology trees, which the
dialects build (``koordpy.core.dialects.Trees``). Belongs here: counting and undoing counts.
Does not belong here: the plain input (``koordpy.core.snapshot``), what a tree means to one API
family (the dialects), choosing nodes (``koordpy.core.placement``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat

import numpy as np
import numpy.typing as npt

from koordpy.api.disruption import STORE as DISRUPTION_BUDGETS
from koordpy.api.disruption import PodDisruptionBudget
from koordpy.api.objects import LABEL_DISABLE_PREEMPTIBLE, PODS, Pod, PriorityClass
from koordpy.core import dialects
from koordpy.core.dialects import DEFAULT_TREE, Trees
from koordpy.core.extended import backing
from koordpy.core.naming import natural_key
from koordpy.core.podrules import Presence
from koordpy.core.snapshot import Snapshot
from koordpy.core.tree import TopologyTree
from koordpy.core.txn import Txn

# The allocatable of a resource DRA serves on a node: more than any pod asks (and, summed over a
# million nodes, still far from overflowing).
UNBOUNDED = 1 << 40


def effective_priority(pod: Pod, classes: dict[str, PriorityClass]) -> int:
    """``spec.priority`` as the Priority admission plugin would have set it."""
    if pod.priority is not None:
        return pod.priority
    if pod.priority_class_name and pod.priority_class_name in classes:
        return classes[pod.priority_class_name].value
    default = next((c for c in classes.values() if c.global_default), None)
    return default.value if default else 0


class PodIndex:
    """Every counted pod as a row of arrays: its node, request and priority, and whether it is
    held (a pending pod counted where it is nominated or reserved), protected from preemption
    (labelled so, or already terminating), terminating because of preemption or admitted by a
    controller in front of koordpy (``PodMeta.admitted``), and the PodDisruptionBudget that covers
    it (``Budgets``; -1 none). Preemption reads it whole with numpy
    instead of walking pod objects. Rows of pods that are gone are reused."""

    def __init__(self, resources: int) -> None:
        self.row: dict[str, int] = {}
        self.keys: list[str] = []
        self._spare: list[int] = []
        self.node = np.zeros(0, dtype=np.int64)
        self.req = np.zeros((0, resources), dtype=np.int64)
        self.prio = np.zeros(0, dtype=np.int64)
        self.live = np.zeros(0, dtype=np.bool_)
        self.held = np.zeros(0, dtype=np.bool_)
        self.protected = np.zeros(0, dtype=np.bool_)
        self.doomed = np.zeros(0, dtype=np.bool_)
        self.admitted = np.zeros(0, dtype=np.bool_)
        self.pdb = np.zeros(0, dtype=np.int64)

    def _grow(self) -> None:
        n = max(64, 2 * len(self.keys))
        extra = n - len(self.keys)
        self.node = np.concatenate([self.node, np.full(extra, -1, dtype=np.int64)])
        self.req = np.concatenate([self.req, np.zeros((extra, self.req.shape[1]), dtype=np.int64)])
        self.prio = np.concatenate([self.prio, np.zeros(extra, dtype=np.int64)])
        self.pdb = np.concatenate([self.pdb, np.full(extra, -1, dtype=np.int64)])
        for name in ("live", "held", "protected", "doomed", "admitted"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(extra, dtype=np.bool_)]))
        self._spare.extend(range(n - 1, len(self.keys) - 1, -1))
        self.keys.extend([""] * extra)

    def put(self, key: str, node: int, req: npt.NDArray[np.int64], held: bool, meta: PodMeta, pdb: int = -1) -> None:
        i = self.row.get(key)
        if i is None:
            if not self._spare:
                self._grow()
            i = self.row[key] = self._spare.pop()
            self.keys[i] = key
        self.node[i], self.req[i], self.live[i], self.held[i], self.pdb[i] = node, req, True, held, pdb
        self.describe(i, meta)

    def describe(self, i: int, meta: PodMeta) -> None:
        self.prio[i], self.protected[i], self.doomed[i] = meta.priority, meta.protected, meta.doomed
        self.admitted[i] = meta.admitted

    def put_many(self, keys: list[str], nodes: npt.NDArray[np.int64], req: npt.NDArray[np.int64], held: bool,
                 metas: list[PodMeta], pdbs: list[int] | None = None) -> None:
        """``put`` for each of ``keys`` in turn (rows taken in the same order), the arrays set at once."""
        rows: list[int] = []
        row, spare = self.row, self._spare
        for key in keys:
            i = row.get(key)
            if i is None:
                if not spare:
                    self._grow()
                    spare = self._spare
                i = row[key] = spare.pop()
                self.keys[i] = key
            rows.append(i)
        at = np.array(rows, dtype=np.int64)
        self.node[at], self.req[at], self.live[at], self.held[at] = nodes, req, True, held
        self.pdb[at] = -1 if pdbs is None else pdbs
        self.describe_many(at, metas)

    def describe_many(self, rows: npt.NDArray[np.int64], metas: list[PodMeta]) -> None:
        self.prio[rows] = [m.priority for m in metas]
        self.protected[rows] = [m.protected for m in metas]
        self.doomed[rows] = [m.doomed for m in metas]
        self.admitted[rows] = [m.admitted for m in metas]

    def drop(self, key: str) -> None:
        i = self.row.pop(key, None)
        if i is not None:
            self.live[i] = False
            self.node[i] = -1
            self.keys[i] = ""
            self._spare.append(i)

    def on_node(self, node: int) -> list[str]:
        return [self.keys[i] for i in np.flatnonzero(self.live & (self.node == node)).tolist()]

    def on_nodes(self, nodes: list[int]) -> list[str]:
        """The pods counted on any of ``nodes`` (one pass over the rows, however many nodes)."""
        if not nodes:
            return []
        return [self.keys[i] for i in np.flatnonzero(self.live & np.isin(self.node, nodes)).tolist()]


@dataclass(frozen=True)
class PodMeta:
    priority: int
    pending: bool  # not bound: counted only where it is nominated or reserved
    protected: bool  # never a victim: labelled so, or terminating already
    doomed: bool  # terminating because a scheduler preempted it
    # A controller in front of koordpy admitted it (``dialects.admitted_by``, Kueue): that controller's
    # preemption, not koordpy's, may take it. Read off the pod's labels and annotations, so kept here,
    # made again whenever the pod object changes, rather than asked of every pod by each preemption.
    admitted: bool


_METAS: dict[tuple[int, bool, bool, bool, bool], PodMeta] = {}


def meta_of(priority: int, pending: bool, protected: bool, doomed: bool, admitted: bool) -> PodMeta:
    """The one ``PodMeta`` of these values: they are immutable and few, so pods share them (a gang
    of thousands makes none)."""
    key = (priority, pending, protected, doomed, admitted)
    found = _METAS.get(key)
    if found is None:
        if len(_METAS) >= 4096:  # priorities are few; a bound all the same
            _METAS.clear()
        found = _METAS[key] = PodMeta(*key)
    return found


def pod_meta(pod: Pod, classes: dict[str, PriorityClass]) -> PodMeta:
    return meta_of(effective_priority(pod, classes), not pod.node_name,
                   pod.deleting or pod.labels.get(LABEL_DISABLE_PREEMPTIBLE) == "true",
                   pod.deleting and pod.preempted, dialects.admitted_by(pod) is not None)


class Budgets:
    """The snapshot's PodDisruptionBudgets as numbers: each budget's id (its place in key order),
    ``allowed`` per id (``status.disruptionsAllowed``; 0 for a budget the disruption controller has
    not counted yet, as kube-scheduler reads it) and the (pod, budget) pairs that cost nothing (each
    budget's ``disruptedPods``: that budget's alone). ``of`` finds the budgets that cover a pod, once
    per pod as its row is counted: the index keeps the first, ``more`` every one of a pod several
    budgets cover (rare: the eviction API refuses such a pod). One rule everywhere for such a pod:
    it is charged to every budget that covers it (its eviction takes one from each, as the disruption
    controller will count it), in classification, in what a preemption spends, and in simulate."""

    def __init__(self, budgets: Mapping[str, PodDisruptionBudget] | None = None) -> None:
        self.items = [budgets[k] for k in sorted(budgets)] if budgets else []
        self.names = [b.key for b in self.items]
        self.allowed = np.array([b.disruptions_allowed or 0 for b in self.items], dtype=np.int64)
        self.status_allowed = self.allowed.copy()
        self.healthy = np.array([-1 if b.current_healthy is None else b.current_healthy for b in self.items],
                                dtype=np.int64)
        self.disrupted = {(f"{b.namespace}/{name}", i) for i, b in enumerate(self.items) for name in b.disrupted_pods}
        # What decides which pods a budget covers: when it is unchanged, so are the rows' ids.
        self.spec = tuple((b.namespace, b.selector) for b in self.items)
        self.more: dict[str, tuple[int, ...]] = {}  # pod key -> every budget covering it, when several do
        self._by_ns: dict[str, list[tuple[int, PodDisruptionBudget]]] = {}
        for i, b in enumerate(self.items):
            self._by_ns.setdefault(b.namespace, []).append((i, b))

    def __bool__(self) -> bool:
        return bool(self.items)

    def of(self, pod: Pod | None) -> int:
        """The id of the first budget covering ``pod``, -1 none; every one in ``more`` when several do."""
        if pod is None:
            return -1
        ids = [i for i, b in self._by_ns.get(pod.namespace, ()) if b.covers(pod)] if pod.labels else []
        if len(ids) > 1:
            self.more[pod.key] = tuple(ids)
        elif self.more:
            self.more.pop(pod.key, None)
        return ids[0] if ids else -1

    def all_of(self, key: str, first: int) -> tuple[int, ...]:
        """Every budget covering the pod ``key`` whose row holds ``first``."""
        if first < 0:
            return ()
        found = self.more.get(key)
        return found if found is not None and found[0] == first else (first,)

    def spend(self, b: int) -> None:
        self.allowed[b] = max(0, int(self.allowed[b]) - 1)

    def settle(self, index: PodIndex) -> None:
        """``allowed`` less the preempted pods a status has not counted yet. A pod a preemption is
        terminating stops counting as healthy for the disruption controller, which then lowers
        ``disruptionsAllowed``; until it has, the status still counts the pod and allows its
        eviction again (a second victim in the next cycle would break the budget). Such a status
        says more pods are healthy (``currentHealthy``) than are running now, not terminating: the
        difference, at most the budget's preempted pods still terminating (not in its
        ``disruptedPods``: the API server counted those already), is taken off. Readiness is not
        read, so a pod not ready counts as running: the difference is never too large, only too
        small, and a status that has caught up takes nothing off."""
        self.allowed = self.status_allowed.copy()
        if not bool(np.any(self.healthy > 0)):
            return
        n = len(self.items)
        covered = index.live & ~index.held & (index.pdb >= 0)
        running = covered & ~index.doomed
        going = covered & index.doomed
        now = np.bincount(index.pdb[running], minlength=n)
        dying = np.bincount(index.pdb[going], minlength=n)
        for key, ids in self.more.items():
            r = index.row.get(key)
            if r is not None and bool(covered[r]) and int(index.pdb[r]) == ids[0]:
                np.add.at(dying if bool(index.doomed[r]) else now, np.array(ids[1:], dtype=np.int64), 1)
        for key, b in self.disrupted:
            r = index.row.get(key)
            if r is not None and bool(going[r]) and b in self.all_of(key, int(index.pdb[r])):
                dying[b] -= 1
        unseen = np.minimum(np.maximum(0, self.healthy - now), np.maximum(0, dying))
        self.allowed = np.maximum(0, self.status_allowed - np.where(self.healthy >= 0, unseen, 0))


class Cluster:
    """Resource arrays over the snapshot's nodes, and which pods are counted where.

    ``used`` changes only through ``count`` (a pod's usage starts, moves or ends), ``change`` and
    ``shift`` (a Statement's trial moves, which the Statement records itself), so that every change
    can be undone (recorded in the open transaction, ``txn``: ``koordpy.core.txn``) and every room
    freed is known (``freed_since(tick)``; a job that failed for want of room needs another look
    only where room appeared after it failed).
    """

    def __init__(self, snapshot: Snapshot, assumed: Mapping[str, str] | None = None) -> None:
        self.nodes = sorted(snapshot.nodes, key=lambda n: natural_key(n.name))
        self.node_index = {n.name: i for i, n in enumerate(self.nodes)}
        resources = {PODS}
        for n in self.nodes:
            resources.update(n.allocatable)
        for p in snapshot.pods:
            resources.update(p.requests)
        self.resources = sorted(resources)
        self.res_index = {r: i for i, r in enumerate(self.resources)}
        self.allocatable = np.zeros((len(self.nodes), len(self.resources)), dtype=np.int64)
        for i, n in enumerate(self.nodes):
            for r, q in n.allocatable.items():
                self.allocatable[i, self.res_index[r]] = q
        # A resource a DeviceClass backs is DRA's on a node whose allocatable does not list it
        # (NodeResourcesFit leaves it to DynamicResources there): the fit does not bound it, the
        # node's devices do (``koordpy.core.claims``).
        self.backed = frozenset(backing(snapshot.devices.classes))
        for r in self.backed & set(self.resources):
            col = self.allocatable[:, self.res_index[r]]
            col[col <= 0] = UNBOUNDED
        self.used = np.zeros_like(self.allocatable)
        self.classes = snapshot.priority_classes
        default = next((c for c in self.classes.values() if c.global_default), None)
        self._default_priority = default.value if default else 0  # a pod that names no known class
        self.meta: dict[str, PodMeta] = {}
        self.index = PodIndex(len(self.resources))
        self._requests: dict[str, tuple[dict[str, int], npt.NDArray[np.int64]]] = {}
        self.counted: dict[str, tuple[int, npt.NDArray[np.int64]]] = {}  # pod -> (node, request) in used
        self.tick = 0
        self.moves = 0  # usage changes kept (room taken as well as freed): what a job of unlike pods watches
        self._freed: list[int | npt.NDArray[np.int64]] = []  # where room appeared at ticks base+1, base+2...
        self._freed_base = 0
        # Open while one job is evaluated (or a dry run), so what it changed can be undone.
        self.txn: Txn | None = None
        self.objects: dict[str, Pod] = {}  # every pod the cluster was told of, for the rules between pods
        self.presence = Presence(self.nodes, self.objects)
        self.presence.held = self._held
        self.presence.set_namespaces(snapshot.namespaces)
        self.budgets = Budgets(snapshot.of(DISRUPTION_BUDGETS))
        assumed = assumed or {}
        for p in snapshot.pods:
            self.recount(p.key, p, assumed)
        if self.budgets:
            self.budgets.settle(self.index)
        self.trees = Trees(snapshot, self.nodes)

    def _meta(self, pod: Pod, admitted: bool | None = None) -> PodMeta:
        """``pod_meta`` with the default priority found once (a pod of a gang of thousands asks it);
        ``admitted``: ``dialects.admitted_by`` already asked of it."""
        if pod.priority is not None:
            priority = pod.priority
        else:
            found = self.classes.get(pod.priority_class_name) if pod.priority_class_name else None
            priority = found.value if found is not None else self._default_priority
        deleting = pod.deleting
        if admitted is None:
            admitted = dialects.admitted_by(pod) is not None
        return meta_of(priority, not pod.node_name, deleting or pod.labels.get(LABEL_DISABLE_PREEMPTIBLE) == "true",
                       deleting and pod.preempted, admitted)

    @property
    def tree(self) -> TopologyTree:
        """The tree of a job that asks for none: the ClusterNetworkTopology's (the cluster and its
        nodes when there is none)."""
        return self.trees[DEFAULT_TREE]

    def freed_since(self, tick: int) -> npt.NDArray[np.int64]:
        """The nodes where room appeared after ``tick``."""
        assert tick >= self._freed_base, "asked about room freed before what is kept"
        parts = [np.atleast_1d(n) for n in self._freed[tick - self._freed_base:]]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def forget_freed(self, tick: int) -> None:
        """Drops what ``freed_since`` would return for ticks before ``tick`` (nobody asks any more)."""
        del self._freed[: max(0, tick - self._freed_base)]
        self._freed_base = max(self._freed_base, tick)

    def knows(self, pod: Pod) -> bool:
        """Whether every resource the pod requests has a column (else the arrays must be rebuilt)."""
        return self.res_index.keys() >= pod.requests.keys()

    def recount(self, key: str, pod: Pod | None, assumed: Mapping[str, str]) -> None:
        """Counts ``pod`` (None: gone) where it runs, is reserved or is nominated, if that changed.
        A nomination holds the room made for the pod against pods of lower or equal priority."""
        node = None
        if pod is None:
            self._requests.pop(key, None)  # gone: its cached vector would outlive it
            self.meta.pop(key, None)
        else:
            old = self.objects.get(key)
            if old is not None and old is not pod and self.presence.replace(key, old, pod):
                self.moves += 1  # a counted pod's labels changed: a job the rules hold back may go now
            self.objects[key] = pod
            meta = self.meta[key] = self._meta(pod)
            row = self.index.row.get(key)
            if row is not None:
                self.index.describe(row, meta)
                if self.budgets.items:  # its labels may have changed
                    self.index.pdb[row] = self.budgets.of(pod)
            if not pod.terminal:
                node = self.node_index.get(pod.node_name or assumed.get(key, "")
                                           or ("" if pod.deleting else pod.nominated_node_name))
        have = self.counted.get(key)
        if node is None:
            if have is not None:
                self.count(key, None)
            if pod is None:
                self.objects.pop(key, None)
            return
        assert pod is not None
        vec = self.request_vector(pod)
        held = not pod.node_name
        if have is None or have[0] != node or have[1] is not vec or self.is_held(key) != held:
            self.count(key, (node, vec), held=held)

    def recount_many(self, keys: Iterable[str], pods: Mapping[str, Pod], assumed: Mapping[str, str]) -> None:
        """``recount`` of each of ``keys`` (its pod in ``pods``, None when absent). A pod the cluster
        never knew that is pending and neither assumed nor nominated anywhere (a new gang's members)
        is only noted: it is counted nowhere, nothing else could change, and its ``PodMeta`` is made
        when first asked for (``_meta_for``)."""
        objects, counted, rows = self.objects, self.counted, self.index.row
        for key in keys:
            pod = pods.get(key)
            if (pod is not None and not pod.node_name and not pod.nominated_node_name and key not in assumed
                    and key not in objects and key not in counted and key not in rows):
                objects[key] = pod
            else:
                self.recount(key, pod, assumed)

    def _meta_for(self, key: str) -> PodMeta | None:
        """The pod's ``PodMeta`` (None for a pod the cluster does not know), made from the pod the
        cluster was last told of when ``recount_many`` left it to be asked for."""
        found = self.meta.get(key)
        if found is None:
            pod = self.objects.get(key)
            if pod is not None:
                found = self.meta[key] = self._meta(pod)
        return found

    def _held(self) -> list[tuple[str, int]]:
        """The pending pods counted where they are nominated or reserved, with their nodes."""
        idx = self.index
        return [(idx.keys[i], int(idx.node[i])) for i in np.flatnonzero(idx.live & idx.held).tolist()]

    def is_held(self, key: str) -> bool:
        row = self.index.row.get(key)
        return row is not None and bool(self.index.held[row])

    def count(self, key: str, entry: tuple[int, npt.NDArray[np.int64]] | None, held: bool = False) -> None:
        """Moves the pod's usage to ``entry`` (node, request), or ends it."""
        old = self.counted.get(key)
        if old is not None:
            # The same usage on the same node (a pod assumed there now bound there, its requests parsed
            # again into a new array) frees no room: counting it as freed would wake parked jobs for
            # nothing, and only when the confirmation happened to come after they were parked.
            same = entry is not None and old[0] == entry[0] and (
                old[1] is entry[1] or bool(np.array_equal(old[1], entry[1])))
            self.change(old[0], old[1], -1, frees=not same, pods=key)
        if entry is not None:
            self.change(entry[0], entry[1], 1, pods=key)
        self.adopt(key, entry, held)

    def adopt(self, key: str, entry: tuple[int, npt.NDArray[np.int64]] | None, held: bool = False) -> None:
        """Records the pod as counted at ``entry`` (whose usage is already in ``used``); ``held``: a
        pending pod's nomination or reservation, not a pod that runs there."""
        old = self.counted.get(key)
        was_held = self.is_held(key)
        self.moves += 1
        self._restore(key, entry, held)
        if self.txn is not None:
            self.txn.record(_Adopted(self, key, old, was_held))

    def adopt_many(self, keys: list[str], nodes: npt.NDArray[np.int64], request: npt.NDArray[np.int64]) -> None:
        """``adopt`` of each of ``keys`` on its node of ``nodes`` with the same ``request``, as pods
        that run there (not held), recorded as one undo."""
        counted, index = self.counted, self.index
        olds = list(map(counted.get, keys))
        self.moves += len(keys)
        counted.update(zip(keys, [(n, request) for n in nodes.tolist()], strict=True))
        was_held = self._held_flags(keys)
        default = PodMeta(0, False, False, False, False)
        pdbs = [self.budgets.of(self.objects.get(k)) for k in keys] if self.budgets.items else None
        index.put_many(keys, nodes, request, False, [m or default for m in self._metas_for(keys)], pdbs)
        if self.txn is not None:
            self.txn.record(_AdoptedMany(self, keys, olds, was_held))

    def _held_flags(self, keys: list[str]) -> list[bool] | None:
        """Whether each of ``keys`` has a held row; None when none has a row at all (a new gang's)."""
        at = list(map(self.index.row.get, keys))
        if all(i is None for i in at):
            return None
        held = self.index.held
        return [i is not None and bool(held[i]) for i in at]

    def _metas_for(self, keys: list[str]) -> list[PodMeta | None]:
        """``_meta_for`` of each of ``keys``: a gang's members mostly share what their metadata is
        made of, so what was made for one member is handed to the next one alike."""
        metas = self.meta
        found = list(map(metas.get, keys))
        made: dict[tuple[object, ...], PodMeta] = {}
        objects = self.objects
        for j, (key, meta) in enumerate(zip(keys, found, strict=True)):
            if meta is not None:
                continue
            pod = objects.get(key)
            if pod is None:
                continue
            admitted = dialects.admitted_by(pod) is not None
            alike = (pod.priority, pod.priority_class_name, pod.node_name == "", pod.deleting, pod.preempted,
                     pod.labels.get(LABEL_DISABLE_PREEMPTIBLE), admitted)
            meta = made.get(alike)
            if meta is None:
                meta = made[alike] = self._meta(pod, admitted)
            found[j] = metas[key] = meta
        return found

    def _restore(self, key: str, entry: tuple[int, npt.NDArray[np.int64]] | None, held: bool) -> None:
        if entry is None:
            self.counted.pop(key, None)
            self.index.drop(key)
        else:
            self.counted[key] = entry
            meta = self._meta_for(key) or PodMeta(0, held, False, False, False)
            self.index.put(key, entry[0], entry[1], held, meta,
                           self.budgets.of(self.objects.get(key)) if self.budgets.items else -1)

    def set_budgets(self, budgets: Mapping[str, PodDisruptionBudget]) -> None:
        """The snapshot's PodDisruptionBudgets, read each cycle once its pods are counted: their
        statuses taken as they are (less what they have not counted yet: ``Budgets.settle``), the
        rows' budget ids counted again only when a budget came, went or changed what it selects."""
        new = Budgets(budgets)
        if new.spec == self.budgets.spec:
            new.more = self.budgets.more  # the rows' ids stand, and so do the pods several budgets cover
        else:
            idx = self.index
            live = np.flatnonzero(idx.live)
            idx.pdb[live] = [new.of(self.objects.get(idx.keys[i])) for i in live.tolist()] if new else -1
        self.budgets = new
        new.settle(self.index)

    def _describe(self, key: str, meta: PodMeta | None, held: bool | None) -> None:
        """Sets the pod's metadata (and ``held``), recording what undoes it."""
        row = self.index.row.get(key)
        if self.txn is not None:
            self.txn.record(_Described(self, key, self._meta_for(key),
                                       None if row is None else bool(self.index.held[row])))
        self._set_meta(key, meta, held)

    def _set_meta(self, key: str, meta: PodMeta | None, held: bool | None) -> None:
        if meta is None:
            self.meta.pop(key, None)
        else:
            self.meta[key] = meta
        row = self.index.row.get(key)
        if row is not None:
            if held is not None:
                self.index.held[row] = held
            if meta is not None:
                self.index.describe(row, meta)

    def bound(self, key: str) -> None:
        """The pod was bound this cycle: until the next snapshot says so, it runs where it is counted."""
        meta = self._meta_for(key)
        self._describe(key, None if meta is None else meta_of(meta.priority, False, meta.protected, meta.doomed,
                                                                   meta.admitted),
                       held=False)

    def bound_many(self, keys: list[str]) -> None:
        """``bound`` for each of ``keys``, recorded as one undo."""
        metas, index = self.meta, self.index
        olds = self._metas_for(keys)
        at = list(map(index.row.get, keys))
        held = self._held_flags(keys)
        # The metadata of a bound pod: its own, no longer pending (PodMeta are shared, so few to make).
        made: dict[int, PodMeta] = {}
        rows: list[int] = []
        described: list[PodMeta] = []
        for k, m, i in zip(keys, olds, at, strict=True):
            if m is None:
                metas.pop(k, None)
                continue
            now = made.get(id(m))
            if now is None:
                now = made[id(m)] = meta_of(m.priority, False, m.protected, m.doomed, m.admitted)
            metas[k] = now
            if i is not None:
                rows.append(i)
                described.append(now)
        if rows:
            where = np.array(rows, dtype=np.int64)
            index.held[where] = False
            index.describe_many(where, described)
        if self.txn is not None:
            self.txn.record(_DescribedMany(self, keys, olds, [i is not None for i in at], held))

    def doom(self, key: str) -> None:
        """The pod is being preempted this cycle: no later job may count it as a victim again, and its
        budget (a PodDisruptionBudget's) has one disruption fewer for them, as its status will say."""
        meta = self._meta_for(key)
        if meta is not None:
            self._describe(key, meta_of(meta.priority, meta.pending, True, True, meta.admitted), held=None)
        row = self.index.row.get(key)
        if self.budgets and row is not None:
            budgets = self.budgets
            for b in budgets.all_of(key, int(self.index.pdb[row])):
                if (key, b) not in budgets.disrupted:
                    if self.txn is not None:
                        self.txn.record(_Spent(budgets, b, int(budgets.allowed[b])))
                    budgets.spend(b)

    def change(self, nodes: int | npt.NDArray[np.int64], request: npt.NDArray[np.int64], sign: int,
               frees: bool = False, pods: str | list[str] | None = None) -> None:
        """``shift``, recorded in the open transaction (undone by the opposite shift)."""
        self.shift(nodes, request, sign, frees, pods)
        if self.txn is not None:
            self.txn.record(_Changed(self, nodes, request, sign, pods))

    def shift(self, nodes: int | npt.NDArray[np.int64], request: npt.NDArray[np.int64], sign: int,
              frees: bool = False, pods: str | list[str] | None = None) -> None:
        """Adds (sign 1) or removes (sign -1) ``request`` on one node or on each of ``nodes``
        (repeats count), recording nothing. ``frees``: room that other jobs may now use appeared (a
        trial move undone is not that: nobody else ever saw it taken). ``pods``: whose move it is
        (one key, or one per node), which the rules between pods follow."""
        if isinstance(nodes, int):
            self.used[nodes] += sign * request
        else:
            np.add.at(self.used, nodes, sign * request)
        if isinstance(pods, str):
            self.presence.move(pods, nodes, sign)
        elif pods is not None:
            assert not isinstance(nodes, int)
            self.presence.move_many(pods, nodes, sign)
        if frees:
            self.tick += 1
            self._freed.append(nodes)

    def request_vector(self, pod: Pod) -> npt.NDArray[np.int64]:
        """The pod's requests in resource order; shared, so callers must not mutate it. The same
        requests give the same array object, which is how ``recount`` sees nothing changed."""
        cached = self._requests.get(pod.key)
        if cached is not None and cached[0] is pod.requests:
            return cached[1]
        v = np.zeros(len(self.resources), dtype=np.int64)
        for r, q in pod.requests.items():
            v[self.res_index[r]] = q
        v.setflags(write=False)
        if cached is not None and np.array_equal(cached[1], v):
            v = cached[1]
        self._requests[pod.key] = (pod.requests, v)
        return v

    def shapes(self, pods: list[Pod]) -> dict[bytes, tuple[npt.NDArray[np.int64], list[int]]]:
        """``pods`` grouped by request vector: the vector's bytes -> (the vector, positions in ``pods``),
        groups in the order they first appear, each group's vector the ``request_vector`` of its first
        pod. Pods whose requests read alike (a gang's members) share that group without a vector of
        their own being made: ``request_vector`` asked of them later gives one equal to it."""
        shapes: dict[bytes, tuple[npt.NDArray[np.int64], list[int]]] = {}
        seen: dict[tuple[tuple[str, int], ...], list[int]] = {}  # requests as stated -> their group's positions
        last: dict[str, int] | None = None
        group: list[int] = []
        for i, p in enumerate(pods):
            requests = p.requests
            if requests != last:  # not the requests of the pod before (equal dicts: the same vector)
                stated = tuple(requests.items())
                found = seen.get(stated)
                if found is None:
                    vec = self.request_vector(p)
                    found = seen[stated] = shapes.setdefault(vec.tobytes(), (vec, []))[1]
                group, last = found, requests
            group.append(i)
        return shapes

    def free(self) -> npt.NDArray[np.int64]:
        return self.allocatable - self.used

    def reclaimable(self, nodes: npt.NDArray[np.int64], priority: int) -> npt.NDArray[np.int64]:
        """Per node of ``nodes``, what pods of lower priority that preemption may evict hold there."""
        out = np.zeros((len(nodes), len(self.resources)), dtype=np.int64)
        idx = self.index
        if not len(nodes) or not len(idx.keys):
            return out
        pos = np.full(len(self.nodes), -1, dtype=np.int64)
        pos[nodes] = np.arange(len(nodes), dtype=np.int64)
        rows = np.flatnonzero(idx.live & (idx.prio < priority) & ~idx.protected)
        rows = rows[pos[idx.node[rows]] >= 0]
        np.add.at(out, pos[idx.node[rows]], idx.req[rows])
        return out

    @staticmethod
    def natural_order(names: Iterable[str]) -> list[str]:
        return sorted(names, key=natural_key)


# What the cluster records in an open transaction, each with what undoes it.


@dataclass(frozen=True)
class _Changed:
    cluster: Cluster
    nodes: int | npt.NDArray[np.int64]
    request: npt.NDArray[np.int64]
    sign: int
    pods: str | list[str] | None

    def undo(self) -> None:
        self.cluster.shift(self.nodes, self.request, -self.sign, pods=self.pods)


@dataclass(frozen=True)
class _Adopted:
    cluster: Cluster
    key: str
    old: tuple[int, npt.NDArray[np.int64]] | None
    was_held: bool

    def undo(self) -> None:
        self.cluster._restore(self.key, self.old, self.was_held)


@dataclass(frozen=True)
class _AdoptedMany:
    """``adopt`` of each of ``keys``: what each was counted at before (``olds``) and whether its row
    was held (``was_held``; None: none had a row), kept as lists rather than a tuple a pod."""

    cluster: Cluster
    keys: list[str]
    olds: list[tuple[int, npt.NDArray[np.int64]] | None]
    was_held: list[bool] | None

    def undo(self) -> None:
        held = reversed(self.was_held) if self.was_held is not None else repeat(False)
        for key, old, was_held in zip(reversed(self.keys), reversed(self.olds), held, strict=False):
            self.cluster._restore(key, old, was_held)


@dataclass(frozen=True)
class _DescribedMany:
    """``bound`` of each of ``keys``: each one's metadata before and, where it had a row
    (``rowed``), whether that row was held (``held``; None: none had a row)."""

    cluster: Cluster
    keys: list[str]
    metas: list[PodMeta | None]
    rowed: list[bool]
    held: list[bool] | None

    def undo(self) -> None:
        held = reversed(self.held) if self.held is not None else repeat(False)
        for key, meta, rowed, was in zip(reversed(self.keys), reversed(self.metas), reversed(self.rowed), held,
                                         strict=False):
            self.cluster._set_meta(key, meta, was if rowed else None)


@dataclass(frozen=True)
class _Spent:
    """``doom`` took one from budget ``b``, which allowed ``was`` before."""

    budgets: Budgets
    b: int
    was: int

    def undo(self) -> None:
        self.budgets.allowed[self.b] = self.was


@dataclass(frozen=True)
class _Described:
    cluster: Cluster
    key: str
    meta: PodMeta | None
    held: bool | None

    def undo(self) -> None:
        self.cluster._set_meta(self.key, self.meta, self.held)
