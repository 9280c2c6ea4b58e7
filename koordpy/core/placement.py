"""Where a job's pods go: topology-aware gather (offerslot + binpack) or plain binpacking.

A job is the pending pods one attempt must place together (a GangGroup's, or one pod).
Placement makes its moves on a ``Statement`` and reports the first pod it could not
place with the reason; the caller decides whether to commit or discard.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import PODS, Pod
from koordpy.core.filters import Filters, constraints_key
from koordpy.core.members import rank_order as rank_order  # where callers have long found it
from koordpy.core.messages import AFTER_MEMBERS
from koordpy.core.naming import natural_key
from koordpy.core.podrules import RULE_REASONS, UNRESOLVABLE, Interplay, rules_key
from koordpy.core.requirement import Requirement, SearchScope, SubGroup
from koordpy.core.skipping import skipping
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.core.verdicts import (
    Closest,
    Code,
    Failure,
    Inside,
    KindsNoHyperNode,
    NoCandidate,
    NodesFiltered,
    NoDomainAtLevel,
    NoHyperNode,
    OnePerNode,
    SubGroupLeft,
    SubGroupsNoHyperNode,
    Text,
    TierOffer,
    WithNotes,
    resolvable,
)
from koordpy.kernels import (
    achievable,
    allocate,
    ancestor_sums_py,
    choose_candidate,
    contains,
    node_offerslots,
    subtree_sums,
)
from koordpy.kernels.tiers import add_usage, domain_totals, tier_place

MAX_LISTED_DOMAINS = 16


def _subtree(tree: TopologyTree, d: int, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """``mask`` kept only inside ``d``'s subtree."""
    out = np.zeros_like(mask)
    out[d: tree.end[d]] = mask[d: tree.end[d]]
    return out


class Placer:
    def __init__(self, filters: Filters) -> None:
        self.filters = filters
        self.cluster = filters.cluster
        # Nodes a preemption dry run confines the job to (one candidate), else None.
        self.only: npt.NDArray[np.bool_] | None = None
        # At most this many of the job's pods per node (one where members repel each other there; what
        # their devices allow, ``DeviceRules.capacity``), else None.
        self.cap: npt.NDArray[np.int64] | None = None
        # A proposal for members placed one by one: the rules between pods are left to that placement.
        self.relaxed = False
        # Whether a failure says what the closest domain lacked (``Failure.closest``): a dry run for
        # ``koordpy explain`` asks; the cycle does not pay for counting reasons per domain.
        self.diagnose = False

    def uses_devices(self, pod: Pod) -> bool:
        return self.filters.devices is not None and self.filters.devices.uses(pod)

    def _mask(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        return mask if self.only is None else mask & self.only

    def _free(self) -> npt.NDArray[np.int64]:
        """Free room per node as the job's offerslots see it: with a per-node cap, the pods column
        says no more than the cap, so every offerslot (the kernels' too) is at most the cap."""
        free = self.cluster.free()
        if self.cap is not None:
            col = self.cluster.res_index[PODS]
            free[:, col] = np.minimum(free[:, col], self.cap)
        return free

    def _caps(self, pods: list[Pod], cap_on: npt.NDArray[np.bool_] | None,
              together: bool = False) -> npt.NDArray[np.int64] | None:
        """The per-node cap of a job: one member where they repel each other; the pods the node's
        devices take, when they claim devices (a gang of 8-GPU claims gathers as one of 8-GPU requests),
        pod after pod or (``together``) with their devices searched as a whole."""
        cap = None if cap_on is None else np.where(cap_on, 1, np.iinfo(np.int64).max).astype(np.int64)
        devices = self.filters.devices
        if devices is not None and len(pods) > 1 and any(map(devices.uses, pods)):  # one pod: its mask says
            mask = self._mask(np.logical_or.reduce([self.filters.static(p).mask for p in self._distinct(pods)]))
            counted = devices.capacity(pods, self.cluster.nodes, mask, len(pods), together)
            if counted is not None:
                cap = counted if cap is None else np.minimum(cap, counted)
        return cap

    # -- the job: rules between its members ------------------------------------------------

    def place_job(self, pods: list[Pod], req: Requirement | None, stmt: Statement) -> Failure | None:
        """Places a job (``req``: its topology requirement, None for plain binpacking) so that the
        rules between pods hold for every member against the pods already there and against the
        members placed before it, in rank order, so that any prefix a Strict gang binds holds too.
        Members that repel each other per node (self anti-affinity on the hostname, a shared host
        port) cap every node's offerslot at one; members bound by wider rules (spread, affinity,
        anti-affinity over zones) are placed one by one inside the domain the topology search
        chose, each on the node the search proposed when the rules allow it."""
        play = self.filters.rules.interplay(pods) if len(pods) > 1 else Interplay()
        self.cap = self._caps(pods, play.cap_on)
        try:
            mark = stmt.savepoint()
            failure = self._place_capped(pods, req, stmt, play)
            devices = self.filters.devices
            if failure is not None and self.cap is not None and devices is not None and devices.prefers(pods):
                # Counted pod after pod, each member takes the firstAvailable alternative it prefers
                # (kube-scheduler's order); only a job that does not fit so is placed again on the
                # count with its devices searched as a whole (less preferred alternatives, more pods
                # a node), which would otherwise pack members onto halves beside idle whole devices.
                wider = self._caps(pods, play.cap_on, together=True)
                if wider is not None and bool((wider != self.cap).any()):
                    stmt.rollback(mark)
                    self.cap = wider
                    failure = self._place_capped(pods, req, stmt, play)
            return failure
        finally:
            self.cap = None

    def _place_capped(self, pods: list[Pod], req: Requirement | None, stmt: Statement,
                      play: Interplay) -> Failure | None:
        """``place_job`` on the cap it set."""
        mark = stmt.savepoint()
        failure = self.place(pods, req, stmt) if req else self.binpack(pods, stmt)
        if failure is not None and play.sequential and req is not None:
            # Each member's mask was its own against the pods already there (a spread's first member
            # sees a skew the members fix together): the search proposes without the rules, and the
            # members then go one by one with them.
            stmt.rollback(mark)
            self.relaxed = True
            try:
                relaxed = self.place(pods, req, stmt)
            finally:
                self.relaxed = False
            if relaxed is not None:
                stmt.rollback(mark)
            else:
                failure = None
        if failure is not None and play.cap_on is not None:
            failure = replace(failure, why=OnePerNode(failure.why, play.cap_ports, play.cap_keys))
        if not play.sequential or (failure is not None and req is not None):
            return failure
        keys = {p.key for p in pods}
        proposed = {k: n for k, n in stmt.placed.items() if k in keys}
        stmt.rollback(mark)
        if req is None:
            return self._regions(pods, proposed, stmt)
        if req.subgroups:
            # Sub-groups keep their own HyperNodes: the proposal stands only if every member passes.
            return self._sequential(pods, proposed, np.ones(len(self.cluster.nodes), dtype=np.bool_), stmt,
                                    strict=True, where=None)
        return self._widening(pods, req, proposed, stmt)

    def _widening(self, pods: list[Pod], req: Requirement, proposed: dict[str, int],
                  stmt: Statement) -> Failure | None:
        """One by one inside the smallest domain holding the proposal, then inside the next candidates
        of its level (``_siblings``), then inside each ancestor the requirement still allows (its
        scope, its anchor) and the next candidates of that level in turn: the rules between members
        may need more room, or other room, than the offerslots showed (kube-scheduler tries every
        domain of a group's key), and a job waits only when no allowed domain tried holds it."""
        tree = self.cluster.trees[req.tree]
        search = SearchScope.of(req, tree)
        domain = tree.lca(int(tree.node_domain[n]) for n in proposed.values())
        last: Failure | None = None
        while domain >= 0 and int(tree.rank[domain]) <= search.highest and search.holds(domain):
            failure = self._one_by_one_in(pods, proposed, tree, domain, stmt)
            if failure is None:
                return None
            tried: list[str] = []
            siblings, more = self._siblings(pods, req, search, tree, domain) if domain > 0 else ([], 0)
            for other in siblings:
                if self._one_by_one_in(pods, self._proposal_in(pods, req, tree, other, stmt), tree, other,
                                       stmt) is None:
                    return None
                tried.append(tree.name(other))
            if (tried or more) and isinstance(failure.why, Inside):
                failure = replace(failure, why=replace(failure.why, others=tuple(tried), untried=more))
            last = failure
            domain = int(tree.parent[domain])
        return last

    def _one_by_one_in(self, pods: list[Pod], proposed: dict[str, int], tree: TopologyTree, domain: int,
                       stmt: Statement) -> Failure | None:
        """``_sequential`` inside ``domain`` (named in the failure unless it is the whole cluster);
        nothing stays placed when it fails."""
        region = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        region[tree.subtree_nodes(domain)] = True
        region &= ~tree.outside
        mark = stmt.savepoint()
        failure = self._sequential(pods, proposed, region, stmt, strict=False,
                                   where=tree.name(domain) if domain > 0 else None)
        if failure is not None:
            stmt.rollback(mark)
        return failure

    # Other domains of one level tried after the proposed one failed on the rules between members: each
    # try places the members one by one (as ``_regions`` does for up to MAX_REGIONS domains of an
    # affinity's key), so a job sunk by its rules costs at most this many more tries per level.
    MAX_SIBLINGS = 8

    def _siblings(self, pods: list[Pod], req: Requirement, search: SearchScope, tree: TopologyTree,
                  domain: int) -> tuple[list[int], int]:
        """The other domains of ``domain``'s rank the requirement allows (``search``: up to its highest
        rank, inside its anchor) whose room takes the job, the rules between members aside as in the proposal: the first
        MAX_SIBLINGS in the order the job's style ranks its candidates (nearest the running members
        first), and how many more there are."""
        level = int(tree.rank[domain])
        vec = np.max(np.stack([v for v, _ in self._shapes(pods).values()]), axis=0)
        slots = node_offerslots(self._free(), vec, self.feasible(self._distinct(pods), tree, rules=False))
        multiple = self._multiples(tree, req)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
        desired = len(pods)
        mask = search.within(tree, tree.inside_scope(search.highest)) & (tree.rank == level) & (sums >= desired)
        mask[domain] = False
        pick: Callable[[npt.NDArray[np.bool_], int], int]
        if req.style == "tiers":
            used = domain_totals(self.cluster.used, tree.node_domain, tree.parent)
            alloc = domain_totals(self.cluster.allocatable, tree.node_domain, tree.parent)
            score = self._tier_scores(tree, alloc, used, vec, desired)
            mask &= tree.domain_node < 0  # Volcano's candidates are HyperNodes

            def pick(m: npt.NDArray[np.bool_], _: int) -> int:
                at = np.flatnonzero(m)
                return int(at[np.lexsort((tree.name_rank[at], sums[at], -score[at]))[0]]) if len(at) else -1
        else:
            mask &= contains(*achievable(slots, tree.node_domain, tree.end, multiple, desired), desired)
            order, chain = self._ties(tree, req)

            def pick(m: npt.NDArray[np.bool_], _: int) -> int:
                return int(choose_candidate(sums, tree.depth, m, desired, tree.parent, order, chain))

        out: list[int] = []
        while len(out) < self.MAX_SIBLINGS:
            chosen = self._near_peers(tree, req.peers, mask, search.highest, pick)
            if chosen < 0:
                break
            out.append(chosen)
            mask[chosen] = False
        return out, int(np.count_nonzero(mask))

    def _proposal_in(self, pods: list[Pod], req: Requirement, tree: TopologyTree, domain: int,
                     stmt: Statement) -> dict[str, int]:
        """Where the job's own search, the rules between members aside, puts its pods inside ``domain``
        alone (nothing when it does not), as the first proposal was made over all the domains."""
        saved, relaxed = self.only, self.relaxed
        inside = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        inside[tree.subtree_nodes(domain)] = True
        self.only, self.relaxed = (inside if saved is None else inside & saved), True
        mark = stmt.savepoint()
        try:
            keys = {p.key for p in pods}
            placed = self.place(pods, req, stmt) is None
            return {k: n for k, n in stmt.placed.items() if k in keys} if placed else {}
        finally:
            stmt.rollback(mark)
            self.only, self.relaxed = saved, relaxed

    MAX_REGIONS = 8

    def _regions(self, pods: list[Pod], proposed: dict[str, int], stmt: Statement) -> Failure | None:
        """Members affine to each other go together into one domain of the affinity's key: each
        domain is tried, the roomiest first; other jobs get the whole cluster."""
        everywhere = np.ones(len(self.cluster.nodes), dtype=np.bool_)
        rules = self.filters.rules
        key = next((t.topology_key for a in pods for t in a.pod_affinity
                    if any(rules.presence.term_matches(t, b) for b in pods[:64])), None)
        if key is None:
            return self._sequential(pods, proposed, everywhere, stmt, strict=False, where=None)
        dom, ndom, _ = rules.presence.domains(key)
        vec = np.max(np.stack([v for v, _ in self._shapes(pods).values()]), axis=0)
        slots = node_offerslots(self._free(), vec, self._mask(self.filters.static(pods[0]).mask))
        has = dom >= 0
        room = np.bincount(dom[has], weights=slots[has], minlength=ndom)
        first: Failure | None = None
        for d in np.argsort(-room, kind="stable")[: self.MAX_REGIONS].tolist():
            mark = stmt.savepoint()
            failure = self._sequential(pods, proposed, dom == d, stmt, strict=False, where=None)
            if failure is None:
                return None
            stmt.rollback(mark)
            first = first or failure
        return first or self._sequential(pods, proposed, everywhere, stmt, strict=False, where=None)

    def _sequential(self, pods: list[Pod], proposed: dict[str, int], region: npt.NDArray[np.bool_],
                    stmt: Statement, strict: bool, where: str | None) -> Failure | None:
        """Each pod in turn on a node every filter allows now (the members before it placed): the
        proposed node when it passes, else (unless ``strict``) the best node of ``region``: the
        domain its hard spread constraint fills least, then the most allocated. ``where``: the domain
        ``region`` is, named in the failure."""
        free = self.cluster.free()
        for pod in pods:
            vec = self.cluster.request_vector(pod)
            mask = self._mask(self.filters.mask(pod)) & region
            want = proposed.get(pod.key)
            fits_at = (vec == 0) | (free >= vec)
            if want is not None and mask[want] and bool(np.all(fits_at[want])):
                node = want
            elif strict:
                node = -1
            else:
                ok = np.flatnonzero(mask & np.all(fits_at, axis=1))
                node = self._best(pod, ok, vec) if len(ok) else -1
            if node < 0:
                counts = self.filters.explain_counts(pod, vec, only=region)
                return Failure(pod, Inside(NodesFiltered(len(self.cluster.nodes), tuple(counts.items())), where),
                               code=resolvable(bool(self._mask(self.filters.static(pod, True).mask).any())
                                               and not set(counts) <= UNRESOLVABLE),
                               filtered=tuple(sorted(counts.items())), desired=len(pods))
            stmt.assume(pod.key, node, vec)
            free[node] -= vec
        return None

    def _best(self, pod: Pod, ok: npt.NDArray[np.int64], vec: npt.NDArray[np.int64]) -> int:
        rules = self.filters.rules
        keys: list[npt.NDArray[np.float64]] = [ok.astype(np.float64)]
        keys.append(-self._most_allocated(vec)[ok])
        score = rules.score(pod, ok)
        if score is not None:
            keys[-1] = keys[-1] * 100.0 - 2.0 * score
        hard = [c for c in pod.spread if c.hard]
        if hard:
            dom, _, _ = rules.presence.domains(hard[0].topology_key)
            counts, _ = rules.spread_counts(pod, hard[0], dom >= 0)
            keys.append(counts[dom[ok]].astype(np.float64))
        return int(ok[np.lexsort(keys)[0]])

    # -- plain binpacking (no topology spec) ---------------------------------------------

    def binpack(self, pods: list[Pod], stmt: Statement) -> Failure | None:
        """Fills the most allocated nodes first, shape by shape, pods in rank order."""
        shapes: dict[tuple[object, ...], list[Pod]] = {}
        presence = self.filters.rules.presence
        for p in pods:
            req = self.cluster.request_vector(p)
            own = id(self.filters.static(p)) if self.uses_devices(p) else None  # its claims filter nodes too
            shapes.setdefault((req.tobytes(), constraints_key(p), rules_key(p, presence), own), []).append(p)
        for members in shapes.values():
            req = self.cluster.request_vector(members[0])
            mask = self._mask(self.filters.static(members[0]).mask if self.relaxed else self.filters.mask(members[0]))
            slots = node_offerslots(self._free(), req, mask)
            most = self._most_allocated(req)
            score = self.filters.rules.score(members[0], np.arange(len(slots), dtype=np.int64))
            # kube-scheduler weighs InterPodAffinity and PodTopologySpread 2 each against 1 for
            # resource fit; binpacking (0..1 here) is that 1, on the same 0..100 scale.
            rank = -most if score is None else -(100.0 * most + 2.0 * score)
            order = np.lexsort((np.arange(len(slots)), rank))
            ordered = slots[order]
            before = np.cumsum(ordered) - ordered
            take = np.clip(len(members) - before, 0, ordered)
            nodes = np.repeat(order, take)
            placed = len(nodes)
            stmt.assume_many([p.key for p in members[:placed]], nodes.astype(np.int64), req)
            if placed < len(members):
                failed = members[placed]
                counts = self.filters.explain_counts(failed, req, only=self.only)
                if self.cap is not None and self.uses_devices(failed):
                    # Nodes the member passes alone, where only the count of the job's pods their
                    # devices take (the cap) stopped it: without a reason the failure would say
                    # nothing and look unresolvable, though freeing devices may let the job fit.
                    fits = np.all((req == 0) | (self.cluster.free() >= req), axis=1)
                    alone = int(np.count_nonzero(self._mask(self.filters.mask(failed)) & fits))
                    if alone:
                        counts[AFTER_MEMBERS] += alone
                return Failure(failed, NodesFiltered(len(self.cluster.nodes), tuple(counts.items())),
                               code=resolvable(bool(self._mask(self.filters.static(failed, True).mask).any())
                                               and not set(counts) <= UNRESOLVABLE),
                               filtered=tuple(sorted(counts.items())), desired=len(members))
        return None

    def _most_allocated(self, req: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        cols = [j for j, r in enumerate(self.cluster.resources) if req[j] > 0 and r != PODS] or [
            self.cluster.res_index[PODS]]
        alloc = self.cluster.allocatable[:, cols].astype(np.float64)
        used = self.cluster.used[:, cols].astype(np.float64)
        if self.cluster.backed and self.filters.devices is not None:  # DRA's columns count its devices
            self.filters.devices.score_columns(self.cluster.resources, self.cluster.nodes, cols, alloc, used)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(alloc > 0, used / alloc, 1.0)
        return np.asarray(frac.mean(axis=1), dtype=np.float64)

    # -- network-topology gather ---------------------------------------------------------

    def place(self, pods: list[Pod], req: Requirement, stmt: Statement) -> Failure | None:
        """Places ``pods`` together as ``req`` asks; the failure names the pod that carries the reason."""
        if req.failure is not None:
            return Failure(pods[0], Text(req.failure), code=Code.UNRESOLVABLE)
        tree = self.cluster.trees[req.tree]
        search = SearchScope.of(req, tree)
        if req.subgroups or req.style == "tiers":
            failure = self.tiers(pods, req, search, stmt)
        elif req.style == "levels":
            failure = self.levels(pods, req, search, stmt)
        else:
            failure = self._gather(pods, tree, req, self._multiples(tree, req), search, stmt)
        if failure is not None and req.notes:
            return replace(failure, why=WithNotes(failure.why, req.notes))
        return failure

    @staticmethod
    def _multiples(tree: TopologyTree, req: Requirement) -> npt.NDArray[np.int64]:
        """Per domain, the podCountMultiple its layer asks (1 where none)."""
        multiple = np.ones(len(tree.order), dtype=np.int64)
        for rank, m in req.multiples:
            multiple[tree.rank == rank] = m
        return multiple

    def _gather(self, pods: list[Pod], tree: TopologyTree, req: Requirement, multiple: npt.NDArray[np.int64],
                search: SearchScope, stmt: Statement) -> Failure | None:
        first = pods[0]
        # Pods of a GangGroup may differ; the largest request of each resource and the
        # nodes every pod may use make an offerslot that holds for every member.
        shapes = self._shapes(pods)
        vec = np.max(np.stack([v for v, _ in shapes.values()]), axis=0)
        # One pod per set of node constraints and rules between pods (each member's rules count).
        distinct = self._distinct(pods)
        feasible = self.feasible(distinct, tree)
        slots = node_offerslots(self._free(), vec, feasible)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
        allowed = search.within(tree, tree.inside_scope(search.rank))
        desired = len(pods)
        # podCountMultiple is hard: a domain is a candidate only if the job splits over it in
        # whole multiples per layer, which its offerslot alone does not say.
        sets = achievable(slots, tree.node_domain, tree.end, multiple, desired)
        splits = contains(*sets, desired)
        order, chain = self._ties(tree, req)
        chosen = self._near_peers(tree, req.peers, allowed & splits, int(tree.rank[0]), lambda mask, _: int(
            choose_candidate(sums, tree.depth, mask, desired, tree.parent, order, chain)))
        if chosen < 0 and self._exact(pods, tree, req, shapes, allowed, multiple, stmt):
            return None
        if chosen < 0:
            koordinator = req.tree.labelled  # Koordinator's own words (its tree is the labelled one)
            if koordinator:
                listed = list(req.listed) or tree.domains_at(min(1, int(tree.depth.max())))
            else:  # a Topology's domains are label values: the domains of the required level
                listed = [int(d) for d in np.flatnonzero(allowed & (tree.rank == search.rank) & (tree.domain_node < 0))]
                listed = listed or tree.domains_at(min(1, int(tree.depth.max())))
            shown = tuple((tree.domain(d).layer, tree.label(d) if koordinator else tree.name(d), int(sums[d]))
                          for d in listed[:MAX_LISTED_DOMAINS])
            # Offerslots alone do not say why a node offers nothing; taints, selectors and
            # cordons do, so they follow in kube-scheduler's words.
            filtered = self.filters.static_counts(distinct)
            return Failure(first, NoCandidate(len(self.cluster.nodes), desired, koordinator, tree.domain(0).layer,
                                              shown, max(0, len(listed) - MAX_LISTED_DOMAINS),
                                              self._multiple_split(tree, slots, multiple, allowed, desired),
                                              bool(np.any(multiple > 1)) and len(shapes) > 1,
                                              tuple(sorted(filtered.items()))),
                           code=resolvable(self._resolvable(distinct, tree, filtered)),
                           filtered=tuple(sorted(filtered.items())),
                           domains=tuple((name, n) for _, name, n in shown), desired=desired,
                           closest=self._closest(distinct, tree, sums, listed[:MAX_LISTED_DOMAINS],
                                                 tree.label if koordinator else tree.name))
        alloc = allocate(sums, tree.end, tree.name_rank, *sets, chosen, desired)
        nodes = tree.subtree_nodes(chosen)
        per_node = alloc[tree.node_domain[nodes]]
        targets = np.repeat(nodes, per_node)
        for vec, members in shapes.values():
            idx = np.array(members, dtype=np.int64)
            stmt.assume_many([pods[i].key for i in members], targets[idx], vec)
        return None

    # -- Volcano: tiers, sub-groups ---------------------------------------------------------

    def tiers(self, pods: list[Pod], req: Requirement, search: SearchScope, stmt: Statement) -> Failure | None:
        """Volcano's search: the lowest tier whose HyperNode takes the job (hard: up to the highest
        tier allowed; soft: on up to the whole cluster), binpack by utilisation within a tier. With
        sub-groups, each job-level candidate is tried in that order and, inside it, every sub-group
        gets a HyperNode of its own within its own limit."""
        tree = self.cluster.trees[req.tree]
        lo, hi, scope = search.lowest, search.highest, search.outer
        free = self._free()
        alloc = domain_totals(self.cluster.allocatable, tree.node_domain, tree.parent)
        used = domain_totals(self.cluster.used, tree.node_domain, tree.parent)
        classes = self.kinds(pods)
        if not req.subgroups and len(classes) == 1:
            for within, high in self._rings(tree, req.peers, scope, hi):
                if self._tier_group(pods, tree, free, alloc, used, within, lo, high, stmt):
                    return None
            return self._tier_failure(pods, tree, search)
        by_key = {p.key: p for p in pods}
        subgroups = req.subgroups
        minimums = dict(req.policy_minimums)
        if not subgroups:
            # Unlike pods (other requests, other node selectors) cannot share one offerslot: each kind
            # is placed on its own, all of them inside one candidate domain.
            subgroups = tuple(SubGroup(f"{i}", tuple(p.key for p in members), len(members), None, policy="")
                              for i, members in enumerate(classes))
            minimums = {"": len(subgroups)}
        groups = [[by_key[k] for k in g.pods if k in by_key] for g in subgroups]
        grouped = {k for g in subgroups for k in g.pods}
        rest = [p for p in pods if p.key not in grouped]
        # Sub-groups a policy still needs beyond those whose running members already make them whole.
        wanted = {policy: max(0, n - sum(1 for g in subgroups if g.policy == policy and g.ready))
                  for policy, n in minimums.items()}
        # An offerslot that never underestimates (the smallest request, any node some pod may use)
        # prunes the candidates; the sub-groups' own placement is exact.
        shape_vecs = [v for v, _ in self._shapes(pods).values()]
        loose = np.min(np.stack(shape_vecs), axis=0)
        mask = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        for members in classes:
            mask |= self.feasible(members, tree)
        slots = node_offerslots(free, loose, mask)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, np.ones(len(tree.order), dtype=np.int64))
        need = len(rest)
        for policy, n in wanted.items():
            sizes = sorted(g.needs(len(ps)) for g, ps in zip(subgroups, groups, strict=True)
                           if g.policy == policy and ps)
            need += sum(sizes[:n])
        span = slice(scope, int(tree.end[scope]))
        ok = (tree.domain_node[span] < 0) & (tree.rank[span] >= lo) & (tree.rank[span] <= hi) & (sums[span] >= need)
        cands = [int(d) + scope for d in np.flatnonzero(ok)]
        score = self._tier_scores(tree, alloc, used, np.max(np.stack(shape_vecs), axis=0), len(pods))
        # Those nearest the running members first (``_rings``), then Volcano's order.
        near = self._peer_distance(tree, req.peers)
        cands.sort(key=lambda d: (near(d), int(tree.rank[d]), -float(score[d]), int(sums[d]), int(tree.name_rank[d])))
        # Work, not a count of candidates, bounds the search: a try costs the subtrees it searched.
        # The bound is as much as WORK_PER_DOMAIN tries of the whole job over the whole tree, and is
        # only looked at after a try, so the first candidate is always tried whatever the job's size.
        budget = self.WORK_PER_DOMAIN * len(tree.order) * (len(groups) + 1)
        tried = 0
        for cand in cands:
            if tried and budget <= 0:
                break
            tried += 1
            mark = stmt.savepoint()
            local_free, local_used = free.copy(), used.copy()
            fits, missed, work = self._subgroups_inside(cand, subgroups, groups, wanted, tree, local_free, alloc,
                                                        local_used, lo, stmt)
            if fits and rest:
                work += int(tree.end[cand]) - cand
                fits = self._tier_group(rest, tree, local_free, alloc, local_used, cand, lo, int(tree.rank[cand]),
                                        stmt)
            budget -= work
            if not fits:
                stmt.rollback(mark)
                continue
            # Enough sub-groups are placed. As Volcano goes on placing the job once it is ready, the
            # others go wherever the job's limit allows: any HyperNode whose lowest common ancestor
            # with the job's allocation (inside ``cand``) is within the limit, i.e. inside the highest
            # ancestor of ``cand`` within it (never above the job's anchor).
            region = max(tree.ancestor_at_most(cand, hi), scope)  # preorder: an ancestor has the smaller index
            if region != cand:
                for g, members in missed:
                    inside = self._subgroup_scope(tree, region, g.anchor)
                    if inside >= 0 and g.bound + len(members) >= g.min_pods:
                        self._subgroup_group(g, members, tree, local_free, alloc, local_used, inside, lo,
                                             self._subgroup_hi(tree, g, region), stmt)
            placed = stmt.placed
            # The rest wait, each whole, and say where they looked; so do the members a sub-group that
            # counts with its minimum left out (the first sub-group placing none speaks first).
            short = [(g, [p for p in members if p.key not in placed])
                     for g, members in zip(subgroups, groups, strict=True)]
            short.sort(key=lambda x: len(x[1]) < len(x[0].pods))
            left, out = next(((g, out) for g, out in short if out), (None, []))
            if left is None:
                return None
            names = dict(req.labels)
            return Failure(out[0], SubGroupLeft(
                left.id, len(left.pods), left.min_pods, tree.name(region) if region else "",
                len(left.pods) - len(out), req.composite, tree.domain(region).layer if region else "",
                names.get(left.scope, "") if left.scope is not None else ""))
        # A search the work bound cut short does not claim that no HyperNode holds the job (the
        # message says how far it went).
        listed = self._tier_domains(tree, sums, scope, lo, hi)
        code = resolvable(self._resolvable(pods, tree, None))
        offers = self._tier_offers(tree, sums, scope, lo, hi)
        if not req.subgroups:
            return Failure(pods[0], KindsNoHyperNode(len(self.cluster.nodes), hi, len(pods), tried, len(cands), offers),
                           code=code, domains=listed, desired=need)
        sub = tuple((g.id, len(g.pods), g.scope) for g in subgroups[:8])
        return Failure(pods[0], SubGroupsNoHyperNode(len(self.cluster.nodes), hi, tried, len(cands),
                                                     tuple(wanted.items()), sub, offers, req.composite, req.labels,
                                                     tuple(g.min_pods for g in subgroups[:8]),
                                                     sum(1 for g in subgroups if g.ready)),
                       code=code, domains=listed, desired=need)

    WORK_PER_DOMAIN = 64

    @staticmethod
    def _tier_scores(tree: TopologyTree, alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64],
                     vec: npt.NDArray[np.int64], count: int) -> npt.NDArray[np.float64]:
        """Per domain, the utilisation of the requested resources once ``count`` pods of ``vec`` are
        placed in it (Volcano's binpack score within a tier)."""
        cols = vec > 0
        with np.errstate(divide="ignore", invalid="ignore"):
            util = np.where(alloc[:, cols] > 0, (used[:, cols] + count * vec[cols]) / alloc[:, cols], 0.0)
        return np.asarray(util.mean(axis=1) if util.shape[1] else np.zeros(len(tree.order)), dtype=np.float64)

    @staticmethod
    def _peer_distance(tree: TopologyTree, peers: int | None) -> Callable[[int], int]:
        """A domain's distance from the job's running members: the rank of their lowest common
        ancestor with it (the order of ``_rings``; 0 for every domain when none run)."""
        if peers is None:
            return lambda d: 0
        return lambda d: int(tree.rank[tree.lca((d, peers))])

    def _subgroups_inside(self, cand: int, subgroups: tuple[SubGroup, ...], groups: list[list[Pod]],
                          wanted: dict[str, int], tree: TopologyTree, free: npt.NDArray[np.int64],
                          alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64], lo: int,
                          stmt: Statement) -> tuple[bool, list[tuple[SubGroup, list[Pod]]], int]:
        """Places every sub-group that can, in order, each inside one HyperNode of its own limit
        within ``cand``: whether each policy got the sub-groups it wants (the try ends as soon as it
        no longer can, which changes nothing but its cost), the sub-groups left out, and the work
        done (the subtrees searched)."""
        done = dict.fromkeys(wanted, 0)
        untried: dict[str, int] = {}
        for g, members in zip(subgroups, groups, strict=True):
            if members:
                untried[g.policy] = untried.get(g.policy, 0) + 1
        missed: list[tuple[SubGroup, list[Pod]]] = []
        work = 0
        for g, members in zip(subgroups, groups, strict=True):
            if not members:
                continue
            untried[g.policy] -= 1
            # One that cannot reach its size now (running and pending members together) waits whole.
            if g.bound + len(members) >= g.min_pods:
                inside = self._subgroup_scope(tree, cand, g.anchor)
                if inside >= 0:
                    work += int(tree.end[inside]) - inside
                    if self._subgroup_group(g, members, tree, free, alloc, used, inside, lo,
                                            self._subgroup_hi(tree, g, cand), stmt):
                        # One whose running members make it whole is counted in ``wanted`` already.
                        done[g.policy] = done.get(g.policy, 0) + (0 if g.ready else 1)
                        continue
            missed.append((g, members))
            if done.get(g.policy, 0) + untried[g.policy] < wanted.get(g.policy, 0):
                return False, missed, work
        return all(done.get(policy, 0) >= n for policy, n in wanted.items()), missed, work

    def _subgroup_group(self, g: SubGroup, members: list[Pod], tree: TopologyTree, free: npt.NDArray[np.int64],
                        alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64], scope: int, lo: int,
                        hi: int, stmt: Statement) -> bool:
        """A sub-group inside one domain of ``scope``'s subtree (``_tier_group``): all its members, or,
        for one that counts with its minimum (``SubGroup.skips``), the members that fit, each given the
        ones before it, when with its running ones they reach ``min_pods``."""
        if self._tier_group(members, tree, free, alloc, used, scope, lo, hi, stmt):
            return True
        if not g.skips:
            return False
        kinds = self.kinds(members)
        kind = {p.key: i for i, same in enumerate(kinds) for p in same}
        settled = {i for i, same in enumerate(kinds) if not self.filters.rules.applies(same[0])}
        start, free0, used0 = stmt.savepoint(), free.copy(), used.copy()

        def attempt(some: list[Pod], keep: bool) -> bool | None:
            mark = stmt.savepoint()
            trial_free, trial_used = free.copy(), used.copy()
            if not self._tier_group(some, tree, trial_free, alloc, trial_used, scope, lo, hi, stmt):
                stmt.rollback(mark)
                return False
            if keep:
                free[:], used[:] = trial_free, trial_used
            else:
                stmt.rollback(mark)
            return None

        def reset() -> None:
            stmt.rollback(start)
            free[:], used[:] = free0, used0

        def add(placed: list[Pod], pod: Pod) -> bool | None:
            # The child is whole inside one domain: the member joins the ones placed by placing them
            # all again together (a pod placed alone could take another domain).
            reset()
            if attempt([*placed, pod], True) is None:
                return None
            if placed:
                attempt(placed, True)
            return False

        placed, _ = skipping(members, lambda some: g.bound + len(some) >= g.min_pods, attempt, add, reset,
                             kind, settled)
        return bool(placed)

    @staticmethod
    def _subgroup_hi(tree: TopologyTree, g: SubGroup, within: int) -> int:
        """The highest rank a sub-group may take inside ``within``: its own hard limit, if lower."""
        return g.highest(int(tree.rank[within]))

    @staticmethod
    def _rings(tree: TopologyTree, peers: int | None, outer: int, highest: int) -> Iterator[tuple[int, int]]:
        """Where a job with running members looks, in turn, with the highest rank a choice there may
        take: the domain of those members (``peers``), then each of its ancestors inside ``outer`` up
        to rank ``highest``, last ``outer`` itself up to ``highest``. A candidate whose lowest common
        ancestor with the running members is lower comes first (Volcano's score for a job's allocated
        HyperNode; Koordinator and KAI keep a job together the same way): all of a job in one domain
        when it can be."""
        around = peers if peers is not None and outer <= peers < int(tree.end[outer]) else -1
        while around > outer and int(tree.rank[around]) <= highest:
            yield around, int(tree.rank[around])
            around = int(tree.parent[around])
        yield outer, highest

    @classmethod
    def _near_peers(cls, tree: TopologyTree, peers: int | None, mask: npt.NDArray[np.bool_], highest: int,
                    search: Callable[[npt.NDArray[np.bool_], int], int]) -> int:
        """``search`` (a choice among ``mask``'s domains up to rank ``highest``) in each of ``_rings``
        over the whole tree, the first choice made."""
        for within, high in cls._rings(tree, peers, 0, highest):
            chosen = search(mask if within == 0 else _subtree(tree, within, mask), high)
            if chosen >= 0:
                return chosen
        return -1

    @staticmethod
    def _ties(tree: TopologyTree, req: Requirement) -> tuple[npt.NDArray[np.int64], bool]:
        """How ``choose_candidate`` tells equally tight domains apart for ``req`` (``Requirement.ties``):
        the last key, and whether the ancestor chain comes before it."""
        return (tree.path_rank, False) if req.ties == "values" else (tree.name_rank, True)

    @staticmethod
    def _subgroup_scope(tree: TopologyTree, cand: int, anchor: int | None) -> int:
        """Where a sub-group may go inside ``cand``: all of it, or only around its running members."""
        if anchor is None or anchor <= cand < tree.end[anchor]:
            return cand
        return anchor if cand <= anchor < tree.end[cand] else -1

    def kinds(self, pods: list[Pod]) -> list[list[Pod]]:
        """Pods by request and by the nodes their filters allow: the kinds of pod of a job."""
        out: dict[tuple[bytes, int, object], list[Pod]] = {}
        for p in pods:
            key = (self.cluster.request_vector(p).tobytes(), id(self.filters.static(p)),
                   rules_key(p, self.filters.rules.presence) if self.filters.rules.applies(p) else None)
            out.setdefault(key, []).append(p)
        return list(out.values())

    def _tier_group(self, pods: list[Pod], tree: TopologyTree, free: npt.NDArray[np.int64],
                    alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64], scope: int, lo: int, hi: int,
                    stmt: Statement) -> bool:
        """Places ``pods`` inside one domain of ``scope``'s subtree with rank in [lo, hi], or nothing;
        ``free`` and ``used`` are updated with what was placed."""
        shapes = self._shapes(pods)
        vec = np.max(np.stack([v for v, _ in shapes.values()]), axis=0)
        feasible = self.feasible(pods, tree)
        chosen, per_node = tier_place(free, vec, feasible, tree.node_domain, tree.domain_node, tree.parent,
                                      tree.end, tree.rank, tree.name_rank, alloc, used, scope, lo, hi, len(pods))
        if chosen < 0:
            return False
        targets = np.repeat(np.arange(len(per_node), dtype=np.int64), per_node)
        for shape, members in shapes.values():
            idx = np.array(members, dtype=np.int64)
            stmt.assume_many([pods[i].key for i in members], targets[idx], shape)
        free -= per_node[:, None] * vec[None, :]
        add_usage(used, per_node, vec, tree.node_domain, tree.parent)
        return True

    def _tier_failure(self, pods: list[Pod], tree: TopologyTree, search: SearchScope) -> Failure:
        scope, lo, hi = search.outer, search.lowest, search.highest
        vec = np.max(np.stack([self.cluster.request_vector(p) for p in pods]), axis=0)
        feasible = self.feasible(pods, tree)
        slots = node_offerslots(self._free(), vec, feasible)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, np.ones(len(tree.order), dtype=np.int64))
        filtered = self.filters.static_counts(pods)
        offers = self._tier_offers(tree, sums, scope, lo, hi)
        best = self._tier_best(tree, sums, scope, lo, hi)
        return Failure(pods[0], NoHyperNode(len(self.cluster.nodes), search.hard,
                                            hi if search.limited else None, len(pods), offers),
                       code=resolvable(self._resolvable(pods, tree, filtered)),
                       filtered=tuple(sorted(filtered.items())),
                       domains=tuple((tree.name(d) or "the cluster", int(sums[d])) for d in best),
                       desired=len(pods),
                       closest=self._closest(pods, tree, sums, best, lambda d: tree.name(d) or "the cluster"))

    @staticmethod
    def _tier_best(tree: TopologyTree, sums: npt.NDArray[np.int64], scope: int, lo: int, hi: int) -> list[int]:
        """The HyperNodes searched, the most offerslots first (for ``Failure.domains``)."""
        inner = np.zeros(len(tree.order), dtype=np.bool_)
        inner[scope: tree.end[scope]] = True
        at = np.flatnonzero(inner & (tree.domain_node < 0) & (tree.rank >= lo) & (tree.rank <= hi))
        return [int(d) for d in at[np.lexsort((tree.name_rank[at], tree.rank[at], -sums[at]))][:MAX_LISTED_DOMAINS]]

    @classmethod
    def _tier_domains(cls, tree: TopologyTree, sums: npt.NDArray[np.int64], scope: int, lo: int,
                      hi: int) -> tuple[tuple[str, int], ...]:
        """The HyperNodes searched with their offerslots, the most first."""
        return tuple((tree.name(d) or "the cluster", int(sums[d])) for d in cls._tier_best(tree, sums, scope, lo, hi))

    def _closest(self, pods: list[Pod], tree: TopologyTree, sums: npt.NDArray[np.int64], listed: list[int],
                 name: Callable[[int], str]) -> Closest | None:
        """What the domain of ``listed`` with the most offerslots lacked (the first by name among
        equals, as ``koordpy explain`` lists them): per reason, the nodes of it that the job's pods
        cannot use at all, the most any one shape of them is refused by. None unless ``diagnose``."""
        if not self.diagnose or not listed:
            return None
        d = min(listed, key=lambda d: (-int(sums[d]), natural_key(name(d))))
        nodes = tree.subtree_nodes(d)
        only = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        only[nodes] = True
        lacks: Counter[str] = Counter()
        for pod in self._distinct(pods):
            for why, n in self.filters.explain_counts(pod, self.cluster.request_vector(pod), self._mask(only)).items():
                lacks[why] = max(lacks[why], n)
        return Closest(name(d), int(sums[d]), len(nodes), tuple(sorted(lacks.items(), key=lambda wn: (-wn[1], wn[0]))))

    @staticmethod
    def _tier_offers(tree: TopologyTree, sums: npt.NDArray[np.int64], scope: int, lo: int,
                     hi: int) -> tuple[TierOffer, ...]:
        """The largest offerslot in each tier searched, and where."""
        parts = []
        inner = np.zeros(len(tree.order), dtype=np.bool_)
        inner[scope: tree.end[scope]] = True
        inner &= tree.domain_node < 0
        for rank in sorted({int(r) for r in tree.rank[inner] if lo <= r <= hi}):
            at = np.flatnonzero(inner & (tree.rank == rank))
            best = int(at[np.lexsort((tree.name_rank[at], -sums[at]))[0]])
            name = "the cluster" if best == 0 else tree.name(best)
            parts.append(TierOffer(rank, int(sums[best]), len(at), name))
        return tuple(parts)

    # -- KAI: preferred level inside the required one ----------------------------------------

    def levels(self, pods: list[Pod], req: Requirement, search: SearchScope, stmt: Statement) -> Failure | None:
        """The smallest domain at the preferred level that takes the job, among all of that level
        inside some domain of the required level; else one level up, and again, up to the
        required level (or the cluster when none is required)."""
        tree = self.cluster.trees[req.tree]
        assert req.preferred is not None
        shapes = self._shapes(pods)
        vec = np.max(np.stack([v for v, _ in shapes.values()]), axis=0)
        slots = node_offerslots(self._free(), vec, self.feasible(pods, tree))
        ones = np.ones(len(tree.order), dtype=np.int64)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, ones)
        scope = search.highest
        inside = search.within(tree, tree.inside_scope(scope))
        desired = len(pods)
        preferred = req.preferred
        order, chain = self._ties(tree, req)

        def climb(mask: npt.NDArray[np.bool_], highest: int) -> int:
            for rank in range(preferred, highest + 1):
                found = int(choose_candidate(sums, tree.depth, mask & (tree.rank == rank), desired, tree.parent,
                                             order, chain))
                if found >= 0:
                    return found
            return -1

        chosen = self._near_peers(tree, req.peers, inside, scope, climb)
        if chosen < 0:
            names = dict(req.labels)
            listed = [int(d) for d in np.flatnonzero(inside & (tree.rank == scope))][:MAX_LISTED_DOMAINS]
            shown = tuple((tree.name(d) or "the cluster", int(sums[d])) for d in listed)
            return Failure(pods[0], NoDomainAtLevel(len(self.cluster.nodes), tree.domain(0).layer,
                                                    str(names.get(req.preferred, req.preferred)),
                                                    names.get(scope, "the cluster"), desired, shown),
                           domains=shown, desired=desired,
                           closest=self._closest(pods, tree, sums, listed, lambda d: tree.name(d) or "the cluster"))
        sets = achievable(slots, tree.node_domain, tree.end, ones, desired)
        alloc = allocate(sums, tree.end, tree.name_rank, *sets, chosen, desired)
        nodes = tree.subtree_nodes(chosen)
        targets = np.repeat(nodes, alloc[tree.node_domain[nodes]])
        for shape, members in shapes.values():
            idx = np.array(members, dtype=np.int64)
            stmt.assume_many([pods[i].key for i in members], targets[idx], shape)
        return None

    def _multiple_split(self, tree: TopologyTree, slots: npt.NDArray[np.int64], multiple: npt.NDArray[np.int64],
                        allowed: npt.NDArray[np.bool_], desired: int) -> tuple[tuple[int, str], ...]:
        """Why podCountMultiple, not room, refused the job: some allowed domain has the offerslots
        but no split into whole multiples (the multiple per layer), else nothing. (Unlike members
        were not tried one by one either: that path cannot keep the multiples.)"""
        if not bool(np.any(multiple > 1)):
            return ()
        room = subtree_sums(slots, tree.node_domain, tree.parent, np.ones_like(multiple))
        if not bool(np.any(allowed & (room >= desired))):
            return ()
        return tuple((int(multiple[tree.depth == depth][0]), tree.known_layers[depth])
                     for depth in sorted({int(x) for x in tree.depth[multiple > 1]}))

    MAX_EXACT_TRIES = 32

    def _exact(self, pods: list[Pod], tree: TopologyTree, req: Requirement,
               shapes: dict[bytes, tuple[npt.NDArray[np.int64], list[int]]], allowed: npt.NDArray[np.bool_],
               multiple: npt.NDArray[np.int64], stmt: Statement) -> bool:
        """For a GangGroup of unlike pods (a small master beside big workers, say) that the
        common shape cannot place: try the domains the largest group of like pods fits, in the
        same binpack order, placing every pod where it really fits. Not used with
        podCountMultiple, whose per-domain counts only the offerslot path keeps."""
        if len(shapes) < 2 or bool(np.any(multiple > 1)):
            return False
        vec, members = max(shapes.values(), key=lambda s: len(s[1]))
        mask = self.feasible([pods[i] for i in members], tree)
        sums = subtree_sums(node_offerslots(self._free(), vec, mask), tree.node_domain, tree.parent,
                            np.ones(len(tree.order), dtype=np.int64))
        fits = [int(d) for d in np.flatnonzero(allowed & (sums >= len(members)))]
        order, chain = self._ties(tree, req)
        fits.sort(key=lambda d: (-int(tree.depth[d]), int(sums[d]),
                                 ancestor_sums_py(sums, tree.parent, d) if chain else (), int(order[d])))
        for domain in fits[: self.MAX_EXACT_TRIES]:
            mark = stmt.savepoint()
            if self._first_fit(pods, tree.subtree_nodes(domain), tree, stmt):
                return True
            stmt.rollback(mark)
        return False

    def _first_fit(self, pods: list[Pod], nodes: npt.NDArray[np.int64], tree: TopologyTree, stmt: Statement) -> bool:
        """Each pod, in rank order, on the first of ``nodes`` (depth-first order) it fits."""
        for pod in pods:
            vec = self.cluster.request_vector(pod)
            free = self.cluster.allocatable[nodes] - self.cluster.used[nodes]
            fits = np.all((vec == 0) | (free >= vec), axis=1)
            ok = self._mask(self.filters.mask(pod))[nodes] & ~tree.outside[nodes] & fits
            hit = np.flatnonzero(ok)
            if hit.size == 0:
                return False
            stmt.assume(pod.key, int(nodes[hit[0]]), vec)
        return True

    def feasible(self, pods: list[Pod], tree: TopologyTree, rules: bool = True) -> npt.NDArray[np.bool_]:
        """Nodes every one of ``pods`` may use and that the tree's topology holds (``rules``: the
        rules between pods too, given where pods are now; preemption prices candidates without
        them, as removing pods may lift them)."""
        masks = {id(m): m for m in (self.filters.static(p, loose=not rules).mask for p in pods)}
        mask = self._mask(~tree.outside)
        for m in masks.values():
            mask = mask & m
        ruled = {rules_key(p, self.filters.rules.presence): p for p in pods
                 if rules and not self.relaxed and self.filters.rules.applies(p)}
        for p in ruled.values():
            check = self.filters.check(p)
            if check is not None:
                mask = mask & check.mask
        return np.asarray(mask, dtype=np.bool_)

    def _resolvable(self, pods: list[Pod], tree: TopologyTree, filtered: Counter[str] | None) -> bool:
        """Whether removing pods could let the job fit: some node passes the node-only filters, and
        the rules between pods that removed nodes are not only those no removal lifts (a missing
        affinity match, a missing label)."""
        kinds = {id(self.filters.static(p)): p for p in pods}.values()
        if not any(bool(self.feasible([p], tree, rules=False).any()) for p in kinds):
            return False
        ruled = set(filtered or ()) & {*UNRESOLVABLE, *RULE_REASONS}
        return not ruled or not ruled <= UNRESOLVABLE

    def _shapes(self, pods: list[Pod]) -> dict[bytes, tuple[npt.NDArray[np.int64], list[int]]]:
        """Pods grouped by request vector: (vector, positions in ``pods``)."""
        return self.cluster.shapes(pods)

    def scope_domains(self, pods: list[Pod], req: Requirement) -> Iterator[tuple[npt.NDArray[np.bool_], int]]:
        """The domains of ``req``'s scope the job may use (inside its anchor), each as its nodes and
        the most of ``pods`` it could take (each kind of pod up to its offerslots there), the roomiest
        first: the placements kube-scheduler's group cycle evaluates one by one for a topology key.
        A domain's node mask is made when it is reached (the caller stops after a few)."""
        tree = self.cluster.trees[req.tree]
        assert req.scope is not None
        at = np.flatnonzero(SearchScope.of(req, tree).within(tree, tree.rank == req.scope) & (tree.domain_node < 0))
        free = self._free()
        slots = [(len(members), node_offerslots(free, self.cluster.request_vector(members[0]),
                                                self._mask(self.filters.static(members[0]).mask & ~tree.outside)))
                 for members in self.kinds(pods)]
        rooms = []
        for d in at.tolist():
            nodes = tree.subtree_nodes(d)
            room = sum(min(n, int(per[nodes].sum())) for n, per in slots)
            if room:
                rooms.append((room, d))
        rooms.sort(key=lambda x: (-x[0], int(tree.name_rank[x[1]])))
        for room, d in rooms:
            mask = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
            mask[tree.subtree_nodes(d)] = True
            yield mask & ~tree.outside, room

    # A pod without node constraints or rules between pods, where no present pod repels any: its
    # key in ``_distinct``, as ``constraints_key`` and the rules would make it.
    _PLAIN = (((), (), (), ()), None)

    def _distinct(self, pods: list[Pod]) -> list[Pod]:
        """One pod per set of node constraints and rules between pods (each member's rules count):
        the last of each, in the order the sets first appear."""
        rules = self.filters.rules
        presence = rules.presence
        repelling = presence.holding > 0
        plain = self._PLAIN
        out: dict[tuple[object, ...], Pod] = {}
        claims = self.filters.devices
        for p in pods:
            devices = claims is not None and claims.uses(p)  # its claims filter nodes too
            if repelling or devices or (p.node_selector or p.affinity_terms or p.tolerations or p.required_features
                                        or p.pod_affinity or p.pod_anti_affinity or p.host_ports or p.spread):
                key = (constraints_key(p), rules_key(p, presence) if rules.applies(p) else None)
                if devices:
                    # Pods whose claims have equal keys pass DynamicResources' filter on the same
                    # nodes; their volumes' filters are their own.
                    assert claims is not None
                    out[(*key, id(self.filters.static(p)) if p.volumes else claims.key(p))] = p
                else:
                    out[key] = p
            else:
                out[plain] = p
        return list(out.values())
