"""The bodies of a ResourceClaim's PreBind writes and of their undo, as kube-apiserver v1.37 takes them.

Belongs here: an ``api.dra.Allocation`` and a ``Consumer`` on the wire (``resource.k8s.io/v1``
``status.allocation`` and a ``status.reservedFor`` entry), and the strategic merge patches that add
or drop the finalizer, record the allocation with the reservation, and take a reservation (and the
allocation) back. Pure: no I/O (the writer sends them, ``writer``), no decision of what to write
(the binding cycle's claims step, ``binding``).

Why strategic merge patches: ``status.reservedFor`` is a list merged by ``uid`` and
``metadata.finalizers`` a set, so an entry is added or removed without the whole list, and another
consumer's entry written meanwhile is never clobbered. ``metadata.uid`` in a body makes the patch
fail on a claim recreated under the same name; ``metadata.resourceVersion`` makes it conditional
on the claim as the cache saw it (an allocation is written only where none was made meanwhile).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from koordpy.api.dra import (
    DELETE_PROTECTION,
    EXTENDED_CLAIM,
    AllocatedConfig,
    Allocation,
    Consumer,
    DeviceResult,
    DeviceToleration,
    Quantity,
)
from koordpy.api.objects import NodeSelectorTerm, Requirement
from koordpy.api.raw import rfc3339
from koordpy.core.decisions import ExtendedClaim


def quantity(q: Quantity) -> str:
    """A quantity as the API writes one: as the object spelled it, else the exact value (whole, or
    in thousandths, or in millionths...; the API's resource.Quantity holds at most nanos)."""
    if q.text:
        return q.text
    value = q.value
    for suffix, scale in (("", 1), ("m", 1000), ("u", 10**6), ("n", 10**9)):
        scaled = value * scale
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{math.ceil(value * 10**9)}n"  # finer than the API holds: rounded up, as it rounds


def _quantities(values: Mapping[str, Quantity]) -> dict[str, str]:
    return {name: quantity(q) for name, q in values.items()}


def _toleration(t: DeviceToleration) -> dict[str, Any]:
    out: dict[str, Any] = {"operator": t.operator}
    out.update((name, text) for name, text in (("key", t.key), ("value", t.value), ("effect", t.effect)) if text)
    if t.toleration_seconds is not None:
        out["tolerationSeconds"] = t.toleration_seconds
    return out


def _result(r: DeviceResult) -> dict[str, Any]:
    out: dict[str, Any] = {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
    if r.admin_access:
        out["adminAccess"] = True
    if r.tolerations:
        out["tolerations"] = [_toleration(t) for t in r.tolerations]
    if r.binding_conditions:
        out["bindingConditions"] = list(r.binding_conditions)
    if r.binding_failure_conditions:
        out["bindingFailureConditions"] = list(r.binding_failure_conditions)
    if r.share_id:
        out["shareID"] = r.share_id
    if r.consumed_capacity:
        out["consumedCapacity"] = _quantities(r.consumed_capacity)
    return out


def _config(c: AllocatedConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"source": c.source, "opaque": {"driver": c.config.driver,
                                                          "parameters": json.loads(c.config.parameters)}}
    if c.config.requests:
        out["requests"] = list(c.config.requests)
    return out


def _requirement(r: Requirement) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "operator": r.operator}
    if r.values:
        out["values"] = list(r.values)
    return out


def _term(t: NodeSelectorTerm) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if t.match_expressions:
        out["matchExpressions"] = [_requirement(r) for r in t.match_expressions]
    if t.match_fields:
        out["matchFields"] = [_requirement(r) for r in t.match_fields]
    return out


def allocation(a: Allocation, now: float) -> dict[str, Any]:
    """``status.allocation``: its results, config, node selector, and its timestamp (``now`` when the
    allocation has none: kube-scheduler v1.37 stamps every allocation it writes)."""
    devices: dict[str, Any] = {"results": [_result(r) for r in a.results]}
    if a.config:
        devices["config"] = [_config(c) for c in a.config]
    out: dict[str, Any] = {"devices": devices,
                           "allocationTimestamp": rfc3339(a.timestamp if a.timestamp is not None else now)}
    if a.node_selector is not None:
        out["nodeSelector"] = {"nodeSelectorTerms": [_term(t) for t in a.node_selector]}
    return out


def consumer(c: Consumer) -> dict[str, Any]:
    """A ``status.reservedFor`` entry."""
    out: dict[str, Any] = {"resource": c.resource, "name": c.name, "uid": c.uid}
    if c.api_group:
        out["apiGroup"] = c.api_group
    return out


def _meta(uid: str, resource_version: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {}
    if uid:
        meta["uid"] = uid  # refused if the name now belongs to another claim
    if resource_version:
        meta["resourceVersion"] = resource_version
    return meta


def add_finalizer(uid: str) -> dict[str, Any]:
    """The metadata patch that adds ``resource.kubernetes.io/delete-protection`` (a set: merged)."""
    return {"metadata": {**_meta(uid), "finalizers": [DELETE_PROTECTION]}}


def drop_finalizer(uid: str, resource_version: str = "") -> dict[str, Any]:
    """The metadata patch that removes the finalizer and leaves the others, conditional on
    ``resource_version`` (the claim as seen unallocated) when given."""
    return {"metadata": {**_meta(uid, resource_version), "$deleteFromPrimitiveList/finalizers": [DELETE_PROTECTION]}}


def reserve(uid: str, who: Consumer, written: Allocation | None, now: float,
            resource_version: str = "") -> dict[str, Any]:
    """The status patch of one claim's PreBind: ``who`` added to ``reservedFor``, and ``written`` (this
    cycle's allocation; None: the claim is allocated already) as ``status.allocation``. An allocation
    is written conditional on ``resource_version``, the claim as seen with none."""
    status: dict[str, Any] = {"reservedFor": [consumer(who)]}
    if written is not None:
        status["allocation"] = allocation(written, now)
    return {"metadata": _meta(uid, resource_version if written is not None else ""), "status": status}


def extended_claim(ext: ExtendedClaim) -> dict[str, Any]:
    """The claim of a pod's DRA-backed extended resources as kube-scheduler creates it: named by the API
    server from ``<pod>-extended-resources-``, owned by the pod (controller), annotated, its requests
    ExactCount of a class each (the allocation is written after, as for any claim)."""
    requests = [{"name": r.name, "exactly": {"deviceClassName": r.exactly.device_class, "allocationMode": "ExactCount",
                                             "count": r.exactly.count}}
                for r in ext.spec.requests if r.exactly is not None]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"generateName": ext.generate_name, "namespace": ext.namespace,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": ext.pod, "uid": ext.pod_uid,
                                              "controller": True}],
                         "annotations": {EXTENDED_CLAIM: "true"}},
            "spec": {"devices": {"requests": requests}}}


def extended_status(ext: ExtendedClaim, name: str) -> dict[str, Any]:
    """The pod's ``status.extendedResourceClaimStatus``: which request serves which container's resource,
    and the claim's name."""
    return {"requestMappings": [{"containerName": c, "resourceName": r, "requestName": q} for c, r, q in ext.mappings],
            "resourceClaimName": name}


def unreserve(uid: str, who: str, deallocate: bool, resource_version: str = "") -> dict[str, Any]:
    """The status patch that takes ``who``'s (a uid) reservation back, and the allocation with it when
    ``deallocate`` (nobody else holds the claim: conditional on ``resource_version``, the claim as
    seen so)."""
    status: dict[str, Any] = {"reservedFor": [{"$patch": "delete", "uid": who}]}
    if deallocate:
        status["allocation"] = None
    return {"metadata": _meta(uid, resource_version if deallocate else ""), "status": status}



def deallocate(uid: str, resource_version: str) -> dict[str, Any]:
    """The status patch of DynamicResources' PostFilter: the allocation, every reservation and the
    devices' status cleared (the finalizer stays, as kube-scheduler leaves it), conditional on
    ``resource_version``, the claim as seen allocated and held by nobody else."""
    return {"metadata": _meta(uid, resource_version),
            "status": {"allocation": None, "reservedFor": None, "devices": None}}
