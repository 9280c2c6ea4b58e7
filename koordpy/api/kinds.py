"""Every kind koordpy reads, in one registry: group, version, plural, scope, parser and role.

The simulator, the live cache, the initial list and the watches, and the writer all read this
table, so a new kind is one entry here (and, if the core must act on it, one field of the
Snapshot). ``role`` says what the core does with the objects.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from koordpy.api.kueue import KaiPodGroup, Topology
from koordpy.api.objects import Namespace, Node, Pod, PriorityClass
from koordpy.api.owners import Owner
from koordpy.api.podgroup import PodGroup
from koordpy.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.api.volcano import HyperNode, VolcanoPodGroup
from koordpy.api.workload import WorkloadPodGroup

Role = Literal["node", "pod", "priorityclass", "podgroup", "cnt", "hypernode", "volcano-podgroup", "topology",
               "kai-podgroup", "owner", "namespace", "pvc", "pv", "storageclass", "csinode", "workload-podgroup"]
ROLES: tuple[Role, ...] = ("node", "pod", "priorityclass", "podgroup", "cnt", "hypernode", "volcano-podgroup",
                           "topology", "kai-podgroup", "owner", "namespace", "pvc", "pv", "storageclass", "csinode",
                           "workload-podgroup")
# The storage roles: their objects make up ``Snapshot.storage`` (read by koordpy.core.volumes).
STORAGE_ROLES: tuple[Role, ...] = ("pvc", "pv", "storageclass", "csinode")


@dataclass(frozen=True)
class Kind:
    kind: str
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool
    parse: Callable[[dict[str, Any]], object]
    role: Role
    writes_status: bool = False  # koordpy writes this kind's status subresource
    patches: bool = False  # koordpy patches objects of this kind (PreBind's claimRef and selected-node)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def id(self) -> str:
        """Unique across the table: ``plural.group`` (``pods`` for the core API)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def key(self, raw: dict[str, Any]) -> str:
        """``namespace/name`` for namespaced kinds, ``name`` otherwise (tolerant of bad input)."""
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = str(meta.get("name") or "")
        return f"{meta.get('namespace') or 'default'}/{name}" if self.namespaced else name


# Parsers that know their apiVersion and kind, for raw objects (from a list call) that omit them.
def _topology(api_version: str) -> Callable[[dict[str, Any]], object]:
    def parse(raw: dict[str, Any]) -> object:
        return Topology.from_raw(raw, api_version)
    return parse


def _owner(api_version: str, kind: str) -> Callable[[dict[str, Any]], object]:
    def parse(raw: dict[str, Any]) -> object:
        return Owner.from_raw(raw, api_version, kind)
    return parse


KINDS: tuple[Kind, ...] = (
    Kind("Node", "", "v1", "nodes", False, Node.from_raw, "node"),
    Kind("Pod", "", "v1", "pods", True, Pod.from_raw, "pod"),
    Kind("Namespace", "", "v1", "namespaces", False, Namespace.from_raw, "namespace"),  # labels, for namespaceSelector
    Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False, PriorityClass.from_raw,
         "priorityclass"),
    Kind("PodGroup", "scheduling.sigs.k8s.io", "v1alpha1", "podgroups", True, PodGroup.from_raw, "podgroup",
         writes_status=True),
    Kind("ClusterNetworkTopology", "scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies", False,
         ClusterNetworkTopology.from_raw, "cnt", writes_status=True),
    Kind("HyperNode", "topology.volcano.sh", "v1alpha1", "hypernodes", False, HyperNode.from_raw, "hypernode",
         writes_status=True),
    Kind("PodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups", True, VolcanoPodGroup.from_raw,
         "volcano-podgroup", writes_status=True),
    Kind("Topology", "kueue.x-k8s.io", "v1beta1", "topologies", False, _topology("kueue.x-k8s.io/v1beta1"),
         "topology"),
    Kind("Topology", "kueue.x-k8s.io", "v1alpha1", "topologies", False, _topology("kueue.x-k8s.io/v1alpha1"),
         "topology"),
    Kind("Topology", "kai.scheduler", "v1alpha1", "topologies", False, _topology("kai.scheduler/v1alpha1"),
         "topology"),
    Kind("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", True, WorkloadPodGroup.from_raw,
         "workload-podgroup"),
    Kind("PodGroup", "scheduling.run.ai", "v2alpha2", "podgroups", True, KaiPodGroup.from_raw, "kai-podgroup"),
    Kind("Job", "batch", "v1", "jobs", True, _owner("batch/v1", "Job"), "owner"),
    Kind("ReplicaSet", "apps", "v1", "replicasets", True, _owner("apps/v1", "ReplicaSet"), "owner"),
    Kind("Deployment", "apps", "v1", "deployments", True, _owner("apps/v1", "Deployment"), "owner"),
    Kind("StatefulSet", "apps", "v1", "statefulsets", True, _owner("apps/v1", "StatefulSet"), "owner"),
    Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True, _owner("jobset.x-k8s.io/v1alpha2", "JobSet"),
         "owner"),
    Kind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, PersistentVolumeClaim.from_raw, "pvc",
         patches=True),
    Kind("PersistentVolume", "", "v1", "persistentvolumes", False, PersistentVolume.from_raw, "pv", patches=True),
    Kind("StorageClass", "storage.k8s.io", "v1", "storageclasses", False, StorageClass.from_raw, "storageclass"),
    Kind("CSINode", "storage.k8s.io", "v1", "csinodes", False, CSINode.from_raw, "csinode"),
)

_BY_API = {(k.api_version, k.kind): k for k in KINDS}
_BY_ID: dict[str, Kind] = {}
for _k in KINDS:  # Kueue serves its Topology at two versions; the first listed (the newer) is watched
    _BY_ID.setdefault(_k.id, _k)


def optional(group: str, plural: str) -> bool:
    """Whether a cluster may not serve the kind (a CRD not installed, an API not enabled, RBAC that
    does not grant it): its objects are then left out. Nodes, pods, namespaces, the storage kinds of
    the core API and PriorityClasses are always served."""
    return group != "" and (group, plural) != ("scheduling.k8s.io", "priorityclasses")


def kind_for(api_version: str, kind: str) -> Kind | None:
    return _BY_API.get((api_version, kind))


def by_id(ident: str) -> Kind:
    return _BY_ID[ident]


def watched() -> tuple[Kind, ...]:
    """One entry per resource (a kind served at two versions is listed and watched once)."""
    return tuple(_BY_ID.values())


def object_key(kind: Kind, raw: dict[str, Any]) -> str:
    """``namespace/name`` for a namespaced kind, ``name`` otherwise (see ``Kind.key``)."""
    return kind.key(raw)
