"""What a pod's ``spec.volumes`` mean to scheduling: the claims it needs, and the volumes that
count against a node's attach limits or conflict with another pod's disk.

Belongs here: reading ``spec.volumes`` into ``PodVolume``. The storage kinds the rules look these
up in (PersistentVolumeClaim, PersistentVolume, StorageClass, CSINode) are in
``koordpy.api.storage``; the rules themselves in ``koordpy.core.volumes``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from koordpy.api.model import Record
from koordpy.api.raw import Reader

# In-tree volume plugins whose volumes the CSI migration counts under a CSI driver's attach limit
# (kube-scheduler translates them; migration is on for these wherever the node has a CSINode).
# spec.volumes field -> (in-tree plugin name, CSI driver, the field that identifies the volume).
MIGRATED: dict[str, tuple[str, str, str]] = {
    "awsElasticBlockStore": ("kubernetes.io/aws-ebs", "ebs.csi.aws.com", "volumeID"),
    "gcePersistentDisk": ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io", "pdName"),
    "azureDisk": ("kubernetes.io/azure-disk", "disk.csi.azure.com", "diskURI"),
    "cinder": ("kubernetes.io/cinder", "cinder.csi.openstack.org", "volumeID"),
    "portworxVolume": ("kubernetes.io/portworx-volume", "pxd.portworx.com", "volumeID"),
}
DRIVER_OF_PLUGIN = {plugin: driver for plugin, driver, _ in MIGRATED.values()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Disk(Record):
    """An in-tree disk that two pods on one node may not share (VolumeRestrictions): a GCE PD unless
    both mount it read-only, an AWS EBS volume always, an iSCSI IQN or a Ceph RBD image unless both
    are read-only (RBD: the same pool and image with a monitor in common)."""

    kind: str  # gcePersistentDisk, awsElasticBlockStore, iscsi, rbd
    id: str
    read_only: bool = False
    monitors: tuple[str, ...] = ()  # rbd only

    def conflicts(self, other: Disk) -> bool:
        if self.kind != other.kind or self.id != other.id:
            return False
        if self.kind == "awsElasticBlockStore":
            return True
        if self.kind == "rbd" and not set(self.monitors) & set(other.monitors):
            return False
        return not (self.read_only and other.read_only)


@dataclass(frozen=True, slots=True, kw_only=True)
class PodVolume(Record):
    name: str
    claim: str = ""  # the PersistentVolumeClaim it mounts (a generic ephemeral volume's: <pod>-<volume>)
    ephemeral: bool = False  # a generic ephemeral volume: its claim is made for the pod by a controller
    driver: str = ""  # an in-tree volume counted under this CSI driver's attach limit
    handle: str = ""  # ... as this volume
    disk: Disk | None = None


def pod_volumes(r: Reader, pod_name: str, spec: dict[str, Any]) -> tuple[PodVolume, ...]:
    """``spec.volumes`` as far as scheduling reads them; the other volume types (configMap,
    secret, emptyDir, hostPath, inline csi...) place no constraint on nodes and are left out."""
    out = []
    for i, item in enumerate(r.seq(spec.get("volumes"), "spec.volumes")):
        field = f"spec.volumes[{i}]"
        v = r.mapping(item, field)
        name = r.string(v.get("name"), f"{field}.name", required=True)
        if v.get("persistentVolumeClaim") is not None:
            pvc = r.mapping(v.get("persistentVolumeClaim"), f"{field}.persistentVolumeClaim")
            out.append(PodVolume(name=name, claim=r.string(pvc.get("claimName"),
                                                           f"{field}.persistentVolumeClaim.claimName", required=True)))
        elif v.get("ephemeral") is not None:
            r.mapping(v.get("ephemeral"), f"{field}.ephemeral")
            out.append(PodVolume(name=name, claim=f"{pod_name}-{name}", ephemeral=True))
        else:
            for source, (_, driver, id_field) in MIGRATED.items():
                if v.get(source) is None:
                    continue
                src = r.mapping(v.get(source), f"{field}.{source}")
                ident = r.string(src.get(id_field), f"{field}.{source}.{id_field}", required=True)
                read_only = r.boolean(src.get("readOnly"), f"{field}.{source}.readOnly")
                disk = Disk(kind=source, id=ident, read_only=read_only) \
                    if source in ("gcePersistentDisk", "awsElasticBlockStore") else None
                out.append(PodVolume(name=name, driver=driver, handle=ident, disk=disk))
            for source, id_of in (("iscsi", _iscsi_id), ("rbd", _rbd_id)):
                if v.get(source) is not None:
                    src = r.mapping(v.get(source), f"{field}.{source}")
                    ident, monitors = id_of(r, src, f"{field}.{source}")
                    out.append(PodVolume(name=name, disk=Disk(
                        kind=source, id=ident, monitors=monitors,
                        read_only=r.boolean(src.get("readOnly"), f"{field}.{source}.readOnly"))))
    return tuple(out)


def _iscsi_id(r: Reader, src: dict[str, Any], field: str) -> tuple[str, tuple[str, ...]]:
    return r.string(src.get("iqn"), f"{field}.iqn", required=True), ()


def _rbd_id(r: Reader, src: dict[str, Any], field: str) -> tuple[str, tuple[str, ...]]:
    image = r.string(src.get("image"), f"{field}.image", required=True)
    pool = r.string(src.get("pool"), f"{field}.pool") or "rbd"  # the API server's default pool
    monitors = tuple(r.string(m, f"{field}.monitors[{j}]") for j, m in enumerate(r.seq(src.get("monitors"),
                                                                                      f"{field}.monitors")))
    return f"{pool}/{image}", monitors
