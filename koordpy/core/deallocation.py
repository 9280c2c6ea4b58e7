"""kube-scheduler v1.37's DynamicResources PostFilter: the claims a pod that fits nowhere gives up.

A claim allocated before (by an earlier cycle whose binding then failed, by a scheduler that went
away, by a node since deleted) may hold devices the pod can no longer reach: its node selector admits
none of the nodes the pod could take, or its devices' binding failed or timed out. Filter then finds
the claim "not available on the node" everywhere and, without this rule, the pod waits for ever. When
the pod fits no node, such a claim that nobody else holds (``reservedFor`` empty, or the pod alone) is
deallocated, one claim per pod and attempt, as kube-scheduler's PostFilter does (it picks one at random;
here the first in the pod's order), so that a later cycle allocates it again where the pod can go.

Belongs here: which claim a failed pod gives up (``deallocations``). Not here: resolving the pod's
claims (``koordpy.core.claims``), the filters (``koordpy.core.filters``), the write (the shells apply
the ``Deallocate`` decision). A claim looked at is one the pod's Filter reached: kube-scheduler runs
DynamicResources' Filter after the others (node filters, NodeResourcesFit, volumes, the rules between
pods), so only on the nodes they leave is a claim found unavailable. A claim reserved for a PodGroup
is the group's (kube-scheduler's PodGroupPostFilter), not a member's to give up; the claim made for a
pod's DRA-backed extended resources is deleted by kube-scheduler's PostFilter, not deallocated, and is
left alone here.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from koordpy.api.dra import ResourceClaim
from koordpy.api.objects import Node, Pod
from koordpy.core.claims import DeviceRules, admits
from koordpy.core.cluster import Cluster
from koordpy.core.decisions import Deallocate
from koordpy.core.filters import Filters
from koordpy.devices.allocator import binding_broken


def deallocations(rules: DeviceRules, filters: Filters, cluster: Cluster, pods: Iterable[Pod],
                  seen: set[str]) -> list[Deallocate]:
    """For each of ``pods`` (not placed this cycle) that fits no node, the first of its allocated claims
    that is unavailable on a node its Filter reached and held by nobody else; ``seen``: the claims
    given up already this cycle (added to)."""
    out: list[Deallocate] = []
    for pod in pods:
        if not pod.claims:
            continue
        found = rules.resolve(pod)
        if found.prefilter is not None or not found.allocated:
            continue  # PreFilter stopped it: no Filter ran, no claim was found unavailable
        reached = _reached(pod, filters, cluster)
        if not reached:
            continue  # it fits a node, or no node is left to DynamicResources' Filter
        for claim in found.allocated:
            assert claim.allocation is not None
            if claim.key in seen or claim.name == pod.extended_claim or not _idle(claim, pod):
                continue  # (the claim of DRA-backed extended resources is deleted, not deallocated)
            if binding_broken(claim, claim.allocation, rules.now) is not None or any(
                    not admits(claim.allocation, node) for node in reached):
                seen.add(claim.key)
                out.append(Deallocate(claim.key, claim.uid, pod.key))
                break
    return out


def _reached(pod: Pod, filters: Filters, cluster: Cluster) -> list[Node] | None:
    """The nodes the pod's DynamicResources Filter runs on (every filter before it passes there), or
    None when the pod fits one of them (it is not unschedulable: no PostFilter runs)."""
    before = filters.without_devices(pod).mask
    check = filters.check(pod)
    if check is not None:
        before = before & check.mask
    vec = cluster.request_vector(pod)
    free = cluster.allocatable - cluster.used
    room = np.all((vec == 0) | (free >= vec), axis=1)
    nodes = np.flatnonzero(before & room).tolist()
    if bool(filters.static(pod).mask[nodes].any()):
        return None
    return [cluster.nodes[i] for i in nodes]


def _idle(claim: ResourceClaim, pod: Pod) -> bool:
    """Reserved for nobody, or for ``pod`` alone (kube-scheduler compares the uid)."""
    held = claim.reserved_for
    return not held or (len(held) == 1 and held[0].resource == "pods" and held[0].name == pod.name
                        and held[0].uid == pod.uid)
