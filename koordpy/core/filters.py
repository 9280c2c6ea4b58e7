"""The filter extension point: which nodes a pod may run on, and kube-scheduler's words for why not.

Static filters (unschedulable, not ready, taints, nodeSelector, required node affinity, the node
features a pod needs) depend only on the pod's scheduling constraints and the node, so they are
computed once per distinct set of constraints and cached; resource fit is a numpy comparison. A pod
with volumes also gets the volume rules (koordpy.core.volumes) in its mask: its answer is cached
until the storage state changes (``VolumeRules.version``) and, for rules that count other pods
(ReadWriteOncePod, attach limits, disks), until any pod moves (``Cluster.moves``). A pod with
ResourceClaims gets DynamicResources' filter (koordpy.core.claims) on the nodes the others leave,
cached until the device state changes (``DeviceRules.version``). The rules between
pods (host ports, topology spread, inter-pod affinity) depend on where other pods are at the moment
asked, so ``mask`` and the counts ask ``koordpy.core.podrules`` each time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import PODS, Node, Pod, Taint
from koordpy.core.claims import DeviceRules
from koordpy.core.cluster import Cluster
from koordpy.core.messages import AFFINITY as AFFINITY
from koordpy.core.messages import FEATURES as FEATURES
from koordpy.core.messages import NOT_READY as NOT_READY
from koordpy.core.messages import TOO_MANY_PODS, insufficient, render, untolerated_taint
from koordpy.core.messages import UNSCHEDULABLE as UNSCHEDULABLE
from koordpy.core.podrules import PORTS, Check, PodRules, rules_key
from koordpy.core.verdicts import NodesFiltered, PreFilterReason
from koordpy.core.volumes import VolumeRules

_UNSCHEDULABLE_TAINT = Taint(key="node.kubernetes.io/unschedulable", effect="NoSchedule")
_NOT_READY_TAINT = Taint(key="node.kubernetes.io/not-ready", effect="NoSchedule")


def constraints_key(pod: Pod) -> tuple[object, ...]:
    """Pods with equal keys pass the static filters on exactly the same nodes."""
    return (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations, pod.required_features)


@dataclass
class StaticFit:
    mask: npt.NDArray[np.bool_]
    reasons: list[str | None]  # per node, the first static reason it fails, or None
    counts: Counter[str]  # how many nodes each reason rules out


def _static_reason(pod: Pod, node: Node) -> str | None:
    if node.unschedulable and not any(t.tolerates(_UNSCHEDULABLE_TAINT) for t in pod.tolerations):
        return UNSCHEDULABLE
    if not node.ready and not any(t.tolerates(_NOT_READY_TAINT) for t in pod.tolerations):
        return NOT_READY
    taint = pod.untolerated_taint(node)
    if taint is not None:
        return untolerated_taint(taint.key, taint.value)
    if not pod.selects_node(node):
        return AFFINITY
    if pod.required_features and not node.declared_features.issuperset(pod.required_features):
        return FEATURES  # kube-scheduler's NodeDeclaredFeatures
    return None


class Filters:
    """Per-cycle filter cache over one ``Cluster``."""

    def __init__(self, cluster: Cluster, volumes: VolumeRules | None = None,
                 devices: DeviceRules | None = None) -> None:
        self.cluster = cluster
        self._static: dict[tuple[object, ...], StaticFit] = {}
        self.volumes = volumes
        self.devices = devices
        # Pods with claims: (constraints, claims) -> (device state, the answer without them, the answer).
        self._device_fits: dict[tuple[object, ...], tuple[int, StaticFit, StaticFit]] = {}
        # Pods with volumes: (constraints, volumes) -> (what the answer depended on, the answer).
        self._volume_fits: dict[tuple[object, ...], tuple[tuple[int, int], StaticFit]] = {}
        # Every pod counted on a node, for the volume rules that count other pods (set by the View).
        self.placed: Callable[[], dict[str, tuple[Pod, int]]] = dict
        self.rules = PodRules(cluster.presence)

    def mask(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """The nodes ``pod`` may use now: the static filters', less what the rules between pods
        remove given where pods are at this moment (the static mask itself when no rule applies)."""
        static = self.static(pod).mask
        if not self.rules.applies(pod):
            return static
        return static & self.rules.check(pod).mask

    def check(self, pod: Pod) -> Check | None:
        return self.rules.check(pod) if self.rules.applies(pod) else None

    def static(self, pod: Pod, loose: bool = False) -> StaticFit:
        """The nodes the pod's own filters allow and why not the others. ``loose``: the devices the
        pod's claims would get are counted as if none were in use (what removing pods may free)."""
        if self.devices is not None and self.devices.uses(pod):
            return self._with_devices(pod, self.devices, loose)
        if pod.volumes and self.volumes is not None:
            return self._with_volumes(pod, self.volumes)
        return self._plain(pod)

    def without_devices(self, pod: Pod) -> StaticFit:
        """The pod's static filters that kube-scheduler runs before DynamicResources' (its volumes too)."""
        return self._with_volumes(pod, self.volumes) if pod.volumes and self.volumes is not None else self._plain(pod)

    def _with_devices(self, pod: Pod, rules: DeviceRules, loose: bool) -> StaticFit:
        """The pod's other static filters, then DynamicResources' on the nodes they leave (the
        allocator runs on those only); cached until the device state changes (``DeviceRules.version``)."""
        base = self.without_devices(pod)
        key = (constraints_key(pod), rules.key(pod), loose)
        hit = self._device_fits.get(key)
        if hit is not None and hit[0] == rules.version and hit[1] is base:
            return hit[2]
        device = rules.reasons(pod, self.cluster.nodes, base.mask, loose)
        if device and isinstance(device[0], PreFilterReason):
            reasons: list[str | None] = [device[0]] * len(self.cluster.nodes)  # PreFilter: no node is looked at
        else:
            left = iter(device)
            reasons = [b if b is not None else next(left) for b in base.reasons]
        fit = StaticFit(mask=np.array([r is None for r in reasons], dtype=np.bool_), reasons=reasons,
                        counts=Counter(r for r in reasons if r is not None))
        self._device_fits[key] = (rules.version, base, fit)
        return fit

    def _with_volumes(self, pod: Pod, rules: VolumeRules) -> StaticFit:
        base = self._plain(pod)
        key = (constraints_key(pod), rules.key(pod))
        epoch = (rules.version, self.cluster.moves if rules.dynamic(pod) else -1)
        hit = self._volume_fits.get(key)
        if hit is not None and hit[0] == epoch:
            return hit[1]
        placed = self.placed()
        placed.pop(pod.key, None)
        volume = rules.reasons(pod, self.cluster.nodes, placed)
        if volume and isinstance(volume[0], PreFilterReason):
            reasons = volume  # kube-scheduler's PreFilter: no node is looked at
        else:
            reasons = [b if b is not None else v for b, v in zip(base.reasons, volume, strict=True)]
        fit = StaticFit(mask=np.array([r is None for r in reasons], dtype=np.bool_), reasons=reasons,
                        counts=Counter(r for r in reasons if r is not None))
        self._volume_fits[key] = (epoch, fit)
        return fit

    def _plain(self, pod: Pod) -> StaticFit:
        key = constraints_key(pod)
        fit = self._static.get(key)
        if fit is None:
            reasons = [_static_reason(pod, n) for n in self.cluster.nodes]
            fit = StaticFit(mask=np.array([r is None for r in reasons], dtype=np.bool_), reasons=reasons,
                            counts=Counter(r for r in reasons if r is not None))
            self._static[key] = fit
        return fit

    def static_counts(self, pods: list[Pod]) -> Counter[str]:
        """Per reason, how many nodes it rules out for at least one of ``pods``: the static filters,
        then the rules between pods among the nodes the static filters leave."""
        fits = list({id(f): f for f in (self.static(p) for p in pods)}.values())
        counts = self._static_counts(fits)
        passed = np.logical_and.reduce([f.mask for f in fits])
        seen: set[tuple[object, ...]] = set()
        for p in pods:
            key = rules_key(p, self.rules.presence)
            if key in seen:
                continue
            seen.add(key)
            check = self.check(p)
            if check is not None:
                for why, n in check.counts(passed).items():
                    counts[why] = max(counts[why], n)
        return counts

    def _static_counts(self, fits: list[StaticFit]) -> Counter[str]:
        if len(fits) == 1:
            return Counter(fits[0].counts)
        counts: Counter[str] = Counter()
        ruled_out = ~np.logical_and.reduce([f.mask for f in fits])
        for i in np.flatnonzero(ruled_out).tolist():  # usually few: only they need a reason
            why = next((f.reasons[i] for f in fits if f.reasons[i] is not None), None)
            if why is not None:
                counts[why] += 1
        return counts

    def explain(self, pod: Pod, request: npt.NDArray[np.int64]) -> str:
        """``0/N nodes are available: ...`` for ``pod`` against the cluster as it stands now."""
        return render(NodesFiltered(len(self.cluster.nodes), tuple(self.explain_counts(pod, request).items())))

    def explain_counts(self, pod: Pod, request: npt.NDArray[np.int64],
                       only: npt.NDArray[np.bool_] | None = None) -> Counter[str]:
        """Per reason, how many nodes it rules out for ``pod``, each node under the first filter
        it fails in kube-scheduler's order: a static reason, host ports, each resource short, then
        topology spread and inter-pod affinity. ``only``: the nodes to count (others are not
        looked at, e.g. outside the domain a job is confined to)."""
        static = self.static(pod)
        counts: Counter[str] = Counter(static.counts) if only is None else Counter(
            r for r, keep in zip(static.reasons, only.tolist(), strict=True) if r is not None and keep)
        left = static.mask.copy() if only is None else static.mask & only
        check = self.check(pod)
        if check is not None and PORTS in check.reasons:
            counts[PORTS] += int(np.count_nonzero(check.reasons[PORTS] & left))
            left &= ~check.reasons[PORTS]
        free = self.cluster.free()
        short_any = np.zeros_like(left)
        for j, res in enumerate(self.cluster.resources):
            if request[j] <= 0:
                continue
            short_nodes = left & (free[:, j] < request[j])
            short = int(np.count_nonzero(short_nodes))
            short_any |= short_nodes
            if short:
                counts[TOO_MANY_PODS if res == PODS else insufficient(res)] += short
        left &= ~short_any
        if check is not None:
            for why, n in check.counts(left).items():
                if why != PORTS:
                    counts[why] += n
        return counts

