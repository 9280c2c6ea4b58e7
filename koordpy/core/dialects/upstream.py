"""Kubernetes' own PodGroup (``scheduling.k8s.io/v1beta1``, the Workload API), as far as koordpy reads it.

A pod names its group in ``spec.schedulingGroup``. A pod of a ``basic`` group that asks nothing more
(the Job controller's group for a plain Job) is the lone pod it is to kube-scheduler too, and is
placed as one; any other group's pods are refused with a clear reason (docs/reference.md,
"Pod-spec fields kube-scheduler filters on"), rather than placed as if they had no group.

Belongs here: everything koordpy does with these groups; the full dialect (gangs, topology
constraints, composite groups, statuses) lands here. Does not belong here: refusals that are no
dialect's (``koordpy.core.refusals``), parsing the object (``koordpy.api.workload``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordpy.api.kinds import Role
from koordpy.api.objects import Node, Pod
from koordpy.api.workload import WorkloadPodGroup
from koordpy.core.dialects.base import DialectBase
from koordpy.core.messages import SCHEDULING_GROUP as SCHEDULING_GROUP
from koordpy.core.snapshot import Snapshot
from koordpy.core.topology_manifests import Generated
from koordpy.core.verdicts import GroupMissing, GroupNamedOtherwise, GroupRefused, Reason

NAME = "upstream"
# The registry store its PodGroups land in (``Snapshot.of``): the core has no field for them.
STORE = "workload_podgroups"


def refusal(pod: Pod, snapshot: Snapshot) -> Reason | None:
    """Why koordpy will not place ``pod`` for the group it names, or None (no group, or a ``basic``
    group that asks nothing more: a lone pod)."""
    if not pod.scheduling_group:
        return None
    groups: Mapping[str, WorkloadPodGroup] = snapshot.of(STORE)
    group = None if pod.scheduling_group_other else groups.get(f"{pod.namespace}/{pod.scheduling_group}")
    if group is None and pod.scheduling_group_other:
        return GroupNamedOtherwise(pod.key, pod.scheduling_group)
    if group is None:
        return GroupMissing(pod.key, pod.namespace, pod.scheduling_group)
    if group.policy == "basic" and not group.asks:
        return None
    return GroupRefused(pod.key, pod.scheduling_group, group.policy == "gang", group.min_count, tuple(group.asks))


class Upstream(DialectBase):
    """Its pods are lone pods or refused: no gang, no tree, no status yet (the neutral answers)."""

    name = NAME
    roles: tuple[Role, ...] = ("workload-podgroup",)
    refused_fields: Mapping[str, str] = {"spec.schedulingGroup": SCHEDULING_GROUP}
    manifest_format = None  # Kubernetes' own PodGroup API defines no topology object yet

    def manifests(self, nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
        raise NotImplementedError("Kubernetes' own PodGroup API has no topology manifest yet")

    def refusal(self, pod: Pod, snapshot: Snapshot) -> Reason | None:
        return refusal(pod, snapshot)

    def names_objects(self, pod: Pod) -> bool:
        # The group may appear or change, which is no change of the pod.
        return bool(pod.scheduling_group)


DIALECT = Upstream()
