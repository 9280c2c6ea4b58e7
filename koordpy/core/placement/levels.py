"""The "levels" style (KAI's preferred level inside the required one): the smallest domain at the
preferred level that takes the job, climbing a level at a time up to the job's highest rank.

Does not belong here: the required level alone (``gather``), Volcano's tiers (``tiers``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.core.placement.base import Options
from koordpy.core.placement.explain import Explain
from koordpy.core.placement.search import MAX_LISTED_DOMAINS, Search
from koordpy.core.requirement import Requirement, SearchScope
from koordpy.core.statement import Statement
from koordpy.core.verdicts import (
    Failure,
    NoDomainAtLevel,
)
from koordpy.kernels import (
    choose_candidate,
    node_offerslots,
    subtree_sums,
)


class Levels(Explain, Search):
    def levels(self, pods: list[Pod], req: Requirement, search: SearchScope, stmt: Statement,
               opts: Options) -> Failure | None:
        """The smallest domain at the preferred level that takes the job, among all of that level
        inside some domain of the required level; else one level up, and again, up to the
        required level (or the cluster when none is required)."""
        tree = self.cluster.trees[req.tree]
        assert req.preferred is not None
        shapes = self._shapes(pods)
        vec = np.max(np.stack([v for v, _ in shapes.values()]), axis=0)
        slots = node_offerslots(self._free(opts), vec, self._feasible(pods, tree, opts))
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
        self._assume_in(stmt, tree, chosen, desired, slots, sums, ones, [p.key for p in pods], shapes)
        return None
