"""Kubernetes' own PodGroup (``scheduling.k8s.io/v1beta1``, the Workload API), parsed.

A pod names its group in ``spec.schedulingGroup.podGroupName``. koordpy reads the group's policy
(``basic``, or ``gang`` with its ``minCount``), its topology constraint
(``schedulingConstraints.topology[].key``, a node label), its priority (``priorityClassName`` /
``priority``), koordpy's own preferred level (the ``kai.scheduler/topology-preferred-placement``
annotation, a node label, spelled and placed as KAI reads it: an annotation), its ``disruptionMode``
and ``preemptionPolicy``, its ``resourceClaims`` and their ``status.resourceClaimStatuses``, the
``status.conditions`` kube-scheduler (or koordpy) wrote on it (whole, with their times, since a status
write replaces the list), the ``metadata.generation`` a condition observes, and the parent
CompositePodGroup (``scheduling.k8s.io/v1alpha3``) it names with the ``workloadRef`` the API server
requires beside it. A CompositePodGroup is read here too: its policy (``basic``, or ``gang`` with
``minGroupCount``), its topology key, its priority and its ``workloadRef``. Anything either asks for
that koordpy does not apply yet is listed in ``asks`` by field name, so its pods are refused rather
than placed as if the field were not there. What the API server refuses is refused here, naming the
field: a ``schedulingPolicy`` setting neither or both of ``basic`` and ``gang``, a field the policy does
not define (strict field validation, kubectl's default), a topology key that is no label key.

Belongs here: reading the object. Does not belong here: what koordpy does with it
(``koordpy.core.dialects.upstream``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.kueue import ANN_PREFERRED
from koordpy.api.model import NamespacedKey
from koordpy.api.objects import PodClaim, claim_statuses, pod_claims
from koordpy.api.raw import Reader, int_text, read_object
from koordpy.api.selectors import qualified_name_problem

MAX_CLAIMS = 4  # MaxPodGroupResourceClaims
# The condition kube-scheduler v1.37 writes on a PodGroup: True once its minimum was first placed
# (and never False again), False with why while it is not.
INITIALLY_SCHEDULED = "PodGroupInitiallyScheduled"
# Its reasons, as kube-scheduler spells them: placed; no room (yet); refused by the scheduler.
SCHEDULED = "Scheduled"
UNSCHEDULABLE = "Unschedulable"
SCHEDULER_ERROR = "SchedulerError"
# The completion index the Job controller gives each pod of an Indexed Job: an annotation, and (since
# PodIndexLabel, GA in v1.32) a label of the same key. koordpy places a Workload PodGroup's members in
# this order (its own addition: kube-scheduler gives no order).
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def completion_index(annotations: dict[str, str], labels: dict[str, str]) -> int | None:
    """The pod's Job completion index (the annotation, else the label), or None. A value that is no
    index is ignored rather than refused: the Job controller writes it, koordpy only orders by it, and
    a pod must not wait for a key that is not koordpy's."""
    raw = annotations.get(JOB_COMPLETION_INDEX) or labels.get(JOB_COMPLETION_INDEX)
    if raw is None:
        return None
    try:
        value = int_text(raw)
    except ValueError:
        return None
    return value if value >= 0 else None


class GroupCondition(BaseModel):
    """One ``status.conditions`` entry (``metav1.Condition``). All of it is kept: a merge patch of
    ``status`` replaces the whole list, so the scheduler writes back the entries it did not change."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: float | None = None  # seconds since the epoch (the API keeps whole seconds)
    observed_generation: int | None = None

    def wire(self) -> dict[str, object]:
        """The entry as the API spells it (a time in whole seconds, as the API stores it)."""
        out: dict[str, object] = {"type": self.type, "status": self.status, "reason": self.reason,
                                  "message": self.message}
        if self.last_transition_time is not None:
            out["lastTransitionTime"] = datetime.fromtimestamp(int(self.last_transition_time), tz=UTC).strftime(
                "%Y-%m-%dT%H:%M:%SZ")
        if self.observed_generation is not None:
            out["observedGeneration"] = self.observed_generation
        return out


class WorkloadPodGroupStatus(BaseModel):
    """The PodGroup's ``status`` as far as the scheduler writes it: its conditions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    conditions: tuple[GroupCondition, ...] = ()

    def written(self) -> dict[str, object]:
        """Every field of the status the scheduler writes, as it stands (the whole conditions list)."""
        return {"conditions": [c.wire() for c in self.conditions]}


class WorkloadRef(BaseModel):
    """``spec.workloadRef``: the Workload and the template a group was made from. kube-scheduler reads
    neither the Workload nor the template (the group's own spec is what it schedules), and nor does
    koordpy; the API server requires it on a CompositePodGroup and on a PodGroup that names a parent."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workload_name: str
    template_name: str


class WorkloadPodGroup(BaseModel, NamespacedKey):
    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    name: str
    policy: Literal["basic", "gang"]
    uid: str = ""  # metadata.uid: a claim reserved for the group names it
    min_count: int | None = None
    creation: float | None = None
    annotations: dict[str, str] = {}  # metadata.annotations (koordpy's per-job preemption and staleness settings)
    # schedulingConstraints.topology[].key: node labels every member shares a value of.
    topology_keys: tuple[str, ...] = ()
    # koordpy's addition: the node label named by the kai.scheduler/topology-preferred-placement
    # annotation, whose domains (inside the required key's) the group prefers; "" when not set.
    preferred_label: str = ""
    priority_class_name: str = ""
    priority: int | None = None
    claims: tuple[PodClaim, ...] = ()  # spec.resourceClaims (DRAWorkloadResourceClaims), at most 4
    # status.resourceClaimStatuses: a claim's name in the spec -> the ResourceClaim made from its
    # template for the group ("" none needed).
    claim_statuses: dict[str, str] = {}
    # disruptionMode: "all" -- the group is only ever disrupted as a unit (one victim evicts every
    # member); "single" (the default) -- pod by pod.
    disruption_mode: Literal["single", "all"] = "single"
    # spec.preemptionPolicy (the Priority admission fills it from the class): the group's, not its pods'.
    preemption_policy: str | None = None
    # spec.parentCompositePodGroupName: the CompositePodGroup (same namespace) this group is a child of.
    parent: str | None = None
    workload_ref: WorkloadRef | None = None
    # What the group asks for that koordpy does not apply yet, by field name.
    asks: tuple[str, ...] = ()
    conditions: tuple[GroupCondition, ...] = ()
    generation: int | None = None  # metadata.generation, which a condition the scheduler writes observes

    @property
    def resource_claims(self) -> tuple[str, ...]:
        """The names of ``spec.resourceClaims``."""
        return tuple(c.name for c in self.claims)

    def condition(self, kind: str) -> GroupCondition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    @property
    def status(self) -> WorkloadPodGroupStatus:
        """The status the scheduler writes (what the shells compare a write with)."""
        return WorkloadPodGroupStatus(conditions=self.conditions)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> WorkloadPodGroup:
        r, meta, (spec, status) = read_object(raw, "PodGroup", "spec", "status")
        gang = _policy(r, spec, "minCount")
        min_count = None
        if gang is not None:
            min_count = r.integer(gang.get("minCount"), "spec.schedulingPolicy.gang.minCount")
            if min_count is None or min_count < 1:
                raise r.fail("spec.schedulingPolicy.gang.minCount", f"must be at least 1, got {min_count}")
        keys = _topology_keys(r, spec)
        claims = pod_claims(r, spec.get("resourceClaims"), "spec.resourceClaims", MAX_CLAIMS)
        mode, policy_field = _disruption(r, spec)
        parent = r.string(spec.get("parentCompositePodGroupName"), "spec.parentCompositePodGroupName") or None
        ref = _workload_ref(r, spec)
        if parent is not None and ref is None:
            # The API server refuses it too (a child is always made from a Workload's template).
            raise r.fail("spec.workloadRef", "must be set when spec.parentCompositePodGroupName is set")
        return cls(namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
                   uid=r.string(meta.get("uid"), "metadata.uid"),
                   policy="gang" if gang is not None else "basic", min_count=min_count,
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
                   annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
                   topology_keys=keys,
                   preferred_label=r.str_map(meta.get("annotations"), "metadata.annotations").get(
                       ANN_PREFERRED, "").strip(),
                   priority_class_name=r.string(spec.get("priorityClassName"), "spec.priorityClassName"),
                   priority=r.integer(spec.get("priority"), "spec.priority"),
                   claims=claims,
                   claim_statuses=claim_statuses(r, status.get("resourceClaimStatuses"),
                                                 "status.resourceClaimStatuses", claims),
                   disruption_mode=mode, preemption_policy=policy_field, parent=parent,
                   workload_ref=ref,
                   conditions=_conditions(r, status),
                   generation=r.integer(meta.get("generation"), "metadata.generation", bits=64))


def _known(r: Reader, mapping: dict[str, Any], field: str, fields: tuple[str, ...]) -> None:
    """Refuses a key ``mapping`` does not define, as the API server's strict field validation (kubectl's
    default) refuses it: a misspelt policy must not be read as no policy."""
    for key in mapping:
        if key not in fields:
            near = next((f for f in fields if f.lower() == str(key).lower()), None)
            hint = f" (did you mean {near!r}?)" if near else ""
            known = ", ".join(fields) if fields else "none"
            raise r.fail(f"{field}.{key}", f"unknown field{hint}; the fields are: {known}")


def _policy(r: Reader, spec: dict[str, Any], count: str) -> dict[str, Any] | None:
    """``spec.schedulingPolicy``, a union the API server requires exactly one member of: ``basic: {}``
    (None) or ``gang: {<count>: N}`` (its mapping). ``{}``, ``gang: null`` and a misspelt member are
    refused, as the API server refuses them, rather than taken for ``basic``: a gang read as a basic
    group would bind in part."""
    field = "spec.schedulingPolicy"
    policy = r.mapping(spec.get("schedulingPolicy"), field)
    _known(r, policy, field, ("basic", "gang"))
    gang, basic = policy.get("gang"), policy.get("basic")
    if (gang is None) == (basic is None):
        got = "both" if gang is not None else "neither (a member set to null is not set)"
        raise r.fail(field, f"must set exactly one of basic and gang, got {got}")
    if basic is not None:
        _known(r, r.mapping(basic, f"{field}.basic"), f"{field}.basic", ())
        return None
    found = r.mapping(gang, f"{field}.gang")
    _known(r, found, f"{field}.gang", (count,))
    return found


def _disruption(r: Reader, spec: dict[str, Any]) -> tuple[Literal["single", "all"], str | None]:
    """``disruptionMode`` (a union: ``{single: {}}``, the default, or ``{all: {}}``) and
    ``preemptionPolicy`` (None when unset), as a PodGroup and a CompositePodGroup both spell them."""
    mode = r.mapping(spec.get("disruptionMode"), "spec.disruptionMode")
    if len(mode) > 1 or (mode and next(iter(mode)) not in ("single", "all")):
        raise r.fail("spec.disruptionMode", f"must set exactly one of single and all, got {sorted(mode)}")
    policy = r.string(spec.get("preemptionPolicy"), "spec.preemptionPolicy")
    if policy not in ("", "PreemptLowerPriority", "Never"):
        raise r.fail("spec.preemptionPolicy", f"must be PreemptLowerPriority or Never, got {policy!r}")
    return ("all" if "all" in mode else "single"), (policy or None)


def _workload_ref(r: Reader, spec: dict[str, Any]) -> WorkloadRef | None:
    ref = spec.get("workloadRef")
    if ref is None:
        return None
    m = r.mapping(ref, "spec.workloadRef")
    return WorkloadRef(workload_name=r.string(m.get("workloadName"), "spec.workloadRef.workloadName", required=True),
                       template_name=r.string(m.get("templateName"), "spec.workloadRef.templateName", required=True))


def _topology_keys(r: Reader, spec: dict[str, Any]) -> tuple[str, ...]:
    constraints = r.mapping(spec.get("schedulingConstraints"), "spec.schedulingConstraints")
    field = "spec.schedulingConstraints.topology"
    keys = tuple(r.string(r.mapping(t, f"{field}[{i}]").get("key"), f"{field}[{i}].key", required=True)
                 for i, t in enumerate(r.seq(constraints.get("topology"), field)))
    if len(keys) > 1:  # the API allows one; which would win is not koordpy's to guess
        raise r.fail(field, f"at most one topology constraint is allowed, got {len(keys)}")
    for i, key in enumerate(keys):
        problem = qualified_name_problem(key)
        if problem:  # the API server requires a label key (k8s-label-key)
            raise r.fail(f"{field}[{i}].key", f"must be a node label key: {problem}")
    return keys


class CompositePodGroup(BaseModel, NamespacedKey):
    """``scheduling.k8s.io/v1alpha3`` CompositePodGroup: a group of PodGroups (its children name it in
    ``spec.parentCompositePodGroupName``). ``gang: {minGroupCount}`` admits the whole only when that
    many children can be placed at once, each whole; ``basic: {}`` counts as a minimum of one child, as
    kube-scheduler counts it. ``topology_keys``: the node label one of whose domains holds every child."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    name: str
    policy: Literal["basic", "gang"]
    min_group_count: int = 1
    creation: float | None = None
    annotations: dict[str, str] = {}  # metadata.annotations (koordpy's per-job preemption and staleness settings)
    topology_keys: tuple[str, ...] = ()
    priority_class_name: str = ""
    priority: int | None = None
    # disruptionMode all: the children are only ever disrupted together; preemptionPolicy: the tree's.
    disruption_mode: Literal["single", "all"] = "single"
    preemption_policy: str | None = None
    workload_ref: WorkloadRef
    # What it asks for that koordpy does not apply yet, by field name (a parent of its own: nesting).
    asks: tuple[str, ...] = ()
    generation: int | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> CompositePodGroup:
        r, meta, (spec,) = read_object(raw, "CompositePodGroup", "spec")
        gang = _policy(r, spec, "minGroupCount")
        count = 1
        if gang is not None:
            found = r.integer(gang.get("minGroupCount"), "spec.schedulingPolicy.gang.minGroupCount")
            if found is None or found < 1:
                raise r.fail("spec.schedulingPolicy.gang.minGroupCount", f"must be at least 1, got {found}")
            count = found
        ref = _workload_ref(r, spec)
        if ref is None:  # required by the API server: a CompositePodGroup is made from a Workload's template
            raise r.fail("spec.workloadRef", "is required (the Workload and template the group was made from)")
        asks = tuple(f"spec.{name}" for name in ("parentCompositePodGroupName",) if spec.get(name) not in (None, ""))
        mode, preemption = _disruption(r, spec)
        return cls(namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
                   disruption_mode=mode, preemption_policy=preemption,
                   policy="gang" if gang is not None else "basic", min_group_count=count,
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
                   annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
                   topology_keys=_topology_keys(r, spec),
                   priority_class_name=r.string(spec.get("priorityClassName"), "spec.priorityClassName"),
                   priority=r.integer(spec.get("priority"), "spec.priority"), workload_ref=ref, asks=asks,
                   generation=r.integer(meta.get("generation"), "metadata.generation", bits=64))


def _conditions(r: Reader, status: dict[str, Any]) -> tuple[GroupCondition, ...]:
    out = []
    for i, cond in enumerate(r.seq(status.get("conditions"), "status.conditions")):
        c = r.mapping(cond, f"status.conditions[{i}]")
        out.append(GroupCondition(type=r.string(c.get("type"), f"status.conditions[{i}].type"),
                                  status=str(c.get("status") or ""),
                                  reason=r.string(c.get("reason"), f"status.conditions[{i}].reason"),
                                  message=r.string(c.get("message"), f"status.conditions[{i}].message"),
                                  last_transition_time=r.timestamp(c.get("lastTransitionTime"),
                                                                   f"status.conditions[{i}].lastTransitionTime"),
                                  observed_generation=r.integer(c.get("observedGeneration"),
                                                                f"status.conditions[{i}].observedGeneration",
                                                                bits=64)))
    return tuple(out)
