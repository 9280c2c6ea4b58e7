"""The core's standing view of the cluster, kept between cycles and updated from what changed.

Belongs here: what a cycle would otherwise rebuild from the whole snapshot every time (the
resource arrays and topology tree in a ``Cluster``, the static filter cache, the pods counted on
each node, the gangs and the queue's jobs), brought up to date incrementally. Changes are found by
object identity: the shells hand back the same immutable objects for what did not change (nodes
and pods that differ only in ways scheduling ignores compare equal too), so a cycle after a few
changes costs a few changes, not the cluster. What a change of each kind costs is read off the kind
registry (``koordpy.api.kinds``, ``Kind.change``) and how its objects compare off the dialect that
reads it (``Dialect.compare_key``): the view names no dialect and no dialect's Snapshot field.
Does not belong here: the queue's order, parked jobs, wake hints and backoff
(``koordpy.core.queue``; the view holds its ``Queue`` and tells it what changed), decisions
(``koordpy.core.cycle``). Losing the view is always safe; the next cycle rebuilds it in full.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, fields, replace
from itertools import compress
from typing import Any, Protocol, assert_never

from koordpy.api import kinds
from koordpy.api.disruption import STORE as DISRUPTION_BUDGETS
from koordpy.api.dra import ClaimGroup
from koordpy.api.kinds import GROUPS, Change, Kind
from koordpy.api.objects import Pod
from koordpy.core.claims import DeviceRules
from koordpy.core.cluster import Cluster
from koordpy.core.dialects import build_gang, claim_groups, compare_key, gang_member, gang_of
from koordpy.core.filters import Filters
from koordpy.core.gang import (
    GangGroupId,
    Job,
    claims,
    group_job,
    group_of,
    single_job,
)
from koordpy.core.gangrule import holds_alone, replacing
from koordpy.core.liveness import loss, lost_later
from koordpy.core.model import Gang
from koordpy.core.queue import Queue
from koordpy.core.snapshot import Snapshot
from koordpy.core.volumes import VolumeRules


class Memory(Protocol):
    """What the view reads of the scheduler's state and the two transitions it makes on it
    (``koordpy.core.state.SchedulerState``, which carries the view: so the view names only this)."""

    @property
    def reserved(self) -> Mapping[str, str]: ...

    @property
    def satisfied(self) -> AbstractSet[str]: ...

    def release(self, pod: str) -> str | None: ...

    def keep_satisfied(self, gangs: Iterable[str]) -> None: ...


@dataclass(frozen=True)
class _Input:
    """One Snapshot field a kind fills (its store or its errors; ``storage.claims`` is one part of a
    grouped field), what a change of it costs the view (``koordpy.api.kinds.Change``) and how its
    objects compare (the key of the dialect that reads the kind; None: whole objects)."""

    path: tuple[str, ...]
    change: Change
    key: Callable[[Any], object] | None = None

    def value(self, snapshot: Snapshot) -> Any:
        value: Any = snapshot
        for part in self.path:
            value = value.get(part, {}) if isinstance(value, Mapping) else getattr(value, part)
        return value

    def changed(self, snapshot: Snapshot, prev: Snapshot) -> bool:
        """Whether it holds anything scheduling reads that it did not hold in ``prev``. The shells
        hand back the same objects for what did not change, so identity settles most comparisons."""
        a, b, key = self.value(snapshot), self.value(prev), self.key
        if key is None or not isinstance(a, Mapping):
            return a is not b and a != b
        return a.keys() != b.keys() or any(v is not b[k] and key(v) != key(b[k]) for k, v in a.items())

    def changed_keys(self, snapshot: Snapshot, prev: Snapshot) -> set[str]:
        """The keys of a mapping whose objects came, went or changed since ``prev``."""
        a, b, key = self.value(snapshot), self.value(prev), self.key
        out = set()
        for k in a.keys() | b.keys():
            x, y = a.get(k), b.get(k)
            if x is not y and (x != y if key is None or x is None or y is None else key(x) != key(y)):
                out.add(k)
        return out


def _inputs(table: Iterable[Kind]) -> dict[Change, list[_Input]]:
    """What the view compares, by what a change costs it, read off the kind registry."""
    found: dict[tuple[str, ...], _Input] = {}
    for kind in table:
        match kind.change:
            case "count" | "none":
                # Pods are compared one by one (``View._pod_changes``); "none": nothing kept depends on it.
                continue
            case "arrays" | "all" | "gangs" | "volumes" | "devices":
                store, errors = tuple(kind.store.split(".")), tuple(kind.errors.split(".")) if kind.errors else ()
                store = store if kind.own_field else ("objects", *store)  # ``Snapshot.objects[store]``
                found.setdefault(store, _Input(store, kind.change, compare_key(kind.role)))
                if errors:
                    found.setdefault(errors, _Input(errors, kind.change))
            case _:
                assert_never(kind.change)
    out: dict[Change, list[_Input]] = {}
    for item in found.values():
        out.setdefault(item.change, []).append(item)
    return out


def _copied(value: Any, grouped: bool = False) -> Any:
    """A Snapshot field copied so that changing the original in place leaves the copy as it was."""
    if grouped:  # a field that groups stores (``koordpy.api.kinds.GROUPS``): each part copied
        return replace(value, **{f.name: _copied(getattr(value, f.name)) for f in fields(value)})
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def nodes_changed(snapshot: Snapshot, prev: Snapshot) -> set[str]:
    """The names of the nodes that came, went or changed since ``prev`` (the shells hand back the
    same object for a node that did not change)."""
    old = {n.name: n for n in prev.nodes}
    out = set()
    for n in snapshot.nodes:
        was = old.pop(n.name, None)
        if was is not n and was != n:
            out.add(n.name)
    return out | old.keys()


class View:
    def __init__(self) -> None:
        self.cluster: Cluster | None = None
        self.filters: Filters | None = None
        self.snapshot: Snapshot | None = None  # a copy of the last one, to find what changed
        self.by_key: dict[str, Pod] = {}
        self.claimed: dict[str, Pod] = {}
        self.member_of: dict[str, str] = {}
        self.members: dict[str, dict[str, Pod]] = {}
        # The pods that finished (Succeeded, Failed), by the gang they were in: they leave its
        # members (``gang_member``), but its object's status counts them (``finished_in``).
        self.finished: dict[str, dict[str, Pod]] = {}
        self._finished_in: dict[str, str] = {}
        self.gangs: dict[str, Gang] = {}
        self.groups: dict[str, GangGroupId] = {}  # gang -> its GangGroup
        self.group_jobs: dict[GangGroupId, Job] = {}
        self.single_jobs: dict[str, Job] = {}
        self.dirty: set[str] = set()  # gangs whose PodGroup status may have changed this cycle
        self._names: dict[str, tuple[str, ...]] = {}
        self.gangs_gone = False  # a gang went away in the last refresh
        self.regrouped = False  # GangGroups were recomputed in the last refresh
        self.wait_limits: dict[GangGroupId, float] = {}  # GangGroup -> its waiting time, while its gangs stand
        self.volumes: VolumeRules | None = None  # the volume rules over the last snapshot's storage
        self.volume_pods: dict[str, Pod] = {}  # pods with volumes, for the rules that count other pods
        self.devices: DeviceRules | None = None  # the device rules over the last snapshot's DRA objects
        # The groups claims may be bound to (``claim_groups``) as read from the last snapshot; None: not
        # kept while it held no claim (whom a claim would be reserved for mattered to nobody).
        self._claim_groups: dict[str, ClaimGroup] | None = None
        # The queue over this view's jobs (koordpy.core.queue): told when they change, and the arrays.
        self.queue = Queue(lambda: [*self.group_jobs.values(), *self.single_jobs.values()])
        self._inputs = _inputs(kinds.KINDS)
        # Per gang with a bound member that counts now but will not (its node's NoExecute taint
        # outlasting its toleration, ``liveness.lost_later``): when the first of them stops counting.
        # The gang is looked at again then (``Gang.lost``), and the cycle wakes for it.
        self.loss_due: dict[str, float] = {}

    def _changed(self, change: Change, snapshot: Snapshot, prev: Snapshot) -> bool:
        return any(item.changed(snapshot, prev) for item in self._inputs.get(change, ()))

    # -- bringing the view up to date ------------------------------------------------------

    def _file(self, pod: Pod, new: str | None, touched: set[str], key: str | None = None) -> None:
        """Files ``pod`` (whose key is ``key``, when the caller has it) under gang ``new`` (None: no
        gang), out of the gang it was filed under; both gangs are marked to be rebuilt."""
        key = pod.key if key is None else key
        old = self.member_of.get(key)
        if old is not None and old != new:
            self.members.get(old, {}).pop(key, None)
            touched.add(old)
        if new is None:
            self.member_of.pop(key, None)
        else:
            self.member_of[key] = new
            members = self.members.get(new)
            if members is None:
                members = self.members[new] = {}
            members[key] = pod
            touched.add(new)

    def _file_finished(self, key: str, pod: Pod | None, gang: str | None, touched: set[str]) -> None:
        """Files the finished ``pod`` (whose key is ``key``) among the finished pods of ``gang``
        (None: of none, or the pod is not finished or gone), out of the gang it was filed under; both
        gangs are marked to be rebuilt, so that a pod that finishes or goes moves its gang's status."""
        old = self._finished_in.get(key)
        if old is not None and old != gang:
            done = self.finished.get(old, {})
            done.pop(key, None)
            if not done:
                self.finished.pop(old, None)
            touched.add(old)
        if gang is None or pod is None:
            self._finished_in.pop(key, None)
            return
        self._finished_in[key] = gang
        self.finished.setdefault(gang, {})[key] = pod
        touched.add(gang)

    def finished_in(self, gang: str) -> list[Pod]:
        """The pods that were in ``gang`` and finished, as the last refresh saw them."""
        return list(self.finished.get(gang, {}).values())

    def _file_fresh(self, fresh: dict[str, dict[str, Pod]], touched: set[str]) -> None:
        """``_file`` of pods filed under no gang before, ``fresh`` (gang -> its pods, in order): a
        gang's at once. Empties ``fresh``."""
        for gang, pods in fresh.items():
            self.member_of.update(dict.fromkeys(pods, gang))
            members = self.members.get(gang)
            if members is None:
                self.members[gang] = pods
            else:
                members.update(pods)
            touched.add(gang)
        fresh.clear()

    def refresh(self, snapshot: Snapshot, state: Memory, now: float = float("-inf")) -> Cluster:
        """The view brought up to ``snapshot`` at ``now`` (which bound members still count; the
        default counts a member on a failed node lost only when it tolerates the taint not at all)."""
        # What the last snapshot held, copied: a shell may fill the next one by changing the same
        # lists and dicts in place, and comparing them with themselves would find nothing changed.
        prev = self.snapshot
        self.snapshot = replace(snapshot, **{f.name: _copied(getattr(snapshot, f.name), f.name in GROUPS)
                                             for f in fields(snapshot)})
        self.snapshot.objects = {store: dict(objects) for store, objects in snapshot.objects.items()}
        # What each kind's change costs is the registry's ``change``. Trees, owner chains, namespaces'
        # labels (which pods a namespaceSelector counts) and PriorityClasses are rebuilt whole when
        # they change ("all"): they are few and change rarely.
        whole = (prev is None or self.cluster is None or snapshot.scheduler_names != prev.scheduler_names
                 or self._changed("all", snapshot, prev))
        changed, removed = self._pod_changes(snapshot, prev, whole)
        keys = [p.key for p in changed]  # a pod's key is asked once per refresh
        storage_changed = (prev is None or self.volumes is None or self.volumes.assumed
                           or self._changed("volumes", snapshot, prev))
        # A pod with volumes that comes, goes or moves can free a ReadWriteOncePod claim, a disk or
        # room under an attach limit: jobs parked for a volume rule are woken.
        volume_pods_moved = any(p.volumes for p in changed) or any(
            key in self.volume_pods for key in removed)
        for key in removed:
            self.volume_pods.pop(key, None)
        for key, pod in zip(keys, changed, strict=True):
            if pod.volumes:
                self.volume_pods[key] = pod
            elif self.volume_pods:
                self.volume_pods.pop(key, None)
        if storage_changed:
            self.volumes = VolumeRules(snapshot.storage)
            if self.filters is not None:
                self.filters.volumes = self.volumes
        if storage_changed or volume_pods_moved:
            self.queue.unpark(lambda parked: any(pod.volumes for pod in parked.job.pods))
        self._refresh_devices(snapshot, prev)
        for key in removed:
            self.by_key.pop(key, None)
            self.claimed.pop(key, None)
        self.by_key.update(zip(keys, changed, strict=True))
        for key, pod in zip(keys, changed, strict=True):
            if snapshot.claims(pod):
                self.claimed[key] = pod
            else:
                self.claimed.pop(key, None)
        recount = {*keys, *removed}
        # A reservation outlives neither its pod nor the pod's binding by someone else (and only a
        # pod that changed can have stopped being claimed).
        for key in [k for k in (state.reserved if whole else recount) if k in state.reserved
                    and k not in self.claimed]:
            state.release(key)
        cluster = before = self.cluster
        arrays = whole or prev is None or self._changed("arrays", snapshot, prev)
        # A node object replaced by an equal one (a status heartbeat, say) changes nothing scheduling reads.
        if (arrays or cluster is None
                or (self.devices is not None and cluster.backed != self.devices.backed.keys())
                or not all(cluster.knows(p) for p in changed)):
            # A reservation on a node that is gone holds nothing: the member is placed again.
            names = {n.name for n in snapshot.nodes}
            for key in [k for k, node in state.reserved.items() if node not in names]:
                state.release(key)
            cluster = self.cluster = Cluster(snapshot, assumed=state.reserved)
            self.filters = Filters(cluster, self.volumes, self.devices)
            self.filters.placed = self._placed
            self.queue.attach(cluster, self.filters)  # parked jobs are tried again on the new arrays
        else:
            cluster.recount_many(recount, self.by_key, state.reserved)
            # After the recount: the budgets are weighed against the pods as they are now (a row the
            # recount added took the old budgets' id, counted again here if the selectors changed).
            cluster.set_budgets(snapshot.of(DISRUPTION_BUDGETS))
            cluster.presence.set_namespaces(snapshot.namespaces)
        # A node that changes (a NoExecute taint arriving, the node deleted or back) or time passing a
        # toleration's end can take members from their gangs, or give them back: the gangs with bound
        # members there, or whose member's toleration ended, are looked at again (a rebuild of the
        # whole view looks at every gang anyway).
        recheck = {k for k, due in self.loss_due.items() if now >= due}
        if arrays and not whole and prev is not None and before is not None:
            recheck |= self._gangs_on(nodes_changed(snapshot, prev), before, cluster)
        if not whole and prev is not None and (unread := prev.invalid_nodes.keys() ^ snapshot.invalid_nodes.keys()):
            # A node that does not parse counts its pods nowhere: one deleted while unread (or read
            # again) is found through its pods, a rare change that is worth a pass over them.
            member_of = self.member_of
            recheck |= {g for k, p in self.by_key.items() if p.node_name in unread and (g := member_of.get(k))}
        self._refresh_jobs(snapshot, state, prev, changed, keys, removed, whole, now, recheck)
        return cluster

    def _gangs_on(self, names: set[str], before: Cluster, after: Cluster) -> set[str]:
        """The gangs with pods counted on the nodes ``names``, as the last cluster counted them (a node
        gone is there) or as the new one does (a node back, with the members that were lost with it)."""
        member_of = self.member_of
        out = set()
        for cluster in (before, after):
            index = cluster.node_index
            for key in cluster.index.on_nodes([index[n] for n in names if n in index]):
                gang = member_of.get(key)
                if gang is not None:
                    out.add(gang)
        return out

    def _losses(self, gang: Gang, now: float) -> frozenset[str]:
        """The gang's bound members that no longer count at ``now`` (``koordpy.core.liveness``); when
        the first of the others will stop counting is kept in ``loss_due``."""
        cluster = self.cluster
        assert cluster is not None
        index, nodes = cluster.node_index, cluster.nodes
        # A node whose object does not parse is not in the snapshot's nodes, but it is there: its pods
        # are not taken for lost (a stale gang's eviction, replacements) for want of reading it.
        unread = self.snapshot.invalid_nodes if self.snapshot is not None else {}
        lost: list[str] = []
        due: float | None = None
        for p in gang.pods:
            if not p.node_name:
                continue
            i = index.get(p.node_name)
            node = None if i is None else nodes[i]
            if node is None and p.node_name in unread:
                continue
            if loss(p, node, now) is not None:
                lost.append(p.key)
                continue
            at = lost_later(p, node, now)
            if at is not None and (due is None or at < due):
                due = at
        if due is None:
            self.loss_due.pop(gang.key, None)
        else:
            self.loss_due[gang.key] = due
        return frozenset(lost)

    def _refresh_devices(self, snapshot: Snapshot, prev: Snapshot | None) -> None:
        """The device rules built again when the DRA objects changed (the pools only when slices,
        classes or taint rules did), when the groups claims may be bound to did (a Workload PodGroup's
        uid, claims or the claims made for it: whom a member's claim is reserved for), or this
        cycle's Reserve changed them; jobs parked with pods that have claims are woken (a claim made,
        allocated, freed; a device published)."""
        rules = self.devices
        groups = self._claim_groups
        if not snapshot.devices.claims:
            groups = self._claim_groups = None
        elif groups is None or prev is None or self._changed("gangs", snapshot, prev):
            # Read again only when an object that declares gangs changed.
            groups = self._claim_groups = claim_groups(snapshot)
        groups = groups or {}
        if not (prev is None or rules is None or rules.assumed
                or (groups is not rules.groups and groups != rules.groups)
                or self._changed("devices", snapshot, prev)):
            return
        self.devices = DeviceRules(snapshot.devices, self.devices, groups)
        if self.filters is not None:
            self.filters.devices = self.devices
        devices = self.devices
        self.queue.unpark(lambda parked: any(map(devices.uses, parked.job.pods)))

    def _placed(self) -> dict[str, tuple[Pod, int]]:
        """Every pod with volumes counted on a node (running, bound this cycle, reserved or
        nominated), with its node: what the volume rules that count other pods read."""
        cluster = self.cluster
        assert cluster is not None
        return {k: (p, cluster.counted[k][0]) for k, p in self.volume_pods.items() if k in cluster.counted}

    def _pod_changes(self, snapshot: Snapshot, prev: Snapshot | None, whole: bool) -> tuple[list[Pod], list[str]]:
        """The pods that are new or different since the last snapshot (``prev``), and the keys gone."""
        told, before = snapshot.changes, None if prev is None else prev.changes
        if (not whole and told is not None and before is not None and told.source == before.source
                and told.number == before.number + 1):
            # The shell says what changed since the snapshot this view last saw: no pod is compared.
            by_key = self.by_key
            return ([p for k, p in told.pods.items() if p is not None and by_key.get(k) is not p],
                    [k for k, p in told.pods.items() if p is None and k in by_key])
        pods, old = snapshot.pods, [] if prev is None else prev.pods
        if not whole and len(pods) == len(old):
            # The usual case: the same pods in the same order, a few replaced by newer objects.
            flags = list(map(operator.is_not, pods, old))
            changed = list(compress(pods, flags))
            if [p.key for p in changed] == [q.key for q in compress(old, flags)]:
                return changed, []
        current = {p.key: p for p in pods}
        if whole:
            return list(current.values()), [k for k in self.by_key if k not in current]
        return ([p for k, p in current.items() if self.by_key.get(k) is not p],
                [k for k in self.by_key if k not in current])

    def _refresh_jobs(self, snapshot: Snapshot, state: Memory, prev: Snapshot | None,
                      changed: list[Pod], keys: list[str], removed: list[str], whole: bool,
                      now: float = float("-inf"), recheck: AbstractSet[str] = frozenset()) -> None:
        self.gangs_gone = whole
        self.regrouped = whole
        touched: set[str] = set()
        single_keys: set[str] = set(removed)
        for key in removed:
            was = self.member_of.pop(key, None)
            if was is not None:
                self.members.get(was, {}).pop(key, None)
                touched.add(was)
            if key in self._finished_in:
                self._file_finished(key, None, None, touched)
        filed: dict[str, str | None] = {}  # pod -> the gang it was filed under now, asked of this snapshot
        member_of, single_jobs = self.member_of, self.single_jobs
        # Pods filed under no gang before (a new gang's), by the gang they join: filed a gang at a
        # time (``_file_fresh``), before any other pod is filed, so each gang's members keep their order.
        fresh: dict[str, dict[str, Pod]] = {}
        for key, pod in zip(keys, changed, strict=True):
            known = key in member_of
            # Only a pod the view holds already can have changed in its message alone.
            if (known or key in single_jobs) and self._swap_if_only_message(pod, key):
                continue
            single_keys.add(key)
            new = filed[key] = gang_member(pod, snapshot)
            if pod.terminal or key in self._finished_in:
                self._file_finished(key, pod, gang_of(pod, snapshot) if pod.terminal else None, touched)
            if known:
                self._file_fresh(fresh, touched)
                self._file(pod, new, touched, key)
            elif new is not None:
                group = fresh.get(new)
                if group is None:
                    group = fresh[new] = {}
                group[key] = pod
        self._file_fresh(fresh, touched)
        # The kinds that declare gangs (their objects and their errors, by gang key): what changed
        # there is rebuilt.
        declaring = self._inputs.get("gangs", ())
        if whole or prev is None:
            touched.update(*(item.value(snapshot) for item in declaring))
            touched |= set(self.gangs)
        else:
            objects: set[str] = set()
            for item in declaring:
                objects |= item.changed_keys(snapshot, prev)
            touched |= objects
            # A group object that comes or changes can move the pods filed under its key to another
            # gang (a PodGroup naming a parent CompositePodGroup, seen after its pods): they are asked again.
            for key in objects:
                for pod_key, pod in list(self.members.get(key, {}).items()):
                    # A pod filed just now was asked of this very snapshot: the answer stands.
                    new = filed[pod_key] if pod_key in filed else gang_member(pod, snapshot)
                    if new != key:
                        self._file(pod, new, touched, pod_key)
        # Of the gangs to look at again, those whose members count differently since they were built are rebuilt.
        gangs = self.gangs
        touched.update(k for k in recheck if k not in touched and (g := gangs.get(k)) is not None
                       and self._losses(g, now) != g.lost)
        for key in touched:
            members = self.members.get(key)
            if members is not None and not members:
                del self.members[key]
                members = None
            done = self.finished.get(key)
            gang = build_gang(key, list(members.values()) if members else [], snapshot, done.values() if done else ())
            if gang is None:
                self.gangs_gone |= self.gangs.pop(key, None) is not None
                self.loss_due.pop(key, None)
            else:
                gang.lost = self._losses(gang, now)
                self.gangs[key] = gang
        self.dirty = set(touched)
        if self.gangs_gone:
            state.keep_satisfied(self.gangs)
        for key in touched:  # a gang's waiting time may have changed with it
            for gid in {self.groups.get(key), GangGroupId((key,))}:
                if gid is not None:
                    self.wait_limits.pop(gid, None)
        if not touched and not single_keys:
            return
        self.queue.changed()
        # GangGroups depend only on which gangs exist and whom they name. A gang that names no other
        # gang, coming or going, is a group of its own and changes no other group (a claim binds
        # only when both sides make it): only a change in whom a gang names regroups them all.
        regrouped = False
        for key in touched:
            gang = self.gangs.get(key)
            named = None if gang is None else claims(gang)
            old_named = self._names.get(key)
            if old_named != named:
                regrouped = regrouped or bool(named) or bool(old_named)
                if named is None:
                    del self._names[key]
                else:
                    self._names[key] = named
        self.regrouped = regrouped or whole
        if regrouped or whole:
            groups = group_of(self.gangs)
        else:
            groups = dict(self.groups)
            for key in touched:
                if key in self.gangs:
                    groups.setdefault(key, GangGroupId((key,)))
                else:
                    groups.pop(key, None)
        regroup = whole or (regrouped and any(groups.get(k) != v for k, v in self.groups.items() if k not in touched))
        if regrouped:
            self.wait_limits.clear()
        old_groups, self.groups = self.groups, groups
        if regroup:
            self.group_jobs.clear()
            self.single_jobs.clear()
            gids = set(groups.values())
            single_keys = set(self.claimed)
        else:
            gids = {groups[k] for k in touched if k in groups} | {old_groups[k] for k in touched if k in old_groups}
            for key in touched:
                single_keys.update(self.members.get(key, {}))
        alone: dict[str, bool] = {}  # per gang: asked once, not once per member (it counts the members)

        def holds(gang: Gang) -> bool:
            found = alone.get(gang.key)
            if found is None:
                found = alone[gang.key] = holds_alone(gang, state.satisfied)
            return found

        pending_pods, gangs, member_of, single_jobs = self.claimed, self.gangs, self.member_of, self.single_jobs
        alone_under: dict[str, bool] = {}  # the gang a pod is filed under -> whether its pods go alone
        for key in single_keys:
            pending = pending_pods.get(key)
            if pending is not None:
                under = member_of.get(key, "")
                goes = alone_under.get(under)
                if goes is None:
                    owner = gangs.get(under)
                    goes = alone_under[under] = owner is None or holds(owner)
                if goes:
                    single_jobs[key] = single_job(pending, snapshot)
                    continue
            single_jobs.pop(key, None)
        for gid in gids:
            claimed = {k: [p for pk, p in self.members.get(k, {}).items() if pk in self.claimed]
                       for k in gid if k in self.gangs and not holds(self.gangs[k])}
            # An old group id of a touched gang names a GangGroup that may no longer stand as one.
            job = group_job(gid, self.gangs, claimed, snapshot) \
                if all(groups.get(k) == gid for k in gid) else None
            if job is None:
                self.group_jobs.pop(gid, None)
            else:
                job.replacing = frozenset(g.key for g in job.gangs if replacing(g, state.satisfied))
                self.group_jobs[gid] = job

    def _swap_if_only_message(self, pod: Pod, key: str) -> bool:
        """A pod that changed only in the PodScheduled message (the scheduler's own write coming
        back) leaves its gang and job as they were: the new object takes the old one's place in
        them, so a parked job stays parked and the next message is compared with the right one. Any
        other message on a parked job's pod (another writer's, a stale write landing late) is a change."""
        gang_key = self.member_of.get(key)
        members = self.members.get(gang_key) if gang_key is not None else None
        old = members.get(key) if members is not None else (
            self.single_jobs[key].pods[0] if key in self.single_jobs else None)
        if old is None or old.unschedulable_message == pod.unschedulable_message:
            return False
        if old.model_copy(update={"unschedulable_message": pod.unschedulable_message}) != pod:
            return False
        group = self.groups.get(gang_key) if gang_key is not None else None
        for job_id in (None if group is None else str(group), pod.key):
            parked = self.queue.parked.get(job_id) if job_id is not None else None
            if parked is not None and parked.pending.get(pod.key, pod.unschedulable_message) \
                    != pod.unschedulable_message:
                return False  # not the message it was parked with: a full cycle would write that again
        holders: list[list[Pod]] = []
        if members is not None and gang_key is not None:
            members[pod.key] = pod
            gang = self.gangs.get(gang_key)
            job = self.group_jobs.get(group) if group is not None else None
            holders += [gang.pods] if gang is not None else []
            holders += [job.pods] if job is not None else []
        if pod.key in self.single_jobs:
            holders.append(self.single_jobs[pod.key].pods)
        for pods in holders:
            for i, p in enumerate(pods):
                if p.key == pod.key:
                    pods[i] = pod
        return True
