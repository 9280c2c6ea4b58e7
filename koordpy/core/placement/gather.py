"""The "gather" style (Koordinator's offerslot + binpack, KAI's required level alone, the upstream
PodGroup's topology key): the deepest fitting domain inside the job's scope, the exact fallback for
unlike pods, and the domains of a scope the upstream group cycle evaluates one by one.

Does not belong here: KAI's preferred level (``levels``), Volcano's tiers (``tiers``).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.core.placement.base import PLAIN, Options
from koordpy.core.placement.explain import Explain
from koordpy.core.placement.search import MAX_LISTED_DOMAINS, Search
from koordpy.core.requirement import Requirement, SearchScope
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.core.verdicts import (
    Failure,
    NoCandidate,
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


class Gather(Explain, Search):
    def _gather(self, pods: list[Pod], tree: TopologyTree, req: Requirement, multiple: npt.NDArray[np.int64],
                search: SearchScope, stmt: Statement, opts: Options) -> Failure | None:
        first = pods[0]
        # Pods of a GangGroup may differ; the largest request of each resource and the
        # nodes every pod may use make an offerslot that holds for every member.
        shapes = self._shapes(pods)
        vec = np.max(np.stack([v for v, _ in shapes.values()]), axis=0)
        # One pod per set of node constraints and rules between pods (each member's rules count).
        distinct = self._distinct(pods)
        feasible = self._feasible(distinct, tree, opts)
        slots = node_offerslots(self._free(opts), vec, feasible)
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
        if chosen < 0 and self._exact(pods, tree, req, shapes, allowed, multiple, stmt, opts):
            return None
        if chosen < 0:
            return self._no_candidate(first, tree, req, search, len(shapes), distinct, slots, sums, multiple,
                                      allowed, desired)
        alloc = allocate(sums, tree.end, tree.name_rank, *sets, chosen, desired)
        nodes = tree.subtree_nodes(chosen)
        per_node = alloc[tree.node_domain[nodes]]
        targets = np.repeat(nodes, per_node)
        for vec, members in shapes.values():
            idx = np.array(members, dtype=np.int64)
            stmt.assume_many([pods[i].key for i in members], targets[idx], vec)
        return None

    def _no_candidate(self, first: Pod, tree: TopologyTree, req: Requirement, search: SearchScope, kinds: int,
                      distinct: list[Pod], slots: npt.NDArray[np.int64], sums: npt.NDArray[np.int64],
                      multiple: npt.NDArray[np.int64], allowed: npt.NDArray[np.bool_], desired: int) -> Failure:
        """No domain the job may use takes it (``kinds``: its request shapes): the domains listed with
        their offerslots, the node filters' reasons, the closest domain."""
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
                                          bool(np.any(multiple > 1)) and kinds > 1,
                                          tuple(sorted(filtered.items()))),
                       code=resolvable(self._resolvable(distinct, tree, filtered)),
                       filtered=tuple(sorted(filtered.items())),
                       domains=tuple((name, n) for _, name, n in shown), desired=desired,
                       closest=self._closest(distinct, tree, sums, listed[:MAX_LISTED_DOMAINS],
                                             tree.label if koordinator else tree.name))

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
               multiple: npt.NDArray[np.int64], stmt: Statement, opts: Options) -> bool:
        """For a GangGroup of unlike pods (a small master beside big workers, say) that the
        common shape cannot place: try the domains the largest group of like pods fits, in the
        same binpack order, placing every pod where it really fits. Not used with
        podCountMultiple, whose per-domain counts only the offerslot path keeps."""
        if len(shapes) < 2 or bool(np.any(multiple > 1)):
            return False
        vec, members = max(shapes.values(), key=lambda s: len(s[1]))
        mask = self._feasible([pods[i] for i in members], tree, opts)
        sums = subtree_sums(node_offerslots(self._free(opts), vec, mask), tree.node_domain, tree.parent,
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

    def scope_domains(self, pods: list[Pod], req: Requirement) -> Iterator[tuple[npt.NDArray[np.bool_], int]]:
        """The domains of ``req``'s scope the job may use (inside its anchor), each as its nodes and
        the most of ``pods`` it could take (each kind of pod up to its offerslots there), the roomiest
        first: the placements kube-scheduler's group cycle evaluates one by one for a topology key.
        A domain's node mask is made when it is reached (the caller stops after a few)."""
        tree = self.cluster.trees[req.tree]
        assert req.scope is not None
        search = SearchScope.of(req, tree)
        at = np.flatnonzero(search.within(tree, tree.rank == search.rank) & (tree.domain_node < 0))
        free = self._free(PLAIN)
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
