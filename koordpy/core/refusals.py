"""Pod-spec fields kube-scheduler acts on that koordpy does not honour yet.

A pod that uses one is refused: it stays pending with a condition and an Event saying why, and a
gang holding such a pod waits as a whole, rather than being placed as if the field were not there
(docs/reference.md, "Pod-spec fields kube-scheduler filters on", lists every such field). Belongs
here: the test for each field and its message. Does not belong here: fields koordpy honours (the
filters) or pods that are not koordpy's to place (``Snapshot.claims``).
"""

from __future__ import annotations

from collections.abc import Mapping

from koordpy.api.objects import Pod
from koordpy.api.workload import WorkloadPodGroup

# The words users search for; tests and docs quote them.
CLAIMS = "koordpy does not allocate ResourceClaims yet"
SCHEDULING_GROUP = "koordpy does not schedule Workload PodGroups (spec.schedulingGroup) yet"

# Each refused field and the words its message starts with (docs/reference.md's list is checked
# against this by tests/test_docs.py).
REFUSED_FIELDS = {"spec.resourceClaims": CLAIMS, "spec.schedulingGroup": SCHEDULING_GROUP}


def refusal(pod: Pod, groups: Mapping[str, WorkloadPodGroup]) -> str | None:
    """Why koordpy will not place ``pod``, or None. A pod of a Kubernetes PodGroup whose policy is
    ``basic`` and that asks nothing more (the Job controller's group for a plain Job) is a lone pod
    to kube-scheduler too, and is placed as one."""
    if pod.resource_claims:
        return (f"{CLAIMS}: pod {pod.key} has spec.resourceClaims ({', '.join(pod.resource_claims)}), which "
                "kube-scheduler's DynamicResources plugin would allocate; it stays pending")
    if pod.scheduling_group:
        group = None if pod.scheduling_group_other else groups.get(f"{pod.namespace}/{pod.scheduling_group}")
        if group is None and pod.scheduling_group_other:
            return (f"{SCHEDULING_GROUP}: pod {pod.key} names its group by {pod.scheduling_group!r}, which "
                    "koordpy does not read; it stays pending")
        if group is None:
            return (f"waiting for PodGroup {pod.namespace}/{pod.scheduling_group} (scheduling.k8s.io), which pod "
                    f"{pod.key} names in spec.schedulingGroup, to exist")
        if group.policy == "basic" and not group.asks:
            return None
        what = f"gang policy (minCount {group.min_count})" if group.policy == "gang" else ", ".join(group.asks)
        return (f"{SCHEDULING_GROUP}: pod {pod.key} belongs to PodGroup {pod.scheduling_group!r} with {what}, "
                "which kube-scheduler's GangScheduling plugin would apply; it stays pending")
    return None


def job_refusal(job_id: str, pods: list[Pod], is_gang: bool,
                groups: Mapping[str, WorkloadPodGroup]) -> str | None:
    """Why a job is not tried: the first of its pods that is refused; a gang waits as a whole."""
    for pod in pods:
        why = refusal(pod, groups)
        if why is not None:
            return f'GangGroup "{job_id}" waits as a whole: {why}' if is_gang else why
    return None
