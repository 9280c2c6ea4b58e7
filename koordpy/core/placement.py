"""Where a job's pods go: topology-aware gather (offerslot + binpack) or plain binpacking.

A job is the pending pods one attempt must place together (a GangGroup's, or one pod).
Placement makes its moves on a ``Statement`` and reports the first pod it could not
place with the reason; the caller decides whether to commit or discard.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import PODS, Pod
from koordpy.api.podgroup import topology_index
from koordpy.api.topology import NetworkTopologySpec
from koordpy.core.filters import Filters, constraints_key
from koordpy.core.naming import natural_key
from koordpy.core.statement import Statement
from koordpy.core.tree import TopologyTree
from koordpy.kernels import achievable, allocate, choose_candidate, contains, node_offerslots, subtree_sums

MAX_LISTED_DOMAINS = 16


@dataclass(frozen=True)
class Failure:
    pod: Pod
    reason: str


def rank_order(pods: list[Pod]) -> list[Pod]:
    """Pods by network-topology index (numeric), then those without one, by name."""

    def key(p: Pod) -> tuple[bool, int, tuple[object, ...], str]:
        idx = topology_index(f"Pod {p.key}", p.annotations)
        return (idx is None, idx or 0, natural_key(p.name), p.namespace)

    return sorted(pods, key=key)


def ignored_layers(spec: NetworkTopologySpec, tree: TopologyTree) -> list[str]:
    """Notes for PreferGather rules on layers the topology does not define: they are ignored."""
    return [f'layer "{rule.layer}" is not in the ClusterNetworkTopology; ignored{did_you_mean(rule.layer, tree)}'
            for rule in spec.gather if rule.strategy == "PreferGather" and tree.layer_depth(rule.layer) is None]


def did_you_mean(layer: str, tree: TopologyTree) -> str:
    """Layer names are case-sensitive, as in Koordinator; a near miss in case gets a hint."""
    close = [known for known in tree.known_layers if known.lower() == layer.lower()]
    return f'; did you mean "{close[0]}"?' if close else ""


def inside_layer(tree: TopologyTree, depth: int) -> npt.NDArray[np.bool_]:
    """Domains inside some domain of the layer at ``depth``. A node without that layer's label
    hangs higher in the tree and is not inside any of them, so MustGather never uses it."""
    leaf = tree.domain_node >= 0
    if depth >= len(tree.layers) + 1:
        return leaf
    at = np.where(leaf, tree.depth[np.maximum(tree.parent, 0)], tree.depth)
    return np.asarray(at >= depth, dtype=np.bool_)


class Placer:
    def __init__(self, filters: Filters) -> None:
        self.filters = filters
        self.cluster = filters.cluster

    # -- plain binpacking (no topology spec) ---------------------------------------------

    def binpack(self, pods: list[Pod], stmt: Statement) -> Failure | None:
        """Fills the most allocated nodes first, shape by shape, pods in rank order."""
        shapes: dict[tuple[object, ...], list[Pod]] = {}
        for p in pods:
            req = self.cluster.request_vector(p)
            shapes.setdefault((req.tobytes(), constraints_key(p)), []).append(p)
        for members in shapes.values():
            req = self.cluster.request_vector(members[0])
            mask = self.filters.static(members[0]).mask
            slots = node_offerslots(self.cluster.free(), req, mask)
            order = np.lexsort((np.arange(len(slots)), -self._most_allocated(req)))
            ordered = slots[order]
            before = np.cumsum(ordered) - ordered
            take = np.clip(len(members) - before, 0, ordered)
            nodes = np.repeat(order, take)
            placed = len(nodes)
            stmt.assume_many([p.key for p in members[:placed]], nodes.astype(np.int64), req)
            if placed < len(members):
                failed = members[placed]
                return Failure(failed, self.filters.explain(failed, req))
        return None

    def _most_allocated(self, req: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        cols = [j for j, r in enumerate(self.cluster.resources) if req[j] > 0 and r != PODS] or [
            self.cluster.res_index[PODS]]
        alloc = self.cluster.allocatable[:, cols].astype(np.float64)
        used = self.cluster.used[:, cols].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(alloc > 0, used / alloc, 1.0)
        return np.asarray(frac.mean(axis=1), dtype=np.float64)

    # -- network-topology gather ---------------------------------------------------------

    def gather(self, pods: list[Pod], spec: NetworkTopologySpec, stmt: Statement) -> Failure | None:
        """Koordinator's gather: offerslots bottom-up, deepest fitting domain, binpack."""
        tree = self.cluster.tree
        first = pods[0]
        must_depth = 0
        multiple = np.ones(len(tree.order), dtype=np.int64)
        ignored = ignored_layers(spec, tree)
        for rule in spec.gather:
            depth = tree.layer_depth(rule.layer)
            if depth is None:
                if rule.strategy == "PreferGather":
                    continue  # a preference the topology cannot express is dropped, and said so
                # A hard constraint on a layer the topology does not have is never dropped.
                invalid = (f" (ClusterNetworkTopology default is invalid and ignored: {self.cluster.topology_error})"
                           if self.cluster.topology_error else "")
                return Failure(first, f"unknown topology layer {rule.layer!r} in network-topology-spec; "
                                      f"known layers: {', '.join(tree.known_layers)}{did_you_mean(rule.layer, tree)}"
                                      f"{invalid}")
            if rule.strategy == "MustGather":
                must_depth = max(must_depth, depth)
            if rule.pod_count_multiple > 1:
                multiple[tree.depth == depth] = rule.pod_count_multiple
        failure = self._gather(pods, multiple, must_depth, stmt)
        if failure is not None and ignored:
            return Failure(failure.pod, f"{failure.reason.rstrip('.')}; {'; '.join(ignored)}.")
        return failure

    def _gather(self, pods: list[Pod], multiple: npt.NDArray[np.int64], must_depth: int,
                stmt: Statement) -> Failure | None:
        tree = self.cluster.tree
        first = pods[0]
        # Pods of a GangGroup may differ; the largest request of each resource and the
        # nodes every pod may use make an offerslot that holds for every member.
        shapes = self._shapes(pods)
        req = np.max(np.stack([vec for vec, _ in shapes.values()]), axis=0)
        distinct = list({constraints_key(p): p for p in pods}.values())  # one pod per set of constraints
        feasible = np.ones(len(self.cluster.nodes), dtype=np.bool_)
        for key_pod in distinct:
            feasible &= self.filters.static(key_pod).mask
        slots = node_offerslots(self.cluster.free(), req, feasible)
        sums = subtree_sums(slots, tree.node_domain, tree.parent, multiple)
        allowed = inside_layer(tree, must_depth)
        desired = len(pods)
        # podCountMultiple is hard: a domain is a candidate only if the job splits over it in
        # whole multiples per layer, which its offerslot alone does not say.
        sets = achievable(slots, tree.node_domain, tree.end, multiple, desired)
        splits = contains(*sets, desired)
        chosen = int(choose_candidate(sums, tree.depth, allowed & splits, desired, tree.parent, tree.name_rank))
        if chosen < 0 and self._exact(pods, shapes, allowed, multiple, stmt):
            return None
        if chosen < 0:
            listed = tree.domains_at(must_depth if must_depth > 0 else min(1, int(tree.depth.max())))
            if must_depth > 0 and not listed:
                layer = tree.known_layers[must_depth]
                keys = self.cluster.layer_labels.get(layer, ())
                return Failure(first, f"0/{len(self.cluster.nodes)} nodes are available: MustGather on {layer}, "
                                      f"but no node carries its label{' ' + ', '.join(keys) if keys else ''}.")
            if must_depth == 0 and len(tree.layers) == 0:
                listed = [0]
            shown = "; ".join(f"topology topologyNode {tree.label(d)}: {int(sums[d])}"
                              for d in listed[:MAX_LISTED_DOMAINS]).replace("; ", ";")
            more = f";... {len(listed) - MAX_LISTED_DOMAINS} more" if len(listed) > MAX_LISTED_DOMAINS else ""
            reason = (f"no candidate topology nodes can accommodate job, desiredOfferSlot: {desired}, "
                      f"{shown}{more}{self._multiple_reason(slots, multiple, allowed, desired, len(shapes) > 1)}")
            # Offerslots alone do not say why a node offers nothing; taints, selectors and
            # cordons do, so they follow in kube-scheduler's words.
            filtered = self.filters.static_counts(distinct)
            if filtered:
                reason += "; " + ", ".join(f"{n} {why}" for why, n in sorted(filtered.items()))
            return Failure(first, f"0/{len(self.cluster.nodes)} nodes are available: {reason}.")
        alloc = allocate(sums, tree.end, tree.name_rank, *sets, chosen, desired)
        nodes = tree.subtree_nodes(chosen)
        per_node = alloc[tree.node_domain[nodes]]
        targets = np.repeat(nodes, per_node)
        for vec, members in shapes.values():
            idx = np.array(members, dtype=np.int64)
            stmt.assume_many([pods[i].key for i in members], targets[idx], vec)
        return None

    def _multiple_reason(self, slots: npt.NDArray[np.int64], multiple: npt.NDArray[np.int64],
                         allowed: npt.NDArray[np.bool_], desired: int, unlike: bool) -> str:
        """Why podCountMultiple, not room, refused the job: some allowed domain has the
        offerslots but no split into whole multiples; and that unlike members were not
        tried one by one, since that path cannot keep the multiples."""
        if not bool(np.any(multiple > 1)):
            return ""
        tree = self.cluster.tree
        out = ""
        room = subtree_sums(slots, tree.node_domain, tree.parent, np.ones_like(multiple))
        if bool(np.any(allowed & (room >= desired))):
            per_layer = " and ".join(f"{int(multiple[tree.depth == depth][0])} per {tree.known_layers[depth]} domain"
                                     for depth in sorted({int(x) for x in tree.depth[multiple > 1]}))
            out += f"; podCountMultiple: {desired} pods cannot be split into multiples of {per_layer}"
        if unlike:
            out += "; podCountMultiple is set, so unlike members are only placed with their common shape"
        return out

    MAX_EXACT_TRIES = 32

    def _exact(self, pods: list[Pod], shapes: dict[bytes, tuple[npt.NDArray[np.int64], list[int]]],
               allowed: npt.NDArray[np.bool_], multiple: npt.NDArray[np.int64], stmt: Statement) -> bool:
        """For a GangGroup of unlike pods (a small master beside big workers, say) that the
        common shape cannot place: try the domains the largest group of like pods fits, in the
        same binpack order, placing every pod where it really fits. Not used with
        podCountMultiple, whose per-domain counts only the offerslot path keeps."""
        if len(shapes) < 2 or bool(np.any(multiple > 1)):
            return False
        tree = self.cluster.tree
        vec, members = max(shapes.values(), key=lambda s: len(s[1]))
        mask = np.ones(len(self.cluster.nodes), dtype=np.bool_)
        for i in members:
            mask &= self.filters.static(pods[i]).mask
        sums = subtree_sums(node_offerslots(self.cluster.free(), vec, mask), tree.node_domain, tree.parent,
                            np.ones(len(tree.order), dtype=np.int64))
        fits = [int(d) for d in np.flatnonzero(allowed & (sums >= len(members)))]
        fits.sort(key=lambda d: (-int(tree.depth[d]), int(sums[d]),
                                 int(sums[tree.parent[d]]) if tree.parent[d] >= 0 else 0, int(tree.name_rank[d])))
        for domain in fits[: self.MAX_EXACT_TRIES]:
            mark = stmt.savepoint()
            if self._first_fit(pods, tree.subtree_nodes(domain), stmt):
                return True
            stmt.rollback(mark)
        return False

    def _first_fit(self, pods: list[Pod], nodes: npt.NDArray[np.int64], stmt: Statement) -> bool:
        """Each pod, in rank order, on the first of ``nodes`` (depth-first order) it fits."""
        for pod in pods:
            vec = self.cluster.request_vector(pod)
            free = self.cluster.allocatable[nodes] - self.cluster.used[nodes]
            ok = self.filters.static(pod).mask[nodes] & np.all((vec == 0) | (free >= vec), axis=1)
            hit = np.flatnonzero(ok)
            if hit.size == 0:
                return False
            stmt.assume(pod.key, int(nodes[hit[0]]), vec)
        return True

    def _shapes(self, pods: list[Pod]) -> dict[bytes, tuple[npt.NDArray[np.int64], list[int]]]:
        """Pods grouped by request vector: (vector, positions in ``pods``)."""
        shapes: dict[bytes, tuple[npt.NDArray[np.int64], list[int]]] = {}
        for i, p in enumerate(pods):
            vec = self.cluster.request_vector(p)
            shapes.setdefault(vec.tobytes(), (vec, []))[1].append(i)
        return shapes
