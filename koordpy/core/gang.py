"""Gangs and GangGroups as the snapshot declares them (what the scheduler remembers of them between
cycles is ``koordpy.core.state``; the rule that counts them, ``koordpy.core.gangrule``).

The dialects (``koordpy.core.dialects``) declare gangs of the one ``Gang`` type
(``koordpy.core.model``): Koordinator's PodGroups and gang annotations, Volcano's PodGroups, KAI's
PodGroups and owners' implicit groups. ``group_of`` and ``group_job`` group the claimed pending pods
into jobs: a GangGroup (every gang that names the others in its groups annotation, closed
transitively) or a single pod. Config errors stay attached to the gang so the cycle can report
them where the user looks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

from koordpy.api.objects import Pod
from koordpy.core.cluster import effective_priority
from koordpy.core.dialects import build_gang, declared_keys, gang_member, gang_of
from koordpy.core.members import topology_indexes
from koordpy.core.model import Gang, creation_time
from koordpy.core.snapshot import Snapshot


class GangGroupId(tuple[str, ...]):
    """A GangGroup's identity: the keys of its gangs, sorted (one key for a gang of its own). It is
    compared and taken apart as a tuple; it is shown, in messages and as the job's id in decisions,
    as the keys joined by commas (``str``)."""

    __slots__ = ()

    @classmethod
    def of(cls, *keys: str) -> GangGroupId:
        return cls(sorted(keys))

    def __str__(self) -> str:
        return ",".join(self)

    def __repr__(self) -> str:
        return f"GangGroupId({str(self)!r})"


@dataclass
class Job:
    """One unit of the queue: a GangGroup's gangs, or a lone pod."""

    id: str
    gangs: list[Gang]
    pods: list[Pod]  # the claimed pending pods this job places
    priority: int
    creation: float
    # Its gangs that ran and lost members (``gangrule.replacing``, as the view that builds the job
    # knows it): their bound members are no scheduler's half-placed gang (``binding``).
    replacing: frozenset[str] = frozenset()

    @property
    def is_gang(self) -> bool:
        return bool(self.gangs)

    @cached_property
    def keys(self) -> list[str]:
        """The keys of ``pods``, in order (a pod may be replaced by a newer object of the same key,
        never by another pod: a job is rebuilt when its pods change)."""
        return [p.key for p in self.pods]

    @cached_property
    def indexes(self) -> list[int | None]:
        """Each pod's network-topology index, in order (``members.topology_indexes``: raises the
        ParseError of the first pod whose index is wrong)."""
        return topology_indexes(self.pods)

    @cached_property
    def group(self) -> GangGroupId:
        """The GangGroup this job places (empty for a lone pod); ``id`` is how it is shown."""
        return GangGroupId.of(*(g.key for g in self.gangs))

    @property
    def binding(self) -> bool:
        """A GangGroup with members bound but a gang short of its minimum is mid-bind: a
        scheduler that stopped between binds. It goes first, so the room it holds is not lost. A gang
        taking the replacements of members it lost is not (``replacing``): it goes by priority."""
        return any(
            g.config is not None and 0 < len(g.bound()) < g.config.min_member and g.key not in self.replacing
            for g in self.gangs
        )

    @cached_property
    def _queue_key(self) -> tuple[bool, int, float, str]:
        return (not self.binding, -self.priority, self.creation, self.id)

    def queue_key(self) -> tuple[bool, int, float, str]:
        """A job is rebuilt whenever its pods or gangs change, so its place in the queue is kept."""
        return self._queue_key


def gangs_named(keys: Iterable[str], target: str) -> list[str]:
    """The gang keys a user may mean by ``target``: the key itself when it is one; else, for
    ``namespace/name``, the implicit groups of that name (``namespace/Kind/name``, as messages call
    an owner's or a lone pod's group, and those a dialect qualifies further, as a JobSet's restart
    attempt ``namespace/JobSet/name/attempt-N``), and for ``namespace/kind/name`` the group whose kind
    matches regardless of case (``job`` for ``Job``, as kubectl takes it). More than one means
    ambiguous."""
    keys = list(keys)
    if target in keys:
        return [target]
    parts = target.split("/")
    if len(parts) == 2:
        ns, name = parts
        return sorted(k for k in keys if (named := _kind_folded(k)) is not None and named[::2] == (ns, name))
    if len(parts) == 3:
        want = (parts[0], parts[1].lower(), parts[2])
        return sorted(k for k in keys if _kind_folded(k) == want)
    return []


def _kind_folded(key: str) -> tuple[str, str, str] | None:
    """``namespace, kind, name`` of an implicit group's key (its kind folded), None for another key."""
    parts = key.split("/")
    return (parts[0], parts[1].lower(), parts[2]) if len(parts) >= 3 else None


def finished_pods(snapshot: Snapshot) -> dict[str, list[Pod]]:
    """The pods that finished (Succeeded, Failed), by the gang they were in: no longer its members,
    but what its minimum (a JobSet's) and its status count."""
    finished: dict[str, list[Pod]] = {}
    for pod in snapshot.pods:
        was = gang_of(pod, snapshot) if pod.terminal else None
        if was is not None:
            finished.setdefault(was, []).append(pod)
    return finished


def resolve_gangs(snapshot: Snapshot) -> tuple[dict[str, Gang], dict[str, str]]:
    """Every gang the pods and PodGroups declare, and each member pod's gang key."""
    member_of: dict[str, str] = {}
    members: dict[str, list[Pod]] = {}
    for pod in snapshot.pods:
        key = gang_member(pod, snapshot)
        if key is not None:
            member_of[pod.key] = key
            members.setdefault(key, []).append(pod)
    finished = finished_pods(snapshot)
    gangs: dict[str, Gang] = {}
    for key in [*declared_keys(snapshot), *members]:
        if key not in gangs:
            gang = build_gang(key, members.get(key, []), snapshot, finished.get(key, ()))
            if gang is not None:
                gangs[key] = gang
    return gangs, member_of


def group_of(gangs: dict[str, Gang]) -> dict[str, GangGroupId]:
    """GangGroup id per gang: the sorted member keys, closed over mutual claims.

    A gang is tied only to the gangs its own ``groups`` list names, and two gangs are placed
    as one job only when each names the other: a one-sided claim (say from another
    namespace) must never pull someone else's gang into a job it did not ask for.
    """
    parent = {k: k for k in gangs}

    def find(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for key, gang in gangs.items():
        for other in claims(gang):
            peer = gangs.get(other)
            if peer is None or key not in claims(peer):
                continue
            a, b = find(key), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for k in parent:
        members.setdefault(find(k), []).append(k)
    return {k: GangGroupId.of(*members[find(k)]) for k in parent}


def claims(gang: Gang) -> tuple[str, ...]:
    """The other gangs this gang's ``groups`` names."""
    return tuple(k for k in gang.config.groups if k != gang.key) if gang.config else ()



def single_job(pod: Pod, snapshot: Snapshot) -> Job:
    return Job(pod.key, [], [pod], effective_priority(pod, snapshot.priority_classes), creation_time(pod.creation))


def _highest(pods: Iterable[Pod], snapshot: Snapshot) -> int:
    """The highest effective priority of ``pods`` (0 for none), asked once per distinct way a pod
    states it (the members of a gang state it alike)."""
    stated = {(p.priority, p.priority_class_name): p for p in pods}
    return max((effective_priority(p, snapshot.priority_classes) for p in stated.values()), default=0)


def group_job(gid: GangGroupId, gangs: dict[str, Gang], claimed: dict[str, list[Pod]],
              snapshot: Snapshot) -> Job | None:
    """The GangGroup ``gid``'s job: its gangs and their claimed pending pods (None without any)."""
    member_gangs = [gangs[k] for k in gid]
    pods = [p for g in member_gangs for p in claimed.get(g.key, ())]
    if not pods:
        return None
    # A gang whose declaring object carries a priority of its own (Kubernetes' PodGroup) is at that
    # priority, whatever its pods say; else at its pods' highest.
    prio = max(g.priority if g.priority is not None else _highest(claimed.get(g.key, ()), snapshot)
               for g in member_gangs if g.priority is not None or claimed.get(g.key))
    return Job(str(gid), member_gangs, pods, prio, min(g.creation for g in member_gangs))
