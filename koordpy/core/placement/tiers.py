"""The "tiers" style: Volcano's search, soft mode included (the lowest tier whose HyperNode takes
the job, hard up to the highest tier, soft on up to the root, as the job's ``SearchScope`` says),
binpack by utilisation within a tier, sub-groups each inside a HyperNode of their own, and the
failures that say what each tier offered.

Does not belong here: how far the search may reach (``SearchScope``), the other styles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.core.placement.base import Options
from koordpy.core.placement.explain import Explain
from koordpy.core.placement.search import MAX_LISTED_DOMAINS, Search
from koordpy.core.requirement import Requirement, SearchScope, SubGroup
from koordpy.core.skipping import skipping
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.core.verdicts import (
    Failure,
    KindsNoHyperNode,
    NoHyperNode,
    SubGroupLeft,
    SubGroupsNoHyperNode,
    TierOffer,
    resolvable,
)
from koordpy.kernels import (
    node_offerslots,
    subtree_sums,
)
from koordpy.kernels.tiers import add_usage, domain_totals, tier_place


@dataclass(frozen=True)
class _Parts:
    """A job placed sub-group by sub-group (``Tiers._tier_parts``)."""

    subgroups: tuple[SubGroup, ...]
    groups: list[list[Pod]]  # each sub-group's pending members
    rest: list[Pod]  # pods of no sub-group
    wanted: dict[str, int]  # policy -> sub-groups it still needs


class Tiers(Explain, Search):
    def tiers(self, pods: list[Pod], req: Requirement, search: SearchScope, stmt: Statement,
              opts: Options) -> Failure | None:
        """Volcano's search: the lowest tier whose HyperNode takes the job (hard: up to the highest
        tier allowed; soft: on up to the whole cluster), binpack by utilisation within a tier. With
        sub-groups, each job-level candidate is tried in that order and, inside it, every sub-group
        gets a HyperNode of its own within its own limit."""
        tree = self.cluster.trees[req.tree]
        lo, hi, scope = search.lowest, search.highest, search.outer
        free = self._free(opts)
        alloc = domain_totals(self.cluster.allocatable, tree.node_domain, tree.parent)
        used = domain_totals(self.cluster.used, tree.node_domain, tree.parent)
        classes = self.kinds(pods)
        if not req.subgroups and len(classes) == 1:
            for within, high in self._rings(tree, req.peers, scope, hi):
                if self._tier_group(pods, tree, free, alloc, used, within, lo, high, stmt, opts):
                    return None
            return self._tier_failure(pods, tree, search, opts)
        part = self._tier_parts(pods, req, classes)
        cands, sums, need = self._tier_candidates(pods, req, tree, part, classes, free, alloc, used, search, opts)
        # Work, not a count of candidates, bounds the search: a try costs the subtrees it searched.
        # The bound is as much as WORK_PER_DOMAIN tries of the whole job over the whole tree, and is
        # only looked at after a try, so the first candidate is always tried whatever the job's size.
        budget = self.WORK_PER_DOMAIN * len(tree.order) * (len(part.groups) + 1)
        tried = 0
        for cand in cands:
            if tried and budget <= 0:
                break
            tried += 1
            mark = stmt.savepoint()
            local_free, local_used = free.copy(), used.copy()
            fits, missed, work = self._subgroups_inside(cand, part.subgroups, part.groups, part.wanted, tree,
                                                        local_free, alloc, local_used, lo, stmt, opts)
            if fits and part.rest:
                work += int(tree.end[cand]) - cand
                fits = self._tier_group(part.rest, tree, local_free, alloc, local_used, cand, lo, int(tree.rank[cand]),
                                        stmt, opts)
            budget -= work
            if not fits:
                stmt.rollback(mark)
                continue
            return self._tier_left(req, tree, part, missed, cand, local_free, alloc, local_used, search, stmt, opts)
        return self._tier_none(pods, req, tree, part, sums, search, tried, len(cands), need)

    def _tier_parts(self, pods: list[Pod], req: Requirement, classes: list[list[Pod]]) -> _Parts:
        """The job's sub-groups (each kind of pod one, when it has none), their pending members, the
        pods of none, and the sub-groups each policy still needs."""
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
        return _Parts(subgroups, groups, rest, wanted)

    def _tier_candidates(self, pods: list[Pod], req: Requirement, tree: TopologyTree, part: _Parts,
                         classes: list[list[Pod]], free: npt.NDArray[np.int64], alloc: npt.NDArray[np.float64],
                         used: npt.NDArray[np.float64], search: SearchScope,
                         opts: Options) -> tuple[list[int], npt.NDArray[np.int64], int]:
        """The job-level candidates in the order they are tried, the offerslots that pruned them, and
        the pods the sub-groups each policy needs (and those of none) come to."""
        scope, lo, hi = search.outer, search.lowest, search.highest
        subgroups, groups, wanted = part.subgroups, part.groups, part.wanted
        # An offerslot that never underestimates (the smallest request, any node some pod may use)
        # prunes the candidates; the sub-groups' own placement is exact.
        shape_vecs = [v for v, _ in self._shapes(pods).values()]
        loose = np.min(np.stack(shape_vecs), axis=0)
        mask = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        for members in classes:
            mask |= self._feasible(members, tree, opts)
        slots = node_offerslots(free, loose, mask)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, np.ones(len(tree.order), dtype=np.int64))
        need = len(part.rest)
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
        return cands, sums, need

    def _tier_left(self, req: Requirement, tree: TopologyTree, part: _Parts, missed: list[tuple[SubGroup, list[Pod]]],
                   cand: int, local_free: npt.NDArray[np.int64], alloc: npt.NDArray[np.float64],
                   local_used: npt.NDArray[np.float64], search: SearchScope, stmt: Statement,
                   opts: Options) -> Failure | None:
        """Enough sub-groups are placed inside ``cand``: the ones left out placed where the job's
        limit allows, and the failure of those that still wait, if any."""
        scope, lo, hi = search.outer, search.lowest, search.highest
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
                                         self._subgroup_hi(tree, g, region), stmt, opts)
        placed = stmt.placed
        # The rest wait, each whole, and say where they looked; so do the members a sub-group that
        # counts with its minimum left out (the first sub-group placing none speaks first).
        short = [(g, [p for p in members if p.key not in placed])
                 for g, members in zip(part.subgroups, part.groups, strict=True)]
        short.sort(key=lambda x: len(x[1]) < len(x[0].pods))
        left, out = next(((g, out) for g, out in short if out), (None, []))
        if left is None:
            return None
        names = dict(req.labels)
        return Failure(out[0], SubGroupLeft(
            left.id, len(left.pods), left.min_pods, tree.name(region) if region else "",
            len(left.pods) - len(out), req.composite, tree.domain(region).layer if region else "",
            names.get(left.scope, "") if left.scope is not None else ""))

    def _tier_none(self, pods: list[Pod], req: Requirement, tree: TopologyTree, part: _Parts,
                   sums: npt.NDArray[np.int64], search: SearchScope, tried: int, cands: int, need: int) -> Failure:
        """No candidate tried took the job: what each tier offered, and how many candidates were tried."""
        scope, lo, hi = search.outer, search.lowest, search.highest
        subgroups, wanted = part.subgroups, part.wanted
        # A search the work bound cut short does not claim that no HyperNode holds the job (the
        # message says how far it went).
        listed = self._tier_domains(tree, sums, scope, lo, hi)
        code = resolvable(self._resolvable(pods, tree, None))
        offers = self._tier_offers(tree, sums, scope, lo, hi)
        if not req.subgroups:
            return Failure(pods[0], KindsNoHyperNode(len(self.cluster.nodes), hi, len(pods), tried, cands, offers),
                           code=code, domains=listed, desired=need)
        sub = tuple((g.id, len(g.pods), g.scope) for g in subgroups[:8])
        return Failure(pods[0], SubGroupsNoHyperNode(len(self.cluster.nodes), hi, tried, cands,
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

    def _subgroups_inside(self, cand: int, subgroups: tuple[SubGroup, ...], groups: list[list[Pod]],
                          wanted: dict[str, int], tree: TopologyTree, free: npt.NDArray[np.int64],
                          alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64], lo: int,
                          stmt: Statement, opts: Options) -> tuple[bool, list[tuple[SubGroup, list[Pod]]], int]:
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
                                            self._subgroup_hi(tree, g, cand), stmt, opts):
                        # One whose running members make it whole is counted in ``wanted`` already.
                        done[g.policy] = done.get(g.policy, 0) + (0 if g.ready else 1)
                        continue
            missed.append((g, members))
            if done.get(g.policy, 0) + untried[g.policy] < wanted.get(g.policy, 0):
                return False, missed, work
        return all(done.get(policy, 0) >= n for policy, n in wanted.items()), missed, work

    def _subgroup_group(self, g: SubGroup, members: list[Pod], tree: TopologyTree, free: npt.NDArray[np.int64],
                        alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64], scope: int, lo: int,
                        hi: int, stmt: Statement, opts: Options) -> bool:
        """A sub-group inside one domain of ``scope``'s subtree (``_tier_group``): all its members, or,
        for one that counts with its minimum (``SubGroup.skips``), the members that fit, each given the
        ones before it, when with its running ones they reach ``min_pods``."""
        if self._tier_group(members, tree, free, alloc, used, scope, lo, hi, stmt, opts):
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
            if not self._tier_group(some, tree, trial_free, alloc, trial_used, scope, lo, hi, stmt, opts):
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
    def _subgroup_scope(tree: TopologyTree, cand: int, anchor: int | None) -> int:
        """Where a sub-group may go inside ``cand``: all of it, or only around its running members."""
        if anchor is None or anchor <= cand < tree.end[anchor]:
            return cand
        return anchor if cand <= anchor < tree.end[cand] else -1

    def _tier_group(self, pods: list[Pod], tree: TopologyTree, free: npt.NDArray[np.int64],
                    alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64], scope: int, lo: int, hi: int,
                    stmt: Statement, opts: Options) -> bool:
        """Places ``pods`` inside one domain of ``scope``'s subtree with rank in [lo, hi], or nothing;
        ``free`` and ``used`` are updated with what was placed."""
        shapes = self._shapes(pods)
        vec = np.max(np.stack([v for v, _ in shapes.values()]), axis=0)
        feasible = self._feasible(pods, tree, opts)
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

    def _tier_failure(self, pods: list[Pod], tree: TopologyTree, search: SearchScope, opts: Options) -> Failure:
        scope, lo, hi = search.outer, search.lowest, search.highest
        vec = np.max(np.stack([self.cluster.request_vector(p) for p in pods]), axis=0)
        feasible = self._feasible(pods, tree, opts)
        slots = node_offerslots(self._free(opts), vec, feasible)
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
