"""The owners of pods that koordpy reads to group them (KAI's pod-grouper): Jobs, ReplicaSets,
Deployments, StatefulSets, JobSets, and the owner references that chain them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import object_ref
from koordpy.api.raw import Reader


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OwnerRef(_Model):
    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


def owner_refs(r: Reader, value: Any, field: str = "metadata.ownerReferences") -> tuple[OwnerRef, ...]:
    out = []
    for i, item in enumerate(r.seq(value, field)):
        f = f"{field}[{i}]"
        m = r.mapping(item, f)
        out.append(OwnerRef(api_version=r.string(m.get("apiVersion"), f"{f}.apiVersion"),
                            kind=r.string(m.get("kind"), f"{f}.kind", required=True),
                            name=r.string(m.get("name"), f"{f}.name", required=True),
                            uid=r.string(m.get("uid"), f"{f}.uid"),
                            controller=r.boolean(m.get("controller"), f"{f}.controller")))
    return tuple(out)


def pod_owner_refs(pod: Any) -> tuple[OwnerRef, ...]:
    """A Pod's owner references (the Pod model keeps them as plain string maps)."""
    refs: Iterable[Mapping[str, str]] = pod.owner_references
    return tuple(OwnerRef(api_version=o.get("apiVersion", ""), kind=o.get("kind", ""), name=o.get("name", ""),
                          uid=o.get("uid", ""), controller=o.get("controller", "").lower() == "true")
                 for o in refs if o.get("kind") and o.get("name"))


def controller_ref(refs: Iterable[OwnerRef]) -> OwnerRef | None:
    return next((ref for ref in refs if ref.controller), None)


class Owner(_Model):
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""
    annotations: dict[str, str] = {}
    owner_refs: tuple[OwnerRef, ...] = ()
    replicas: int | None = None  # the pods it runs at once, where it says
    creation: float | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Owner:
        kind = str(raw.get("kind", ""))
        r = Reader(object_ref(raw, kind or "Object"))
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        replicas: int | None = None
        if kind == "Job":
            replicas = r.integer(spec.get("parallelism"), "spec.parallelism", default=1)
        elif kind in ("ReplicaSet", "Deployment", "StatefulSet"):
            replicas = r.integer(spec.get("replicas"), "spec.replicas", default=1)
        elif kind == "JobSet":
            total = 0
            for i, item in enumerate(r.seq(spec.get("replicatedJobs"), "spec.replicatedJobs")):
                f = f"spec.replicatedJobs[{i}]"
                m = r.mapping(item, f)
                count = r.integer(m.get("replicas"), f"{f}.replicas", default=1) or 0
                job_spec = r.mapping(r.mapping(m.get("template"), f"{f}.template").get("spec"), f"{f}.template.spec")
                total += count * (r.integer(job_spec.get("parallelism"), f"{f}.template.spec.parallelism",
                                            default=1) or 0)
            replicas = total
        if replicas is not None and replicas < 0:
            raise r.fail("spec", f"replicas must not be negative, got {replicas}")
        return cls(api_version=str(raw.get("apiVersion", "")), kind=kind,
                   namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
                   uid=r.string(meta.get("uid"), "metadata.uid"),
                   annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
                   owner_refs=owner_refs(r, meta.get("ownerReferences")), replicas=replicas,
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))
