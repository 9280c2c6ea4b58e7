"""Core Kubernetes kinds as koordpy sees them: Node, Pod, PriorityClass and Namespace.

Belongs here: the kinds and their parts, each read from its raw dict by ``from_raw``. What the
cache holds by the thousand (a Node, a Pod and what they carry: taints, tolerations, volumes, the
pod's rules) is a frozen slotted record (``koordpy.api.model.Record``), not a pydantic model: every
field is checked by the Reader as it is read, and a pydantic object's per-instance dict and
fields-set cost about 2 KiB a pod (docs/design.md, "What the cache keeps"). Equal parts parsed
from different objects are kept once (``koordpy.api.model.Shared``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.gangname import pod_gang_name
from koordpy.api.model import NamespacedKey, Record, Shared
from koordpy.api.podvolumes import PodVolume, pod_volumes
from koordpy.api.quantity import is_extended_resource
from koordpy.api.raw import Reader, label_problem, read_object, subdomain_problem
from koordpy.api.selectors import LabelSelector, SelectorRequirement

DEFAULT_MAX_PODS = 110
PODS = "pods"
EXTENDED_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # a DeviceClass's implicit extended resource
MIRROR_POD = "kubernetes.io/config.mirror"  # a static pod's mirror: the API server allows it no claims


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True, slots=True, kw_only=True)
class Taint(Record):
    key: str
    value: str = ""
    effect: str
    # timeAdded (NoExecute taints carry it): a toleration's tolerationSeconds count from it.
    time_added: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Toleration(Record):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: str = ""
    # tolerationSeconds: how long a NoExecute taint is tolerated (None: for ever; 0 or less: not at all).
    seconds: float | None = None

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if not self.key:
            return self.operator == "Exists"
        if self.key != taint.key:
            return False
        return self.operator == "Exists" or self.value == taint.value


@dataclass(frozen=True, slots=True)
class PodClaim:
    """An entry of a pod's (or a Workload PodGroup's) ``spec.resourceClaims``: exactly one of a claim's
    name or a template's name. (Defined here for the Pod; ``koordpy.api.dra`` exports it too.)"""

    name: str
    claim: str = ""  # resourceClaimName
    template: str = ""  # resourceClaimTemplateName


@dataclass(frozen=True, slots=True)
class ContainerExtended:
    """A container's requests of extended resources (``example.com/gpu``, or a class's implicit
    ``deviceclass.resource.kubernetes.io/<class>``), as kube-scheduler names the requests of the claim
    it makes for those a DeviceClass backs: the container's index among init containers then
    containers, whether it runs only before the others (an init container that is not a sidecar),
    and per resource its quantity and its place among the container's requests in name order."""

    name: str
    index: int
    short_lived: bool
    requests: tuple[tuple[str, int, int], ...]  # (resource, quantity, index in the sorted request names)


def pod_claims(r: Reader, raw: Any, path: str, limit: int | None = None) -> tuple[PodClaim, ...]:
    """A ``resourceClaims`` list (a pod's or a PodGroup's) as the API server checks it: names unique
    DNS labels, and each entry exactly one of ``resourceClaimName`` / ``resourceClaimTemplateName``,
    an object name."""
    items = r.seq(raw, path)
    if limit is not None and len(items) > limit:
        raise r.fail(path, f"must have at most {limit} items, got {len(items)}")
    out: list[PodClaim] = []
    for i, c in enumerate(items):
        at = f"{path}[{i}]"
        cm = r.mapping(c, at)
        name = r.string(cm.get("name"), f"{at}.name", required=True)
        problem = label_problem(name)
        if problem:
            raise r.fail(f"{at}.name", problem)
        if any(o.name == name for o in out):
            raise r.fail(f"{at}.name", f"duplicate value {name!r}")
        given = [k for k in ("resourceClaimName", "resourceClaimTemplateName") if cm.get(k) is not None]
        if len(given) != 1:
            raise r.fail(at, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"
                         if given else "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        target = r.string(cm[given[0]], f"{at}.{given[0]}")
        problem = subdomain_problem(target)
        if problem:
            raise r.fail(f"{at}.{given[0]}", problem)
        out.append(PodClaim(name, claim=target, template="") if given[0] == "resourceClaimName"
                   else PodClaim(name, template=target))
    return tuple(out)


def claim_statuses(r: Reader, raw: Any, path: str, claims: tuple[PodClaim, ...]) -> dict[str, str]:
    """``status.resourceClaimStatuses`` (a pod's or a PodGroup's): the claim's name in the spec ->
    the ResourceClaim made for it, "" when the controller decided none was needed."""
    out: dict[str, str] = {}
    for i, s in enumerate(r.seq(raw, path)):
        sm = r.mapping(s, f"{path}[{i}]")
        name = r.string(sm.get("name"), f"{path}[{i}].name", required=True)
        if not any(c.name == name for c in claims):
            raise r.fail(f"{path}[{i}].name", f"{name!r} must match the name of an entry in `spec.resourceClaims`")
        out[name] = r.string(sm.get("resourceClaimName"), f"{path}[{i}].resourceClaimName")
    return out


def _container_claims(r: Reader, spec: dict[str, Any], claims: tuple[PodClaim, ...]) -> None:
    """Each container's ``resources.claims`` names a claim of the pod, once (a whole claim, or one of
    its requests, not both), as the API server requires."""
    names = sorted(c.name for c in claims)
    for section in ("containers", "initContainers"):
        for i, c in enumerate(r.seq(spec.get(section), f"spec.{section}")):
            at = f"spec.{section}[{i}].resources.claims"
            resources = r.mapping(r.mapping(c, f"spec.{section}[{i}]").get("resources"),
                                  f"spec.{section}[{i}].resources")
            seen: set[str] = set()
            for j, use in enumerate(r.seq(resources.get("claims"), at)):
                um = r.mapping(use, f"{at}[{j}]")
                name = r.string(um.get("name"), f"{at}[{j}].name", required=True)
                request = r.string(um.get("request"), f"{at}[{j}].request")
                if request:
                    problem = label_problem(request)
                    if problem:
                        raise r.fail(f"{at}[{j}].request", problem)
                key = f"{name}/{request}" if request else name
                if name in seen or key in seen or (not request and any(k.startswith(f"{name}/") for k in seen)):
                    raise r.fail(f"{at}[{j}]", f"duplicate value {key!r}")
                seen.add(key)
                if name not in names:
                    raise r.fail(f"{at}[{j}]", f"{name!r} not found: must be one of the names in "
                                               "pod.spec.resourceClaims" +
                                 (f": {', '.join(names)}" if names else " which is empty"))


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Node(Record):
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)  # cpu in milli-cpus, the rest in base units
    unschedulable: bool = False
    taints: tuple[Taint, ...] = ()
    ready: bool = True
    creation: float | None = None
    # status.declaredFeatures: what the kubelet says it supports, for pods that need it (NodeDeclaredFeatures).
    declared_features: frozenset[str] = frozenset()

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Node:
        r, meta, (spec, status) = read_object(raw, "Node", "spec", "status")
        alloc_field = "status.allocatable" if status.get("allocatable") else "status.capacity"
        allocatable = r.resources(status.get("allocatable") or status.get("capacity"), alloc_field)
        allocatable.setdefault(PODS, DEFAULT_MAX_PODS)
        taints = tuple(
            _taint(r, t, f"spec.taints[{i}]") for i, t in enumerate(r.seq(spec.get("taints"), "spec.taints"))
        )
        ready = True
        for i, cond in enumerate(r.seq(status.get("conditions"), "status.conditions")):
            c = r.mapping(cond, f"status.conditions[{i}]")
            if c.get("type") == "Ready":
                ready = str(c.get("status")) == "True"
        # Every field was checked and typed by the Reader above.
        return cls(
            name=sys.intern(r.name(meta.get("name"))),  # a pod's nodeName is the same string
            labels=_interned_map(r.str_map(meta.get("labels"), "metadata.labels")),
            allocatable=_SHARED_RESOURCES.map(allocatable),
            unschedulable=r.boolean(spec.get("unschedulable"), "spec.unschedulable"),
            taints=_SHARED_TAINTS.get(taints),
            ready=ready,
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            declared_features=frozenset(
                r.string(f, f"status.declaredFeatures[{i}]")
                for i, f in enumerate(r.seq(status.get("declaredFeatures"), "status.declaredFeatures"))),
        )


def _seconds(value: int | None) -> float | None:
    return None if value is None else float(value)


def _taint(r: Reader, raw: Any, field: str) -> Taint:
    t = r.mapping(raw, field)
    effect = r.string(t.get("effect"), f"{field}.effect", required=True)
    if effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise r.fail(f"{field}.effect", f"unknown taint effect {effect!r}")
    return Taint(key=r.string(t.get("key"), f"{field}.key", required=True),
                 value=r.string(t.get("value"), f"{field}.value"), effect=effect,
                 time_added=r.timestamp(t.get("timeAdded"), f"{field}.timeAdded"))


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


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSelector(Record):
    """A label selector over pods as a tuple of requirements (``matchLabels`` become ``In``), so
    terms hash and compare by value. ``nothing``: the selector was absent, which in an affinity term
    or a spread constraint matches no pod (an empty selector matches every pod)."""

    requirements: tuple[SelectorRequirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: dict[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)

    @property
    def keys(self) -> frozenset[str]:
        return frozenset(r.key for r in self.requirements)


@dataclass(frozen=True, slots=True, kw_only=True)
class PodAffinityTerm(Record):
    """A required (or, with a weight, preferred) inter-pod affinity or anti-affinity term.

    ``namespaces`` is what the term's namespaces resolve to without the selector: the listed ones,
    or the pod's own when neither a list nor a selector is given. ``namespace_selector`` None: not
    given; an empty selector selects every namespace."""

    selector: PodSelector
    namespaces: tuple[str, ...] = ()
    namespace_selector: PodSelector | None = None
    topology_key: str
    weight: int = 0

    def selects_namespace(self, namespace: str, labels: dict[str, str] | None) -> bool:
        if namespace in self.namespaces:
            return True
        return self.namespace_selector is not None and self.namespace_selector.matches(labels or {})

    def matches(self, pod: Pod, namespace_labels: dict[str, dict[str, str]]) -> bool:
        return self.selects_namespace(pod.namespace, namespace_labels.get(pod.namespace)) \
            and self.selector.matches(pod.labels)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpreadConstraint(Record):
    """One ``topologySpreadConstraints`` entry (matchLabelKeys merged into the selector)."""

    max_skew: int
    topology_key: str
    hard: bool  # whenUnsatisfiable: DoNotSchedule (a filter), else ScheduleAnyway (a score)
    selector: PodSelector
    min_domains: int | None = None
    honor_node_affinity: bool = True  # nodeAffinityPolicy: Honor (the default) or Ignore
    honor_node_taints: bool = False  # nodeTaintsPolicy: Ignore (the default) or Honor


@dataclass(frozen=True, slots=True, kw_only=True)
class HostPort(Record):
    protocol: str
    port: int
    ip: str  # "0.0.0.0" when unset: every address

    def conflicts(self, other: HostPort) -> bool:
        return (self.port == other.port and self.protocol == other.protocol
                and (self.ip == other.ip or "0.0.0.0" in (self.ip, other.ip)))


PREEMPTION_REASON = "PreemptionByScheduler"
# The DisruptionTarget reason of a stale gang's members the scheduler evicts (koordpy.core.stale):
# not preemption's, so that whoever reads it can tell the two apart.
STALE_EVICTION_REASON = "StaleGangEviction"
# A pod so labelled is never chosen as a victim of preemption (Koordinator's label).
LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pod(Record, NamespacedKey):
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    creation: float | None = None
    # status.startTime: when the kubelet started the pod (None: not started, or not said).
    start_time: float | None = None
    deleting: bool = False
    scheduler_name: str = "default-scheduler"
    node_name: str = ""
    nominated_node_name: str = ""
    phase: str = "Pending"
    # status.reason: why the kubelet failed or evicted it (OutOfcpu, OutOfmemory, Evicted, NodeLost...).
    reason: str = ""
    priority: int | None = None
    priority_class_name: str = ""
    preemption_policy: str | None = None
    requests: dict[str, int] = field(default_factory=dict)  # in Node.allocatable's units, the pods count (1) too
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: tuple[NodeSelectorTerm, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    owner_references: tuple[dict[str, str], ...] = ()
    unschedulable_message: str = ""  # the PodScheduled=False message already on the pod
    # DisruptionTarget=True with reason PreemptionByScheduler (a scheduler is evicting it to make room)
    # or StaleGangEviction (its gang ran below its minimum too long).
    preempted: bool = False
    grace_period: float = 30.0  # spec.terminationGracePeriodSeconds
    # spec.schedulingGates' names: while any is left, the pod is not ready to be scheduled.
    scheduling_gates: tuple[str, ...] = ()
    volumes: tuple[PodVolume, ...] = ()  # spec.volumes as the volume rules read them (see podvolumes)
    # Inter-pod affinity and anti-affinity: required terms, and preferred ones (with weights).
    pod_affinity: tuple[PodAffinityTerm, ...] = ()
    pod_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_affinity: tuple[PodAffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[PodAffinityTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    def selects_node(self, node: Node) -> bool:
        """``nodeSelector`` and required node affinity (kube-scheduler's NodeAffinity filter)."""
        if any(node.labels.get(k) != v for k, v in self.node_selector.items()):
            return False
        return not self.affinity_terms or any(t.matches(node.name, node.labels) for t in self.affinity_terms)

    def untolerated_taint(self, node: Node) -> Taint | None:
        """The first ``NoSchedule`` / ``NoExecute`` taint of the node the pod does not tolerate."""
        for taint in node.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in self.tolerations):
                return taint
        return None

    @property
    def has_pod_rules(self) -> bool:
        """Whether where other pods run matters to where this one may go (a filter, not a score)."""
        return bool(self.pod_affinity or self.pod_anti_affinity or self.host_ports
                    or any(c.hard for c in self.spread))
    # The node features the pod needs (kube-scheduler's NodeDeclaredFeatures infers them from its spec).
    required_features: tuple[str, ...] = ()
    claims: tuple[PodClaim, ...] = ()  # spec.resourceClaims (DRA)
    # status.resourceClaimStatuses: a claim's name in the spec -> the ResourceClaim the controller made
    # from its template ("" none needed).
    claim_statuses: Mapping[str, str] = field(default_factory=dict)
    # status.extendedResourceClaimStatus.resourceClaimName: the claim made for the pod's DRA-backed
    # extended resources ("" none).
    extended_claim: str = ""
    # Each container's requests of extended resources (DRA may back them: ``koordpy.core.claims``).
    extended_requests: tuple[ContainerExtended, ...] = ()
    # spec.schedulingGroup.podGroupName (a Workload's PodGroup): not read yet, so such a pod is refused.
    scheduling_group: str = ""
    scheduling_group_other: bool = False  # named by a field other than podGroupName
    # ``namespace/name``, made once: the core files the pod under it in many tables, each of which
    # would otherwise hold a string of its own.
    _key: str = field(default="", init=False, repr=False, compare=False)
    # The gang its labels and annotations name (``pod_gang_name``), read once: the cache and the core
    # ask it of every pod of a new gang in each cycle that sees it.
    _gang: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", f"{self.namespace}/{self.name}")
        object.__setattr__(self, "_gang", pod_gang_name(self.namespace, self.labels, self.annotations))

    @property
    def key(self) -> str:
        return self._key

    @property
    def gang_name(self) -> str | None:
        """The gang the pod names by Koordinator's or scheduler-plugins' labels and annotations,
        ``namespace/name``, or None (``koordpy.api.gangname.pod_gang_name``)."""
        return self._gang

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def resource_claims(self) -> tuple[str, ...]:
        """The names of ``spec.resourceClaims``."""
        return tuple(c.name for c in self.claims)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Pod:
        r, meta, (spec, status) = read_object(raw, "Pod", "spec", "status")
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
                                          effect=r.string(tm.get("effect"), f"spec.tolerations[{i}].effect"),
                                          seconds=_seconds(r.integer(tm.get("tolerationSeconds"),
                                                                     f"spec.tolerations[{i}].tolerationSeconds",
                                                                     bits=64))))
        grace = r.integer(spec.get("terminationGracePeriodSeconds"), "spec.terminationGracePeriodSeconds", bits=64,
                          minimum=0)
        gates = tuple(
            r.string(r.mapping(g, f"spec.schedulingGates[{i}]").get("name"), f"spec.schedulingGates[{i}].name",
                     required=True)
            for i, g in enumerate(r.seq(spec.get("schedulingGates"), "spec.schedulingGates")))
        claims = pod_claims(r, spec.get("resourceClaims"), "spec.resourceClaims")
        if claims and MIRROR_POD in r.mapping(meta.get("annotations"), "metadata.annotations"):
            raise r.fail("spec.resourceClaims", "static pods do not support resource claims")
        _container_claims(r, spec, claims)
        group = r.mapping(spec.get("schedulingGroup"), "spec.schedulingGroup")
        policy = spec.get("preemptionPolicy")
        if policy is not None and policy not in ("Never", "PreemptLowerPriority"):
            raise r.fail("spec.preemptionPolicy", f"must be Never or PreemptLowerPriority, got {policy!r}")
        requests = _SHARED_RESOURCES.map(_pod_requests(r, spec))
        # Checked field by field above, as for Node. What a gang's pods (or every pod) have alike is
        # kept once: the maps and tuples are shared, the names and label strings interned.
        return cls(
            namespace=sys.intern(r.namespace(meta.get("namespace"))),
            name=r.name(meta.get("name")),
            uid=r.string(meta.get("uid"), "metadata.uid"),
            labels=_SHARED_LABELS.map(r.str_map(meta.get("labels"), "metadata.labels")),
            annotations=_SHARED_ANNOTATIONS.map(r.str_map(meta.get("annotations"), "metadata.annotations")),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            scheduler_name=sys.intern(r.string(spec.get("schedulerName"), "spec.schedulerName")
                                      or "default-scheduler"),
            node_name=sys.intern(r.string(spec.get("nodeName"), "spec.nodeName")),
            priority=r.integer(spec.get("priority"), "spec.priority"),
            priority_class_name=sys.intern(r.string(spec.get("priorityClassName"), "spec.priorityClassName")),
            preemption_policy=policy,
            requests=requests,
            node_selector=_SHARED_LABELS.map(r.str_map(spec.get("nodeSelector"), "spec.nodeSelector")),
            affinity_terms=_SHARED_TERMS.get(tuple(terms)),
            tolerations=_SHARED_TOLERATIONS.get(tuple(tolerations)),
            grace_period=30.0 if grace is None else float(grace),
            scheduling_gates=gates,
            # A gang's pods made from one template name the same claims: one tuple for all of them.
            claims=_SHARED_CLAIMS.get(claims) if claims else (),
            extended_requests=_extended_requests(r, spec) if any(map(_maybe_dra, requests)) else (),
            required_features=_required_features(r, spec),
            # A group given by a field other than podGroupName (the API's union may grow) is still a
            # group koordpy does not read: named by that field.
            scheduling_group=(r.string(group.get("podGroupName"), "spec.schedulingGroup.podGroupName")
                              or ", ".join(sorted(str(k) for k in group))),
            scheduling_group_other=bool(group) and not group.get("podGroupName"),
            **_pod_rules(r, spec, meta),
            volumes=pod_volumes(r, str(meta.get("name") or ""), spec),
            **_pod_live(r, meta, status, claims),
        )

    def renewed(self, raw: dict[str, Any]) -> Pod | None:
        """This pod as ``raw`` has it now, ``raw`` being a later version of the very object this one
        was read from with its spec left out (the pod watch cuts out a spec it has read before):
        what metadata and status say read again (``_pod_live``), what the spec says kept. None when
        more than those changed (its name, uid, labels or annotations: the rules between pods and
        the checks read them with the spec), and the whole object must be read."""
        r, meta, (status,) = read_object(raw, "Pod", "status")
        if (meta.get("name") != self.name or (meta.get("namespace") or "default") != self.namespace
                or (meta.get("uid") or "") != self.uid or (meta.get("labels") or {}) != self.labels
                or (meta.get("annotations") or {}) != self.annotations):
            return None
        # A copy slot by slot with the live fields set, rather than ``replace``, which calls the
        # generated __init__ with every field: half the cost, on most of a running pod's events.
        # Nothing else changes, ``_key`` (from the name) included, so no field needs working out again.
        new = object.__new__(Pod)
        for slot, value in zip(_POD_SLOTS, _pod_slots(self), strict=True):
            slot.__set__(new, value)
        for name, value in _pod_live(r, meta, status, self.claims).items():
            object.__setattr__(new, name, value)
        return new


# Every field of Pod, the derived ``_key`` too, as slot descriptors and one getter (``Pod.renewed``).
_POD_FIELDS = tuple(f.name for f in fields(Pod))
_POD_SLOTS = tuple(getattr(Pod, name) for name in _POD_FIELDS)
_pod_slots = attrgetter(*_POD_FIELDS)


def _pod_live(r: Reader, meta: dict[str, Any], status: dict[str, Any], claims: tuple[PodClaim, ...]) -> dict[str, Any]:
    """What a pod's metadata (but its name, uid, labels and annotations) and status say: the fields
    that change while its spec does not (``Pod.renewed``)."""
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
                and c.get("reason") in (PREEMPTION_REASON, STALE_EVICTION_REASON):
            preempted = True  # deleted by the scheduler's decision: its room is coming free
    statuses = claim_statuses(r, status.get("resourceClaimStatuses"), "status.resourceClaimStatuses", claims)
    extended = r.mapping(status.get("extendedResourceClaimStatus"), "status.extendedResourceClaimStatus")
    return {
        "start_time": r.timestamp(status.get("startTime"), "status.startTime"),
        "deleting": meta.get("deletionTimestamp") is not None,
        "nominated_node_name": sys.intern(r.string(status.get("nominatedNodeName"), "status.nominatedNodeName")),
        "phase": sys.intern(r.string(status.get("phase"), "status.phase") or "Pending"),
        "reason": sys.intern(r.string(status.get("reason"), "status.reason")),
        "owner_references": _SHARED_OWNERS.get(owners, tuple(tuple(o.items()) for o in owners)),
        "unschedulable_message": unschedulable_message,
        "preempted": preempted,
        "claim_statuses": statuses or _NO_STATUSES,
        "extended_claim": r.string(extended.get("resourceClaimName"),
                                   "status.extendedResourceClaimStatus.resourceClaimName"),
    }


def _interned_map(values: dict[str, str]) -> dict[str, str]:
    """``values`` with its keys and values interned: one copy of each label string however many
    nodes carry it (each watch event decodes its own)."""
    return {sys.intern(k): sys.intern(v) for k, v in values.items()}


# What pods and nodes have alike, kept once (see Shared). Each table is of one field's values.
_SHARED_LABELS = Shared[dict[str, str]]()
_SHARED_ANNOTATIONS = Shared[dict[str, str]]()
_SHARED_RESOURCES = Shared[dict[str, int]]()
_SHARED_TAINTS = Shared[tuple[Taint, ...]]()
_SHARED_TOLERATIONS = Shared[tuple[Toleration, ...]]()
_SHARED_TERMS = Shared[tuple[NodeSelectorTerm, ...]]()
_SHARED_CLAIMS = Shared[tuple[PodClaim, ...]]()
_NO_STATUSES: dict[str, str] = {}  # the claim statuses of every pod without any (nobody writes to it)
_SHARED_OWNERS = Shared[tuple[dict[str, str], ...]]()
_SHARED_RULES = Shared[tuple[Any, ...]]()


# The node features kube-scheduler v1.37 infers a pod needs, each from what in its spec uses it
# (k8s.io/component-helpers/nodedeclaredfeatures); a node must list them in status.declaredFeatures.
FEATURE_RESTART_ALL = "RestartAllContainersOnContainerExits"
FEATURE_USERNS_HOST_NETWORK = "UserNamespacesHostNetworkSupport"
FEATURE_BIND_MOUNT_OPTIONS = "VolumeBindMountOptions"


def _required_features(r: Reader, spec: dict[str, Any]) -> tuple[str, ...]:
    out = []
    lists = ("containers", "initContainers", "ephemeralContainers")
    containers = [(f"spec.{name}[{i}]", r.mapping(c, f"spec.{name}[{i}]"))
                  for name in lists for i, c in enumerate(r.seq(spec.get(name), f"spec.{name}"))]
    if any(isinstance(rule, dict) and rule.get("action") == "RestartAllContainers"
           for field, c in containers if not field.startswith("spec.ephemeral")
           for rule in r.seq(c.get("restartPolicyRules"), f"{field}.restartPolicyRules")):
        out.append(FEATURE_RESTART_ALL)
    host_users = r.boolean(spec.get("hostUsers"), "spec.hostUsers", default=True)
    if r.boolean(spec.get("hostNetwork"), "spec.hostNetwork") and not host_users:
        out.append(FEATURE_USERNS_HOST_NETWORK)
    if any(isinstance(m, dict) and m.get("bindMountOptions")
           for field, c in containers for m in r.seq(c.get("volumeMounts"), f"{field}.volumeMounts")):
        out.append(FEATURE_BIND_MOUNT_OPTIONS)
    return tuple(out)


_AFFINITY = "spec.affinity"


def _pod_rules(r: Reader, spec: dict[str, Any], meta: dict[str, Any]) -> dict[str, Any]:
    """Inter-pod affinity and anti-affinity, topology spread constraints and host ports."""
    namespace = r.namespace(meta.get("namespace"))
    labels = r.str_map(meta.get("labels"), "metadata.labels")
    affinity = r.mapping(spec.get("affinity"), _AFFINITY)
    out: dict[str, Any] = {}
    for kind, name in (("podAffinity", "pod_affinity"), ("podAntiAffinity", "pod_anti_affinity")):
        field = f"{_AFFINITY}.{kind}"
        section = r.mapping(affinity.get(kind), field)
        req = f"{field}.requiredDuringSchedulingIgnoredDuringExecution"
        out[name] = tuple(_term(r, t, f"{req}[{i}]", namespace, labels)
                          for i, t in enumerate(r.seq(section.get("requiredDuringSchedulingIgnoredDuringExecution"),
                                                      req)))
        pref = f"{field}.preferredDuringSchedulingIgnoredDuringExecution"
        weighted = []
        for i, w in enumerate(r.seq(section.get("preferredDuringSchedulingIgnoredDuringExecution"), pref)):
            wm = r.mapping(w, f"{pref}[{i}]")
            weight = r.integer(wm.get("weight"), f"{pref}[{i}].weight")
            if weight is None or not 1 <= weight <= 100:
                raise r.fail(f"{pref}[{i}].weight", f"must be in the range 1-100, got {weight}")
            term = _term(r, wm.get("podAffinityTerm"), f"{pref}[{i}].podAffinityTerm", namespace, labels)
            weighted.append(term.model_copy(update={"weight": weight}))
        out["preferred_" + name[4:]] = tuple(weighted)
    spread = []
    for i, c in enumerate(r.seq(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")):
        spread.append(_spread(r, c, f"spec.topologySpreadConstraints[{i}]", labels))
    out["spread"] = tuple(spread)
    out["host_ports"] = _host_ports(r, spec)
    # A gang's pods state the same rules: one tuple of each for all of them, so that what tells
    # kinds of pods apart by their rules (``PodRules.interplay``) compares them by identity.
    return {k: _SHARED_RULES.get(v) if v else v for k, v in out.items()}


def _selector(r: Reader, raw: Any, field: str) -> PodSelector:
    if raw is None:
        return PodSelector(nothing=True)
    sel = LabelSelector.from_raw(r, raw, field)
    reqs = [SelectorRequirement(key=k, operator="In", values=(v,)) for k, v in sorted(sel.match_labels.items())]
    return PodSelector(requirements=(*reqs, *sel.match_expressions))


def _label_keys(r: Reader, raw: Any, field: str) -> tuple[str, ...]:
    return tuple(r.string(k, f"{field}[{i}]", required=True) for i, k in enumerate(r.seq(raw, field)))


def _merge_label_keys(selector: PodSelector, labels: dict[str, str], match: tuple[str, ...],
                      mismatch: tuple[str, ...]) -> PodSelector:
    """``matchLabelKeys`` / ``mismatchLabelKeys``: the pod's own value of each key joins the selector
    (``In`` / ``NotIn``); a key the pod lacks is ignored. The API server merges them the same way at
    creation, so merging again changes nothing."""
    if selector.nothing:
        return selector
    extra = [SelectorRequirement(key=k, operator="In", values=(labels[k],)) for k in match if k in labels]
    extra += [SelectorRequirement(key=k, operator="NotIn", values=(labels[k],)) for k in mismatch if k in labels]
    merged = tuple(dict.fromkeys((*selector.requirements, *extra)))
    return PodSelector(requirements=merged)


def _term(r: Reader, raw: Any, field: str, namespace: str, labels: dict[str, str]) -> PodAffinityTerm:
    t = r.mapping(raw, field)
    key = r.string(t.get("topologyKey"), f"{field}.topologyKey")
    if not key:
        raise r.fail(f"{field}.topologyKey", "must not be empty")
    selector = _selector(r, t.get("labelSelector"), f"{field}.labelSelector")
    match = _label_keys(r, t.get("matchLabelKeys"), f"{field}.matchLabelKeys")
    mismatch = _label_keys(r, t.get("mismatchLabelKeys"), f"{field}.mismatchLabelKeys")
    if set(match) & set(mismatch):
        raise r.fail(f"{field}.mismatchLabelKeys", "must not share a key with matchLabelKeys")
    namespaces = tuple(r.string(n, f"{field}.namespaces[{i}]", required=True)
                       for i, n in enumerate(r.seq(t.get("namespaces"), f"{field}.namespaces")))
    ns_raw = t.get("namespaceSelector")
    ns_selector = None if ns_raw is None else _selector(r, ns_raw, f"{field}.namespaceSelector")
    if not namespaces and ns_selector is None:
        namespaces = (namespace,)
    return PodAffinityTerm(selector=_merge_label_keys(selector, labels, match, mismatch), namespaces=namespaces,
                           namespace_selector=ns_selector, topology_key=key)


def _spread(r: Reader, raw: Any, field: str, labels: dict[str, str]) -> SpreadConstraint:
    c = r.mapping(raw, field)
    skew = r.integer(c.get("maxSkew"), f"{field}.maxSkew")
    if skew is None or skew <= 0:
        raise r.fail(f"{field}.maxSkew", f"must be greater than zero, got {skew}")
    key = r.string(c.get("topologyKey"), f"{field}.topologyKey", required=True)
    when = r.string(c.get("whenUnsatisfiable"), f"{field}.whenUnsatisfiable", required=True)
    if when not in ("DoNotSchedule", "ScheduleAnyway"):
        raise r.fail(f"{field}.whenUnsatisfiable", f"must be DoNotSchedule or ScheduleAnyway, got {when!r}")
    min_domains = r.integer(c.get("minDomains"), f"{field}.minDomains")
    if min_domains is not None and min_domains <= 0:
        raise r.fail(f"{field}.minDomains", f"must be greater than zero, got {min_domains}")
    if min_domains is not None and when != "DoNotSchedule":
        raise r.fail(f"{field}.minDomains", "may only be set with whenUnsatisfiable: DoNotSchedule")
    policies = {}
    for name, default in (("nodeAffinityPolicy", "Honor"), ("nodeTaintsPolicy", "Ignore")):
        value = r.string(c.get(name), f"{field}.{name}") or default
        if value not in ("Honor", "Ignore"):
            raise r.fail(f"{field}.{name}", f"must be Honor or Ignore, got {value!r}")
        policies[name] = value == "Honor"
    selector = _selector(r, c.get("labelSelector"), f"{field}.labelSelector")
    match = _label_keys(r, c.get("matchLabelKeys"), f"{field}.matchLabelKeys")
    return SpreadConstraint(max_skew=skew, topology_key=key, hard=when == "DoNotSchedule",
                            selector=_merge_label_keys(selector, labels, match, ()), min_domains=min_domains,
                            honor_node_affinity=policies["nodeAffinityPolicy"],
                            honor_node_taints=policies["nodeTaintsPolicy"])


def _host_ports(r: Reader, spec: dict[str, Any]) -> tuple[HostPort, ...]:
    """The host ports the pod takes on its node: each container's, and each sidecar's (an init
    container with restartPolicy Always runs beside them); with hostNetwork a container port is a
    host port (the API server defaults hostPort to it)."""
    host_network = r.boolean(spec.get("hostNetwork"), "spec.hostNetwork")
    out: dict[tuple[str, int, str], HostPort] = {}
    for section in ("containers", "initContainers"):
        for i, c in enumerate(r.seq(spec.get(section), f"spec.{section}")):
            cm = r.mapping(c, f"spec.{section}[{i}]")
            if section == "initContainers" and cm.get("restartPolicy") != "Always":
                continue
            for j, port in enumerate(r.seq(cm.get("ports"), f"spec.{section}[{i}].ports")):
                f = f"spec.{section}[{i}].ports[{j}]"
                pm = r.mapping(port, f)
                host = r.integer(pm.get("hostPort"), f"{f}.hostPort") or 0
                if not host and host_network:
                    host = r.integer(pm.get("containerPort"), f"{f}.containerPort") or 0
                if host <= 0:
                    continue
                if host > 65535:
                    raise r.fail(f"{f}.hostPort", f"must be between 1 and 65535, got {host}")
                proto = r.string(pm.get("protocol"), f"{f}.protocol") or "TCP"
                if proto not in ("TCP", "UDP", "SCTP"):
                    raise r.fail(f"{f}.protocol", f"must be TCP, UDP or SCTP, got {proto!r}")
                ip = r.string(pm.get("hostIP"), f"{f}.hostIP") or "0.0.0.0"
                out.setdefault((proto, host, ip), HostPort(protocol=proto, port=host, ip=ip))
    return tuple(out.values())


def _container_requests(r: Reader, c: dict[str, Any], field: str) -> dict[str, int]:
    res = r.mapping(c.get("resources"), f"{field}.resources")
    # The API server defaults a missing request to its limit, so a limits-only container asks for its limits.
    return {**r.resources(res.get("limits"), f"{field}.resources.limits"),
            **r.resources(res.get("requests"), f"{field}.resources.requests")}


def _maybe_dra(resource: str) -> bool:
    """A resource a DeviceClass may back: an extended resource or a class's implicit name."""
    return is_extended_resource(resource) or resource.startswith(EXTENDED_CLASS_PREFIX)


def _extended_requests(r: Reader, spec: dict[str, Any]) -> tuple[ContainerExtended, ...]:
    out: list[ContainerExtended] = []
    inits = r.seq(spec.get("initContainers"), "spec.initContainers")
    listed = [("initContainers", i, c) for i, c in enumerate(inits)] + \
        [("containers", i, c) for i, c in enumerate(r.seq(spec.get("containers"), "spec.containers"))]
    for index, (section, i, c) in enumerate(listed):
        cm = r.mapping(c, f"spec.{section}[{i}]")
        own = _container_requests(r, cm, f"spec.{section}[{i}]")
        names = sorted(own)
        found = tuple((name, own[name], names.index(name)) for name in names if _maybe_dra(name) and own[name] > 0)
        if found:
            out.append(ContainerExtended(r.string(cm.get("name"), f"spec.{section}[{i}].name"), index,
                                         section == "initContainers" and cm.get("restartPolicy") != "Always", found))
    return tuple(out)


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
    pod_requests = r.resources(pod_res.get("requests"), "spec.resources.requests")
    pod_limits = r.resources(pod_res.get("limits"), "spec.resources.limits")
    for section, values in (("requests", pod_requests), ("limits", pod_limits)):
        for name in values:
            if not _pod_level_resource(name):
                raise r.fail(f"spec.resources.{section}.{name}",
                             "pod-level resources support only cpu, memory and hugepages-<size>")
    for name, v in pod_limits.items():
        if name not in pod_requests and not (name in total and not name.startswith("hugepages-")):
            pod_requests[name] = v
    total.update(pod_requests)
    _add(total, r.resources(spec.get("overhead"), "spec.overhead"))
    total[PODS] = 1
    return {k: v for k, v in total.items() if v > 0}


class PriorityClass(_Model):
    name: str
    value: int
    global_default: bool = False
    preemption_policy: str = "PreemptLowerPriority"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> PriorityClass:
        r, meta, _ = read_object(raw, "PriorityClass")
        value = r.integer(raw.get("value"), "value")
        if value is None:
            raise r.fail("value", "is required")
        policy = raw.get("preemptionPolicy") or "PreemptLowerPriority"
        if policy not in ("Never", "PreemptLowerPriority"):
            raise r.fail("preemptionPolicy", f"must be Never or PreemptLowerPriority, got {policy!r}")
        return cls(name=r.name(meta.get("name")), value=value,
                   global_default=r.boolean(raw.get("globalDefault"), "globalDefault"), preemption_policy=policy)


# The label the API server puts on every Namespace, its own name as value (and which it will not let
# anyone change): what a namespaceSelector matches a namespace by name with.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


class Namespace(_Model):
    """A Namespace's name and labels, which inter-pod affinity's ``namespaceSelector`` reads."""

    name: str
    labels: dict[str, str] = {}

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Namespace:
        r, meta, _ = read_object(raw, "Namespace")
        text = r.string(meta.get("name"), "metadata.name", required=True)
        problem = label_problem(text)
        if problem:
            raise r.fail("metadata.name", problem)
        labels = r.str_map(meta.get("labels"), "metadata.labels")
        # A manifest written by hand lacks the label; the API server would have added it.
        return cls(name=text, labels={**labels, NAMESPACE_NAME_LABEL: text})


def node_selector_terms(r: Reader, raw: Any, field: str) -> tuple[NodeSelectorTerm, ...]:
    """A ``nodeSelectorTerms`` list (a PersistentVolume's node affinity, say), checked like a pod's."""
    out = []
    for i, t in enumerate(r.seq(raw, field)):
        tm = r.mapping(t, f"{field}[{i}]")
        out.append(NodeSelectorTerm(
            match_expressions=_requirements(r, tm.get("matchExpressions"), f"{field}[{i}].matchExpressions"),
            match_fields=_requirements(r, tm.get("matchFields"), f"{field}[{i}].matchFields")))
    return tuple(out)
