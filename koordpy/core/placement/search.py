"""Where a style's search looks and how it breaks ties: near the job's running members first
(``_rings``, ``_near_peers``), the podCountMultiple per domain, the dialect's tie rule; and, once it
has chosen a domain, how its pods are spread over that domain's nodes (``_assume_in``). How far the
search may reach (hard or soft, the anchor) is the job's ``SearchScope``
(``koordpy.core.requirement``), not here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from koordpy.core.requirement import Requirement
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.kernels import achievable, allocate

MAX_LISTED_DOMAINS = 16


class Search:
    @staticmethod
    def _assume_in(stmt: Statement, tree: TopologyTree, chosen: int, count: int, slots: npt.NDArray[np.int64],
                   sums: npt.NDArray[np.int64], ones: npt.NDArray[np.int64], keys: list[str],
                   shapes: dict[bytes, tuple[npt.NDArray[np.int64], list[int]]]) -> None:
        """Room for ``count`` pods over the nodes of domain ``chosen`` (the allocation kernel's spread),
        the pods of ``keys`` assumed on the first of it, shape by shape (``shapes``: the request vector
        and the positions in ``keys`` of the pods of that shape)."""
        sets = achievable(slots, tree.node_domain, tree.end, ones, count)
        alloc = allocate(sums, tree.end, tree.name_rank, *sets, chosen, count)
        nodes = tree.subtree_nodes(chosen)
        targets = np.repeat(nodes, alloc[tree.node_domain[nodes]])
        for shape, positions in shapes.values():
            idx = np.array(positions, dtype=np.int64)
            stmt.assume_many([keys[i] for i in positions], targets[idx], shape)

    @staticmethod
    def _multiples(tree: TopologyTree, req: Requirement) -> npt.NDArray[np.int64]:
        """Per domain, the podCountMultiple its layer asks (1 where none)."""
        multiple = np.ones(len(tree.order), dtype=np.int64)
        for rank, m in req.multiples:
            multiple[tree.rank == rank] = m
        return multiple

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
            chosen = search(mask if within == 0 else tree.in_subtree(within, mask), high)
            if chosen >= 0:
                return chosen
        return -1

    @staticmethod
    def _ties(tree: TopologyTree, req: Requirement) -> tuple[npt.NDArray[np.int64], bool]:
        """How ``choose_candidate`` tells equally tight domains apart for ``req`` (``Requirement.ties``):
        the last key, and whether the ancestor chain comes before it."""
        return (tree.path_rank, False) if req.ties == "values" else (tree.name_rank, True)

    @staticmethod
    def _peer_distance(tree: TopologyTree, peers: int | None) -> Callable[[int], int]:
        """A domain's distance from the job's running members: the rank of their lowest common
        ancestor with it (the order of ``_rings``; 0 for every domain when none run)."""
        if peers is None:
            return lambda d: 0
        return lambda d: int(tree.rank[tree.lca((d, peers))])
