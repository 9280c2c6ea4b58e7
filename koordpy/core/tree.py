"""The topology tree: the cluster at the root, one level per network layer, nodes as leaves.

One tree type serves every topology source (Koordinator's ClusterNetworkTopology now;
Volcano HyperNodes and Kueue/KAI Topology later): an adapter turns the source into a
path of ``(layer, domain name)`` pairs per node and ``TopologyTree.build`` does the rest.
The tree is kept as a networkx DiGraph for traversal and exported once as flat arrays in
depth-first preorder, which is what the kernels take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Node
from koordpy.api.topology import CLUSTER_LAYER, NODE_LAYER, ClusterNetworkTopology
from koordpy.core.naming import natural_key

DomainId = tuple[str, ...]  # the path of domain names from the root; () is the root
ROOT: DomainId = ()


@dataclass(frozen=True)
class Domain:
    layer: str
    name: str
    depth: int


@dataclass
class TopologyTree:
    """A layered tree over the snapshot's nodes.

    ``layers`` lists the layer names top-down without the cluster root; ``node_layer`` is
    the name of the leaf level. Arrays (all in depth-first preorder, children in natural
    name order):

    - ``parent[d]``: index of d's parent, -1 for the root;
    - ``depth[d]``: 0 for the root, i+1 for layer i, ``len(layers)+1`` for nodes;
    - ``end[d]``: the subtree of d is ``[d, end[d])``;
    - ``name_rank[d]``: natural order of d's name among all domains, the last tie-breaker;
    - ``node_domain[n]``: the domain index of snapshot node n (nodes as given to build).
    """

    layers: tuple[str, ...]
    node_layer: str
    graph: Any
    order: list[DomainId]
    parent: npt.NDArray[np.int64]
    depth: npt.NDArray[np.int64]
    end: npt.NDArray[np.int64]
    name_rank: npt.NDArray[np.int64]
    node_domain: npt.NDArray[np.int64]
    domain_node: npt.NDArray[np.int64]  # inverse of node_domain; -1 for inner domains
    index: dict[DomainId, int] = field(default_factory=dict)

    @classmethod
    def build(cls, layers: Sequence[str], node_names: Sequence[str],
              paths: Mapping[str, Sequence[str]], node_layer: str = NODE_LAYER) -> TopologyTree:
        """``paths[node]`` names the node's domain at each layer, top-down; a shorter path
        hangs the node from the deepest domain it names (a node missing a label)."""
        g = nx.DiGraph()
        g.add_node(ROOT, layer=CLUSTER_LAYER, name="", depth=0)
        for node in node_names:
            path = tuple(paths.get(node, ()))[: len(layers)]
            prefix: DomainId = ROOT
            for i, name in enumerate(path):
                child = (*prefix, name)
                if child not in g:
                    g.add_node(child, layer=layers[i], name=name, depth=i + 1)
                    g.add_edge(prefix, child)
                prefix = child
            leaf = ("\0node", node)  # cannot clash with a path of label values
            g.add_node(leaf, layer=node_layer, name=node, depth=len(layers) + 1)
            g.add_edge(prefix, leaf)

        def kids(d: DomainId) -> list[DomainId]:
            return sorted(g.successors(d), key=lambda c: (g.nodes[c]["depth"], natural_key(g.nodes[c]["name"])))

        order: list[DomainId] = []
        ends: dict[DomainId, int] = {}
        stack: list[tuple[DomainId, bool]] = [(ROOT, False)]
        while stack:
            d, done = stack.pop()
            if done:
                ends[d] = len(order)
                continue
            order.append(d)
            stack.append((d, True))
            stack.extend((c, False) for c in reversed(kids(d)))
        index = {d: i for i, d in enumerate(order)}
        parent = np.full(len(order), -1, dtype=np.int64)
        for u, v in g.edges:
            parent[index[v]] = index[u]
        depth = np.array([g.nodes[d]["depth"] for d in order], dtype=np.int64)
        end = np.array([ends[d] for d in order], dtype=np.int64)
        by_name = sorted(range(len(order)), key=lambda i: (natural_key(g.nodes[order[i]]["name"]), i))
        name_rank = np.empty(len(order), dtype=np.int64)
        name_rank[by_name] = np.arange(len(order), dtype=np.int64)
        node_domain = np.array([index[("\0node", n)] for n in node_names], dtype=np.int64)
        domain_node = np.full(len(order), -1, dtype=np.int64)
        domain_node[node_domain] = np.arange(len(node_names), dtype=np.int64)
        return cls(layers=tuple(layers), node_layer=node_layer, graph=g, order=order, parent=parent,
                   depth=depth, end=end, name_rank=name_rank, node_domain=node_domain,
                   domain_node=domain_node, index=index)

    # -- queries -------------------------------------------------------------------------

    def domain(self, d: int) -> Domain:
        attrs = self.graph.nodes[self.order[d]]
        return Domain(layer=attrs["layer"], name=attrs["name"], depth=attrs["depth"])

    def label(self, d: int) -> str:
        """``Layer/name`` as Koordinator's messages print a topology node."""
        dom = self.domain(d)
        return f"{dom.layer}/{dom.name}"

    @property
    def known_layers(self) -> tuple[str, ...]:
        return (CLUSTER_LAYER, *self.layers, self.node_layer)

    def layer_depth(self, layer: str) -> int | None:
        if layer == CLUSTER_LAYER:
            return 0
        if layer == self.node_layer:
            return len(self.layers) + 1
        return self.layers.index(layer) + 1 if layer in self.layers else None

    def domains_at(self, depth: int) -> list[int]:
        return [int(i) for i in np.flatnonzero(self.depth == depth)]

    def children(self, d: int) -> list[int]:
        return [self.index[c] for c in self.graph.successors(self.order[d])]

    def subtree_nodes(self, d: int) -> npt.NDArray[np.int64]:
        """Snapshot node indexes under d, in rank order (depth-first, natural names)."""
        nodes = self.domain_node[d : self.end[d]]
        return nodes[nodes >= 0]


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
