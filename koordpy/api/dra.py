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

Feature gates. kube-apiserver v1.37.2 serves a field of a gated feature only with its gate on; a
file may set it anyway, and a cluster may turn an alpha gate on. A field of a feature still **alpha**
in v1.37.2 is parsed (where the records have room for it) and its path recorded in the record's
``alpha_fields`` (``spec.devices.requests[0].exactly.derivedAttributes``), so the core refuses the pod
that needs the object, naming the field, rather than honour half of it. The DRA gates in v1.37.2
(``pkg/features/kube_features.go``):

====================================  =========================  ======================================
gate                                  stage in v1.37.2           fields
====================================  =========================  ======================================
DRAPrioritizedList                    GA (locked on)             requests' ``firstAvailable``
DRAAdminAccess                        GA (locked on)             ``adminAccess``
DRADeviceTaints                       GA (on)                    devices' ``taints``, ``tolerations``
DRADeviceTaintRules                   GA (on)                    the DeviceTaintRule kind
DRAExtendedResource                   GA (locked on)             DeviceClass ``extendedResourceName``
DRAResourceClaimDeviceStatus          GA (locked on)             claims' ``status.devices``
DRAPartitionableDevices               beta (on)                  ``sharedCounters``, ``consumesCounters``,
                                                                 ``perDeviceNodeSelection``
DRAConsumableCapacity                 beta (on)                  ``allowMultipleAllocations``,
                                                                 ``requestPolicy``, ``capacity.requests``,
                                                                 ``distinctAttribute``, ``shareID``
DRAFractionalCapacityRange            beta (off by default)      ``validRange`` arithmetic in milli units
                                                                 (off: whole numbers)
DRADeviceBindingConditions            beta (on)                  ``bindsToNode``, ``bindingConditions``,
                                                                 ``bindingFailureConditions``
DRASchedulerFilterTimeout             beta (on)                  (the scheduler's filter timeout)
DRAResourceClaimGranularStatusAuth..  beta (on)                  (``resourceclaims/binding`` RBAC)
DRAWorkloadResourceClaims             beta (off)                 PodGroups' ``resourceClaims``
DRAListTypeAttributes                 alpha                      attributes' ``ints``, ``bools``,
                                                                 ``strings``, ``versions``
DRADerivedAttributes                  alpha                      requests' ``derivedAttributes``
DRADeviceCompatibilityGroups          alpha                      ``consumesCounters[].compatibilityGroups``
DRANodeAllocatableResources           alpha                      devices' ``nodeAllocatableResources``
DRAOptionalNodeOperations             alpha                      ``skipNodeOperations`` (slices, results)
DRAPartitionableDevicesType           alpha                      slices' ``partitionTypeAttribute``
DRAResourcePoolStatus                 alpha                      (ResourcePoolStatusRequest, not read)
====================================  =========================  ======================================
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal, Self

from koordpy.api.objects import EXTENDED_CLASS_PREFIX as EXTENDED_CLASS_PREFIX  # a class's implicit resource
from koordpy.api.objects import NodeSelectorTerm, node_selector_terms
from koordpy.api.objects import PodClaim as PodClaim  # a pod's entry; the Pod reads it, the vocabulary is here
from koordpy.api.quantity import exact_quantity, is_extended_resource
from koordpy.api.raw import Reader, label_problem, read_object, subdomain_problem
from koordpy.api.selectors import label_value_problem, qualified_name_problem

DRIVER_DOMAIN_MAX = 63  # a driver name is a DNS subdomain of at most 63 characters
RESERVED_FOR_MAX = 256  # ResourceClaimReservedForMaxSize: consumers one claim may have
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"  # the finalizer kube-scheduler adds
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"  # the annotation on a claim made from a template
# The annotation ("true") on the claim kube-scheduler makes for a pod's DRA-backed extended resources.
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"
# DRAFractionalCapacityRange, beta in v1.37.2 but on by default only from --min-compatibility-version
# 1.37: off in a control plane started without flags. Fractional request-policy bounds are kept,
# and both the API server's checks and the allocator's rounding are in whole numbers (each quantity
# rounded up, as Quantity.Value() reads it).
FRACTIONAL_CAPACITY_RANGE = False
INT64_MAX = 2**63 - 1

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
    alpha_fields: tuple[str, ...] = ()  # fields of features alpha in v1.37.2 it sets (module docstring)

    @property
    def key(self) -> str:
        return self.name

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Self:
        r, meta, (spec,) = read_object(raw, "ResourceSlice", "spec")
        name = r.name(meta.get("name"))
        driver = _driver(r, spec.get("driver"), "spec.driver")
        pool = r.mapping(spec.get("pool"), "spec.pool")
        if not pool:
            raise r.fail("spec.pool", "is required")
        pool_name = _pool_name(r, pool.get("name"), "spec.pool.name")
        generation = r.integer(pool.get("generation"), "spec.pool.generation", default=0, bits=64, minimum=0) or 0
        count = r.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", default=0, bits=64) or 0
        if count <= 0:
            raise r.fail("spec.pool.resourceSliceCount", f"must be greater than zero, got {count}")
        node = _node_selection(r, spec, "spec", of_slice=True)
        raw_devices, raw_sets = r.seq(spec.get("devices"), "spec.devices"), r.seq(spec.get("sharedCounters"),
                                                                                   "spec.sharedCounters")
        if raw_devices and raw_sets:
            raise r.fail("spec", "only one of `sharedCounters` or `devices` is allowed")
        alpha: list[str] = []
        for f in ("partitionTypeAttribute", "skipNodeOperations"):
            if spec.get(f):
                alpha.append(f"spec.{f}")
        devices, advanced = [], False
        _at_most(r, raw_devices, SLICE_DEVICES_MAX, "spec.devices")  # before parsing a hostile 10,000
        for i, d in enumerate(raw_devices):
            device, uses = _device(r, d, f"spec.devices[{i}]", node is None, alpha)
            devices.append(device)
            advanced = advanced or uses
        limit = SLICE_DEVICES_MAX_ADVANCED if advanced else SLICE_DEVICES_MAX
        _at_most(r, devices, limit, "spec.devices")
        _unique(r, [d.name for d in devices], "spec.devices")
        sets = []
        for i, c in enumerate(_at_most(r, raw_sets, COUNTER_SETS_MAX, "spec.sharedCounters")):
            cm = r.mapping(c, f"spec.sharedCounters[{i}]")
            sets.append(CounterSet(_label(r, cm.get("name"), f"spec.sharedCounters[{i}].name"),
                                   _counters(r, cm.get("counters"), f"spec.sharedCounters[{i}].counters")))
        _unique(r, [c.name for c in sets], "spec.sharedCounters")
        return cls(name=name, driver=driver, pool=pool_name, generation=generation, slice_count=count, node=node,
                   devices=tuple(devices), shared_counters=tuple(sets), uid=r.string(meta.get("uid"), "metadata.uid"),
                   alpha_fields=tuple(alpha))


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
    creation: float | None = None  # of two classes naming one extended resource, the newer serves it
    alpha_fields: tuple[str, ...] = ()  # none in v1.37.2; kept for the same question of every kind

    @property
    def key(self) -> str:
        return self.name

    @property
    def extended_resources(self) -> tuple[str, ...]:
        """The extended resources a pod may ask this class for: ``spec.extendedResourceName`` if set,
        and always the implicit ``deviceclass.resource.kubernetes.io/<class>``."""
        implicit = EXTENDED_CLASS_PREFIX + self.name
        return (self.extended_resource_name, implicit) if self.extended_resource_name else (implicit,)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Self:
        r, meta, (spec,) = read_object(raw, "DeviceClass", "spec")
        name = r.name(meta.get("name"))
        config = tuple(_opaque(r, c, f"spec.config[{i}]") for i, c in enumerate(
            _at_most(r, r.seq(spec.get("config"), "spec.config"), CONFIG_MAX, "spec.config")))
        extended = r.string(spec.get("extendedResourceName"), "spec.extendedResourceName")
        if spec.get("extendedResourceName") is not None and not _extended_name_ok(extended):
            raise r.fail("spec.extendedResourceName", f"{extended!r} must be a valid extended resource name (a "
                                                      "domain outside kubernetes.io and a name, like example.com/gpu)")
        return cls(name=name, selectors=_selectors(r, spec.get("selectors"), "spec.selectors"), config=config,
                   extended_resource_name=extended, uid=r.string(meta.get("uid"), "metadata.uid"),
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))


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
class ClaimGroup:
    """A group a member's claims may be reserved for instead of the member (a Workload PodGroup,
    KEP-5729's DRAWorkloadResourceClaims), as the device rules read it: its uid, its own
    ``spec.resourceClaims`` entries, and (entry name, claim) for each claim made from one of its
    templates (its ``status.resourceClaimStatuses``; "" none needed)."""

    uid: str
    claims: tuple[PodClaim, ...]
    statuses: tuple[tuple[str, str], ...] = ()


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
    alpha_fields: tuple[str, ...] = ()  # fields of features alpha in v1.37.2 it sets (module docstring)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Self:
        r, meta, (spec, status) = read_object(raw, "ResourceClaim", "spec", "status")
        alpha: list[str] = []
        claim_spec = _claim_spec(r, spec, "spec", alpha)
        allocation = _allocation(r, status["allocation"], "status.allocation", alpha) \
            if status.get("allocation") is not None else None
        return cls(namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
                   uid=r.string(meta.get("uid"), "metadata.uid"), spec=claim_spec, allocation=allocation,
                   reserved_for=_consumers(r, status.get("reservedFor"), "status.reservedFor"),
                   device_conditions=_device_conditions(r, status.get("devices"), "status.devices"),
                   finalizers=tuple(r.string(f, f"metadata.finalizers[{i}]", required=True)
                                    for i, f in enumerate(r.seq(meta.get("finalizers"), "metadata.finalizers"))),
                   deleting=meta.get("deletionTimestamp") is not None, owner=_owner(r, meta),
                   annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
                   alpha_fields=tuple(alpha))


@dataclass(frozen=True, slots=True)
class ResourceClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec = field(default_factory=ClaimSpec)
    labels: Mapping[str, str] = field(default_factory=dict)  # spec.metadata's: the claims made from it get them
    annotations: Mapping[str, str] = field(default_factory=dict)
    alpha_fields: tuple[str, ...] = ()  # fields of features alpha in v1.37.2 it sets (module docstring)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Self:
        r, meta, (spec,) = read_object(raw, "ResourceClaimTemplate", "spec")
        template_meta = r.mapping(spec.get("metadata"), "spec.metadata")
        alpha: list[str] = []
        return cls(namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
                   spec=_claim_spec(r, spec.get("spec"), "spec.spec", alpha),
                   labels=r.str_map(template_meta.get("labels"), "spec.metadata.labels"),
                   annotations=r.str_map(template_meta.get("annotations"), "spec.metadata.annotations"),
                   alpha_fields=tuple(alpha))


@dataclass(frozen=True, slots=True)
class DeviceTaintRule:
    name: str
    driver: str = ""  # "" any
    pool: str = ""
    device: str = ""
    taint: DeviceTaint = field(default_factory=lambda: DeviceTaint(key=""))
    alpha_fields: tuple[str, ...] = ()  # none in v1.37.2 (the rule's own gate is GA)
    # spec.deviceSelector given at all: a rule without one selects no device (an empty one, every device),
    # as the ResourceSlice tracker that applies the rules for kube-scheduler reads it.
    has_selector: bool = True

    @property
    def key(self) -> str:
        return self.name

    def selects(self, driver: str, pool: str, device: str) -> bool:
        """Whether the rule's device selector (each field set must match) picks this device."""
        return self.has_selector and (not self.driver or self.driver == driver) and (
            not self.pool or self.pool == pool) and (not self.device or self.device == device)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Self:
        r, meta, (spec,) = read_object(raw, "DeviceTaintRule", "spec")
        name = r.name(meta.get("name"))
        selector = r.mapping(spec.get("deviceSelector"), "spec.deviceSelector")
        at = "spec.deviceSelector"
        driver = _driver(r, selector["driver"], f"{at}.driver") if selector.get("driver") is not None else ""
        pool = _pool_name(r, selector["pool"], f"{at}.pool") if selector.get("pool") is not None else ""
        device = _label(r, selector["device"], f"{at}.device") if selector.get("device") is not None else ""
        if spec.get("taint") is None:
            raise r.fail("spec.taint", "is required")
        # The API server stamps timeAdded when absent; a file without it means "now", which the
        # allocator reads as not yet expired.
        return cls(name=name, driver=driver, pool=pool, device=device, taint=_taint(r, spec["taint"], "spec.taint"),
                   has_selector=spec.get("deviceSelector") is not None)


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


# -- parsing ---------------------------------------------------------------------------------------
# Held to kube-apiserver v1.37.2's validation of resource.k8s.io (pkg/apis/resource/validation): the
# limits below are its constants, the messages say what it would refuse.

REQUESTS_MAX = 32  # DeviceRequestsMaxSize, AllocationResultsMaxSize
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
SELECTORS_MAX = 32
SUBREQUESTS_MAX = 8  # FirstAvailableDeviceRequestMaxSize
TOLERATIONS_MAX = 16
TAINTS_MAX = 16
SLICE_DEVICES_MAX = 128
SLICE_DEVICES_MAX_ADVANCED = 64  # with taints, counters consumed or list attributes
COUNTER_SETS_MAX = 8
COUNTERS_MAX = 32  # per counter set, and per device's consumption of one
CONSUMPTIONS_MAX = 2  # counter sets one device draws on
ATTRIBUTES_AND_CAPACITIES_MAX = 32
ATTRIBUTE_VALUES_MAX = 48
ATTRIBUTE_VALUE_LENGTH = 64
ID_LENGTH = 32  # the name part of a qualified name: a C identifier
CEL_LENGTH = 10 * 1024
OPAQUE_LENGTH = 10 * 1024
BINDING_CONDITIONS_MAX = 4
VALID_VALUES_MAX = 10
POOL_NAME_LENGTH = 253
TAINT_EFFECTS = ("NoSchedule", "NoExecute", "None")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# semver.org 2.0.0, as blang/semver (which the API server's version attribute check uses) reads it.
_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_LIST_ATTRIBUTES = {"ints": "int", "bools": "bool", "strings": "string", "versions": "version"}


def _extended_name_ok(name: str) -> bool:
    """The API server's extended resource name: a domain outside kubernetes.io, a name, and the
    whole a valid label key once prefixed with ``requests.`` (it is used in quotas)."""
    return is_extended_resource(name) and not name.startswith("requests.") and \
        qualified_name_problem("requests." + name) is None


def _check(r: Reader, problem: str | None, path: str) -> None:
    if problem:
        raise r.fail(path, problem)


def _at_most(r: Reader, items: list[Any], limit: int, path: str) -> list[Any]:
    if len(items) > limit:
        raise r.fail(path, f"must have at most {limit} items, got {len(items)}")
    return items


def _unique(r: Reader, names: list[str], path: str) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            raise r.fail(f"{path}[{i}]", f"duplicate value {n!r}")
        seen.add(n)


def _label(r: Reader, value: Any, path: str) -> str:
    """A required DNS label: a device's, a request's, a counter's or a counter set's name."""
    text = r.string(value, path, required=True)
    _check(r, label_problem(text), path)
    return text


def _subdomain(r: Reader, value: Any, path: str) -> str:
    text = r.string(value, path, required=True)
    _check(r, subdomain_problem(text), path)
    return text


def driver_problem(name: str) -> str | None:
    """Why ``name`` is no driver name (a CSI driver's rules: at most 63 characters, a DNS subdomain
    once lowercased), or None."""
    if len(name) > DRIVER_DOMAIN_MAX:
        return f"must be no more than {DRIVER_DOMAIN_MAX} characters, got {len(name)}"
    return subdomain_problem(name.lower())


def _driver(r: Reader, value: Any, path: str) -> str:
    text = r.string(value, path, required=True)
    _check(r, driver_problem(text), path)
    return text


def _identifier_problem(name: str) -> str | None:
    if len(name) > ID_LENGTH:
        return f"{name!r} must be no more than {ID_LENGTH} characters"
    if not _C_IDENTIFIER.fullmatch(name):
        return f"{name!r} must be a C identifier: letters, digits and '_', not starting with a digit"
    return None


def qualified_problem(name: str, *, fully: bool = False) -> str | None:
    """Why ``name`` is no attribute or capacity name (``[domain/]identifier``), or None; ``fully``:
    the domain is required (a constraint's attribute)."""
    domain, slash, ident = name.partition("/")
    if not slash:
        if fully:
            return f"{name!r}: a fully qualified name must be a domain and a name separated by a slash"
        return _identifier_problem(name)
    if not domain:
        return f"{name!r}: the domain must not be empty"
    if not ident:
        return f"{name!r}: the name must not be empty"
    problem = driver_problem(domain)
    if problem:
        return f"domain of {name!r}: {problem}"
    # The API server does not refuse a second '/' (a known gap); the name part after the first is
    # checked as it checks it.
    return _identifier_problem(ident)


def _qualified(r: Reader, value: Any, path: str, *, fully: bool = False) -> str:
    text = r.string(value, path, required=True)
    _check(r, qualified_problem(text, fully=fully), path)
    return text


def _quantity(r: Reader, value: Any, path: str, *, nonnegative: bool = False) -> Quantity:
    if value is None:
        raise r.fail(path, "is required")
    try:
        # A pool repeats a handful of quantities on every device.
        exact = _cached_exact(value) if isinstance(value, str) else exact_quantity(value)
    except ValueError as exc:
        raise r.fail(path, str(exc)) from exc
    if nonnegative and exact < 0:
        raise r.fail(path, f"must not be negative, got {value!r}")
    return Quantity(exact, value if isinstance(value, str) else str(value))


@lru_cache(maxsize=4096)
def _cached_exact(text: str) -> Fraction:
    return exact_quantity(text)


def _quantities(r: Reader, raw: Any, path: str, key: Any, limit: int = -1, *,
                nonnegative: bool = False) -> dict[str, Quantity]:
    m = r.mapping(raw, path)
    if 0 <= limit < len(m):
        raise r.fail(path, f"must have at most {limit} entries, got {len(m)}")
    out = {}
    for k, v in m.items():
        name = key(r, k, f"{path}[{k}]")
        out[name] = _quantity(r, v, f"{path}[{k}]", nonnegative=nonnegative)
    return out


def _counters(r: Reader, raw: Any, path: str) -> dict[str, Quantity]:
    """A map of counter name -> ``{value: quantity}`` (a counter set's, or a device's consumption)."""
    m = r.mapping(raw, path)
    if not m:
        raise r.fail(path, "is required")
    if len(m) > COUNTERS_MAX:
        raise r.fail(path, f"must have at most {COUNTERS_MAX} entries, got {len(m)}")
    return {_label(r, k, f"{path}[{k}]"): _quantity(r, r.mapping(v, f"{path}[{k}]").get("value"), f"{path}[{k}].value")
            for k, v in m.items()}


def _node_selector(r: Reader, raw: Any, path: str, *, one_term: bool) -> tuple[NodeSelectorTerm, ...]:
    terms = node_selector_terms(r, r.mapping(raw, path).get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")
    if not terms:
        raise r.fail(f"{path}.nodeSelectorTerms", "must have at least one node selector term")
    if one_term and len(terms) != 1:
        raise r.fail(f"{path}.nodeSelectorTerms", "must have exactly one node selector term")
    return terms


def _node_selection(r: Reader, spec: dict[str, Any], path: str, *, of_slice: bool) -> NodeSelection | None:
    """Exactly one of ``nodeName``, ``nodeSelector``, ``allNodes`` (a slice: or
    ``perDeviceNodeSelection``, returned as None). ``path`` is the object holding them."""
    at = f"{path}." if path else ""
    chosen: list[str] = []
    node_name = ""
    if spec.get("nodeName") is not None:
        node_name = r.string(spec["nodeName"], f"{at}nodeName")
        if not node_name:
            raise r.fail(f"{at}nodeName", "must be either unset or set to a non-empty string")
        _check(r, subdomain_problem(node_name), f"{at}nodeName")
        chosen.append("nodeName")
    terms = None
    if spec.get("nodeSelector") is not None:
        terms = _node_selector(r, spec["nodeSelector"], f"{at}nodeSelector", one_term=of_slice)
        chosen.append("nodeSelector")
    flags = ("allNodes", "perDeviceNodeSelection") if of_slice else ("allNodes",)
    for flag in flags:
        if spec.get(flag) is not None:
            if not r.boolean(spec[flag], f"{at}{flag}"):
                raise r.fail(f"{at}{flag}", "must be either unset or set to true")
            chosen.append(flag)
    names = ", ".join(f"`{f}`" for f in ("nodeName", "nodeSelector", *flags))
    where = "" if of_slice else " when `perDeviceNodeSelection` is set to true in the ResourceSlice spec"
    if not chosen:
        raise r.fail(path or "spec", f"exactly one of {names} is required{where}")
    if len(chosen) > 1:
        raise r.fail(path or "spec", f"exactly one of {names} is required{where}, but {', '.join(chosen)} are set")
    if chosen[0] == "perDeviceNodeSelection":
        return None
    return NodeSelection(node_name=node_name, node_selector=terms, all_nodes=chosen[0] == "allNodes")


def _taint(r: Reader, raw: Any, path: str) -> DeviceTaint:
    t = r.mapping(raw, path)
    key = r.string(t.get("key"), f"{path}.key", required=True)
    _check(r, qualified_name_problem(key), f"{path}.key")
    value = r.string(t.get("value"), f"{path}.value")
    _check(r, label_value_problem(value), f"{path}.value")
    effect = r.string(t.get("effect"), f"{path}.effect", required=True)
    if effect not in TAINT_EFFECTS:
        raise r.fail(f"{path}.effect", f"unsupported value {effect!r}: one of {', '.join(TAINT_EFFECTS)}")
    return DeviceTaint(key=key, value=value, effect=effect,  # type: ignore[arg-type]
                       time_added=r.timestamp(t.get("timeAdded"), f"{path}.timeAdded"))


def _toleration(r: Reader, raw: Any, path: str) -> DeviceToleration:
    t = r.mapping(raw, path)
    key = r.string(t.get("key"), f"{path}.key")
    if key:
        _check(r, qualified_name_problem(key), f"{path}.key")
    op = r.string(t.get("operator"), f"{path}.operator") or "Equal"
    value = r.string(t.get("value"), f"{path}.value")
    if op == "Exists":
        if value:
            raise r.fail(f"{path}.value", "must be empty for operator `Exists`")
    elif op == "Equal":
        _check(r, label_value_problem(value), f"{path}.value")
    else:
        raise r.fail(f"{path}.operator", f"unsupported value {op!r}: one of Equal, Exists")
    effect = r.string(t.get("effect"), f"{path}.effect")
    if effect and effect not in TAINT_EFFECTS:
        raise r.fail(f"{path}.effect", f"unsupported value {effect!r}: one of {', '.join(TAINT_EFFECTS)}")
    seconds = r.integer(t.get("tolerationSeconds"), f"{path}.tolerationSeconds", bits=64)
    return DeviceToleration(key=key, operator=op, value=value, effect=effect,  # type: ignore[arg-type]
                            toleration_seconds=seconds)


def _tolerations(r: Reader, raw: Any, path: str) -> tuple[DeviceToleration, ...]:
    items = _at_most(r, r.seq(raw, path), TOLERATIONS_MAX, path)
    return tuple(_toleration(r, t, f"{path}[{i}]") for i, t in enumerate(items))


def _selectors(r: Reader, raw: Any, path: str) -> tuple[str, ...]:
    """CEL selectors' expressions. Whether one compiles is the CEL environment's to say
    (``koordpy.devices.cel``): a pod whose claim names one that does not waits, saying so."""
    out = []
    for i, sel in enumerate(_at_most(r, r.seq(raw, path), SELECTORS_MAX, path)):
        cel = r.mapping(r.mapping(sel, f"{path}[{i}]").get("cel"), f"{path}[{i}].cel")
        if not cel:
            raise r.fail(f"{path}[{i}].cel", "is required")
        expression = r.string(cel.get("expression"), f"{path}[{i}].cel.expression", required=True)
        if len(expression) > CEL_LENGTH:
            raise r.fail(f"{path}[{i}].cel.expression",
                         f"must be no more than {CEL_LENGTH} bytes, got {len(expression)}")
        out.append(expression)
    return tuple(out)


def _opaque(r: Reader, raw: Any, path: str, requests: tuple[str, ...] = ()) -> OpaqueConfig:
    c = r.mapping(raw, path)
    o = r.mapping(c.get("opaque"), f"{path}.opaque")
    if not o:
        raise r.fail(f"{path}.opaque", "is required")
    driver = _driver(r, o.get("driver"), f"{path}.opaque.driver")
    params = o.get("parameters")
    if isinstance(params, str):  # JSON text, as a client may send a RawExtension
        try:
            params = json.loads(params)
        except ValueError as exc:
            raise r.fail(f"{path}.opaque.parameters", f"error parsing data as JSON: {exc}") from exc
    if params is None:
        raise r.fail(f"{path}.opaque.parameters", "is required")
    if not isinstance(params, dict):
        raise r.fail(f"{path}.opaque.parameters", "must be a valid JSON object")
    text = json.dumps(params, separators=(",", ":"), default=str)
    if len(text) > OPAQUE_LENGTH:
        raise r.fail(f"{path}.opaque.parameters", f"must be no more than {OPAQUE_LENGTH} bytes, got {len(text)}")
    return OpaqueConfig(driver=driver, parameters=text, requests=requests)


def _request_refs(r: Reader, raw: Any, path: str, known: set[str]) -> tuple[str, ...]:
    names = [r.string(n, f"{path}[{i}]", required=True)
             for i, n in enumerate(_at_most(r, r.seq(raw, path), REQUESTS_MAX, path))]
    _unique(r, names, path)
    for i, n in enumerate(names):
        if n not in known:
            raise r.fail(f"{path}[{i}]", f"{n!r} must be the name of a request in the claim or the name of a "
                                         "request and a subrequest separated by '/'")
    return tuple(names)


def _exact(r: Reader, raw: Any, path: str, alpha: list[str], name: str = "") -> ExactRequest:
    e = r.mapping(raw, path)
    device_class = _subdomain(r, e.get("deviceClassName"), f"{path}.deviceClassName")
    mode = r.string(e.get("allocationMode"), f"{path}.allocationMode") or "ExactCount"
    count = r.integer(e.get("count"), f"{path}.count", bits=64)
    if mode == "ExactCount":
        count = count or 1
        if count <= 0:
            raise r.fail(f"{path}.count", f"must be greater than zero, got {count}")
    elif mode == "All":
        if count:
            raise r.fail(f"{path}.count", "must not be specified when allocationMode is 'All'")
        count = 0
    else:
        raise r.fail(f"{path}.allocationMode", f"unsupported value {mode!r}: one of All, ExactCount")
    capacity = r.mapping(e.get("capacity"), f"{path}.capacity")
    requested = _quantities(r, capacity.get("requests"), f"{path}.capacity.requests", _qualified, nonnegative=True)
    if e.get("derivedAttributes"):
        alpha.append(f"{path}.derivedAttributes")
    return ExactRequest(device_class=device_class, selectors=_selectors(r, e.get("selectors"), f"{path}.selectors"),
                        mode=mode, count=count,  # type: ignore[arg-type]
                        admin_access=r.boolean(e.get("adminAccess"), f"{path}.adminAccess"),
                        tolerations=_tolerations(r, e.get("tolerations"), f"{path}.tolerations"),
                        capacity=requested, name=name)


def _claim_spec(r: Reader, raw: Any, path: str, alpha: list[str]) -> ClaimSpec:
    devices = r.mapping(r.mapping(raw, path).get("devices"), f"{path}.devices")
    at = f"{path}.devices"
    requests: list[DeviceRequest] = []
    known: set[str] = set()
    raw_requests = _at_most(r, r.seq(devices.get("requests"), f"{at}.requests"), REQUESTS_MAX, f"{at}.requests")
    for i, q in enumerate(raw_requests):
        qp = f"{at}.requests[{i}]"
        qm = r.mapping(q, qp)
        name = _label(r, qm.get("name"), f"{qp}.name")
        if name in known:
            raise r.fail(f"{qp}.name", f"duplicate value {name!r}")
        known.add(name)
        has_exact, subs = qm.get("exactly") is not None, r.seq(qm.get("firstAvailable"), f"{qp}.firstAvailable")
        if has_exact == bool(subs):
            raise r.fail(qp, "exactly one of `exactly` or `firstAvailable` is required" +
                         (", but multiple fields are set" if has_exact else ""))
        if has_exact:
            requests.append(DeviceRequest(name=name, exactly=_exact(r, qm["exactly"], f"{qp}.exactly", alpha)))
            continue
        _at_most(r, subs, SUBREQUESTS_MAX, f"{qp}.firstAvailable")
        chosen = []
        for j, sub in enumerate(subs):
            sp = f"{qp}.firstAvailable[{j}]"
            sub_name = _label(r, r.mapping(sub, sp).get("name"), f"{sp}.name")
            if f"{name}/{sub_name}" in known:
                raise r.fail(f"{sp}.name", f"duplicate value {sub_name!r}")
            known.add(f"{name}/{sub_name}")
            chosen.append(_exact(r, sub, sp, alpha, sub_name))
        requests.append(DeviceRequest(name=name, first_available=tuple(chosen)))
    constraints = []
    for i, c in enumerate(_at_most(r, r.seq(devices.get("constraints"), f"{at}.constraints"), CONSTRAINTS_MAX,
                                   f"{at}.constraints")):
        cp = f"{at}.constraints[{i}]"
        cm = r.mapping(c, cp)
        refs = _request_refs(r, cm.get("requests"), f"{cp}.requests", known)
        match, distinct = cm.get("matchAttribute"), cm.get("distinctAttribute")
        if (match is None) == (distinct is None):
            raise r.fail(cp, 'exactly one of "matchAttribute" or "distinctAttribute" is required' +
                         (", but multiple fields are set" if match is not None else ""))
        constraints.append(DeviceConstraint(
            requests=refs,
            match_attribute=_qualified(r, match, f"{cp}.matchAttribute", fully=True) if match is not None else "",
            distinct_attribute=_qualified(r, distinct, f"{cp}.distinctAttribute", fully=True)
            if distinct is not None else ""))
    config = tuple(
        _opaque(r, c, f"{at}.config[{i}]", _request_refs(r, r.mapping(c, f"{at}.config[{i}]").get("requests"),
                                                         f"{at}.config[{i}].requests", known))
        for i, c in enumerate(_at_most(r, r.seq(devices.get("config"), f"{at}.config"), CONFIG_MAX, f"{at}.config")))
    return ClaimSpec(requests=tuple(requests), constraints=tuple(constraints), config=config)


def _owner(r: Reader, meta: dict[str, Any]) -> tuple[str, str, str] | None:
    for i, o in enumerate(r.seq(meta.get("ownerReferences"), "metadata.ownerReferences")):
        ref = r.mapping(o, f"metadata.ownerReferences[{i}]")
        if ref.get("controller") is True:
            at = f"metadata.ownerReferences[{i}]"
            return (r.string(ref.get("kind"), f"{at}.kind"), r.string(ref.get("name"), f"{at}.name"),
                    r.string(ref.get("uid"), f"{at}.uid"))
    return None


def _attribute(r: Reader, raw: Any, path: str, alpha: list[str]) -> tuple[AttrValue, int]:
    """One attribute's value and how many values it counts for (a list counts each item)."""
    a = r.mapping(raw, path)
    found = [k for k in ("int", "bool", "string", "version", *_LIST_ATTRIBUTES) if a.get(k) is not None]
    if len(found) != 1:
        raise r.fail(path, "exactly one value must be specified" +
                     (f", got {', '.join(found)}" if found else ""))
    kind = found[0]
    if kind in _LIST_ATTRIBUTES:
        alpha.append(f"{path}.{kind}")
        items = r.seq(a[kind], f"{path}.{kind}")
        if not items:
            raise r.fail(f"{path}.{kind}", "must not be empty if specified")
        one = _LIST_ATTRIBUTES[kind]
        return tuple(_scalar(r, one, v, f"{path}.{kind}[{i}]") for i, v in enumerate(items)), len(items)  # type: ignore[return-value]
    return _scalar(r, kind, a[kind], f"{path}.{kind}"), 1


def _scalar(r: Reader, kind: str, value: Any, path: str) -> int | bool | str | SemVer:
    if kind == "int":
        return r.integer(value, path, bits=64) or 0
    if kind == "bool":
        return r.boolean(value, path)
    if not isinstance(value, str):
        raise r.fail(path, f"expected a string, got {value!r}")
    if len(value) > ATTRIBUTE_VALUE_LENGTH:
        raise r.fail(path, f"must be no more than {ATTRIBUTE_VALUE_LENGTH} bytes, got {len(value)}")
    if kind == "version":
        if not _SEMVER.fullmatch(value):
            raise r.fail(path, f"{value!r} must be a string compatible with semver.org spec 2.0.0")
        return SemVer(value)
    return value


def _capacity(r: Reader, raw: Any, path: str, multiple: bool) -> Capacity:
    c = r.mapping(raw, path)
    value = _quantity(r, c.get("value"), f"{path}.value")
    if c.get("requestPolicy") is None:
        return Capacity(value)
    if not multiple:
        raise r.fail(f"{path}.requestPolicy", "forbidden: allowMultipleAllocations must be true")
    pp = f"{path}.requestPolicy"
    p = r.mapping(c["requestPolicy"], pp)
    default = _quantity(r, p["default"], f"{pp}.default") if p.get("default") is not None else None
    options = tuple(_quantity(r, v, f"{pp}.validValues[{i}]")
                    for i, v in enumerate(_at_most(r, r.seq(p.get("validValues"), f"{pp}.validValues"),
                                                    VALID_VALUES_MAX, f"{pp}.validValues")))
    span = r.mapping(p.get("validRange"), f"{pp}.validRange") if p.get("validRange") is not None else None
    if options and span is not None:
        raise r.fail(pp, "at most one of `validValues` or `validRange` may be set")
    if (options or span is not None) and default is None:
        raise r.fail(f"{pp}.default", f"required when {'validValues' if options else 'validRange'} is defined")
    if default is not None and default.value < 0:
        raise r.fail(f"{pp}.default", "must not be negative")
    if options:
        # Without DRAFractionalCapacityRange two options are the same when they round up alike.
        _unique(r, [str(o.value if FRACTIONAL_CAPACITY_RANGE else math.ceil(o.value)) for o in options],
                f"{pp}.validValues")
        for i, o in enumerate(options):
            if o.value > value.value:
                raise r.fail(f"{pp}.validValues[{i}]", f"option is larger than capacity value: {value.text}")
        if default is not None and all(o.value != default.value for o in options):
            raise r.fail(f"{pp}.default", "default value is not valid according to the requestPolicy")
        return Capacity(value, CapacityPolicy(default=default, valid_values=options))
    if span is None:
        return Capacity(value, CapacityPolicy(default=default))
    rp = f"{pp}.validRange"
    if span.get("min") is None:
        raise r.fail(f"{rp}.min", "required when validRange is defined")
    low = _quantity(r, span["min"], f"{rp}.min", nonnegative=True)
    high = _quantity(r, span["max"], f"{rp}.max", nonnegative=True) if span.get("max") is not None else None
    step = _quantity(r, span["step"], f"{rp}.step") if span.get("step") is not None else None
    if low.value > value.value:
        raise r.fail(f"{rp}.min", f"min is larger than capacity value: {value.text}")
    if default is not None and default.value < low.value:
        raise r.fail(f"{pp}.default", f"default is less than min: {low.text}")
    if high is not None:
        if low.value > high.value:
            raise r.fail(f"{rp}.max", f"min is larger than max: {high.text}")
        if high.value > value.value:
            raise r.fail(f"{rp}.max", f"max is larger than capacity value: {value.text}")
        if default is not None and default.value > high.value:
            raise r.fail(f"{pp}.default", f"default is more than max: {high.text}")
    if step is not None:
        if step.value <= 0:
            raise r.fail(f"{rp}.step", "must be greater than zero")
        if low.value + step.value > value.value:
            raise r.fail(f"{rp}.step", f"one step {low.value + step.value} is larger than capacity value: {value.text}")
        # Without DRAFractionalCapacityRange the steps are checked in whole numbers, in int64.
        whole = not FRACTIONAL_CAPACITY_RANGE
        if whole:
            for q, where in ((default, f"{pp}.default"), (low, f"{rp}.min"), (high, f"{rp}.max"),
                             (step, f"{rp}.step")):
                if q is not None and q.value > INT64_MAX:
                    raise r.fail(where, f"must not be larger than {INT64_MAX}")
        for q, where in ((default, f"{pp}.default"), (high, f"{rp}.max")):
            if q is None:
                continue
            off = (math.ceil(q.value) - math.ceil(low.value)) % math.ceil(step.value) if whole \
                else (q.value - low.value) % step.value
            if off:
                raise r.fail(where, f"value is not a multiple of a given step ({step.text}) from ({low.text})")
    return Capacity(value, CapacityPolicy(default=default, valid_min=low, valid_max=high, valid_step=step))


def _conditions(r: Reader, raw: Any, path: str) -> tuple[str, ...]:
    names = [r.string(c, f"{path}[{i}]", required=True)
             for i, c in enumerate(_at_most(r, r.seq(raw, path), BINDING_CONDITIONS_MAX, path))]
    for i, n in enumerate(names):
        _check(r, qualified_name_problem(n), f"{path}[{i}]")
    _unique(r, names, path)
    return tuple(names)


def _binding(r: Reader, d: dict[str, Any], path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    ok = _conditions(r, d.get("bindingConditions"), f"{path}.bindingConditions")
    failed = _conditions(r, d.get("bindingFailureConditions"), f"{path}.bindingFailureConditions")
    for i, n in enumerate(failed):
        if n in ok:
            raise r.fail(f"{path}.bindingFailureConditions[{i}]", "bindingFailureConditions must not overlap with "
                                                                   "bindingConditions")
    if bool(ok) != bool(failed):
        missing = "bindingFailureConditions" if ok else "bindingConditions"
        raise r.fail(f"{path}.{missing}", "bindingConditions and bindingFailureConditions must be set together")
    return ok, failed


def _device(r: Reader, raw: Any, path: str, per_device: bool, alpha: list[str]) -> tuple[Device, bool]:
    """A slice's device, and whether it uses a feature that lowers the slice's device limit."""
    d = r.mapping(raw, path)
    name = _label(r, d.get("name"), f"{path}.name")
    multiple = r.boolean(d.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations")
    raw_attributes = r.mapping(d.get("attributes"), f"{path}.attributes")
    raw_capacity = r.mapping(d.get("capacity"), f"{path}.capacity")
    if len(raw_attributes) + len(raw_capacity) > ATTRIBUTES_AND_CAPACITIES_MAX:
        raise r.fail(path, "the total number of attributes and capacities must not exceed "
                           f"{ATTRIBUTES_AND_CAPACITIES_MAX}")
    attributes: dict[str, AttrValue] = {}
    values = 0
    before = len(alpha)
    for k, v in raw_attributes.items():
        key = _qualified(r, k, f"{path}.attributes[{k}]")
        attributes[key], n = _attribute(r, v, f"{path}.attributes[{k}]", alpha)
        values += n
    lists = len(alpha) > before
    if values > ATTRIBUTE_VALUES_MAX:
        raise r.fail(path, f"the total number of attribute values must not exceed {ATTRIBUTE_VALUES_MAX}")
    capacity = {_qualified(r, k, f"{path}.capacity[{k}]"): _capacity(r, v, f"{path}.capacity[{k}]", multiple)
                for k, v in raw_capacity.items()}
    consumes = []
    raw_consumes = _at_most(r, r.seq(d.get("consumesCounters"), f"{path}.consumesCounters"), CONSUMPTIONS_MAX,
                            f"{path}.consumesCounters")
    for i, c in enumerate(raw_consumes):
        cp = f"{path}.consumesCounters[{i}]"
        cm = r.mapping(c, cp)
        if cm.get("compatibilityGroups"):
            alpha.append(f"{cp}.compatibilityGroups")
        consumes.append(CounterConsumption(_label(r, cm.get("counterSet"), f"{cp}.counterSet"),
                                           _counters(r, cm.get("counters"), f"{cp}.counters")))
    _unique(r, [c.counter_set for c in consumes], f"{path}.consumesCounters")
    node: NodeSelection | None = None
    if per_device:
        node = _node_selection(r, d, path, of_slice=False)
    elif any(d.get(f) is not None for f in ("nodeName", "nodeSelector", "allNodes")):
        raise r.fail(path, "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` "
                           "is set to true in the ResourceSlice spec")
    taints = tuple(_taint(r, t, f"{path}.taints[{i}]")
                   for i, t in enumerate(_at_most(r, r.seq(d.get("taints"), f"{path}.taints"), TAINTS_MAX,
                                                  f"{path}.taints")))
    ok, failed = _binding(r, d, path)
    if d.get("nodeAllocatableResources"):
        alpha.append(f"{path}.nodeAllocatableResources")
    return Device(name=name, attributes=attributes, capacity=capacity, consumes_counters=tuple(consumes), node=node,
                  taints=taints, binds_to_node=r.boolean(d.get("bindsToNode"), f"{path}.bindsToNode"),
                  binding_conditions=ok, binding_failure_conditions=failed,
                  allow_multiple_allocations=multiple), bool(taints or consumes or lists)


def _allocation(r: Reader, raw: Any, path: str, alpha: list[str]) -> Allocation:
    a = r.mapping(raw, path)
    devices = r.mapping(a.get("devices"), f"{path}.devices")
    results = []
    for i, res in enumerate(_at_most(r, r.seq(devices.get("results"), f"{path}.devices.results"), REQUESTS_MAX,
                                     f"{path}.devices.results")):
        rp = f"{path}.devices.results[{i}]"
        rm = r.mapping(res, rp)
        if rm.get("skipNodeOperations"):
            alpha.append(f"{rp}.skipNodeOperations")
        ok, failed = _binding(r, rm, rp)
        results.append(DeviceResult(
            request=r.string(rm.get("request"), f"{rp}.request", required=True),
            driver=_driver(r, rm.get("driver"), f"{rp}.driver"),
            pool=_pool_name(r, rm.get("pool"), f"{rp}.pool"),
            device=_label(r, rm.get("device"), f"{rp}.device"),
            admin_access=r.boolean(rm.get("adminAccess"), f"{rp}.adminAccess"),
            tolerations=_tolerations(r, rm.get("tolerations"), f"{rp}.tolerations"),
            binding_conditions=ok, binding_failure_conditions=failed,
            share_id=_share_id(r, rm.get("shareID"), f"{rp}.shareID"),
            consumed_capacity=_quantities(r, rm.get("consumedCapacity"), f"{rp}.consumedCapacity", _qualified)))
    config = []
    for i, c in enumerate(_at_most(r, r.seq(devices.get("config"), f"{path}.devices.config"), 2 * CONFIG_MAX,
                                   f"{path}.devices.config")):
        cp = f"{path}.devices.config[{i}]"
        cm = r.mapping(c, cp)
        source = r.string(cm.get("source"), f"{cp}.source", required=True)
        if source not in ("FromClass", "FromClaim"):
            raise r.fail(f"{cp}.source", f"unsupported value {source!r}: one of FromClaim, FromClass")
        requests = tuple(r.string(q, f"{cp}.requests[{j}]", required=True)
                         for j, q in enumerate(r.seq(cm.get("requests"), f"{cp}.requests")))
        config.append(AllocatedConfig(source, _opaque(r, cm, cp, requests)))  # type: ignore[arg-type]
    selector = _node_selector(r, a["nodeSelector"], f"{path}.nodeSelector", one_term=False) \
        if a.get("nodeSelector") is not None else None
    return Allocation(results=tuple(results), config=tuple(config), node_selector=selector,
                      timestamp=r.timestamp(a.get("allocationTimestamp"), f"{path}.allocationTimestamp"))


def _share_id(r: Reader, value: Any, path: str) -> str:
    """An allocation's ``shareID``: a UID in RFC 4122's normalized form, or ""."""
    text = r.string(value, path)
    if text and not _UUID.fullmatch(text):
        raise r.fail(path, f"{text!r}: uid must be in RFC 4122 normalized form, "
                           "`xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx` with lowercase hexadecimal characters")
    return text


def _pool_name(r: Reader, value: Any, path: str) -> str:
    """A pool's name: at most 253 characters, each part between '/' a DNS subdomain."""
    text = r.string(value, path, required=True)
    if len(text) > POOL_NAME_LENGTH:
        raise r.fail(path, f"must be no more than {POOL_NAME_LENGTH} characters, got {len(text)}")
    for part in text.split("/"):
        _check(r, subdomain_problem(part), path)
    return text


def _consumers(r: Reader, raw: Any, path: str) -> tuple[Consumer, ...]:
    items = r.seq(raw, path)
    if len(items) > RESERVED_FOR_MAX:
        raise r.fail(path, f"must have at most {RESERVED_FOR_MAX} items, got {len(items)}")
    out = []
    for i, c in enumerate(items):
        cm = r.mapping(c, f"{path}[{i}]")
        out.append(Consumer(resource=r.string(cm.get("resource"), f"{path}[{i}].resource", required=True),
                            name=r.string(cm.get("name"), f"{path}[{i}].name", required=True),
                            uid=r.string(cm.get("uid"), f"{path}[{i}].uid", required=True),
                            api_group=r.string(cm.get("apiGroup"), f"{path}[{i}].apiGroup")))
    _unique(r, [c.uid for c in out], path)
    return tuple(out)


def _device_conditions(r: Reader, raw: Any, path: str) -> tuple[DeviceCondition, ...]:
    out = []
    for i, d in enumerate(r.seq(raw, path)):
        dp = f"{path}[{i}]"
        dm = r.mapping(d, dp)
        driver, pool = _driver(r, dm.get("driver"), f"{dp}.driver"), _pool_name(r, dm.get("pool"), f"{dp}.pool")
        device = _label(r, dm.get("device"), f"{dp}.device")
        for j, c in enumerate(r.seq(dm.get("conditions"), f"{dp}.conditions")):
            cm = r.mapping(c, f"{dp}.conditions[{j}]")
            out.append(DeviceCondition(driver, pool, device,
                                       r.string(cm.get("type"), f"{dp}.conditions[{j}].type", required=True),
                                       r.string(cm.get("status"), f"{dp}.conditions[{j}].status", required=True)))
    return tuple(out)
