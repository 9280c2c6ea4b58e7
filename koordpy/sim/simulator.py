"""Runs the core to quiescence over an in-memory world of Kubernetes objects.

No controller runs beside it, with these exceptions, each doing what kube-controller-manager would:
a batch/v1 Job given with none of its pods and not started yet gets its pods from its template, as
the Job controller would create them (``job_pods``), so that a Job manifest alone can be simulated
as it would run; a pod's generic ephemeral volume gets its claim from its template when the claim
is not given (the ephemeral volume controller); a pod's or a Workload PodGroup's
ResourceClaimTemplate gets its ResourceClaim (the ResourceClaim controller, ``koordpy.sim.claims``);
and a PersistentVolume whose claimRef koordpy sets before a binding is bound to that claim at once
(the PV controller). No provisioner runs: a claim koordpy annotates with
``volume.kubernetes.io/selected-node`` stays unbound, and its pod pending.

The API server's admission is played for what it lets in: a pod not admitted yet (without
``spec.priority``) gets its PriorityClass's priority and its RuntimeClass merged in
(``koordpy.api.runtimeclass``), and a Kubernetes PodGroup its priority; what the admission refuses
is an input error.

A PodDisruptionBudget given without a status gets the ``disruptionsAllowed`` the disruption
controller would count over the pods given (``PodDisruptionBudget.allowed``: minimal, see there);
each pod the simulation evicts then takes one from every budget that covers it, as the controller
would count it once the pod is terminating, so a later preemption in the same run sees the budget
spent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, assert_never

from koordpy.api import kinds
from koordpy.api.disruption import STORE as DISRUPTION_BUDGETS
from koordpy.api.disruption import PodDisruptionBudget
from koordpy.api.dra import DELETE_PROTECTION, EXTENDED_CLAIM, Devices, ResourceClaim
from koordpy.api.errors import ParseError, object_ref
from koordpy.api.kinds import Kind, kind_for, new_stores, passive, snapshot_fields
from koordpy.api.objects import NAMESPACE_NAME_LABEL, Namespace, Pod, PriorityClass
from koordpy.api.owners import Owner, pod_owner_refs
from koordpy.api.raw import Reader
from koordpy.api.runtimeclass import API_VERSION as RUNTIME_CLASS_API
from koordpy.api.runtimeclass import KIND as RUNTIME_CLASS
from koordpy.api.runtimeclass import RuntimeClass
from koordpy.api.runtimeclass import admit as admit_runtime_class
from koordpy.api.storage import (
    ANN_BIND_COMPLETED,
    ANN_SELECTED_NODE,
    ClaimRef,
    PersistentVolumeClaim,
    Storage,
)
from koordpy.api.stores import Stores
from koordpy.core import dialects
from koordpy.core.cluster import Cluster
from koordpy.core.cycle import schedule
from koordpy.core.decisions import (
    Annotate,
    Bind,
    CycleResult,
    Deallocate,
    DeleteClaim,
    DeviceBinding,
    Event,
    Evict,
    GangStatusUpdate,
    Nominate,
    ObjectAnnotate,
    ObjectStatus,
    Preempt,
    SetPodScheduledFalse,
)
from koordpy.core.declarations import Declarations
from koordpy.core.dialects import GroupRow, build_gang, object_statuses, shown_empty, shown_groups
from koordpy.core.messages import absent_gang_kind
from koordpy.core.snapshot import ADMITTED_STALE_GRACE, STALE_GRACE, Snapshot
from koordpy.core.state import SchedulerState
from koordpy.sim.claims import make_claims
from koordpy.sim.errors import InputError as InputError  # re-exported: callers knew it here

# Objects without a creationTimestamp are created this far apart, in document order.
CREATION_STEP = 0.001
DEFAULT_EPOCH = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
MAX_ROUNDS = 10_000



@dataclass
class World(Stores):
    # Every kind's objects, filed by the registry (``Kind.store`` -> key -> parsed object); the
    # names ``Stores`` reads them by are the ones the simulation reads and changes.
    stores: dict[str, dict[str, Any]] = field(default_factory=new_stores)
    ignored: list[str] = field(default_factory=list)
    now: float = DEFAULT_EPOCH
    gone_at: dict[str, float] = field(default_factory=dict)  # pod being deleted -> when its grace period ends
    preempted: list[str] = field(default_factory=list)  # victims, in the order they were evicted
    evicted: dict[str, str] = field(default_factory=dict)  # pod evicted for another reason -> the reason
    nominated: dict[str, str] = field(default_factory=dict)  # pod -> the node it was last nominated to
    created: list[str] = field(default_factory=list)  # what the simulation created as a controller would
    storage: Storage = field(init=False)  # the storage stores, as the core reads them
    devices: Devices = field(init=False)  # the DRA stores, as the core reads them
    # Claim -> what koordpy wrote before a binding: {"selectedNode": node} or {"volume": PV bound to it}.
    volume_writes: dict[str, dict[str, str]] = field(default_factory=dict)
    waiting_volumes: dict[str, str] = field(default_factory=dict)  # pod -> why its binding waits

    @classmethod
    def from_objects(cls, docs: list[tuple[str, dict[str, Any]]]) -> World:
        """``docs`` is ``(source, raw object)`` in the order given; see the module docstring."""
        world = cls()
        stamped = []
        for source, raw in docs:
            if not isinstance(raw, dict):
                raise InputError(source, f"expected a Kubernetes object, got {type(raw).__name__}")
            meta = raw.get("metadata")
            if not isinstance(meta, dict):
                continue  # the model's parse names the field
            reader = Reader(object_ref(raw))
            try:  # the API layer's one reading of times, so that the simulator cannot disagree with it
                ts = reader.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp")
                if ts is not None:
                    _check_range(reader, ts + 1 + len(docs) * CREATION_STEP)  # later objects are stamped after it
            except ParseError as exc:
                raise InputError(source, exc) from exc
            if ts is not None:
                stamped.append(ts)
        base = max([DEFAULT_EPOCH, *(t + 1 for t in stamped)])
        pending_pods: list[tuple[str, dict[str, Any]]] = []
        # The groups the Priority admission sees (Workload PodGroups, CompositePodGroups), with their
        # sources for its errors: (kind, key) -> source.
        admitted_groups: dict[tuple[Kind, str], str] = {}
        jobs: list[tuple[str, dict[str, Any]]] = []
        # What the RuntimeClass admission merges into the pods it lets in (``_admitted``: not those
        # read back from a cluster); the core never reads them.
        runtime_classes: dict[str, RuntimeClass] = {}
        first_seen: dict[tuple[str, str], str] = {}  # (kind, key) -> where it was first defined

        def once(kind: str, key: str, source: str) -> None:
            if (kind, key) in first_seen:
                raise InputError(source, ParseError(f"{kind} {key}", "metadata.name",
                                                    f"defined twice, first in {first_seen[kind, key]}"))
            first_seen[kind, key] = source

        for seq, (source, raw) in enumerate(docs):
            kind_key = (str(raw.get("apiVersion", "")), str(raw.get("kind", "")))
            if passive(*kind_key):  # listed as ignored, not refused
                world.ignored.append(f"{source}: {object_ref(raw)}")
                continue
            if kind_key == (RUNTIME_CLASS_API, RUNTIME_CLASS):
                try:
                    found = RuntimeClass.from_raw(raw)
                except ParseError as exc:
                    raise InputError(source, exc) from exc
                once(RUNTIME_CLASS, found.name, source)
                runtime_classes[found.name] = found
                continue
            kind = kind_for(*kind_key)
            if kind is None:
                raise InputError(source, ParseError(object_ref(raw), "apiVersion/kind",
                                                    f"unsupported {kind_key[0]}/{kind_key[1]}"))
            raw = _with_creation(raw, base + seq * CREATION_STEP)
            try:
                if kind.role == "pod":
                    pending_pods.append((source, raw))
                else:
                    world._add(kind, kind.parse(raw), raw, source, once)
                    if kind.priority_admitted:  # the simulation plays the admission (``World._admit_group``)
                        admitted_groups[kind, kind.store_key(kind.key(raw))] = source
                    if kind_key == ("batch/v1", "Job"):
                        jobs.append((source, raw))
            except ParseError as exc:
                raise InputError(source, exc) from exc
        for (kind, key), source in admitted_groups.items():  # every PriorityClass is known by now
            try:
                world._admit_group(kind, key)
            except ParseError as exc:
                raise InputError(source, exc) from exc
        stamp = base + len(docs) * CREATION_STEP
        owned = _jobs_named_by(r for _, r in pending_pods)
        for source, raw in jobs:
            made = [_with_creation(p, stamp + i * CREATION_STEP) for i, p in enumerate(_unstarted_job_pods(
                raw, owned))]
            stamp += len(made) * CREATION_STEP
            pending_pods += [(source, p) for p in made]
            if made:
                names = ", ".join(p["metadata"]["name"] for p in made)
                world.created.append(f"{source}: {object_ref(raw)} has none of its pods and has not started: "
                                     f"its {len(made)} pod(s) were created from its template ({names}), as "
                                     "the Job controller would")
        # What the live scheduler reports on a pod, the simulation refuses up front (exit 2).
        declarations = Declarations()
        terminating: dict[str, tuple[float, float | None]] = {}
        pod_sources: dict[str, str] = {}
        for source, raw in pending_pods:
            try:
                if not _admitted(raw):
                    raw = admit_runtime_class(raw, runtime_classes)
                pod = Pod.from_raw(raw)
                for claim in _ephemeral_claims(raw, pod, world.storage.claims):
                    world.storage.claims[claim.key] = claim
                    world.created.append(f"{source}: PersistentVolumeClaim {claim.key} was created from the "
                                         f"ephemeral volume of Pod {pod.key}, as the ephemeral volume controller "
                                         "would")
                once("Pod", pod.key, source)
                pod = world._admit(pod)
                _, wrong = declarations.check(pod.key, pod, world.stores, ())
                if wrong is not None:
                    raise InputError(source, wrong)
                pod_owner_refs(pod)  # refused here; the live scheduler treats such a pod as one of its own
                if pod.deleting:
                    terminating[pod.key] = _deletion(raw, pod)
            except ParseError as exc:
                raise InputError(source, exc) from exc
            world.pods[pod.key] = pod
            pod_sources[pod.key] = source
        world._claims_from_templates({f"Pod {key}": source for key, source in pod_sources.items()}
                                     | {f"{kind.kind} {key}": source for (kind, key), source in admitted_groups.items()
                                        if kind.claim_templates})
        namespaces = world.stores["namespaces"]
        for ns in sorted({p.namespace for p in world.pods.values()} - namespaces.keys()):
            # The pod's namespace exists in any cluster that holds the pod; given no manifest for it,
            # it has only the label the API server gives every namespace.
            namespaces[ns] = Namespace(name=ns, labels={NAMESPACE_NAME_LABEL: ns})
        world.now = stamp
        world._count_budgets()
        for key, (grace, deadline) in terminating.items():
            # Already being deleted when the snapshot was taken: it goes when its grace period
            # ends, as a victim the simulation evicts does, or at its deletionTimestamp if that
            # comes first (that time already counts the grace period from the deletion request).
            ends = world.now + grace
            world.gone_at[key] = ends if deadline is None else max(world.now, min(ends, deadline))
        return world

    def _add(self, kind: Kind, obj: object, raw: dict[str, Any], source: str,
             once: Callable[[str, str, str], None]) -> None:
        """Files ``obj`` (parsed by ``kind``) where the core looks for it (``Kind.store``)."""
        kind.check_only(raw)
        key = kind.key(raw)
        once(kind.unique_as or kind.kind, key, source)
        # An owner without a uid (a hand-written manifest) is found by the uid its pods give.
        self.stores[kind.store][kind.store_key(key)] = obj

    def _count_budgets(self) -> None:
        """The status of each PodDisruptionBudget given without one, as the disruption controller
        would count it over the pods given."""
        budgets: dict[str, PodDisruptionBudget] = self.stores[DISRUPTION_BUDGETS]
        for key, budget in budgets.items():
            if budget.disruptions_allowed is None:
                budgets[key] = budget.model_copy(update={"disruptions_allowed": budget.allowed(self.pods.values())})

    def _spend_budgets(self, victim: Pod) -> None:
        """An evicted pod takes one from each budget that covers it (none from one that lists it in
        ``disruptedPods``: that eviction is counted there already), and from its healthy count when
        the status gives one (a terminating pod is not healthy)."""
        budgets: dict[str, PodDisruptionBudget] = self.stores[DISRUPTION_BUDGETS]
        for key, budget in budgets.items():
            if not budget.covers(victim):
                continue
            update: dict[str, int] = {}
            if victim.name not in budget.disrupted_pods:
                update["disruptions_allowed"] = max(0, (budget.disruptions_allowed or 0) - 1)
            if budget.current_healthy is not None:
                update["current_healthy"] = max(0, budget.current_healthy - 1)
            if update:
                budgets[key] = budget.model_copy(update=update)

    def _claims_from_templates(self, sources: dict[str, str]) -> None:
        """The claims the ResourceClaim controller makes from templates (``koordpy.sim.claims``);
        ``sources``: ``Pod ns/name`` / ``<group kind> ns/name`` -> where it was given. The groups are
        those of the kinds the controller makes claims for (``Kind.claim_templates``)."""
        for kind in kinds.KINDS:
            if kind.claim_templates:
                made = make_claims(list(self.pods.values()), self.stores[kind.store], self.devices.claims,
                                   self.devices.templates, kind.kind)
                self.pods.update(made.pods)
                for _, whose, said in made.claims:
                    self.created.append(f"{sources.get(whose, whose)}: {said}")

    def _admission_class(self, class_name: str, what: str) -> PriorityClass | None:
        """The PriorityClass the Priority admission plugin takes a priority from: the one named
        (refusing ``what`` when it does not exist), else the global default (the lowest, if several
        claim it), else None (priority 0)."""
        if class_name:
            pc = self.priority_classes.get(class_name)
            if pc is None:
                raise ParseError(what, "spec.priorityClassName", f"no PriorityClass named {class_name!r}")
            return pc
        return next((c for c in sorted(self.priority_classes.values(), key=lambda c: c.value) if c.global_default),
                    None)

    def _admit(self, pod: Pod) -> Pod:
        """What the Priority admission plugin does to a pod on its way in."""
        if pod.priority is not None:
            return pod
        pc = self._admission_class(pod.priority_class_name, f"Pod {pod.key}")
        if pc is None:
            return pod.model_copy(update={"priority": 0})
        return pod.model_copy(update={"priority": pc.value,
                                      "preemption_policy": pod.preemption_policy or pc.preemption_policy})

    def _admit_group(self, kind: Kind, key: str) -> None:
        """What the Priority admission plugin does to a Workload PodGroup or a CompositePodGroup
        (``kind``) on its way in (v1.37, for both alike, as for pods): no ``priority`` given, it gets
        its PriorityClass's value, or the global default class (named in it) and its value, or 0; a
        class that does not exist refuses the group. A ``priority`` given is kept (a group read back
        from a cluster was admitted)."""
        store = self.stores[kind.store]
        group = store[key]
        what = f"{kind.kind} {key}"
        named = group.priority_class_name
        if group.preemption_policy is not None and (not named or named in self.priority_classes):
            # With PodGroupPreemptionPolicy the admission computes the group's policy from its class
            # (PreemptLowerPriority without one) and refuses a group that says otherwise.
            pc = self._admission_class(named, what)
            computed = pc.preemption_policy if pc is not None else "PreemptLowerPriority"
            if group.preemption_policy != computed:
                why = f"PriorityClass {pc.name!r}" if pc is not None else "no PriorityClass"
                raise ParseError(what, "spec.preemptionPolicy",
                                 f"{group.preemption_policy} differs from the {computed} the Priority admission "
                                 f"computes from {why}, and is refused")
        if group.priority is not None:
            return
        pc = self._admission_class(group.priority_class_name, what)
        update = {"priority": 0} if pc is None else {"priority": pc.value, "priority_class_name": pc.name}
        store[key] = group.model_copy(update=update)

    def snapshot(self, scheduler_names: frozenset[str]) -> Snapshot:
        return Snapshot(scheduler_names=scheduler_names, **snapshot_fields(self.stores))

    def absent_group_kinds(self) -> list[str]:
        """A warning for each kind of PodGroup that pods name as their gang (in its dialect's words)
        while the input holds no object of that kind at all, and that no pod declares without one
        (a gang of annotations): a dump that left the kind out, most likely by a bare ``kubectl get
        podgroups``, which on a v1.37 cluster lists Kubernetes' own PodGroups only. Those pods wait
        for their PodGroup, "not found"."""
        out: list[str] = []
        snapshot: Snapshot | None = None
        for dialect in dialects.GANGS:
            gang_kinds = [k for k in kinds.KINDS if k.gang and k.role in dialect.roles]
            if not gang_kinds or any(self.stores[k.store] for k in gang_kinds):
                continue
            named: dict[str, list[Pod]] = {}
            for p in self.pods.values():
                key = None if p.terminal else dialect.member(p, None)
                if key is not None:
                    named.setdefault(key, []).append(p)
            if not named:
                continue
            snapshot = snapshot or self.snapshot(frozenset())
            missing = {k: pods for k, pods in sorted(named.items())
                       if (gang := build_gang(k, pods, snapshot)) is None or gang.config is None}
            if not missing:
                continue
            kind = gang_kinds[0]
            shown = ", ".join(list(missing)[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            pods = sum(len(v) for v in missing.values())
            out.append(absent_gang_kind(pods, kind.kind, kind.group, kind.id, shown))
        return out

    def apply(self, result: CycleResult) -> int:
        """Carries out a cycle's decisions; returns how many changed the world's scheduling state."""
        changes = 0
        for d in result.decisions:
            match d:
                case Bind():
                    if d.devices is not None:
                        changes += self._write_claims(d.devices)
                    if d.volumes is not None:
                        changes += self._prebind(d)
                        if not all(self.storage.claims[c].bound for c in d.volumes.claims if c in self.storage.claims):
                            continue  # kube-scheduler's PreBind waits for them: the pod is not bound
                    self.waiting_volumes.pop(d.pod, None)
                    self.pods[d.pod] = self.pods[d.pod].model_copy(update={"node_name": d.node})
                    changes += 1
                case Annotate():
                    pod = self.pods[d.pod]
                    annotations = {k: v for k, v in pod.annotations.items() if k != d.key}
                    if d.value is not None:
                        annotations[d.key] = d.value
                    self.pods[d.pod] = pod.model_copy(update={"annotations": annotations})
                    changes += 1
                case ObjectAnnotate():
                    store = self.stores[d.kind.store]
                    obj = store.get(d.key)
                    if obj is not None:
                        annotations = {k: v for k, v in obj.annotations.items() if k != d.annotation}
                        if d.value is not None:
                            annotations[d.annotation] = d.value
                        store[d.key] = obj.model_copy(update={"annotations": annotations})
                case SetPodScheduledFalse():
                    self.pods[d.pod] = self.pods[d.pod].model_copy(update={"unschedulable_message": d.message})
                case Preempt():
                    # What the shell does: DisruptionTarget, then a deletion that takes the grace period.
                    victim = self.pods.get(d.pod)
                    if victim is not None and not victim.deleting:
                        self.pods[d.pod] = victim.model_copy(update={"deleting": True, "preempted": True})
                        self._spend_budgets(victim)
                        self.gone_at[d.pod] = self.now + victim.grace_period
                        self.preempted.append(d.pod)
                        changes += 1
                case Evict():
                    # As for a victim: DisruptionTarget (another reason), then a deletion that takes
                    # the grace period.
                    member = self.pods.get(d.pod)
                    if member is not None and not member.deleting:
                        self.pods[d.pod] = member.model_copy(update={"deleting": True})
                        self.gone_at[d.pod] = self.now + member.grace_period
                        self.evicted[d.pod] = d.reason
                        changes += 1
                case Nominate():
                    nominee = self.pods.get(d.pod)
                    if nominee is not None and nominee.nominated_node_name != d.node:
                        self.pods[d.pod] = nominee.model_copy(update={"nominated_node_name": d.node})
                        if d.node:
                            self.nominated[d.pod] = d.node
                        changes += 1
                case GangStatusUpdate():
                    store = self._statuses_of(d.status.kind)
                    store[d.object_key] = d.status.applied(store[d.object_key])
                case Deallocate():
                    changes += self._deallocate(d)
                case DeleteClaim():
                    if self.devices.claims.pop(d.claim, None) is not None:
                        changes += 1
                case Event():
                    pass  # collected by ``simulate``
                case _:
                    assert_never(d)
        return changes

    def _deallocate(self, d: Deallocate) -> int:
        """DynamicResources' PostFilter write, as the API server takes it: the claim, if still the one the
        core saw and allocated, loses its allocation, its reservations and its devices' status (the
        finalizer stays); or, when ``unreserve``, its PodGroup's reservation only."""
        claim = self.devices.claims.get(d.claim)
        if claim is None or claim.allocation is None or (d.uid and claim.uid != d.uid):
            return 0
        if d.unreserve:  # the PodGroup's reservation only (a strategic merge delete by its uid)
            group = d.group
            assert group is not None
            kept = tuple(c for c in claim.reserved_for if not (c.resource == group.resource and c.name == group.name
                                                              and c.api_group == group.api_group))
            self.devices.claims[d.claim] = replace(claim, reserved_for=kept)
            return int(kept != claim.reserved_for)
        self.devices.claims[d.claim] = replace(claim, allocation=None, reserved_for=(), device_conditions=())
        return 1

    def _statuses_of(self, kind: Kind) -> dict[str, Any]:
        """The objects of ``kind`` whose status the core writes, by key: the kind's registry store."""
        store: dict[str, Any] = self.stores[kind.store]
        return store

    def _prebind(self, d: Bind) -> int:
        """PreBind's writes, and what the PV controller does with a claimRef at once; no provisioner
        runs, so a claim given a node stays unbound. Returns how many objects changed."""
        assert d.volumes is not None
        changes = 0
        claims, pvs = self.storage.claims, self.storage.volumes
        for claim_key, pv_name in (*d.volumes.static, *d.volumes.prebound):
            claim, pv = claims.get(claim_key), pvs.get(pv_name)
            if claim is None or pv is None or claim.bound:
                continue
            pvs[pv_name] = pv.model_copy(update={"claim_ref": ClaimRef(namespace=claim.namespace, name=claim.name,
                                                                       uid=claim.uid), "phase": "Bound"})
            claims[claim_key] = claim.model_copy(update={
                "volume_name": pv_name, "phase": "Bound",
                "annotations": {**claim.annotations, ANN_BIND_COMPLETED: "yes"}})
            self.volume_writes[claim_key] = {"volume": pv_name}
            changes += 1
        for claim_key in d.volumes.provision:
            claim = claims.get(claim_key)
            if claim is None or claim.selected_node == d.volumes.node:
                continue
            claims[claim_key] = claim.model_copy(update={"annotations": {**claim.annotations,
                                                                          ANN_SELECTED_NODE: d.volumes.node}})
            self.volume_writes[claim_key] = {"selectedNode": d.volumes.node}
            changes += 1
        unbound = [c for c in d.volumes.claims if c in claims and not claims[c].bound]
        if unbound:
            self.waiting_volumes[d.pod] = (
                f"waiting for PersistentVolumeClaim(s) {', '.join(unbound)} to be bound: "
                f"{ANN_SELECTED_NODE}={d.volumes.node} is set for their provisioner, which does not run in a "
                "simulation")
        return changes

    def _write_claims(self, binding: DeviceBinding) -> int:
        """DynamicResources' PreBind writes, as the API server takes them: the finalizer, the allocation
        (when this cycle made it) and the pod in ``status.reservedFor``."""
        claims, changes = self.devices.claims, 0
        for write in binding.claims:
            claim = claims.get(write.claim)
            if claim is None:
                continue
            updated = claim
            if write.allocation is not None and claim.allocation is None:
                updated = replace(updated, allocation=write.allocation)
            if write.consumer not in claim.reserved_for:
                updated = replace(updated, reserved_for=(*updated.reserved_for, write.consumer))
            if DELETE_PROTECTION not in claim.finalizers:
                updated = replace(updated, finalizers=(*claim.finalizers, DELETE_PROTECTION))
            if updated != claim:
                claims[write.claim] = updated
                changes += 1
        ext = binding.extended
        if ext is not None:
            # The claim for the pod's DRA-backed extended resources, created as kube-scheduler creates it
            # (named here without the API server's random suffix), then the pod's status names it.
            name = ext.generate_name.rstrip("-")
            claims[f"{ext.namespace}/{name}"] = ResourceClaim(
                ext.namespace, name, uid=f"uid-{ext.namespace}-{name}", spec=ext.spec, allocation=ext.allocation,
                reserved_for=(ext.consumer,), finalizers=(DELETE_PROTECTION,), owner=("Pod", ext.pod, ext.pod_uid),
                annotations={EXTENDED_CLAIM: "true"})
            key = f"{ext.namespace}/{ext.pod}"
            self.pods[key] = self.pods[key].model_copy(update={"extended_claim": name})
            changes += 1
        return changes

    def next_deletion(self) -> float | None:
        return min(self.gone_at.values(), default=None)

    def finish_deletions(self) -> None:
        """Pods whose grace period has ended are gone; so are their reservations of claims, and the
        allocation of a claim nobody holds any more (what the ResourceClaim controller does)."""
        gone = [k for k, t in self.gone_at.items() if t <= self.now]
        for key in gone:
            del self.gone_at[key]
            self.pods.pop(key, None)
        if gone:
            self._release_claims()

    def _release_claims(self) -> None:
        claims = self.devices.claims
        for key, claim in list(claims.items()):
            if (claim.annotations.get(EXTENDED_CLAIM) == "true" and claim.owner is not None
                    and f"{claim.namespace}/{claim.owner[1]}" not in self.pods):
                del claims[key]  # the garbage collector's: its owner, the pod, is gone
                continue
            if not claim.reserved_for:
                continue
            left = tuple(c for c in claim.reserved_for
                         if c.resource != "pods" or f"{claim.namespace}/{c.name}" in self.pods)
            if len(left) == len(claim.reserved_for):
                continue
            # The last consumer gone, the controller deallocates what a scheduler allocated (the claim
            # carries its finalizer) and drops the finalizer; a driver's own allocation stays.
            ours = DELETE_PROTECTION in claim.finalizers and not left
            claims[key] = replace(claim, reserved_for=left, allocation=None if ours else claim.allocation,
                                  finalizers=tuple(f for f in claim.finalizers if f != DELETE_PROTECTION)
                                  if ours else claim.finalizers)

    def allocations(self) -> dict[str, list[str]]:
        """Every allocated claim -> its devices (``driver/pool/device``)."""
        return {key: [r.device_id for r in claim.allocation.results]
                for key, claim in sorted(self.devices.claims.items()) if claim.allocation is not None}

    def pod_devices(self) -> dict[str, list[str]]:
        """Each bound pod with claims -> the devices its claims hold."""
        out: dict[str, list[str]] = {}
        for pod in self.pods.values():
            if not pod.node_name or not (pod.claims or pod.extended_claim):
                continue
            found: list[str] = []
            names = [entry.claim or pod.claim_statuses.get(entry.name, "") for entry in pod.claims]
            for name in [*names, pod.extended_claim]:
                claim = self.devices.claims.get(f"{pod.namespace}/{name}") if name else None
                if claim is not None and claim.allocation is not None:
                    found += [r.device_id for r in claim.allocation.results]
            out[pod.key] = found
        return out


@dataclass
class SimulationResult:
    bound: dict[str, str]
    pending: dict[str, str]
    preempted: list[str]
    # What each dialect reports of the objects that declare gangs, by key (the JSON's "podgroups").
    groups: dict[str, dict[str, Any]]
    # The topology objects' statuses as the live scheduler writes them (a ClusterNetworkTopology's
    # detailStatus, each HyperNode's nodeCount and problems), as their dialects decide them.
    statuses: list[ObjectStatus]
    events: list[Event]
    rounds: int
    ignored: list[str]
    truncated: bool = False  # stopped at MAX_ROUNDS before the world settled: the result is partial
    nominated: dict[str, str] = field(default_factory=dict)  # pod -> node, as nominated by preemption
    volumes: dict[str, dict[str, str]] = field(default_factory=dict)  # claim -> what koordpy wrote on it
    # With DRA objects: every allocated ResourceClaim -> its devices, and each bound pod's devices.
    allocations: dict[str, list[str]] | None = None
    devices: dict[str, list[str]] = field(default_factory=dict)
    # The heading the table shows each of ``groups`` under, as its dialect gives it.
    group_headings: dict[str, str] = field(default_factory=dict)
    # The row the table shows each of ``groups`` as, in its dialect's words.
    group_rows: dict[str, GroupRow] = field(default_factory=dict)
    # Pods evicted for another reason than preemption (a stale gang's members) -> the reason.
    evicted: dict[str, str] = field(default_factory=dict)

    def shown(self) -> dict[str, Any]:
        """The topology objects' statuses by the JSON key each dialect reports them under (by
        object name where there are several), and what a dialect with none reports."""
        out = shown_empty()
        for s in self.statuses:
            if s.keyed:
                out[s.section] = {**(out.get(s.section) or {}), s.name: s.shown}
            else:
                out[s.section] = s.shown
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "bound": self.bound,
            "pending": self.pending,
            "preempted": self.preempted,
            "evicted": self.evicted,
            "nominated": self.nominated,
            "podgroups": self.groups,
            "events": [{"kind": e.kind, "object": e.obj, "type": e.type, "reason": e.reason,
                        "message": e.message} for e in self.events],
            "rounds": self.rounds,
            "truncated": self.truncated,
            **self.shown(),
            **({"volumes": self.volumes} if self.volumes else {}),
            **({"allocations": self.allocations, "devices": self.devices} if self.allocations is not None else {}),
        }


def simulate(world: World, scheduler_names: frozenset[str] = frozenset({"koordpy"}),
             incremental: bool = True, default_min_runtime: float = 0.0,
             default_preemption_delay: float = 0.0, stale_grace: float = STALE_GRACE,
             admitted_stale_grace: float = ADMITTED_STALE_GRACE) -> SimulationResult:
    """Cycles until nothing changes; when only gang waits remain, the clock jumps to the next expiry.

    ``incremental=False`` drops the core's standing view before every cycle, so each one is
    computed from the whole snapshot: the reference the incremental view is tested against. The
    defaults are the settings' ``defaultPreemptMinRuntimeSeconds``, ``defaultPreemptionDelaySeconds``
    ``staleGangGracePeriodSeconds`` (``stale_grace``) and ``admittedStaleGangGracePeriodSeconds``
    (``admitted_stale_grace``)."""
    state = SchedulerState()
    bound: dict[str, str] = {}
    events: list[Event] = []
    result = CycleResult()
    rounds = 0
    truncated = False
    while rounds < MAX_ROUNDS:
        rounds += 1
        if not incremental:
            state.view = None
        snap = world.snapshot(scheduler_names)
        snap.default_min_runtime, snap.default_preemption_delay = default_min_runtime, default_preemption_delay
        snap.stale_grace, snap.admitted_stale_grace = stale_grace, admitted_stale_grace
        result = schedule(snap, state, world.now)
        events.extend(d for d in result.decisions if isinstance(d, Event))
        applied = world.apply(result)
        # A bind whose PreBind still waits for a claim to be provisioned leaves the pod unbound.
        bound.update({d.pod: d.node for d in result.binds if d.pod not in world.waiting_volumes})
        if applied or result.deferred:  # jobs left over by a cycle's podsPerCycle go next, at once
            continue
        # Nothing changes until a victim's grace period ends or a gang's wait expires: the clock
        # jumps to whichever comes first.
        wakes = [t for t in (result.next_deadline, world.next_deletion()) if t is not None and t > world.now]
        due = world.next_deletion()
        if due is not None and due <= world.now:
            world.finish_deletions()
            continue
        if wakes:
            world.now = min(wakes)
            world.finish_deletions()
            continue
        break
    else:
        truncated = True
    claimed = world.snapshot(scheduler_names)
    last = result.pending
    pending = {p.key: world.waiting_volumes.get(p.key) or last.get(p.key, p.unschedulable_message)
               for p in claimed.pods if claimed.claims(p)}
    # What the API server says of a gated pod (PodScheduled=False, reason SchedulingGated).
    pending.update({p.key: f"SchedulingGated: Scheduling is blocked due to non-empty scheduling gates "
                           f"({', '.join(p.scheduling_gates)})" for p in claimed.pods if claimed.gated(p)})
    groups, headings, rows = shown_groups(claimed)
    # The core's view holds the tree for these very nodes; a fresh build is for a run that had no cycle.
    cluster = state.view.cluster if state.view is not None and state.view.cluster is not None else Cluster(claimed)
    return SimulationResult(
        bound={k: v for k, v in bound.items() if k in world.pods}, pending=pending, preempted=list(world.preempted),
        groups=groups, group_headings=headings, group_rows=rows,
        statuses=object_statuses(cluster.trees),
        events=events, rounds=rounds, ignored=world.ignored, truncated=truncated,
        nominated=dict(world.nominated), volumes=dict(world.volume_writes), evicted=dict(world.evicted),
        allocations=None if world.devices.empty() else world.allocations(), devices=world.pod_devices(),
    )


def _admitted(raw: dict[str, Any]) -> bool:
    """Whether the pod was let in by an API server already (read back from a cluster): the Priority
    admission, on in every cluster, gave it ``spec.priority``. Its spec then holds what the
    RuntimeClass admission merged in when it was created, and is not merged again (its class may
    have changed since, or be left out of the dump)."""
    spec = raw.get("spec")
    return isinstance(spec, dict) and spec.get("priority") is not None


def job_pods(job: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the Job controller creates for a new batch/v1 Job: ``min(parallelism, completions)``
    of them from ``spec.template``, with the controller's labels (and the completion index of an
    Indexed Job), owned by the Job (its ``metadata.uid``, if given). The controller names them
    ``<job>-<random>``; here they are ``<job>-<i>``, so that a simulation's answer is the same every
    time (``tests/integration`` compares a live Job's pods with them by the nodes they are on)."""
    meta, spec = job.get("metadata") or {}, job.get("spec") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace") or "default")
    count = Owner.from_raw(job, "batch/v1", "Job").replicas or 0
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    out = []
    for i in range(count):
        labels = {**(tmeta.get("labels") or {}), "batch.kubernetes.io/job-name": name, "job-name": name}
        annotations = dict(tmeta.get("annotations") or {})
        if spec.get("completionMode") == "Indexed":
            annotations["batch.kubernetes.io/job-completion-index"] = str(i)
            labels["batch.kubernetes.io/job-completion-index"] = str(i)
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{name}-{i}", "namespace": namespace, "labels": labels, "annotations": annotations,
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                 "uid": str(meta.get("uid") or ""), "controller": True,
                                 "blockOwnerDeletion": True}]},
            "spec": dict(template.get("spec") or {})})
    return out


def job_started(job: dict[str, Any]) -> bool:
    """Whether the Job controller has started the Job (``status.startTime``) or holds it suspended:
    then it has made its pods already, or makes none."""
    return bool((job.get("status") or {}).get("startTime")) or (job.get("spec") or {}).get("suspend") is True


def _jobs_named_by(pods: Iterable[dict[str, Any]]) -> set[tuple[str, str]]:
    """(namespace, name) of every Job a given pod names as its owner."""
    out = set()
    for p in pods:
        pmeta: dict[str, Any] = p["metadata"] if isinstance(p.get("metadata"), dict) else {}
        for ref in pmeta.get("ownerReferences") or []:
            if isinstance(ref, dict) and ref.get("kind") == "Job":
                out.add((str(pmeta.get("namespace") or "default"), str(ref.get("name"))))
    return out


def _unstarted_job_pods(job: dict[str, Any], owned: set[tuple[str, str]]) -> list[dict[str, Any]]:
    """``job_pods`` for a Job the controller has not started when no given pod names it as its owner
    (``owned``, from ``_jobs_named_by``); else none (its pods are given, or gone)."""
    meta = job.get("metadata") or {}
    if job_started(job) or (str(meta.get("namespace") or "default"), str(meta.get("name"))) in owned:
        return []
    return job_pods(job)


def _deletion(raw: dict[str, Any], pod: Pod) -> tuple[float, float | None]:
    """A terminating pod's grace period (``metadata.deletionGracePeriodSeconds``, which the API
    server sets on deletion, else the pod's ``terminationGracePeriodSeconds``, else 30 s) and its
    ``deletionTimestamp``."""
    meta = raw["metadata"]
    r = Reader(f"Pod {pod.key}")
    grace = r.integer(meta.get("deletionGracePeriodSeconds"), "metadata.deletionGracePeriodSeconds", bits=64,
                      minimum=0)
    deadline = r.timestamp(meta.get("deletionTimestamp"), "metadata.deletionTimestamp")
    return (pod.grace_period if grace is None else float(grace)), deadline


def _check_range(reader: Reader, ts: float) -> None:
    try:
        datetime.fromtimestamp(ts, tz=UTC)
    except (OverflowError, ValueError, OSError) as exc:
        raise reader.fail("metadata.creationTimestamp", "out of range (the simulation needs to stamp objects "
                          "created after it)") from exc


def _with_creation(raw: dict[str, Any], ts: float) -> dict[str, Any]:
    meta = raw.get("metadata")
    if not isinstance(meta, dict) or meta.get("creationTimestamp"):
        return raw
    stamp = datetime.fromtimestamp(ts, tz=UTC).isoformat().replace("+00:00", "Z")
    return {**raw, "metadata": {**meta, "creationTimestamp": stamp}}


def _ephemeral_claims(raw: dict[str, Any], pod: Pod,
                      claims: dict[str, PersistentVolumeClaim]) -> list[PersistentVolumeClaim]:
    """The claims the ephemeral volume controller would create for the pod's generic ephemeral
    volumes (``<pod>-<volume>``, from ``volumeClaimTemplate``, owned by the pod), for those not given."""
    spec = raw.get("spec") if isinstance(raw.get("spec"), dict) else {}
    out = []
    for v in (spec or {}).get("volumes") or []:
        if not isinstance(v, dict) or not isinstance(v.get("ephemeral"), dict):
            continue
        name = f"{pod.name}-{v.get('name')}"
        if f"{pod.namespace}/{name}" in claims:
            continue
        template = v["ephemeral"].get("volumeClaimTemplate") or {}
        if not isinstance(template, dict):
            raise ParseError(f"Pod {pod.key}", f"spec.volumes[{v.get('name')}].ephemeral.volumeClaimTemplate",
                             f"must be a mapping, got {type(template).__name__}")
        tmeta = template.get("metadata") if isinstance(template.get("metadata"), dict) else {}
        out.append(PersistentVolumeClaim.from_raw({
            "apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {**(tmeta or {}), "name": name, "namespace": pod.namespace,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod.name, "uid": pod.uid,
                                              "controller": True, "blockOwnerDeletion": True}]},
            "spec": template.get("spec") or {}}))
    return out
