"""Gangs and GangGroups as the snapshot declares them, and the gang state kept between cycles.

``resolve_jobs`` groups the claimed pending pods into jobs: a GangGroup (every gang that
names the others in its groups annotation, closed transitively) or a single pod. Config
errors stay attached to the gang so the cycle can report them where the user looks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from koordpy.api.errors import ParseError
from koordpy.api.objects import Pod
from koordpy.api.podgroup import (
    ANN_TIMEOUT,
    GangConfig,
    gang_config_from_pod,
    gang_config_from_podgroup,
    pod_gang_name,
)
from koordpy.core.snapshot import Snapshot, effective_priority


@dataclass
class SchedulerState:
    """What the scheduler remembers between cycles; all of it can be lost safely.

    ``reserved`` holds NonStrict members placed while their gang waits (kube-scheduler's
    assumed pods in Permit); nothing is bound for them, so a restart only forgets a wait.
    """

    reserved: dict[str, str] = field(default_factory=dict)  # pod -> node
    wait_since: dict[str, float] = field(default_factory=dict)  # GangGroup id -> first reservation
    satisfied: set[str] = field(default_factory=set)  # gangs that met their minimum once


@dataclass
class Gang:
    key: str
    config: GangConfig | None
    pods: list[Pod]  # non-terminal members, bound or not
    creation: float
    error: str | None = None

    def bound(self) -> list[Pod]:
        return [p for p in self.pods if p.node_name]

    @property
    def timed_out(self) -> bool:
        return any(p.annotations.get(ANN_TIMEOUT) == "true" for p in self.pods)


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

    def queue_key(self) -> tuple[bool, int, float, str]:
        return (not self.binding, -self.priority, self.creation, self.id)


def _creation(value: float | None) -> float:
    return value if value is not None else 0.0


def resolve_gangs(snapshot: Snapshot) -> tuple[dict[str, Gang], dict[str, str]]:
    """Every gang the pods and PodGroups declare, and each member pod's gang key."""
    gangs: dict[str, Gang] = {}
    member_of: dict[str, str] = {}
    for pg in snapshot.podgroups.values():
        try:
            cfg: GangConfig | None = gang_config_from_podgroup(pg)
            err = None
        except ParseError as exc:
            cfg, err = None, str(exc)
        gangs[pg.key] = Gang(pg.key, cfg, [], _creation(pg.creation), err)
    for bad, err in snapshot.invalid_podgroups.items():
        gangs[bad] = Gang(bad, None, [], 0.0, f"PodGroup {bad} is invalid: {err}")
    for pod in snapshot.pods:
        if pod.terminal:
            continue
        key = pod_gang_name(pod.namespace, pod.labels, pod.annotations)
        if key is None:
            continue
        member_of[pod.key] = key
        gang = gangs.get(key)
        if gang is None:
            gang = gangs[key] = Gang(key, None, [], _creation(pod.creation))
        gang.pods.append(pod)
        if key not in snapshot.podgroups:  # an annotation gang is as old as its first pod
            gang.creation = min(gang.creation, _creation(pod.creation))
    for gang in gangs.values():
        if gang.error:
            continue
        # Annotation values on the pods override the PodGroup; the earliest pod speaks for the gang.
        first = min(gang.pods, key=lambda p: (_creation(p.creation), p.name), default=None)
        if first is None:
            continue
        try:
            cfg = gang_config_from_pod(f"Pod {first.key}", first.namespace, first.annotations,
                                       snapshot.podgroups.get(gang.key))
        except ParseError as exc:
            gang.error = str(exc)
            continue
        if cfg is None:
            gang.error = (f"PodGroup {gang.key} not found; its pods wait until it is created "
                          f"(or declare {'gang.scheduling.koordinator.sh/min-available'} on them)")
        gang.config = cfg
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
    claimed = [p for p in snapshot.pods if snapshot.claims(p)]
    done = {k for k, g in gangs.items() if g.config is not None and not g.error and _satisfied_once(g, state)}
    jobs: dict[str, Job] = {}
    for pod in claimed:
        prio = effective_priority(pod, snapshot.priority_classes)
        gang_key = member_of.get(pod.key)
        gang = gangs.get(gang_key) if gang_key else None
        if gang is not None and gang.key in done:
            gang = None  # once-satisfied: later members schedule as ordinary pods
        if gang is None:
            jobs[pod.key] = Job(pod.key, [], [pod], prio, _creation(pod.creation))
            continue
        gid = groups[gang.key]
        job = jobs.get(gid)
        if job is None:
            member_gangs = [gangs[k] for k in gid.split(",")]
            job = jobs[gid] = Job(gid, member_gangs, [], prio, min(g.creation for g in member_gangs))
        job.pods.append(pod)
        job.priority = max(job.priority, prio)
    return list(jobs.values()), gangs, groups


def _satisfied_once(gang: Gang, state: SchedulerState) -> bool:
    cfg = gang.config
    if cfg is None or cfg.match_policy != "once-satisfied":
        return False
    return gang.key in state.satisfied or len(gang.bound()) >= cfg.min_member
