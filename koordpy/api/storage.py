"""The storage kinds the volume rules read: PersistentVolumeClaim, PersistentVolume, StorageClass
and CSINode, as koordpy sees them, and ``Storage``, all of them together in a snapshot.

Belongs here: parsing (with the Reader, held to what the API server accepts) and the plain facts
kube-scheduler's volume plugins ask of one object (a claim's class, whether it is bound, whether a
volume is pre-bound to a claim). The rules that combine them are in ``koordpy.core.volumes``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.model import NamespacedKey
from koordpy.api.objects import NodeSelectorTerm, Requirement, node_selector_terms
from koordpy.api.podvolumes import DRIVER_OF_PLUGIN, MIGRATED
from koordpy.api.raw import Reader, read_object
from koordpy.api.selectors import LabelSelector

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"
ANN_BETA_CLASS = "volume.beta.kubernetes.io/storage-class"
NO_PROVISIONER = "kubernetes.io/no-provisioner"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
READ_WRITE_ONCE_POD = "ReadWriteOncePod"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _access_modes(r: Reader, raw: Any, field: str) -> tuple[str, ...]:
    modes = []
    for i, m in enumerate(r.seq(raw, field)):
        mode = r.string(m, f"{field}[{i}]", required=True)
        if mode not in ACCESS_MODES:
            raise r.fail(f"{field}[{i}]", f"unknown access mode {mode!r}; one of {', '.join(ACCESS_MODES)}")
        modes.append(mode)
    return tuple(modes)


def _volume_mode(r: Reader, raw: Any, field: str) -> str:
    mode = r.string(raw, field) or "Filesystem"
    if mode not in ("Filesystem", "Block"):
        raise r.fail(field, f"must be Filesystem or Block, got {mode!r}")
    return mode


def _controller_uid(r: Reader, meta: dict[str, Any]) -> str | None:
    for i, o in enumerate(r.seq(meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = r.mapping(o, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True:
            return r.string(ref.get("uid"), f"metadata.ownerReferences[{i}].uid")
    return None


class PersistentVolumeClaim(_Model, NamespacedKey):
    namespace: str
    name: str
    uid: str = ""
    annotations: dict[str, str] = {}
    storage_class: str | None = None  # spec.storageClassName; None when unset
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    request: int = 0  # spec.resources.requests.storage, bytes
    selector: LabelSelector | None = None
    volume_name: str = ""
    phase: str = "Pending"
    deleting: bool = False
    controller_uid: str | None = None  # the uid of its controlling owner (a generic ephemeral volume's pod)

    @property
    def class_name(self) -> str:
        """The class it asks for: the beta annotation, else ``spec.storageClassName``, else ""."""
        if ANN_BETA_CLASS in self.annotations:
            return self.annotations[ANN_BETA_CLASS]
        return self.storage_class or ""

    @property
    def bound(self) -> bool:
        """Fully bound, as the PV controller finishes it: a volume named and the bind completed."""
        return bool(self.volume_name) and ANN_BIND_COMPLETED in self.annotations

    @property
    def selected_node(self) -> str | None:
        return self.annotations.get(ANN_SELECTED_NODE)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> PersistentVolumeClaim:
        r, meta, (spec, status) = read_object(raw, "PersistentVolumeClaim", "spec", "status")
        resources = r.mapping(spec.get("resources"), "spec.resources")
        requests = r.mapping(resources.get("requests"), "spec.resources.requests")
        request = r.quantity("storage", requests["storage"], "spec.resources.requests.storage") \
            if requests.get("storage") is not None else 0
        selector = LabelSelector.from_raw(r, spec.get("selector"), "spec.selector") \
            if spec.get("selector") is not None else None
        sc = spec.get("storageClassName")
        return cls(
            namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
            uid=r.string(meta.get("uid"), "metadata.uid"),
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            storage_class=None if sc is None else r.string(sc, "spec.storageClassName"),
            access_modes=_access_modes(r, spec.get("accessModes"), "spec.accessModes"),
            volume_mode=_volume_mode(r, spec.get("volumeMode"), "spec.volumeMode"),
            request=request, selector=selector,
            volume_name=r.string(spec.get("volumeName"), "spec.volumeName"),
            phase=r.string(status.get("phase"), "status.phase") or "Pending",
            deleting=meta.get("deletionTimestamp") is not None,
            controller_uid=_controller_uid(r, meta),
        )


class ClaimRef(_Model):
    namespace: str
    name: str
    uid: str = ""


class PersistentVolume(_Model):
    name: str
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    storage_class: str = ""
    capacity: int = 0  # spec.capacity.storage, bytes
    access_modes: tuple[str, ...] = ()
    volume_mode: str = "Filesystem"
    node_affinity: tuple[NodeSelectorTerm, ...] | None = None  # spec.nodeAffinity.required's terms
    claim_ref: ClaimRef | None = None
    phase: str = "Pending"
    deleting: bool = False
    driver: str = ""  # the CSI driver its attach counts against (a csi source, or a migrated in-tree one)
    handle: str = ""

    @property
    def class_name(self) -> str:
        return self.annotations.get(ANN_BETA_CLASS, self.storage_class)

    def bound_to(self, claim: PersistentVolumeClaim) -> bool:
        """Whether its claimRef names ``claim`` (pre-bound, or bound)."""
        ref = self.claim_ref
        return ref is not None and ref.namespace == claim.namespace and ref.name == claim.name and (
            not ref.uid or ref.uid == claim.uid)

    def affinity_allows(self, labels: dict[str, str]) -> bool:
        """``spec.nodeAffinity.required`` against a node's labels (as kube-scheduler checks it: by
        labels only, so a matchFields term on the node's name matches nothing)."""
        if self.node_affinity is None:
            return True
        return any(t.matches("", labels) for t in self.node_affinity)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> PersistentVolume:
        r, meta, (spec, status) = read_object(raw, "PersistentVolume", "spec", "status")
        capacity = r.mapping(spec.get("capacity"), "spec.capacity")
        na = r.mapping(spec.get("nodeAffinity"), "spec.nodeAffinity")
        affinity = None
        if na.get("required") is not None:
            req = r.mapping(na.get("required"), "spec.nodeAffinity.required")
            affinity = node_selector_terms(r, req.get("nodeSelectorTerms"),
                                           "spec.nodeAffinity.required.nodeSelectorTerms")
        claim_ref = None
        if spec.get("claimRef") is not None:
            ref = r.mapping(spec.get("claimRef"), "spec.claimRef")
            claim_ref = ClaimRef(namespace=r.string(ref.get("namespace"), "spec.claimRef.namespace") or "default",
                                 name=r.string(ref.get("name"), "spec.claimRef.name"),
                                 uid=r.string(ref.get("uid"), "spec.claimRef.uid"))
        driver = handle = ""
        if spec.get("csi") is not None:
            csi = r.mapping(spec.get("csi"), "spec.csi")
            driver = r.string(csi.get("driver"), "spec.csi.driver", required=True)
            handle = r.string(csi.get("volumeHandle"), "spec.csi.volumeHandle", required=True)
        else:
            for source, (_, csi_driver, id_field) in MIGRATED.items():
                if spec.get(source) is not None:
                    src = r.mapping(spec.get(source), f"spec.{source}")
                    driver, handle = csi_driver, r.string(src.get(id_field), f"spec.{source}.{id_field}")
        return cls(
            name=r.name(meta.get("name")), labels=r.str_map(meta.get("labels"), "metadata.labels"),
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            storage_class=r.string(spec.get("storageClassName"), "spec.storageClassName"),
            capacity=r.quantity("storage", capacity["storage"], "spec.capacity.storage")
            if capacity.get("storage") is not None else 0,
            access_modes=_access_modes(r, spec.get("accessModes"), "spec.accessModes"),
            volume_mode=_volume_mode(r, spec.get("volumeMode"), "spec.volumeMode"),
            node_affinity=affinity, claim_ref=claim_ref,
            phase=r.string(status.get("phase"), "status.phase") or "Pending",
            deleting=meta.get("deletionTimestamp") is not None, driver=driver, handle=handle,
        )


class StorageClass(_Model):
    name: str
    provisioner: str = ""
    binding_mode: Literal["Immediate", "WaitForFirstConsumer"] = "Immediate"  # the API server's default
    # allowedTopologies: each term a conjunction of In requirements; none: every node.
    allowed_topologies: tuple[tuple[Requirement, ...], ...] = ()

    @property
    def provisions(self) -> bool:
        return bool(self.provisioner) and self.provisioner != NO_PROVISIONER

    @property
    def driver(self) -> str:
        """The CSI driver its volumes attach with (an in-tree provisioner's migrated driver)."""
        return DRIVER_OF_PLUGIN.get(self.provisioner, self.provisioner)

    def topology_allows(self, labels: dict[str, str]) -> bool:
        if not self.allowed_topologies:
            return True
        # An empty term selects nothing.
        return any(term and all(req.matches(labels) for req in term) for term in self.allowed_topologies)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> StorageClass:
        r, meta, _ = read_object(raw, "StorageClass")
        mode = r.string(raw.get("volumeBindingMode"), "volumeBindingMode") or "Immediate"
        if mode not in ("Immediate", "WaitForFirstConsumer"):
            raise r.fail("volumeBindingMode", f"must be Immediate or WaitForFirstConsumer, got {mode!r}")
        terms = []
        for i, t in enumerate(r.seq(raw.get("allowedTopologies"), "allowedTopologies")):
            tm = r.mapping(t, f"allowedTopologies[{i}]")
            reqs = []
            exprs = r.seq(tm.get("matchLabelExpressions"), f"allowedTopologies[{i}].matchLabelExpressions")
            for j, e in enumerate(exprs):
                f = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
                em = r.mapping(e, f)
                values = tuple(r.string(v, f"{f}.values[{k}]") for k, v in enumerate(r.seq(em.get("values"),
                                                                                            f"{f}.values")))
                if not values:
                    raise r.fail(f"{f}.values", "must not be empty")
                reqs.append(Requirement(key=r.string(em.get("key"), f"{f}.key", required=True), operator="In",
                                        values=values))
            terms.append(tuple(reqs))
        return cls(name=r.name(meta.get("name")),
                   provisioner=r.string(raw.get("provisioner"), "provisioner", required=True),
                   binding_mode=mode,  # type: ignore[arg-type]
                   allowed_topologies=tuple(terms))


class CSINode(_Model):
    name: str  # the node's
    limits: dict[str, int] = {}  # driver -> spec.drivers[].allocatable.count, where given
    drivers: tuple[str, ...] = ()

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> CSINode:
        r, meta, (spec,) = read_object(raw, "CSINode", "spec")
        limits: dict[str, int] = {}
        drivers = []
        for i, d in enumerate(r.seq(spec.get("drivers"), "spec.drivers")):
            dm = r.mapping(d, f"spec.drivers[{i}]")
            name = r.string(dm.get("name"), f"spec.drivers[{i}].name", required=True)
            drivers.append(name)
            count = r.integer(r.mapping(dm.get("allocatable"), f"spec.drivers[{i}].allocatable").get("count"),
                              f"spec.drivers[{i}].allocatable.count", minimum=0)
            if count is not None:
                limits[name] = count
        return cls(name=r.name(meta.get("name")), limits=limits, drivers=tuple(drivers))


@dataclass
class Storage:
    """Every storage object of a snapshot. The shells hand back the same objects for what did not
    change, so the core tells a change by identity (``changed_from``)."""

    claims: dict[str, PersistentVolumeClaim] = field(default_factory=dict)  # namespace/name
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    classes: dict[str, StorageClass] = field(default_factory=dict)
    csinodes: dict[str, CSINode] = field(default_factory=dict)
    # Objects that do not parse: "<Kind> <key>" -> why; a pod that names one waits, saying so.
    invalid: dict[str, str] = field(default_factory=dict)

    def copy(self) -> Storage:
        return Storage(dict(self.claims), dict(self.volumes), dict(self.classes), dict(self.csinodes),
                       dict(self.invalid))

    def changed_from(self, other: Storage) -> bool:
        return self.invalid != other.invalid or any(
            not _same(a, b) for a, b in ((self.claims, other.claims), (self.volumes, other.volumes),
                                         (self.classes, other.classes), (self.csinodes, other.csinodes)))

    def empty(self) -> bool:
        return not (self.claims or self.volumes or self.classes or self.csinodes or self.invalid)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.keys() == b.keys() and all(v is b[k] or v == b[k] for k, v in a.items())
