"""The scheduler's view of the cluster, fed by watch events and the initial list.

Objects are kept parsed; an object that does not parse, for whatever reason, is kept as an
error so the loop can report it, and pending pods are held to the gang and topology
annotation rules ``koordpy simulate`` enforces before they reach the core. Nothing a watch
delivers can make ``observe`` raise. Every update carries its resourceVersion, and an older one never replaces
a newer one (a watch that restarts may replay). Pods the scheduler has just bound are
"assumed" on their node until the watch confirms the binding, so the next cycle cannot
place something else in their room. Preemption's writes are assumed the same way: a victim
counts as terminating (still holding its room) and a nominated pod carries its
nominatedNodeName, until the watch shows it or the write fails.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import structlog

from koordpy.api import kinds
from koordpy.api.dra import Devices, ResourceClaim
from koordpy.api.errors import ParseError, object_ref
from koordpy.api.kinds import Kind, by_name, new_stores, snapshot_fields
from koordpy.api.objects import Pod
from koordpy.api.storage import PersistentVolume, PersistentVolumeClaim, Storage
from koordpy.api.stores import Stores
from koordpy.core.declarations import Declarations
from koordpy.core.snapshot import PodChanges, Snapshot

log = structlog.get_logger("koordpy.cache")
V = TypeVar("V")
ASSUME_TTL = 60.0  # seconds a written but unconfirmed binding keeps its room (none while it is written)
# Stores whose objects are kept as they were when an update brings an equal one (a kubelet's
# heartbeat, say): downstream, unchanged is told by identity, and no cycle is owed. A ResourceSlice
# or DeviceClass rewritten alike (a driver republishing, a label added) keeps the object the
# devices' per-slice caches (CEL verdicts) are held against.
KEPT_IF_EQUAL = frozenset({"nodes", "pods", "devices.slices", "devices.classes"})
CLAIMS = "devices.claims"  # the registry's store of ResourceClaims (namespace/name -> ResourceClaim)


@dataclass(eq=False)
class ClaimAssumption:
    """A write on a ResourceClaim shown in the cache before the watch brings it (``Cache.assume_claim``):
    ``shown`` makes the claim as the write leaves it, ``written`` tells the claim as written."""

    key: str
    shown: Callable[[ResourceClaim], ResourceClaim]
    written: Callable[[ResourceClaim], bool]
    since: float = math.inf  # when the write was made (monotonic): ASSUME_TTL counts from then


@dataclass(frozen=True)
class InvalidObject:
    """Something to report: an object that does not parse, or a pending pod whose gang or
    topology annotations are wrong. ``claimed`` pods also get a PodScheduled=False condition."""

    kind: str
    key: str
    uid: str
    error: str
    claimed: bool


# The cache names of the kinds whose objects declare gangs and report their errors as a Snapshot's
# ``invalid_podgroups`` (a pod naming such an object that does not parse waits for it), for the
# registry they were read from: read again when it changes (``kinds.register``).
_GANG_ERROR_LABELS: tuple[tuple[Kind, ...], tuple[str, ...]] = ((), ())


def _gang_error_labels() -> tuple[str, ...]:
    global _GANG_ERROR_LABELS
    registry, labels = _GANG_ERROR_LABELS
    if registry is not kinds.KINDS:
        labels = tuple(k.label for k in kinds.KINDS if k.errors == "invalid_podgroups")
        _GANG_ERROR_LABELS = (kinds.KINDS, labels)
    return labels


def _status_kind(kind: Kind) -> bool:
    """A cluster-scoped kind whose status koordpy writes (a topology object's): the dialects compute
    those statuses from the core's trees, and the loop writes them."""
    return kind.writes_status and not kind.namespaced


class _InvalidGroups:
    """The gang keys a snapshot taken now would hold in ``invalid_podgroups``, read off the cache's
    ``invalid`` table on demand: what a pod is checked against when it arrives, between snapshots."""

    __slots__ = ("_invalid",)

    def __init__(self, invalid: dict[tuple[str, str], tuple[str, dict[str, Any]]]) -> None:
        self._invalid = invalid

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and any((label, key) in self._invalid for label in _gang_error_labels())


def _rv(raw: dict[str, Any]) -> int:
    meta = raw.get("metadata") or {}
    try:
        return int(meta.get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def _kind(kind: str | Kind) -> tuple[Kind | None, str]:
    """The registry's entry and the cache's name for it, given either."""
    if isinstance(kind, Kind):
        return kind, kind.label
    return by_name(kind), kind


class Changes(asyncio.Event):
    """That the cache changed since the loop last looked, and whether any change was more than a
    bound pod's (``urgent``). A bound pod's status, condition or deletion (a victim's, kwok's or the
    kubelet's updates, one to three events a pod) only wakes a job parked for that room, which may
    wait for the calm batch (``SchedulerLoop`` after a cycle that decided nothing): a cycle per batch
    of 1,000 victims' events rather than per few. Anything else (a pending pod, a node, a gang, the
    shell's own assumptions) is urgent."""

    def __init__(self) -> None:
        super().__init__()
        self.urgent = asyncio.Event()

    def set(self) -> None:
        super().set()
        self.urgent.set()

    def set_calm(self) -> None:
        super().set()

    def clear(self) -> None:
        super().clear()
        self.urgent.clear()


def _key(kind: Kind | None, raw: dict[str, Any]) -> str:
    if kind is not None:
        return kind.key(raw)
    meta = raw.get("metadata") or {}
    return str(meta.get("name") or "")


@dataclass
class Cache(Stores):
    # Every kind's objects, filed by the registry (``Kind.store`` -> key -> parsed object); the
    # names ``Stores`` reads them by (``nodes``, ``pods``...) are the ones the loop reads.
    stores: dict[str, dict[str, Any]] = field(default_factory=new_stores)
    # The objects whose status the loop writes from the core's trees (``_status_kind``), as read,
    # by store and key (one that does not parse too: its status says why it is not used).
    status_raw: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    statuses_changed: bool = True  # those objects or the nodes changed: their statuses are due for a look
    invalid: dict[tuple[str, str], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    assumed: dict[str, tuple[str, float]] = field(default_factory=dict)  # pod -> (node, when)
    nominated: dict[str, tuple[str, float]] = field(default_factory=dict)  # pod -> (node or "", when)
    preempting: dict[str, float] = field(default_factory=dict)  # victim -> when
    # Pending pods whose binding cycle failed -> when their backoff ends (monotonic): left out of the
    # snapshots until then, as kube-scheduler's backoff queue holds them (``back_off``).
    backing_off: dict[str, float] = field(default_factory=dict)
    # Unbound pods with spec.schedulingGates -> their schedulerName: the metrics' gated queue.
    gated: dict[str, str] = field(default_factory=dict)
    versions: dict[tuple[str, str], int] = field(default_factory=dict)
    # A skimmed kind's objects (``Kind.skim``): cache name -> key -> the hash of the section's bytes
    # the held object was read with, so that a later event with the same bytes needs no more read.
    signs: dict[str, dict[str, int]] = field(default_factory=dict)
    # (cache name, key) -> the API group of the resource that filed it: a LIST drops only its own.
    listed_by: dict[tuple[str, str], str] = field(default_factory=dict)
    changed: Changes = field(default_factory=lambda: Changes())
    # Pending pods the last snapshot left out for their annotations: key -> error.
    rejected: dict[str, str] = field(default_factory=dict)
    # The dialects' checks of pending pods' declarations, and what they answered while it holds.
    declarations: Declarations = field(default_factory=Declarations)
    # key -> (the cached pod, the copy the snapshot showed for it): the core finds changes by
    # identity, so an assumed pod is the same object from one snapshot to the next.
    _shown: dict[str, tuple[Pod, Pod]] = field(default_factory=dict)
    # The pods as the last snapshot showed them, kept up to date key by key: a snapshot costs the
    # pods that changed since the last one (``_dirty``), not the cluster's pods.
    _visible: dict[str, Pod] = field(default_factory=dict)
    _dirty: dict[str, None] = field(default_factory=dict)  # a dict: the core sees pods in arrival order
    _pending: dict[str, tuple[str, ...]] = field(default_factory=dict)  # claimed pending pod -> the groups it names
    _groups_changed: set[str] = field(default_factory=set)  # gangs whose declaration changed meanwhile
    # Counts the changes of the gang kinds' objects (what a pod's declaration is checked against): a
    # pod checked since the last one needs no look at them (``Declarations.check``).
    _groups_version: int = 0
    _names: frozenset[str] | None = None  # the scheduler names the last snapshot was for
    _number: int = 0  # snapshots handed out
    # Claims, volumes, classes and CSINodes (the volume rules' objects): the storage stores. PreBind's
    # writes are assumed here at once (``assume_storage``) until the watch brings the objects as written.
    storage: Storage = field(init=False)
    # The DRA objects over their stores (``Stores.devices``).
    devices: Devices = field(init=False)
    # ResourceClaims with a write in flight or not yet shown by the watch: key -> the assumptions laid
    # over the claim, and the claim as the watch last brought it (the store shows it with them).
    _claim_assumptions: dict[str, list[ClaimAssumption]] = field(default_factory=dict)
    _claims_seen: dict[str, ResourceClaim] = field(default_factory=dict)
    # Claims a binding cycle is creating (a pod's DRA-backed extended resources), shown under a key no
    # object can have until the watch brings the created claim allocated: provisional key -> (the
    # created claim's key, "" while unknown; when that was learnt, monotonic).
    _creating: dict[str, tuple[str, float]] = field(default_factory=dict)

    def observe(self, kind: str | Kind, event_type: str | None, raw: dict[str, Any], sign: int | None = None) -> None:
        """One watch event (type ADDED, MODIFIED, DELETED, or None for a listed object) of ``kind``
        (the registry's entry, or the name the cache files it under). ``sign``: the hash of the bytes
        of its skimmed section (``Kind.skim``) as the watch line had them, kept for ``observe_skimmed``.

        Never raises: a watch handler that raised would leave the object unknown to the cache
        (kopf logs and drops the event; the pod watch would relist forever)."""
        try:
            self._observe(kind, event_type, raw, sign=sign)
        except Exception:
            name = _kind(kind)[1]
            log.exception("cannot process a watch event", kind=name, event_type=event_type,
                          object=object_ref(raw, name) if isinstance(raw, dict) else repr(raw)[:200])

    def observe_skimmed(self, kind: Kind, event_type: str | None, raw: dict[str, Any], sign: int) -> bool:
        """A watch event of a skimmed kind whose object came without its ``Kind.skim`` section,
        ``sign`` the hash of that section's bytes: filed from the object held when it was read from
        the same bytes and ``Kind.renew`` brings it up to date (a deletion needs no section at all).
        False when the whole object must be read and filed instead (``observe``)."""
        if event_type == "DELETED":
            self.observe(kind, event_type, raw)
            return True
        key = kind.key(raw)
        if kind.renew is None or self.signs.get(kind.label, {}).get(key) != sign:
            return False
        held = self.stores[kind.store].get(kind.store_key(key))
        try:
            obj = None if held is None else kind.renew(held, raw)
        except Exception:
            # Whatever the shortcut trips on (a status that does not parse), reading the whole
            # object says it properly.
            log.debug("skimmed event not filed, reading it whole", kind=kind.label, exc_info=True)
            return False
        if obj is None:
            return False
        try:
            self._observe(kind, event_type, raw, obj=obj, sign=sign)
        except Exception:  # as ``observe``: logged, never raised into the watch
            log.exception("cannot process a watch event", kind=kind.label, event_type=event_type,
                          object=object_ref(raw, kind.label))
        return True

    def _observe(self, kind: str | Kind, event_type: str | None, raw: dict[str, Any], *,
                 obj: object | None = None, sign: int | None = None) -> None:
        found, name = _kind(kind)
        key = _key(found, raw)
        rv = _rv(raw)
        at = (name, key)  # one tuple for both tables: two per object would be 1.3 MiB at 20,000 objects
        seen = self.versions.get(at, -1)
        if rv and (rv < seen or (rv == seen and event_type != "DELETED")):
            # A replay of something older than what we hold, or the very version we hold (a resync's
            # LIST brings every object again: parsing 16,000 unchanged pods to compare them cost the
            # event loop seconds every 5 minutes).
            return
        self.versions[at] = rv
        if found is not None:
            self.listed_by[at] = found.group
        if event_type == "DELETED":
            calm = self._bound(found, key)
            self._remove(found, name, key)
            self.versions.pop(at, None)
            self.listed_by.pop(at, None)
            self.changed.set_calm() if calm else self.changed.set()
            return
        if found is not None and found.skim:
            signs = self.signs.setdefault(name, {})
            if sign is None:
                signs.pop(key, None)
            else:
                signs[key] = sign
        if not self._store(found, name, key, raw, obj):
            return  # a heartbeat: nothing scheduling reads changed, and no cycle is owed
        self.changed.set_calm() if self._bound(found, key) else self.changed.set()

    def _bound(self, kind: Kind | None, key: str) -> bool:
        """Whether ``key`` is a pod held bound to a node: what changes of it do (its status, its
        deletion, a victim's condition) may wait for the loop's calm batch (``Changes``)."""
        if kind is None or kind.store != "pods":
            return False
        pod = self.stores["pods"].get(key)
        return pod is not None and bool(pod.node_name)

    def reconcile(self, kind: str | Kind, items: list[dict[str, Any]], list_version: int) -> int:
        """A full LIST of ``kind`` at ``list_version``: stores every item and drops what the
        cache holds from before that list but the list no longer has (a deletion whose watch
        event was never seen, say between the first list and the first watch). Returns how
        many were dropped."""
        return self.drop_unlisted(kind, self.observe_listed(kind, items), list_version)

    def observe_listed(self, kind: str | Kind, items: list[dict[str, Any]]) -> set[str]:
        """Stores listed objects (a page of a LIST); returns their keys."""
        found = _kind(kind)[0]
        listed = set()
        for raw in items:
            listed.add(_key(found, raw))
            self.observe(kind, None, raw)
        return listed

    def drop_unlisted(self, kind: str | Kind, listed: set[str], list_version: int) -> int:
        """After a whole LIST at ``list_version`` that had ``listed``: drops what the cache holds
        of ``kind`` from before the list and not in it. Returns how many were dropped."""
        found, name = _kind(kind)
        # Only what this resource brought: two resources may share a cache name (Kueue's and KAI's
        # Topology), and one's LIST says nothing of the other's objects.
        group = found.group if found is not None else None
        stale = [key for (k, key), version in self.versions.items()
                 if k == name and key not in listed and version <= list_version
                 and self.listed_by.get((k, key), group) == group]
        for key in stale:
            self._remove(found, name, key)
            self.versions.pop((name, key), None)
            self.listed_by.pop((name, key), None)
        if stale:
            self.changed.set()
        return len(stale)

    def _store(self, kind: Kind | None, name: str, key: str, raw: dict[str, Any], parsed: object | None = None) -> bool:
        """Files the object where the registry says (``parsed``: as read already); False when it is an
        object of a KEPT_IF_EQUAL store equal to the one held, which is then kept as it was, object and all."""
        was_invalid = self.invalid.pop((name, key), None) is not None
        if kind is None:
            return True
        if kind.gang:
            self._groups_changed.add(key)
            self._groups_version += 1
        try:
            kind.check_only(raw, name)  # reported, as `koordpy simulate` refuses it, and never used
            obj = kind.parse(raw) if parsed is None else parsed
            store = self.stores[kind.store]
            at = kind.store_key(key)
            if kind.store in KEPT_IF_EQUAL and not was_invalid and store.get(at) == obj:
                return False
            store[at] = obj
            filed = _FILED.get(kind.store)
            if filed is not None:
                filed(self, key, obj, raw)
            elif _status_kind(kind):
                self._status_filed(kind.store, key, raw)
        except Exception as exc:  # whatever a parser raises, the object is reported, never dropped
            if isinstance(exc, ParseError):
                err = str(exc)
            else:
                # A parser that fails other than with ParseError has a bug; the traceback says where.
                err = f"{object_ref(raw, name)}: cannot be read: {type(exc).__name__}: {exc}"
                log.exception("parser failed", kind=name, object=key)
            self._remove(kind, name, key)
            self.invalid[(name, key)] = (err, raw)
            if _status_kind(kind) and (not kind.only or key == kind.only):
                self._status_filed(kind.store, key, raw)  # its status says why it is not used
        return True

    def _remove(self, kind: Kind | None, name: str, key: str) -> None:
        self.invalid.pop((name, key), None)
        if kind is None:
            return
        if kind.skim:
            self.signs.get(name, {}).pop(key, None)
        if kind.gang:
            self._groups_changed.add(key)
            self._groups_version += 1
        self.stores[kind.store].pop(kind.store_key(key), None)
        dropped = _DROPPED.get(kind.store)
        if dropped is not None:
            dropped(self, key)
        elif _status_kind(kind):
            self._status_dropped(kind.store, key)

    # What the cache notes when a store changes, beside filing the object: the stores the loop
    # watches for statuses it writes (the topologies'), and the pods' overlays.
    def _node_changed(self, key: str, *_: object) -> None:
        self.statuses_changed = True

    def _pod_filed(self, key: str, pod: Pod, raw: dict[str, Any]) -> None:
        self._dirty[key] = None
        names = self._names
        if (names is not None and pod.scheduler_name in names and not pod.node_name and not pod.terminal
                and not pod.deleting):
            # A pending pod of ours is checked as it arrives, against its gang's declaration as held
            # now: the snapshot that shows it finds the answer (``declarations``) and checks again
            # only if its PodGroup changed meanwhile. A gang of thousands arrives pod by pod between
            # cycles; checked in the snapshot, it made the cycle that places it wait for the checks.
            try:
                self.declarations.check(key, pod, self.stores, _InvalidGroups(self.invalid), self._groups_version)
            except Exception:
                self.declarations.forget(key)
        if pod.scheduling_gates and not pod.node_name and not pod.terminal and not pod.deleting:
            self.gated[key] = pod.scheduler_name
        else:
            self.gated.pop(key, None)
        if pod.node_name or pod.terminal:
            self.assumed.pop(key, None)
            self.nominated.pop(key, None)
        nominated = self.nominated.get(key)
        if nominated is not None and pod.nominated_node_name == nominated[0]:
            del self.nominated[key]
        if pod.deleting and pod.preempted:
            self.preempting.pop(key, None)

    def _pod_dropped(self, key: str) -> None:
        self._dirty[key] = None
        self.gated.pop(key, None)
        self.assumed.pop(key, None)
        self.nominated.pop(key, None)
        self.preempting.pop(key, None)
        self.backing_off.pop(key, None)
        self._shown.pop(key, None)
        self.declarations.forget(key)
        self.rejected.pop(key, None)

    def _status_filed(self, store: str, key: str, raw: dict[str, Any]) -> None:
        self.status_raw.setdefault(store, {})[key] = raw
        self.statuses_changed = True

    def _status_dropped(self, store: str, key: str) -> None:
        self.status_raw.get(store, {}).pop(key, None)
        self.statuses_changed = True

    def assume_storage(self, obj: PersistentVolumeClaim | PersistentVolume) -> Callable[[], None]:
        """Shows ``obj`` (a claim or volume as PreBind writes it) until the watch brings the object
        as written; returns what undoes it if the write fails (unless the watch replaced it since)."""
        held: dict[str, Any] = self.storage.claims if isinstance(obj, PersistentVolumeClaim) else self.storage.volumes
        key = obj.key if isinstance(obj, PersistentVolumeClaim) else obj.name
        before = held.get(key)
        held[key] = obj
        self.changed.set()

        def undo() -> None:
            if held.get(key) is obj and before is not None:
                held[key] = before
                self.changed.set()
        return undo

    def claim(self, key: str) -> ResourceClaim | None:
        """A ResourceClaim as the watch last brought it (without what the scheduler assumed of it)."""
        seen = self._claims_seen.get(key)
        return seen if seen is not None else self.stores[CLAIMS].get(key)

    def assume_claim(self, key: str, shown: Callable[[ResourceClaim], ResourceClaim],
                     written: Callable[[ResourceClaim], bool]) -> ClaimAssumption | None:
        """Shows the claim as a write will leave it (``shown``: PreBind's finalizer, allocation and
        reservation, or their undo) until the watch brings a version ``written`` accepts (or ASSUME_TTL
        after ``claim_written``): an allocation in flight is never handed out twice, whatever versions
        the watch brings meanwhile (the finalizer's patch comes back before the status). None when the
        cache does not hold the claim."""
        real = self.claim(key)
        if real is None:
            return None
        assumption = ClaimAssumption(key, shown, written)
        self._claims_seen[key] = real
        self._claim_assumptions.setdefault(key, []).append(assumption)
        self._show_claim(key)
        return assumption

    def claim_assumptions(self, key: str) -> tuple[ClaimAssumption, ...]:
        """The writes on the claim the watch has not shown yet."""
        return tuple(self._claim_assumptions.get(key, ()))

    def claim_written(self, assumption: ClaimAssumption) -> None:
        """The write is made: ASSUME_TTL counts from now until the watch shows it."""
        assumption.since = time.monotonic()

    def forget_claim(self, assumption: ClaimAssumption) -> None:
        """The write did not go through (or is being undone): the claim is shown as the watch brought it."""
        held = self._claim_assumptions.get(assumption.key)
        if held is not None and assumption in held:
            held.remove(assumption)
            self._show_claim(assumption.key)

    def _show_claim(self, key: str) -> None:
        """Files the claim as the watch brought it with the assumptions the watch has not shown yet."""
        real = self._claims_seen.get(key)
        held = [a for a in self._claim_assumptions.get(key, ()) if real is not None and not a.written(real)]
        store = self.stores[CLAIMS]
        if real is None or not held:
            self._claim_assumptions.pop(key, None)
            self._claims_seen.pop(key, None)
        else:
            self._claim_assumptions[key] = held
        shown = real
        for assumption in held:
            assert shown is not None
            shown = assumption.shown(shown)
        if shown is not None and store.get(key) is not shown:
            store[key] = shown
            self.changed.set()

    def assume_created(self, claim: ResourceClaim) -> str:
        """Shows ``claim``, which a binding cycle is about to create, allocated and reserved, under a key
        no object can have (its generateName): its devices are in use for the next cycles. Returns
        that key (for ``created`` and ``forget_created``)."""
        key = claim.key
        self._creating[key] = ("", math.inf)
        self.stores[CLAIMS][key] = claim
        self.changed.set()
        return key

    def created(self, provisional: str, key: str) -> None:
        """The claim is created as ``key`` and written: shown so until the watch brings it allocated
        (or ASSUME_TTL)."""
        if provisional in self._creating:
            self._creating[provisional] = (key, time.monotonic())
            real = self.stores[CLAIMS].get(key)
            if real is not None and real.allocation is not None:
                self.forget_created(provisional)

    def forget_created(self, provisional: str) -> None:
        if self._creating.pop(provisional, None) is not None:
            self.stores[CLAIMS].pop(provisional, None)
            self.changed.set()

    def _claim_filed(self, key: str, claim: ResourceClaim, raw: dict[str, Any]) -> None:
        if claim.allocation is not None and self._creating:
            for provisional, (made, _) in list(self._creating.items()):
                if made == key:
                    self.forget_created(provisional)
        if key in self._claim_assumptions:
            self._claims_seen[key] = claim
            self._show_claim(key)

    def _claim_dropped(self, key: str) -> None:
        self._claim_assumptions.pop(key, None)
        self._claims_seen.pop(key, None)

    # The assumptions (a binding, a nomination, a victim's eviction): set when the write is decided,
    # dropped when it did not go through. Either way the next snapshot shows the pod anew; a dropped
    # one also owes a cycle, the pod being pending again or the room it held free.

    def _hold(self, table: dict[str, V], pod: str, value: V) -> None:
        table[pod] = value
        self._dirty[pod] = None

    def _drop(self, table: dict[str, V], pod: str) -> None:
        table.pop(pod, None)
        self._dirty[pod] = None
        self.changed.set()

    def assume(self, pod: str, node: str, writing: bool = False) -> None:
        """``pod`` counts as bound to ``node``. ``writing``: its bind is still queued or in flight, and
        ASSUME_TTL only starts once it is written (``bind_written``): a bind that waits longer than
        ASSUME_TTL for its turn must not let the pod be placed a second time meanwhile."""
        self._hold(self.assumed, pod, (node, math.inf if writing else time.monotonic()))

    def bind_written(self, pod: str) -> None:
        """The bind of an assumed pod is written: ASSUME_TTL counts from now until the watch shows it."""
        held = self.assumed.get(pod)
        if held is not None:
            self.assumed[pod] = (held[0], time.monotonic())

    def forget(self, pod: str) -> None:
        self._drop(self.assumed, pod)

    def back_off(self, pod: str, until: float) -> None:
        """``pod``'s binding cycle failed: the snapshots leave it out until ``until`` (monotonic), so a
        write the API server keeps refusing (a 403, a 422) is not made again at every cycle. The
        caller brings a cycle then (``end_back_off``)."""
        self._drop(self.backing_off, pod)
        self.backing_off[pod] = until

    def end_back_off(self, pod: str) -> None:
        if pod in self.backing_off:
            self._drop(self.backing_off, pod)

    def assume_nominated(self, pod: str, node: str) -> None:
        self._hold(self.nominated, pod, (node, time.monotonic()))

    def forget_nominated(self, pod: str) -> None:
        self._drop(self.nominated, pod)

    def assume_preempted(self, pod: str) -> None:
        self._hold(self.preempting, pod, time.monotonic())

    def forget_preempted(self, pod: str) -> None:
        self._drop(self.preempting, pod)

    def nominated_node(self, pod: str) -> str | None:
        """The pod's nominatedNodeName as the next snapshot shows it (a write in flight included),
        or None for a pod the cache does not hold."""
        found = self.nominated.get(pod)
        if found is not None:
            return found[0]
        cached = self.pods.get(pod)
        return None if cached is None else cached.nominated_node_name

    def _shown_pod(self, key: str, pod: Pod) -> Pod:
        """``pod`` with what the scheduler wrote and the watch has not shown yet."""
        update: dict[str, object] = {}
        assumed = self.assumed.get(key)
        if assumed is not None and not pod.node_name:
            update["node_name"] = assumed[0]
        nominated = self.nominated.get(key)
        if nominated is not None and pod.nominated_node_name != nominated[0]:
            update["nominated_node_name"] = nominated[0]
        if key in self.preempting and not (pod.deleting and pod.preempted):
            update["deleting"] = update["preempted"] = True
        if not update:
            self._shown.pop(key, None)
            return pod
        shown = self._shown.get(key)
        if shown is not None and shown[0] is pod and all(getattr(shown[1], k) == v for k, v in update.items()):
            return shown[1]
        copy = pod.model_copy(update=update)
        self._shown[key] = (pod, copy)
        return copy

    def snapshot(self, scheduler_names: frozenset[str]) -> Snapshot:
        """The cluster as the core sees it: the cached pods with what the scheduler wrote and the
        watch has not shown yet, less the pending pods whose gang or topology annotations are
        wrong (``rejected``), and what changed since the last snapshot (``Snapshot.changes``)."""
        now = time.monotonic()
        for overlay in (self.assumed, self.nominated):
            for key, (_, since) in list(overlay.items()):
                if now - since > ASSUME_TTL:
                    del overlay[key]
                    self._dirty[key] = None
        for key, since in list(self.preempting.items()):
            if now - since > ASSUME_TTL:
                del self.preempting[key]
                self._dirty[key] = None
        for key, until in list(self.backing_off.items()):
            if now >= until:
                del self.backing_off[key]
                self._dirty[key] = None
        for key, (_, since) in list(self._creating.items()):
            if now - since > ASSUME_TTL:
                self.forget_created(key)
        for key, held in list(self._claim_assumptions.items()):
            if any(now - a.since > ASSUME_TTL for a in held):
                self._claim_assumptions[key] = [a for a in held if now - a.since <= ASSUME_TTL]
                self._show_claim(key)
        fields = snapshot_fields(self.stores, {at: err for at, (err, _) in self.invalid.items()},
                                 skip=frozenset({"pods"}))
        invalid_groups: dict[str, str] = fields["invalid_podgroups"]
        if scheduler_names != self._names:
            self._names = scheduler_names
            self._dirty.update(dict.fromkeys([*self.pods, *self._visible, *self.rejected]))
        if self._groups_changed:  # a pending pod's annotations are checked against its gang's declaration
            changed_groups, self._groups_changed = self._groups_changed, set()
            self._dirty.update(dict.fromkeys(k for k, groups in self._pending.items()
                                             if any(g in changed_groups for g in groups)))
        delta: dict[str, Pod | None] = {}
        pods, stores, check = self.pods, self.stores, self.declarations.check  # once: a new gang brings thousands
        version = self._groups_version
        for key in self._dirty:
            pod = pods.get(key)
            # What the scheduler wrote is laid over only the pods it wrote something about.
            overlaid = key in self.assumed or key in self.nominated or key in self.preempting or key in self._shown
            shown = None if pod is None else self._shown_pod(key, pod) if overlaid else pod
            if shown is not None and (shown.scheduler_name in scheduler_names and not shown.node_name
                                      and not shown.terminal and not shown.deleting):
                if key in self.backing_off:  # the core sees it again when its backoff ends
                    self._pending.pop(key, None)
                    if self._visible.pop(key, None) is not None:
                        delta[key] = None
                    continue
                groups, err = check(key, shown, stores, invalid_groups, version)
                self._pending[key] = groups
                if err is not None:
                    self.rejected[key] = err
                    shown = None
                else:
                    self.rejected.pop(key, None)
            else:
                self._pending.pop(key, None)
                self.rejected.pop(key, None)
            if shown is None:
                if self._visible.pop(key, None) is not None:
                    delta[key] = None
            elif self._visible.get(key) is not shown:
                self._visible[key] = shown
                delta[key] = shown
        self._dirty.clear()
        self._number += 1
        return Snapshot(pods=list(self._visible.values()), scheduler_names=scheduler_names,
                        changes=PodChanges(id(self), self._number, delta), **fields)

    def topology_objects(self) -> dict[str, int]:
        """How many topology objects the cache holds, by source (``Kind.source``): those it parsed,
        and for a kind of which koordpy reads one object (``Kind.only``) whether it is there at all."""
        out: dict[str, int] = {}
        seen: set[str] = set()
        for kind in kinds.KINDS:
            if not kind.source or kind.store in seen:
                continue
            seen.add(kind.store)
            count = ((1 if kind.only in self.status_raw.get(kind.store, {}) else 0) if kind.only
                     else len(self.stores[kind.store]))
            out[kind.source] = out.get(kind.source, 0) + count
        return out

    def invalid_objects(self, scheduler_names: frozenset[str]) -> list[InvalidObject]:
        """Everything the last snapshot could not use, for the loop to report. Pods of other
        schedulers that are still pending are none of koordpy's business and are left out."""
        out = []
        for (kind, key), (err, raw) in self.invalid.items():
            meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
            spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}
            uid = str((meta or {}).get("uid") or "")
            claimed = False
            if kind == "Pod":
                ours = (spec or {}).get("schedulerName") in scheduler_names
                bound = bool((spec or {}).get("nodeName"))
                if not ours and not bound:
                    continue
                claimed = ours and not bound
            out.append(InvalidObject(kind, key, uid, err, claimed))
        for key, err in self.rejected.items():
            pod = self.pods.get(key)
            if pod is not None:
                out.append(InvalidObject("Pod", key, pod.uid, err, True))
        return out


# Cache.stores -> what else the cache notes when an object is filed there, or dropped from there
# (beside the stores of the kinds whose status the loop writes, ``_status_kind``).
_FILED: dict[str, Callable[[Cache, str, Any, dict[str, Any]], None]] = {
    "nodes": Cache._node_changed, "pods": Cache._pod_filed, CLAIMS: Cache._claim_filed}
_DROPPED: dict[str, Callable[[Cache, str], None]] = {
    "nodes": Cache._node_changed, "pods": Cache._pod_dropped, CLAIMS: Cache._claim_dropped}
