"""The snapshot the core schedules against: plain input, objects by kind, as the shell assembles
them from its cache (or the simulator from its world), and what changed in its pods.

Belongs here: the ``Snapshot`` and ``PodChanges`` data and questions about a pod that need only
them (``claims``, ``gated``). Does not belong here: arrays, counting and trees (the ``Cluster``,
``koordpy.core.cluster``), or what any API family means (``koordpy.core.dialects``), which read
this module and are never imported by it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from koordpy.api.dra import Devices
from koordpy.api.kueue import KaiPodGroup, KaiQueue, Topology
from koordpy.api.objects import Node, Pod, PriorityClass
from koordpy.api.owners import Owner
from koordpy.api.podgroup import PodGroup
from koordpy.api.storage import Storage
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.api.volcano import HyperNode, VolcanoPodGroup
from koordpy.devices.gangsearch import GANG_BUDGET


@dataclass(frozen=True)
class PodChanges:
    """What a shell knows changed in ``Snapshot.pods`` since the last snapshot it handed out, so the
    core's standing view applies a few changes instead of comparing every pod (kube-scheduler's
    cache updates its snapshot by generation the same way). ``number`` counts the snapshots of one
    ``source``; the view uses the changes only when its last snapshot was ``number - 1`` of the same
    source, and otherwise compares the pods, which is always right."""

    source: int
    number: int
    pods: dict[str, Pod | None]  # key -> the pod as this snapshot shows it; None: gone from it


# KAI-Scheduler's default staleness grace period (its ``globalDefaultStalenessGracePeriod``).
STALE_GRACE = 60.0
# ``admittedStaleGangGracePeriodSeconds``: a gang a controller in front of koordpy admitted (Kueue)
# is that controller's to recover (its waitForPodsReady): koordpy only reports it.
ADMITTED_STALE_GRACE = -1.0


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
    # Nodes that do not parse: there, not gone (their pods still count to their gangs, koordpy.core.liveness).
    invalid_nodes: dict[str, str] = field(default_factory=dict)  # name -> error
    # Pods that do not parse: a gang cannot tell whether one of them is its member, running.
    invalid_pods: dict[str, str] = field(default_factory=dict)  # namespace/name -> error
    volcano_podgroups: dict[str, VolcanoPodGroup] = field(default_factory=dict)
    kai_podgroups: dict[str, KaiPodGroup] = field(default_factory=dict)
    kai_queues: dict[str, KaiQueue] = field(default_factory=dict)  # KAI's Queues by name (minimum runtimes)
    owners: dict[str, Owner] = field(default_factory=dict)  # uid -> Job, ReplicaSet, Deployment...
    # The operator's switch (``preemption: false``): a job that does not fit waits for room.
    preemption: bool = True
    # The operator's ``podsPerCycle``: once a cycle has placed this many pods, the jobs after wait
    # for the next cycle (``koordpy.core.queue.Round``); 0: no limit.
    pods_per_cycle: int = 0
    # The operator's ``deviceGangSearchSeconds``: one job's gang-wide device search's time budget.
    gang_search_seconds: float = GANG_BUDGET
    # The operator's ``defaultPreemptMinRuntimeSeconds`` and ``defaultPreemptionDelaySeconds``: a job's
    # minimum runtime and preemption delay where its objects set none (``koordpy.core.runtime``).
    default_min_runtime: float = 0.0
    default_preemption_delay: float = 0.0
    # The operator's ``staleGangGracePeriodSeconds``: how long a gang may run below its minimum
    # before the rest of it is evicted, where the job sets no grace of its own (negative: never,
    # only reported; ``koordpy.core.stale``).
    stale_grace: float = STALE_GRACE
    # The operator's ``admittedStaleGangGracePeriodSeconds``: the same for a gang a controller in
    # front of koordpy admitted any member of (``koordpy.core.dialects.admitted_by``, Kueue), which
    # recovers it itself; negative (the default): only reported.
    admitted_stale_grace: float = ADMITTED_STALE_GRACE
    changes: PodChanges | None = None
    # Namespace name -> its labels, for inter-pod affinity's namespaceSelector. A namespace not
    # listed has no labels as far as the core knows.
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    # The stores of the kinds that have no field of their own (``Kind.own_field``), by store name:
    # what a dialect reads that the rest of the core does not (``of``).
    objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    # PersistentVolumeClaims, PersistentVolumes, StorageClasses and CSINodes, for the volume rules.
    storage: Storage = field(default_factory=Storage)
    # DeviceClasses, ResourceSlices, ResourceClaims, ResourceClaimTemplates and DeviceTaintRules (DRA).
    devices: Devices = field(default_factory=Devices)

    def of(self, store: str) -> dict[str, Any]:
        """The objects of a kind without a field of its own (its registry ``store``), by key."""
        return self.objects.get(store, {})

    def claims(self, pod: Pod) -> bool:
        """Pending pods this scheduler must place. A pod with ``spec.schedulingGates`` is not one yet:
        whoever set a gate (Kueue, say) holds it until admission, the API server itself reports it
        (``PodScheduled=False``, reason ``SchedulingGated``) and refuses its binding; it is still a
        member of its gang, only never attempted."""
        return (pod.scheduler_name in self.scheduler_names and not pod.node_name
                and not pod.terminal and not pod.deleting and not pod.scheduling_gates)

    def gated(self, pod: Pod) -> bool:
        """Pods this scheduler will place once their scheduling gates are removed."""
        return (bool(pod.scheduling_gates) and pod.scheduler_name in self.scheduler_names and not pod.node_name
                and not pod.terminal and not pod.deleting)
