"""Every kind koordpy reads, in one registry: the dispatch table of the shells.

Each entry says everything the shells do per kind (see ``Kind``): where its objects land (the
Snapshot field, and the shells' store of that name), how it is listed, whether a cluster may not
serve it, what the scheduler writes on it (RBAC), and how its errors are reported. The live cache,
the initial list, resync and watches, the simulator's World, both snapshot builders
(``snapshot_fields``), the core's standing view (what a change costs it: ``change``), the writer's
bodies and the chart's RBAC rules (``grants``) loop over this table, so a new kind is one entry here
and its parser (and, if the core must act on it, one field of the Snapshot). ``role`` says what the
core does with the objects. Not here: parsing (the models' modules) and anything that does I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from koordpy.api.disruption import STORE as DISRUPTION_BUDGETS
from koordpy.api.disruption import PodDisruptionBudget
from koordpy.api.dra import DeviceClass, Devices, DeviceTaintRule, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from koordpy.api.errors import ParseError, object_ref
from koordpy.api.kueue import KaiPodGroup, KaiQueue, Topology
from koordpy.api.objects import Namespace, Node, Pod, PriorityClass
from koordpy.api.owners import Owner
from koordpy.api.podgroup import PodGroup
from koordpy.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, Storage, StorageClass
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.api.volcano import HyperNode, VolcanoPodGroup
from koordpy.api.workload import CompositePodGroup, WorkloadPodGroup

# What the core does with a kind's objects ("node", "podgroup", "hypernode"...): any name a kind's
# entry gives, so that a dialect written outside the package adds its own with its kinds
# (``register``); the roles there are those of the kinds in the table (``roles()``), and a dialect's
# roles are held to them when it is registered (``koordpy.core.dialects.register``).
Role: TypeAlias = str
# The storage roles: their objects make up ``Snapshot.storage`` (read by koordpy.core.volumes).
STORAGE_ROLES: tuple[Role, ...] = ("pvc", "pv", "storageclass", "csinode")
# The DRA roles: their objects make up ``Snapshot.devices`` (read by the core's device seam).
DEVICE_ROLES: tuple[Role, ...] = ("deviceclass", "resourceslice", "resourceclaim", "claimtemplate", "devicetaintrule")


Shape = Literal["map", "list", "one", "labels", "by-uid"]
# What a change of a kind's objects costs the core's standing view (``koordpy.core.view`` maps each
# to its work; the registry only names it): "count" its objects are counted one by one where they
# run (pods); "arrays" the resource arrays and trees are rebuilt (nodes); "all" everything is rebuilt
# (trees, owner chains, namespaces' labels, PriorityClasses: few objects that change rarely; the
# safe default for a new kind); "gangs" the gangs its changed objects declare are rebuilt and
# regrouped; "volumes" the volume rules are read again; "devices" the device rules are built again
# (pools, what is allocated); "none" nothing the view keeps depends on them (the core reads them
# afresh as each cycle goes).
Change = Literal["count", "arrays", "all", "gangs", "volumes", "devices", "none"]
CHANGES: tuple[Change, ...] = ("count", "arrays", "all", "gangs", "volumes", "devices", "none")
# Snapshot fields that group stores: "storage.claims" is the ``claims`` of ``Snapshot.storage``.
GROUPS: dict[str, type[Storage] | type[Devices]] = {"storage": Storage, "devices": Devices}


@dataclass(frozen=True)
class Kind:
    """One kind as the shells handle it. Everything they do per kind is read off these fields, so
    that the cache, the initial list and resync, the watches, the simulator's World, both snapshot
    builders, the writer's bodies and the chart's RBAC rules loop over the table."""

    kind: str
    group: str  # "" for the core API
    version: str
    plural: str
    namespaced: bool
    parse: Callable[[dict[str, Any]], object]
    role: Role
    # The Snapshot field its objects fill, and the name of the shells' store that holds them
    # ("storage.claims": the ``claims`` of ``Snapshot.storage``). Kinds may share a store.
    store: str
    # How the store becomes its Snapshot field: "map" key -> object (copied); "list" the objects;
    # "one" the object named ``only`` (or None); "labels" name -> the object's labels; "by-uid"
    # uid -> object (an object without a uid by its store key, ``<Kind>/<key>``).
    shape: Shape = "map"
    name: str = ""  # what the shells file it under and report it by (default: ``kind``)
    # A cluster may not serve it (a CRD not installed, an API not enabled, RBAC that does not grant
    # it): its objects are then left out. The core API's kinds and PriorityClasses are always served.
    optional: bool = True
    # The typed client's LIST call ("CoreV1Api.list_node") for a kind the custom-objects call does not
    # reach (the core API); "" lists it as a custom object (``/apis/<group>/<version>/<plural>``).
    list_call: str = ""
    # RBAC verbs the scheduler needs beyond list and watch: "patch", "delete", or "<subresource>:<verb>"
    # ("status:patch", "binding:create"). The chart's ClusterRole grants exactly these (tests/test_chart.py).
    writes: tuple[str, ...] = ()
    # What a change of its objects (or of its errors field) costs the core's standing view (``Change``).
    change: Change = "all"
    # The Snapshot field that says which of its objects do not parse ("" none): "invalid_podgroups"
    # by key, "topology_error" the ``only`` object's error, a grouped field ("storage.invalid")
    # by "<Kind> <key>".
    errors: str = ""
    source: str = ""  # the topology source (settings' topologySources) that brings it; "" always read
    # The name ``koordpy simulate`` checks "defined twice" under (default: ``kind``): the gang
    # schedulers' PodGroups share one, as do the Topology kinds (jobs name them alone).
    unique_as: str = ""
    only: str = ""  # the one object of the kind koordpy reads (the ClusterNetworkTopology "default")
    # Whether the core's Snapshot has a field named ``store``. A kind without one lands in
    # ``Snapshot.objects[store]``, where the dialect that reads it finds it: adding a kind is its
    # registry entry and its parser, and the core's input type does not change.
    own_field: bool = True
    # Whether v1.37's Priority admission plugin resolves and refuses its objects' priority as it does
    # pods' (``koordpy simulate`` plays it for them).
    priority_admitted: bool = False
    # Whether the ResourceClaim controller makes claims from its objects' ``spec.resourceClaims``
    # templates, as from pods' (v1.37, KEP-5729; ``koordpy simulate`` plays it, ``koordpy.sim.claims``).
    claim_templates: bool = False
    # A top-level section its watch events may come without ("" none), and how an object held is
    # brought up to date from such an event (``renew(held, raw)``; None: the whole object must be
    # read). The pod watch cuts out a spec it has read before (``koordpy.controller.podwatch.skim``): most of a
    # pod's events change its metadata and status alone, and its spec is most of what parsing costs.
    skim: str = ""
    renew: Callable[[Any, dict[str, Any]], object | None] | None = None

    @property
    def gang(self) -> bool:
        """It declares gangs: a change re-checks its pending pods' gang annotations."""
        return self.change == "gangs"

    @property
    def label(self) -> str:
        return self.name or self.kind

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def id(self) -> str:
        """Unique across the table: ``plural.group`` (``pods`` for the core API)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def writes_status(self) -> bool:
        """koordpy writes this kind's status subresource."""
        return "status:patch" in self.writes

    @property
    def patches(self) -> bool:
        """koordpy patches objects of this kind (PreBind's claimRef and selected-node, say)."""
        return "patch" in self.writes

    def key(self, raw: dict[str, Any]) -> str:
        """``namespace/name`` for namespaced kinds, ``name`` otherwise (tolerant of bad input)."""
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name = str(meta.get("name") or "")
        return f"{meta.get('namespace') or 'default'}/{name}" if self.namespaced else name

    def store_key(self, key: str) -> str:
        """Where an object of ``key`` sits in the kind's store: its key, or ``<Kind>/<key>`` in a
        store keyed by uid (several kinds share it, and an object may have no uid)."""
        return f"{self.kind}/{key}" if self.shape == "by-uid" else key

    def check_only(self, raw: dict[str, Any], name: str | None = None) -> None:
        """Refuses an object other than the one koordpy reads of a kind that has ``only``."""
        key = self.key(raw)
        if self.only and key != self.only:
            raise ParseError(object_ref(raw, name), "metadata.name",
                             f"koordpy reads the {self.kind} named {self.only!r}, not {key!r}")


def _from_raw(model: Any) -> Callable[[dict[str, Any]], object]:
    """``model.from_raw``, looked up at each call (so that a test may stand in for a model's parser)."""
    def parse(raw: dict[str, Any]) -> object:
        return model.from_raw(raw)
    return parse


# Parsers that know their apiVersion and kind, for raw objects (from a list call) that omit them.
def _topology(api_version: str) -> Callable[[dict[str, Any]], object]:
    def parse(raw: dict[str, Any]) -> object:
        return Topology.from_raw(raw, api_version)
    return parse


def _owner(api_version: str, kind: str) -> Callable[[dict[str, Any]], object]:
    def parse(raw: dict[str, Any]) -> object:
        return Owner.from_raw(raw, api_version, kind)
    return parse


_GANG_ERRORS = "invalid_podgroups"  # any gang kind's PodGroup that does not parse (a pod naming it waits)
KINDS: tuple[Kind, ...] = (
    Kind("Node", "", "v1", "nodes", False, _from_raw(Node), "node", "nodes", shape="list", optional=False,
         list_call="CoreV1Api.list_node", change="arrays", errors="invalid_nodes"),
    # patch: the gang-timeout and stale-since annotations; delete: preemption's victims and stale
    # gangs' members (PREEMPTION_ONLY).
    Kind("Pod", "", "v1", "pods", True, _from_raw(Pod), "pod", "pods", shape="list", optional=False,
         list_call="CoreV1Api.list_pod_for_all_namespaces",
         writes=("patch", "delete", "binding:create", "status:patch"), change="count", errors="invalid_pods",
         skim="spec", renew=lambda held, raw: held.renewed(raw)),
    Kind("Namespace", "", "v1", "namespaces", False, _from_raw(Namespace), "namespace",  # labels, for namespaceSelector
         "namespaces", shape="labels", optional=False, list_call="CoreV1Api.list_namespace"),
    Kind("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False, _from_raw(PriorityClass),
         "priorityclass", "priority_classes", optional=False, list_call="SchedulingV1Api.list_priority_class"),
    Kind("PodGroup", "scheduling.sigs.k8s.io", "v1alpha1", "podgroups", True, _from_raw(PodGroup), "podgroup",
         "podgroups", writes=("status:patch", "patch"), change="gangs", errors=_GANG_ERRORS),
    Kind("ClusterNetworkTopology", "scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies", False,
         _from_raw(ClusterNetworkTopology), "cnt", "topology", shape="one", writes=("status:patch",),
         errors="topology_error", source="koordinator", only="default"),
    Kind("HyperNode", "topology.volcano.sh", "v1alpha1", "hypernodes", False, _from_raw(HyperNode), "hypernode",
         "hypernodes", writes=("status:patch",), source="volcano"),
    Kind("PodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups", True, _from_raw(VolcanoPodGroup),
         "volcano-podgroup", "volcano_podgroups", name="VolcanoPodGroup", writes=("status:patch", "patch"),
         change="gangs", errors=_GANG_ERRORS),
    # Kueue's Topology at each version a Kueue has served it, newest first: the alternatives the shells
    # list in turn (``alternatives``). The schema is the same at all three (conversion None).
    Kind("Topology", "kueue.x-k8s.io", "v1beta2", "topologies", False, _topology("kueue.x-k8s.io/v1beta2"),
         "topology", "topologies", errors="invalid_topologies", source="kueue"),
    Kind("Topology", "kueue.x-k8s.io", "v1beta1", "topologies", False, _topology("kueue.x-k8s.io/v1beta1"),
         "topology", "topologies", errors="invalid_topologies", source="kueue"),
    Kind("Topology", "kueue.x-k8s.io", "v1alpha1", "topologies", False, _topology("kueue.x-k8s.io/v1alpha1"),
         "topology", "topologies", errors="invalid_topologies", source="kueue"),
    Kind("Topology", "kai.scheduler", "v1alpha1", "topologies", False, _topology("kai.scheduler/v1alpha1"),
         "topology", "topologies", errors="invalid_topologies", source="kueue"),
    Kind("PodGroup", "scheduling.k8s.io", "v1beta1", "podgroups", True, _from_raw(WorkloadPodGroup),
         "workload-podgroup", "workload_podgroups", name="WorkloadPodGroup", unique_as="PodGroup.scheduling.k8s.io",
         writes=("status:patch",), change="gangs", errors=_GANG_ERRORS, own_field=False, priority_admitted=True,
         claim_templates=True),
    # Its status is not written (kube-scheduler v1.37 writes its children's conditions, not its own);
    # a stale gang's stale-since is annotated on it ("patch"). Its gang is keyed by its namespace/name,
    # so one that does not parse is an invalid gang like a PodGroup's.
    Kind("CompositePodGroup", "scheduling.k8s.io", "v1alpha3", "compositepodgroups", True,
         _from_raw(CompositePodGroup), "composite-podgroup", "composite_podgroups", change="gangs", writes=("patch",),
         errors=_GANG_ERRORS, own_field=False, priority_admitted=True),
    Kind("PodGroup", "scheduling.run.ai", "v2alpha2", "podgroups", True, _from_raw(KaiPodGroup), "kai-podgroup",
         "kai_podgroups", name="KaiPodGroup", change="gangs", errors=_GANG_ERRORS, writes=("patch",)),
    # KAI's Queues: the minimum runtime of their jobs (spec.preemptMinRuntime, up the parents), read
    # afresh when a preemption looks for victims.
    Kind("Queue", "scheduling.run.ai", "v2", "queues", False, _from_raw(KaiQueue), "kai-queue", "kai_queues",
         name="KaiQueue", change="none"),
    Kind("Job", "batch", "v1", "jobs", True, _owner("batch/v1", "Job"), "owner", "owners", shape="by-uid"),
    Kind("ReplicaSet", "apps", "v1", "replicasets", True, _owner("apps/v1", "ReplicaSet"), "owner", "owners",
         shape="by-uid"),
    Kind("Deployment", "apps", "v1", "deployments", True, _owner("apps/v1", "Deployment"), "owner", "owners",
         shape="by-uid"),
    Kind("StatefulSet", "apps", "v1", "statefulsets", True, _owner("apps/v1", "StatefulSet"), "owner", "owners",
         shape="by-uid"),
    Kind("JobSet", "jobset.x-k8s.io", "v1alpha2", "jobsets", True, _owner("jobset.x-k8s.io/v1alpha2", "JobSet"),
         "owner", "owners", shape="by-uid"),
    # patch: PreBind's selected-node annotation (dynamic provisioning) and a PV's claimRef (a static bind).
    Kind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", True, _from_raw(PersistentVolumeClaim), "pvc",
         "storage.claims", optional=False, list_call="CoreV1Api.list_persistent_volume_claim_for_all_namespaces",
         writes=("patch",), errors="storage.invalid", change="volumes"),
    Kind("PersistentVolume", "", "v1", "persistentvolumes", False, _from_raw(PersistentVolume), "pv",
         "storage.volumes", optional=False, list_call="CoreV1Api.list_persistent_volume", writes=("patch",),
         errors="storage.invalid", change="volumes"),
    Kind("StorageClass", "storage.k8s.io", "v1", "storageclasses", False, _from_raw(StorageClass), "storageclass",
         "storage.classes", errors="storage.invalid", change="volumes"),
    Kind("CSINode", "storage.k8s.io", "v1", "csinodes", False, _from_raw(CSINode), "csinode", "storage.csinodes",
         errors="storage.invalid", change="volumes"),
    # Dynamic Resource Allocation (resource.k8s.io/v1, GA since v1.34). Optional: a cluster with DRA
    # off does not serve the group. The writes are PreBind's, as kube-scheduler v1.37.2's ClusterRole
    # grants them: patch adds the delete-protection finalizer; status:patch writes status.allocation
    # and status.reservedFor, which a v1.37 API server (DRAResourceClaimGranularStatusAuthorization,
    # beta, on) also checks against the synthetic binding subresource with the request's verb; create
    # and delete the claim of a pod's DRA-backed extended resources.
    Kind("DeviceClass", "resource.k8s.io", "v1", "deviceclasses", False, _from_raw(DeviceClass), "deviceclass",
         "devices.classes", errors="devices.invalid", change="devices"),
    Kind("ResourceSlice", "resource.k8s.io", "v1", "resourceslices", False, _from_raw(ResourceSlice),
         "resourceslice", "devices.slices", errors="devices.invalid", change="devices"),
    Kind("ResourceClaim", "resource.k8s.io", "v1", "resourceclaims", True, _from_raw(ResourceClaim), "resourceclaim",
         "devices.claims", writes=("patch", "create", "delete", "status:patch", "binding:patch"),
         errors="devices.invalid", change="devices"),
    Kind("ResourceClaimTemplate", "resource.k8s.io", "v1", "resourceclaimtemplates", True,
         _from_raw(ResourceClaimTemplate), "claimtemplate", "devices.templates", errors="devices.invalid",
         change="devices"),
    Kind("DeviceTaintRule", "resource.k8s.io", "v1", "devicetaintrules", False, _from_raw(DeviceTaintRule),
         "devicetaintrule", "devices.taint_rules", errors="devices.invalid", change="devices"),
    # Read by preemption, which counts victims against them (``koordpy.core.preemption``). "none": the
    # cluster reads the budgets afresh each cycle and counts its pods against their selectors only
    # when those change (``Cluster.set_budgets``), so a status that moves rebuilds nothing.
    Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", True, _from_raw(PodDisruptionBudget),
         "pdb", DISRUPTION_BUDGETS, change="none", own_field=False),
)
# Writes only while preemption is on (settings' ``preemption``) or stale gangs may be evicted (a
# ``staleGangGracePeriodSeconds`` not negative): (plural, verb).
PREEMPTION_ONLY: frozenset[tuple[str, str]] = frozenset({("pods", "delete")})
# What the scheduler is granted beside the kinds it reads: (group, resource, verbs). Events it
# writes (a repeat patches the count of the one written before); the custom resource definitions
# kopf watches, to notice a kind installed after the start.
OTHER_GRANTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("", "events", ("create", "patch")),
    ("apiextensions.k8s.io", "customresourcedefinitions", ("list", "watch")),
)

# Kinds a user's manifests (or a ``kubectl get -o yaml`` dump) may carry that koordpy does not read:
# ``koordpy simulate`` lists them as ignored, not refused. A Workload is the template its PodGroups
# were made from; the PodGroups say all the scheduler reads.
# (apiVersion, kind) pairs; ``register`` adds a dialect's, ``passive`` reads them at each call.
_PASSIVE: frozenset[tuple[str, str]] = frozenset({("scheduling.k8s.io/v1beta1", "Workload")})
_BY_API: dict[tuple[str, str], Kind] = {}
_BY_ID: dict[str, Kind] = {}
_BY_NAME: dict[str, Kind] = {}
_ALTERNATIVES: dict[str, tuple[Kind, ...]] = {}


def _index(kinds: tuple[Kind, ...]) -> None:
    """``KINDS`` and the tables that find its entries, filled again in place."""
    global KINDS
    KINDS = kinds
    _BY_API.clear()
    _BY_API.update({(k.api_version, k.kind): k for k in kinds})
    _BY_ID.clear()
    _ALTERNATIVES.clear()
    for k in kinds:  # entries of one resource are its versions, the preferred (first listed) the one named
        _BY_ID.setdefault(k.id, k)
        _ALTERNATIVES[k.id] = (*_ALTERNATIVES.get(k.id, ()), k)
    _BY_NAME.clear()
    for k in _BY_ID.values():  # the Topology kinds share one name (and one store, keyed by name)
        _BY_NAME.setdefault(k.label, k)


_index(KINDS)


def register(*added: Kind, passive: frozenset[tuple[str, str]] = frozenset()) -> Callable[[], None]:
    """Adds kinds to the registry, after those there (a dialect's written outside the package, as a
    test's), and the (apiVersion, kind) pairs of ``passive`` to the kinds read as ignored; returns
    what takes them out again. The shells read ``KINDS`` as it is when they loop over it
    (``koordpy.api.kinds.KINDS``, not a copy taken at import)."""
    global _PASSIVE
    before, passive_before = KINDS, _PASSIVE
    _index((*before, *added))
    _PASSIVE = passive_before | passive

    def undo() -> None:
        global _PASSIVE
        _index(before)
        _PASSIVE = passive_before
    return undo


def roles() -> frozenset[Role]:
    """The roles of the kinds in the table, as it is now."""
    return frozenset(k.role for k in KINDS)


def passive(api_version: str, kind: str) -> bool:
    """Whether a manifest's object of ``kind`` is one koordpy does not read and lists as ignored."""
    return (api_version, kind) in _PASSIVE


def optional(group: str, plural: str) -> bool:
    """Whether a cluster may not serve the kind (``Kind.optional``; a kind not in the table is
    optional unless it is of the core API)."""
    found = _BY_ID.get(f"{plural}.{group}" if group else plural)
    return found.optional if found is not None else group != ""


def kind_for(api_version: str, kind: str) -> Kind | None:
    return _BY_API.get((api_version, kind))


def by_id(ident: str) -> Kind:
    return _BY_ID[ident]


def by_name(name: str) -> Kind | None:
    """The watched kind the shells file under ``name`` (``Kind.label``)."""
    return _BY_NAME.get(name)


def watched() -> tuple[Kind, ...]:
    """One entry per resource, its preferred version (a kind served at several is listed and watched
    once, at the version ``alternatives`` finds served)."""
    return tuple(_BY_ID.values())


def alternatives(kind: Kind) -> tuple[Kind, ...]:
    """The versions to list ``kind``'s resource at, in turn until the cluster serves one: ``kind``
    itself (the version in use), then the registry's other entries of the resource in the order
    listed, newest first. One entry for a resource registered at one version."""
    return (kind, *(k for k in _ALTERNATIVES.get(kind.id, ()) if k is not kind))


def object_key(kind: Kind, raw: dict[str, Any]) -> str:
    """``namespace/name`` for a namespaced kind, ``name`` otherwise (see ``Kind.key``)."""
    return kind.key(raw)


def new_stores() -> dict[str, dict[str, Any]]:
    """An empty store for every store the table names, for a shell to file objects in."""
    return {k.store: {} for k in KINDS}


def _shaped(kind: Kind, store: dict[str, Any]) -> Any:
    if kind.shape == "list":
        return list(store.values())
    if kind.shape == "one":
        return store.get(kind.only)
    if kind.shape == "labels":
        return {key: obj.labels for key, obj in store.items()}
    if kind.shape == "by-uid":
        return {obj.uid or key: obj for key, obj in store.items()}
    return dict(store)


def snapshot_fields(stores: dict[str, dict[str, Any]], invalid: dict[tuple[str, str], str] | None = None,
                    skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The Snapshot's fields, built from a shell's stores (each copied: the shell goes on changing
    them) and from what does not parse (``invalid``: (``Kind.label``, key) -> error), less the
    stores in ``skip`` (a field the shell builds itself)."""
    out: dict[str, Any] = {}
    grouped: dict[str, dict[str, Any]] = {}
    done: set[str] = set()
    for kind in KINDS:
        if kind.store in done or kind.store in skip:
            continue
        done.add(kind.store)
        group, _, part = kind.store.partition(".")
        if part:
            grouped.setdefault(group, {})[part] = _shaped(kind, stores[kind.store])
        elif not kind.own_field:
            out.setdefault("objects", {})[group] = _shaped(kind, stores[kind.store])
        else:
            out[group] = _shaped(kind, stores[kind.store])
    for kind in KINDS:  # a grouped field's errors, even with no store of the group filled
        group, _, part = kind.errors.partition(".")
        if part:
            grouped.setdefault(group, {}).setdefault(part, {})
        elif group and kind.shape != "one":
            out.setdefault(group, {})
    for (name, key), err in (invalid or {}).items():
        found = by_name(name)
        if found is None or not found.errors:
            continue
        group, _, part = found.errors.partition(".")
        if part:
            grouped[group][part][f"{name} {key}"] = err
        elif found.shape == "one":
            if key == found.only:
                out[group] = err
        else:
            out[group][key] = err
    for group, parts in grouped.items():
        out[group] = GROUPS[group](**parts)
    return out


def grants(sources: tuple[str, ...] | None = None, preemption: bool = True,
           evicts: bool = True) -> set[tuple[str, str, str]]:
    """Every (apiGroup, resource[/subresource], verb) the scheduler needs: list and watch on each
    kind it reads, the writes of ``Kind.writes`` and ``OTHER_GRANTS``. ``sources`` (None: all),
    ``preemption`` and ``evicts`` (stale gangs evicted: a grace not negative) are the settings that
    leave kinds or verbs out."""
    out: set[tuple[str, str, str]] = set()
    for kind in watched():
        if kind.source and sources is not None and kind.source not in sources:
            continue
        out |= {(kind.group, kind.plural, "list"), (kind.group, kind.plural, "watch")}
        for write in kind.writes:
            sub, _, verb = write.rpartition(":")
            if not (preemption or evicts) and (kind.plural, verb) in PREEMPTION_ONLY and not sub:
                continue
            out.add((kind.group, f"{kind.plural}/{sub}" if sub else kind.plural, verb))
    out |= {(group, resource, verb) for group, resource, verbs in OTHER_GRANTS for verb in verbs}
    return out
