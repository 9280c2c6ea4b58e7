"""The ``Placer``'s entry for a job (``Placer.place_job``): the rules between its members. Members
that repel each other cap every node at one; members bound by wider rules (topology spread inside a
gang, affinity, anti-affinity over zones) are placed one by one inside the domain the topology search
proposed (``_sequential``), widening to the next domains of its level and its ancestors the job's
scope allows, or into the domains of an affinity's key without topology.

Does not belong here: the styles' searches (``styles`` and the modules it joins), the rules
themselves (``koordpy.core.podrules``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.core.placement.base import Options
from koordpy.core.placement.styles import Styles
from koordpy.core.podrules import UNRESOLVABLE, Interplay
from koordpy.core.requirement import Requirement, SearchScope
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.core.verdicts import (
    Failure,
    Inside,
    NodesFiltered,
    OnePerNode,
    resolvable,
)
from koordpy.kernels import (
    achievable,
    choose_candidate,
    contains,
    node_offerslots,
    subtree_sums,
)
from koordpy.kernels.tiers import domain_totals


class Placer(Styles):
    def place_job(self, pods: list[Pod], req: Requirement | None, stmt: Statement) -> Failure | None:
        """Places a job (``req``: its topology requirement, None for plain binpacking) so that the
        rules between pods hold for every member against the pods already there and against the
        members placed before it, in rank order, so that any prefix a Strict gang binds holds too.
        Members that repel each other per node (self anti-affinity on the hostname, a shared host
        port) cap every node's offerslot at one; members bound by wider rules (spread, affinity,
        anti-affinity over zones) are placed one by one inside the domain the topology search
        chose, each on the node the search proposed when the rules allow it."""
        play = self.filters.rules.interplay(pods) if len(pods) > 1 else Interplay()
        cap = self._caps(pods, play.cap_on)
        mark = stmt.savepoint()
        failure = self._place_capped(pods, req, stmt, play, Options(cap=cap))
        devices = self.filters.devices
        if failure is not None and cap is not None and devices is not None and devices.prefers(pods):
            # Counted pod after pod, each member takes the firstAvailable alternative it prefers
            # (kube-scheduler's order); only a job that does not fit so is placed again on the
            # count with its devices searched as a whole (less preferred alternatives, more pods
            # a node), which would otherwise pack members onto halves beside idle whole devices.
            wider = self._caps(pods, play.cap_on, together=True)
            if wider is not None and bool((wider != cap).any()):
                stmt.rollback(mark)
                failure = self._place_capped(pods, req, stmt, play, Options(cap=wider))
        return failure

    def _place_capped(self, pods: list[Pod], req: Requirement | None, stmt: Statement,
                      play: Interplay, opts: Options) -> Failure | None:
        """``place_job`` on the cap it set (``opts``)."""
        mark = stmt.savepoint()
        failure = self._place(pods, req, stmt, opts) if req else self._binpack(pods, stmt, opts)
        if failure is not None and play.sequential and req is not None:
            # Each member's mask was its own against the pods already there (a spread's first member
            # sees a skew the members fix together): the search proposes without the rules, and the
            # members then go one by one with them.
            stmt.rollback(mark)
            relaxed = self._place(pods, req, stmt, replace(opts, relaxed=True))
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
            return self._regions(pods, proposed, stmt, opts)
        if req.subgroups:
            # Sub-groups keep their own HyperNodes: the proposal stands only if every member passes.
            return self._sequential(pods, proposed, np.ones(len(self.cluster.nodes), dtype=np.bool_), stmt,
                                    strict=True, where=None)
        return self._widening(pods, req, proposed, stmt, opts)

    def _widening(self, pods: list[Pod], req: Requirement, proposed: dict[str, int],
                  stmt: Statement, opts: Options) -> Failure | None:
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
            siblings, more = self._siblings(pods, req, search, tree, domain, opts) if domain > 0 else ([], 0)
            for other in siblings:
                if self._one_by_one_in(pods, self._proposal_in(pods, req, tree, other, stmt, opts), tree, other,
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
                  domain: int, opts: Options) -> tuple[list[int], int]:
        """The other domains of ``domain``'s rank the requirement allows (``search``: up to its highest
        rank, inside its anchor) whose room takes the job, the rules between members aside as in the proposal: the first
        MAX_SIBLINGS in the order the job's style ranks its candidates (nearest the running members
        first), and how many more there are."""
        level = int(tree.rank[domain])
        vec = np.max(np.stack([v for v, _ in self._shapes(pods).values()]), axis=0)
        slots = node_offerslots(self._free(opts), vec, self._feasible(self._distinct(pods), tree, opts, rules=False))
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
                     stmt: Statement, opts: Options) -> dict[str, int]:
        """Where the job's own search, the rules between members aside, puts its pods inside ``domain``
        alone (nothing when it does not), as the first proposal was made over all the domains."""
        saved = self.only
        inside = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        inside[tree.subtree_nodes(domain)] = True
        self.only = inside if saved is None else inside & saved
        mark = stmt.savepoint()
        try:
            keys = {p.key for p in pods}
            placed = self._place(pods, req, stmt, replace(opts, relaxed=True)) is None
            return {k: n for k, n in stmt.placed.items() if k in keys} if placed else {}
        finally:
            stmt.rollback(mark)
            self.only = saved

    MAX_REGIONS = 8

    def _regions(self, pods: list[Pod], proposed: dict[str, int], stmt: Statement, opts: Options) -> Failure | None:
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
        slots = node_offerslots(self._free(opts), vec, self._mask(self.filters.static(pods[0]).mask))
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
