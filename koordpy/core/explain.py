"""Why a pod or a PodGroup waits, or where it went: ``koordpy explain`` without the I/O.

``explain_pod`` and ``explain_podgroup`` take the snapshot the scheduler would see, its state
and ``now``, and answer from the core's own reasoning: the gangs as ``resolve_gangs`` declares
them, and a dry run of the job (``koordpy.core.cycle.dry_run``) whose structured diagnosis
(``Failure``) and preemption plan (``Plan``) say what stands in the way. A second dry run on the
same nodes with every other pod gone tells a job that waits for room from one that can never
fit as asked. Nothing is changed: both runs work on copies, and their decisions are reported,
never carried out.

``Explanation.to_json`` is the documented, stable shape of ``koordpy explain -o json``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from koordpy.api.dra import Devices
from koordpy.api.objects import Pod
from koordpy.api.raw import rfc3339
from koordpy.core import dialects, gangrule, stale
from koordpy.core.cluster import Cluster, effective_priority
from koordpy.core.cycle import DryRun, dry_run
from koordpy.core.decisions import Bind
from koordpy.core.gang import GangGroupId, finished_pods, gangs_named, group_of, resolve_gangs
from koordpy.core.liveness import loss
from koordpy.core.messages import lacked as messages_lacked
from koordpy.core.messages import render
from koordpy.core.model import Gang, TopologyFacts
from koordpy.core.naming import natural_key
from koordpy.core.preemption import preemption_policy
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.tree import TopologyTree, TreeKey
from koordpy.core.verdicts import Closest, GangStale
from koordpy.errors import BadInput

API_VERSION = "explain.koordpy.io/v1alpha1"
SHOWN_DOMAINS = 16

class AmbiguousGang(BadInput, LookupError):
    """A short PodGroup name that several implicit groups share; the caller lists them."""

    def __init__(self, key: str, candidates: list[str]) -> None:
        super().__init__(f"{key} names {len(candidates)} groups: {', '.join(candidates)}; give one of them")
        self.key = key
        self.candidates = candidates


Status = Literal["bound", "pending", "schedulable", "finished", "terminating", "not-ours", "invalid"]


@dataclass(frozen=True)
class GangFacts:
    """One gang of the job, counted as the scheduler counts it."""

    key: str
    declared_by: str  # what declares it: a PodGroup of some API group, annotations, an owner
    min_member: int | None  # None: the declaration is invalid (see error)
    members: int  # live pods that belong to it
    bound: int
    pending: int
    waiting: int  # placed and held while the gang waits for the rest (NonStrict)
    mode: str | None  # Strict / NonStrict
    timeout_seconds: float | None
    timed_out: bool
    error: str | None
    # What the declaring object says beyond the counts, in its dialect's terms (a Workload PodGroup:
    # its policy, topology key, preferred label, priority and PodGroupInitiallyScheduled).
    details: tuple[tuple[str, str], ...] = ()
    finished: int = 0  # pods of it that have finished (Succeeded, Failed): no longer members
    # The minimum as its object states it ("minMember 6", "minCount 8", "minGroupCount 2 ..."); mode
    # and timeout are None for a gang whose dialect has neither (only Koordinator's gangs have them).
    declared_minimum: str = ""
    # For a group that is part of a gang (a CompositePodGroup's child): that gang's key. Its counts
    # are its own pods; min_member is its own minimum.
    part_of: str | None = None
    # Bound members that no longer count (``koordpy.core.liveness``: terminating, failed, or their node
    # gone or failed for them): a gang left below its minimum by them takes its replacements together.
    lost: int = 0


@dataclass(frozen=True)
class PodFacts:
    key: str
    state: str  # Bound, Pending, Terminating, Succeeded, Failed
    node: str
    nominated_node: str
    path: tuple[str, ...]  # the node's topology path, top domain first, the node last
    message: str  # the PodScheduled=False message the pod carries
    claims: tuple[ClaimFacts, ...] = ()  # its spec.resourceClaims, in order


@dataclass(frozen=True)
class ClaimFacts:
    """One of a pod's ``spec.resourceClaims`` as the snapshot holds it."""

    name: str  # the entry's name in the pod
    claim: str  # the ResourceClaim's namespace/name ("": not made yet, or none needed)
    devices: tuple[str, ...]  # its allocation's devices (driver/pool/device); () not allocated
    reserved_for: tuple[str, ...]  # its consumers ("pods/NAME", "podgroups/NAME")


@dataclass(frozen=True)
class Diagnosis:
    """The dry run's failure: the reason, what the filters removed, the offerslots per domain."""

    pod: str  # the member whose placement failed
    reason: str
    resolvable: bool  # whether freeing room (preemption) could change the answer
    nodes: int
    filtered: tuple[tuple[str, int], ...]  # (why, nodes removed)
    desired: int
    domains: tuple[tuple[str, int], ...]  # (domain, offerslots), the most first
    fits_empty: bool | None  # whether the job fits with every other pod gone (None: not asked)
    closest: Closest | None = None  # the best domain and, per reason, its nodes the job cannot use


@dataclass(frozen=True)
class PreemptionFacts:
    policy: str
    priority: int
    nominated: tuple[tuple[str, str], ...]  # (pod, node) as the pods carry them now
    terminating: tuple[str, ...]  # victims already being evicted on those nodes
    outcome: str  # what a dry run would do: nominated, waiting, none, or not-tried
    message: str
    would_evict: tuple[str, ...]
    would_release: tuple[str, ...]  # lower-priority pods that would lose room nominated for them
    would_nominate: tuple[tuple[str, str], ...]
    where: str
    # PodDisruptionBudgets the plan breaks (namespace/name, victims beyond its budget), and the pods
    # of the candidate chosen that budgets kept running (evicting them would have broken one).
    beyond_budgets: tuple[tuple[str, int], ...] = ()
    kept_by_budgets: tuple[str, ...] = ()
    # When preemption would be tried again though nothing changes (a victim's minimum runtime or the
    # job's preemption delay ends); None: only a change in the cluster.
    try_again_at: float | None = None


@dataclass(frozen=True)
class Explanation:
    kind: Literal["pod", "podgroup"]
    key: str
    status: Status
    summary: str
    job: str  # the GangGroup id (gang keys joined by commas), or the pod itself
    job_kind: str
    priority: int
    gangs: tuple[GangFacts, ...] = ()
    pods: tuple[PodFacts, ...] = ()
    topology: TopologyFacts | None = None
    diagnosis: Diagnosis | None = None
    would_place: tuple[tuple[str, str], ...] = ()  # (pod, node) the dry run would bind
    preemption: PreemptionFacts | None = None
    changes: tuple[str, ...] = ()  # what would change the answer
    messages: dict[str, str] = field(default_factory=dict)  # pod -> why it would wait, per the dry run

    def to_json(self) -> dict[str, Any]:
        """The shape of ``koordpy explain -o json``::

            apiVersion: explain.koordpy.io/v1alpha1, kind: Explanation
            target: {kind: pod|podgroup, key}
            status: bound|pending|schedulable|finished|terminating|not-ours|invalid
            summary: one sentence
            job: {id, kind, priority, gangs: [{key, declaredBy, minMember, declaredMinimum, members,
                  finished, bound, lost, pending, waiting, mode, timeoutSeconds, timedOut, error,
                  partOf, details: {what: value}}]}
            pods: [{key, state, node, nominatedNode, path: [top domain ... node], message,
                    claims: [{name, claim, devices: [driver/pool/device], reservedFor: [resource/name]}]}]
            topology: null | {source, required: [...], preferred: [...]}
            diagnosis: null | {pod, reason, resolvable, nodes, filtered: [{reason, nodes}],
                       desired, domains: [{name, offerslots}] (most first), fitsEmptyCluster,
                       closest: null | {domain, offerslots, nodes, lacks: [{reason, nodes}]}}
            wouldPlace: {pod: node}
            preemption: null | {policy, priority, nominated: {pod: node}, terminating: [...],
                        outcome: nominated|waiting|none|not-tried, message, wouldEvict: [...],
                        wouldRelease: [...], wouldNominate: {pod: node}, where,
                        beyondBudgets: {pdb: pods}, keptByBudgets: [...],
                        tryAgainAt: null | RFC 3339 time}
            changes: ["what would change the answer", ...]
            messages: {pod: why it would wait}
        """
        d, p, t = self.diagnosis, self.preemption, self.topology
        return {
            "apiVersion": API_VERSION,
            "kind": "Explanation",
            "target": {"kind": self.kind, "key": self.key},
            "status": self.status,
            "summary": self.summary,
            "job": {"id": self.job, "kind": self.job_kind, "priority": self.priority,
                    "gangs": [{"key": g.key, "declaredBy": g.declared_by, "minMember": g.min_member,
                               "declaredMinimum": g.declared_minimum, "members": g.members,
                               "finished": g.finished, "bound": g.bound, "lost": g.lost, "pending": g.pending,
                               "waiting": g.waiting, "mode": g.mode, "timeoutSeconds": g.timeout_seconds,
                               "timedOut": g.timed_out, "error": g.error, "partOf": g.part_of,
                               "details": dict(g.details)}
                              for g in self.gangs]},
            "pods": [{"key": x.key, "state": x.state, "node": x.node, "nominatedNode": x.nominated_node,
                      "path": list(x.path), "message": x.message,
                      "claims": [{"name": c.name, "claim": c.claim, "devices": list(c.devices),
                                  "reservedFor": list(c.reserved_for)} for c in x.claims]} for x in self.pods],
            "topology": None if t is None else {"source": t.source, "required": list(t.required),
                                                "preferred": list(t.preferred)},
            "diagnosis": None if d is None else {
                "pod": d.pod, "reason": d.reason, "resolvable": d.resolvable, "nodes": d.nodes,
                "filtered": [{"reason": r, "nodes": n} for r, n in d.filtered], "desired": d.desired,
                "domains": [{"name": name, "offerslots": n} for name, n in d.domains],
                "fitsEmptyCluster": d.fits_empty,
                "closest": None if d.closest is None else {
                    "domain": d.closest.domain, "offerslots": d.closest.offers, "nodes": d.closest.nodes,
                    "lacks": [{"reason": r, "nodes": n} for r, n in d.closest.lacks]}},
            "wouldPlace": dict(self.would_place),
            "preemption": None if p is None else {
                "policy": p.policy, "priority": p.priority, "nominated": dict(p.nominated),
                "terminating": list(p.terminating), "outcome": p.outcome, "message": p.message,
                "wouldEvict": list(p.would_evict), "wouldRelease": list(p.would_release),
                "wouldNominate": dict(p.would_nominate), "where": p.where,
                "beyondBudgets": dict(p.beyond_budgets), "keptByBudgets": list(p.kept_by_budgets),
                "tryAgainAt": None if p.try_again_at is None else rfc3339(p.try_again_at)},
            "changes": list(self.changes),
            "messages": dict(self.messages),
        }


# -- the answers -------------------------------------------------------------------------


def explain_pod(snapshot: Snapshot, state: SchedulerState, now: float, key: str,
                invalid: Mapping[str, str] | None = None) -> Explanation | None:
    """Why the pod ``key`` (namespace/name) waits, or where it went; None when there is no such
    pod. ``invalid`` holds pods the shell could not hand the core, with why (their key: error)."""
    pod = next((p for p in snapshot.pods if p.key == key), None)
    if pod is None:
        if invalid and key in invalid:
            return Explanation("pod", key, "invalid", f"koordpy cannot schedule this pod: {invalid[key]}",
                               key, "pod", 0, changes=(f"fix the pod: {invalid[key]}",))
        return None
    return _Explainer(snapshot, state, now).pod(pod)


def explain_podgroup(snapshot: Snapshot, state: SchedulerState, now: float, key: str) -> Explanation | None:
    """Why the gang ``key`` waits, or where its pods went; None when nothing declares such a gang.
    ``key`` is namespace/name of its PodGroup or annotation gang, or an implicit group's name as
    messages give it (``namespace/Job/name``), or that group's short ``namespace/name`` when only
    one group has that name (``AmbiguousGang`` otherwise), or a group that is part of a gang (a
    CompositePodGroup's child PodGroup), explained as that part of it."""
    return _Explainer(snapshot, state, now).podgroup(key)


class _Explainer:
    def __init__(self, snapshot: Snapshot, state: SchedulerState, now: float) -> None:
        self.snapshot = snapshot
        self.state = state
        self.now = now
        self.gangs, self.member_of = resolve_gangs(snapshot)
        # Which bound members still count, as the cycle's view records it (``Gang.lost``).
        nodes = {n.name: n for n in snapshot.nodes}
        for gang in self.gangs.values():
            gang.lost = frozenset(p.key for p in gang.pods
                                  if p.node_name and p.node_name not in snapshot.invalid_nodes
                                  and loss(p, nodes.get(p.node_name), now) is not None)
        self.groups = group_of(self.gangs)
        # The pods that have finished, by the gang they were part of: no longer its members, but
        # what a finished job, or a gang short of pods that finished, is told by.
        self.finished = finished_pods(snapshot)
        self._cluster: Cluster | None = None
        self._empty: DryRun | None = None

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.snapshot)
        return self._cluster

    # -- targets ---------------------------------------------------------------------------

    def pod(self, pod: Pod) -> Explanation:
        gang = self.gangs.get(self.member_of.get(pod.key, ""))
        gangs = self._group(gang)
        job = str(self._gid(gang)) if gang is not None else pod.key
        prio = effective_priority(pod, self.snapshot.priority_classes)
        own = dialects.own_group(pod, self.snapshot) if gang is not None else None
        # A pod of a group that is part of its gang (a CompositePodGroup's child): that group too.
        part = (self._part_facts(own, gang.key)[0],) if own is not None and gang is not None and own != gang.key else ()
        base = Explanation("pod", pod.key, "pending", "", job, self._job_kind(gangs), prio,
                           gangs=(*(self._gang_facts(g) for g in gangs), *part),
                           pods=tuple(self._pod_facts(p, gangs) for p in self._members(gangs, pod)),
                           topology=self._topology(gangs))
        if pod.phase in ("Succeeded", "Failed"):
            return replace(base, status="finished", summary=f"the pod has finished ({pod.phase})"
                           + (f" on {pod.node_name}" if pod.node_name else ""))
        if pod.node_name:
            where = " > ".join(self._path(pod.node_name, gangs))
            others = [p for p in base.pods if p.key != pod.key and p.node]
            also = f"; {len(others)} other member(s) of its job are bound too" if others else ""
            state: Status = "terminating" if pod.deleting else "bound"
            return replace(base, status=state, summary=f"bound to {pod.node_name} ({where}){also}"
                           + (", and being deleted" if pod.deleting else ""))
        if pod.deleting:
            return replace(base, status="terminating", summary="the pod is being deleted")
        if pod.scheduler_name not in self.snapshot.scheduler_names:
            names = ", ".join(sorted(self.snapshot.scheduler_names))
            return replace(base, status="not-ours", summary=f"its spec.schedulerName is {pod.scheduler_name!r}, "
                           f"not one koordpy schedules ({names})",
                           changes=(f"set spec.schedulerName to {sorted(self.snapshot.scheduler_names)[0]!r} "
                                    "(or run koordpy with --scheduler-name for it)",))
        return self._dry(base, pod.key, gangs)

    def podgroup(self, key: str) -> Explanation | None:
        named = gangs_named(self.gangs, key)
        if len(named) > 1:
            raise AmbiguousGang(key, named)
        if not named:
            whole = dialects.enclosing(key, self.snapshot)
            return self._part(key, whole) if whole is not None else None
        key = named[0]
        gang = self.gangs[key]
        gangs = self._group(gang)
        job = str(self._gid(gang))
        pods = sorted(gang.pods, key=lambda p: natural_key(p.key))
        prio = max((effective_priority(p, self.snapshot.priority_classes) for p in pods), default=0)
        base = Explanation("podgroup", key, "pending", "", job, self._job_kind(gangs), prio,
                           gangs=tuple(self._gang_facts(g) for g in gangs),
                           pods=tuple(self._pod_facts(p, gangs) for p in self._members(gangs, None, finished=True)),
                           topology=self._topology(gangs))
        pending = [p for p in pods if self.snapshot.claims(p)]
        if pending:
            return self._dry(base, pending[0].key, gangs)
        facts = base.gangs[gangs.index(gang)]
        if gang.error is not None:
            return replace(base, summary=gang.error, changes=(f"fix the gang: {gang.error}",))
        return self._settled(base, pods, self.finished.get(key, []), facts, gangs)

    def _part(self, key: str, whole: str) -> Explanation:
        """The group ``key`` that is part of the gang ``whole`` (a CompositePodGroup's child): the
        gang's job, the group's own pods and minimum, and its pods' answer. A gang that is missing
        (its object not there yet, or deleted) or that koordpy does not build leaves the group
        alone: its pods' answer says what they wait for."""
        gang = self.gangs.get(whole)
        gangs = self._group(gang)
        part, pods, finished = self._part_facts(key, whole)
        prio = max((effective_priority(p, self.snapshot.priority_classes) for p in pods), default=0)
        if gang is not None:
            whose = f"{key} is part of the gang {whole} ({dialects.declared_by(whole, self.snapshot)})"
            job, kind = str(self._gid(gang)), self._job_kind(gangs)
        elif dialects.declaring(whole, self.snapshot) is None:
            whose = f"{key} is part of the gang {whole}, which does not exist"
            job, kind = whole, "missing (no object declares it)"
        else:
            whose = f"{key} is part of {whole} ({dialects.declared_by(whole, self.snapshot)}), which koordpy refuses"
            job, kind = whole, f"{dialects.declared_by(whole, self.snapshot)}, refused (no gang is built of it)"
        base = Explanation("podgroup", key, "pending", "", job, kind,
                           gang.priority if gang is not None and gang.priority is not None else prio,
                           gangs=(*(self._gang_facts(g) for g in gangs), part),
                           pods=tuple(self._pod_facts(p, gangs) for p in sorted((*pods, *finished),
                                                                                 key=lambda p: natural_key(p.key))),
                           topology=self._topology(gangs))
        pending = [p for p in pods if self.snapshot.claims(p)]
        if pending:
            exp = self._dry(base, pending[0].key, gangs, frozenset(p.key for p in pods))
            # Without the gang each pod is queued alone (its refusal says why): the job stays the gang's name.
            return exp if gang is not None else replace(exp, job=job)
        # A group whose pods all finished ends the job only when no other part of it runs.
        exp = self._settled(base, pods, finished, part, gangs,
                            "the job" if gang is not None and not gang.pods else "the group")
        return replace(exp, summary=f"{exp.summary}; {whose}")

    def _part_facts(self, key: str, whole: str) -> tuple[GangFacts, list[Pod], list[Pod]]:
        """The facts of the group ``key`` that is part of the gang ``whole``, and its live and
        finished pods (natural order)."""
        def own(pods: Iterable[Pod]) -> list[Pod]:
            return sorted((p for p in pods if dialects.own_group(p, self.snapshot) == key),
                          key=lambda p: natural_key(p.key))

        gang = self.gangs.get(whole)
        # Without the gang (its object missing), the pods the dialect files under it all the same.
        live = gang.pods if gang is not None else (p for p in self.snapshot.pods if self.member_of.get(p.key) == whole)
        pods, finished = own(live), own(self.finished.get(whole, []))
        terms = dialects.group_terms(key, None, self.snapshot)
        bound = sum(1 for p in pods if p.node_name)
        facts = GangFacts(key, dialects.declared_by(key, self.snapshot), terms.minimum if terms else None, len(pods),
                          bound, len(pods) - bound, 0, None, None, False, None,
                          dialects.object_facts(key, self.snapshot), finished=len(finished),
                          declared_minimum=terms.said if terms else "", part_of=whole)
        return facts, pods, finished

    def _settled(self, base: Explanation, pods: list[Pod], finished: list[Pod], facts: GangFacts,
                 gangs: list[Gang], ended: str = "the job") -> Explanation:
        """A group none of whose pods koordpy would place now: finished, bound, short of pods, or
        held by what is not koordpy's to change. ``ended``: what has finished when its pods all did."""
        if not pods and finished:
            return replace(base, status="finished", summary=f"{ended} has finished: its {len(finished)} pod(s) "
                           f"{_phases(finished)}")
        short = facts.min_member is not None and facts.members < facts.min_member
        said = facts.declared_minimum or f"minMember {facts.min_member}"
        if not pods:
            if short:
                return replace(base, summary=f"{said} but only 0 pod(s) exist",
                               changes=tuple(self._short_changes(gangs)))
            return replace(base, summary="the gang has no live pods")
        done = f"; {len(finished)} more finished ({_phases(finished)})" if finished else ""
        if all(p.node_name for p in pods):
            nodes = sorted({p.node_name for p in pods}, key=natural_key)
            # Nothing waits: a minimum the live pods no longer reach (pods that finished or went)
            # holds no pod back.
            return replace(base, status="bound", summary=f"all {len(pods)} pod(s) are bound, on "
                           f"{', '.join(nodes)}{done}")
        if short:
            return replace(base, summary=f"{said} but only {facts.members} pod(s) exist{done}",
                           changes=tuple(self._short_changes(gangs)))
        return replace(base, summary=f"{facts.bound} of {len(pods)} pod(s) are bound; the others are not "
                       "koordpy's to place (another schedulerName, or being deleted)")

    # -- the dry run -----------------------------------------------------------------------

    def _dry(self, base: Explanation, key: str, gangs: list[Gang],
             targets: frozenset[str] | None = None) -> Explanation:
        """The dry run of the job of the pod ``key``. ``targets``: the pods the answer is about (a
        group that is part of the job), None for a whole gang; a pod's answer is about itself."""
        run = dry_run(self.snapshot, self.state, self.now, key)
        if run is None:  # claimed pods are always in the queue; a job the core cannot form says so
            return replace(base, summary="koordpy does not queue this pod", messages={})
        pods = set(run.pods)
        if base.kind == "pod":
            targets = frozenset({key})
        target = key if targets is not None else next(iter(sorted(pods, key=natural_key)), key)

        def binds_of(r: DryRun) -> tuple[tuple[str, str], ...]:
            binds = ((d.pod, d.node) for d in r.decisions if isinstance(d, Bind))
            return tuple(sorted(binds, key=lambda b: natural_key(b[0])))

        def places_target(binding: tuple[tuple[str, str], ...]) -> bool:
            return bool(binding) and (targets is None or any(p in targets for p, _ in binding))

        binds = binds_of(run)
        if places_target(binds):
            # It fits the free room as the next job; a cycle tries the jobs ahead of it first, and
            # room they take is not this job's to promise.
            queued = dry_run(self.snapshot, self.state, self.now, key, in_queue=True)
            assert queued is not None
            queued_binds = binds_of(queued)
            if places_target(queued_binds):
                where = ", ".join(sorted({n for _, n in queued_binds}, key=natural_key))
                behind = f", after the {len(queued.ahead)} job(s) ahead of it in the queue" if queued.ahead else ""
                return replace(base, would_place=queued_binds, messages={}, job=queued.job, status="schedulable",
                               summary=f"it fits now: the next cycle would bind {len(queued_binds)} pod(s) on "
                                       f"{where}{behind}", changes=(
                                   "nothing stands in the way now; if it stays pending, check that koordpy runs "
                                   "(and is the leader) and claims this schedulerName",))
            shown = ", ".join(queued.ahead[:3]) + (f" and {len(queued.ahead) - 3} more"
                                                   if len(queued.ahead) > 3 else "")
            exp = replace(base, messages={k: v for k, v in queued.messages.items() if k in pods}, job=queued.job,
                          summary=f"it fits the free room now, but {len(queued.ahead)} job(s) ahead of it in the "
                                  f"queue take that room first ({shown}); it waits for room after them",
                          diagnosis=self._diagnosis(queued, gangs), preemption=self._preemption(queued, gangs))
            return replace(exp, changes=(
                f"room beyond what the jobs ahead of it take ({shown}): they go first by priority, then by "
                "age; a higher priority puts this job ahead of them", *self._changes(exp, queued, gangs)))
        messages = {k: v for k, v in run.messages.items() if k in pods}
        exp = replace(base, would_place=binds, messages=messages, job=run.job)
        diagnosis = self._diagnosis(run, gangs)
        preemption = self._preemption(run, gangs)
        # The member that failed carries the reason; the others only quote it.
        reason = render(run.failure.why) if run.failure is not None else messages.get(target, "")
        if run.failure is not None and run.plan is not None and run.plan.message:
            reason = f"{reason} {run.plan.message}"
        if run.replacements is not None:  # what the pods are told, not the member's failure alone
            reason = render(run.replacements)
        exp = replace(exp, diagnosis=diagnosis, preemption=preemption,
                      summary=reason or "it waits")
        changes = self._changes(exp, run, gangs)
        if run.replacements is not None:
            r = run.replacements
            where = f"inside {r.domain} (where its running members are)" if r.domain else "in the cluster"
            changes = (f"gang {r.gang} lost members: its {r.missing} replacement(s) bind together, all or none, "
                       f"{where}: free room for all of them there (lower-priority pods there are preempted when "
                       "that is enough)", *changes)
        return replace(exp, changes=changes)

    def _diagnosis(self, run: DryRun, gangs: list[Gang]) -> Diagnosis | None:
        f = run.failure
        if f is None:
            return None
        domains = tuple(sorted(f.domains, key=lambda d: (-d[1], natural_key(d[0]))))[:SHOWN_DOMAINS]
        fits_empty = None
        if f.resolvable:
            again = self._empty_run(run, gangs)
            fits_empty = again is not None and again.failure is None and any(
                isinstance(d, Bind) for d in again.decisions)
        return Diagnosis(f.pod.key, render(f.why), f.resolvable, len(self.snapshot.nodes), f.filtered, f.desired,
                         domains, fits_empty, f.closest)

    def _empty_run(self, run: DryRun, gangs: list[Gang]) -> DryRun | None:
        """The job tried again with every pod outside its gangs gone: whether it fits then is the
        difference between waiting for room and never fitting as asked."""
        if self._empty is None:
            keep = set(run.pods) | {p.key for g in gangs for p in g.pods}
            kept = [p for p in self.snapshot.pods if p.key in keep]
            empty = replace(self.snapshot, pods=kept, devices=_without_consumers_of(self.snapshot.devices, kept))
            self._empty = dry_run(empty, SchedulerState(), self.now, run.pods[0])
        return self._empty

    def _preemption(self, run: DryRun, gangs: list[Gang]) -> PreemptionFacts | None:
        by_key = {p.key: p for p in self.snapshot.pods}
        pods = [by_key[k] for k in run.pods if k in by_key]
        if not pods:
            return None
        first = run.failure.pod if run.failure is not None else pods[0]
        nominated = tuple((p.key, p.nominated_node_name) for p in pods if p.nominated_node_name)
        where = {n for _, n in nominated}
        terminating = tuple(sorted((p.key for p in self.snapshot.pods
                                    if p.deleting and p.preempted and p.node_name in where), key=natural_key))
        plan = run.plan
        names = self.cluster.nodes
        # A gang whose declaring object speaks for its pods (Kubernetes' PodGroup) has its own.
        own = next((g for g in gangs if any(p.key == first.key for p in g.pods)), None)
        policy = own.preemption_policy if own is not None and own.preemption_policy is not None else None
        return PreemptionFacts(
            policy=policy or preemption_policy(first, self.snapshot.priority_classes),
            priority=max([g.priority for g in gangs if g.priority is not None]
                         or [effective_priority(p, self.snapshot.priority_classes) for p in pods]),
            nominated=nominated, terminating=terminating,
            outcome=plan.outcome if plan is not None else "not-tried",
            message=plan.message.removeprefix("preemption: ") if plan is not None else "",
            would_evict=plan.victims if plan is not None else (),
            would_release=plan.released if plan is not None else (),
            would_nominate=tuple(sorted(((k, names[n].name) for k, n in plan.nominated.items()),
                                        key=lambda kn: natural_key(kn[0]))) if plan is not None else (),
            where=plan.where if plan is not None else "",
            beyond_budgets=plan.beyond if plan is not None else (),
            kept_by_budgets=plan.kept if plan is not None else (),
            try_again_at=plan.wake_at if plan is not None else None)

    # -- what would change the answer --------------------------------------------------------

    def _changes(self, exp: Explanation, run: DryRun, gangs: list[Gang]) -> tuple[str, ...]:
        out: list[str] = []
        for g in gangs:
            if g.error is not None:
                out.append(f"fix the gang {g.key}: {g.error}")
        out.extend(self._short_changes(gangs))
        for facts in exp.gangs:
            if facts.timed_out:
                out.append(f"gang {facts.key} timed out waiting for its members: delete and recreate its pods "
                           "to try again")
        d, p = exp.diagnosis, exp.preemption
        if p is not None and p.outcome == "nominated" and p.would_evict:
            out.append(f"preemption makes room: evicting {', '.join(p.would_evict)} in {p.where}; the job binds "
                       "there once they terminate")
            out.extend(f"the eviction breaks PodDisruptionBudget {name}: {n} pod(s) beyond its budget (no candidate "
                       "stays within every budget)" for name, n in p.beyond_budgets)
            if p.kept_by_budgets:
                out.append(f"PodDisruptionBudgets kept {', '.join(p.kept_by_budgets)} running in {p.where}: evicting "
                           "them would break their budgets")
        elif p is not None and p.outcome == "waiting":
            out.append("victims are terminating on the nominated nodes: it binds once they are gone")
        if d is not None and not d.resolvable:
            if d.filtered:
                why = ", ".join(f"{n} {r}" for r, n in d.filtered)
                out.append(f"fix the pod's node selector, affinity or tolerations (or the nodes): no node passes "
                           f"the filters ({why}); preemption cannot help")
            else:
                out.append(f"fix the job's topology request: {d.reason}; preemption cannot help")
        elif d is not None and d.fits_empty is False:
            best = f" (the most any domain offers even empty is {self._empty_best(run, gangs)})" if d.domains else ""
            out.append(f"the job does not fit as asked even with every other pod gone{best}: make it smaller, "
                       "relax its topology requirement, or add nodes; preemption cannot help")
        elif d is not None and d.domains:
            name, slots = d.domains[0]
            short = d.desired - slots
            lacked = f"; {messages_lacked(d.closest)}" if d.closest is not None and d.closest.domain == name else ""
            out.append(f"room for {short} more pod(s) in {name}: it offers {slots} of the {d.desired} needed "
                       f"(the best of {len(d.domains)} domain(s)){lacked}")
        elif d is not None and d.filtered:
            why = ", ".join(f"{n} {r}" for r, n in d.filtered)
            out.append(f"free room on some node for {d.desired} pod(s): {why}")
        if p is not None and d is not None and d.resolvable and d.fits_empty is not False:
            if not self.snapshot.preemption:
                out.append("preemption is switched off in koordpy's configuration: only room freed by others helps")
            elif p.policy == "Never":
                out.append("its preemptionPolicy is Never: it never evicts others; only room freed by others helps")
            elif p.outcome == "none" and p.try_again_at is not None:
                out.append(f"preemption waits: {p.message}")  # a minimum runtime or the delay: later
            elif p.outcome == "none" and p.message:
                out.append(f"preemption cannot help: {p.message.removeprefix('not helpful: ')}")
            elif p.outcome == "none":
                out.append(f"preemption cannot help: no pod of lower priority than {p.priority} can be evicted "
                           "where the job could go; a higher priority would let it preempt")
        if not out and exp.summary:
            out.append(exp.summary)
        return tuple(out)

    def _empty_best(self, run: DryRun, gangs: list[Gang]) -> str:
        again = self._empty_run(run, gangs)
        if again is None or again.failure is None or not again.failure.domains:
            return "unknown"
        name, slots = max(again.failure.domains, key=lambda d: d[1])
        closest = again.failure.closest
        lacked = f"; {messages_lacked(closest)}" if closest is not None and closest.domain == name else ""
        return f"{slots} of {again.failure.desired}, in {name}{lacked}"

    def _short_changes(self, gangs: list[Gang]) -> list[str]:
        out = []
        for g in gangs:
            if g.config is not None and gangrule.too_few(g):
                missing = g.config.min_member - (len(g.pods) - len(g.lost))
                terms = dialects.group_terms(g.key, g.config.min_member, self.snapshot)
                said = terms.said if terms is not None else f"minMember {g.config.min_member}"
                field = terms.field if terms is not None else "minMember"
                gone = len(self.finished.get(g.key, ()))
                counted = f" ({gone} more finished, which count no more)" if gone else ""
                lower = f" (or lower {field})" if field else ""
                out.append(f"{said} but only {len(g.pods) - len(g.lost)} pod(s) of gang {g.key} exist{counted}: "
                           f"create {missing} more{lower}")
        return out

    # -- facts -------------------------------------------------------------------------------

    def _gid(self, gang: Gang) -> GangGroupId:
        return self.groups.get(gang.key) or GangGroupId((gang.key,))

    def _group(self, gang: Gang | None) -> list[Gang]:
        if gang is None:
            return []
        return [self.gangs[k] for k in self._gid(gang) if k in self.gangs]

    def _members(self, gangs: list[Gang], pod: Pod | None, finished: bool = False) -> list[Pod]:
        """The job's pods (and ``pod``), in natural order; with ``finished``, those that finished too."""
        pods = {p.key: p for g in gangs for p in (*g.pods, *(self.finished.get(g.key, ()) if finished else ()))}
        if pod is not None:
            pods.setdefault(pod.key, pod)
        return sorted(pods.values(), key=lambda p: natural_key(p.key))

    def _job_kind(self, gangs: list[Gang]) -> str:
        if not gangs:
            return "pod"
        kinds = sorted({self._declared_by(g) for g in gangs})
        if len(gangs) > 1:
            return f"GangGroup of {len(gangs)} gangs ({', '.join(kinds)})"
        return f"gang ({kinds[0]})"

    def _declared_by(self, gang: Gang) -> str:
        return dialects.declared_by(gang.key, self.snapshot)

    def _gang_facts(self, gang: Gang) -> GangFacts:
        cfg = gang.config
        bound = sum(1 for p in gang.pods if p.node_name)
        waiting = gangrule.waiting(gang, self.state.reserved)
        terms = dialects.group_terms(gang.key, cfg.min_member, self.snapshot) if cfg is not None else None
        modes = cfg if cfg is not None and terms is not None and terms.modes else None
        return GangFacts(gang.key, self._declared_by(gang), cfg.min_member if cfg is not None else None,
                         len(gang.pods), bound, len(gang.pods) - bound, waiting,
                         modes.mode if modes is not None else None,
                         modes.waiting_seconds if modes is not None else None,
                         gang.timed_out, gang.error,
                         (*dialects.object_facts(gang.key, self.snapshot), *self._stale_facts(gang)),
                         finished=len(self.finished.get(gang.key, ())),
                         declared_minimum=terms.said if terms is not None else "", lost=len(gang.lost))

    def _stale_facts(self, gang: Gang) -> tuple[tuple[str, str], ...]:
        """Whether the gang is stale (``koordpy.core.stale``), since when and what happens then, as the
        cycle would read it now: its stale-since from the scheduler's memory or its object, else now."""
        if not any(p.scheduler_name in self.snapshot.scheduler_names for p in gang.pods):
            return ()
        reading = stale.health(gang, {}, any(p.phase == "Succeeded" for p in self.finished.get(gang.key, ())))
        if reading is None or not reading.stale:
            return ()
        key, snapshot = gang.key, self.snapshot
        since = stale.since_when(self.state.stale_since.get(key), dialects.stale_since(key, gang.pods, snapshot),
                                 self.state.stale_cleared.get(key), self.now)
        grace, by = stale.grace(gang, snapshot)
        ends = stale.due(since, grace)
        held = ends is not None and ends <= self.now and (
            reading.arriving > 0 or any(p.nominated_node_name for p in gang.pods if not p.node_name))
        said = GangStale(key, since, reading.live, reading.minimum, ends, reading.parts, held,
                         declared_by=dialects.declared_by(key, self.snapshot))
        return (("stale", render(stale.told(said, by))),)

    def _pod_facts(self, pod: Pod, gangs: list[Gang]) -> PodFacts:
        if pod.phase in ("Succeeded", "Failed"):
            state = pod.phase
        elif pod.deleting:
            state = "Terminating"
        else:
            state = "Bound" if pod.node_name else "Pending"
        path = self._path(pod.node_name, gangs) if pod.node_name else ()
        return PodFacts(pod.key, state, pod.node_name, pod.nominated_node_name, path, pod.unschedulable_message,
                        tuple(self._claim_facts(pod)))

    def _claim_facts(self, pod: Pod) -> Iterable[ClaimFacts]:
        for entry in pod.claims:
            name = entry.claim or pod.claim_statuses.get(entry.name, "")
            claim = self.snapshot.devices.claims.get(f"{pod.namespace}/{name}") if name else None
            if claim is None:
                yield ClaimFacts(entry.name, f"{pod.namespace}/{name}" if name else "", (), ())
                continue
            devices = tuple(r.device_id for r in claim.allocation.results) if claim.allocation is not None else ()
            held = tuple(f"{c.resource}/{c.name}" for c in claim.reserved_for)
            yield ClaimFacts(entry.name, claim.key, devices, held)
        extended = self.snapshot.devices.claims.get(f"{pod.namespace}/{pod.extended_claim}") \
            if pod.extended_claim else None
        if extended is not None:  # the claim of its DRA-backed extended resources (status.extendedResourceClaimStatus)
            devices = tuple(r.device_id for r in extended.allocation.results) if extended.allocation is not None else ()
            yield ClaimFacts("<extended-resources>", extended.key, devices,
                             tuple(f"{c.resource}/{c.name}" for c in extended.reserved_for))

    def _tree_key(self, gangs: list[Gang]) -> TreeKey | None:
        """The tree the job's topology requirement is written against, else the first one the
        snapshot defines."""
        for g in gangs:
            for ask in g.asks:
                key = ask.tree_key(self.snapshot)
                if key is not None:
                    return key
        return dialects.default_tree(self.snapshot)

    def _path(self, node: str, gangs: list[Gang]) -> tuple[str, ...]:
        key = self._tree_key(gangs)
        n = self.cluster.node_index.get(node)
        if key is None or n is None:
            return (node,)
        tree = self.cluster.trees[key]
        above = _ancestors(tree, int(tree.parent[tree.node_domain[n]]), key.labelled)
        # A level of single nodes (a hostname key) names each domain after its node: said once.
        return (*(above[:-1] if above and above[-1] == node else above), node)

    def _topology(self, gangs: list[Gang]) -> TopologyFacts | None:
        for g in gangs:
            if g.asks:
                return g.asks[0].facts()
        return None


def _without_consumers_of(devices: Devices, kept: list[Pod]) -> Devices:
    """``devices`` as they would be once every pod but ``kept`` is gone: a claim reserved for pods
    only, none of them kept, is deallocated (kube-controller-manager's resourceclaim controller
    drops a gone pod from ``reservedFor`` and frees a claim reserved for nobody), so the devices
    other pods hold count as free, as their CPU does."""
    uids = {p.uid for p in kept if p.uid}
    names = {p.key for p in kept}
    out = devices.copy()
    for key, c in devices.claims.items():
        if c.allocation is None or not c.reserved_for or any(
                r.resource != "pods" or r.uid in uids or f"{c.namespace}/{r.name}" in names for r in c.reserved_for):
            continue
        out.claims[key] = replace(c, allocation=None, reserved_for=())
    return out


def _phases(pods: list[Pod]) -> str:
    """How finished ``pods`` ended: "Succeeded" when all did alike, else "3 Succeeded, 1 Failed"."""
    counts = {phase: sum(1 for p in pods if p.phase == phase) for phase in ("Succeeded", "Failed")}
    said = [f"{n} {phase}" for phase, n in counts.items() if n]
    return said[0].split(" ", 1)[1] if len(said) == 1 else ", ".join(said)


def _ancestors(tree: TopologyTree, d: int, labelled: bool) -> list[str]:
    out: list[str] = []
    while d > 0:
        out.append(tree.label(d) if labelled else tree.name(d))
        d = int(tree.parent[d])
    return out[::-1]
