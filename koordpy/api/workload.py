"""Kubernetes' own PodGroup (``scheduling.k8s.io/v1beta1``, the Workload API), as far as koordpy reads it yet.

A pod names its group in ``spec.schedulingGroup.podGroupName``. koordpy reads the group's policy
and whether it asks for more than that, so a pod of a ``basic`` group with nothing else (what the Job
controller makes for a plain Job) is placed as the lone pod it is, and any other group's pods are
refused with a clear reason rather than placed as if they had no group. The full dialect (gangs,
topology constraints, composite groups) is a later issue's work.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.model import NamespacedKey
from koordpy.api.raw import read_object


class WorkloadPodGroup(BaseModel, NamespacedKey):
    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    name: str
    policy: Literal["basic", "gang"]
    min_count: int | None = None
    # What the group asks for beyond its policy, by field name (constraints, claims, a parent group).
    asks: tuple[str, ...] = ()

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> WorkloadPodGroup:
        r, meta, (spec,) = read_object(raw, "PodGroup", "spec")
        policy = r.mapping(spec.get("schedulingPolicy"), "spec.schedulingPolicy")
        gang = policy.get("gang")
        if gang is not None and policy.get("basic") is not None:
            raise r.fail("spec.schedulingPolicy", "must set exactly one of basic and gang")
        min_count = None
        if gang is not None:
            min_count = r.integer(r.mapping(gang, "spec.schedulingPolicy.gang").get("minCount"),
                                  "spec.schedulingPolicy.gang.minCount")
            if min_count is None or min_count < 1:
                raise r.fail("spec.schedulingPolicy.gang.minCount", f"must be at least 1, got {min_count}")
        asks = tuple(f"spec.{name}" for name in ("schedulingConstraints", "resourceClaims",
                                                  "parentCompositePodGroupName")
                     if spec.get(name) not in (None, {}, []))
        return cls(namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
                   policy="gang" if gang is not None else "basic", min_count=min_count, asks=asks)
