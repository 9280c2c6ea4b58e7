"""Pod-spec fields kube-scheduler acts on that koordpy does not honour yet.

A pod that uses one is refused: it stays pending with a condition and an Event saying why, and a
gang holding such a pod waits as a whole, rather than being placed as if the field were not there
(docs/reference.md, "Pod-spec fields kube-scheduler filters on", lists every such field). Belongs
here: the test for each field and the reason it gives (``koordpy.core.messages`` words it). Does not
belong here: fields koordpy honours (the filters) or pods that are not koordpy's to place
(``Snapshot.claims``).
"""

from __future__ import annotations

from collections.abc import Mapping

from koordpy.api.objects import Pod
from koordpy.api.workload import WorkloadPodGroup
from koordpy.core.messages import CLAIMS as CLAIMS
from koordpy.core.messages import SCHEDULING_GROUP as SCHEDULING_GROUP
from koordpy.core.verdicts import (
    ClaimsRefused,
    GroupMissing,
    GroupNamedOtherwise,
    GroupRefused,
    Reason,
    Refused,
)

# Each refused field and the words its message starts with (docs/reference.md's list is checked
# against this by tests/test_docs.py).
REFUSED_FIELDS = {"spec.resourceClaims": CLAIMS, "spec.schedulingGroup": SCHEDULING_GROUP}


def refusal(pod: Pod, groups: Mapping[str, WorkloadPodGroup]) -> Reason | None:
    """Why koordpy will not place ``pod``, or None. A pod of a Kubernetes PodGroup whose policy is
    ``basic`` and that asks nothing more (the Job controller's group for a plain Job) is a lone pod
    to kube-scheduler too, and is placed as one."""
    if pod.resource_claims:
        return ClaimsRefused(pod.key, tuple(pod.resource_claims))
    if pod.scheduling_group:
        group = None if pod.scheduling_group_other else groups.get(f"{pod.namespace}/{pod.scheduling_group}")
        if group is None and pod.scheduling_group_other:
            return GroupNamedOtherwise(pod.key, pod.scheduling_group)
        if group is None:
            return GroupMissing(pod.key, pod.namespace, pod.scheduling_group)
        if group.policy == "basic" and not group.asks:
            return None
        return GroupRefused(pod.key, pod.scheduling_group, group.policy == "gang", group.min_count, tuple(group.asks))
    return None


def job_refusal(job_id: str, pods: list[Pod], is_gang: bool,
                groups: Mapping[str, WorkloadPodGroup]) -> Reason | None:
    """Why a job is not tried: the first of its pods that is refused; a gang waits as a whole."""
    for pod in pods:
        why = refusal(pod, groups)
        if why is not None:
            return Refused(job_id, why) if is_gang else why
    return None
