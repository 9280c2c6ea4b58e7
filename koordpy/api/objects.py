"""Core Kubernetes kinds as koordpy sees them: Node, Pod and PriorityClass."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import object_ref
from koordpy.api.raw import Reader

DEFAULT_MAX_PODS = 110
PODS = "pods"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Taint(_Model):
    key: str
    value: str = ""
    effect: str


class Toleration(_Model):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


class Requirement(_Model):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key, "")
        if self.operator == "In":
            return present and value in self.values
        if self.operator == "NotIn":
            return not present or value not in self.values
        if self.operator == "Exists":
            return present
        if self.operator == "DoesNotExist":
            return not present
        if not present or len(self.values) != 1:
            return False
        try:
            have, want = int(value), int(self.values[0])
        except ValueError:
            return False
        return have > want if self.operator == "Gt" else have < want


class NodeSelectorTerm(_Model):
    match_expressions: tuple[Requirement, ...] = ()
    match_fields: tuple[Requirement, ...] = ()

    def matches(self, node_name: str, labels: dict[str, str]) -> bool:
        if not self.match_expressions and not self.match_fields:
            return False  # an empty term matches nothing, as in kube-scheduler
        return all(r.matches(labels) for r in self.match_expressions) and all(
            r.matches({"metadata.name": node_name}) for r in self.match_fields
        )


class Node(_Model):
    name: str
    labels: dict[str, str] = {}
    allocatable: dict[str, int] = {}  # cpu in milli-cpus, the rest in base units (see quantity)
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    creation: float | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Node:
        r = Reader(object_ref(raw, "Node"))
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        status = r.mapping(raw.get("status"), "status")
        alloc_field = "status.allocatable" if status.get("allocatable") else "status.capacity"
        alloc_raw = r.mapping(status.get("allocatable") or status.get("capacity"), alloc_field)
        allocatable = {str(res): r.quantity(str(res), q, f"{alloc_field}.{res}") for res, q in alloc_raw.items()}
        allocatable.setdefault(PODS, DEFAULT_MAX_PODS)
        taints = tuple(
            _taint(r, t, f"spec.taints[{i}]") for i, t in enumerate(r.seq(spec.get("taints"), "spec.taints"))
        )
        ready = True
        for i, cond in enumerate(r.seq(status.get("conditions"), "status.conditions")):
            c = r.mapping(cond, f"status.conditions[{i}]")
            if c.get("type") == "Ready":
                ready = str(c.get("status")) == "True"
        # Every field was checked and typed by the Reader above; pydantic's second pass over
        # thousands of nodes and pods would only repeat it.
        return cls.model_construct(
            name=r.name(meta.get("name")),
            labels=r.str_map(meta.get("labels"), "metadata.labels"),
            allocatable=allocatable,
            unschedulable=r.boolean(spec.get("unschedulable"), "spec.unschedulable"),
            taints=taints,
            ready=ready,
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        )


def _taint(r: Reader, raw: Any, field: str) -> Taint:
    t = r.mapping(raw, field)
    effect = r.string(t.get("effect"), f"{field}.effect", required=True)
    if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise r.fail(f"{field}.effect", f"unknown taint effect {effect!r}")
    return Taint(key=r.string(t.get("key"), f"{field}.key", required=True),
                 value=r.string(t.get("value"), f"{field}.value"), effect=effect)


def _requirements(r: Reader, raw: Any, field: str) -> tuple[Requirement, ...]:
    out = []
    for i, item in enumerate(r.seq(raw, field)):
        e = r.mapping(item, f"{field}[{i}]")
        op = r.string(e.get("operator"), f"{field}[{i}].operator", required=True)
        if op not in ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"):
            raise r.fail(f"{field}[{i}].operator", f"unknown operator {op!r}")
        values = tuple(r.string(v, f"{field}[{i}].values[{j}]")
                       for j, v in enumerate(r.seq(e.get("values"), f"{field}[{i}].values")))
        out.append(Requirement(key=r.string(e.get("key"), f"{field}[{i}].key", required=True),
                               operator=op, values=values))  # type: ignore[arg-type]
    return tuple(out)


PREEMPTION_REASON = "PreemptionByScheduler"
# A pod so labelled is never chosen as a victim of preemption (Koordinator's label).
LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"


class Pod(_Model):
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    creation: float | None = None
    deleting: bool = False
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    nominated_node_name: str = ""
    phase: str = "Pending"
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    requests: dict[str, int] = {}  # in the units of Node.allocatable, the pods count (1) included
    node_selector: dict[str, str] = {}
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    owner_references: tuple[dict[str, str], ...] = ()
    unschedulable_message: str = ""  # the PodScheduled=False message already on the pod
    # DisruptionTarget=True with reason PreemptionByScheduler: a scheduler is evicting it to make room.
    preempted: bool = False
    grace_period: float = 30.0  # spec.terminationGracePeriodSeconds
    # spec.schedulingGates' names: while any is left, the pod is not ready to be scheduled.
    scheduling_gates: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Pod:
        r = Reader(object_ref(raw, "Pod"))
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        status = r.mapping(raw.get("status"), "status")
        affinity = r.mapping(
            r.mapping(r.mapping(spec.get("affinity"), "spec.affinity").get("nodeAffinity"),
                      "spec.affinity.nodeAffinity")
            .get("requiredDuringSchedulingIgnoredDuringExecution"),
            "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution",
        )
        tfield = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        terms = []
        for i, t in enumerate(r.seq(affinity.get("nodeSelectorTerms"), tfield)):
            tm = r.mapping(t, f"{tfield}[{i}]")
            terms.append(NodeSelectorTerm(
                match_expressions=_requirements(r, tm.get("matchExpressions"), f"{tfield}[{i}].matchExpressions"),
                match_fields=_requirements(r, tm.get("matchFields"), f"{tfield}[{i}].matchFields"),
            ))
        tolerations = []
        for i, t in enumerate(r.seq(spec.get("tolerations"), "spec.tolerations")):
            tm = r.mapping(t, f"spec.tolerations[{i}]")
            op = tm.get("operator") or "Equal"
            if op not in ("Equal", "Exists"):
                raise r.fail(f"spec.tolerations[{i}].operator", f"unknown operator {op!r}")
            tolerations.append(Toleration(key=r.string(tm.get("key"), f"spec.tolerations[{i}].key"),
                                          operator="Exists" if op == "Exists" else "Equal",
                                          value=r.string(tm.get("value"), f"spec.tolerations[{i}].value"),
                                          effect=r.string(tm.get("effect"), f"spec.tolerations[{i}].effect")))
        owners = tuple(
            {str(k): str(v) for k, v in r.mapping(o, f"metadata.ownerReferences[{i}]").items()
             if isinstance(v, str | bool)}
            for i, o in enumerate(r.seq(meta.get("ownerReferences"), "metadata.ownerReferences"))
        )
        unschedulable_message = ""
        preempted = False
        for i, cond in enumerate(r.seq(status.get("conditions"), "status.conditions")):
            c = r.mapping(cond, f"status.conditions[{i}]")
            if c.get("type") == "PodScheduled" and str(c.get("status")) == "False":
                unschedulable_message = r.string(c.get("message"), f"status.conditions[{i}].message")
            elif c.get("type") == "DisruptionTarget" and str(c.get("status")) == "True" \
                    and c.get("reason") == PREEMPTION_REASON:
                preempted = True
        grace = r.integer(spec.get("terminationGracePeriodSeconds"), "spec.terminationGracePeriodSeconds", bits=64)
        if grace is not None and grace < 0:
            raise r.fail("spec.terminationGracePeriodSeconds", f"must not be negative, got {grace}")
        gates = tuple(
            r.string(r.mapping(g, f"spec.schedulingGates[{i}]").get("name"), f"spec.schedulingGates[{i}].name",
                     required=True)
            for i, g in enumerate(r.seq(spec.get("schedulingGates"), "spec.schedulingGates")))
        policy = spec.get("preemptionPolicy")
        if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
            raise r.fail("spec.preemptionPolicy", f"must be Never or PreemptLowerPriority, got {policy!r}")
        return cls.model_construct(  # checked field by field above, as for Node
            namespace=r.namespace(meta.get("namespace")),
            name=r.name(meta.get("name")),
            uid=r.string(meta.get("uid"), "metadata.uid"),
            labels=r.str_map(meta.get("labels"), "metadata.labels"),
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            deleting=meta.get("deletionTimestamp") is not None,
            scheduler_name=r.string(spec.get("schedulerName"), "spec.schedulerName") or "default-scheduler",
            node_name=r.string(spec.get("nodeName"), "spec.nodeName"),
            nominated_node_name=r.string(status.get("nominatedNodeName"), "status.nominatedNodeName"),
            phase=r.string(status.get("phase"), "status.phase") or "Pending",
            priority=r.integer(spec.get("priority"), "spec.priority"),
            priority_class_name=r.string(spec.get("priorityClassName"), "spec.priorityClassName"),
            preemption_policy=policy,
            requests=_pod_requests(r, spec),
            node_selector=r.str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
            affinity_terms=tuple(terms),
            tolerations=tuple(tolerations),
            owner_references=owners,
            unschedulable_message=unschedulable_message,
            preempted=preempted,
            grace_period=30.0 if grace is None else float(grace),
            scheduling_gates=gates,
        )


def _resource_list(r: Reader, raw: Any, field: str) -> dict[str, int]:
    return {str(name): r.quantity(str(name), q, f"{field}.{name}") for name, q in r.mapping(raw, field).items()}


def _container_requests(r: Reader, c: dict[str, Any], field: str) -> dict[str, int]:
    res = r.mapping(c.get("resources"), f"{field}.resources")
    # The API server defaults a missing request to its limit, so a limits-only container asks for its limits.
    return {**_resource_list(r, res.get("limits"), f"{field}.resources.limits"),
            **_resource_list(r, res.get("requests"), f"{field}.resources.requests")}


def _add(into: dict[str, int], more: dict[str, int]) -> None:
    for name, v in more.items():
        into[name] = into.get(name, 0) + v


def _raise_to(into: dict[str, int], more: dict[str, int]) -> None:
    for name, v in more.items():
        into[name] = max(into.get(name, 0), v)


def _pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or name.startswith("hugepages-")


def _pod_requests(r: Reader, spec: dict[str, Any]) -> dict[str, int]:
    """What the pod asks of a node, computed from its spec as kube-scheduler v1.37 computes it (the
    same as v1.34 for a spec). kube-scheduler also takes the larger of a bound pod's
    ``status.resources`` and allocated resources while it is resized in place: not read here."""
    total: dict[str, int] = {}
    for i, c in enumerate(r.seq(spec.get("containers"), "spec.containers")):
        _add(total, _container_requests(r, r.mapping(c, f"spec.containers[{i}]"), f"spec.containers[{i}]"))
    # Init containers run one at a time, each alongside the sidecars (restartPolicy: Always)
    # started before it; a sidecar keeps running beside the app containers, so it also adds to them.
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for i, c in enumerate(r.seq(spec.get("initContainers"), "spec.initContainers")):
        field = f"spec.initContainers[{i}]"
        cm = r.mapping(c, field)
        policy = cm.get("restartPolicy")
        if policy is not None and policy != "Always":
            raise r.fail(f"{field}.restartPolicy", f"must be Always (a sidecar) or absent, got {policy!r}")
        own = _container_requests(r, cm, field)
        running = dict(sidecars)
        if policy == "Always":
            _add(total, own)
            _add(sidecars, own)
        _add(running, own)
        _raise_to(init_peak, running)
    _raise_to(total, init_peak)
    # Pod-level resources (PodLevelResources, on by default since 1.34) replace the containers'
    # sum for the resources they name; a pod-level limit stands in for a missing request unless
    # the containers request that overcommittable resource themselves.
    pod_res = r.mapping(spec.get("resources"), "spec.resources")
    pod_requests = _resource_list(r, pod_res.get("requests"), "spec.resources.requests")
    pod_limits = _resource_list(r, pod_res.get("limits"), "spec.resources.limits")
    for section, values in (("requests", pod_requests), ("limits", pod_limits)):
        for name in values:
            if not _pod_level_resource(name):
                raise r.fail(f"spec.resources.{section}.{name}",
                             "pod-level resources support only cpu, memory and hugepages-<size>")
    for name, v in pod_limits.items():
        if name not in pod_requests and not (name in total and not name.startswith("hugepages-")):
            pod_requests[name] = v
    total.update(pod_requests)
    _add(total, _resource_list(r, spec.get("overhead"), "spec.overhead"))
    total[PODS] = 1
    return {k: v for k, v in total.items() if v > 0}


class PriorityClass(_Model):
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> PriorityClass:
        r = Reader(object_ref(raw, "PriorityClass"))
        meta = r.mapping(raw.get("metadata"), "metadata")
        value = r.integer(raw.get("value"), "value")
        if value is None:
            raise r.fail("value", "is required")
        policy = raw.get("preemptionPolicy") or "PreemptLowerPriority"
        if policy not in ("Never", "PreemptLowerPriority"):
            raise r.fail("preemptionPolicy", f"must be Never or PreemptLowerPriority, got {policy!r}")
        return cls(name=r.name(meta.get("name")), value=value,
                   global_default=r.boolean(raw.get("globalDefault"), "globalDefault"), preemption_policy=policy)
