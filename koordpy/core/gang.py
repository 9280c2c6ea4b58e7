"""Gangs and GangGroups as the snapshot declares them, and the gang state kept between cycles.

The dialects (``koordpy.core.dialects``) declare gangs of the one ``Gang`` type
(``koordpy.core.model``): Koordinator's PodGroups and gang annotations, Volcano's PodGroups, KAI's
PodGroups and owners' implicit groups. ``resolve_jobs`` groups the claimed pending pods into
jobs: a GangGroup (every gang that names the others in its groups annotation, closed
transitively) or a single pod. Config errors stay attached to the gang so the cycle can report
them where the user looks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from koordpy.api.objects import Pod
from koordpy.core.cluster import effective_priority
from koordpy.core.dialects import build_gang, declared_keys, gang_member
from koordpy.core.model import Gang, creation_time
from koordpy.core.snapshot import Snapshot

if TYPE_CHECKING:
    from koordpy.core.view import View


@dataclass
class SchedulerState:
    """What the scheduler remembers between cycles; all of it can be lost safely.

    ``reserved`` holds NonStrict members placed while their gang waits (kube-scheduler's
    assumed pods in Permit); nothing is bound for them, so a restart only forgets a wait.
    """

    reserved: dict[str, str] = field(default_factory=dict)  # pod -> node
    wait_since: dict[str, float] = field(default_factory=dict)  # GangGroup id -> first reservation
    satisfied: set[str] = field(default_factory=set)  # gangs that met their minimum once
    # What was last said about each gang's dropped limits (Requirement.dropped): the Event is written
    # when it changes, not each time the job is tried.
    told: dict[str, str] = field(default_factory=dict)
    # The cycle's standing view of the cluster (koordpy.core.view); rebuilt when missing.
    view: View | None = field(default=None, repr=False, compare=False)


@dataclass
class Job:
    """One unit of the queue: a GangGroup's gangs, or a lone pod."""

    id: str
    gangs: list[Gang]
    pods: list[Pod]  # the claimed pending pods this job places
    priority: int
    creation: float

    @property
    def is_gang(self) -> bool:
        return bool(self.gangs)

    @property
    def binding(self) -> bool:
        """A GangGroup with members bound but a gang short of its minimum is mid-bind: a
        scheduler that stopped between binds. It goes first, so the room it holds is not lost."""
        return any(
            g.config is not None and 0 < len(g.bound()) < g.config.min_member for g in self.gangs
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
    an owner's or a lone pod's group), and for ``namespace/kind/name`` the group whose kind matches
    regardless of case (``job`` for ``Job``, as kubectl takes it). More than one means ambiguous."""
    keys = list(keys)
    if target in keys:
        return [target]
    parts = target.split("/")
    if len(parts) == 2:
        ns, name = parts
        return sorted(k for k in keys if k.count("/") == 2 and k.startswith(f"{ns}/") and k.endswith(f"/{name}"))
    if len(parts) == 3:
        want = (parts[0], parts[1].lower(), parts[2])
        return sorted(k for k in keys if k.count("/") == 2 and _kind_folded(k) == want)
    return []


def _kind_folded(key: str) -> tuple[str, str, str]:
    ns, kind, name = key.split("/")
    return ns, kind.lower(), name


def resolve_gangs(snapshot: Snapshot) -> tuple[dict[str, Gang], dict[str, str]]:
    """Every gang the pods and PodGroups declare, and each member pod's gang key."""
    member_of: dict[str, str] = {}
    members: dict[str, list[Pod]] = {}
    for pod in snapshot.pods:
        key = gang_member(pod, snapshot.owners)
        if key is not None:
            member_of[pod.key] = key
            members.setdefault(key, []).append(pod)
    gangs: dict[str, Gang] = {}
    for key in [*declared_keys(snapshot), *members]:
        if key not in gangs:
            gang = build_gang(key, members.get(key, []), snapshot)
            if gang is not None:
                gangs[key] = gang
    return gangs, member_of


def group_of(gangs: dict[str, Gang]) -> dict[str, str]:
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
    return {k: ",".join(sorted(members[find(k)])) for k in parent}


def claims(gang: Gang) -> tuple[str, ...]:
    """The other gangs this gang's ``groups`` names."""
    return tuple(k for k in gang.config.groups if k != gang.key) if gang.config else ()


def resolve_jobs(snapshot: Snapshot, state: SchedulerState) -> tuple[list[Job], dict[str, Gang], dict[str, str]]:
    gangs, member_of = resolve_gangs(snapshot)
    groups = group_of(gangs)
    claimed: dict[str, list[Pod]] = {}
    singles: list[Job] = []
    for pod in snapshot.pods:
        if not snapshot.claims(pod):
            continue
        gang = gangs.get(member_of.get(pod.key, ""))
        if gang is None or holds_alone(gang, state):
            singles.append(single_job(pod, snapshot))
        else:
            claimed.setdefault(gang.key, []).append(pod)
    jobs = {}
    for key in claimed:
        gid = groups[key]
        if gid not in jobs:
            job = group_job(gid, gangs, claimed, snapshot)
            if job is not None:
                jobs[gid] = job
    return [*jobs.values(), *singles], gangs, groups


def holds_alone(gang: Gang, state: SchedulerState) -> bool:
    """Whether the gang's pending pods schedule as ordinary pods: once satisfied, gang rules end.
    Not for a job with a Volcano or KAI topology: a member added later must still land where the
    topology allows, next to those running (and a later sub-group still binds whole)."""
    if any(ask.keeps_gang for ask in gang.asks):
        return False
    return gang.config is not None and not gang.error and _satisfied_once(gang, state)


def single_job(pod: Pod, snapshot: Snapshot) -> Job:
    return Job(pod.key, [], [pod], effective_priority(pod, snapshot.priority_classes), creation_time(pod.creation))


def group_job(gid: str, gangs: dict[str, Gang], claimed: dict[str, list[Pod]], snapshot: Snapshot) -> Job | None:
    """The GangGroup ``gid``'s job: its gangs and their claimed pending pods (None without any)."""
    member_gangs = [gangs[k] for k in gid.split(",")]
    pods = [p for g in member_gangs for p in claimed.get(g.key, ())]
    if not pods:
        return None
    prio = max(effective_priority(p, snapshot.priority_classes) for p in pods)
    return Job(gid, member_gangs, pods, prio, min(g.creation for g in member_gangs))


def _satisfied_once(gang: Gang, state: SchedulerState) -> bool:
    cfg = gang.config
    if cfg is None or cfg.match_policy != "once-satisfied":
        return False
    return gang.key in state.satisfied or len(gang.bound()) >= cfg.min_member
