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
pods), so only on the nodes they leave is a claim found unavailable. A claim reserved for a Workload
PodGroup is the group's, not a member's to give up: kube-scheduler's PodGroupPostFilter releases it
when a member gave up nothing and no member is scheduled (``WorkloadGroup``, ``_group``), a
CompositePodGroup's never. The claim made for a pod's DRA-backed extended resources is deleted by
kube-scheduler's PostFilter, not deallocated, and is left alone here.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass

import numpy as np

from koordpy.api.dra import Consumer, ResourceClaim
from koordpy.api.objects import Node, Pod
from koordpy.core.claims import WORKLOAD_GROUP, DeviceRules, PodClaims, admits
from koordpy.core.cluster import Cluster
from koordpy.core.decisions import Deallocate
from koordpy.core.filters import Filters
from koordpy.core.gang import Job
from koordpy.devices.allocator import binding_broken


def deallocations(rules: DeviceRules, filters: Filters, cluster: Cluster, pods: Iterable[Pod],
                  seen: set[str], group: WorkloadGroup | None = None) -> list[Deallocate]:
    """For each of ``pods`` (not placed this cycle) that fits no node, the first of its allocated claims
    that is unavailable on a node its Filter reached and held by nobody else; ``seen``: the claims
    given up already this cycle (added to). ``group``: the Workload PodGroup the pods are the
    unscheduled members of, whose own PostFilter (``_group``) runs after theirs."""
    out: list[Deallocate] = []
    stuck: list[tuple[Pod, list[ResourceClaim]]] = []  # the pods that gave up nothing
    for pod in pods:
        found = rules.resolve(pod) if pod.claims else None
        unavailable = _unavailable(rules, filters, cluster, pod, found)
        given = next((c for c in unavailable if c.key not in seen and c.name != pod.extended_claim
                      and _idle(c, pod)), None)  # (the claim of DRA-backed extended resources is deleted)
        if given is None:
            stuck.append((pod, unavailable))
            continue
        seen.add(given.key)
        out.append(Deallocate(given.key, given.uid, pod.key))
    if group is not None and stuck:
        out += _group(rules, group, stuck, seen)
    return out


@dataclass(frozen=True)
class WorkloadGroup:
    """The Workload PodGroup a failed job places (kube-scheduler's PodGroupPostFilter runs for such a
    group, not for a CompositePodGroup): its name, and whether any member is scheduled already (bound,
    or held by this scheduler), in which case its claims are in use and nothing of it is released."""

    name: str
    scheduled: bool


def workload_group(job: Job, scheduled: Container[str]) -> WorkloadGroup | None:
    """The Workload PodGroup ``job`` places, when it is one gang of plain members that all name one
    group by ``podGroupName`` (a CompositePodGroup's gang is of parts); ``scheduled``: the keys of the
    pods placed or held by this scheduler."""
    if len(job.gangs) != 1 or job.gangs[0].parts is not None:
        return None
    names = {p.scheduling_group if not p.scheduling_group_other else "" for p in job.gangs[0].pods}
    if len(names) != 1 or "" in names:
        return None
    return WorkloadGroup(names.pop(), any(p.node_name or p.key in scheduled for p in job.gangs[0].pods))


def _unavailable(rules: DeviceRules, filters: Filters, cluster: Cluster, pod: Pod,
                 found: PodClaims | None) -> list[ResourceClaim]:
    """The pod's allocated claims its Filter found unavailable (kube-scheduler's ``unavailableClaims``):
    pinned away from a node every filter before DynamicResources' passes, or their devices' binding
    failed or timed out; none when PreFilter stopped it or it fits a node."""
    if found is None or found.prefilter is not None or not found.allocated:
        return []  # PreFilter stopped it: no Filter ran, no claim was found unavailable
    reached = _reached(pod, filters, cluster)
    if not reached:
        return []  # it fits a node, or no node is left to DynamicResources' Filter
    out = []
    for claim in found.allocated:
        assert claim.allocation is not None
        if binding_broken(claim, claim.allocation, rules.now) is not None or any(
                not admits(claim.allocation, node) for node in reached):
            out.append(claim)
    return out


def _group(rules: DeviceRules, group: WorkloadGroup, stuck: list[tuple[Pod, list[ResourceClaim]]],
           seen: set[str]) -> list[Deallocate]:
    """kube-scheduler's PodGroupPostFilter, once some unscheduled member gave up no claim of its own and
    no member is scheduled (the group's claims then serve nobody that runs): the first claim a member
    found unavailable that is reserved for nobody or for the group alone is deallocated; failing that,
    the group's reservation of the first allocated claim of its own ``spec.resourceClaims`` (by name,
    or made from its template for it) reserved for it is dropped (the allocation stays: a later cycle
    that finds it unavailable gives it up as any idle claim), so that a binding that failed in an
    earlier cycle does not pin the group to its devices for ever."""
    if group.scheduled:
        return []
    pod = stuck[0][0]
    for member, unavailable in stuck:
        for claim in unavailable:
            if claim.key in seen or claim.name == member.extended_claim:
                continue
            mine = _group_entry(claim, group.name)
            if not claim.reserved_for or (len(claim.reserved_for) == 1 and mine is not None):
                seen.add(claim.key)
                return [Deallocate(claim.key, claim.uid, member.key, group=mine or Consumer(
                    "podgroups", group.name, "", WORKLOAD_GROUP))]
    for claim in rules.group_claims(pod.namespace, group.name):
        mine = _group_entry(claim, group.name)
        if claim.allocation is None or mine is None or claim.key in seen:
            continue
        seen.add(claim.key)
        return [Deallocate(claim.key, claim.uid, pod.key, group=mine, unreserve=True)]
    return []


def _group_entry(claim: ResourceClaim, group: str) -> Consumer | None:
    """The claim's ``reservedFor`` entry for the Workload PodGroup ``group`` of the pods' namespace
    (a pod knows its group by name only, as kube-scheduler's ``IsReservedForPod`` matches it)."""
    return next((c for c in claim.reserved_for if c.resource == "podgroups" and c.api_group == WORKLOAD_GROUP
                 and c.name == group), None)


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
