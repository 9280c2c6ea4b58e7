"""Owner chains: which top-level controller a pod belongs to, as far as koordpy's cache holds it.

Belongs here: walking ``ownerReferences`` up to the top controller (by uid, or by kind and name for
manifests without uids), and the grace a pod gets while an owner koordpy reads is not seen yet.
Does not belong here: what an owner's annotations ask (the dialect that reads them, e.g.
``koordpy.core.dialects.kai``), parsing owners (``koordpy.api.owners``).
"""

from __future__ import annotations

from koordpy.api.errors import ParseError
from koordpy.api.kinds import KINDS
from koordpy.api.objects import Pod
from koordpy.api.owners import Owner, OwnerRef, controller_ref, pod_owner_refs

MAX_OWNER_DEPTH = 8


def _lookup(owners: dict[str, Owner], ref: OwnerRef, namespace: str) -> Owner | None:
    """The owner a reference names: by uid, or (a hand-written manifest without uids) by kind and name."""
    found = owners.get(ref.uid) if ref.uid else None
    return found if found is not None else owners.get(f"{ref.kind}/{namespace}/{ref.name}")


def parent(pod: Pod, owners: dict[str, Owner]) -> Owner | None:
    """The pod's own controller (a JobSet's pod: its Job) when the cache holds it."""
    try:
        ref = controller_ref(pod_owner_refs(pod))
    except ParseError:
        return None
    return _lookup(owners, ref, pod.namespace) if ref is not None else None


def chain(pod: Pod, owners: dict[str, Owner]) -> tuple[OwnerRef | None, Owner | None]:
    """The pod's top-level controller reference and, when the cache holds it, that owner. Owner
    references the pod cannot state properly make it a pod of its own (its parse reports them)."""
    try:
        ref = controller_ref(pod_owner_refs(pod))
    except ParseError:
        return None, None
    owner = _lookup(owners, ref, pod.namespace) if ref is not None else None
    for _ in range(MAX_OWNER_DEPTH):  # owners form a chain; a loop in bad data must still end
        if owner is None or ref is None:
            break
        up = controller_ref(owner.owner_refs)
        if up is None:
            break
        ref, owner = up, _lookup(owners, up, pod.namespace)
    return ref, owner


# The owner kinds koordpy lists and reads topology annotations from (``koordpy.api.kinds``), by
# API group and kind: a pod naming one that is not known yet may be placed too early without them.
OWNER_KINDS = frozenset((k.group, k.kind) for k in KINDS if k.role == "owner")
# How long a pod waits, from its creation, for such an owner to appear before it is placed without
# it. Watches of different kinds arrive in no set order, and a Job controller creates pods
# moments after their Job; a few seconds covers that lag, and an owner that never comes (deleted,
# or a manifest's made-up uid) costs only this much.
OWNER_GRACE_SECONDS = 5.0


def missing_owner(pod: Pod, owners: dict[str, Owner]) -> OwnerRef | None:
    """The controller reference in the pod's owner chain that names an owner of a kind koordpy reads
    topology from but that ``owners`` does not hold (by uid, or by kind and name for manifests
    without uids), else None."""
    if not pod.owner_references:  # most pods of a large gang: asked every cycle, so kept cheap
        return None
    ref, owner = chain(pod, owners)
    if ref is None or owner is not None:
        return None
    return ref if (ref.api_version.rpartition("/")[0], ref.kind) in OWNER_KINDS else None


def top_owner(pod: Pod, owners: dict[str, Owner]) -> Owner | None:
    return chain(pod, owners)[1]
