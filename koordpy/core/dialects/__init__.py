"""Topology sources: the only core code that speaks a topology dialect.

Belongs here: turning one API's objects into trees of the one internal type
(``koordpy.core.tree.TopologyTree``), that API's status rendering, and its job constraints
turned into a ``Requirement`` (``koordinator`` for the ClusterNetworkTopology and gather spec,
``volcano`` for HyperNodes and network topology modes, ``kueue_kai`` for Topology objects and
KAI's placement annotations). Does not belong here: choosing domains or nodes
(``koordpy.core.placement``), gang rules (``koordpy.core.gang``).

Several trees coexist in a cluster: ``"cnt"``, ``"hypernodes"`` and ``"topology/<name>"`` per
Topology. ``Trees`` builds each the first time a cycle asks for it; each source caches its trees
while their inputs stay the same.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from koordpy.api.objects import Node
from koordpy.core.dialects.kai import topology_tree
from koordpy.core.dialects.koordinator import tree_from_cluster_network_topology
from koordpy.core.dialects.volcano import HyperNodeTree, hypernode_tree
from koordpy.core.snapshot import Snapshot
from koordpy.core.tree import TopologyTree


class Trees(Mapping[str, TopologyTree]):
    def __init__(self, snapshot: Snapshot, nodes: Sequence[Node]) -> None:
        self.snapshot = snapshot
        self.nodes = nodes
        self._built: dict[str, TopologyTree] = {}
        self._hypernodes: HyperNodeTree | None = None

    def hypernode_tree(self) -> HyperNodeTree:
        if self._hypernodes is None:
            self._hypernodes = hypernode_tree(self.snapshot.hypernodes, self.nodes)
        return self._hypernodes

    def __getitem__(self, key: str) -> TopologyTree:
        tree = self._built.get(key)
        if tree is not None:
            return tree
        if key == "cnt":
            tree = tree_from_cluster_network_topology(self.snapshot.topology, self.nodes)
        elif key == "hypernodes":
            tree = self.hypernode_tree().tree
        elif key.startswith("topology/") and key[len("topology/"):] in self.snapshot.topologies:
            tree = topology_tree(self.snapshot.topologies[key[len("topology/"):]], self.nodes)
        else:
            raise KeyError(key)
        self._built[key] = tree
        return tree

    def __iter__(self) -> Iterator[str]:
        yield "cnt"
        yield "hypernodes"
        for name in sorted(self.snapshot.topologies):
            yield f"topology/{name}"

    def __len__(self) -> int:
        return 2 + len(self.snapshot.topologies)
