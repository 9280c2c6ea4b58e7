"""Koordinator's dialect: the ClusterNetworkTopology tree, its ``detailStatus``, and the gather
spec of a gang turned into a ``Requirement``.

Belongs here: everything that knows Koordinator's layer names, label keys and messages about
them. Does not belong here: choosing domains (``koordpy.core.placement``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from koordpy.api.objects import Node
from koordpy.api.topology import NODE_LAYER, ClusterNetworkTopology, NetworkTopologySpec
from koordpy.core.naming import natural_key
from koordpy.core.requirement import Requirement
from koordpy.core.tree import ROOT, DomainId, TopologyTree

TREE = "cnt"

_TREE_CACHE: dict[object, TopologyTree] = {}
_TREE_CACHE_SIZE = 4


def tree_from_cluster_network_topology(cnt: ClusterNetworkTopology | None, nodes: Iterable[Node]) -> TopologyTree:
    """The tree for these nodes under ``cnt``; the same node names, labels and CNT give the same
    (cached, never mutated) tree, so a cycle pays for the build only when the topology changed."""
    node_list = list(nodes)
    label_layers = [layer for layer in cnt.layers if layer.label_keys] if cnt else []
    node_layer = next((layer.layer for layer in cnt.layers if not layer.label_keys), NODE_LAYER) if cnt else NODE_LAYER
    paths: dict[str, tuple[str, ...]] = {}
    for n in node_list:
        path: list[str] = []
        for layer in label_layers:
            value = next((n.labels[k] for k in layer.label_keys if n.labels.get(k)), None)
            if value is None:
                break
            path.append(value)
        paths[n.name] = tuple(path)
    names = [n.name for n in node_list]
    layer_names = tuple(layer.layer for layer in label_layers)
    key = (layer_names, node_layer, tuple((name, paths[name]) for name in names))
    tree = _TREE_CACHE.get(key)
    if tree is None:
        tree = TopologyTree.build(layer_names, names, paths, node_layer=node_layer)
        if len(_TREE_CACHE) >= _TREE_CACHE_SIZE:
            _TREE_CACHE.pop(next(iter(_TREE_CACHE)))
        _TREE_CACHE[key] = tree
    return tree


def detail_status(tree: TopologyTree) -> list[dict[str, Any]]:
    """ClusterNetworkTopology ``status.detailStatus``: one entry per inner domain, top-down.

    Entries and child names follow the order in which each domain's first node appears
    in natural node order, which is how Koordinator lists them (a block whose first node is
    node-0 comes first even when its name sorts later).
    """
    g = tree.graph
    first: dict[DomainId, tuple[Any, ...]] = {}
    for d in reversed(tree.order):
        if d[:1] == ("\0node",):
            first[d] = natural_key(d[1])
        else:
            first[d] = min((first[c] for c in g.successors(d)), default=())

    def inner_kids(d: DomainId) -> list[DomainId]:
        return sorted((c for c in g.successors(d) if c[:1] != ("\0node",)), key=lambda c: first[c])

    def node_count(d: DomainId) -> int:
        return int(np.count_nonzero(tree.domain_node[tree.index[d] : tree.end[tree.index[d]]] >= 0))

    def info(d: DomainId) -> dict[str, str]:
        return {"topologyLayer": g.nodes[d]["layer"], "topologyName": g.nodes[d]["name"]}

    out: list[dict[str, Any]] = []
    stack: list[DomainId] = [ROOT]
    while stack:
        d = stack.pop()
        kids = inner_kids(d)
        depth = g.nodes[d]["depth"]
        entry: dict[str, Any] = {
            "childTopologyLayer": tree.layers[depth] if depth < len(tree.layers) else tree.node_layer,
        }
        if kids:
            entry["childTopologyNames"] = [g.nodes[c]["name"] for c in kids]
        entry["nodeNum"] = node_count(d)
        if d != ROOT:
            entry["parentTopologyInfo"] = info(next(iter(g.predecessors(d))))
        entry["topologyInfo"] = info(d)
        out.append(entry)
        stack.extend(reversed(kids))
    return out


def ignored_layers(spec: NetworkTopologySpec, tree: TopologyTree) -> list[str]:
    """Notes for PreferGather rules on layers the topology does not define: they are ignored."""
    return [f'layer "{rule.layer}" is not in the ClusterNetworkTopology; ignored{did_you_mean(rule.layer, tree)}'
            for rule in spec.gather if rule.strategy == "PreferGather" and tree.layer_depth(rule.layer) is None]


def did_you_mean(layer: str, tree: TopologyTree) -> str:
    """Layer names are case-sensitive, as in Koordinator; a near miss in case gets a hint."""
    close = [known for known in tree.known_layers if known.lower() == layer.lower()]
    return f'; did you mean "{close[0]}"?' if close else ""


def requirement(spec: NetworkTopologySpec, tree: TopologyTree, layer_labels: Mapping[str, tuple[str, ...]],
                topology_error: str | None, node_count: int) -> Requirement:
    """The gather spec over the ClusterNetworkTopology tree: MustGather sets the scope (the
    deepest MustGather layer), podCountMultiple the multiples per layer; a PreferGather rule on
    an unknown layer is dropped with a note, a MustGather one makes the job unplaceable."""
    root_rank = len(tree.layers) + 1
    must_depth = 0
    multiples: list[tuple[int, int]] = []
    for rule in spec.gather:
        depth = tree.layer_depth(rule.layer)
        if depth is None:
            if rule.strategy == "PreferGather":
                continue
            invalid = (f" (ClusterNetworkTopology default is invalid and ignored: {topology_error})"
                       if topology_error else "")
            return Requirement(TREE, "gather", failure=(
                f"unknown topology layer {rule.layer!r} in network-topology-spec; known layers: "
                f"{', '.join(tree.known_layers)}{did_you_mean(rule.layer, tree)}{invalid}"))
        if rule.strategy == "MustGather":
            must_depth = max(must_depth, depth)
        if rule.pod_count_multiple > 1:
            multiples.append((root_rank - depth, rule.pod_count_multiple))
    listed = tree.domains_at(must_depth if must_depth > 0 else min(1, int(tree.depth.max())))
    failure = None
    if must_depth > 0 and not listed:
        layer = tree.known_layers[must_depth]
        keys = layer_labels.get(layer, ())
        failure = (f"0/{node_count} nodes are available: MustGather on {layer}, "
                   f"but no node carries its label{' ' + ', '.join(keys) if keys else ''}.")
    if must_depth == 0 and len(tree.layers) == 0:
        listed = [0]
    return Requirement(TREE, "gather", scope=root_rank - must_depth, multiples=tuple(multiples),
                       notes=tuple(ignored_layers(spec, tree)), failure=failure, listed=tuple(listed),
                       labels=tuple((root_rank - i, layer) for i, layer in enumerate(tree.known_layers)))
