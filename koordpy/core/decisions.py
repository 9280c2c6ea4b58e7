"""What a scheduling cycle decides: the only output of the core.

The shell (the simulator, or the live controller) carries these out; the core never does.
``Decision`` is a closed union: each shell applies it in one ``match`` that ends in
``assert_never``, so a new kind of decision cannot be forgotten by either. A gang's status is a
typed value its dialect makes (``GangStatus``) and renders to the wire itself; the event reasons
the core writes are ``EventReason``, kept here in one place. A cycle's result records what a job adds
to it in the job's transaction (``CycleResult.txn``, ``koordpy.core.txn``), so a job rolled back
takes its decisions, binds and messages with it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal, Protocol

from koordpy.api.dra import Allocation, ClaimSpec, Consumer
from koordpy.api.kinds import Kind
from koordpy.api.objects import STALE_EVICTION_REASON
from koordpy.core.txn import Txn


@dataclass(frozen=True)
class VolumeBinding:
    """What PreBind writes before the pod is bound, and the claims it then waits for: each static
    PersistentVolume's claimRef set to its claim (the PV controller completes the bind), each claim
    to provision annotated ``volume.kubernetes.io/selected-node`` (its provisioner creates the PV)."""

    node: str
    static: tuple[tuple[str, str], ...] = ()  # (claim namespace/name, PersistentVolume name)
    provision: tuple[str, ...] = ()  # claim namespace/name
    claims: tuple[str, ...] = ()  # every claim the pod waits for to be Bound before its binding
    # Static PersistentVolumes whose claimRef names the claim already (pre-bound): nothing to write,
    # the PV controller binds them unasked.
    prebound: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class ClaimWrite:
    """One ResourceClaim's PreBind writes: the finalizer ``resource.kubernetes.io/delete-protection``,
    then ``status.allocation`` (when this cycle allocated it; None: it was allocated already) with
    ``consumer`` added to ``status.reservedFor``."""

    claim: str  # namespace/name
    consumer: Consumer
    allocation: Allocation | None = None


@dataclass(frozen=True)
class ExtendedClaim:
    """The claim kube-scheduler makes at PreBind for a pod's DRA-backed extended resources on a node
    whose device plugin does not list them: created in the pod's namespace (``generate_name``: the
    API server adds a suffix), owned by the pod (controller), annotated
    ``resource.kubernetes.io/extended-resource-claim: "true"``, one request per container and
    resource (``container-<i>-request-<j>``: ExactCount of the quantity, of the class); then, as for
    any claim, the finalizer, ``status.allocation`` and the pod in ``reservedFor``; then the pod's
    ``status.extendedResourceClaimStatus`` (``mappings`` and the claim's name)."""

    namespace: str
    generate_name: str  # <pod>-extended-resources-
    pod: str  # the owner's name
    pod_uid: str
    spec: ClaimSpec
    allocation: Allocation
    consumer: Consumer
    mappings: tuple[tuple[str, str, str], ...]  # (containerName, resourceName, requestName)


@dataclass(frozen=True)
class DeviceBinding:
    """What kube-scheduler's DynamicResources PreBind writes before the pod is bound: every claim the
    pod uses, in the pod's order, then the claim for its DRA-backed extended resources, if any (the
    pod is bound only once all are written and, for devices with binding conditions, ready)."""

    node: str
    claims: tuple[ClaimWrite, ...] = ()
    extended: ExtendedClaim | None = None


@dataclass(frozen=True, slots=True)
class Bind:
    pod: str  # namespace/name
    node: str
    # Kube-scheduler's PreBind for claims bound at scheduling time: written first, and the pod is
    # bound only once every claim it names is Bound (None: nothing to wait for).
    volumes: VolumeBinding | None = None
    # DynamicResources' PreBind: the claims' allocations and reservations (None: the pod uses no claim).
    devices: DeviceBinding | None = None


@dataclass(frozen=True)
class SetPodScheduledFalse:
    """``PodScheduled=False`` with reason Unschedulable (or SchedulerError, for a group kube-scheduler's
    validation refuses), as kube-scheduler writes it."""

    pod: str
    message: str
    reason: str = "Unschedulable"


@dataclass(frozen=True)
class Annotate:
    pod: str
    key: str
    value: str | None  # None removes the annotation


@dataclass(frozen=True)
class ObjectAnnotate:
    """An annotation of the object that declares a gang (a PodGroup of some dialect), merged into its
    metadata; None removes it. What a dialect keeps there (a stale gang's stale-since) outlives a
    restart of the scheduler."""

    kind: Kind
    key: str  # namespace/name
    annotation: str
    value: str | None


class EventReason(StrEnum):
    """The reasons of the Events the core writes (a ``str``: compared and written as the text)."""

    SCHEDULED = "Scheduled"  # written after the pod's bind
    FAILED_SCHEDULING = "FailedScheduling"  # written with the pod's PodScheduled=False condition
    OWNER_NOT_FOUND = "OwnerNotFound"
    GANG_TIMEOUT = "GangTimeout"
    GANG_STALE = "GangStale"  # a gang runs below its minimum (once, when it becomes stale)
    STALE_GANG_EVICTED = "StaleGangEvicted"  # its grace ran out: the rest of it is evicted
    TOPOLOGY_LAYER_IGNORED = "TopologyLayerIgnored"
    TOPOLOGY_LIMIT_DROPPED = "TopologyLimitDropped"
    REPLACEMENTS_DO_NOT_FIT = "ReplacementsDoNotFit"  # a gang that lost members cannot take their replacements
    # A job's minimum runtime or preemption delay, as its objects set it, cannot be read: counted as 0.
    INVALID_PREEMPTION_SETTING = "InvalidPreemptionSetting"
    # kube-scheduler's DynamicResources PreBind, while a pod waits for its devices' binding conditions
    # (written by the binding cycle, not the core).
    BINDING_CONDITIONS_PENDING = "BindingConditionsPending"


@dataclass(frozen=True, slots=True)
class Event:
    kind: str  # Pod, PodGroup, ClusterNetworkTopology
    obj: str  # namespace/name, or name for cluster-scoped objects
    type: Literal["Normal", "Warning"]
    reason: str  # a EventReason for the core's own Events
    message: str


# A gang of thousands binds in one cycle: its Binds and Scheduled Events are made by setting each
# instance's slots directly, which the frozen dataclass's __init__ does one checked field at a time.
# The result is the same object in every way (type, fields, equality, hash, repr; the parity test
# ``tests/core/test_members.py`` holds it to that). Slotted, a decision is one object with no dict:
# half the objects a gang's decisions made, and half what the cyclic collector walks in that cycle.
_new = object.__new__


def _setter(cls: type, name: str) -> Callable[[object, object], None]:
    """The setter of a slot of ``cls``: it writes a frozen dataclass's field, past its __setattr__."""
    setter: Callable[[object, object], None] = vars(cls)[name].__set__
    return setter


_bind_pod, _bind_node, _bind_volumes, _bind_devices = (
    _setter(Bind, name) for name in ("pod", "node", "volumes", "devices"))
_event_kind, _event_obj, _event_type, _event_reason, _event_message = (
    _setter(Event, name) for name in ("kind", "obj", "type", "reason", "message"))


def bind_of(pod: str, node: str) -> Bind:
    """``Bind(pod, node)``, made faster."""
    made = _new(Bind)
    _bind_pod(made, pod)
    _bind_node(made, node)
    _bind_volumes(made, None)
    _bind_devices(made, None)
    return made


def event_of(kind: str, obj: str, type: Literal["Normal", "Warning"], reason: str, message: str) -> Event:
    """``Event(kind, obj, type, reason, message)``, made faster."""
    made = _new(Event)
    _event_kind(made, kind)
    _event_obj(made, obj)
    _event_type(made, type)
    _event_reason(made, reason)
    _event_message(made, message)
    return made


def scheduled(pods: list[str], nodes: list[str], messages: list[str]) -> list[Bind | Event]:
    """Each pod's ``Bind`` to its node followed by its ``Scheduled`` Event with its message, in
    order: what a gang's plain binds decide, made in one pass."""
    out: list[Bind | Event] = []
    append = out.append
    new, bind_pod, bind_node, bind_volumes, bind_devices = _new, _bind_pod, _bind_node, _bind_volumes, _bind_devices
    kind, obj, type_, reason, message_ = _event_kind, _event_obj, _event_type, _event_reason, _event_message
    why = EventReason.SCHEDULED
    for pod, node, message in zip(pods, nodes, messages, strict=True):
        made = new(Bind)
        bind_pod(made, pod)
        bind_node(made, node)
        bind_volumes(made, None)
        bind_devices(made, None)
        append(made)
        event = new(Event)
        kind(event, "Pod")
        obj(event, pod)
        type_(event, "Normal")
        reason(event, why)
        message_(event, message)
        append(event)
    return out


class GangStatus(Protocol):
    """The status a gang's object should have, as its dialect computes it."""

    @property
    def kind(self) -> Kind:
        """The kind of object it is written to (its API group, version and role)."""
        ...

    def wire(self) -> dict[str, object]:
        """The ``status`` body as the API spells it."""
        ...

    def applied(self, obj: Any) -> Any:
        """``obj`` (a parsed object of ``kind``) with this status: what the simulator stores."""
        ...


@dataclass(frozen=True)
class ObjectStatus:
    """The status one topology object should have (a ClusterNetworkTopology, a HyperNode), as its
    dialect computes it from the core's trees: each shell writes it through its own writer, the live
    controller where the object says otherwise, without knowing whose object it is.

    One condition (``condition``: type, status, reason, message; its ``lastTransitionTime`` is the
    shell's) and the status fields beside it (``fields``; a None removes the field). ``problems``
    are told once each as a Warning Event of reason ``warning``; ``koordpy simulate`` reports
    ``shown`` under its JSON key ``section``, by the object's name when ``keyed``."""

    kind: Kind  # the object's kind in the registry (cluster-scoped, with a status subresource)
    name: str
    fields: dict[str, Any]
    condition: dict[str, str]
    write: str  # how ``koordpy_api_writes_total`` counts its writes ("hypernode-status")
    section: str
    shown: dict[str, Any]
    keyed: bool = True
    problems: tuple[str, ...] = ()
    warning: str = ""


@dataclass(frozen=True)
class GangStatusUpdate:
    """The status the object that declares a gang (a PodGroup of some dialect) should have."""

    object_key: str  # namespace/name of the object of ``status.kind``
    status: GangStatus


@dataclass(frozen=True)
class Preempt:
    """A victim of preemption: the shell writes ``DisruptionTarget=True`` (reason
    PreemptionByScheduler, this message) on it, then deletes it with its grace period."""

    pod: str
    message: str
    preemptor: str  # the job that needs the room (a gang key, a GangGroup id, or a lone pod's key)
    trigger: str  # the preemptor's pod that carries the failure


@dataclass(frozen=True)
class Evict:
    """A member of a stale gang whose grace ran out (``koordpy.core.stale``): the shell writes
    ``DisruptionTarget=True`` with reason ``reason`` (not preemption's) and this message on it, then
    deletes it with its grace period, so that the job's controller starts the gang again whole."""

    pod: str
    message: str
    gang: str
    reason: str = STALE_EVICTION_REASON


@dataclass(frozen=True)
class Nominate:
    """``status.nominatedNodeName`` of a pending pod: where the room made for it is; "" clears it."""

    pod: str
    node: str


@dataclass(frozen=True)
class Deallocate:
    """kube-scheduler's DynamicResources PostFilter: a claim allocated where the pod that uses it can no
    longer go (its node selector admits none of the nodes the pod could take, or its devices will not
    bind), reserved for nobody or for that pod alone (``group``: or for that Workload PodGroup alone,
    kube-scheduler's PodGroupPostFilter). The shell clears ``status.allocation``, ``status.reservedFor``
    and ``status.devices`` (the finalizer stays), only if the claim is still allocated as the core saw
    it, so that a later cycle allocates it again; with ``unreserve``, it only drops the group's entry of
    ``status.reservedFor``."""

    claim: str  # namespace/name
    uid: str  # the claim as the core saw it (a claim made again under the name is not touched)
    pod: str  # the pod whose PostFilter decided it
    # kube-scheduler's PodGroupPostFilter: the Workload PodGroup (its reservedFor entry) whose claim is
    # released; its reservation is then no one else's. None: the pod's own PostFilter.
    group: Consumer | None = None
    unreserve: bool = False  # only the group's reservation is dropped; the allocation stays


@dataclass(frozen=True)
class DeleteClaim:
    """The claim of a pending pod's DRA-backed extended resources that a try whose binding failed left
    behind: deleted (its finalizer dropped first), as kube-scheduler's PostFilter deletes it, so that
    the pod is tried anew (``uid``: only that claim, not one made since under the name)."""

    claim: str  # namespace/name
    uid: str


Decision = (Bind | SetPodScheduledFalse | Annotate | Event | GangStatusUpdate | Preempt | Nominate | Deallocate
            | DeleteClaim | Evict | ObjectAnnotate)


@dataclass
class CycleResult:
    decisions: list[Decision] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # pod tried this cycle -> why it is not bound yet
    # Messages of parked jobs, not tried this cycle because nothing they wait for happened: kept by
    # reference, so a cycle that skips hundreds of them copies nothing.
    kept: list[dict[str, str]] = field(default_factory=list)
    next_deadline: float | None = None  # the earliest gang wait that expires, for the caller's timer
    job_errors: dict[str, str] = field(default_factory=dict)  # job id -> traceback of a job that raised
    # What the cycle did with jobs, for the shell's metrics: gangs placed whole (their minimum
    # met), gangs whose wait for members ran out, and preemption plans made (with or without victims).
    gangs_placed: list[str] = field(default_factory=list)
    gangs_timed_out: list[str] = field(default_factory=list)
    preemption_attempts: int = 0
    # Pending pods by queue, as kube-scheduler counts them: tried this cycle (active), woken but
    # backing off, parked until something they wait for happens (unschedulable).
    queues: dict[str, int] = field(default_factory=lambda: {"active": 0, "backoff": 0, "unschedulable": 0})
    # Active pods left for the next cycle, not tried: this one placed its ``Snapshot.pods_per_cycle``.
    deferred: int = 0
    bound: dict[str, str] = field(default_factory=dict)  # pod bound this cycle -> its node
    # The open transaction of the job being tried (None: between jobs): what the job adds through the
    # methods below is recorded there, so rolling the job back takes it off again.
    txn: Txn | None = field(default=None, repr=False, compare=False)

    def decide(self, *decisions: Decision) -> None:
        if decisions:
            self._append(self.decisions, decisions)

    def wait(self, pod: str, message: str) -> None:
        """``pod`` is not bound yet, and says why."""
        waiting = self.waiting
        if self.txn is not None:
            self.txn.record(_Put(waiting, pod, waiting.get(pod)))
        waiting[pod] = message

    def bind(self, pods: list[str], nodes: list[str]) -> None:
        """``pods`` bound to ``nodes``, one undo for them all (a gang's thousands)."""
        bound = self.bound
        if not pods:
            return
        if self.txn is not None:
            self.txn.record(_PutMany(bound, pods, list(map(bound.get, pods))))
        bound.update(zip(pods, nodes, strict=True))

    def gang_placed(self, job: str) -> None:
        self._append(self.gangs_placed, (job,))

    def gang_timed_out(self, job: str) -> None:
        self._append(self.gangs_timed_out, (job,))

    def preemption_attempt(self) -> None:
        self.preemption_attempts += 1
        if self.txn is not None:
            self.txn.record(_Attempted(self))

    def _append(self, items: list[Any], new: Iterable[Any]) -> None:
        if self.txn is not None:
            self.txn.record(_Added(items, len(items)))
        items.extend(new)

    @property
    def pending(self) -> dict[str, str]:
        """Every claimed pod left unbound this cycle -> why."""
        merged: dict[str, str] = {}
        for messages in self.kept:
            merged.update(messages)
        merged.update(self.waiting)
        return merged

    @property
    def binds(self) -> list[Bind]:
        return [d for d in self.decisions if isinstance(d, Bind)]

    @property
    def preempted(self) -> list[Preempt]:
        return [d for d in self.decisions if isinstance(d, Preempt)]

    @property
    def evicted(self) -> list[Evict]:
        return [d for d in self.decisions if isinstance(d, Evict)]

    @property
    def nominations(self) -> list[Nominate]:
        return [d for d in self.decisions if isinstance(d, Nominate)]


# What a job adds to the cycle's result, each with what takes it off again (``CycleResult.txn``).
# Slotted and not frozen: one is made per message of a waiting pod, and a frozen dataclass costs
# several times as much to make (thousands of a gang's members wait at once).

@dataclass(slots=True)
class _Added:
    """Items appended to one of the result's lists: its tail from ``at`` (undone last first, so
    whatever was appended after them is gone already)."""

    items: list[Any]
    at: int

    def undo(self) -> None:
        del self.items[self.at:]


@dataclass(slots=True)
class _Put:
    """A pod's entry in one of the result's mappings as it was (None: there was none)."""

    mapping: dict[str, str]
    key: str
    old: str | None

    def undo(self) -> None:
        if self.old is None:
            self.mapping.pop(self.key, None)
        else:
            self.mapping[self.key] = self.old


@dataclass(slots=True)
class _PutMany:
    """``_Put`` of many pods at once, put back last first."""

    mapping: dict[str, str]
    keys: list[str]
    olds: list[str | None]

    def undo(self) -> None:
        mapping = self.mapping
        for key, old in zip(reversed(self.keys), reversed(self.olds), strict=True):
            if old is None:
                mapping.pop(key, None)
            else:
                mapping[key] = old


@dataclass(slots=True)
class _Attempted:
    """A preemption plan counted."""

    result: CycleResult

    def undo(self) -> None:
        self.result.preemption_attempts -= 1
