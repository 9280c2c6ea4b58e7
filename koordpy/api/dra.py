"""Dynamic Resource Allocation's kinds (``resource.k8s.io/v1``) as koordpy sees them: DeviceClass,
ResourceSlice, ResourceClaim, ResourceClaimTemplate and DeviceTaintRule, and ``Devices``, all of
them together in a snapshot.

Belongs here: the records and their parsing (with the Reader, held to what the API server accepts:
a file ``simulate`` takes is one ``kubectl apply`` would take), and the plain facts one object
answers (a claim's consumers, whether it is allocated). Not here: which devices a claim gets (the
allocator, ``koordpy.devices``), CEL (``koordpy.devices.cel``), the rules that combine claims with
pods and nodes (the core's device seam).

Quantities (capacities, counters, capacity requests) are exact ``Fraction`` values, as the API's
``resource.Quantity`` is exact; ``text`` keeps how the object spelled them where it is written back.
An attribute value is an ``int``, ``bool``, ``str``, ``SemVer`` or a tuple of one of them (the
list-valued attributes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from koordpy.api.objects import NodeSelectorTerm

DRIVER_DOMAIN_MAX = 63  # a driver name is a DNS subdomain of at most 63 characters
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize: consumers one claim may have
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"  # the finalizer kube-scheduler adds
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"  # the annotation on a claim made from a template
EXTENDED_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # the implicit extended resource of a class

TaintEffect = Literal["NoSchedule", "NoExecute", "None"]
AllocationMode = Literal["ExactCount", "All"]


@dataclass(frozen=True, slots=True, order=True)
class SemVer:
    """A ``version`` attribute: a semantic version (compared by precedence, not as text)."""

    text: str


AttrValue = int | bool | str | SemVer | tuple[int, ...] | tuple[bool, ...] | tuple[str, ...] | tuple[SemVer, ...]


@dataclass(frozen=True, slots=True)
class Quantity:
    """An exact quantity and how it was written."""

    value: Fraction
    text: str


# -- slices ----------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class NodeSelection:
    """Where a slice's (or, with perDeviceNodeSelection, a device's) devices can be used: exactly one
    of a node's name, a node selector (ORed terms) or every node."""

    node_name: str = ""
    node_selector: tuple[NodeSelectorTerm, ...] | None = None
    all_nodes: bool = False


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: TaintEffect = "NoSchedule"
    time_added: float | None = None


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """``requestPolicy`` of a consumable capacity: what one allocation may consume of it."""

    default: Quantity | None = None
    valid_values: tuple[Quantity, ...] = ()
    valid_min: Quantity | None = None
    valid_max: Quantity | None = None
    valid_step: Quantity | None = None


@dataclass(frozen=True, slots=True)
class Capacity:
    value: Quantity
    policy: CapacityPolicy | None = None


@dataclass(frozen=True, slots=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    # Qualified names as written ("model" or "gpu.example.com/model"); an unqualified name belongs to
    # the slice's driver's domain.
    attributes: Mapping[str, AttrValue] = field(default_factory=dict)
    capacity: Mapping[str, Capacity] = field(default_factory=dict)
    consumes_counters: tuple[CounterConsumption, ...] = ()
    node: NodeSelection | None = None  # with the slice's perDeviceNodeSelection
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int  # spec.pool.resourceSliceCount
    node: NodeSelection | None  # None: perDeviceNodeSelection (each device says)
    devices: tuple[Device, ...] = ()
    shared_counters: tuple[CounterSet, ...] = ()
    uid: str = ""

    @property
    def key(self) -> str:
        return self.name


# -- classes, claims, templates, taint rules -------------------------------------------------------

@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    """A configuration for the driver, passed through to the allocation: ``parameters`` as JSON text."""

    driver: str
    parameters: str
    requests: tuple[str, ...] = ()  # a claim's config names the requests it applies to (none: all)


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()  # CEL expressions, ANDed
    config: tuple[OpaqueConfig, ...] = ()
    extended_resource_name: str = ""  # spec.extendedResourceName ("" none)
    uid: str = ""

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = ""
    effect: TaintEffect | Literal[""] = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == taint.value


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """``exactly`` of a request, or one ``firstAvailable`` sub-request (``name`` set then)."""

    device_class: str
    selectors: tuple[str, ...] = ()
    mode: AllocationMode = "ExactCount"
    count: int = 1
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: Mapping[str, Quantity] = field(default_factory=dict)  # capacity.requests
    name: str = ""  # a sub-request's name


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    name: str
    exactly: ExactRequest | None = None
    first_available: tuple[ExactRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceConstraint:
    requests: tuple[str, ...] = ()  # none: every request of the claim
    match_attribute: str = ""
    distinct_attribute: str = ""


@dataclass(frozen=True, slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    constraints: tuple[DeviceConstraint, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One allocated device (``status.allocation.devices.results[]``)."""

    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    share_id: str = ""
    consumed_capacity: Mapping[str, Quantity] = field(default_factory=dict)

    @property
    def device_id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


@dataclass(frozen=True, slots=True)
class AllocatedConfig:
    source: Literal["FromClass", "FromClaim"]
    config: OpaqueConfig


@dataclass(frozen=True, slots=True)
class Allocation:
    results: tuple[DeviceResult, ...] = ()
    config: tuple[AllocatedConfig, ...] = ()
    node_selector: tuple[NodeSelectorTerm, ...] | None = None  # None: usable on every node
    timestamp: float | None = None


@dataclass(frozen=True, slots=True)
class Consumer:
    """An entry of ``status.reservedFor``."""

    resource: str  # "pods", or "podgroups" (group scheduling.k8s.io)
    name: str
    uid: str
    api_group: str = ""


@dataclass(frozen=True, slots=True)
class DeviceCondition:
    """A condition a driver set on an allocated device (``status.devices[].conditions[]``)."""

    driver: str
    pool: str
    device: str
    type: str
    status: str


@dataclass(frozen=True, slots=True)
class ResourceClaim:
    namespace: str
    name: str
    uid: str = ""
    spec: ClaimSpec = field(default_factory=ClaimSpec)
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()
    device_conditions: tuple[DeviceCondition, ...] = ()
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    # The controller owner (kind, name, uid): a pod for a claim made from a template or for
    # extended resources, a PodGroup for a PodGroup's claim.
    owner: tuple[str, str, str] | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    creation: float | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec = field(default_factory=ClaimSpec)
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    name: str
    driver: str = ""  # "" any
    pool: str = ""
    device: str = ""
    taint: DeviceTaint = field(default_factory=lambda: DeviceTaint(key=""))

    @property
    def key(self) -> str:
        return self.name


# -- what pods and PodGroups ask for ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class PodClaim:
    """An entry of a pod's (or a Workload PodGroup's) ``spec.resourceClaims``: exactly one of a claim's
    name or a template's name."""

    name: str
    claim: str = ""  # resourceClaimName
    template: str = ""  # resourceClaimTemplateName


# -- a snapshot's DRA objects ----------------------------------------------------------------------

@dataclass
class Devices:
    """Every DRA object of a snapshot. The shells hand back the same objects for what did not change,
    so the core tells a change by identity (``changed_from``)."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[str, ResourceClaim] = field(default_factory=dict)  # namespace/name
    templates: dict[str, ResourceClaimTemplate] = field(default_factory=dict)  # namespace/name
    taint_rules: dict[str, DeviceTaintRule] = field(default_factory=dict)
    # Objects that do not parse: "<Kind> <key>" -> why; a pod that names one waits, saying so.
    invalid: dict[str, str] = field(default_factory=dict)

    def copy(self) -> Devices:
        return Devices(dict(self.classes), dict(self.slices), dict(self.claims), dict(self.templates),
                       dict(self.taint_rules), dict(self.invalid))

    def changed_from(self, other: Devices) -> bool:
        return self.invalid != other.invalid or any(
            not _same(a, b) for a, b in ((self.classes, other.classes), (self.slices, other.slices),
                                         (self.claims, other.claims), (self.templates, other.templates),
                                         (self.taint_rules, other.taint_rules)))

    def empty(self) -> bool:
        return not (self.classes or self.slices or self.claims or self.templates or self.taint_rules
                    or self.invalid)


def _same(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    return a.keys() == b.keys() and all(v is b[k] or v == b[k] for k, v in a.items())
