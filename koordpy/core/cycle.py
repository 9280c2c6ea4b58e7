"""One scheduling cycle over the whole queue, named after kube-scheduler's extension points.

``schedule(snapshot, state, now)`` takes the jobs in queue order and, for each, runs
pre_filter (gang completeness, timeouts, config errors), filter/score/reserve (placement
on a Statement), permit (the GangGroup's minimums) and bind, or post_filter when the job
does not fit (preemption, held back while the job's preemption delay runs). Later jobs see the
moves of earlier ones. It returns decisions only.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from koordpy.api.errors import ParseError
from koordpy.api.objects import Pod
from koordpy.api.podgroup import ANN_TIMEOUT
from koordpy.core import dialects, gangrule, peers, stale
from koordpy.core.deallocation import deallocations, workload_group
from koordpy.core.decisions import (
    Annotate,
    Bind,
    CycleResult,
    Deallocate,
    Decision,
    DeleteClaim,
    Event,
    EventReason,
    Evict,
    GangStatus,
    GangStatusUpdate,
    Nominate,
    Preempt,
    SetPodScheduledFalse,
)
from koordpy.core.gang import Job, claims
from koordpy.core.messages import JOB_ERROR_PREFIX as JOB_ERROR_PREFIX
from koordpy.core.messages import post_filter_said, released, render
from koordpy.core.model import Gang
from koordpy.core.nomination import Nominations
from koordpy.core.owners import OWNER_GRACE_SECONDS, missing_owner
from koordpy.core.placement import Placer, rank_order
from koordpy.core.preemption import Plan, Preemptor
from koordpy.core.queue import Round
from koordpy.core.refusals import job_refusal
from koordpy.core.requirement import Requirement
from koordpy.core.reserve import Reserve
from koordpy.core.runtime import lone_delay
from koordpy.core.skipping import skipping
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from koordpy.core.txn import Txn
from koordpy.core.verdicts import (
    AssignmentUnmet,
    BeyondMinimum,
    Code,
    Failure,
    GangStale,
    GangTimeoutEvent,
    GatedMembers,
    GroupUnschedulable,
    JobFailed,
    MarkedTimedOut,
    MemberRejected,
    MinResourcesShort,
    OwnerMissing,
    PeerNotBack,
    PeerUndeclared,
    PreemptionDelayed,
    ReplacementsDoNotFit,
    StaleEvicted,
    Text,
    TimedOut,
    TooFewMembers,
    Verdict,
    WaitingForMembers,
    Wake,
    WithPreemption,
    condition_reason,
)
from koordpy.core.view import View


def assignment_named(failure: Failure, plan: Plan | None = None) -> Failure:
    """``failure``, naming the topology assignment of the controller in front of koordpy that admitted
    its pod (Kueue's, written into the pod's nodeSelector), when there is one: the pod waits for room
    in that domain or for the controller to assign another, and its users read Kueue's terms. Not
    while ``plan`` makes room (victims evicted or terminating for it: the assignment will be met)."""
    said = dialects.admitted_by(failure.pod)
    if said is None or not said.assigned or isinstance(failure.why, AssignmentUnmet):
        return failure
    if plan is not None and plan.outcome != "none":
        return failure
    return replace(failure, why=AssignmentUnmet(failure.why, said.by, said.assigned, said.what, said.recovers))


class Cycle:
    def __init__(self, snapshot: Snapshot, state: SchedulerState, now: float, view: View | None = None,
                 txn: Txn | None = None) -> None:
        """``view``: a view of its own instead of the state's standing one (a dry run's); ``txn``: a
        transaction open on ``state`` that every job of this cycle records into (a dry run's, which
        it discards), instead of one per job that is kept unless the job raises."""
        self.snapshot = snapshot
        self.state = state
        self.now = now
        self.view = view if view is not None else state.standing_view()
        self.cluster = self.view.refresh(snapshot, state, now)
        self.txn = txn
        self.result = CycleResult()
        if txn is not None:
            txn.attach(self.cluster)
            txn.attach(self.result)
        assert self.view.filters is not None
        self.filters = self.view.filters
        self.placer = Placer(self.filters)
        self.reserve = Reserve(self.filters, self.placer)
        if self.filters.devices is not None:
            self.filters.devices.now = now
            self.filters.devices.gang_budget = snapshot.gang_search_seconds
        self.preemptor = Preemptor(self.cluster, self.placer, snapshot.priority_classes, self.view.member_of,
                                   self.view.groups, self.view.gangs, snapshot, now)
        self.preempted_jobs: set[str] = set()  # preemption is tried once per job and cycle
        self.deallocated: set[str] = set()  # claims given up by PostFilter this cycle
        self.released: dict[str, str] = {}  # job id -> what its PostFilter gave up, in words
        # Per job tried: the structured diagnosis of its failure and what preemption planned.
        self.diagnoses: dict[str, tuple[Failure | None, Plan | None]] = {}
        # Per job that lost members and cannot take their replacements: why (for ``koordpy explain``).
        self.replacements: dict[str, ReplacementsDoNotFit] = {}
        self.nominations = Nominations(self.cluster, state, self.view, self.filters, self.reserve, self.result)
        self.bound = self.result.bound  # what the jobs bound this cycle, pod -> node (read often)
        self.gangs: dict[str, Gang] = {}
        self.owner_waits: list[float] = []  # when pods waiting for their owner stop waiting
        # When preemption may go otherwise though nothing changes (``Plan.wake_at``): a victim's minimum
        # runtime or a job's preemption delay ends (also for a job not parked: members beyond a minimum).
        self.preemption_wakes: list[float] = []
        self.stale_ends: list[float] = []  # when stale gangs' graces end
        self.statuses: dict[str, GangStatus] = {}  # object -> the status this cycle decided for it

    # -- the cycle -----------------------------------------------------------------------

    def run(self) -> CycleResult:
        view = self.view
        gangs = self.gangs = view.gangs
        if view.gangs_gone or view.regrouped:
            # A wait belongs to a GangGroup as it stood: one that is gone, or no longer stands as
            # that group, has nothing to wait for (its gangs' reservations start a wait of their new
            # group when it is tried). Forgetting them also keeps a long run's memory bounded.
            self.state.forget_waits(view.groups.values())
            self.state.forget_told(gangs)
        if self.state.told_settings:  # rare: a bad minimum runtime or delay was told
            self.state.forget_settings({k for k, _ in self.state.told_settings if k in gangs or k in view.by_key})
        changed = set(view.dirty)  # the gangs the refresh rebuilt
        queue = view.queue
        queue.new_cycle()
        left: set[str] = set()  # the gangs of the jobs left for a later cycle
        jobs = queue.jobs()
        round_ = Round(queue, self.snapshot.pods_per_cycle, jobs)
        for at, job in enumerate(jobs):
            outside = round_.outside(job)
            beyond = round_.beyond(outside)
            parked = None if beyond else queue.still_parked(job, self.now)
            if parked is not None:  # nothing it depends on changed (or it backs off): it would fail the same way
                self.result.kept.append(parked.pending)
                if job.id in queue.backing_off:
                    self.result.queues["backoff"] += len(parked.pending)
                else:
                    self.result.queues["unschedulable"] += len(parked.pending)
                continue
            if outside or beyond:
                if beyond:
                    round_.stop(at)
                left |= self._deferred(job, beyond)
                continue
            self._tried(job, round_)
        round_.close()
        view.dirty -= left  # their statuses are written when they are tried
        self._podgroup_statuses(gangs, view.dirty)
        self._stale_gangs(changed, left)  # after the statuses: a stale gang's condition goes on top of theirs
        self.result.next_deadline = self._next_deadline()
        return self.result

    def _deferred(self, job: Job, beyond: bool) -> set[str]:
        """A job left for a later cycle of the round: not tried, so neither parked nor backed off, and
        nothing is written for it. Returns its gangs (and its pods' gangs), whose statuses wait too."""
        queue, view = self.view.queue, self.view
        self.result.deferred += len(job.pods)
        was = queue.parked.get(job.id)
        # A parked job not looked at stays in the unschedulable queue until its turn.
        self.result.queues["unschedulable" if beyond and was is not None else "active"] += len(job.pods)
        if was is not None:  # what its pods were told stands until it is tried
            self.result.kept.append(was.pending)
        return {g.key for g in job.gangs} | {view.member_of[p.key] for p in job.pods if p.key in view.member_of}

    def _tried(self, job: Job, round_: Round) -> None:
        """The job tried (``_isolated``), counted towards the round's cap and, when it waits, parked
        with what could let it go on."""
        queue, view = self.view.queue, self.view
        self.result.queues["active"] += len(job.pods)
        before = queue.parked.pop(job.id, None)
        view.dirty.update(g.key for g in job.gangs)
        member_of = view.member_of
        view.dirty.update(member_of[k] for k in job.keys if k in member_of)
        reserved = self.state.reserved
        held = round_.held(job, reserved)
        wake = self._isolated(job)
        round_.count(job, held, self.bound, reserved)
        if wake is not None:
            since = self.state.wait_since.get(job.group)
            deadline = None if since is None else since + self._wait_limit(job)
            plan = self.diagnoses.get(job.id, (None, None))[1]
            if plan is not None and plan.wake_at is not None:  # a delay or a victim's minimum runtime ends
                deadline = plan.wake_at if deadline is None else min(deadline, plan.wake_at)
            queue.park(job, {p.key: self.result.waiting[p.key] for p in job.pods if p.key in self.result.waiting},
                       deadline, self.state.reserved,
                       wake, self.now, 1 if before is None or wake == "changed" else before.attempts + 1,
                       self.preemptor.terminating_on_nominated(job) if wake == "victims" else ())

    def _next_deadline(self) -> float | None:
        """When the next cycle is due though nothing changes: a gang's wait ends, a backoff ends, an
        owner's grace ends, a stale gang's grace ends, a gang's member stops counting (``View.loss_due``),
        or at once when jobs were left over."""
        deadlines = [since + gangrule.wait_limit(gid, self.gangs, self.view.wait_limits)
                     for gid, since in self.state.wait_since.items()]
        deadlines += self.view.queue.backing_off.values()  # woken while backing off: tried when the backoff ends
        deadlines += self.owner_waits
        deadlines += self.stale_ends
        deadlines += self.view.loss_due.values()  # a member stops counting: its gang is looked at again
        deadlines += self.preemption_wakes
        # Parked jobs woken at a time: a preemption delay or a victim's minimum runtime ends.
        deadlines += [p.deadline for p in self.view.queue.parked.values() if p.deadline is not None
                      and p.deadline > self.now]
        if self.result.deferred:
            deadlines.append(self.now)  # the jobs left over go next, without waiting for a change
        return min(deadlines, default=None)

    def _isolated(self, job: Job) -> Wake | None:
        """Runs one job so that a bug it triggers costs only that job: everything it changed is
        undone, its pods say why they wait, and the rest of the queue is scheduled. Returns, for a
        job that waits, what could let it go on (it is parked until then), else None.

        The job's changes are one transaction, rolled back whole if it raises: to the cluster, the
        scheduler state, the volume and device rules (what Reserve took for its pods), and what it
        added to this cycle's result (decisions, binds, messages, gangs placed or timed out)."""
        txn = self.txn if self.txn is not None else Txn(self.cluster, self.state, self.result)
        savepoint = txn.savepoint()
        if self.filters.devices is not None:
            self.filters.devices.new_job()
        try:
            return self._job(job)
        except Exception as exc:  # a job's bug must not stop the queue
            txn.rollback(savepoint)
            self.result.job_errors[job.id] = "".join(traceback.format_exception(exc))
            message = render(JobFailed(type(exc).__name__, str(exc)))
            for pod in job.pods:
                self._say(pod, message)
            return None
        finally:
            if txn is not self.txn:
                txn.close()  # kept: the next job starts a transaction of its own

    def _job(self, job: Job, preempt: bool = True) -> Wake | None:
        """One job, gang or lone pod (a job of one): pre_filter, then filter/score/reserve on a
        Statement, permit and bind, or post_filter (preemption) when it does not fit."""
        rejected = self.pre_filter(job)
        if rejected is not None:
            return self._rejected(job, rejected)
        pods = self._pending(job)
        req = self.requirement(job, pods) if job.is_gang else None
        if job.is_gang:
            self._report_dropped_limits(job, req.dropped if req is not None else ())
        stmt = Statement(self.cluster)
        # The room nominated for the job's own pods is theirs: lifted while they are placed again.
        for pod in pods:
            if pod.nominated_node_name and self.cluster.is_held(key := pod.key):
                stmt.evict(key)
        reserved = self.state.reserved
        if reserved:  # a NonStrict gang's held members take their devices before the others are placed
            self.reserve.held(job.pods, reserved, stmt)
        lifted = stmt.savepoint()
        failure, skipped = self._filter(job, pods, req, stmt, lifted)
        if self.permit(job, stmt.placed):
            return self._permitted(job, pods, req, stmt, failure, skipped, preempt)
        return self._waits(job, pods, req, stmt, lifted, failure, skipped, preempt)

    def _rejected(self, job: Job, rejected: Verdict) -> Wake | None:
        """pre_filter's verdict said to every pod (a timed-out gang released first)."""
        reason, wake = rejected.reason, rejected.wake
        if rejected.code is Code.TIMED_OUT:
            reason = self._time_out(job, self._wait_limit(job))
            self.result.gang_timed_out(job.id)
        message, condition = render(reason), condition_reason(reason)
        for pod in job.pods:
            self._say(pod, message, condition)
        return wake

    def _pending(self, job: Job) -> list[Pod]:
        """The job's pods to place (not those a NonStrict gang holds room for), a gang's in rank order."""
        reserved = self.state.reserved
        if reserved:
            pending = [p for k, p in zip(job.keys, job.pods, strict=True) if k not in reserved]
            return rank_order(pending) if job.is_gang else pending
        # Every pod is pending: the job's own indexes give the order.
        return rank_order(job.pods, job.indexes) if job.is_gang else list(job.pods)

    def _filter(self, job: Job, pods: list[Pod], req: Requirement | None, stmt: Statement,
                lifted: int) -> tuple[Failure | None, dict[str, Failure]]:
        """filter / score / reserve: the job placed on ``stmt`` (on its nominated nodes, else by
        placement), or as much of a gang as may bind; the failure, and the members passed over that
        fit nowhere (``Gang.skips``)."""
        failure = None
        skipped: dict[str, Failure] = {}  # members that fit nowhere, passed over (``Gang.skips``)
        if pods and not self.nominations.place_on_nominated(pods, stmt):
            failure = self._place(pods, req, stmt)
        strict = not job.is_gang or gangrule.strict(job, self.state.satisfied)
        if failure and job.is_gang and gangrule.skips(job) and not (req and (req.subgroups or req.failure)):
            # kube-scheduler's group cycle: the members that fit, one by one, each given the ones
            # before it; the first that fits nowhere speaks for the job if it cannot bind.
            stmt.rollback(lifted)
            skipped = self._skipping(job, pods, req, stmt, lifted)
            failure = next(iter(skipped.values()), failure)
        elif failure and job.is_gang and (strict or req) and not (req and req.subgroups):
            # The attempt was all-or-nothing for every pending member, but the gang may need
            # fewer: the longest rank-order prefix that still meets the minimums goes instead.
            # (Sub-groups are placed whole or not at all already, so what is placed stands.)
            stmt.rollback(lifted)
            self._largest_prefix(job, pods, req, stmt, lifted)
        return failure, skipped

    def _permitted(self, job: Job, pods: list[Pod], req: Requirement | None, stmt: Statement,
                   failure: Failure | None, skipped: dict[str, Failure], preempt: bool) -> Wake | None:
        """permit passed: bind what is placed (a reserved member where it is held); members beyond the
        minimum that did not fit say so, and may preempt when nothing was placed now."""
        placed = stmt.commit()
        for key in job.keys if self.state.reserved else ():
            held_on = self.state.release(key)  # a reserved member binds where it is held
            if held_on is not None:
                placed[key] = self.cluster.node_index[held_on]
        self.state.end_wait(job.group)
        self.state.mark_satisfied(g.key for g in job.gangs)
        self.bind(placed)
        if job.is_gang and placed:
            self.result.gang_placed(job.id)
        if req is not None and req.notes:
            self._report_ignored_layers(job, req.notes)
        if failure and not placed and preempt:
            # Nothing placed, yet the gang's minimum holds (its members run): the members beyond
            # it are pods like any other, which may preempt, as kube-scheduler's PostFilter
            # does for them, inside the domain the running members keep (``req.anchor``).
            # (When some were placed now, the rest try again next cycle, anchored to them.)
            wanting, why = self._preemptible(job, pods, failure, skipped)
            plan = self.post_filter(job, wanting, req, why, Statement(self.cluster))
            if self._follow(job, failure, plan):
                return self._job(job, preempt=False)
            if plan is not None and plan.outcome == "nominated":
                self._reject(job, failure, plan, skipped)
            else:
                self._leftovers(job, failure, plan.message if plan is not None else "", skipped, plan)
            return None
        if failure:  # members beyond the minimum that did not fit keep trying on their own
            self._leftovers(job, failure, skipped=skipped)
        return None

    def _waits(self, job: Job, pods: list[Pod], req: Requirement | None, stmt: Statement, lifted: int,
               failure: Failure | None, skipped: dict[str, Failure], preempt: bool) -> Wake | None:
        """permit failed: post_filter (preemption), then a NonStrict gang keeps what fits reserved while
        it waits; the members say why; returns what could let the job go on."""
        strict = not job.is_gang or gangrule.strict(job, self.state.satisfied)
        partial = [(op.pod, op.node, op.request) for op in stmt.ops() if op.kind == "assume"]
        stmt.rollback(lifted)
        plan = None
        if failure is not None and preempt:
            wanting, why = self._preemptible(job, pods, failure, skipped)
            plan = self.post_filter(job, wanting, req, why, stmt)  # discards the trial
        else:
            stmt.discard()
        if self._follow(job, failure, plan):
            return self._job(job, preempt=False)
        if not strict and not (plan is not None and plan.outcome == "nominated"):
            # NonStrict: what fits stays reserved while the GangGroup waits for the rest.
            for key, node, request in partial:
                if self.cluster.is_held(key):
                    stmt.evict(key)  # its nomination moves to the reservation: counted once, where it goes
                stmt.assume(key, node, request)
            for key, n in stmt.commit().items():
                self.state.reserve(key, self.cluster.nodes[n].name)
            if any(p.key in self.state.reserved for p in job.pods):
                self.state.start_wait(job.group, self.now)
        short = self._replacements_short(job, req, failure, plan)
        if short is not None and failure is not None:
            self._replacements_rejected(job, short, failure)
        else:
            self._reject(job, failure, plan, skipped)
        # A job with room nominated for it is tried every cycle until it binds there: the room it
        # waits for is counted as its own, so the freed-room test that wakes parked jobs cannot see it.
        # While the victims of its preemption still terminate there it cannot bind: it waits for them
        # to go (kube-scheduler's nominated pods wait for the victims' deletion events the same way),
        # rather than being placed again at every one of their watch events.
        if any(self.cluster.is_held(p.key) and p.key not in self.state.reserved for p in job.pods):
            return "victims" if plan is not None and plan.outcome == "waiting" else None
        return "room"

    def _follow(self, job: Job, failure: Failure | None, plan: Plan | None) -> bool:
        """What preemption planned, carried out; True when the job is to be placed again at once
        (only lower-priority nominations stood in the way: their room is taken back)."""
        self.diagnoses[job.id] = (assignment_named(failure, plan) if failure else None, plan)
        if plan is None:
            return False
        if plan.outcome == "nominated" and not plan.victims:
            self.nominations.release(plan.released)
            return True
        if plan.outcome == "nominated":
            self.nominations.carry_out(job, plan, failure)
        elif plan.outcome == "none":
            self.nominations.drop(job)
        return False

    def _gang_warning(self, gang: Gang, reason: str, message: str) -> None:
        """A Warning Event about a gang, on what declares it: its Volcano or scheduler-plugins
        PodGroup, else its first pod (an annotation gang has no object of its own)."""
        kind = dialects.gang_object(gang.key, self.snapshot)
        if kind is not None:
            key = gang.key
        elif gang.pods:
            kind, key = "Pod", gang.pods[0].key
        else:
            return
        self.result.decide(Event(kind, key, "Warning", reason, message))

    def _report_ignored_layers(self, job: Job, notes: tuple[str, ...]) -> None:
        """A job that binds has no pending message to carry the note, so an Event does (a job
        that waits carries it in its message instead, written only when it changes)."""
        for gang in job.gangs:
            self._gang_warning(gang, EventReason.TOPOLOGY_LAYER_IGNORED, "; ".join(notes))

    def _report_dropped_limits(self, job: Job, dropped: tuple[str, ...]) -> None:
        """An Event on the PodGroup (else the first pod) of the gang whose Volcano constraint had a
        limit dropped, saying which and why; once for as long as it stays the same, since a job is
        tried again every time the cluster changes."""
        message = "; ".join(dropped)
        # The requirement is the first asking gang's (``requirement``), and so are its dropped limits.
        asking = next((g for g in job.gangs if g.asks), None) if message else None
        for gang in job.gangs:
            if gang is not asking:
                self.state.untell(gang.key)
            elif self.state.tell(gang.key, message):
                self._gang_warning(gang, EventReason.TOPOLOGY_LIMIT_DROPPED, message)

    def _place(self, pods: list[Pod], req: Requirement | None, stmt: Statement) -> Failure | None:
        """Placement, then what holds for the members only together: their volumes, their devices
        (``koordpy.core.reserve``)."""
        mark = stmt.savepoint()
        failure = self.placer.place_job(pods, req, stmt)
        return failure if failure is not None else self.reserve.together(
            pods, req is not None, stmt, mark, regroup=req is None or not (req.subgroups or req.multiples))

    def requirement(self, job: Job, pods: list[Pod]) -> Requirement | None:
        """What the job asks of the topology, held to its running peers (``koordpy.core.peers``)."""
        return peers.requirement(job, pods, self.cluster, self.snapshot, self.state.reserved)

    def _largest_prefix(self, job: Job, pods: list[Pod], spec: Requirement | None,
                        stmt: Statement, base: int = 0) -> None:
        """Places the longest rank-order prefix of ``pods`` that fits and is at least what the
        gangs still need, or nothing. Fitting is monotone in the prefix length (fewer pods never
        need more room), so a binary search finds it in a logarithmic number of attempts."""
        lo, hi, best = max(1, gangrule.deficit(job, self.state.reserved, self.state.satisfied)), len(pods) - 1, 0
        while lo <= hi:
            mid = (lo + hi) // 2
            fits = self._place(pods[:mid], spec, stmt) is None
            stmt.rollback(base)
            if fits:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        if best and self._place(pods[:best], spec, stmt) is not None:
            stmt.rollback(base)  # not monotone after all (podCountMultiple): place nothing

    def _skipping(self, job: Job, pods: list[Pod], spec: Requirement | None, stmt: Statement,
                  base: int) -> dict[str, Failure]:
        """kube-scheduler's pod group cycle (``koordpy.core.skipping``): leaves placed on ``stmt`` the
        members that fit, each given the ones before it in rank order, when they meet the gangs'
        minimums, else nothing. Returns why each member passed over did not fit.

        With a scope (a topology key), kube-scheduler runs that cycle in each domain of the key and
        keeps the one that places the most pods (its PodGroupPodsCount score): so does this, over the
        domains the roomiest first, until no domain left could place more (of domains that place as
        many, the first). The members that do not fit in the domain kept are the ones passed over."""
        reserved, satisfied = self.state.reserved, self.state.satisfied
        kinds = self.placer.kinds(pods)
        kind = {p.key: i for i, same in enumerate(kinds) for p in same}
        # Kinds with no rules between pods: members placed later only take room from them.
        applies = self.filters.rules.applies
        settled = {i for i, same in enumerate(kinds) if not applies(same[0])}

        def attempt(some: list[Pod], keep: bool) -> Failure | None:
            failure = self._place(some, spec, stmt)
            if failure is not None or not keep:
                stmt.rollback(base)
            return failure

        def add(placed: list[Pod], pod: Pod) -> Failure | None:
            mark = stmt.savepoint()
            failure = self._place([pod], spec, stmt)
            if failure is None:
                failure = self.reserve.joins(pod, pods, stmt)  # the volume rules with the members before it
            if failure is not None:
                stmt.rollback(mark)
            return failure

        def enough(some: list[Pod]) -> bool:
            return gangrule.permit(job, {p.key for p in some}, reserved, satisfied)

        def search() -> tuple[list[Pod] | None, dict[str, Failure]]:
            return skipping(pods, enough, attempt, add, lambda: stmt.rollback(base), kind, settled)

        if spec is None or spec.scope is None:
            return search()[1]
        # A domain with room for fewer pods than the gangs still need cannot let them bind, nor can any
        # after it (the roomiest come first): a gang too large for every domain costs no attempt there.
        return self._per_domain(pods, spec, search, gangrule.deficit(job, reserved, satisfied), stmt, base)

    def _per_domain(self, pods: list[Pod], spec: Requirement,
                    search: Callable[[], tuple[list[Pod] | None, dict[str, Failure]]], need: int,
                    stmt: Statement, base: int) -> dict[str, Failure]:
        """``search`` (the group cycle) in each domain of ``spec``'s scope, the roomiest first, until no
        domain left could place more; the one that placed the most is searched again and kept (of
        domains that place as many, the first). Returns why each member passed over did not fit."""
        saved = self.placer.only
        best: tuple[int, npt.NDArray[np.bool_]] | None = None  # the most pods a domain placed, and its nodes
        said: dict[str, Failure] | None = None  # the roomiest domain's reasons, when no domain does
        try:
            for at, (region, room) in enumerate(self.placer.scope_domains(pods, spec)):
                if room < need or (best is not None and room <= best[0]) or at >= self.placer.MAX_EXACT_TRIES:
                    break  # the domains left cannot place more than the one found (or the bound is reached)
                self.placer.only = region if saved is None else region & saved
                placed, skipped = search()
                stmt.rollback(base)
                said = skipped if said is None else said
                if placed is not None and (best is None or len(placed) > best[0]):
                    best = (len(placed), self.placer.only)
                    if len(placed) == len(pods):
                        break
            if best is None:
                return said or {}
            # The search in the domain kept, again: it places the same members the same way.
            self.placer.only = best[1]
            return search()[1]
        finally:
            self.placer.only = saved

    def _preemptible(self, job: Job, pods: list[Pod], failure: Failure,
                     skipped: dict[str, Failure]) -> tuple[list[Pod], Failure]:
        """The pods preemption makes room for, and the failure it answers: all of them, or, in a gang
        that passes over members that fit nowhere (``Gang.skips``), the others, when some member's own
        node filters (its selector, affinity, taints) leave it no node at all and the rest can still
        meet the gangs' minimums: kube-scheduler's group PostFilter runs the same cycle, which passes
        over that member again, and evicting for it would free room no one can use."""
        if not skipped:
            return pods, failure
        static = self.filters.static
        rest = [p for p in pods if bool(static(p, True).mask.any())]
        if len(rest) == len(pods) or not rest or not gangrule.permit(job, {p.key for p in rest}, self.state.reserved,
                                                                        self.state.satisfied):
            return pods, failure
        keys = {p.key for p in rest}
        return rest, next((f for k, f in skipped.items() if k in keys), failure)

    def _leftovers(self, job: Job, failure: Failure, said: str = "",
                   skipped: dict[str, Failure] | None = None, plan: Plan | None = None) -> None:
        """After a GangGroup met its minimums, the members that did not fit say so (with what
        preemption did for them, ``said``); they are no longer held to the gang (once satisfied)
        and keep trying. A member passed over (``skipped``) says why it fitted nowhere; in
        kube-scheduler's group cycle (``gangrule.skips``) every member says the failure itself, as
        kube-scheduler words each pod's, with no GangGroup of Koordinator's around it."""
        failure = assignment_named(failure, plan)
        bound, cond = sum(1 for p in job.pods if p.key in self.bound), condition_reason(failure.why)
        said = post_filter_said(self.released.get(job.id, ""), said)
        own = render(WithPreemption(failure.why, said)) if said else render(failure.why)
        others = own if gangrule.skips(job) else render(BeyondMinimum(job.id, bound, len(job.pods), failure.why))
        for pod in job.pods:
            if pod.key in self.bound:
                continue
            if pod.key == failure.pod.key:
                self._say(pod, own, cond)
            elif skipped and pod.key in skipped:
                why = assignment_named(skipped[pod.key], plan).why
                self._say(pod, render(WithPreemption(why, said)) if said else render(why), condition_reason(why))
            else:
                self._say(pod, others, cond)

    def _replacements_short(self, job: Job, req: Requirement | None, failure: Failure | None,
                            plan: Plan | None) -> ReplacementsDoNotFit | None:
        """Why a gang that lost members (``gangrule.short``, with lost members still seen, or having
        met its minimum before) cannot take its replacements: they do not fit together in its
        live members' domain (``req.anchor``, else anywhere) and preemption finds no room there
        either (or may not run). None otherwise: a gang that never ran says what any gang says."""
        if failure is None or (plan is not None and plan.outcome != "none"):
            return None
        satisfied = self.state.satisfied
        gang = next((g for g in job.gangs if gangrule.replacing(g, satisfied)), None)
        if gang is None or gang.config is None:
            return None
        missing = max(1, gang.config.min_member - gangrule.counted(gang, self.state.reserved))
        domain = ""
        if req is not None and req.anchor is not None:
            tree = self.cluster.trees[req.tree]
            domain = tree.label(req.anchor) if req.tree.labelled else tree.name(req.anchor)
        said = post_filter_said(self.released.get(job.id, ""), plan.message if plan is not None else "")
        return ReplacementsDoNotFit(gang.key, domain, missing, assignment_named(failure).why, said)

    def _replacements_rejected(self, job: Job, short: ReplacementsDoNotFit, failure: Failure) -> None:
        """Every pending member of the job says why the replacements cannot be taken, and a Warning
        Event on the gang says it once for as long as it stays the same (the pods' message carries it)."""
        self.replacements[job.id] = short
        message, cond = render(short), condition_reason(failure.why)
        pending = [p for p in job.pods if p.key not in self.bound]
        if any(p.unschedulable_message != message for p in pending):
            gang = next(g for g in job.gangs if g.key == short.gang)
            self._gang_warning(gang, EventReason.REPLACEMENTS_DO_NOT_FIT, message)
        for pod in pending:
            self._say(pod, message, cond)

    def _reject(self, job: Job, failure: Failure | None, plan: Plan | None = None,
                skipped: dict[str, Failure] | None = None) -> None:
        """The member that failed carries the reason (and what preemption did), as does each member
        passed over (``skipped``); the others quote it in the GangGroup's words, or, in kube-scheduler's
        group cycle (``gangrule.skips``), in kube-scheduler's ("pod group ... is unschedulable")."""
        failure = assignment_named(failure, plan) if failure else None
        already = sum(1 for p in job.pods if p.key in self.state.reserved)
        said = post_filter_said(self.released.get(job.id, ""), plan.message if plan is not None else "")
        cond = condition_reason(failure.why) if failure else "Unschedulable"
        if failure:
            own = render(WithPreemption(failure.why, said))
            others = render(GroupUnschedulable(job.id, failure.pod.key, failure.why, said) if gangrule.skips(job)
                            else MemberRejected(job.id, failure.pod.key, failure.why, already, said))
        else:
            own = others = render(WaitingForMembers(job.id, gangrule.counts(job, self.state.reserved), already))
        for pod in job.pods:
            if pod.key in self.bound:
                continue
            if failure and pod.key == failure.pod.key:
                self._say(pod, own, cond)
            elif skipped and pod.key in skipped:
                why = assignment_named(skipped[pod.key], plan).why
                self._say(pod, render(WithPreemption(why, said)), condition_reason(why))
            else:
                self._say(pod, others, cond)

    # -- extension points ----------------------------------------------------------------

    def pre_filter(self, job: Job) -> Verdict | None:
        """Why the job cannot be tried this cycle, and what could change that (see ``Queue.park``),
        or None to go on; a TIMED_OUT verdict when its wait expired. Changes nothing."""
        waiting = self._owner_wait(job)
        if waiting is not None:
            # Tried again every cycle; the cycle's deadline wakes it when the grace ends.
            return Verdict(Code.WAIT, waiting, None)
        unready = self._gangs_unready(job)
        if unready is None:
            unready = self._claims_unmet(job)
        if unready is not None:
            return unready
        short = self._min_resources_short(job)
        if short:
            return Verdict(Code.UNSCHEDULABLE, short, "any-room")
        since = self.state.wait_since.get(job.group)
        if since is not None:
            limit = self._wait_limit(job)
            if gangrule.expired(since, limit, self.now):
                # The caller releases what the job holds (and counts it then): pre_filter only judges.
                return Verdict(Code.TIMED_OUT, TimedOut(job.id, limit), None)
        # After the timeout: members a NonStrict gang holds room for are still released in time.
        refused = job_refusal(job.id, job.pods, job.is_gang, self.snapshot)
        if refused is not None:
            # The fields are immutable: only a new pod (a change) can go on; but a PodGroup the pods name
            # may appear or change, which is no change of the pods: such a job is looked at every cycle.
            return Verdict(Code.UNRESOLVABLE, refused,
                           None if any(dialects.names_objects(p) for p in job.pods) else "changed")
        return None

    def _gangs_unready(self, job: Job) -> Verdict | None:
        """pre_filter's checks of the job's own gangs: an error, a member index that does not parse, a
        gang marked timed out, too few members, too many gated."""
        for gang in job.gangs:
            if gang.error:
                return Verdict(Code.UNRESOLVABLE, Text(gang.error), "changed")
        if job.is_gang:
            try:
                job.indexes  # noqa: B018 - parsed (and kept for the rank order), or the error said
            except ParseError as exc:
                return Verdict(Code.UNRESOLVABLE, Text(str(exc)), "changed")
        for gang in job.gangs:
            if gang.timed_out:
                return Verdict(Code.UNRESOLVABLE, MarkedTimedOut(gang.key, ANN_TIMEOUT), "changed")
        for gang in job.gangs:
            cfg = gang.config
            assert cfg is not None
            if gangrule.too_few(gang):
                return Verdict(Code.WAIT, TooFewMembers(gang.key, len(gang.pods) - len(gang.lost), cfg.min_member,
                                                        dialects.declared_by(gang.key, self.snapshot),
                                                        gang.parts is not None), "changed")
            gated = sum(1 for p in gang.pods if p.scheduling_gates and self.snapshot.gated(p))
            if gangrule.gated_short(gang, gated):
                # Removing a gate changes the pod, which wakes the job.
                return Verdict(Code.WAIT, GatedMembers(gang.key, gated, len(gang.pods), cfg.min_member), "changed")
        return None

    def _claims_unmet(self, job: Job) -> Verdict | None:
        """pre_filter's check of the gangs the job's gangs name outside its GangGroup: each declared,
        and at its minimum."""
        for gang in job.gangs:
            for other in claims(gang):
                if other in job.group:
                    continue
                peer = self.gangs.get(other)
                # Another gang decides these, so they are asked again every cycle (never parked).
                if peer is None or peer.config is None:
                    return Verdict(Code.UNRESOLVABLE,
                                   PeerUndeclared(gang.key, other, peer.error if peer is not None else None), None)
                if not gangrule.has_minimum(peer, self.state.satisfied):
                    elsewhere = other.split("/")[0] != gang.key.split("/")[0]
                    return Verdict(Code.WAIT, PeerNotBack(gang.key, other, elsewhere), None)
        return None

    def _owner_wait(self, job: Job) -> OwnerMissing | None:
        """Why the job waits for a pod's owner, while a pod names an owner koordpy reads topology
        from that it has not seen and the pod's grace (``OWNER_GRACE_SECONDS`` from its creation)
        runs: placed now, the pod would ignore whatever constraint that owner declares."""
        for pod in job.pods:
            if pod.creation is None or self.now >= pod.creation + OWNER_GRACE_SECONDS:
                continue  # no grace left to wait out: the owner chain need not be walked
            ref = missing_owner(pod, self.snapshot.owners)
            until = pod.creation + OWNER_GRACE_SECONDS
            if ref is not None:
                self.owner_waits.append(until)
                return OwnerMissing(ref.kind, pod.namespace, ref.name, pod.key, OWNER_GRACE_SECONDS)
        return None

    def permit(self, job: Job, placed: dict[str, int]) -> bool:
        """kube-scheduler's Permit: the gang rule (``gangrule.permit``) with what is placed now."""
        return gangrule.permit(job, placed, self.state.reserved, self.state.satisfied)

    def bind(self, placed: dict[str, int]) -> None:
        """kube-scheduler's Bind (and the PreBind writes Reserve decided) for what the job placed."""
        self.reserve.bind(placed, self.view.by_key, self.snapshot.owners, self.result, self._say)

    def post_filter(self, job: Job, pods: list[Pod], req: Requirement | None, failure: Failure,
                    trial: Statement) -> Plan | None:
        """kube-scheduler's PostFilter: DynamicResources' first (an idle claim allocated where a pod can no
        longer go is given up, ``deallocation``), then preemption, once per job and cycle, for the pods
        still to place. Both see the cluster as ``trial`` leaves it (the job's own nominated room lifted),
        which is discarded before what they decided is added to the result: a trial's rollback undoes
        everything recorded in the job's transaction since it began, the result's additions too."""
        given: list[Deallocate] = []
        if self.filters.devices is not None:
            held = self.bound.keys() | self.state.reserved.keys()
            given = deallocations(self.filters.devices, self.filters, self.cluster, [
                p for p in job.pods if p.key not in held], self.deallocated, workload_group(job, held))
            if given:
                self.released[job.id] = released(any(d.group is None for d in given),
                                                 any(d.group is not None and not d.unreserve for d in given),
                                                 any(d.unreserve for d in given))
        plan = self._preempt(job, pods, req, failure)
        trial.discard()
        self.result.decide(*given)
        self._tell_problems()
        if plan is not None and plan.wake_at is not None:
            self.preemption_wakes.append(plan.wake_at)
        if plan is not None:
            self.result.preemption_attempt()
        return plan

    def _preempt(self, job: Job, pods: list[Pod], req: Requirement | None, failure: Failure) -> Plan | None:
        """Preemption's plan for ``pods``, once per job and cycle (None: not tried)."""
        if job.id in self.preempted_jobs or not self.snapshot.preemption:
            return None
        self.preempted_jobs.add(job.id)
        plan = self.preemptor.plan(job, pods, req, failure, self._place)
        if plan.outcome == "none" and job.is_gang and gangrule.strict(job, self.state.satisfied):
            # Room for the gang's minimum may be made where all of it cannot; once the minimum
            # holds, room for one member (kube-scheduler preempts for such pods one at a time).
            least = max(1, gangrule.deficit(job, self.state.reserved, self.state.satisfied))
            if least < len(pods):
                smaller = self.preemptor.plan(job, pods[:least], req, failure, self._place)
                if smaller.outcome != "none":
                    plan = smaller
        return self._delayed(job, plan)

    def _delayed(self, job: Job, plan: Plan) -> Plan:
        """The plan, or, while the job's preemption delay runs, a wait until it ends: what it would
        preempt (or take back) is left alone (KAI leaves such a job out of preemption; the free room
        it found it has taken already, before post_filter)."""
        if plan.outcome != "nominated":
            return plan
        # A job of one pod may be a member beyond its gang's met minimum: its gang's delay is its own.
        gangs = job.gangs or [g for p in job.pods[:1]
                              if (g := self.view.gangs.get(self.view.member_of.get(p.key, ""))) is not None
                              and g.config is not None]
        delays = [dialects.delay(g, self.snapshot) for g in gangs] or [
            lone_delay(p, self.snapshot.default_preemption_delay) for p in job.pods[:1]]
        keys = [g.key for g in gangs] or [p.key for p in job.pods[:1]]
        for key, delay in zip(keys, delays, strict=True):
            if delay.delay.problem:
                self.preemptor.problems[key, "delay"] = delay.delay.problem
        timed = [(ends, d) for d in delays if (ends := d.ends) is not None]
        if not timed:
            return plan
        ends, delay = max(timed, key=lambda t: t[0])
        if ends <= self.now:
            return plan
        said = PreemptionDelayed(ends - self.now, ends, float(delay.delay.seconds or 0.0), delay.delay.where)
        return Plan("none", render(said), wake_at=ends)

    def _tell_problems(self) -> None:
        """Minimum runtimes and delays preemption read that cannot be used as written: a Warning Event
        each, on the gang's object (else its first pod) or the lone pod (after the trial is discarded:
        it would take them back), once for as long as it stays the same (it is read every time a job
        preempts)."""
        problems = self.preemptor.problems
        while problems:
            (key, which), message = problems.popitem()
            if not self.state.tell_setting(key, which, message):
                continue
            gang = self.view.gangs.get(key)
            if gang is not None:
                self._gang_warning(gang, EventReason.INVALID_PREEMPTION_SETTING, message)
            else:
                self.result.decide(Event("Pod", key, "Warning", EventReason.INVALID_PREEMPTION_SETTING, message))

    def _say(self, pod: Pod, message: str, condition: str = "Unschedulable") -> None:
        self.result.wait(pod.key, message)
        if pod.unschedulable_message != message:
            self.result.decide(SetPodScheduledFalse(pod.key, message, condition),
                               Event("Pod", pod.key, "Warning", EventReason.FAILED_SCHEDULING, message))
        left = self.view.devices.leftover(pod) if self.view.devices is not None else None
        if left is not None:  # kube-scheduler's PostFilter deletes what a failed binding left
            self.result.decide(DeleteClaim(left.key, left.uid))

    # -- helpers -------------------------------------------------------------------------

    def _min_resources_short(self, job: Job) -> MinResourcesShort | None:
        """A PodGroup's minResources must be free somewhere in the cluster before its pods are tried."""
        free = np.maximum(self.cluster.free(), 0).sum(axis=0)
        for gang in job.gangs:
            wanted = dialects.min_resources(gang.key, self.snapshot)
            if wanted is None:
                continue
            for res, want in sorted(wanted.items()):
                have = int(free[self.cluster.res_index[res]]) if res in self.cluster.res_index else 0
                if have < want:
                    return MinResourcesShort(gang.key, res, want, have)
        return None

    def _time_out(self, job: Job, limit: float) -> TimedOut:
        for pod in job.pods:
            node = self.state.release(pod.key)
            if node is not None:
                self.cluster.count(pod.key, None)
        self.state.end_wait(job.group)
        for gang in job.gangs:
            for pod in gang.pods:
                if not pod.node_name:
                    self.result.decide(Annotate(pod.key, ANN_TIMEOUT, "true"))
            kind = dialects.timeout_object(gang.key, self.snapshot)
            if kind is not None:
                self.result.decide(Event(kind, gang.key, "Warning", EventReason.GANG_TIMEOUT,
                                         render(GangTimeoutEvent(limit))))
        return TimedOut(job.id, limit, gangrule.counts(job, self.state.reserved))

    def _wait_limit(self, job: Job) -> float:
        return gangrule.wait_limit(job.group, self.gangs, self.view.wait_limits)

    # -- stale gangs (koordpy.core.stale) ------------------------------------------------------

    def _stale_gangs(self, changed: set[str], left: set[str]) -> None:
        """After the jobs (their binds count) and the statuses: each gang the refresh rebuilt (its pods
        or object changed, or which of its members count did: a node changed, a toleration ran out)
        and each gang stale already is read again; stale ones keep their stale-since and are evicted
        once their grace ends, the others lose it. A cycle with nothing changed reads its stale gangs
        alone. ``left``: the gangs whose jobs the round left for the next cycle (not evicted before
        their replacements are tried)."""
        view, snapshot, state = self.view, self.snapshot, self.state
        names = snapshot.scheduler_names
        for key in sorted(changed.union(state.stale_since)):
            gang = view.gangs.get(key)
            reading = None
            # Only a gang of ours: another scheduler's is its own to keep whole (and its stale-since,
            # KAI's say, its own to write).
            ours = gang is not None and any(p.scheduler_name in names for p in gang.pods)
            if ours:
                assert gang is not None
                reading = stale.health(gang, self.bound)
            if gang is None or reading is None or not reading.stale:
                self._not_stale(key, gang, ours and key in changed)
            else:
                self._stale(gang, reading, key in changed, key in left)

    def _not_stale(self, key: str, gang: Gang | None, changed: bool) -> None:
        """Stale-since forgotten, and cleared where the gang's dialect keeps it: when this scheduler
        kept it, or (``changed``: a gang of ours that changed; a restart reads every gang once) when
        the gang's object or members still say it."""
        state = self.state
        was = state.clear_stale(key)
        if gang is None:
            state.cleared_seen(key)
            return
        if was is None and not changed:
            return
        said = dialects.stale_since(key, gang.pods, self.snapshot) if was is None else None
        if was is not None:
            self.result.decide(*dialects.stale_marks(key, gang.pods, None, self.snapshot, self.statuses))
        elif said is None:
            state.cleared_seen(key)
        elif stale.since_when(None, said, state.stale_cleared.get(key), self.now) != said:
            # Still what it said before this scheduler's clear, in flight: not written again each
            # time the gang changes until the cache sees it.
            return
        else:
            self.result.decide(*dialects.stale_marks(key, gang.pods, None, self.snapshot, self.statuses))

    def _stale(self, gang: Gang, reading: stale.Health, changed: bool, deferred: bool) -> None:
        key, snapshot, now = gang.key, self.snapshot, self.now
        had = self.state.stale_since.get(key)
        kept = dialects.stale_since(key, gang.pods, snapshot)
        ended = self.state.stale_cleared.get(key)
        since = stale.since_when(had, kept, ended, now)
        if ended is not None and (kept is None or kept >= ended + 1):
            self.state.cleared_seen(key)  # the object no longer says the clock that ended
        self.state.mark_stale(key, since)
        if had is None or changed:  # written once, and again when the gang changed (a member replaced)
            self.result.decide(*dialects.stale_marks(key, gang.pods, since, snapshot, self.statuses))
        grace, by = stale.grace(gang, snapshot)
        ends = stale.due(since, grace)
        if had is None and kept is None:  # it became stale now: told once
            said = stale.told(GangStale(key, since, reading.live, reading.minimum, ends, reading.parts,
                                        declared_by=dialects.declared_by(key, snapshot)), by)
            self._tell_gang(gang, EventReason.GANG_STALE, said)
        if ends is None:
            return
        if now < ends:
            self.stale_ends.append(ends)
            return
        if deferred:
            return  # its replacements are tried next cycle, at once (the round's cap left them)
        namespace = key.split("/", 1)[0] + "/"
        if any(k.startswith(namespace) for k in snapshot.invalid_pods):
            # A pod there that does not parse may be a member, running: what is read is not enough to
            # evict (it is reported as an object that does not parse; fixed, the gang is read again).
            return
        held = self.cluster.is_held  # nominated this very cycle: the pod object does not say it yet
        if reading.arriving or any(p.nominated_node_name or held(p.key) for p in gang.pods if not p.node_name):
            return  # replacements bind or hold room being made for them: woken by their change
        evicted = StaleEvicted(key, reading.live, reading.minimum, grace, reading.parts,
                               dialects.declared_by(key, snapshot))
        message = render(evicted)
        self.result.decide(*(Evict(pod, message, key) for pod in reading.evictable))
        self._tell_gang(gang, EventReason.STALE_GANG_EVICTED, evicted)

    def _tell_gang(self, gang: Gang, reason: EventReason, said: GangStale | StaleEvicted) -> None:
        """A Warning Event on the gang's object, or on its first member when it has none."""
        kind = dialects.gang_object(gang.key, self.snapshot)
        if kind is not None:
            self.result.decide(Event(kind, gang.key, "Warning", reason, render(said)))
        elif gang.pods:
            self.result.decide(Event("Pod", gang.pods[0].key, "Warning", reason, render(said)))

    def _podgroup_statuses(self, gangs: dict[str, Gang], dirty: set[str]) -> None:
        """Statuses of the PodGroups whose gang changed or was tried: the others stand as written."""
        for key in dirty:
            # Its finished pods too: the object's status counts them (succeeded, failed, a phase
            # that says the job is done), though they are no longer members to place.
            members = [*(gangs[key].pods if key in gangs else ()), *self.view.finished_in(key)]
            if not any(p.scheduler_name in self.snapshot.scheduler_names for p in members):
                # Another scheduler's group (koord-scheduler's, Volcano's), or one with no pods
                # yet: its status is not ours to write, and two writers would fight over it.
                continue
            waiting = self.result.waiting
            keys = gangs[key].keys if key in gangs else []
            pending = {k: waiting[k] for k in keys if k in waiting}
            if len(pending) < len(members) and self.result.kept:
                self._kept(key, keys, pending)
            for obj, status in dialects.statuses(key, members, self.bound, self.state.reserved, self.now,
                                                 self.snapshot, pending):
                self.result.decide(GangStatusUpdate(obj, status))
                self.statuses[obj] = status


    def _kept(self, gang: str, keys: Iterable[str], pending: dict[str, str]) -> None:
        """Adds to ``pending`` what each member of ``gang`` not tried this cycle was left with when its
        job was parked (what ``CycleResult.kept`` holds for it): found through that job, its
        GangGroup's or its own (a member beyond the minimum goes alone), not by merging every parked
        job's messages (with 6,000 pods parked that merge was most of a cycle's own work)."""
        parked, groups, bound = self.view.queue.parked, self.view.groups, self.bound
        job = parked.get(str(groups[gang])) if gang in groups else None
        for k in keys:
            if k in pending or k in bound:
                continue
            held = job if job is not None and k in job.pending else parked.get(k)
            if held is not None and k in held.pending:
                pending[k] = held.pending[k]


def schedule(snapshot: Snapshot, state: SchedulerState, now: float) -> CycleResult:
    """Runs one cycle; ``state`` is updated in place (reservations, waits, satisfied gangs)."""
    return Cycle(snapshot, state, now).run()


@dataclass
class DryRun:
    """What trying one job now would do, with nothing carried out."""

    job: str
    pods: list[str]
    decisions: list[Decision]  # binds, victims, nominations, messages it would write
    messages: dict[str, str]  # pod -> why it would wait
    failure: Failure | None  # the structured diagnosis, when it would not fit
    plan: Plan | None  # what preemption would do
    ahead: tuple[str, ...] = ()  # jobs tried before it (``in_queue``) that took room: bound, reserved or preempted
    replacements: ReplacementsDoNotFit | None = None  # it lost members and cannot take their replacements


def dry_run(snapshot: Snapshot, state: SchedulerState, now: float, pod_key: str,
            in_queue: bool = False) -> DryRun | None:
    """Tries the job of the pending pod ``pod_key`` against ``snapshot`` on copies: ``state`` is left
    as it was, nothing times out in it and nothing is written. As if it were next in the queue, or,
    ``in_queue``, after the jobs ahead of it have been tried as a cycle would try them first (so the
    room they take is not promised to it). None when the pod is not pending for this scheduler. For
    ``koordpy explain`` and tests."""
    # One transaction over the whole run, discarded at the end: every change it makes to ``state``
    # (and to the view of its own, which the standing view never sees) is undone.
    txn = Txn(state)
    try:
        cycle = Cycle(snapshot, state, now, view=View(), txn=txn)
        cycle.gangs = cycle.view.gangs
        job = None
        ahead: list[str] = []
        for candidate in cycle.view.queue.jobs():
            if any(p.key == pod_key for p in candidate.pods):
                job = candidate
                break
            if in_queue:
                mark, reserved = len(cycle.result.decisions), len(state.reserved)
                cycle._isolated(candidate)
                took = len(state.reserved) != reserved or any(
                    isinstance(d, Bind | Preempt) or (isinstance(d, Nominate) and d.node)
                    for d in cycle.result.decisions[mark:])
                if took:
                    ahead.append(candidate.id)
        if job is None:
            return None
        mark = len(cycle.result.decisions)
        cycle.placer.diagnose = True
        cycle._isolated(job)
        failure, plan = cycle.diagnoses.get(job.id, (None, None))
        mine = {p.key for p in job.pods}
        return DryRun(job.id, [p.key for p in job.pods], cycle.result.decisions[mark:],
                      {k: v for k, v in cycle.result.waiting.items() if k in mine}, failure, plan, tuple(ahead),
                      cycle.replacements.get(job.id))
    finally:
        txn.discard()
