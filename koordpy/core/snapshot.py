"""The snapshot the core schedules against, and its array form (the ``Cluster``).

``Snapshot`` is plain data the shell assembles from its cache. ``Cluster`` turns it into
the numpy arrays the kernels take: allocatable and used resources per node, in a fixed
resource order, with the node order of the topology tree's input (natural name order).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import PODS, Node, Pod, PriorityClass
from koordpy.api.podgroup import PodGroup
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.core.naming import natural_key
from koordpy.core.tree import TopologyTree, tree_from_cluster_network_topology


@dataclass
class Snapshot:
    nodes: list[Node]
    pods: list[Pod]
    podgroups: dict[str, PodGroup] = field(default_factory=dict)
    topology: ClusterNetworkTopology | None = None
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    scheduler_names: frozenset[str] = frozenset({"koordpy"})
    # Objects the shell could not parse, so the core can say why their pods wait.
    invalid_podgroups: dict[str, str] = field(default_factory=dict)  # namespace/name -> error
    topology_error: str | None = None  # the ClusterNetworkTopology "default" exists but is invalid

    def claims(self, pod: Pod) -> bool:
        """Pending pods this scheduler must place."""
        return (pod.scheduler_name in self.scheduler_names and not pod.node_name
                and not pod.terminal and not pod.deleting)


def effective_priority(pod: Pod, classes: dict[str, PriorityClass]) -> int:
    """``spec.priority`` as the Priority admission plugin would have set it."""
    if pod.priority is not None:
        return pod.priority
    if pod.priority_class_name and pod.priority_class_name in classes:
        return classes[pod.priority_class_name].value
    default = next((c for c in classes.values() if c.global_default), None)
    return default.value if default else 0


class Cluster:
    """Resource arrays over the snapshot's nodes; mutated only through a ``Statement``."""

    def __init__(self, snapshot: Snapshot, assumed: dict[str, str] | None = None) -> None:
        self.nodes = sorted(snapshot.nodes, key=lambda n: natural_key(n.name))
        self.node_index = {n.name: i for i, n in enumerate(self.nodes)}
        resources = {PODS}
        for n in self.nodes:
            resources.update(n.allocatable)
        for p in snapshot.pods:
            resources.update(p.requests)
        self.resources = sorted(resources)
        self.res_index = {r: i for i, r in enumerate(self.resources)}
        self.allocatable = np.zeros((len(self.nodes), len(self.resources)), dtype=np.int64)
        for i, n in enumerate(self.nodes):
            for r, q in n.allocatable.items():
                self.allocatable[i, self.res_index[r]] = q
        self.used = np.zeros_like(self.allocatable)
        self._requests: dict[str, npt.NDArray[np.int64]] = {}
        assumed = assumed or {}
        for p in snapshot.pods:
            node = p.node_name or assumed.get(p.key, "")
            if node in self.node_index and not p.terminal:
                self.used[self.node_index[node]] += self.request_vector(p)
        # Open while one job is evaluated, so a job that raises can be undone (Cycle.run).
        self.journal: list[tuple[int | npt.NDArray[np.int64], npt.NDArray[np.int64], int]] | None = None
        self.tree: TopologyTree = tree_from_cluster_network_topology(snapshot.topology, self.nodes)
        self.layer_labels = {layer.layer: layer.label_keys for layer in snapshot.topology.layers} \
            if snapshot.topology else {}
        self.topology_error = snapshot.topology_error

    def change(self, nodes: int | npt.NDArray[np.int64], request: npt.NDArray[np.int64], sign: int) -> None:
        """Adds (sign 1) or removes (sign -1) ``request`` on one node or on each of ``nodes``
        (repeats count); every change to ``used`` goes through here so a job can be undone."""
        if isinstance(nodes, int):
            self.used[nodes] += sign * request
        else:
            np.add.at(self.used, nodes, sign * request)
        if self.journal is not None:
            self.journal.append((nodes, request, sign))

    def undo(self) -> None:
        """Reverts, last first, every change made since the journal was opened."""
        journal, self.journal = self.journal or [], None
        for nodes, request, sign in reversed(journal):
            self.change(nodes, request, -sign)

    def request_vector(self, pod: Pod) -> npt.NDArray[np.int64]:
        """The pod's requests in resource order; shared, so callers must not mutate it."""
        v = self._requests.get(pod.key)
        if v is None:
            v = np.zeros(len(self.resources), dtype=np.int64)
            for r, q in pod.requests.items():
                v[self.res_index[r]] = q
            v.setflags(write=False)
            self._requests[pod.key] = v
        return v

    def free(self) -> npt.NDArray[np.int64]:
        return self.allocatable - self.used

    @staticmethod
    def natural_order(names: Iterable[str]) -> list[str]:
        return sorted(names, key=natural_key)
