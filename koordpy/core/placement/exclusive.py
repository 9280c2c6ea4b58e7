"""The "exclusive" style (JobSet's exclusive placement): each sub-group, one Job, alone in a domain of
its scope where all the pods it runs fit, though only some of them (its leader) are placed now; a Job
with pods running only inside the domain they run in. The pods of no sub-group go anywhere else.

JobSet's pod webhook refuses a Job's other pods until its leader is bound, then pins them to the
leader's domain by a nodeSelector: the room they will need is looked for when the leader is placed,
so that the leader goes where its whole Job fits. That room is not held for them (a pod placed
between the leader's bind and theirs may take it: docs/design.md, "JobSet").

Does not belong here: which pods are a Job and how much room it needs (the JobSet dialect,
``koordpy.core.dialects.jobset``), the rules between pods (the webhook's affinities, ``koordpy.core.podrules``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.core.placement.base import Options
from koordpy.core.placement.binpack import Binpack
from koordpy.core.placement.search import MAX_LISTED_DOMAINS, Search
from koordpy.core.requirement import Requirement, SubGroup
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.core.verdicts import Failure, NoExclusiveDomain, resolvable
from koordpy.kernels import choose_candidate, node_offerslots, subtree_sums


class Exclusive(Binpack, Search):
    def exclusive(self, pods: list[Pod], req: Requirement, stmt: Statement, opts: Options) -> Failure | None:
        """Every Job (sub-group) with pods to place, in turn, in a domain no other Job of the job holds
        (nor took before it now) with room for ``SubGroup.min_pods`` of its pods, the tightest that
        fits, or inside its running pods' domain; then the pods of no Job, outside every such domain.
        Jobs that fit stay placed when another does not (the gang's rule decides what binds); the
        failure is the first Job's that did not fit."""
        tree = self.cluster.trees[req.tree]
        by_key = {p.key: p for p in pods}
        taken = {g.anchor for g in req.subgroups if g.anchor is not None}
        first: Failure | None = None
        for g in req.subgroups:
            members = [by_key[k] for k in g.pods if k in by_key]
            if not members:
                continue
            failure = self._exclusive_job(g, members, tree, req, taken, stmt, opts)
            first = first or failure
        grouped = {k for g in req.subgroups for k in g.pods}
        rest = [p for p in pods if p.key not in grouped]
        if rest:
            # Another Job's pods never share a Job's domain (JobSet's webhook says so with an
            # anti-affinity on the leader; here the domains are left out whatever the pods say).
            saved = self.only
            outside = np.ones(len(self.cluster.nodes), dtype=np.bool_)
            for d in taken:
                outside[tree.subtree_nodes(d)] = False
            self.only = outside if saved is None else outside & saved
            try:
                first = first or self._binpack(rest, stmt, opts)
            finally:
                self.only = saved
        return first

    def _exclusive_job(self, g: SubGroup, members: list[Pod], tree: TopologyTree, req: Requirement, taken: set[int],
                       stmt: Statement, opts: Options) -> Failure | None:
        """One Job's pending pods, placed (and its domain added to ``taken``) or its failure."""
        shapes = self._shapes(members)
        vec = np.max(np.stack([v for v, _ in shapes.values()]), axis=0)
        slots = node_offerslots(self._free(opts), vec, self._feasible(members, tree, opts))
        ones = np.ones(len(tree.order), dtype=np.int64)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, ones)
        level = (tree.rank == g.scope) & (tree.domain_node < 0)
        need = g.min_pods
        if g.anchor is not None:
            allowed = np.zeros(len(tree.order), dtype=np.bool_)
            allowed[g.anchor] = True
        else:
            allowed = level.copy()
            allowed[list(taken)] = False
        order, chain = self._ties(tree, req)
        chosen = int(choose_candidate(sums, tree.depth, allowed & (sums >= need), need, tree.parent, order, chain))
        if chosen < 0:
            return self._no_exclusive_domain(g, members, tree, req, taken, allowed, sums, need)
        # Room for all ``need`` pods is found; the ones pending now take the first of it.
        self._assume_in(stmt, tree, chosen, need, slots, sums, ones, [m.key for m in members], shapes)
        taken.add(chosen)
        return None

    def _no_exclusive_domain(self, g: SubGroup, members: list[Pod], tree: TopologyTree, req: Requirement,
                             taken: set[int], allowed: npt.NDArray[np.bool_], sums: npt.NDArray[np.int64],
                             need: int) -> Failure:
        """The Job's failure: the domains it may take with their room for its pods (the roomiest first),
        those its JobSet's other Jobs hold, or the domain its running pods keep it in."""
        listed = sorted((int(d) for d in np.flatnonzero(allowed)),
                        key=lambda d: (-int(sums[d]), int(tree.name_rank[d])))
        offers = tuple((tree.name(d), int(sums[d])) for d in listed[:MAX_LISTED_DOMAINS])
        held = tuple(sorted(tree.name(d) for d in taken if g.anchor is None))
        label = dict(req.labels).get(g.scope or 0, "")
        within = tree.name(g.anchor) if g.anchor is not None else ""
        return Failure(members[0], NoExclusiveDomain(len(self.cluster.nodes), g.id, need, label, offers, held, within),
                       code=resolvable(self._resolvable(members, tree, None)), domains=offers, desired=need)
