"""post_filter: job-level, topology-aware preemption.

Belongs here: whether a job that cannot be placed may preempt (its policy, victims of an earlier
preemption still terminating on its nominated nodes, a failure that removing pods cannot
resolve), the dry run that removes every lower-priority pod (but those their job's minimum runtime
protects, and no more of a protected elastic gang than it holds above its minimum, ``_Shield``;
and those a controller in front of koordpy admitted, whose own preemption decides, ``_admitted_rows``),
the candidates (the domains of the job's hard scope, each node for a lone pod, else the cluster),
the reprieve of victims (with the rules between pods that keep a pod off one node), units of
victims evicted whole, which victims a PodDisruptionBudget would see evicted beyond its budget (put
back first, and ranked by), the ranking of candidates by what they disrupt, the verified plans
compared by what they really evict, and the plan that results: victims, nominations, and pending
pods whose nominated room goes. The dry run works on a Statement that is always discarded, so
nothing it tries outlives it. Does not belong here: carrying the plan out (the cycle turns it into
decisions, the shell writes them), a job's preemption delay (the cycle holds a plan back while it
runs).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod, PriorityClass
from koordpy.core import dialects, gangrule
from koordpy.core.cluster import Cluster
from koordpy.core.gang import GangGroupId, Job
from koordpy.core.messages import render
from koordpy.core.model import Gang
from koordpy.core.placement import Placer
from koordpy.core.requirement import Requirement, SearchScope
from koordpy.core.runtime import ANN_MIN_RUNTIME, Runtime, lone_runtime
from koordpy.core.snapshot import Snapshot
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.core.txn import Txn
from koordpy.core.verdicts import (
    AdmittedElsewhere,
    Failure,
    MinRuntimeProtected,
    NotEligible,
    NotHelpful,
    Preempting,
    RoomTakenBack,
)
from koordpy.kernels import node_offerslots, subtree_sums
from koordpy.kernels.offerslot import UNBOUNDED
from koordpy.kernels.preempt import (
    NO_VICTIM,
    candidate_costs,
    order_candidates,
    reclaimable_free,
    reprieve,
)

Place = Callable[[list[Pod], Requirement | None, Statement], Failure | None]
# What became of the attempt: "nominated" (victims chosen, the job waits for them on its nominated
# nodes), "waiting" (an earlier preemption of this job is still under way: its nominations stand),
# "none" (preemption cannot help or may not run: nominations the job holds are stale).
Outcome = Literal["nominated", "waiting", "none"]
MAX_VERIFIED = 8  # candidates placed for real, best first, before giving up
MAX_REFINED = 64  # victims put back one by one against the real placement, when the offerslot test is inexact
# Plans verified and priced for real before the cheapest is chosen. The pricing sees the rules between
# pods that keep a pod off one node (host ports, anti-affinity on the hostname), so the first plan is
# mostly as cheap as priced and the next candidate's price ends the search at once; only what the
# pricing cannot see (rules over wider domains, unlike pods, sub-groups) makes a plan dearer than
# priced and another worth verifying. Each such plan costs a few placements of the job and up to
# MAX_REFINED more for its reprieve: four bound a preemption to a few hundred.
MAX_COMPARED = 4
# Victims holding devices whose share of a job's device room (how many of its pods their devices keep
# off their node) the pricing counts, each one capacity count of one node: a few hundred allocations.
MAX_SHARES = 64


def preemption_policy(pod: Pod, classes: Mapping[str, PriorityClass]) -> str:
    """The pod's preemptionPolicy, or its PriorityClass's (the global default's when it names none)."""
    if pod.preemption_policy:
        return pod.preemption_policy
    pc = classes.get(pod.priority_class_name) if pod.priority_class_name else None
    if pc is None and not pod.priority_class_name:
        pc = next((c for c in classes.values() if c.global_default), None)
    return pc.preemption_policy if pc is not None else "PreemptLowerPriority"


@dataclass
class Plan:
    outcome: Outcome
    message: str  # "preemption: ...", said after the failure in the pods' condition
    victims: tuple[str, ...] = ()  # running pods to evict
    released: tuple[str, ...] = ()  # pending pods whose nominated or reserved room is taken
    nominated: dict[str, int] = field(default_factory=dict)  # the preemptor's pods -> node
    where: str = ""  # the candidate chosen, as messages name it
    # PodDisruptionBudgets the victims break: (namespace/name, victims beyond its budget), and the
    # pods of the candidate kept running because evicting them would have broken one.
    beyond: tuple[tuple[str, int], ...] = ()
    kept: tuple[str, ...] = ()
    # When trying again may go otherwise though nothing changes: victims' minimum runtime passes, the
    # job's preemption delay ends (None: only a change in the cluster can).
    wake_at: float | None = None


@dataclass(frozen=True)
class _Room:
    """What bounds a job's room by resources alone, for ``_Gauge``: the cluster's free room with no
    victim gone, the job's smallest request and the nodes some kind of its pods may use
    (``_loose``), the per-node cap of its pods, and its size."""

    free: npt.NDArray[np.int64]
    vec: npt.NDArray[np.int64]
    feasible: npt.NDArray[np.bool_]
    cap: npt.NDArray[np.int64]
    desired: int


class _Gauge:
    """A refine's bound by resources alone: per node of the candidate, how many of the job's pods
    its room takes with the victims still evicted gone (``_loose``'s count over its nodes and its
    smallest request, which never underestimates), capped where every pair of the job's pods repels
    (``_cap``: exact, ``PodRules.interplay``) and by the job's size, and their sum. A victim whose
    return would bring the sum under the job's size cannot return: no placement fits where
    resources alone do not, whatever the rules between pods (they only take options away, a pod
    the job's affinity wants included: it adds a match, never room). So the gauge skips only
    placements certain to fail, and the refine ends as it would have."""

    def __init__(self, room: _Room, only: npt.NDArray[np.bool_], v_node: npt.NDArray[np.int64],
                 v_req: npt.NDArray[np.int64]) -> None:
        self.reclaim = room.free.copy()
        np.add.at(self.reclaim, v_node, v_req)
        self.ok = room.feasible & only
        # Capped at the job's size, so the sum stays exact where it matters and never overflows.
        self.limit = np.minimum(room.cap, room.desired)
        self.slots = np.minimum(node_offerslots(self.reclaim, room.vec, self.ok), self.limit)
        self.total = int(self.slots.sum())
        self.room, self.v_node, self.v_req = room, v_node, v_req
        self.asked = room.vec > 0  # the resources the job asks for: the only ones that bound its count
        self.per = room.vec[self.asked]

    def _slots(self, n: int, free: npt.NDArray[np.int64]) -> int:
        if not self.ok[n]:
            return 0
        fit = int((np.maximum(free[self.asked], 0) // self.per).min()) if len(self.per) else UNBOUNDED
        return min(fit, int(self.limit[n]))

    def may_return(self, v: int) -> bool:
        """Whether the job could still fit by resources with victim ``v`` back."""
        n = int(self.v_node[v])
        after = self._slots(n, self.reclaim[n] - self.v_req[v])
        return self.total - int(self.slots[n]) + after >= self.room.desired

    def returned(self, v: int) -> None:
        n = int(self.v_node[v])
        self.reclaim[n] -= self.v_req[v]
        after = self._slots(n, self.reclaim[n])
        self.total += after - int(self.slots[n])
        self.slots[n] = after


@dataclass(frozen=True)
class _Shield:
    """The running pods their job's minimum runtime protects now, per index row (of ``size`` rows):
    until when (0: not protected); whether no plan may take it (``hard``); else its elastic gang as a
    number (-1: none), of which ``allow`` members above the gang's minimum may go; and the job it
    protects (``who``, into ``jobs``: its name, last start and minimum runtime)."""

    size: int
    until: npt.NDArray[np.float64]
    hard: npt.NDArray[np.bool_]
    gang: npt.NDArray[np.int64]
    allow: npt.NDArray[np.int64]
    who: npt.NDArray[np.int64]
    jobs: list[tuple[str, float, float]]

    def any(self, n: int) -> npt.NDArray[np.bool_]:
        """Protected in any way, over ``n`` rows (rows added since are not)."""
        out = np.zeros(n, dtype=np.bool_)
        out[:self.size] = self.until[:n] > 0
        return out

    def hard_of(self, n: int) -> npt.NDArray[np.bool_]:
        out = np.zeros(n, dtype=np.bool_)
        out[:self.size] = self.hard[:n]
        return out

    def within_minimums(self, attempt: npt.NDArray[np.bool_], rows: npt.NDArray[np.int64],
                        doomed: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """``attempt`` (over victim ``rows``, in reprieve order) with no protected elastic gang taken
        below its minimum: of its members chosen, those the reprieve would put back last go, up to
        what it holds above its minimum less its members an earlier job of the cycle preempts
        (``doomed``; KAI's scenario validator: the minimum may not go)."""
        if not len(self.allow):
            return attempt
        taken = self.gang[np.flatnonzero(doomed[:self.size])]
        allow = np.maximum(self.allow - np.bincount(taken[taken >= 0], minlength=len(self.allow)), 0)
        gang = np.full(len(rows), -1, dtype=np.int64)
        inside = rows < self.size
        gang[inside] = self.gang[rows[inside]]
        picked = np.flatnonzero(attempt & (gang >= 0))[::-1]  # last put back first
        if not len(picked):
            return attempt
        of = gang[picked]
        order = np.argsort(of, kind="stable")
        sorted_of = of[order]
        starts = np.flatnonzero(np.r_[True, sorted_of[1:] != sorted_of[:-1]])
        rank = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        out = attempt.copy()
        out[picked[order][rank >= allow[sorted_of]]] = False
        return out


@dataclass(frozen=True)
class _Costs:
    """What prices a set of victims (rows of the plan's victims, in reprieve order): priorities, jobs
    and gangs as numbers, which cost nothing (nominations), the unit each belongs to (-1: none) and
    each unit's bound members, each gang's bound members and minimum."""

    prio: npt.NDArray[np.int64]
    job: npt.NDArray[np.int64]
    gang: npt.NDArray[np.int64]
    counts: npt.NDArray[np.bool_]
    unit: npt.NDArray[np.int64]
    unit_size: npt.NDArray[np.int64]
    gang_bound: npt.NDArray[np.int64]
    gang_min: npt.NDArray[np.int64]

    def price(self, evicted: npt.NDArray[np.bool_], v_cand: npt.NDArray[np.int64],
              n_cand: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Per candidate: the highest victim priority, the jobs and the pods ``evicted`` disrupts."""
        by = np.lexsort((self.gang, self.job, v_cand))
        ev, cand, unit = evicted[by], v_cand[by], self.unit[by]
        weight = np.ones(len(by), dtype=np.int64)
        seen: set[tuple[int, int]] = set()
        for v in np.flatnonzero(unit >= 0).tolist():
            # A unit goes whole: its first victim in a candidate disrupts all its bound members, the rest nothing more.
            at = (int(cand[v]), int(unit[v]))
            first = bool(ev[v]) and at not in seen
            weight[v] = int(self.unit_size[unit[v]]) if first else 0
            if first:
                seen.add(at)
        return candidate_costs(ev, cand, self.prio[by], self.job[by], self.gang[by], self.counts[by], weight,
                               self.gang_bound, self.gang_min, n_cand)


@dataclass(frozen=True)
class _Breach:
    """A rank's victims against the PodDisruptionBudgets: ``beyond`` those that would break one,
    ``first`` those put back first (beyond, and every member of a unit one of whose members is),
    and the (candidate, victim, budget) pairs beyond the budget as the candidate counts them (a
    unit's members outside it are counted in it too)."""

    beyond: npt.NDArray[np.bool_]
    first: npt.NDArray[np.bool_]
    over_cand: npt.NDArray[np.int64]
    over_victim: npt.NDArray[np.int64]
    over_budget: npt.NDArray[np.int64]


def _order_key(broken: int, top: int, jobs: int, pods: int, pack: int, name: int) -> tuple[int, ...]:
    """``order_candidates``' order as a key: the fewest victims beyond their PodDisruptionBudgets,
    no victims, then the lowest highest victim priority, the fewest jobs, the fewest pods, the
    smallest offerslot, the name."""
    return (broken, 0 if jobs == 0 and top == NO_VICTIM else 1, top, jobs, pods, pack, name)


@dataclass
class _Candidates:
    """Candidates of one rank of the tree: disjoint node sets."""

    domains: list[int]  # tree domain per candidate (-1: a candidate of nodes without a domain)
    of_node: npt.NDArray[np.int64]  # node -> candidate, -1 outside all
    totals: npt.NDArray[np.int64]  # reclaimable offerslots per candidate
    names: list[str]
    name_rank: npt.NDArray[np.int64]


# Only the constructor is generated: a Preemptor (one cycle's) is compared by identity, as before.
@dataclass(eq=False, repr=False)
class Preemptor:
    cluster: Cluster
    placer: Placer
    classes: Mapping[str, PriorityClass]
    member_of: Mapping[str, str]
    groups: Mapping[str, GangGroupId]
    gangs: Mapping[str, Gang]
    # What the minimum runtimes are read from (their objects, the settings' default), and the time
    # they are measured at: without a snapshot no job is protected by one.
    snapshot: Snapshot | None = None
    now: float = 0.0
    # Why a minimum runtime (or, from the cycle, a preemption delay) a job's objects set is not used as
    # written, by gang (or pod) key and which setting: told by the cycle after the preemption that read it.
    problems: dict[tuple[str, str], str] = field(default_factory=dict, init=False)
    _shield: _Shield | None = field(default=None, init=False)
    _unshielded: bool = field(default=False, init=False)  # a dry run as if no job were protected
    # A dry run as if no pod were admitted by a controller in front of koordpy (``_admitted_rows``).
    _unadmitted: bool = field(default=False, init=False)
    _may_protect: bool | None = field(default=None, init=False)  # whether anything sets a minimum runtime
    _prio_of: dict[str, int] | None = field(default=None, init=False)
    _units_seen: bool | None = field(default=None, init=False)

    # -- eligibility -------------------------------------------------------------------------

    def policy(self, pod: Pod) -> str:
        """The pod's preemptionPolicy; its gang's when the object declaring the gang has one of its
        own (Kubernetes' PodGroup)."""
        gang = self.gangs.get(self.member_of.get(pod.key, ""))
        if gang is not None and gang.preemption_policy is not None:
            return gang.preemption_policy
        return preemption_policy(pod, self.classes)

    def _victim_priorities(self) -> npt.NDArray[np.int64]:
        """Per index row, the priority the pod has as a victim: its own, or its gang's when the
        gang's declaring object carries one (a PodGroup's priority is its members', also when
        they are victims)."""
        if self._prio_of is None:
            self._prio_of = {p.key: g.priority for g in self.gangs.values() if g.priority is not None
                             for p in g.pods if p.node_name}
        idx = self.cluster.index
        if not self._prio_of:
            return idx.prio
        prio = idx.prio.copy()
        for key, value in self._prio_of.items():
            row = idx.row.get(key)
            if row is not None:
                prio[row] = value
        return prio

    def _any_units(self) -> bool:
        """Whether some gang is evicted only in units (whole, or parts of it): asked once per preemptor."""
        if self._units_seen is None:
            self._units_seen = any(g.whole or g.units for g in self.gangs.values())
        return self._units_seen

    def _unit(self, key: str) -> tuple[Gang, str] | None:
        """The unit pod ``key`` is only ever evicted with (its gang, whole in disruptionMode all, or a
        part of it the gang names), as its gang and the unit's key; None: it goes alone."""
        gang = self.gangs.get(self.member_of.get(key, ""))
        unit = gang.unit(key) if gang is not None else None
        return None if unit is None or gang is None else (gang, unit)

    def _unit_rows(self, gang: Gang, unit: str) -> list[int]:
        """The index rows of a unit's running members, wherever they run."""
        idx = self.cluster.index
        rows = (idx.row.get(p.key) for p in gang.pods if p.node_name and gang.unit(p.key) == unit)
        return [r for r in rows if r is not None and bool(idx.live[r]) and not bool(idx.held[r])]

    def terminating_on_nominated(self, job: Job) -> tuple[str, ...]:
        """The lower-priority pods a preemption is terminating on the nodes the job's pods are
        nominated to: while there are any, the room is coming, preempting again would take more.
        The queue parks the job until they are gone (wake "victims"): the same pods, no other. A
        nominated node the pod's own filters now rule out (cordoned, tainted unreachable: its victims
        may never finish terminating) is not waited on: the pod may preempt again, as kube-scheduler's
        does when its nominated node is UnschedulableAndUnresolvable. (Devices the victims still hold
        are not such a rule: their going frees them, so the loose mask is asked.)"""
        index, static = self.cluster.node_index, self.placer.filters.static
        nodes = {n for p in job.pods
                 if (n := index.get(p.nominated_node_name)) is not None and bool(static(p, True).mask[n])}
        if not nodes:
            return ()
        idx = self.cluster.index
        rows = np.flatnonzero(idx.live & idx.doomed & (self._victim_priorities() < job.priority)
                              & np.isin(idx.node, np.fromiter(nodes, dtype=np.int64)))
        return tuple(idx.keys[i] for i in rows.tolist())

    # -- the dry run ---------------------------------------------------------------------------

    def plan(self, job: Job, pods: list[Pod], req: Requirement | None, failure: Failure, place: Place) -> Plan:
        if self.policy(failure.pod) == "Never":
            return Plan("none", render(NotEligible("never")))
        if self.terminating_on_nominated(job):
            return Plan("waiting", render(NotEligible("terminating")))
        # Silent when there is nothing preemption could do (no message is better than noise on every
        # pending pod of a cluster that does not use priorities).
        if not failure.resolvable or not pods:
            return Plan("none", "")
        cluster, idx = self.cluster, self.cluster.index
        own = [idx.row[p.key] for p in job.pods if p.key in idx.row]
        prio = self._victim_priorities()
        sel = idx.live & (prio < job.priority) & ~idx.protected
        sel[own] = False
        shield = self._shielded()
        eligible = sel.copy()
        asked = (job, pods, req, failure, place)
        if shield is not None:
            sel &= ~shield.hard_of(len(sel))  # a minimum runtime not passed: no victim
        admitted = self._admitted_rows(len(sel))
        if admitted is not None:
            sel &= ~admitted  # admitted in front of koordpy (Kueue): that controller's preemption decides
        self._spare_units(sel)
        rows = np.flatnonzero(sel)
        if not len(rows):
            return self._protected(eligible, sel, shield, admitted, None, asked) or Plan("none", "")
        tree = cluster.trees[req.tree] if req is not None else cluster.tree
        kinds = self.placer.kinds(pods)
        vec, feasible = self._loose(kinds, tree)
        cap = self._cap(pods)
        v_node = idx.node[rows]
        v_req = idx.req[rows]
        reclaim = reclaimable_free(cluster.free(), v_node, v_req)
        vec_own = vec
        order = self._reprieve_order(rows, prio)
        shared = self._device_room(pods, rows, order, feasible, len(pods))
        if shared is not None:
            # The devices as one more column: per node, how many of the job's pods they take once every
            # victim is gone; per victim, how many fewer while it stays (the job asks one apiece).
            room, share = shared
            reclaim = np.hstack([reclaim, room[:, None]])
            vec = np.append(vec, 1)
            v_req = np.hstack([v_req, share[:, None]])
        slots = np.minimum(node_offerslots(reclaim, vec, feasible), cap)
        desired = len(pods)
        ranks = self._candidate_sets(tree, req, slots, len(pods) == 1)
        fits = self._fits(kinds, desired, tree, reclaim, cap, ranks, shared is not None)
        reach = None if any(map(self.placer.uses_devices, pods)) else self._reach(ranks, tree, req)
        if not any(bool(np.any(f)) for f in fits):
            most = max(((int(t), n) for c in ranks for t, n in zip(c.totals.tolist(), c.names, strict=True)),
                       default=(0, "the cluster"))
            return self._protected(eligible, sel, shield, admitted, reach, asked) or Plan(
                "none", render(NotHelpful(desired, most[0], most[1])))
        rows, v_node, v_req = rows[order], v_node[order], v_req[order]
        v_req_own = v_req[:, :len(vec_own)]  # without the device column
        v_held = idx.held[rows]
        blocks = self._blocks(kinds, rows)
        units, unit_size = self._units_of(rows)
        job_ids, gang_ids, gang_bound, gang_min = self._jobs_of(rows)
        costs = _Costs(prio[rows], job_ids, gang_ids, ~v_held, units, unit_size, gang_bound, gang_min)
        # The PodDisruptionBudgets the victims count against, as (victim, budget) pairs; None where
        # the cluster has no budgets, the usual case, which then costs nothing more.
        pairs = self._budget_pairs(rows, v_held)
        scored: list[tuple[_Candidates, int, npt.NDArray[np.bool_], _Breach | None]] = []
        broken_n: list[int] = []
        tops, jobs_n, pods_n, packs, names = [], [], [], [], []
        for cands, fit in zip(ranks, fits, strict=True):
            if not bool(np.any(fit)):
                continue
            v_cand = cands.of_node[v_node]
            breach = None if pairs is None else self._beyond_budgets(pairs, v_cand, units, len(cands.domains))
            if breach is not None and bool(np.any(breach.first)):
                # kube-scheduler's reprieve: the victims that would break a budget are put back first.
                # (The device shares, counted in the order before, may then be off: the verifying
                # placement decides.)
                perm = np.lexsort((np.arange(len(rows)), ~breach.first, v_held))
                back = reprieve(reclaim, vec, feasible, desired, cands.of_node, cands.totals, v_node[perm],
                                v_req[perm], blocks[perm], cap)
                evicted = np.empty_like(back)
                evicted[perm] = back
            else:
                evicted = reprieve(reclaim, vec, feasible, desired, cands.of_node, cands.totals, v_node, v_req,
                                   blocks, cap)
            top, jobs, npods = costs.price(evicted, v_cand, len(cands.domains))
            broken = (np.zeros(len(cands.domains), dtype=np.int64) if breach is None
                      else self._broken(evicted, breach, v_cand, units, len(cands.domains)))
            for c in np.flatnonzero(fit).tolist():
                scored.append((cands, c, evicted & (v_cand == c), breach))
                broken_n.append(int(broken[c]))
                tops.append(int(top[c]))
                jobs_n.append(int(jobs[c]))
                pods_n.append(int(npods[c]))
                packs.append(int(cands.totals[c]))
                names.append(int(cands.name_rank[c]))
        ranking = order_candidates(np.array(broken_n, dtype=np.int64), np.array(tops, dtype=np.int64),
                                   np.array(jobs_n, dtype=np.int64),
                                   np.array(pods_n, dtype=np.int64), np.array(packs, dtype=np.int64),
                                   np.array(names, dtype=np.int64), MAX_VERIFIED)
        # The offerslot test is exact for one request shape without sub-groups or multiples; else the
        # victims are put back one by one against the real placement.
        shapes = {cluster.request_vector(p).tobytes() for p in pods}
        # The rules between pods over wider domains (spread, affinity, zones) are not in the pricing either.
        # Nor are devices exactly: the pricing counts each victim's share of the device room alone, and
        # only the verifying placement frees a victim's devices and searches them (``DeviceRules.release``).
        inexact = ((req is not None and bool(req.subgroups or req.multiples)) or len(shapes) > 1
                   or any(self.placer.filters.rules.applies(p) or self.placer.uses_devices(p) for p in pods))
        stmt = Statement(cluster)
        # Victims the job's own required affinity wants beside it: evicting them can only hurt, so
        # a third try spares them (kube-scheduler evicts every lower-priority pod on the node and gives
        # up on it; koordpy keeps the pods the preemptor is affine to).
        wanted = self._wanted(pods, rows)
        # The refine's bound by resources (the device column left out: devices only take room away).
        gauging = _Room(cluster.free(), vec_own, feasible, cap, desired) if inexact else None
        best: tuple[tuple[int, ...], Plan] | None = None
        compared = 0
        for i in ranking.tolist():
            priced = _order_key(broken_n[i], tops[i], jobs_n[i], pods_n[i], packs[i], names[i])
            if best is not None and not priced < best[0]:
                break  # priced no cheaper than a plan in hand: the price leaves out only what makes it dearer
            cands, c, chosen, breach = scored[i]
            only = cands.of_node == c
            inside = cands.of_node[v_node] == c
            attempts = [chosen, inside]
            if wanted is not None and bool(np.any(inside & wanted)):
                attempts.append(inside & ~wanted)
            for attempt in attempts:
                if shield is not None:
                    attempt = shield.within_minimums(attempt, rows, idx.doomed)
                plan = self._verify(job, pods, req, place, stmt, rows[attempt], v_held[attempt], only)
                if plan is None:
                    continue
                if inexact:
                    gauge = None if gauging is None else _Gauge(gauging, only, v_node[attempt], v_req_own[attempt])
                    plan = self._refine(job, pods, req, place, stmt, rows[attempt], v_held[attempt], only, plan,
                                        gauge)
                plan = self._as_units(job, pods, req, place, stmt, rows[attempt], v_held[attempt], only, plan)
                plan.where = cands.names[c]
                gone = set(plan.victims)
                went = np.array([idx.keys[r] in gone for r in rows.tolist()], dtype=np.bool_)
                top, jobs, npods = costs.price(went, np.zeros(len(rows), dtype=np.int64), 1)
                broke = 0
                if breach is not None:
                    plan, broke = self._budget_facts(plan, rows, breach, c, went, inside & ~v_held)
                real = _order_key(broke, int(top[0]), int(jobs[0]), int(npods[0]), packs[i], names[i])
                if best is None or real < best[0]:
                    best = (real, plan)
                compared += 1
                break
            if compared == MAX_COMPARED:
                break
        if best is None:
            return self._protected(eligible, sel, shield, admitted, reach, asked) or Plan(
                "none", render(NotHelpful(desired)))
        plan = best[1]
        plan.message = self._message(plan, job)
        return plan

    # -- minimum runtime ------------------------------------------------------------------------

    def _shielded(self) -> _Shield | None:
        """The running pods a minimum runtime protects now (None: none), worked out once per
        preemptor (a cycle) over its jobs, then read as arrays by every plan (again only when the
        index grew). A gang's members share its protection; an elastic gang (more members bound than
        its minimum, evicted member by member) keeps its rows as victims, capped at what it holds
        above its minimum; a lone pod has its own."""
        idx, snapshot = self.cluster.index, self.snapshot
        if snapshot is None or self._unshielded:
            return None
        if self._may_protect is None:
            self._may_protect = dialects.may_protect(snapshot)
        if not self._may_protect:  # nothing sets a minimum (the usual case): no gang is asked
            return None
        if self._shield is not None and self._shield.size == len(idx.keys):
            return self._shield if self._shield.jobs else None
        size = len(idx.keys)
        until = np.zeros(size, dtype=np.float64)
        hard = np.zeros(size, dtype=np.bool_)
        gang_no = np.full(size, -1, dtype=np.int64)
        who = np.full(size, -1, dtype=np.int64)
        allow: list[int] = []
        jobs: list[tuple[str, float, float]] = []

        def protect(rows: list[int], runtime: Runtime, name: str) -> None:
            end = runtime.protected_until
            if end is None or end <= self.now or not rows or runtime.last_start is None:
                return
            until[rows] = end
            who[rows] = len(jobs)
            jobs.append((name, runtime.last_start, float(runtime.minimum.seconds or 0.0)))

        for gang in self.gangs.values():
            if gang.config is None:
                continue
            runtime, problem = dialects.runtime(gang, snapshot)
            if problem:
                self.problems[gang.key, "min-runtime"] = problem
            end = runtime.protected_until
            if end is None or end <= self.now:
                continue
            members = [r for p in gang.pods if p.node_name and (r := idx.row.get(p.key)) is not None]
            protect(members, runtime, self._job_id(gang.key, gang.key))
            if not members:
                continue
            bound, least = gangrule.minimum(gang)
            # A gang of parts (a CompositePodGroup's children, each with its own minimum) is kept whole:
            # the cap counts the gang's members, not each part's.
            if bound > least and not gang.whole and not gang.units and gang.parts is None:
                # Its live members only: one lost already (terminating) is not among what it holds.
                gang_no[[r for p in gang.live() if (r := idx.row.get(p.key)) is not None]] = len(allow)
                allow.append(bound - least)
            else:
                hard[members] = True
        default = snapshot.default_min_runtime
        for pod in snapshot.pods:  # pods of no gang: their own annotation, else the default
            if not pod.node_name or pod.start_time is None or not (default or ANN_MIN_RUNTIME in pod.annotations):
                continue
            of = self.gangs.get(self.member_of.get(pod.key, ""))
            row = idx.row.get(pod.key)
            if row is None or (of is not None and of.config is not None):
                continue
            runtime = lone_runtime(pod, default)
            if runtime.minimum.problem:
                self.problems[pod.key, "min-runtime"] = runtime.minimum.problem
            protect([row], runtime, pod.key)
            hard[row] = until[row] > 0
        self._shield = _Shield(size, until, hard, gang_no, np.array(allow, dtype=np.int64), who, jobs)
        # None when no job is protected now (the usual case): the plans then do no work for it.
        return self._shield if jobs else None

    def _protected(self, eligible: npt.NDArray[np.bool_], sel: npt.NDArray[np.bool_], shield: _Shield | None,
                   admitted: npt.NDArray[np.bool_] | None, reach: npt.NDArray[np.bool_] | None,
                   asked: tuple[Job, list[Pod], Requirement | None, Failure, Place]) -> Plan | None:
        """The plan of a job that found no room because victims it could take are spared: protected by
        their minimum runtime (it says so and tries again when the first protection ends), or admitted
        by a controller in front of koordpy (``_admitted_rows``: it says so and waits for room). None:
        none is. When even they would not make room (the dry run again without what spares them: only
        here, where preemption failed beside spared pods), the plan is that dry run's: it says why,
        and no protection's end brings the job back. A minimum runtime is lifted first: a job that
        would fit once it passes waits for it; one that needs admitted pods too says that.

        ``sel``: the victims the dry run had; ``reach``: per node, whether a victim there takes part in
        it (``_reach``; None: anywhere). The dry run without the admitted mask is run only when it
        would have a victim more where one takes part: else it is this one again, to the same end."""
        if shield is not None and len(rows := np.flatnonzero(eligible & shield.any(len(eligible)))):
            self._unshielded = True
            try:
                bare = self.plan(*asked)  # its own answer names admitted pods it would need
            finally:
                self._unshielded = False
            if bare.outcome == "none":
                return bare
            first = int(rows[np.argmin(shield.until[rows])])
            name, start, minimum = shield.jobs[int(shield.who[first])]
            others = len(np.unique(shield.who[rows])) - 1
            return Plan("none", render(MinRuntimeProtected(name, self.now - start, minimum, others)),
                        wake_at=float(shield.until[first]))
        if admitted is None or not self._admitted_would_take(eligible, sel, reach):
            return None
        self._unadmitted = True
        try:
            bare = self.plan(*asked)
        finally:
            self._unadmitted = False
        if bare.outcome == "none":
            return bare
        row = self.cluster.index.row
        taken = [k for k in bare.victims if bool(admitted[row[k]])]
        if not taken:  # a plan of other victims after all (the search is bounded): it stands
            return bare
        # Who admitted it, asked of the one victim the message names only (the index keeps whether).
        said = dialects.admitted_by(self.cluster.objects[taken[0]])
        assert said is not None, "the index says admitted what its pod object does not"
        return Plan("none", render(AdmittedElsewhere(taken[0], said.by, said.what, len(taken) - 1)))

    def _admitted_would_take(self, eligible: npt.NDArray[np.bool_], sel: npt.NDArray[np.bool_],
                             reach: npt.NDArray[np.bool_] | None) -> bool:
        """Whether the dry run without the admitted mask could have a victim that the one that had
        ``sel`` did not, where victims take part in it (``reach``): an admitted pod, or a member of a
        unit one spared (``_spare_units``; a unit spared for another reason counts too, so never a
        victim fewer than that run has). Asked once no eligible pod is protected by a minimum runtime
        (``_protected`` lifts that first). The first run cannot tell by itself: the masked pods never
        enter its reprieve, and only placements with them gone say whether they make room."""
        more = eligible & ~sel
        if reach is not None:
            more[more] = reach[self.cluster.index.node[more]]
        return bool(more.any())

    def _reach(self, ranks: list[_Candidates], tree: TopologyTree, req: Requirement | None) -> npt.NDArray[np.bool_]:
        """Per node, whether a victim there takes part in a dry run whose candidates are ``ranks``, for
        a job without devices (``_device_room`` counts victims on every node the job may use, and its
        budget is one of time): one on a node of no candidate is never evicted by a plan, nor counted
        in a candidate's room (``reprieve`` passes it by, an attempt is one candidate's, a unit's
        members elsewhere go with one inside), so the dry run ends as it would without it. A node
        the tree leaves out counts (the root as a candidate totals it)."""
        out = tree.outside.copy() if req is not None else np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        for cands in ranks:
            out |= cands.of_node >= 0
        return out

    def _admitted_rows(self, n: int) -> npt.NDArray[np.bool_] | None:
        """Per index row (of ``n``), whether a controller in front of koordpy admitted the running pod
        (the index's column, ``PodMeta.admitted``, from ``dialects.admitted_by`` as the pod last
        changed; Kueue): no victim of koordpy's, as that controller holds its quota and preempts by
        its own rules (evicted by koordpy, its job would come back into the same admission, the
        deletion counted as a failure of the job). None: no pod is (most clusters)."""
        if self._unadmitted:
            return None
        idx = self.cluster.index
        # A pending one's nomination is koordpy's own promise, taken back as any other's: no eviction.
        out = idx.admitted[:n] & idx.live[:n] & ~idx.held[:n]
        return out if bool(out.any()) else None

    def _wanted(self, pods: list[Pod], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
        """Per victim row, whether some required affinity term of the job's pods matches it (None:
        the job states no pod affinity)."""
        terms = {t for p in pods for t in p.pod_affinity}
        if not terms:
            return None
        presence = self.placer.filters.rules.presence
        objects = self.cluster.objects
        keys = [self.cluster.index.keys[i] for i in rows.tolist()]
        return np.array([k in objects and any(presence.term_matches(t, objects[k]) for t in terms) for k in keys],
                        dtype=np.bool_)

    def _loose(self, kinds: list[list[Pod]], tree: TopologyTree) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """The request and the nodes that price the candidates: the smallest request of each resource
        and every node some kind of pod may use. Offerslots counted so never underestimate what a
        candidate can take, whatever mix of unlike pods (a small master beside big workers) the job
        holds; for a job of like pods they are exact. The verifying placement gives the real answer."""
        vec = np.min(np.stack([self.cluster.request_vector(members[0]) for members in kinds]), axis=0)
        feasible = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        for members in kinds:
            feasible |= self.placer.feasible(members[:1], tree, rules=False)
        return np.asarray(vec, dtype=np.int64), feasible

    def _device_room(self, pods: list[Pod], rows: npt.NDArray[np.int64], order: npt.NDArray[np.int64],
                     feasible: npt.NDArray[np.bool_],
                     desired: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """For a job with claims: per node, how many of its pods the node's devices take once every
        victim (``rows``) is gone, searched as a whole (``DeviceRules.capacity``); and per victim, how
        many fewer once it stays too, its node's victims put back in reprieve order (``order``), so the
        shares of the victims the reprieve puts back add up to what the node's devices lose with them
        (counted up to the job's size). None where the count does not apply (no claims, claims shared
        or allocated already: the verifying placement alone decides, as for any job before). Shares
        are counted for the first MAX_SHARES victims holding devices on the job's nodes where those
        take any of its pods, and only while the job has spent less than half its device search budget
        (``DeviceRules.gang_spent``, charged with the shares' counts alone), the rest left to the
        verifying placement; a victim whose share is not counted is priced as keeping its node's whole
        device room."""
        devices = self.placer.filters.devices
        if devices is None or not any(map(devices.uses, pods)):
            return None
        idx, objects, nodes = self.cluster.index, self.cluster.objects, self.cluster.nodes
        rank = np.empty(len(rows), dtype=np.int64)
        rank[order] = np.arange(len(rows), dtype=np.int64)
        holders: list[tuple[int, Pod]] = []
        for v in order.tolist():
            victim = objects.get(idx.keys[int(rows[v])])
            if victim is not None and (victim.claims or victim.extended_claim) and not bool(idx.held[rows[v]]):
                holders.append((v, victim))
        together = devices.prefers(pods)
        share = np.zeros(len(rows), dtype=np.int64)
        txn = Txn()
        clock = devices.allocator.clock
        start: float | None = None
        try:
            devices.release([p for _, p in holders], txn)
            room = devices.capacity(pods, nodes, feasible, desired, together)
            if room is None:
                return None
            txn.rollback(0)
            # The holders whose devices may count for the job: on its nodes, where those take any of it.
            counted = [(v, p) for v, p in holders if bool(feasible[n := int(idx.node[rows[v]])]) and room[n] > 0]
            # A holder whose share is not counted (past MAX_SHARES, or once the budget is spent) is priced
            # as keeping its node's whole device room: priced as freeing nothing, its node would look
            # cheapest and be verified first (and where the cluster is the one candidate, every victim
            # would be, only MAX_REFINED of them reprieved).
            for v, _ in counted:
                share[v] = room[int(idx.node[rows[v]])]
            priced = counted[:MAX_SHARES]
            keys = {p.key for _, p in priced}
            devices.release([p for _, p in holders if p.key not in keys], txn)
            on: dict[int, list[tuple[int, Pod]]] = {}
            for v, p in priced:  # in reprieve order
                on.setdefault(int(idx.node[rows[v]]), []).append((v, p))
            # Only the shares are charged to the job's search budget: the room is one count of its
            # nodes, as each placement of the job makes, and charged it would leave the verifying
            # placements' gang search no time where the cluster is large (their plan then failing, every
            # victim of the candidate would be verified instead).
            start = clock()
            for node, group in on.items():
                if devices.gang_spent + clock() - start >= devices.gang_budget / 2:
                    break
                at = txn.savepoint()
                devices.release([p for n, g in on.items() if n != node for _, p in g], txn)
                only = np.zeros(len(nodes), dtype=np.bool_)
                only[node] = True
                inner = txn.savepoint()
                # Counted with the node's first j victims (in reprieve order) staying, for j from all
                # of them down to none: the j-th's share is what the count loses when it stays too
                # (the count stops at the job's size: a victim alone may cost nothing below it). And
                # counted with each alone staying: victims sharing a claim free it only together.
                kept: list[int] = []
                for _, victim in reversed(group):
                    got = devices.capacity(pods, nodes, only, desired, together)
                    if got is None:
                        break
                    kept.append(int(got[node]))
                    devices.release([victim], txn)
                txn.rollback(inner)
                alone: list[int] = []
                for _, victim in group if len(kept) == len(group) else ():
                    mark = txn.savepoint()
                    devices.release([p for _, p in group if p is not victim], txn)
                    got = devices.capacity(pods, nodes, only, desired, together)
                    txn.rollback(mark)
                    if got is None:
                        break
                    alone.append(int(got[node]))
                txn.rollback(at)
                if len(alone) == len(group):
                    kept.reverse()  # kept[j]: with the first j + 1 staying
                    for j, (v, _) in enumerate(group):
                        after = int(room[node]) if j == 0 else kept[j - 1]
                        share[v] = max(0, after - kept[j], int(room[node]) - alone[j])
            return np.asarray(room, dtype=np.int64), share
        finally:
            txn.discard()
            if start is not None:
                devices.gang_spent += clock() - start

    def _cap(self, pods: list[Pod]) -> npt.NDArray[np.int64]:
        """Per node, the most of the job's pods it may take: one where every pair of them repels
        (a shared host port, anti-affinity on the hostname: the placement's own cap), else no limit."""
        cap = np.full(len(self.cluster.nodes), UNBOUNDED, dtype=np.int64)
        if len(pods) > 1:
            on = self.placer.filters.rules.interplay(pods).cap_on
            if on is not None:
                cap[on] = 1
        return cap

    def _blocks(self, kinds: list[list[Pod]], rows: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Per victim, whether no pod of the job may share its node while it runs there: every kind of
        pod of the job takes a host port it holds, or repels it (or is repelled by it) with required
        anti-affinity over a key that names its node alone. Such a victim stays out wherever its node
        is needed, as kube-scheduler's reprieve finds with its filters; wider rules are left to the
        verifying placement. Every kind must be kept off: a price never counts a victim the job may not need."""
        out = np.zeros(len(rows), dtype=np.bool_)
        presence = self.placer.filters.rules.presence
        reps = [members[0] for members in kinds]
        if not all(p.host_ports or p.pod_anti_affinity or presence.repelled(p) for p in reps):
            return out
        idx, objects = self.cluster.index, self.cluster.objects
        for v, row in enumerate(rows.tolist()):
            victim = objects.get(idx.keys[row])
            if victim is not None:
                node = int(idx.node[row])
                out[v] = all(self._repels(p, victim, node) for p in reps)
        return out

    def _repels(self, pod: Pod, victim: Pod, node: int) -> bool:
        """Whether ``victim`` running on ``node`` keeps ``pod`` off that node, and off it alone."""
        if any(a.conflicts(b) for a in pod.host_ports for b in victim.host_ports):
            return True
        presence = self.placer.filters.rules.presence
        for holder, other in ((pod, victim), (victim, pod)):
            for term in holder.pod_anti_affinity:
                dom, _, per_node = presence.domains(term.topology_key)
                if per_node and dom[node] >= 0 and presence.term_matches(term, other):
                    return True
        return False

    def _fits(self, kinds: list[list[Pod]], desired: int, tree: TopologyTree, reclaim: npt.NDArray[np.int64],
              cap: npt.NDArray[np.int64], ranks: list[_Candidates], devices: bool) -> list[npt.NDArray[np.bool_]]:
        """Per candidate, whether it may hold the job once its lower-priority pods are gone: its
        offerslots reach the job's size, and each kind of pod (request and the nodes it may use) finds
        room for all of its members on its own. Both are necessary, so no candidate the real placement
        would use is dropped; the second keeps a candidate with room only for the small pods (a
        CPU-only domain for a job of GPU workers) from taking the few verifying placements."""
        out = [c.totals >= desired for c in ranks]
        if len(kinds) < 2:
            return out  # one kind: the loose offerslot is exact already
        for members in kinds:
            vec = self.cluster.request_vector(members[0])
            slots = np.minimum(node_offerslots(reclaim, np.append(vec, 1) if devices else vec,
                                               self.placer.feasible(members[:1], tree, rules=False)),
                               cap).astype(np.float64)
            for i, cands in enumerate(ranks):
                inside = cands.of_node >= 0
                room = np.bincount(cands.of_node[inside], weights=slots[inside], minlength=len(cands.domains))
                out[i] &= room >= len(members)
        return out

    def _verify(self, job: Job, pods: list[Pod], req: Requirement | None, place: Place, stmt: Statement,
                victims: npt.NDArray[np.int64], held: npt.NDArray[np.bool_],
                only: npt.NDArray[np.bool_]) -> Plan | None:
        """Places the job for real inside the candidate once ``victims`` are gone; the plan if it fits."""
        idx = self.cluster.index
        keys = [idx.keys[i] for i in victims.tolist()]
        for key in keys:
            stmt.evict(key)
        devices = self.placer.filters.devices
        if devices is not None:  # the devices a victim alone holds are free in this what-if
            devices.release([p for k in keys if (p := self.cluster.objects.get(k)) is not None
                             and (p.claims or p.extended_claim)], stmt.txn)
        saved, self.placer.only = self.placer.only, only
        try:
            failure = place(pods, req, stmt)
            placed = stmt.placed
        finally:
            self.placer.only = saved
            stmt.discard()
        if failure is not None:
            return None
        targets = set(placed.values())
        # Pending pods of lower priority nominated on the nodes the job takes lose that room too.
        lower = np.flatnonzero(idx.live & idx.held & (self._victim_priorities() < job.priority)
                               & np.isin(idx.node, np.fromiter(targets, dtype=np.int64)))
        own = {p.key for p in job.pods}
        released = {k for k, h in zip(keys, held.tolist(), strict=True) if h}
        released.update(k for k in (idx.keys[i] for i in lower.tolist()) if k not in own)
        victims_out = tuple(k for k, h in zip(keys, held.tolist(), strict=True) if not h)
        return Plan("nominated", "", victims_out, tuple(sorted(released)), placed)

    def _refine(self, job: Job, pods: list[Pod], req: Requirement | None, place: Place, stmt: Statement,
                victims: npt.NDArray[np.int64], held: npt.NDArray[np.bool_], only: npt.NDArray[np.bool_],
                plan: Plan, gauge: _Gauge | None = None) -> Plan:
        """Reprieve against the real placement (in reprieve order, a bounded number of tries): each
        victim whose return still lets the job be placed stays. A victim the room cannot spare by
        resources alone (``gauge``) is not placed for: that placement would fail."""
        evict = np.ones(len(victims), dtype=np.bool_)
        for v in range(min(len(victims), MAX_REFINED)):
            if gauge is not None and not gauge.may_return(v):
                continue
            evict[v] = False
            trial = self._verify(job, pods, req, place, stmt, victims[evict], held[evict], only)
            if trial is None:
                evict[v] = True
            else:
                plan = trial
                if gauge is not None:
                    gauge.returned(v)
        return plan

    def _spare_units(self, sel: npt.NDArray[np.bool_]) -> None:
        """A unit (disruptionMode all) is a victim only whole: none of its members is one when any of
        them may not be (protected, or of the preemptor's priority or above)."""
        if not self._any_units():
            return  # most clusters: no victim is asked about (a look per eligible pod otherwise)
        done: set[str] = set()
        for row in np.flatnonzero(sel).tolist():
            found = self._unit(self.cluster.index.keys[row])
            if found is None or found[1] in done:
                continue
            done.add(found[1])
            rows = self._unit_rows(*found)
            if not bool(np.all(sel[rows])):
                sel[rows] = False

    def _as_units(self, job: Job, pods: list[Pod], req: Requirement | None, place: Place, stmt: Statement,
                  victims: npt.NDArray[np.int64], held: npt.NDArray[np.bool_], only: npt.NDArray[np.bool_],
                  plan: Plan) -> Plan:
        """The plan with every unit a victim touches evicted whole (disruptionMode all: its members
        elsewhere go too), then reprieved unit by unit: a victim the units' extra room makes needless
        is put back, and a unit goes back only as a whole."""
        idx = self.cluster.index
        atoms: list[list[int]] = []
        units: set[str] = set()
        for key in plan.victims:
            found = self._unit(key)
            if found is None:
                atoms.append([idx.row[key]])
            elif found[1] not in units:
                units.add(found[1])
                atoms.append(self._unit_rows(*found))
        if not units:
            return plan
        released = set(plan.released)  # pending pods whose room the plan takes back: they stay so
        nominated = np.array([r for r in victims[held].tolist() if idx.keys[r] in released], dtype=np.int64)
        evict = [True] * len(atoms)

        def trial() -> Plan | None:
            rows = np.array([r for a, e in zip(atoms, evict, strict=True) if e for r in a] + nominated.tolist(),
                            dtype=np.int64)
            return self._verify(job, pods, req, place, stmt, rows, idx.held[rows], only)

        best = trial()
        if best is None:  # placement is not monotone in the room (rules between pods): keep the plan, whole
            extra = tuple(idx.keys[r] for a in atoms for r in a if idx.keys[r] not in plan.victims)
            return replace(plan, victims=plan.victims + extra)
        for i in range(min(len(atoms), MAX_REFINED)):
            evict[i] = False
            spared = trial()
            if spared is None:
                evict[i] = True
            else:
                best = spared
        return best

    def _message(self, plan: Plan, job: Job) -> str:
        if not plan.victims:
            return render(RoomTakenBack(plan.where))
        jobs = {self._job_id(self.member_of.get(k, ""), k) for k in plan.victims}
        return render(Preempting(plan.victims, len(jobs), plan.where, plan.beyond, plan.kept))

    # -- PodDisruptionBudgets ----------------------------------------------------------------

    def _budget_pairs(self, rows: npt.NDArray[np.int64],
                      held: npt.NDArray[np.bool_]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]] | None:
        """The budgets the victims (rows in reprieve order) count against, as pairs (victim, budget),
        by victim: the index's column and, for the few pods several budgets cover, the others
        (``Budgets.more``); less nominations (no pod is evicted) and a pod a budget lists in its
        ``disruptedPods`` (the API server counts it already; for that budget only). None: the
        cluster has no budgets."""
        budgets, idx = self.cluster.budgets, self.cluster.index
        if not budgets:
            return None
        first = idx.pdb[rows]
        pv = np.flatnonzero((first >= 0) & ~held)
        pb = first[pv]
        if not budgets.more and not budgets.disrupted:
            return pv, pb
        at = np.full(len(idx.keys), -1, dtype=np.int64)
        at[rows] = np.arange(len(rows))
        extra_v: list[int] = []
        extra_b: list[int] = []
        for key, ids in budgets.more.items():
            r = idx.row.get(key)
            v = -1 if r is None else int(at[r])
            if v >= 0 and not bool(held[v]) and int(first[v]) == ids[0]:
                extra_v.extend([v] * (len(ids) - 1))
                extra_b.extend(ids[1:])
        if extra_v:
            pv = np.concatenate([pv, np.array(extra_v, dtype=np.int64)])
            pb = np.concatenate([pb, np.array(extra_b, dtype=np.int64)])
            by = np.lexsort((pb, pv))
            pv, pb = pv[by], pb[by]
        if budgets.disrupted:
            n = len(budgets.items)
            free = [int(at[r]) * n + b for k, b in budgets.disrupted
                    if (r := idx.row.get(k)) is not None and at[r] >= 0]
            keep = ~np.isin(pv * n + pb, np.array(free, dtype=np.int64))
            pv, pb = pv[keep], pb[keep]
        return pv, pb

    def _beyond_budgets(self, pairs: tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]],
                        v_cand: npt.NDArray[np.int64], units: npt.NDArray[np.int64], n_cand: int) -> _Breach:
        """Which victims would break a budget, counted once as if every victim of each candidate went
        (kube-scheduler's classification, before the reprieve): in each candidate, a budget's victims
        in reprieve order (the most important first) take its ``disruptionsAllowed`` and those after
        it break it; a victim several budgets cover is charged to each and is beyond if it is beyond
        any. A unit (evicted whole) is counted with all its members in each candidate it has one in,
        as kube-scheduler counts a group victim by all its pods. Candidates of a rank are disjoint, so
        one pass counts them all against the full budgets."""
        pv, pb = pairs
        pc = v_cand[pv]
        if self._any_units() and bool(np.any(units >= 0)):
            pc, pv, pb = self._with_whole_units(pc, pv, pb, v_cand, units)
        keep = pc >= 0
        pc, pv, pb = pc[keep], pv[keep], pb[keep]
        by = np.lexsort((pv, pb, pc))
        pc, pb, pv = pc[by], pb[by], pv[by]
        starts = np.ones(len(pv), dtype=np.bool_)
        starts[1:] = (pc[1:] != pc[:-1]) | (pb[1:] != pb[:-1])
        group = np.cumsum(starts) - 1
        taken = np.arange(len(pv)) - np.flatnonzero(starts)[group]  # the budget taken before this victim
        over = taken >= self.cluster.budgets.allowed[pb]
        pc, pv, pb = pc[over], pv[over], pb[over]
        beyond = np.zeros(len(v_cand), dtype=np.bool_)
        beyond[pv[v_cand[pv] == pc]] = True
        first = beyond
        in_unit = units[pv] >= 0
        if bool(np.any(in_unit)):
            per = int(units.max()) + 1
            breaks = np.bincount(pc[in_unit] * per + units[pv[in_unit]], minlength=n_cand * per) > 0
            whole = (units >= 0) & (v_cand >= 0)
            first = beyond.copy()
            first[whole] |= breaks[v_cand[whole] * per + units[whole]]
        return _Breach(beyond, first, pc, pv, pb)

    @staticmethod
    def _with_whole_units(pc: npt.NDArray[np.int64], pv: npt.NDArray[np.int64], pb: npt.NDArray[np.int64],
                          v_cand: npt.NDArray[np.int64], units: npt.NDArray[np.int64]) -> tuple[
                              npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """The (candidate, victim, budget) pairs with, for each candidate a unit has a member in, the
        unit's members elsewhere counted in it too (evicting the unit there evicts them)."""
        per = int(units.max()) + 1
        whole = (units >= 0) & (v_cand >= 0)
        touched = np.unique(v_cand[whole] * per + units[whole]).tolist()
        by_unit: dict[int, list[int]] = {}
        for k in np.flatnonzero(units[pv] >= 0).tolist():
            by_unit.setdefault(int(units[pv[k]]), []).append(k)
        extra = [(c, k) for code in touched for c, u in [divmod(code, per)] for k in by_unit.get(u, ())
                 if int(v_cand[pv[k]]) != c]
        if not extra:
            return pc, pv, pb
        cs = np.array([c for c, _ in extra], dtype=np.int64)
        ks = np.array([k for _, k in extra], dtype=np.int64)
        return np.concatenate([pc, cs]), np.concatenate([pv, pv[ks]]), np.concatenate([pb, pb[ks]])

    def _broken(self, evicted: npt.NDArray[np.bool_], breach: _Breach, v_cand: npt.NDArray[np.int64],
                units: npt.NDArray[np.int64], n_cand: int) -> npt.NDArray[np.int64]:
        """Per candidate, its evicted victims beyond their budgets; a unit one of whose members is
        evicted goes whole, each of its members beyond a budget counted, wherever it runs."""
        pc, pv = breach.over_cand, breach.over_victim
        hit = evicted[pv] & (v_cand[pv] == pc)
        if self._any_units() and bool(np.any(units[pv] >= 0)):
            per = int(units.max()) + 1
            whole = (units >= 0) & (v_cand >= 0)
            touched = np.bincount(v_cand[whole][evicted[whole]] * per + units[whole][evicted[whole]],
                                  minlength=n_cand * per) > 0
            in_unit = units[pv] >= 0
            hit[in_unit] |= touched[pc[in_unit] * per + units[pv[in_unit]]]
        counted = np.unique(pc[hit] * len(v_cand) + pv[hit])  # a victim beyond two budgets is one pod
        return np.bincount(counted // max(1, len(v_cand)), minlength=n_cand).astype(np.int64)

    def _budget_facts(self, plan: Plan, rows: npt.NDArray[np.int64], breach: _Breach, c: int,
                      went: npt.NDArray[np.bool_], inside: npt.NDArray[np.bool_]) -> tuple[Plan, int]:
        """The plan with the budgets its victims break (counted in candidate ``c``; ``went``: the
        victims it evicts) and the candidate's victims kept because evicting them would have broken
        one; and how many of its victims are beyond a budget. A victim beyond a budget was kept by it
        only if a more important victim within every budget went in its place (victims are in
        reprieve order, the most important first): one that was not needed, or was kept for its
        importance alone, is not named."""
        names, idx = self.cluster.budgets.names, self.cluster.index
        hit = (breach.over_cand == c) & went[breach.over_victim]
        counts = np.bincount(breach.over_budget[hit], minlength=len(names))
        over = tuple((names[b], int(counts[b])) for b in np.flatnonzero(counts).tolist())
        instead = np.flatnonzero(inside & went & ~breach.beyond)
        spared = inside & breach.beyond & ~went
        spared[:int(instead[0]) + 1 if len(instead) else len(spared)] = False
        kept = tuple(idx.keys[r] for r in rows[spared].tolist())
        return replace(plan, beyond=over, kept=kept), len(np.unique(breach.over_victim[hit]))

    def _job_id(self, gang: str, otherwise: str) -> str:
        """The job a victim belongs to, as jobs are named: its gang's GangGroup, else ``otherwise``."""
        group = self.groups.get(gang)
        return otherwise if group is None else str(group)

    # -- candidates ----------------------------------------------------------------------------

    def _candidate_sets(self, tree: TopologyTree, req: Requirement | None, slots: npt.NDArray[np.int64],
                        lone: bool) -> list[_Candidates]:
        """Where the job may go, one set per rank searched: the domains of its hard scope (every tier
        Volcano would search), each node for a lone pod without topology, else the whole cluster."""
        n = len(self.cluster.nodes)
        if req is None:
            if lone:
                names = [node.name for node in self.cluster.nodes]
                return [_Candidates(list(range(n)), np.arange(n, dtype=np.int64), slots.copy(), names,
                                    np.arange(n, dtype=np.int64))]
            return [_Candidates([0], np.zeros(n, dtype=np.int64), np.array([int(slots.sum())], dtype=np.int64),
                                ["the cluster"], np.zeros(1, dtype=np.int64))]
        search = SearchScope.of(req, tree)
        ranks = list(range(search.lowest, search.highest + 1)) if req.style == "tiers" else [search.rank]
        sums = subtree_sums(slots, tree.node_domain, tree.parent, np.ones(len(tree.order), dtype=np.int64))
        # Running members keep the job inside their domain.
        inside = search.within(tree, np.ones(len(tree.order), dtype=np.bool_))
        anchor = search.anchor
        out = []
        seen: set[int] = set()
        for r in ranks:
            domains = [int(d) for d in np.flatnonzero((tree.rank == r) & inside) if int(d) not in seen]
            if not domains and anchor is not None and tree.rank[anchor] <= r and anchor not in seen:
                domains = [anchor]
            if not domains:
                continue
            seen.update(domains)
            of_node = np.full(n, -1, dtype=np.int64)
            for i, d in enumerate(domains):
                of_node[tree.subtree_nodes(d)] = i
            of_node[tree.outside] = -1
            names = [("the cluster" if d == 0 else tree.label(d) if req.tree.labelled else tree.name(d))
                     for d in domains]
            out.append(_Candidates(domains, of_node, sums[domains].astype(np.int64), names,
                                   tree.name_rank[domains].astype(np.int64)))
        return out

    # -- victims -------------------------------------------------------------------------------

    def _reprieve_order(self, rows: npt.NDArray[np.int64], prio: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Who is put back first: the highest priority; among equals a gang's members before pods
        of no gang (so gangs stay whole), then by namespace/name. Pending pods' nominations last:
        taking back room promised to a lower-priority job costs less than evicting a running pod."""
        idx = self.cluster.index
        keys = np.array([idx.keys[i] for i in rows.tolist()], dtype=object)
        standalone = np.array([k not in self.member_of for k in keys.tolist()], dtype=np.bool_)
        names = np.argsort(np.argsort(keys.astype(str), kind="stable"), kind="stable")
        return np.lexsort((names, standalone, -prio[rows], idx.held[rows]))

    def _jobs_of(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64],
                                                              npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Per victim: its job (GangGroup, or itself) and gang as numbers, with each gang's bound
        members and minimum."""
        idx = self.cluster.index
        job_of: dict[str, int] = {}
        gang_of: dict[str, int] = {}
        jobs = np.empty(len(rows), dtype=np.int64)
        gangs = np.full(len(rows), -1, dtype=np.int64)
        for v, key in enumerate(idx.keys[i] for i in rows.tolist()):
            gkey = self.member_of.get(key)
            gang = self.gangs.get(gkey) if gkey is not None else None
            if gang is None or gang.config is None:
                jobs[v] = job_of.setdefault(key, len(job_of))
                continue
            jobs[v] = job_of.setdefault(self._job_id(gang.key, gang.key), len(job_of))
            gangs[v] = gang_of.setdefault(gang.key, len(gang_of))
        bound = np.zeros(len(gang_of), dtype=np.int64)
        least = np.zeros(len(gang_of), dtype=np.int64)
        for key, g in gang_of.items():
            bound[g], least[g] = gangrule.minimum(self.gangs[key])
        return jobs, gangs, bound, least

    def _units_of(self, rows: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Per victim, its unit as a number (-1: it goes alone); per unit, its running members."""
        idx = self.cluster.index
        number: dict[str, int] = {}
        sizes: list[int] = []
        out = np.full(len(rows), -1, dtype=np.int64)
        if not self._any_units():
            return out, np.zeros(0, dtype=np.int64)  # most clusters: no victim is asked about
        for v, key in enumerate(idx.keys[i] for i in rows.tolist()):
            found = self._unit(key)
            if found is None:
                continue
            if found[1] not in number:
                number[found[1]] = len(sizes)
                sizes.append(len(self._unit_rows(*found)))
            out[v] = number[found[1]]
        return out, np.array(sizes, dtype=np.int64)


__all__ = ["NO_VICTIM", "Plan", "Preemptor", "preemption_policy"]
