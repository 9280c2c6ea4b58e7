"""Owners of pods (Jobs, ReplicaSets, Deployments, StatefulSets, JobSets and any other kind) and
the owner references that chain them, read only so a pod's top-level owner can be found.

KAI groups pods with no explicit gang by their top-level owner and reads topology
annotations from it; the replica count of that owner is the group's natural minimum. A JobSet's
pods that no other gang declaration claims are one gang of their own (``koordpy.core.dialects.jobset``),
which reads the JobSet's replicated Jobs (``ReplicatedJob``) and its startup order as well.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import ParseError, object_ref
from koordpy.api.raw import Reader

if TYPE_CHECKING:
    from koordpy.api.objects import Pod

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
# JobSet's exclusive placement: the node label whose domains each of its Jobs takes alone (on the
# JobSet, or on a replicatedJob's Job template, which wins); the JobSet controller copies it to the
# Jobs and their pods. With the node-selector strategy beside it, the Jobs are held to nodes the user
# labelled per Job instead, and JobSet's pod webhook does nothing.
ANN_EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
ANN_NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
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


class ReplicatedJob(_Model):
    """One of a JobSet's ``spec.replicatedJobs``: how many Jobs it makes and what each runs."""

    name: str
    replicas: int  # Jobs made from its template
    pods: int  # pods each of them runs at once: its parallelism, never more than its completions
    # Its completions (None: not set, as a work-queue Job, which ends once a pod succeeded and the
    # others finished): what a Job of it has left to run is read against them (``left``).
    completions: int | None = None
    # The node label of its exclusive placement (its template's annotation, else the JobSet's), "" for
    # none or for the node-selector strategy (then its pods are all created at once, like any Job's).
    exclusive: str = ""
    depends_on: tuple[str, ...] = ()  # replicatedJobs it is created only after (dependsOn)

    def left(self, done: int) -> int:
        """The pods one of its Jobs still runs at once once ``done`` of its completions succeeded:
        its parallelism, never more than the completions it still lacks (the Job controller makes
        no pod beyond them); without completions, what it ran less those that succeeded."""
        total = self.pods if self.completions is None else self.completions
        return min(self.pods, max(0, total - done))


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
    # A JobSet's replicated Jobs, and whether it starts them in order (startupPolicy InOrder: the
    # next one's Jobs are made only once the previous one's are ready).
    replicated_jobs: tuple[ReplicatedJob, ...] = ()
    in_order: bool = False

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
        annotations = r.str_map(meta.get("annotations"), "metadata.annotations")
        jobset = (api, kind_text) == (JOBSET_API_VERSION, "JobSet")
        jobs = _replicated_jobs(r, spec, annotations) if jobset else ()
        startup = r.mapping(spec.get("startupPolicy"), "spec.startupPolicy") if jobset else {}
        return cls(
            api_version=api,
            kind=kind_text,
            namespace=r.namespace(meta.get("namespace")),
            name=r.name(meta.get("name")),
            uid=r.string(meta.get("uid"), "metadata.uid"),
            annotations=annotations,
            owner_refs=owner_refs_from_meta(r, meta),
            # A JobSet runs its Jobs' pods at once (one that starts them in order, in turn).
            replicas=sum(j.replicas * j.pods for j in jobs) if jobset else _replicas(r, api, kind_text, spec),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            replicated_jobs=jobs,
            in_order=r.string(startup.get("startupPolicyOrder"), "spec.startupPolicy.startupPolicyOrder") == "InOrder",
        )


def _count(r: Reader, value: Any, field: str) -> int:
    """A replica-like count, 1 when absent as the API server defaults it, never negative."""
    n = r.integer(value, field, default=1, minimum=0)
    assert n is not None
    return n


def _job_pods(r: Reader, spec: dict[str, Any], field: str) -> int:
    """How many pods a Job of ``spec`` runs at once: its parallelism, never more than it still has to
    complete (a Job never runs more)."""
    parallel = _count(r, spec.get("parallelism"), f"{field}.parallelism")
    if spec.get("completions") is None:
        return parallel
    return min(parallel, _count(r, spec.get("completions"), f"{field}.completions"))


def _replicas(r: Reader, api: str, kind: str, spec: dict[str, Any]) -> int | None:
    if (api, kind) == ("batch/v1", "Job"):
        return _job_pods(r, spec, "spec")
    if (api, kind) in _REPLICAS_KINDS:
        return _count(r, spec.get("replicas"), "spec.replicas")
    return None


def _replicated_jobs(r: Reader, spec: dict[str, Any], annotations: dict[str, str]) -> tuple[ReplicatedJob, ...]:
    """A JobSet's ``spec.replicatedJobs``, each with the exclusive placement its pods get as the JobSet
    controller writes it on them (the Job template's annotation over the JobSet's, over the pod
    template's own)."""
    out = []
    for i, item in enumerate(r.seq(spec.get("replicatedJobs"), "spec.replicatedJobs")):
        f = f"spec.replicatedJobs[{i}]"
        job = r.mapping(item, f)
        template = r.mapping(job.get("template"), f"{f}.template")
        own = r.str_map(r.mapping(template.get("metadata"), f"{f}.template.metadata").get("annotations"),
                        f"{f}.template.metadata.annotations")
        job_spec = r.mapping(template.get("spec"), f"{f}.template.spec")
        pod_meta = r.mapping(r.mapping(job_spec.get("template"), f"{f}.template.spec.template").get("metadata"),
                             f"{f}.template.spec.template.metadata")
        pods_own = r.str_map(pod_meta.get("annotations"), f"{f}.template.spec.template.metadata.annotations")
        # The pods start with their template's annotations (JobSet's pod webhook acts on them, wherever
        # they came from); the JobSet controller copies the JobSet's pair over them, then the Job
        # template's, each only with an exclusive key beside it, and removes none.
        exclusive, strategy = pods_own.get(ANN_EXCLUSIVE, ""), ANN_NODE_SELECTOR_STRATEGY in pods_own
        for said in (annotations, own):
            if ANN_EXCLUSIVE in said:
                exclusive = said[ANN_EXCLUSIVE]
                strategy = strategy or ANN_NODE_SELECTOR_STRATEGY in said
        after = tuple(r.string(r.mapping(d, f"{f}.dependsOn[{k}]").get("name"), f"{f}.dependsOn[{k}].name")
                      for k, d in enumerate(r.seq(job.get("dependsOn"), f"{f}.dependsOn")))
        completions = job_spec.get("completions")
        out.append(ReplicatedJob(
            name=r.string(job.get("name"), f"{f}.name") or str(i),
            replicas=_count(r, job.get("replicas"), f"{f}.replicas"),
            pods=_job_pods(r, job_spec, f"{f}.template.spec"),
            completions=None if completions is None else _count(r, completions, f"{f}.template.spec.completions"),
            exclusive="" if strategy else exclusive, depends_on=after))
    return tuple(out)
