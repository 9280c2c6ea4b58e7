"""The ResourceClaim controller's part in a simulation (kube-controller-manager's
``resource-claim-controller``, v1.37.2): the claims it makes from ResourceClaimTemplates.

A pod's ``spec.resourceClaims`` entry naming a template gets a claim of its own, ``<pod>-<claim>``
(the controller's generated name without its random suffix, truncated as it truncates), owned by
the pod, annotated ``resource.kubernetes.io/pod-claim-name``, with the template's labels,
annotations and spec; the pod's ``status.resourceClaimStatuses`` records it. A Workload PodGroup's
template entry gets ``<podgroup>-<claim>``, owned by the group and recorded in its status; a member
whose entry is identical to the group's (``resourceclaim.BindTo``) shares the group's claim, which
its own status then names. A claim already recorded, or one already owned by its pod or group
under that annotation (a dump of a cluster), is not made again; a template that does not exist
makes nothing (the controller retries, the pod waits; the core says why).

Belongs here: making those objects. Not here: allocating them (``koordpy.devices``), or the rules
the core applies to pods' claims.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from koordpy.api.dra import POD_CLAIM_NAME, ResourceClaim, ResourceClaimTemplate
from koordpy.api.objects import Pod, PodClaim

MAX_BASE = 57  # the controller's generateName budget: 63 less a hyphen and 5 random characters


def generated_name(owner: str, claim: str) -> str:
    """The name the controller's ``generateName`` starts with for ``owner``'s claim, without the
    random suffix the API server adds: ``<owner>-<claim>``, both cut in proportion when too long."""
    base = f"{owner}-{claim}-"
    if len(base) <= MAX_BASE:
        return base[:-1]
    cut = f"{owner[:len(owner) * MAX_BASE // len(base)]}-{claim[:len(claim) * MAX_BASE // len(base)]}"
    return cut.rstrip("-.")  # a name ends with a letter or digit (the random suffix made it so)


@dataclass
class Made:
    """What the controller did: the claims made (each with its owner, ``Pod ns/name`` or
    ``<group kind> ns/name``, and what to say about it), and the pods and groups whose
    ``resourceClaimStatuses`` changed."""

    claims: list[tuple[ResourceClaim, str, str]]
    pods: dict[str, Pod]
    groups: dict[str, Any]


def _claim(namespace: str, name: str, template: ResourceClaimTemplate, entry: str,
           owner: tuple[str, str, str]) -> ResourceClaim:
    # The template's alpha fields are the claim's, one "spec." less deep.
    return ResourceClaim(namespace=namespace, name=name, spec=template.spec, owner=owner,
                         annotations={**template.annotations, POD_CLAIM_NAME: entry},
                         alpha_fields=tuple(f.removeprefix("spec.") for f in template.alpha_fields))


def _owned(claims: dict[str, ResourceClaim], namespace: str, kind: str, owner: str, entry: str) -> str:
    """A claim already made for ``owner``'s entry (found by its owner and annotation), or ""."""
    for claim in claims.values():
        if (claim.namespace == namespace and claim.owner is not None and claim.owner[:2] == (kind, owner)
                and claim.annotations.get(POD_CLAIM_NAME) == entry):
            return claim.name
    return ""


def make_claims(pods: Iterable[Pod], groups: dict[str, Any], claims: dict[str, ResourceClaim],
                templates: dict[str, ResourceClaimTemplate], group_kind: str) -> Made:
    """Claims from templates for ``pods`` and the groups of kind ``group_kind`` (``groups``, by key:
    parsed objects with a namespace, name, uid, ``claims`` and ``claim_statuses``, as a Workload
    PodGroup has; ``Kind.claim_templates``), updated in place; ``claims`` (by key) is what exists,
    and is added to."""
    made = Made([], {}, {})

    def create(namespace: str, owner_kind: str, owner: str, uid: str, entry: PodClaim) -> str:
        template = templates.get(f"{namespace}/{entry.template}")
        if template is None:
            return ""
        name = generated_name(owner, entry.name)
        if f"{namespace}/{name}" in claims:  # taken by a claim of someone else: the next free name
            name = next(f"{name}-{i}" for i in range(2, len(claims) + 3) if f"{namespace}/{name}-{i}" not in claims)
        claim = _claim(namespace, name, template, entry.name, (owner_kind, owner, uid))
        claims[claim.key] = claim
        whose = f"{owner_kind} {namespace}/{owner}"
        made.claims.append((claim, whose, f"ResourceClaim {claim.key} was created from ResourceClaimTemplate "
                                          f"{template.key} for {whose}, as the ResourceClaim controller would"))
        return name

    for key, group in sorted(groups.items()):
        statuses = dict(group.claim_statuses)
        for entry in group.claims:
            if not entry.template or entry.name in statuses:
                continue
            found = _owned(claims, group.namespace, group_kind, group.name, entry.name) or create(
                group.namespace, group_kind, group.name, group.uid, entry)
            if found:
                statuses[entry.name] = found
        if statuses != group.claim_statuses:
            made.groups[key] = groups[key] = group.model_copy(update={"claim_statuses": statuses})
    for pod in pods:
        if not any(c.template for c in pod.claims):
            continue
        own = groups.get(f"{pod.namespace}/{pod.scheduling_group}") if pod.scheduling_group else None
        statuses = dict(pod.claim_statuses)
        for entry in pod.claims:
            if not entry.template or entry.name in statuses:
                continue
            if own is not None and entry in own.claims:  # resourceclaim.BindTo: the group's claim
                found = own.claim_statuses.get(entry.name, "")
            else:
                found = _owned(claims, pod.namespace, "Pod", pod.name, entry.name) or create(
                    pod.namespace, "Pod", pod.name, pod.uid, entry)
            if found:
                statuses[entry.name] = found
        if statuses != pod.claim_statuses:
            made.pods[pod.key] = pod.model_copy(update={"claim_statuses": statuses})
    return made
