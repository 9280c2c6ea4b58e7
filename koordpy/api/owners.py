"""Owners of pods (Jobs, ReplicaSets, Deployments, StatefulSets, JobSets and any other kind) and
the owner references that chain them, read only so a pod's top-level owner can be found.

KAI groups pods with no explicit gang by their top-level owner and reads topology
annotations from it; the replica count of that owner is the group's natural minimum.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import ParseError, object_ref
from koordpy.api.raw import Reader

if TYPE_CHECKING:
    from koordpy.api.objects import Pod

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
_REPLICAS_KINDS = {("apps/v1", "ReplicaSet"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet")}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OwnerRef(_Model):
    api_version: str
    kind: str
    name: str
    uid: str = ""
    controller: bool = False


def owner_refs_from_meta(r: Reader, meta: dict[str, Any]) -> tuple[OwnerRef, ...]:
    """The owner references of a raw object's metadata.

    The API server also requires a uid; files written for the simulator often leave it out
    and nothing here compares uids across objects, so it may be empty.
    """
    out = []
    for i, item in enumerate(r.seq(meta.get("ownerReferences"), "metadata.ownerReferences")):
        f = f"metadata.ownerReferences[{i}]"
        m = r.mapping(item, f)
        out.append(OwnerRef(
            api_version=r.string(m.get("apiVersion"), f"{f}.apiVersion", required=True),
            kind=r.string(m.get("kind"), f"{f}.kind", required=True),
            name=r.string(m.get("name"), f"{f}.name", required=True),
            uid=r.string(m.get("uid"), f"{f}.uid"),
            controller=r.boolean(m.get("controller"), f"{f}.controller"),
        ))
    return tuple(out)


def pod_owner_refs(pod: Pod) -> tuple[OwnerRef, ...]:
    """A parsed Pod's owner references, typed.

    ``Pod.owner_references`` keeps the raw entries as text (a bool as ``"True"``), so the
    required fields are checked here, naming the pod.
    """
    out = []
    for i, ref in enumerate(pod.owner_references):
        f = f"metadata.ownerReferences[{i}]"
        for key in ("apiVersion", "kind", "name"):
            if not ref.get(key):
                raise ParseError(f"Pod {pod.key}", f"{f}.{key}", "is required")
        controller = ref.get("controller", "False")
        if controller not in ("True", "False"):
            raise ParseError(f"Pod {pod.key}", f"{f}.controller", f"must be true or false, got {controller!r}")
        out.append(OwnerRef(api_version=ref["apiVersion"], kind=ref["kind"], name=ref["name"],
                            uid=ref.get("uid", ""), controller=controller == "True"))
    return tuple(out)


def controller_ref(refs: tuple[OwnerRef, ...]) -> OwnerRef | None:
    """The managing owner (``controller: true``), the one an owner chain follows, or None."""
    return next((ref for ref in refs if ref.controller), None)


class Owner(_Model):
    api_version: str
    kind: str
    namespace: str
    name: str
    uid: str = ""
    annotations: dict[str, str] = {}
    owner_refs: tuple[OwnerRef, ...] = ()
    replicas: int | None = None  # how many pods it runs at once, for the kinds that say so
    creation: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_raw(cls, raw: dict[str, Any], api_version: str | None = None, kind: str | None = None) -> Owner:
        """``api_version`` and ``kind`` stand in when ``raw`` carries none (the caller knows the kind)."""
        kind_text = raw.get("kind") if isinstance(raw.get("kind"), str) and raw.get("kind") else kind
        r = Reader(object_ref(raw, kind_text))
        api = r.string(raw.get("apiVersion"), "apiVersion") or api_version or ""
        if not api:
            raise r.fail("apiVersion", "is required")
        if not kind_text:
            raise r.fail("kind", "is required")
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        return cls(
            api_version=api,
            kind=kind_text,
            namespace=r.namespace(meta.get("namespace")),
            name=r.name(meta.get("name")),
            uid=r.string(meta.get("uid"), "metadata.uid"),
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            owner_refs=owner_refs_from_meta(r, meta),
            replicas=_replicas(r, api, kind_text, spec),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        )


def _count(r: Reader, value: Any, field: str) -> int:
    """A replica-like count, 1 when absent as the API server defaults it, never negative."""
    n = r.integer(value, field, default=1, minimum=0)
    assert n is not None
    return n


def _replicas(r: Reader, api: str, kind: str, spec: dict[str, Any]) -> int | None:
    if (api, kind) == ("batch/v1", "Job"):
        # A Job never runs more pods at once than it still has to complete.
        parallel = _count(r, spec.get("parallelism"), "spec.parallelism")
        if spec.get("completions") is None:
            return parallel
        return min(parallel, _count(r, spec.get("completions"), "spec.completions"))
    if (api, kind) in _REPLICAS_KINDS:
        return _count(r, spec.get("replicas"), "spec.replicas")
    if (api, kind) == (JOBSET_API_VERSION, "JobSet"):
        total = 0
        for i, item in enumerate(r.seq(spec.get("replicatedJobs"), "spec.replicatedJobs")):
            f = f"spec.replicatedJobs[{i}]"
            job = r.mapping(item, f)
            template = r.mapping(job.get("template"), f"{f}.template")
            job_spec = r.mapping(template.get("spec"), f"{f}.template.spec")
            total += (_count(r, job.get("replicas"), f"{f}.replicas")
                      * _count(r, job_spec.get("parallelism"), f"{f}.template.spec.parallelism"))
        return total
    return None
