"""The snapshot the core schedules against, and its array form (the ``Cluster``).

``Snapshot`` is plain data the shell assembles from its cache. ``Cluster`` turns it into
the numpy arrays the kernels take: allocatable and used resources per node, in a fixed
resource order, with the node order of the topology tree's input (natural name order).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from koordpy.api.kueue import KaiPodGroup, Topology
from koordpy.api.objects import PODS, Node, Pod, PriorityClass
from koordpy.api.owners import Owner
from koordpy.api.podgroup import PodGroup
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.api.volcano import HyperNode, VolcanoPodGroup
from koordpy.core.naming import natural_key
from koordpy.core.tree import TopologyTree


@dataclass
class Snapshot:
    nodes: list[Node]
    pods: list[Pod]
    podgroups: dict[str, PodGroup] = field(default_factory=dict)
    topology: ClusterNetworkTopology | None = None
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    scheduler_names: frozenset[str] = frozenset({"koordpy"})
    # Objects the shell could not parse, so the core can say why their pods wait.
    invalid_podgroups: dict[str, str] = field(default_factory=dict)  # namespace/name -> error (any PodGroup kind)
    topology_error: str | None = None  # the ClusterNetworkTopology "default" exists but is invalid
    hypernodes: dict[str, HyperNode] = field(default_factory=dict)
    topologies: dict[str, Topology] = field(default_factory=dict)  # Kueue / KAI Topology by name
    invalid_topologies: dict[str, str] = field(default_factory=dict)  # name -> error
    volcano_podgroups: dict[str, VolcanoPodGroup] = field(default_factory=dict)
    kai_podgroups: dict[str, KaiPodGroup] = field(default_factory=dict)
    owners: dict[str, Owner] = field(default_factory=dict)  # uid -> Job, ReplicaSet, Deployment...

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
    """Resource arrays over the snapshot's nodes, and which pods are counted where.

    ``used`` changes only through ``count`` (a pod's usage starts, moves or ends) and ``change``
    (a Statement's trial moves), so that every change can be undone (``journal``) and every room
    freed is known (``freed_since(tick)``; a job that failed for want of room needs another look
    only where room appeared after it failed).
    """

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
        self._requests: dict[str, tuple[dict[str, int], npt.NDArray[np.int64]]] = {}
        self.counted: dict[str, tuple[int, npt.NDArray[np.int64]]] = {}  # pod -> (node, request) in used
        self.tick = 0
        self.moves = 0  # usage changes kept (room taken as well as freed): what a job of unlike pods watches
        self._freed: list[int | npt.NDArray[np.int64]] = []  # where room appeared at ticks base+1, base+2...
        self._freed_base = 0
        # Open while one job is evaluated, so a job that raises can be undone (Cycle._isolated).
        self.journal: list[Callable[[], None]] | None = None
        assumed = assumed or {}
        for p in snapshot.pods:
            self.recount(p.key, p, assumed)
        from koordpy.core.sources import Trees  # the sources build on this module's types

        self.trees = Trees(snapshot, self.nodes)
        self.layer_labels = {layer.layer: layer.label_keys for layer in snapshot.topology.layers} \
            if snapshot.topology else {}
        self.topology_error = snapshot.topology_error

    @property
    def tree(self) -> TopologyTree:
        """The ClusterNetworkTopology's tree (the cluster and its nodes when there is none)."""
        return self.trees["cnt"]

    def freed_since(self, tick: int) -> npt.NDArray[np.int64]:
        """The nodes where room appeared after ``tick``."""
        assert tick >= self._freed_base, "asked about room freed before what is kept"
        parts = [np.atleast_1d(n) for n in self._freed[tick - self._freed_base:]]
        return np.unique(np.concatenate(parts)) if parts else np.zeros(0, dtype=np.int64)

    def forget_freed(self, tick: int) -> None:
        """Drops what ``freed_since`` would return for ticks before ``tick`` (nobody asks any more)."""
        del self._freed[: max(0, tick - self._freed_base)]
        self._freed_base = max(self._freed_base, tick)

    def knows(self, pod: Pod) -> bool:
        """Whether every resource the pod requests has a column (else the arrays must be rebuilt)."""
        return all(r in self.res_index for r in pod.requests)

    def recount(self, key: str, pod: Pod | None, assumed: dict[str, str]) -> None:
        """Counts ``pod`` (None: gone) where it runs or is reserved, if that changed."""
        node = None
        if pod is None:
            self._requests.pop(key, None)  # gone: its cached vector would outlive it
        elif not pod.terminal:
            node = self.node_index.get(pod.node_name or assumed.get(key, ""))
        have = self.counted.get(key)
        if node is None:
            if have is not None:
                self.count(key, None)
            return
        assert pod is not None
        vec = self.request_vector(pod)
        if have is None or have[0] != node or have[1] is not vec:
            self.count(key, (node, vec))

    def count(self, key: str, entry: tuple[int, npt.NDArray[np.int64]] | None) -> None:
        """Moves the pod's usage to ``entry`` (node, request), or ends it."""
        old = self.counted.get(key)
        if old is not None:
            self.change(old[0], old[1], -1, frees=True)
        if entry is not None:
            self.change(entry[0], entry[1], 1)
        self.adopt(key, entry)

    def adopt(self, key: str, entry: tuple[int, npt.NDArray[np.int64]] | None) -> None:
        """Records the pod as counted at ``entry`` (whose usage is already in ``used``)."""
        old = self.counted.get(key)
        self.moves += 1
        if entry is None:
            self.counted.pop(key, None)
        else:
            self.counted[key] = entry
        if self.journal is not None:
            self.journal.append(lambda: self._restore(key, old))

    def _restore(self, key: str, entry: tuple[int, npt.NDArray[np.int64]] | None) -> None:
        if entry is None:
            self.counted.pop(key, None)
        else:
            self.counted[key] = entry

    def change(self, nodes: int | npt.NDArray[np.int64], request: npt.NDArray[np.int64], sign: int,
               frees: bool = False) -> None:
        """Adds (sign 1) or removes (sign -1) ``request`` on one node or on each of ``nodes``
        (repeats count). ``frees``: room that other jobs may now use appeared (a trial move
        undone is not that: nobody else ever saw it taken)."""
        if isinstance(nodes, int):
            self.used[nodes] += sign * request
        else:
            np.add.at(self.used, nodes, sign * request)
        if frees:
            self.tick += 1
            self._freed.append(nodes)
        if self.journal is not None:
            self.journal.append(lambda: self.change(nodes, request, -sign))

    def undo(self) -> None:
        """Reverts, last first, every change made since the journal was opened."""
        journal, self.journal = self.journal or [], None
        for revert in reversed(journal):
            revert()

    def request_vector(self, pod: Pod) -> npt.NDArray[np.int64]:
        """The pod's requests in resource order; shared, so callers must not mutate it. The same
        requests give the same array object, which is how ``recount`` sees nothing changed."""
        cached = self._requests.get(pod.key)
        if cached is not None and cached[0] is pod.requests:
            return cached[1]
        v = np.zeros(len(self.resources), dtype=np.int64)
        for r, q in pod.requests.items():
            v[self.res_index[r]] = q
        v.setflags(write=False)
        if cached is not None and np.array_equal(cached[1], v):
            v = cached[1]
        self._requests[pod.key] = (pod.requests, v)
        return v

    def free(self) -> npt.NDArray[np.int64]:
        return self.allocatable - self.used

    @staticmethod
    def natural_order(names: Iterable[str]) -> list[str]:
        return sorted(names, key=natural_key)
