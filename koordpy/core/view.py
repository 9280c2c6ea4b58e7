"""The core's standing view of the cluster, kept between cycles and updated from what changed.

Belongs here: what a cycle would otherwise rebuild from the whole snapshot every time (the
resource arrays and topology tree in a ``Cluster``, the static filter cache, the pods counted on
each node, the gangs and the queue's jobs), and the jobs parked after failing for want of room.
Changes are found by object identity: the shells hand back the same immutable objects for what
did not change (nodes and pods that differ only in ways scheduling ignores compare equal too), so a
cycle after a few changes costs a few changes, not the cluster. Does not belong here: decisions
(``koordpy.core.cycle``). Losing the view is always safe; the next cycle rebuilds it in full.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import compress
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Node, Pod
from koordpy.core.cluster import Cluster
from koordpy.core.dialects import build_gang, gang_member
from koordpy.core.dialects.volcano import spec_of
from koordpy.core.filters import Filters
from koordpy.core.gang import (
    Job,
    SchedulerState,
    claims,
    group_job,
    group_of,
    holds_alone,
    single_job,
)
from koordpy.core.model import Gang
from koordpy.core.snapshot import Snapshot
from koordpy.core.volumes import VolumeRules
from koordpy.kernels import node_offerslots

# What can let a waiting job go on, besides a change to its own pods or gangs (a new Job object)
# and the end of a NonStrict wait: "changed", nothing else (a config error, a timed-out gang, too
# few members); "room", room freed where one of its pod shapes fits (placement or permit failed);
# "any-room", room freed anywhere (minResources counts the whole cluster).
Wake = Literal["changed", "room", "any-room"]

# kube-scheduler's queue, by job: a job that failed for want of room and is woken by room freed
# waits out a backoff first (1 s, doubling per failure, at most 10 s), so a job that keeps failing
# cannot take every cycle; one that waits for its own gang ("changed") goes at once when it changes.
# A job parked this long is tried again whatever happened (the unschedulable queue's flush).
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 10.0
FLUSH_SECONDS = 300.0


@dataclass
class Parked:
    """A job that waits, as it was left: skipped, its messages kept, until what it waits for happens."""

    job: Job
    wake: Wake
    tick: int  # the cluster's tick after the attempt
    pending: dict[str, str]  # pod -> the message it was left with
    shapes: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]]  # request, nodes its filters allow
    deadline: float | None  # when a NonStrict wait it holds reservations for expires
    # For a job of several shapes, the cluster's moves after the attempt: placing unlike pods one
    # shape after another is greedy, so room taken elsewhere can change where they go and let it fit.
    moves: int | None = None
    priority: int = 0  # room held by pods of lower priority counts as room: preemption can take it
    since: float = 0.0  # when it was parked
    attempts: int = 1  # failures in a row
    backoff_until: float = 0.0  # woken before this, it waits in the backoff queue

    @property
    def backoff(self) -> float:
        return float(min(BACKOFF_INITIAL * 2 ** min(self.attempts - 1, 16), BACKOFF_MAX))


def _same(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    return a.keys() == b.keys() and all(v is b[k] or v == b[k] for k, v in a.items())


class View:
    def __init__(self) -> None:
        self.cluster: Cluster | None = None
        self.filters: Filters | None = None
        self.snapshot: Snapshot | None = None  # a copy of the last one, to find what changed
        self.by_key: dict[str, Pod] = {}
        self.claimed: dict[str, Pod] = {}
        self.member_of: dict[str, str] = {}
        self.members: dict[str, dict[str, Pod]] = {}
        self.gangs: dict[str, Gang] = {}
        self.groups: dict[str, str] = {}
        self.group_jobs: dict[str, Job] = {}
        self.single_jobs: dict[str, Job] = {}
        self.parked: dict[str, Parked] = {}
        self.backing_off: dict[str, float] = {}  # parked jobs woken this cycle -> when their backoff ends
        self.dirty: set[str] = set()  # gangs whose PodGroup status may have changed this cycle
        self._queue: list[Job] | None = None
        self._names: dict[str, tuple[str, ...]] = {}
        self.gangs_gone = False  # a gang went away in the last refresh
        self.regrouped = False  # GangGroups were recomputed in the last refresh
        self.wait_limits: dict[str, float] = {}  # GangGroup id -> its waiting time, while its gangs stand
        # (parked at tick, now at tick, request, mask id, priority) -> whether the room freed in between fits
        self._fits: dict[tuple[int, int, bytes, int, int], bool] = {}
        self.volumes: VolumeRules | None = None  # the volume rules over the last snapshot's storage
        self.volume_pods: dict[str, Pod] = {}  # pods with volumes, for the rules that count other pods

    def queue(self) -> list[Job]:
        """The jobs in queue order; sorted again only when the jobs changed (and then what is parked
        for a job that is gone is forgotten, lest its old tick keep the freed-room log forever)."""
        if self._queue is None:
            self._queue = sorted([*self.group_jobs.values(), *self.single_jobs.values()], key=Job.queue_key)
            for gone in self.parked.keys() - {job.id for job in self._queue}:
                del self.parked[gone]
        return self._queue

    # -- bringing the view up to date ------------------------------------------------------

    def refresh(self, snapshot: Snapshot, state: SchedulerState) -> Cluster:
        # What the last snapshot held, copied: a shell may fill the next one by changing the same
        # lists and dicts in place, and comparing them with themselves would find nothing changed.
        prev = self.snapshot
        self.snapshot = Snapshot(nodes=list(snapshot.nodes), pods=list(snapshot.pods),
                                 podgroups=dict(snapshot.podgroups), topology=snapshot.topology,
                                 priority_classes=dict(snapshot.priority_classes),
                                 scheduler_names=snapshot.scheduler_names,
                                 invalid_podgroups=dict(snapshot.invalid_podgroups),
                                 topology_error=snapshot.topology_error,
                                 hypernodes=dict(snapshot.hypernodes), topologies=dict(snapshot.topologies),
                                 invalid_topologies=dict(snapshot.invalid_topologies),
                                 volcano_podgroups=dict(snapshot.volcano_podgroups),
                                 kai_podgroups=dict(snapshot.kai_podgroups), owners=dict(snapshot.owners),
                                 changes=snapshot.changes, namespaces=dict(snapshot.namespaces),
                                 storage=snapshot.storage.copy())
        # Trees and owner chains are rebuilt whole when they change: they are few and change rarely.
        whole = (prev is None or self.cluster is None or snapshot.scheduler_names != prev.scheduler_names
                 or snapshot.priority_classes != prev.priority_classes or snapshot.topology is not prev.topology
                 or snapshot.topology_error != prev.topology_error
                 or not _same({k: spec_of(h) for k, h in snapshot.hypernodes.items()},
                              {k: spec_of(h) for k, h in prev.hypernodes.items()})
                 or not _same(snapshot.topologies, prev.topologies)
                 or snapshot.invalid_topologies != prev.invalid_topologies
                 or not _same(snapshot.owners, prev.owners)
                 # A namespace's labels decide which pods a namespaceSelector counts; they change rarely.
                 or not _same(snapshot.namespaces, prev.namespaces))
        changed, removed = self._pod_changes(snapshot, prev, whole)
        storage_changed = (prev is None or self.volumes is None or self.volumes.assumed
                           or snapshot.storage.changed_from(prev.storage))
        # A pod with volumes that comes, goes or moves can free a ReadWriteOncePod claim, a disk or
        # room under an attach limit: jobs parked for a volume rule are woken.
        volume_pods_moved = any(p.volumes for p in changed) or any(
            key in self.volume_pods for key in removed)
        for key in removed:
            self.volume_pods.pop(key, None)
        for pod in changed:
            if pod.volumes:
                self.volume_pods[pod.key] = pod
            else:
                self.volume_pods.pop(pod.key, None)
        if storage_changed:
            self.volumes = VolumeRules(snapshot.storage)
            if self.filters is not None:
                self.filters.volumes = self.volumes
        if storage_changed or volume_pods_moved:
            for job_id in [j for j, p in self.parked.items() if any(pod.volumes for pod in p.job.pods)]:
                del self.parked[job_id]
        for key in removed:
            self.by_key.pop(key, None)
            self.claimed.pop(key, None)
        for pod in changed:
            self.by_key[pod.key] = pod
            if snapshot.claims(pod):
                self.claimed[pod.key] = pod
            else:
                self.claimed.pop(pod.key, None)
        recount = {p.key for p in changed} | set(removed)
        # A reservation outlives neither its pod nor the pod's binding by someone else (and only a
        # pod that changed can have stopped being claimed).
        for key in [k for k in (state.reserved if whole else recount) if k in state.reserved
                    and k not in self.claimed]:
            del state.reserved[key]
        cluster = self.cluster
        if (whole or cluster is None or prev is None or self._nodes_changed(snapshot.nodes, prev.nodes)
                or not all(cluster.knows(p) for p in changed)):
            # A reservation on a node that is gone holds nothing: the member is placed again.
            names = {n.name for n in snapshot.nodes}
            for key in [k for k, node in state.reserved.items() if node not in names]:
                del state.reserved[key]
            cluster = self.cluster = Cluster(snapshot, assumed=state.reserved)
            self.filters = Filters(cluster, self.volumes)
            self.filters.placed = self._placed
            self.parked.clear()  # their node masks and request vectors belong to the old arrays
        else:
            for key in recount:
                cluster.recount(key, self.by_key.get(key), state.reserved)
            cluster.presence.set_namespaces(snapshot.namespaces)
        self._refresh_jobs(snapshot, state, prev, changed, removed, whole)
        return cluster

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
            return ([p for p in told.pods.values() if p is not None and by_key.get(p.key) is not p],
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

    @staticmethod
    def _nodes_changed(nodes: list[Node], old: list[Node]) -> bool:
        """Whether the arrays and tree must be rebuilt. A node object replaced by an equal one (a
        status heartbeat, say) changes nothing scheduling reads."""
        if len(nodes) != len(old):
            return True
        if all(map(operator.is_, nodes, old)):
            return False
        return any(a is not b and a != b for a, b in zip(nodes, old, strict=True))

    def _refresh_jobs(self, snapshot: Snapshot, state: SchedulerState, prev: Snapshot | None,
                      changed: list[Pod], removed: list[str], whole: bool) -> None:
        self.gangs_gone = whole
        self.regrouped = whole
        touched: set[str] = set()
        single_keys: set[str] = set(removed)
        for key in removed:
            was = self.member_of.pop(key, None)
            if was is not None:
                self.members.get(was, {}).pop(key, None)
                touched.add(was)
        for pod in changed:
            if self._swap_if_only_message(pod):
                continue
            single_keys.add(pod.key)
            old, new = self.member_of.get(pod.key), gang_member(pod, snapshot.owners)
            if old is not None and old != new:
                self.members.get(old, {}).pop(pod.key, None)
                touched.add(old)
            if new is None:
                self.member_of.pop(pod.key, None)
            else:
                self.member_of[pod.key] = new
                self.members.setdefault(new, {})[pod.key] = pod
                touched.add(new)
        if whole or prev is None:
            touched |= (set(snapshot.podgroups) | set(snapshot.invalid_podgroups) | set(snapshot.volcano_podgroups)
                        | set(snapshot.kai_podgroups) | set(self.gangs))
        else:
            for declared, before in ((snapshot.podgroups, prev.podgroups),
                                     (snapshot.invalid_podgroups, prev.invalid_podgroups),
                                     (snapshot.volcano_podgroups, prev.volcano_podgroups),
                                     (snapshot.kai_podgroups, prev.kai_podgroups)):
                for k in declared.keys() | before.keys():
                    a, b = declared.get(k), before.get(k)
                    if a is not b and a != b:
                        touched.add(k)
        for key in touched:
            members = self.members.get(key)
            if members is not None and not members:
                del self.members[key]
                members = None
            gang = build_gang(key, list(members.values()) if members else [], snapshot)
            if gang is None:
                self.gangs_gone |= self.gangs.pop(key, None) is not None
            else:
                self.gangs[key] = gang
        self.dirty = set(touched)
        if self.gangs_gone:
            state.satisfied &= self.gangs.keys()
        for key in touched:  # a gang's waiting time may have changed with it
            for gid in {self.groups.get(key), key}:
                if gid is not None:
                    self.wait_limits.pop(gid, None)
        if not touched and not single_keys:
            return
        self._queue = None
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
                    groups.setdefault(key, key)
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
                found = alone[gang.key] = holds_alone(gang, state)
            return found

        for key in single_keys:
            pending = self.claimed.get(key)
            owner = self.gangs.get(self.member_of.get(key, "")) if pending is not None else None
            if pending is not None and (owner is None or holds(owner)):
                self.single_jobs[key] = single_job(pending, snapshot)
            else:
                self.single_jobs.pop(key, None)
        for gid in gids:
            claimed = {k: [p for p in self.members.get(k, {}).values() if p.key in self.claimed]
                       for k in gid.split(",") if k in self.gangs and not holds(self.gangs[k])}
            # An old group id of a touched gang names a GangGroup that may no longer stand as one.
            job = group_job(gid, self.gangs, claimed, snapshot) \
                if all(groups.get(k) == gid for k in gid.split(",")) else None
            if job is None:
                self.group_jobs.pop(gid, None)
            else:
                self.group_jobs[gid] = job

    def _swap_if_only_message(self, pod: Pod) -> bool:
        """A pod that changed only in the PodScheduled message (the scheduler's own write coming
        back) leaves its gang and job as they were: the new object takes the old one's place in
        them, so a parked job stays parked and the next message is compared with the right one. Any
        other message on a parked job's pod (another writer's, a stale write landing late) is a change."""
        gang_key = self.member_of.get(pod.key)
        members = self.members.get(gang_key) if gang_key is not None else None
        old = members.get(pod.key) if members is not None else (
            self.single_jobs[pod.key].pods[0] if pod.key in self.single_jobs else None)
        if old is None or old.unschedulable_message == pod.unschedulable_message:
            return False
        if {**old.__dict__, "unschedulable_message": pod.unschedulable_message} != pod.__dict__:
            return False
        for job_id in (self.groups.get(gang_key or ""), pod.key):
            parked = self.parked.get(job_id) if job_id is not None else None
            if parked is not None and parked.pending.get(pod.key, pod.unschedulable_message) \
                    != pod.unschedulable_message:
                return False  # not the message it was parked with: a full cycle would write that again
        holders: list[list[Pod]] = []
        if members is not None and gang_key is not None:
            members[pod.key] = pod
            gang = self.gangs.get(gang_key)
            job = self.group_jobs.get(self.groups.get(gang_key, ""))
            holders += [gang.pods] if gang is not None else []
            holders += [job.pods] if job is not None else []
        if pod.key in self.single_jobs:
            holders.append(self.single_jobs[pod.key].pods)
        for pods in holders:
            for i, p in enumerate(pods):
                if p.key == pod.key:
                    pods[i] = pod
        return True

    # -- parked jobs ---------------------------------------------------------------------------

    def park(self, job: Job, pending: dict[str, str], deadline: float | None, reserved: dict[str, str],
             wake: Wake, now: float = 0.0, attempts: int = 1) -> None:
        cluster, filters = self.cluster, self.filters
        assert cluster is not None and filters is not None
        shapes: dict[tuple[bytes, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]] = {}
        for pod in job.pods:
            if pod.key in reserved:
                continue  # placed already; only the members still to place can use new room
            vec, mask = cluster.request_vector(pod), filters.static(pod).mask
            shapes.setdefault((vec.tobytes(), id(mask)), (vec, mask))
        # A job of unlike pods, or one the rules between pods hold back, may fit after any move (a pod
        # that started, moved or ended), not only where room appeared.
        moves = len(shapes) > 1 or any(filters.rules.applies(p) for p in job.pods)
        parked = self.parked[job.id] = Parked(job, wake, cluster.tick, pending, list(shapes.values()), deadline,
                                              cluster.moves if moves else None, job.priority, now, attempts)
        parked.backoff_until = now + parked.backoff

    def still_parked(self, job: Job, now: float) -> Parked | None:
        """The job's parked record while it stays in the unschedulable or backoff queue, else None
        (it is active: tried this cycle). It becomes active when what it waits for happens: its own
        pods or gangs change (at once), room appears where it could fit (after its backoff), its
        NonStrict wait expires, or it has waited FLUSH_SECONDS."""
        parked = self.parked.get(job.id)
        if parked is None or parked.job is not job:
            return None
        if parked.deadline is not None and now >= parked.deadline:
            return None
        if now - parked.since >= FLUSH_SECONDS:
            return None
        if not self._woken(parked):
            return parked
        if now < parked.backoff_until:
            self.backing_off[job.id] = parked.backoff_until
            return parked
        return None

    def _woken(self, parked: Parked) -> bool:
        """Whether room that could let the parked job fit appeared since it was parked."""
        cluster = self.cluster
        assert cluster is not None
        if parked.wake == "changed":
            return False
        if parked.moves is not None and parked.moves != cluster.moves:
            return True
        if cluster.tick == parked.tick:
            return False
        if parked.wake == "any-room":
            return True
        for vec, mask in parked.shapes:
            key = (parked.tick, cluster.tick, vec.tobytes(), id(mask), parked.priority)
            fits = self._fits.get(key)
            if fits is None:  # parked jobs share ticks and shapes: each pair is asked once a cycle
                nodes = cluster.freed_since(parked.tick)
                free = cluster.allocatable[nodes] - cluster.used[nodes] + cluster.reclaimable(nodes, parked.priority)
                fits = self._fits[key] = bool(np.any(node_offerslots(free, vec, mask[nodes]) > 0))
            if fits:
                return True
        # Room freed so far does not fit it, and room is only taken until freed again (which cannot
        # help a job of one shape).
        parked.tick = cluster.tick
        return False

    def new_cycle(self) -> None:
        self._fits.clear()
        self.backing_off.clear()
        if self.cluster is not None:  # what no parked job can ask about any more is forgotten
            self.cluster.forget_freed(min((p.tick for p in self.parked.values()), default=self.cluster.tick))
