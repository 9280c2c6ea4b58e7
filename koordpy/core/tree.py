"""The topology tree: the cluster at the root, network domains inside, nodes as leaves.

One tree type serves every dialect (``koordpy.core.dialects``: Koordinator's
ClusterNetworkTopology, Volcano's HyperNodes, Kueue/KAI Topology objects). A source names each
domain's parent explicitly (``TopologyTree.from_edges``), so a tree may skip levels and hold
nodes at any depth; label-path trees (``TopologyTree.build``) are the special case where every
level is a label. Each domain has a ``rank``: 0 for nodes, growing towards the root (a
HyperNode's tier; the layer's height for label trees), which is how requirements name scopes
whatever the source. The tree is kept as a networkx DiGraph for traversal and exported once as
flat arrays in depth-first preorder, which is what the kernels take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np
import numpy.typing as npt

from koordpy.api.topology import CLUSTER_LAYER, NODE_LAYER
from koordpy.core.naming import natural_key

DomainId = tuple[str, ...]  # the path of domain names from the root; () is the root
ROOT: DomainId = ()


@dataclass(frozen=True)
class TreeKey:
    """Which of the cluster's trees: a value made only by the dialect that builds that tree (its
    ``TREE``, or ``tree_key(name)`` for one of several), compared as a value and never parsed.

    ``text`` is how messages, ``koordpy topology show`` and ``--tree`` name it (``cnt``,
    ``hypernodes``, ``topology/<name>``); ``labelled`` says whether messages name the tree's
    domains by layer and label (Koordinator's words) rather than by domain name."""

    dialect: str  # the name of the dialect that builds it
    name: str = ""  # which of that dialect's trees ("" when it has one)
    text: str = field(default="", compare=False)
    labelled: bool = field(default=False, compare=False)

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class ShownTree:
    """A tree as ``koordpy topology show`` draws it, in the words of the dialect that builds it."""

    key: TreeKey
    title: str  # what the tree is ("ClusterNetworkTopology default", "Volcano HyperNodes (3)")
    short: str = ""  # another name ``--tree`` takes for it (a Topology's own name)
    problems: Mapping[str, Sequence[str]] = field(default_factory=dict)  # domain name -> what is wrong with it
    ranked: bool = False  # a domain is shown with its rank ("tier 2") beside its layer, the root too
    # Whether the root says that it holds its nodes directly when none is in a domain (a
    # ClusterNetworkTopology's unlabelled nodes are the layer below the cluster: not said).
    loose_said: bool = True


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
    rank: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    outside: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=np.bool_))  # per node

    @classmethod
    def build(cls, layers: Sequence[str], node_names: Sequence[str],
              paths: Mapping[str, Sequence[str]], node_layer: str = NODE_LAYER) -> TopologyTree:
        """``paths[node]`` names the node's domain at each layer, top-down; a shorter path
        hangs the node from the deepest domain it names (a node missing a label)."""
        inner: dict[DomainId, tuple[DomainId, str, str, int]] = {}
        node_parent: dict[str, DomainId] = {}
        for node in node_names:
            path = tuple(paths.get(node, ()))[: len(layers)]
            prefix: DomainId = ROOT
            for i, name in enumerate(path):
                child = (*prefix, name)
                if child not in inner:
                    inner[child] = (prefix, layers[i], name, len(layers) - i)
                prefix = child
            node_parent[node] = prefix
        return cls.from_edges(layers, node_names, inner, node_parent, node_layer=node_layer,
                              root_rank=len(layers) + 1, leaf_depth=len(layers) + 1)

    @classmethod
    def from_edges(cls, layers: Sequence[str], node_names: Sequence[str],
                   inner: Mapping[DomainId, tuple[DomainId, str, str, int]],
                   node_parent: Mapping[str, DomainId], node_layer: str = NODE_LAYER,
                   root_rank: int | None = None, root_layer: str = CLUSTER_LAYER,
                   leaf_depth: int | None = None, leaf_rank: int = 0,
                   outside: Iterable[str] = ()) -> TopologyTree:
        """A tree from explicit edges: ``inner[d] = (parent, layer, name, rank)`` for every
        domain but the root, ``node_parent[node]`` the domain a node hangs from (the root when
        absent). Parents must be the root or listed in ``inner``; ``rank`` orders scopes (0 is a
        node, the root is above every domain). ``leaf_depth`` gives every node one depth, as a
        layered tree counts its node layer, wherever the node hangs. ``outside`` names nodes the
        source leaves out of its topology (they hang from the root and no requirement uses them)."""
        g = nx.DiGraph()
        top = root_rank if root_rank is not None else max((r for *_, r in inner.values()), default=0) + 1
        g.add_node(ROOT, layer=root_layer, name="", rank=top)
        for d, (_, layer, name, level) in inner.items():
            g.add_node(d, layer=layer, name=name, rank=level)
        for d, (up, *_) in inner.items():
            g.add_edge(up, d)
        for node in node_names:
            leaf = ("\0node", node)  # cannot clash with a path of label values
            g.add_node(leaf, layer=node_layer, name=node, rank=leaf_rank)
            g.add_edge(node_parent.get(node, ROOT), leaf)

        def kids(d: DomainId) -> list[DomainId]:
            # Inner domains before nodes (higher rank first), then natural name order.
            return sorted(g.successors(d), key=lambda c: (-g.nodes[c]["rank"], natural_key(g.nodes[c]["name"])))

        order: list[DomainId] = []
        ends: dict[DomainId, int] = {}
        depths: dict[DomainId, int] = {ROOT: 0}
        stack: list[tuple[DomainId, bool]] = [(ROOT, False)]
        while stack:
            d, done = stack.pop()
            if done:
                ends[d] = len(order)
                continue
            order.append(d)
            stack.append((d, True))
            for c in reversed(kids(d)):
                depths[c] = leaf_depth if leaf_depth is not None and c[:1] == ("\0node",) else depths[d] + 1
                stack.append((c, False))
        index = {d: i for i, d in enumerate(order)}
        parent = np.full(len(order), -1, dtype=np.int64)
        for u, v in g.edges:
            if v in index:
                parent[index[v]] = index[u]
        depth = np.array([depths[d] for d in order], dtype=np.int64)
        for d in order:
            g.nodes[d]["depth"] = depths[d]
        end = np.array([ends[d] for d in order], dtype=np.int64)
        rank = np.array([g.nodes[d]["rank"] for d in order], dtype=np.int64)
        by_name = sorted(range(len(order)), key=lambda i: (natural_key(g.nodes[order[i]]["name"]), i))
        name_rank = np.empty(len(order), dtype=np.int64)
        name_rank[by_name] = np.arange(len(order), dtype=np.int64)
        node_domain = np.array([index[("\0node", n)] for n in node_names], dtype=np.int64)
        domain_node = np.full(len(order), -1, dtype=np.int64)
        domain_node[node_domain] = np.arange(len(node_names), dtype=np.int64)
        out = set(outside)
        return cls(layers=tuple(layers), node_layer=node_layer, graph=g, order=order, parent=parent,
                   depth=depth, end=end, name_rank=name_rank, node_domain=node_domain,
                   domain_node=domain_node, index=index, rank=rank,
                   outside=np.array([n in out for n in node_names], dtype=np.bool_))

    # -- queries -------------------------------------------------------------------------

    def domain(self, d: int) -> Domain:
        attrs = self.graph.nodes[self.order[d]]
        return Domain(layer=attrs["layer"], name=attrs["name"], depth=attrs["depth"])

    def name(self, d: int) -> str:
        return str(self.graph.nodes[self.order[d]]["name"])

    @cached_property
    def path_rank(self) -> npt.NDArray[np.int64]:
        """Per domain, its place in the order of the names on its path from the root, top level first,
        compared as plain strings (Kueue orders a level's domains by their label values so; a node's
        own value is its name). Built the first time a requirement breaks ties that way."""
        names = [self.name(d) for d in range(len(self.order))]
        paths: list[tuple[str, ...]] = [()] * len(self.order)
        for d in range(1, len(self.order)):  # preorder: a parent's path is known before its children's
            paths[d] = (*paths[int(self.parent[d])], names[d])
        out = np.empty(len(self.order), dtype=np.int64)
        out[sorted(range(len(self.order)), key=lambda d: (paths[d], d))] = np.arange(len(self.order), dtype=np.int64)
        return out

    @cached_property
    def lowest_rank(self) -> int:
        """The lowest rank of a domain that is not a node (Volcano's lowest tier): every job's search
        scope reads it, so it is found once per tree, not once per search."""
        return int(self.rank[self.domain_node < 0].min())

    def in_subtree(self, d: int, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """``mask`` (per domain) kept only inside ``d``'s subtree."""
        out = np.zeros_like(mask)
        out[d: self.end[d]] = mask[d: self.end[d]]
        return out

    def inside_scope(self, scope: int) -> npt.NDArray[np.bool_]:
        """Domains inside some domain of rank at most ``scope``: inner domains of such a rank and
        nodes whose parent has one. A node hanging higher (missing a label, claimed by no
        HyperNode) is outside every such domain, so a hard scope never uses it."""
        leaf = self.domain_node >= 0
        at = np.where(leaf, self.rank[np.maximum(self.parent, 0)], self.rank)
        # A node is itself a domain of the node level, so a scope of that level takes every node.
        return np.asarray((at <= scope) | (leaf & (self.rank == scope)), dtype=np.bool_)

    def ancestor_at_most(self, d: int, scope: int) -> int:
        """The highest ancestor of ``d`` (itself included) whose rank is at most ``scope``, or -1."""
        best = -1
        while d >= 0 and self.rank[d] <= scope:
            best, d = d, int(self.parent[d])
        return best

    def lca(self, domains: Iterable[int]) -> int:
        """The lowest common ancestor of ``domains`` (preorder ranges nest, so the deepest domain
        whose range holds them all)."""
        ds = list(domains)
        lo, hi = min(ds), max(ds)
        d = lo
        while d > 0 and not (d <= lo and hi < self.end[d]):
            d = int(self.parent[d])
        return max(d, 0)

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


# Trees of node labels, kept (a few) while the nodes' labels stay the same: the dialects that read
# a Topology object (KAI, Kueue) or a single label key (Kubernetes' own PodGroup) build the same shape.
_LABEL_TREES: dict[object, TopologyTree] = {}
HOSTNAME = "kubernetes.io/hostname"


def label_levels_tree(levels: Sequence[str], nodes: Sequence[Any], root_layer: str) -> TopologyTree:
    """Nodes grouped by the values of node labels, the widest level first; a last level of
    ``kubernetes.io/hostname`` is the nodes themselves. A node that lacks any level's label is
    outside the tree (every level counts for membership, the hostname level too)."""
    levels = tuple(levels)
    inner_levels = levels[:-1] if levels and levels[-1] == HOSTNAME else levels
    key = (root_layer, levels, tuple((n.name, tuple(n.labels.get(k) for k in levels)) for n in nodes))
    cached = _LABEL_TREES.get(key)
    if cached is not None:
        return cached
    inner: dict[DomainId, tuple[DomainId, str, str, int]] = {}
    node_parent: dict[str, DomainId] = {}
    outside = []
    height = len(inner_levels)
    for n in nodes:
        if any(not n.labels.get(k) for k in levels):
            outside.append(n.name)
            continue
        prefix: DomainId = ROOT
        for i, level in enumerate(inner_levels):
            child = (*prefix, n.labels[level])
            if child not in inner:
                inner[child] = (prefix, level, n.labels[level], height - i)
            prefix = child
        node_parent[n.name] = prefix
    tree = TopologyTree.from_edges(inner_levels, [n.name for n in nodes], inner, node_parent, node_layer=HOSTNAME,
                                   root_rank=height + 1, root_layer=root_layer, leaf_depth=height + 1,
                                   outside=outside)
    if len(_LABEL_TREES) >= 8:
        _LABEL_TREES.pop(next(iter(_LABEL_TREES)))
    _LABEL_TREES[key] = tree
    return tree
