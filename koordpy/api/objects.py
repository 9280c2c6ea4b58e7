"""Core Kubernetes kinds as koordpy sees them: Node, Pod and PriorityClass."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import object_ref
from koordpy.api.quantity import parse_quantity_milli
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
    allocatable: dict[str, int] = {}  # milli-units
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
        alloc_raw = r.mapping(status.get("allocatable") or status.get("capacity"), "status.allocatable")
        allocatable: dict[str, int] = {}
        for res, q in alloc_raw.items():
            try:
                allocatable[res] = parse_quantity_milli(q)
            except ValueError as exc:
                raise r.fail(f"status.allocatable.{res}", str(exc)) from exc
        allocatable.setdefault(PODS, DEFAULT_MAX_PODS * 1000)
        taints = tuple(
            _taint(r, t, f"spec.taints[{i}]") for i, t in enumerate(r.seq(spec.get("taints"), "spec.taints"))
        )
        ready = True
        for i, cond in enumerate(r.seq(status.get("conditions"), "status.conditions")):
            c = r.mapping(cond, f"status.conditions[{i}]")
            if c.get("type") == "Ready":
                ready = str(c.get("status")) == "True"
        return cls(
            name=r.string(meta.get("name"), "metadata.name", required=True),
            labels=r.str_map(meta.get("labels"), "metadata.labels"),
            allocatable=allocatable,
            unschedulable=bool(spec.get("unschedulable", False)),
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
        values = tuple(str(v) for v in r.seq(e.get("values"), f"{field}[{i}].values"))
        out.append(Requirement(key=r.string(e.get("key"), f"{field}[{i}].key", required=True),
                               operator=op, values=values))  # type: ignore[arg-type]
    return tuple(out)


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
    requests: dict[str, int] = {}  # milli-units, the pods count included
    node_selector: dict[str, str] = {}
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    owner_references: tuple[dict[str, str], ...] = ()
    unschedulable_message: str = ""  # the PodScheduled=False message already on the pod

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
        for i, cond in enumerate(r.seq(status.get("conditions"), "status.conditions")):
            c = r.mapping(cond, f"status.conditions[{i}]")
            if c.get("type") == "PodScheduled" and str(c.get("status")) == "False":
                unschedulable_message = r.string(c.get("message"), f"status.conditions[{i}].message")
        policy = spec.get("preemptionPolicy")
        if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
            raise r.fail("spec.preemptionPolicy", f"must be Never or PreemptLowerPriority, got {policy!r}")
        return cls(
            namespace=r.string(meta.get("namespace"), "metadata.namespace") or "default",
            name=r.string(meta.get("name"), "metadata.name", required=True),
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
        )


def _container_requests(r: Reader, c: dict[str, Any], field: str) -> dict[str, int]:
    res = r.mapping(c.get("resources"), f"{field}.resources")
    out: dict[str, int] = {}
    # The API server defaults a missing request to its limit, so a limits-only pod asks for its limits.
    for section in ("limits", "requests"):
        for name, q in r.mapping(res.get(section), f"{field}.resources.{section}").items():
            try:
                out[name] = parse_quantity_milli(q)
            except ValueError as exc:
                raise r.fail(f"{field}.resources.{section}.{name}", str(exc)) from exc
    return out


def _pod_requests(r: Reader, spec: dict[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for i, c in enumerate(r.seq(spec.get("containers"), "spec.containers")):
        for name, v in _container_requests(r, r.mapping(c, f"spec.containers[{i}]"), f"spec.containers[{i}]").items():
            total[name] = total.get(name, 0) + v
    # Init containers run one at a time before the app containers, so only the largest counts.
    for i, c in enumerate(r.seq(spec.get("initContainers"), "spec.initContainers")):
        init = _container_requests(r, r.mapping(c, f"spec.initContainers[{i}]"), f"spec.initContainers[{i}]")
        for name, v in init.items():
            total[name] = max(total.get(name, 0), v)
    for name, q in r.mapping(spec.get("overhead"), "spec.overhead").items():
        try:
            total[name] = total.get(name, 0) + parse_quantity_milli(q)
        except ValueError as exc:
            raise r.fail(f"spec.overhead.{name}", str(exc)) from exc
    total[PODS] = 1000
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
        return cls(name=r.string(meta.get("name"), "metadata.name", required=True), value=value,
                   global_default=bool(raw.get("globalDefault", False)), preemption_policy=policy)
