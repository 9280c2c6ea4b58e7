"""The volume rules kube-scheduler's VolumeRestrictions, NodeVolumeLimits, VolumeBinding and
VolumeZone plugins apply, and the PreBind decision for claims that are bound at scheduling time.

Belongs here: which nodes a pod's volumes allow and why not, in kube-scheduler v1.37's words; what
must be written before a pod is bound (a static PersistentVolume's claimRef, a claim's
selected-node for its provisioner); what this cycle has assumed of those writes. Reads
``Storage`` (koordpy.api.storage) and the pods counted on nodes. Does not belong here: parsing
(koordpy.api), carrying out the writes (the shells), the filters of other plugins (filters.py).

A reason that rules out every node at once (kube-scheduler's PreFilter: a claim not found, an
unbound claim of an Immediate class) is a ``PreFilterReason``: the message names it without a
node count, as kube-scheduler's does.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from koordpy.api.objects import Node, Pod
from koordpy.api.storage import (
    ANN_SELECTED_NODE,
    READ_WRITE_ONCE_POD,
    ClaimRef,
    PersistentVolume,
    PersistentVolumeClaim,
    Storage,
)
from koordpy.core.decisions import VolumeBinding

# kube-scheduler v1.37's reasons, per node (worded in koordpy.core.messages).
from koordpy.core.messages import BIND_CONFLICT as BIND_CONFLICT
from koordpy.core.messages import DISK_CONFLICT as DISK_CONFLICT
from koordpy.core.messages import MAX_VOLUME_COUNT as MAX_VOLUME_COUNT
from koordpy.core.messages import NODE_CONFLICT as NODE_CONFLICT
from koordpy.core.messages import PV_NOT_EXIST as PV_NOT_EXIST
from koordpy.core.messages import RWOP_CONFLICT as RWOP_CONFLICT
from koordpy.core.messages import SHARED_CLAIM as SHARED_CLAIM
from koordpy.core.messages import UNBOUND_IMMEDIATE as UNBOUND_IMMEDIATE
from koordpy.core.messages import ZONE_CONFLICT as ZONE_CONFLICT
from koordpy.core.messages import (
    claim_deleting,
    claim_lost,
    claim_not_found,
    claim_not_owned,
    claim_unreadable,
    ephemeral_claim_missing,
    volume_not_found,
)
from koordpy.core.txn import Txn
from koordpy.core.verdicts import PreFilterReason

# The PV labels VolumeZone compares with the node's (the beta ones read as their GA twins too).
ZONE_LABELS = ("failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
               "topology.kubernetes.io/zone", "topology.kubernetes.io/region")
_GA = {"failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
       "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region"}


_VERSIONS = itertools.count(1)


@dataclass(frozen=True)
class _Claims:
    """A pod's claims, sorted as VolumeBinding's PreFilter sorts them."""

    prefilter: PreFilterReason | None
    bound: tuple[PersistentVolumeClaim, ...] = ()
    delayed: tuple[PersistentVolumeClaim, ...] = ()  # unbound, WaitForFirstConsumer
    zone_pvs: tuple[PersistentVolume, ...] = ()  # PVs of persistentVolumeClaim volumes VolumeZone compares


class VolumeRules:
    """The volume filters over one ``Storage``; ``prebind`` assumes this cycle's PreBind writes (the
    same objects the shell writes), so later pods see a PV taken and a claim's node chosen, each
    undone with the job's transaction (a job rolled back leaves the PVs and claims as it found them)."""

    def __init__(self, storage: Storage) -> None:
        self.claims = dict(storage.claims)
        self.pvs = dict(storage.volumes)
        self.classes = storage.classes
        self.csinodes = storage.csinodes
        self.invalid = storage.invalid
        # New for every state (a new one, or an assume): the filters' cached answers for volume pods expire.
        self.version = next(_VERSIONS)
        # PreBind's writes assumed here and not undone: the next snapshot's storage is what holds (the
        # shell assumes the writes it makes and undoes those that fail), so the view builds the rules
        # again from it. A job rolled back leaves nothing assumed, and the rules need not be built again.
        self.assumed = False
        self._kept = 0  # assumptions made and not undone
        self._by_class: dict[str, list[PersistentVolume]] | None = None
        self.limited = any(c.limits for c in self.csinodes.values())

    # -- what a pod's answer depends on ----------------------------------------------------

    @staticmethod
    def key(pod: Pod) -> tuple[object, ...]:
        """Pods with equal keys get the same answer from the same state."""
        ephemeral = any(v.ephemeral for v in pod.volumes)
        return (pod.namespace, pod.volumes, (pod.name, pod.uid) if ephemeral else None)

    def dynamic(self, pod: Pod) -> bool:
        """Whether the answer depends on where other pods are (ReadWriteOncePod, disks, attach limits)."""
        if any(v.disk is not None for v in pod.volumes):
            return True
        if self.limited and any(v.claim or v.driver for v in pod.volumes):
            return True
        for v in pod.volumes:
            claim = self.claims.get(f"{pod.namespace}/{v.claim}") if v.claim else None
            if claim is not None and READ_WRITE_ONCE_POD in claim.access_modes:
                return True
        return False

    # -- the filters -----------------------------------------------------------------------

    def reasons(self, pod: Pod, nodes: list[Node], placed: Mapping[str, tuple[Pod, int]]) -> list[str | None]:
        """Per node, the first volume rule it fails for ``pod`` (None: it passes them all), in the
        order kube-scheduler runs them: VolumeRestrictions, NodeVolumeLimits, VolumeBinding,
        VolumeZone. ``placed``: every other pod counted on a node (key -> pod, node index)."""
        claims = self._sort(pod)
        if claims.prefilter is not None:
            return [claims.prefilter] * len(nodes)
        if self._rwop_in_use(pod, placed):
            return [RWOP_CONFLICT] * len(nodes)
        disks = [v.disk for v in pod.volumes if v.disk is not None]
        on_node: dict[int, list[Pod]] = {}
        if disks or self.limited:
            for other, at in placed.values():
                if other.volumes:
                    on_node.setdefault(at, []).append(other)
        out: list[str | None] = []
        new = self._attachable(pod) if self.limited else {}
        for i, node in enumerate(nodes):
            why = None
            if disks and any(d.conflicts(o.disk) for other in on_node.get(i, ()) for o in other.volumes
                             if o.disk is not None for d in disks):
                why = DISK_CONFLICT
            elif new and self._over_limit(node, new, on_node.get(i, ())):
                why = MAX_VOLUME_COUNT
            else:
                why = self._binding_reason(claims, node) or self._zone_reason(claims, node)
            out.append(why)
        return out

    def together(self, placing: Mapping[int, list[Pod]], nodes: list[Node],
                 placed: Mapping[str, tuple[Pod, int]]) -> tuple[Pod, str] | None:
        """For the pods of one job placed at once (node index -> pods): each passed the volume filters
        alone, against the pods placed before; here they are held to them together. Returns a pod and
        the rule they break together: one static PersistentVolume for two claims, a ReadWriteOncePod claim
        used twice, two disks in conflict, or a node's attach limit exceeded."""
        users: set[str] = set()
        for pods in placing.values():
            for pod in pods:
                for v in pod.volumes:
                    claim = self.claims.get(f"{pod.namespace}/{v.claim}") if v.claim and not v.ephemeral else None
                    if claim is not None and READ_WRITE_ONCE_POD in claim.access_modes:
                        if claim.key in users:
                            return pod, RWOP_CONFLICT
                        users.add(claim.key)
        taken: set[str] = set()  # static PVs the members before took: one PV binds one claim
        claim_at: dict[str, int] = {}  # an unbound claim members share is bound once, for one node
        for at, pods in placing.items():
            for pod in pods:
                delayed = self._sort(pod).delayed
                if any(claim_at.get(c.key, at) != at for c in delayed):
                    return pod, SHARED_CLAIM
                delayed = tuple(c for c in delayed if c.key not in claim_at)
                found = self._bindings(delayed, nodes[at], taken) if delayed else ([], [])
                if found is None:
                    return pod, BIND_CONFLICT
                taken.update(name for _, name in found[0])
                claim_at.update((c.key, at) for c in delayed)
        for at, pods in placing.items():
            if len(pods) < 2:
                continue
            here = [p for p, where in placed.values() if where == at and p.volumes]
            csinode = self.csinodes.get(nodes[at].name)
            for pod in pods:
                disks = [v.disk for v in pod.volumes if v.disk is not None]
                if disks and any(d.conflicts(o.disk) for other in here for o in other.volumes
                                 if o.disk is not None for d in disks):
                    return pod, DISK_CONFLICT
                if csinode is not None and csinode.limits:
                    new = self._attachable(pod)
                    if new and self._over_limit(nodes[at], new, here):
                        return pod, MAX_VOLUME_COUNT
                here.append(pod)
        return None

    def _sort(self, pod: Pod) -> _Claims:
        bound: list[PersistentVolumeClaim] = []
        delayed: list[PersistentVolumeClaim] = []
        immediate = False
        for v in pod.volumes:
            if not v.claim:
                continue
            key = f"{pod.namespace}/{v.claim}"
            bad = self.invalid.get(f"PersistentVolumeClaim {key}")
            if bad is not None:
                return _Claims(claim_unreadable(v.claim, bad))
            claim = self.claims.get(key)
            if claim is None:
                if v.ephemeral:
                    return _Claims(ephemeral_claim_missing(v.claim))
                return _Claims(claim_not_found(v.claim))
            if claim.phase == "Lost":
                return _Claims(claim_lost(v.claim, claim.volume_name))
            if claim.deleting:
                return _Claims(claim_deleting(v.claim))
            if v.ephemeral and (claim.controller_uid is None or claim.controller_uid != pod.uid):
                return _Claims(claim_not_owned(key, pod.key))
            if claim.bound:
                bound.append(claim)
            elif self._delayed(claim) and not claim.volume_name:
                delayed.append(claim)
            else:
                immediate = True
        if immediate:
            return _Claims(PreFilterReason(UNBOUND_IMMEDIATE))
        # VolumeZone reads the PVs of persistentVolumeClaim volumes (not generic ephemeral ones); a PV
        # it cannot find rules out every node.
        zone: list[PersistentVolume] = []
        for v in pod.volumes:
            if not v.claim or v.ephemeral:
                continue
            claim = self.claims[f"{pod.namespace}/{v.claim}"]
            if not claim.volume_name:
                continue  # unbound WaitForFirstConsumer: VolumeZone skips it
            pv = self.pvs.get(claim.volume_name)
            if pv is None:
                return _Claims(volume_not_found(claim.volume_name))
            zone.append(pv)
        return _Claims(None, tuple(bound), tuple(delayed), tuple(zone))

    def _delayed(self, claim: PersistentVolumeClaim) -> bool:
        sc = self.classes.get(claim.class_name) if claim.class_name else None
        return sc is not None and sc.binding_mode == "WaitForFirstConsumer"

    def _rwop_in_use(self, pod: Pod, placed: Mapping[str, tuple[Pod, int]]) -> bool:
        """VolumeRestrictions: a ReadWriteOncePod claim of the pod used by another pod on any node."""
        rwop = set()
        for v in pod.volumes:
            if v.claim and not v.ephemeral:
                claim = self.claims.get(f"{pod.namespace}/{v.claim}")
                if claim is not None and READ_WRITE_ONCE_POD in claim.access_modes:
                    rwop.add(v.claim)
        if not rwop:
            return False
        return any(other.key != pod.key and other.namespace == pod.namespace
                   and any(v.claim in rwop for v in other.volumes)
                   for other, _ in placed.values() if other.volumes)

    # NodeVolumeLimits ---------------------------------------------------------------------

    def _attachable(self, pod: Pod) -> dict[str, str]:
        """The pod's volumes that count against a CSI driver's attach limit: unique name -> driver.
        A claim not yet bound counts under its class's provisioner, as one volume of its own."""
        out: dict[str, str] = {}
        for v in pod.volumes:
            if v.driver:
                out[f"{v.driver}^{v.handle}"] = v.driver
                continue
            if not v.claim:
                continue
            claim = self.claims.get(f"{pod.namespace}/{v.claim}")
            if claim is None:
                continue  # a pod already placed whose claim is gone: not counted, as kube-scheduler does
            pv = self.pvs.get(claim.volume_name) if claim.volume_name else None
            if pv is not None:
                if pv.driver and pv.handle:
                    out[f"{pv.driver}^{pv.handle}"] = pv.driver
                continue
            sc = self.classes.get(claim.class_name) if claim.class_name else None
            if sc is not None and sc.provisioner:
                out[f"{sc.driver}^pending-{claim.key}"] = sc.driver
        return out

    def _over_limit(self, node: Node, new: dict[str, str], others: Iterable[Pod]) -> bool:
        csinode = self.csinodes.get(node.name)
        if csinode is None or not csinode.limits:
            return False
        # In-tree volumes count only where CSI migration is on: wherever the node has a CSINode.
        attached: dict[str, str] = {}
        for other in others:
            attached.update(self._attachable(other))
        counts: dict[str, int] = {}
        for driver in attached.values():
            counts[driver] = counts.get(driver, 0) + 1
        adding: dict[str, int] = {}
        for name, driver in new.items():
            if name not in attached:
                adding[driver] = adding.get(driver, 0) + 1
        return any(driver in csinode.limits and counts.get(driver, 0) + n > csinode.limits[driver]
                   for driver, n in adding.items())

    # VolumeBinding ------------------------------------------------------------------------

    def _binding_reason(self, claims: _Claims, node: Node) -> str | None:
        for claim in claims.bound:
            pv = self.pvs.get(claim.volume_name)
            if pv is None:
                return PV_NOT_EXIST
            if not pv.affinity_allows(node.labels):
                return NODE_CONFLICT
        if claims.delayed and self._bindings(claims.delayed, node) is None:
            return BIND_CONFLICT
        return None

    def _class_pvs(self, name: str) -> list[PersistentVolume]:
        if self._by_class is None:
            self._by_class = {}
            for pv in sorted(self.pvs.values(), key=lambda p: p.name):
                self._by_class.setdefault(pv.class_name, []).append(pv)
        return self._by_class.get(name, [])

    def _bindings(self, delayed: tuple[PersistentVolumeClaim, ...], node: Node,
                  taken: set[str] | None = None) -> tuple[list[tuple[str, str]], list[str]] | None:
        """For unbound WaitForFirstConsumer claims on ``node``: the static PV each takes, and the claims
        to provision; None when some claim can have neither there."""
        if any(c.selected_node is not None and c.selected_node != node.name for c in delayed):
            return None  # its provisioner works for another node already
        static: list[tuple[str, str]] = []
        provision: list[str] = []
        chosen: set[str] = set(taken or ())
        for claim in sorted(delayed, key=lambda c: c.request):  # the smallest claims choose first
            if claim.selected_node is None:
                pv = self._match(claim, node, chosen)
                if pv is not None:
                    chosen.add(pv.name)
                    static.append((claim.key, pv.name))
                    continue
            sc = self.classes.get(claim.class_name)
            if sc is None or not sc.provisions or not sc.topology_allows(node.labels):
                return None
            provision.append(claim.key)
        return static, provision

    def _match(self, claim: PersistentVolumeClaim, node: Node, chosen: set[str]) -> PersistentVolume | None:
        """The smallest available PV that satisfies the claim on ``node`` (a PV pre-bound to the claim
        first), as the PV controller's matching does it."""
        best: PersistentVolume | None = None
        for pv in self._class_pvs(claim.class_name) if claim.class_name else []:
            if pv.name in chosen or (pv.claim_ref is not None and not pv.bound_to(claim)):
                continue
            if pv.capacity < claim.request or pv.volume_mode != claim.volume_mode or pv.deleting:
                continue
            fits_node = pv.affinity_allows(node.labels)
            if pv.bound_to(claim):
                return pv if fits_node else None
            if pv.phase != "Available" or (claim.selector is not None and not claim.selector.matches(pv.labels)):
                continue
            if not fits_node or not set(claim.access_modes) <= set(pv.access_modes):
                continue
            if best is None or pv.capacity < best.capacity:
                best = pv
        return best

    # VolumeZone ---------------------------------------------------------------------------

    @staticmethod
    def _zone_reason(claims: _Claims, node: Node) -> str | None:
        if not claims.zone_pvs or not any(k in node.labels for k in ZONE_LABELS):
            return None
        for pv in claims.zone_pvs:
            for key in ZONE_LABELS:
                if key not in pv.labels:
                    continue
                values = {z.strip() for z in pv.labels[key].split("__")}
                have = node.labels.get(key, node.labels.get(_GA.get(key, key)))
                if have is None or have not in values:
                    return ZONE_CONFLICT
        return None

    # -- PreBind -----------------------------------------------------------------------------

    def _changed(self) -> None:
        """The PVs or claims changed: the filters' cached answers, and the PVs by class, expire."""
        self.version = next(_VERSIONS)
        self._by_class = None

    def prebind(self, pod: Pod, node: Node, txn: Txn) -> VolumeBinding | None:
        """What must be written before ``pod`` is bound to ``node`` (None: its claims are all bound,
        or it has none), assumed at once for the pods placed after it (VolumeBinding's Reserve), and
        undone with ``txn`` (its Unreserve). Raises LookupError when a claim can no longer be bound
        there (a pod placed before it in this cycle took the PV)."""
        claims = self._sort(pod)
        if claims.prefilter is not None:
            raise LookupError(str(claims.prefilter))
        if not claims.delayed:
            return None
        found = self._bindings(claims.delayed, node)
        if found is None:
            raise LookupError(BIND_CONFLICT)
        pairs, provision = found
        static = [(k, n) for k, n in pairs if not self.pvs[n].bound_to(self.claims[k])]
        prebound = tuple((k, n) for k, n in pairs if (k, n) not in static)
        fresh = tuple(k for k in provision if self.claims[k].selected_node != node.name)
        txn.record(_Assumed(self, [(n, self.pvs[n]) for _, n in static], [(k, self.claims[k]) for k in fresh]))
        for claim_key, pv_name in static:
            claim = self.claims[claim_key]
            self.pvs[pv_name] = self.pvs[pv_name].model_copy(update={"claim_ref": ClaimRef(
                namespace=claim.namespace, name=claim.name, uid=claim.uid)})
        for claim_key in fresh:
            claim = self.claims[claim_key]
            self.claims[claim_key] = claim.model_copy(update={"annotations": {**claim.annotations,
                                                                              ANN_SELECTED_NODE: node.name}})
        self._changed()
        self._kept += 1
        self.assumed = True
        return VolumeBinding(node.name, tuple(static), fresh, tuple(c.key for c in claims.delayed), prebound)



@dataclass(frozen=True)
class _Assumed:
    """One pod's PreBind assumptions (``VolumeRules.prebind``), undone with the job's transaction:
    the PersistentVolumes and claims it changed put back as they were (kube-scheduler's VolumeBinding
    Unreserve, which reverts the assumed volumes)."""

    rules: VolumeRules
    pvs: list[tuple[str, PersistentVolume]]
    claims: list[tuple[str, PersistentVolumeClaim]]

    def undo(self) -> None:
        rules = self.rules
        rules.pvs.update(self.pvs)
        rules.claims.update(self.claims)
        rules._changed()
        rules._kept -= 1
        rules.assumed = rules._kept > 0
