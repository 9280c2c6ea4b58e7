"""Pod-spec fields kube-scheduler acts on that koordpy does not honour yet.

A pod that uses one is refused: it stays pending with a condition and an Event saying why, and a
gang holding such a pod waits as a whole, rather than being placed as if the field were not there
(docs/reference.md, "Pod-spec fields kube-scheduler filters on", lists every such field). Belongs
here: the test for each field and its message. Does not belong here: fields koordpy honours (the
filters) or pods that are not koordpy's to place (``Snapshot.claims``).
"""

from __future__ import annotations

from koordpy.api.objects import Pod

# The words users search for; tests and docs quote them.
CLAIMS = "koordpy does not allocate ResourceClaims yet"
SCHEDULING_GROUP = "koordpy does not schedule Workload PodGroups (spec.schedulingGroup) yet"

# Each refused field and the words its message starts with (docs/reference.md's list is checked
# against this by tests/test_docs.py).
REFUSED_FIELDS = {"spec.resourceClaims": CLAIMS, "spec.schedulingGroup": SCHEDULING_GROUP}


def refusal(pod: Pod) -> str | None:
    """Why koordpy will not place ``pod``, or None."""
    if pod.resource_claims:
        return (f"{CLAIMS}: pod {pod.key} has spec.resourceClaims ({', '.join(pod.resource_claims)}), which "
                "kube-scheduler's DynamicResources plugin would allocate; it stays pending")
    if pod.scheduling_group:
        return (f"{SCHEDULING_GROUP}: pod {pod.key} belongs to PodGroup {pod.scheduling_group!r}, whose gang "
                "and topology policy kube-scheduler's GangScheduling plugin would apply; it stays pending")
    return None


def job_refusal(job_id: str, pods: list[Pod], is_gang: bool) -> str | None:
    """Why a job is not tried: the first of its pods that is refused; a gang waits as a whole."""
    for pod in pods:
        why = refusal(pod)
        if why is not None:
            return f'GangGroup "{job_id}" waits as a whole: {why}' if is_gang else why
    return None
