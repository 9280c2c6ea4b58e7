"""Pod-spec fields kube-scheduler acts on that koordpy does not honour yet.

A pod that uses one is refused: it stays pending with a condition and an Event saying why, and a
gang holding such a pod waits as a whole, rather than being placed as if the field were not there
(docs/reference.md, "Pod-spec fields kube-scheduler filters on", lists every such field). Belongs
here: the test for each field no dialect owns and the reason it gives (``koordpy.core.messages``
words it), and asking the dialects for theirs (``spec.schedulingGroup`` is
``koordpy.core.dialects.upstream``'s). Does not belong here: fields koordpy honours (the filters)
or pods that are not koordpy's to place (``Snapshot.claims``).
"""

from __future__ import annotations

from koordpy.api.objects import Pod
from koordpy.core import dialects
from koordpy.core.snapshot import Snapshot
from koordpy.core.verdicts import Reason, Refused

# Each refused field and the words its message starts with (docs/reference.md's list is checked
# against this by tests/test_docs.py): those of no dialect (none since ResourceClaims and DRA-backed
# extended resources are allocated, koordpy.core.claims), then each dialect's.
# The registry's table itself, not a copy: it is filled again in place when a dialect is registered.
REFUSED_FIELDS = dialects.REFUSED_FIELDS


def refusal(pod: Pod, snapshot: Snapshot) -> Reason | None:
    """Why koordpy will not place ``pod``, or None. A pod of a Kubernetes PodGroup whose policy is
    ``basic`` and that asks nothing more (the Job controller's group for a plain Job) is refused for
    nothing: it is placed pod by pod, in a group of minimum 1 (``koordpy.core.dialects.upstream``)."""
    return dialects.refusal(pod, snapshot)


def job_refusal(job_id: str, pods: list[Pod], is_gang: bool, snapshot: Snapshot) -> Reason | None:
    """Why a job is not tried: the first of its pods that is refused; a gang waits as a whole."""
    for pod in pods:
        why = refusal(pod, snapshot)
        if why is not None:
            return Refused(job_id, why) if is_gang else why
    return None
