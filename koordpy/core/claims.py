"""The core's device seam: how a pod's ResourceClaims meet nodes, gangs and the cycle, as kube-scheduler
v1.37's DynamicResources plugin has them (PreFilter, Filter, Reserve, the PreBind writes).

Belongs here: ``DeviceRules``, the device state one cycle reads (the pools of the snapshot's
ResourceSlices, the devices in use, the allocator over them, this cycle's assumed allocations), which
the standing view builds from ``Snapshot.devices`` as it builds the volume rules from the storage
objects; a pod's claims resolved as PreFilter resolves them (a claim by name, a template's claim through
``status.resourceClaimStatuses``; a claim not there yet, being deleted, owned by another pod, reserved
for 256 others, a class missing: reasons that rule out every node) and whom each is reserved for (the
pod, or the Workload PodGroup whose identical entry it repeats: ``bind_to``, over the groups the view
hands in, ``groups``); per node, whether the pod's claims
can be allocated there (Filter); how many of a job's pods a node can take for their devices (the
topology search's cap); the device counts NodeResourcesFit scores a DRA-backed extended resource by on a
node that leaves it to DRA (``extended_room``); Reserve (each placed pod's claims allocated on its node
in rank order, every change recorded in the job's transaction so that a job rolled back or a gang that
waits holds no device) and what PreBind writes (``DeviceBinding``); what a preemption victim's devices
free. Not here: which devices a claim gets (``koordpy.devices``, the allocator), parsing
(``koordpy.api.dra``), words (``koordpy.core.messages``), carrying out the writes (the shells).

A reason that rules out every node at once is a ``PreFilterReason``, as the volume rules' are: the
message names it without a node count, as kube-scheduler's does. The allocator's ``DeviceError`` (a
CEL error, "All" from a pool being updated or invalid, a search past its time bound) is kube-scheduler's
Filter error status, a ``FilterError``: the pod's attempt ends on every node, no preemption, its
condition ``SchedulerError``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from koordpy.api.dra import (
    DELETE_PROTECTION,
    EXTENDED_CLAIM,
    RESERVED_FOR_MAX,
    Allocation,
    ClaimGroup,
    ClaimSpec,
    Consumer,
    DeviceClass,
    Devices,
    DeviceTaintRule,
    PodClaim,
    ResourceClaim,
    ResourceSlice,
)
from koordpy.api.objects import ContainerExtended, Node, Pod
from koordpy.core import extended
from koordpy.core.cluster import UNBOUNDED
from koordpy.core.decisions import ClaimWrite, DeviceBinding, ExtendedClaim
from koordpy.core.messages import CLAIM_UNAVAILABLE as CLAIM_UNAVAILABLE
from koordpy.core.messages import NO_DEVICES as NO_DEVICES
from koordpy.core.messages import (
    alpha_field,
    class_missing,
    device_claim_deleting,
    device_claim_extended_left,
    device_claim_in_use,
    device_claim_not_created,
    device_claim_not_found,
    device_claim_not_owned,
    device_claim_unreadable,
    device_error,
    unallocatable,
)
from koordpy.core.txn import Txn
from koordpy.core.verdicts import FilterError, PreFilterReason
from koordpy.devices import gangsearch
from koordpy.devices.allocator import Allocator, binding_broken
from koordpy.devices.counts import Counts, Kind, plain
from koordpy.devices.gangsearch import Member
from koordpy.devices.pools import ClassDevices, Pools
from koordpy.devices.reasons import DeviceError, GangStopped, Unallocatable
from koordpy.devices.state import InUse

_VERSIONS = itertools.count(1)
_V = TypeVar("_V")
# Search steps the topology search's count may spend per node on searching pods' devices as a whole
# (``DeviceRules._together``, all its counts together): it runs once per node while its devices in use stand.
CAPACITY_STEPS = 5_000
WORKLOAD_GROUP = "scheduling.k8s.io"  # a Workload PodGroup's API group, in the consumers it is reserved for


@dataclass(frozen=True)
class PodClaims:
    """A pod's claims as PreFilter resolves them: every claim it uses in its order, those still to
    allocate, or the reason no node can take it."""

    prefilter: PreFilterReason | None = None
    claims: tuple[ResourceClaim, ...] = ()
    fresh: tuple[ResourceClaim, ...] = ()  # not allocated: the allocator's work
    consumers: tuple[Consumer, ...] = ()  # whom each claim is reserved for: the pod, or its PodGroup
    names: tuple[str, ...] = ()  # each claim's name in the pod's spec.resourceClaims
    unbindable: bool = False  # an allocated claim's devices will not bind (failed, or timed out by now)
    # The DRA-backed extended resources it asks for, (resource, quantity) in name order, and each
    # container's such requests: the special claim a node that leaves them to DRA gets (``special``).
    extended: tuple[tuple[str, int], ...] = ()
    containers: tuple[ContainerExtended, ...] = ()

    def key(self) -> tuple[object, ...]:
        """What a node's answer depends on: how the pod names its claims, the claims allocated already
        (their node selectors, whether they will bind), the specs of those to allocate, the extended
        resources it asks for."""
        return self._key

    @functools.cached_property
    def _key(self) -> tuple[object, ...]:
        return (self.names, tuple(c.key for c in self.allocated), _specs_key(self.fresh), self.unbindable,
                self.extended, self.containers)

    def named(self, reason: Unallocatable) -> str:
        """``reason`` in words, naming the claim as the pod does (pods of one template share the words)."""
        if reason.claim == SPECIAL_KEY:
            return unallocatable(reason, extended.SPECIAL)
        entry = next((n for c, n in zip(self.claims, self.names, strict=True) if c.key == reason.claim), reason.claim)
        return unallocatable(reason, entry)

    @property
    def any(self) -> bool:
        """Whether the pod uses devices at all (claims, or extended resources DRA may serve)."""
        return bool(self.claims or self.extended)

    @property
    def allocated(self) -> tuple[ResourceClaim, ...]:
        return tuple(c for c in self.claims if c.allocation is not None)


# The special claim while in memory: no namespace, the name no object can have (``extended.SPECIAL``).
SPECIAL_KEY = f"/{extended.SPECIAL}"


def admits(allocation: Allocation, node: Node) -> bool:
    """Whether the allocation's node selector lets a pod using it run on ``node`` (none: every node)."""
    terms = allocation.node_selector
    return terms is None or any(t.matches(node.name, node.labels) for t in terms)


def consumer_of(pod: Pod) -> Consumer:
    return Consumer("pods", pod.name, pod.uid)


def group_name(pod: Pod) -> str:
    """The Workload PodGroup the pod names by ``podGroupName`` ("" none): the group its claims may be
    bound to, and whose claims it may use."""
    return pod.scheduling_group if pod.scheduling_group and not pod.scheduling_group_other else ""


def bind_to(pod: Pod, group: ClaimGroup | None, entry: PodClaim) -> Consumer:
    """Whom the claim of the pod's ``entry`` is reserved for (KEP-5729, ``resourceclaim.BindTo``): the
    pod's Workload PodGroup (``group``, None: it names none, or one without claims) when the entry is
    identical to one of the group's own (same name, same claim or template), whether it names a claim
    or a template; else the pod."""
    if group is not None and entry in group.claims:
        return Consumer("podgroups", group_name(pod), group.uid, WORKLOAD_GROUP)
    return consumer_of(pod)


def _made_for(claim: ResourceClaim, pod: Pod) -> bool:
    """Whether a template's claim was made for the pod or for the Workload PodGroup it names
    (``resourceclaim.IsForPod`` with PodGroup owners accepted: the pod knows its group by name only)."""
    owner = claim.owner
    if owner is None:
        return False
    if owner[0] == "Pod" and owner[1] == pod.name:
        return not (pod.uid and owner[2] and owner[2] != pod.uid)
    return owner[0] == "PodGroup" and bool(group_name(pod)) and owner[1] == group_name(pod)


def _holds(claim: ResourceClaim, consumer: Consumer) -> bool:
    """Whether the claim is reserved for ``consumer`` already: a pod by its uid (when both say one), a
    Workload PodGroup by its name (``resourceclaim.IsReservedForPod``: a pod does not know its
    group's uid, and a reservation is added only where none names the group)."""
    if consumer.resource == "podgroups":
        return any(c.resource == "podgroups" and c.api_group == consumer.api_group and c.name == consumer.name
                   for c in claim.reserved_for)
    return any(c.resource == consumer.resource and c.name == consumer.name
               and (not c.uid or not consumer.uid or c.uid == consumer.uid) for c in claim.reserved_for)


class DeviceRules:
    """The DynamicResources filters over one snapshot's DRA objects. ``reserve`` lays this cycle's
    allocations over the claims (and the devices in use), undone with the job's transaction; the view
    builds the rules again from the next snapshot, whose claims the shells give with the allocations
    they are writing, so what is in flight is never handed out twice."""

    def __init__(self, devices: Devices, previous: DeviceRules | None = None,
                 groups: Mapping[str, ClaimGroup] | None = None) -> None:
        self.devices = devices
        # The groups members' claims may be bound to, by namespace/name (``bind_to``); the view
        # builds the rules again when they change, so every answer cached here stands with them.
        self.groups: Mapping[str, ClaimGroup] = groups if groups is not None else {}
        self.classes = dict(devices.classes)
        self.backed = extended.backing(self.classes)  # extended resource -> the class that backs it
        # Each pod's special claim once it exists (annotated, the pod its controller owner): pod key -> claim.
        self.specials = {f"{c.namespace}/{c.owner[1]}": c for c in devices.claims.values()
                         if c.owner is not None and c.owner[0] == "Pod" and c.annotations.get(EXTENDED_CLAIM) == "true"}
        self._special: dict[tuple[object, ...], tuple[ResourceClaim, extended.Special]] = {}
        self.claims: dict[str, ResourceClaim] = dict(devices.claims)
        # What the pools are made of, copied: a shell may change its stores in place.
        self._made_of: tuple[dict[str, ResourceSlice], dict[str, DeviceTaintRule], dict[str, DeviceClass]] = (
            dict(devices.slices), dict(devices.taint_rules), self.classes)
        before = previous._made_of if previous is not None else None
        same_pools = before is not None and (_same(self._made_of[0], before[0]) and _same(self._made_of[1], before[1])
                                             and _same(self._made_of[2], before[2]))
        self.pools: Pools
        if previous is not None and same_pools:
            self.pools = previous.pools
        else:
            self.pools = Pools.build(devices, previous.pools if previous is not None else None)
        self.in_use = InUse.from_claims(self.claims.values())
        self.allocator = Allocator(self.pools, self.classes, self.in_use)
        self.version = next(_VERSIONS)  # new with every change: cached answers expire
        self.assumed = False  # Reserve changed the claims: the next snapshot's are what holds
        # Changes made and not undone: a job that waits (its transaction rolled back) or a what-if of
        # preemption leaves the claims as the snapshot gave them, and the rules need not be built
        # again for it (which would wake every parked job with claims, each cycle).
        self._kept = 0
        self.now = 0.0
        self.gang_budget = gangsearch.GANG_BUDGET  # seconds a gang's device search may take (``reserve_together``)
        # Seconds the job being scheduled has searched so far: its placements tried again (prefixes,
        # domains, preemption's what-ifs) share the one budget the setting gives a job (``new_job``).
        self.gang_spent = 0.0
        # What Reserve decided for each pod placed this cycle (its PreBind writes).
        self.bindings: dict[str, DeviceBinding] = {}
        self._loose: Allocator | None = None  # over no device in use (``reasons(loose=True)``)
        # The array counts over the devices in use, and over none (``loose``), made when first asked.
        self._counts: dict[bool, Counts] = {}
        self._plain: dict[tuple[object, ...], Kind | None] = {}  # PodClaims.key -> its plain kind
        self._resolved: dict[str, tuple[Pod, float, PodClaims]] = {}  # pod key -> (pod, now, its claims)
        self._served: dict[str, bool] = {}  # node -> whether any pool's devices may be used there
        # Answers per node, kept while the devices in use there do not change: a node's stamp moves
        # when an allocation pinned to it comes or goes, every node's (``_common``) for one that is not.
        self._stamps: dict[str, int] = {}
        self._common = 0
        # The node object each answer was for: the view keeps these rules while no DRA object changes,
        # and a node whose labels change (a slice's or an allocation's node selector) is a new question.
        self._nodes: dict[str, Node] = {}
        self._shared_pools: set[tuple[str, str]] | None = None  # pools with devices not local to one node
        self._reasons: dict[tuple[object, ...], dict[str, tuple[object, str | None]]] = {}
        self._capacity: dict[tuple[object, ...], dict[str, tuple[object, int, int | None]]] = {}
        # NodeResourcesFit's inputs for a backed resource: resource -> (the class's devices, the InUse
        # version counted at, devices per node, allocated per node, the class's devices allocated).
        self._room: dict[str, tuple[ClassDevices, int, npt.NDArray[np.int64], npt.NDArray[np.int64], set[str]]] = {}

    # -- PreFilter -------------------------------------------------------------------------

    def uses(self, pod: Pod) -> bool:
        """Whether the pod's devices are this seam's: it has claims, or asks for an extended resource
        a DeviceClass backs (which DRA serves on nodes that do not list it)."""
        return bool(pod.claims) or bool(pod.extended_requests and extended.asked(pod, self.backed))

    def leftover(self, pod: Pod) -> ResourceClaim | None:
        """The special claim an earlier try of ``pod`` left (it asks for a backed resource, is pending,
        and a claim annotated so names it its controller owner), else None."""
        left = self.specials.get(pod.key) if self.specials and not pod.node_name else None
        if left is None or not extended.asked(pod, self.backed):
            return None
        return left if not pod.uid or left.owner is None or left.owner[2] in ("", pod.uid) else None

    def resolve(self, pod: Pod) -> PodClaims:
        """The pod's claims, or why no node can take it (kube-scheduler's PreFilter, in its words).
        Kept per pod while the pod, the time and each of its claims are the same objects (all else it
        depends on is this snapshot's); a reason is worked out each time."""
        hit = self._resolved.get(pod.key)
        if hit is not None and hit[0] is pod and hit[1] == self.now:
            claims = self.claims
            if all(claims.get(c.key) is c for c in hit[2].claims):
                return hit[2]
        found = self._resolve(pod)
        if found.prefilter is None:
            self._resolved[pod.key] = (pod, self.now, found)
        return found

    def _resolve(self, pod: Pod) -> PodClaims:
        wanted = extended.asked(pod, self.backed)
        left = self.leftover(pod) if wanted else None
        if left is not None:  # a try that failed after creating it: deleted (``DeleteClaim``), then tried again
            return PodClaims(device_claim_extended_left(left.key, pod.key))
        out: list[ResourceClaim] = []
        consumers: list[Consumer] = []
        names: list[str] = []
        group = self.groups.get(f"{pod.namespace}/{group_name(pod)}") if self.groups and group_name(pod) else None
        for entry in pod.claims:
            name, owned = entry.claim, False
            if not name:
                if entry.name not in pod.claim_statuses:
                    return PodClaims(device_claim_not_created(pod.key))
                name, owned = pod.claim_statuses[entry.name], True
                if not name:
                    continue  # the controller decided no claim is needed
            key = f"{pod.namespace}/{name}"
            bad = self.devices.invalid.get(f"ResourceClaim {key}")
            if bad is not None:
                return PodClaims(device_claim_unreadable(name, bad))
            claim = self.claims.get(key)
            if claim is None:
                return PodClaims(device_claim_not_found(name))
            if claim.deleting:
                return PodClaims(device_claim_deleting(name))
            if owned and not _made_for(claim, pod):
                return PodClaims(device_claim_not_owned(key, pod.key, group_name(pod)))
            consumer = bind_to(pod, group, entry)
            if (claim.allocation is not None and len(claim.reserved_for) >= RESERVED_FOR_MAX
                    and not _holds(claim, consumer)):
                return PodClaims(device_claim_in_use(key))
            if claim.allocation is None:
                for field_name in claim.alpha_fields:
                    return PodClaims(alpha_field(key, field_name))
                for request in claim.spec.requests:
                    subs = (request.exactly,) if request.exactly is not None else request.first_available
                    for sub in subs:
                        if sub is not None and sub.device_class not in self.classes:
                            what = f"{request.name}/{sub.name}" if sub.name else request.name
                            return PodClaims(class_missing(key, what, sub.device_class))
            out.append(claim)
            consumers.append(consumer)
            names.append(entry.name)
        unbindable = any(c.allocation is not None and binding_broken(c, c.allocation, self.now) is not None
                         for c in out)
        return PodClaims(None, tuple(out), tuple(c for c in out if c.allocation is None), tuple(consumers),
                         tuple(names), unbindable, wanted, pod.extended_requests if wanted else ())

    def group_claims(self, namespace: str, name: str) -> list[ResourceClaim]:
        """The claims the Workload PodGroup ``namespace/name`` names in its own ``spec.resourceClaims``,
        in its order (kube-scheduler's PodGroupPostFilter walks these): a claim by name; a template's
        claim as the group's status records it, when it was made for the group (its controller
        owner, ``resourceclaim.IsForPodGroup``). A claim not made yet or gone is left out."""
        group = self.groups.get(f"{namespace}/{name}")
        if group is None:
            return []
        made = dict(group.statuses)
        out = []
        for entry in group.claims:
            claim = self.claims.get(f"{namespace}/{entry.claim or made.get(entry.name) or ''}")
            if claim is None:
                continue
            if not entry.claim:
                owner = claim.owner
                if owner is None or owner[0] != "PodGroup" or (
                        owner[2] != group.uid if owner[2] and group.uid else owner[1] != name):
                    continue
            out.append(claim)
        return out

    def special(self, found: PodClaims, node: Node) -> tuple[ResourceClaim, extended.Special] | None:
        """The special claim for the extended resources ``node`` leaves to DRA (None: it leaves none),
        as kube-scheduler's Filter makes it for the node; the same for every node that leaves the same."""
        if not found.extended:
            return None
        dra = extended.left_to_dra(found.extended, node)
        if not dra:
            return None
        key = (found.containers, dra)
        hit = self._special.get(key)
        if hit is None:
            made = extended.special_of(found.containers, dra, self.backed)
            hit = self._special[key] = (ResourceClaim("", extended.SPECIAL, spec=made.spec), made)
        return hit

    def _fresh(self, found: PodClaims, node: Node) -> tuple[ResourceClaim, ...]:
        """The claims to allocate on ``node``: the pod's not allocated yet, then its special claim."""
        hit = self.special(found, node)
        return found.fresh if hit is None else (*found.fresh, hit[0])

    def key(self, pod: Pod) -> tuple[object, ...]:
        """Pods with equal keys get the same answer from the same state: a PreFilter reason is the
        pod's own; else the claims allocated already (their node selectors) and the specs of those to
        allocate (a gang's pods with claims from one template share one answer)."""
        found = self.resolve(pod)
        return (pod.key, found.prefilter) if found.prefilter is not None else found.key()

    # -- Filter ----------------------------------------------------------------------------

    def reasons(self, pod: Pod, nodes: list[Node], mask: npt.NDArray[np.bool_] | None = None,
                loose: bool = False) -> list[str | None]:
        """For each node of ``nodes`` in ``mask`` (None: every one), in order, why the pod's claims cannot be had there
        (None: they can), as Filter decides. ``loose``: as if no device were in use, what removing
        pods could make possible (preemption's pricing, and whether a failure is resolvable)."""
        found = self.resolve(pod)
        at = np.flatnonzero(mask) if mask is not None else np.arange(len(nodes))
        if found.prefilter is not None:
            return [found.prefilter] * len(at)
        if not found.fresh and not found.extended:
            return self._where_allocated(found, [nodes[i] for i in at.tolist()])
        kind = self.plain_kind(found)
        got = self.counts(loose).fit(kind, nodes) if kind is not None else None
        if kind is None or got is None:
            return self._node_reasons(found, [nodes[i] for i in at.tolist()], loose)
        # Claims the allocator takes first fit: counted on arrays; the nodes it must look at
        # itself (``odd``) and those where no pod fits get their reasons one by one.
        fits, odd = got
        out: list[str | None] = [None] * len(at)
        short = np.flatnonzero((fits[at] < 1) | odd[at])
        if not short.size:
            return out
        looked = short[odd[at[short]]]
        if looked.size:
            asked = self._node_reasons(found, [nodes[i] for i in at[looked].tolist()], loose)
            if isinstance(asked[0], FilterError):  # an error status ends the attempt on every node
                return [asked[0]] * len(at)
            for k, why in zip(looked.tolist(), asked, strict=True):
                out[k] = why
        counted = short[~odd[at[short]]]
        if counted.size:
            # The kind is shared by pods whose claims have equal specs: its claims are named as this pod's.
            mine = dict(zip(kind.claims, (c.key for c in found.fresh), strict=True))
            for k, u in zip(counted.tolist(), self.counts(loose).reasons(kind, nodes, at[counted].tolist()),
                            strict=True):
                out[k] = None if u is None else NO_DEVICES if u is False else found.named(
                    replace(u, claim=mine[u.claim]))
        return out

    def counts(self, loose: bool = False) -> Counts:
        """The array counts over the devices in use (``loose``: over none)."""
        got = self._counts.get(loose)
        if got is None:
            got = self._counts[loose] = Counts(self._allocator(loose))
        return got

    def plain_kind(self, found: PodClaims) -> Kind | None:
        """The pod's claims as a plain kind (``koordpy.devices.counts``) when they are all still to
        allocate and it asks for no DRA-backed extended resource, else None."""
        if found.prefilter is not None or found.extended or found.unbindable or len(found.fresh) != len(found.claims):
            return None
        key = found.key()
        if key not in self._plain:
            self._plain[key] = plain(found.fresh, self.classes)
        return self._plain[key]

    def _allocator(self, loose: bool) -> Allocator:
        if not loose:
            return self.allocator
        if self._loose is None:
            self._loose = Allocator(self.pools, self.classes, InUse())
        return self._loose

    def _node_reasons(self, found: PodClaims, nodes: Sequence[Node], loose: bool) -> list[str | None]:
        """``reasons`` asked of the allocator node by node, each answer kept while the node's stamp stands."""
        allocator = self._allocator(loose)
        cache = self._reasons.setdefault((*found.key(), loose), {})
        out: list[str | None] = []
        try:
            for node in nodes:
                stamp: object = self._stamp(node)
                if found.extended:  # what the node leaves to DRA depends on its allocatable, too
                    stamp = (stamp, extended.left_to_dra(found.extended, node))
                hit = cache.get(node.name)
                if hit is None or hit[0] != stamp:
                    hit = cache[node.name] = (stamp, self._node_reason(found, node, allocator))
                out.append(hit[1])
            return out
        except DeviceError as exc:  # kube-scheduler's error status: the pod is not scheduled at all
            return [device_error(exc.message)] * len(nodes)

    @staticmethod
    def _where_allocated(found: PodClaims, nodes: Sequence[Node]) -> list[str | None]:
        """``reasons`` for a pod whose claims are all allocated already: it goes where their devices
        are, which asks nothing of the node but its name (an allocation pinned to nodes by name, the
        usual node-local device) or its labels; no per-node cache, since a claim shared by a few
        pods would fill one per claim for every node."""
        if found.unbindable:
            return [CLAIM_UNAVAILABLE] * len(nodes)
        names: set[str] | None = None  # None: any node's name will do
        general: list[Allocation] = []
        for claim in found.claims:
            allocation = claim.allocation
            if allocation is None or allocation.node_selector is None:
                continue
            pinned = _pinned(allocation)
            if pinned is None:
                general.append(allocation)
            else:
                names = set(pinned) if names is None else names & set(pinned)
        return [None if (names is None or n.name in names) and all(admits(a, n) for a in general)
                else CLAIM_UNAVAILABLE for n in nodes]

    def _node_reason(self, found: PodClaims, node: Node, allocator: Allocator) -> str | None:
        why = self._unavailable(found, node)
        fresh = self._fresh(found, node)
        if why is not None or not fresh:
            return why
        if not self.served(node):
            return NO_DEVICES
        got = allocator.allocate(node, fresh, self.now)
        return found.named(got) if isinstance(got, Unallocatable) else None

    def served(self, node: Node) -> bool:
        """Whether any pool's devices may be used on ``node`` (else no claim is allocated there)."""
        self._stamp(node)  # a node whose labels changed is asked again
        hit = self._served.get(node.name)
        if hit is None:
            hit = self._served[node.name] = self.pools.serves(node)
        return hit

    def _stamp(self, node: Node) -> int:
        """The stamp ``node``'s cached answers must carry: new when the devices in use there changed,
        or when its labels did since the last answer."""
        seen = self._nodes.get(node.name)
        if seen is not node:
            if seen is not None and seen.labels != node.labels:
                self._stamps[node.name] = next(_VERSIONS)
                self._served.pop(node.name, None)
            self._nodes[node.name] = node
        return max(self._common, self._stamps.get(node.name, 0))

    # -- NodeResourcesFit's score of a DRA-backed extended resource ----------------------------

    def extended_room(self, resource: str,
                      nodes: Sequence[Node]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """Per node of ``nodes``: the devices of the class backing ``resource`` that reach it and how
        many of them are allocated (devices in flight included), which kube-scheduler's NodeResourcesFit
        scores the resource by where the node's allocatable does not list it."""
        cls = self.backed[resource]
        of = self.pools.of_class(cls, nodes)
        in_use, version = self.in_use, self.in_use.version
        held = self._room.get(resource)
        if held is not None and held[0] is of:
            if held[1] == version:
                return held[2], held[3]
            # Asked per pod placed: only the devices whose allocation changed since are looked at again.
            changed = in_use.changed_since(held[1])
            if changed is not None:
                total, used, counted = held[2], held[3], held[4]
                fresh = None
                for device in changed:
                    at = of.devices.get(device)
                    if not at:
                        continue
                    now = in_use.allocated(device)
                    if now == (device in counted):
                        continue
                    if fresh is None:
                        fresh = used.copy()  # the arrays handed out before stay as they were
                    np.add.at(fresh, list(at), 1 if now else -1)
                    (counted.add if now else counted.discard)(device)
                if fresh is not None:
                    used = fresh
                self._room[resource] = (of, version, total, used, counted)
                return total, used
        in_use.track()  # the next count looks only at what changed
        total = np.asarray(of.total, dtype=np.int64)
        counted = {d for d in of.devices if in_use.allocated(d)}
        where = [i for d in counted for i in of.devices[d]]
        used = np.bincount(np.asarray(where, dtype=np.int64), minlength=len(nodes)).astype(np.int64)
        self._room[resource] = (of, version, total, used, counted)
        return total, used

    def score_columns(self, resources: Sequence[str], nodes: Sequence[Node], cols: Sequence[int],
                      alloc: npt.NDArray[np.float64], used: npt.NDArray[np.float64]) -> None:
        """Lays, in place, the device counts of ``extended_room`` over the columns ``cols`` (of ``alloc``
        and ``used``, in that order) of resources a class backs, on the nodes that leave them to DRA
        (the cluster's unbounded room there)."""
        for k, j in enumerate(cols):
            if resources[j] not in self.backed:
                continue
            total, taken = self.extended_room(resources[j], nodes)
            at = alloc[:, k] >= UNBOUNDED
            alloc[at, k] = total[at]
            used[at, k] = taken[at]

    # -- the topology search's count ---------------------------------------------------------

    def capacity(self, pods: Sequence[Pod], nodes: list[Node], mask: npt.NDArray[np.bool_],
                 limit: int, together: bool = False) -> npt.NDArray[np.int64] | None:
        """Per node, how many of ``pods`` its devices take (each pod with claims of its own, none
        allocated yet; a pod without claims takes none), for the nodes of ``mask`` (where any of them
        may go); None when the count does not apply (claims shared or allocated already: Reserve
        decides those). A pod's special claim counts on the nodes that leave its extended resources to
        DRA; a node whose device plugin serves them all caps nothing (the resource fit counts them).
        Pod after pod, as kube-scheduler allocates them, each taking the ``firstAvailable``
        alternative it prefers; ``together``: with their devices searched as a whole where a request
        lists alternatives (``_together``; more pods, on alternatives they prefer less, so placement
        asks for it only when the job does not fit pod after pod's count: ``prefers``)."""
        kinds: dict[tuple[object, ...], PodClaims] = {}
        seen: set[str] = set()
        claimless = 0
        for pod in pods:
            found = self.resolve(pod)
            if found.prefilter is None and not found.any:
                claimless += 1
                continue
            if found.prefilter is not None or found.allocated:
                return None
            for claim in found.fresh:
                if claim.key in seen:
                    return None  # members share it: allocated once, by the first
                seen.add(claim.key)
            kinds.setdefault(found.key(), found)
        if not kinds:
            return None
        out = np.zeros(len(nodes), dtype=np.int64)
        for key, found in kinds.items():
            kind = self.plain_kind(found)
            got = self.counts().fit(kind, nodes) if kind is not None else None
            looked = mask
            if got is not None:
                # Claims taken first fit: counted on arrays (the same with the search, which finds
                # nothing more for requests without alternatives), but where ``odd``.
                fits, odd = got
                counted = mask & ~odd
                out[counted] += np.minimum(fits[counted], limit)
                looked = mask & odd
            cache = self._capacity.setdefault((key, limit), {})
            for i in np.flatnonzero(looked).tolist():
                node = nodes[i]
                stamp: object = self._stamp(node)
                if found.extended:
                    stamp = (stamp, extended.left_to_dra(found.extended, node))
                hit = cache.get(node.name)
                if hit is None or hit[0] != stamp:
                    spec = tuple(c.spec for c in self._fresh(found, node))
                    taken = limit if not spec else (
                        self.allocator.capacity(node, spec, limit, self.now) if self.served(node) else 0)
                    # The count with the search is made when first asked for: most jobs fit without it.
                    hit = cache[node.name] = (stamp, taken, taken if not (
                        spec and taken < limit and self.served(node) and _prefers(spec)) else None)
                if together and hit[2] is None:
                    spec = tuple(c.spec for c in self._fresh(found, node))
                    hit = cache[node.name] = (hit[0], hit[1], self._together(node, spec, hit[1], limit))
                # Pods of several kinds: a node takes at most what each kind takes there alone, added
                # up (kinds may draw on disjoint devices; the pruning never underestimates, Reserve is
                # the exact test), and every pod without claims.
                out[i] += hit[2] if together else hit[1]
        out[mask] += claimless
        return out

    def prefers(self, pods: Sequence[Pod]) -> bool:
        """Whether a claim of ``pods`` still to allocate has a request that lists alternatives
        (``firstAvailable``): only then does ``capacity``'s count ``together`` differ."""
        return any(_prefers(tuple(c.spec for c in found.fresh)) for found in map(self.resolve, pods)
                   if found.prefilter is None)

    def _together(self, node: Node, spec: tuple[ClaimSpec, ...], taken: int, limit: int) -> int:
        """How many pods with fresh claims of ``spec`` ``node`` takes when their devices are searched as
        a whole (``reserve_together``), from ``taken`` (pod after pod's count) up: a ``firstAvailable``
        alternative an earlier pod prefers may leave the next none where another leaves both room.
        The searches share ``CAPACITY_STEPS``; one that stops ends the count."""
        left = CAPACITY_STEPS
        while taken < limit and left > 0:
            members = [Member(node, claims, tuple(c.key for c in claims)) for claims in (
                tuple(ResourceClaim(namespace="", name=f"#{j}-{i}", spec=s) for i, s in enumerate(spec))
                for j in range(taken + 1))]
            try:
                got = gangsearch.search(self.allocator, members, self.now, self.gang_budget, left)
            except DeviceError:
                break
            left -= got.steps
            if got.made is None:
                break
            taken += 1
        return taken

    # -- Reserve -----------------------------------------------------------------------------

    def reserve(self, pod: Pod, node: Node, txn: Txn) -> str | None:
        """Allocates the pod's claims on ``node`` (kube-scheduler's Reserve), laid over the claims
        for the pods after it, each change undone with ``txn``; returns why not, else None."""
        found = self.resolve(pod)
        if found.prefilter is not None:
            return found.prefilter
        if not found.any:
            return None
        why = self._unavailable(found, node)
        if why is not None:
            return why
        made: list[Allocation] = []
        special = self.special(found, node)
        to_allocate = found.fresh if special is None else (*found.fresh, special[0])
        if to_allocate:
            try:
                got = self.allocator.allocate(node, to_allocate, self.now)
            except DeviceError as exc:
                return device_error(exc.message)
            if isinstance(got, Unallocatable):
                return found.named(got)
            made = list(got)
        fresh = {c.key: a for c, a in zip(found.fresh, made[:len(found.fresh)], strict=True)}
        self._lay(pod, node, found, fresh, None if special is None else (special, made[-1]), txn)
        return None

    def reserve_together(self, placed: Sequence[tuple[Pod, Node]], txn: Txn,
                         budget: float | None = None) -> tuple[bool, GangStopped | None]:
        """Reserve for a gang whose members, allocated one by one in rank order, do not all get their
        devices on the nodes placement gave them: the gang's devices searched as a whole
        (``koordpy.devices.gangsearch``), and the assignment found laid over the claims as ``reserve``
        lays each member's, in rank order. Returns whether it was, and why the search stopped early
        if it did. ``budget``: seconds (default: ``gang_budget``), for the job's searches together
        (``gang_spent``)."""
        members: list[Member] = []
        for k, (pod, node) in enumerate(placed):
            found = self.resolve(pod)
            if found.prefilter is not None or self._unavailable(found, node) is not None:
                return False, None
            special = self.special(found, node)
            claims = found.fresh if special is None else (*found.fresh, special[0])
            # A special claim is each member's own, though all share one key in memory.
            ids = tuple(c.key for c in found.fresh) + (() if special is None else (f"{SPECIAL_KEY}#{k}",))
            members.append(Member(node, claims, ids))
        seconds = self.gang_budget if budget is None else budget
        start = self.allocator.clock()
        try:
            got = gangsearch.search(self.allocator, members, self.now, seconds,
                                    deadline=start + max(0.0, seconds - self.gang_spent))
        except DeviceError:
            return False, None
        finally:
            self.gang_spent += self.allocator.clock() - start
        if got.made is None:
            return False, got.stopped
        start = txn.savepoint()
        for k, ((pod, node), made) in enumerate(zip(placed, got.made, strict=True)):
            # Resolved again: a claim an earlier member allocated is allocated now, not fresh. Its
            # reservedFor filled by the members before (256 consumers) refuses this one as ``reserve``
            # would: nothing is laid, lest the gang bind without it.
            found = self.resolve(pod)
            if found.prefilter is not None or self._unavailable(found, node) is not None:
                txn.rollback(start)
                return False, None
            special = self.special(found, node)
            fresh = {c.key: made[c.key] for c in found.fresh}
            self._lay(pod, node, found, fresh,
                      None if special is None else (special, made[f"{SPECIAL_KEY}#{k}"]), txn)
        return True, None

    def unreserve(self, pod: Pod, txn: Txn) -> None:
        """kube-scheduler's DynamicResources Unreserve for a pod dropped after its devices were
        reserved (a later Reserve step failed for it): the pod leaves the ``reservedFor`` of its
        claims, what was allocated for it alone is free again, and its PreBind writes are dropped;
        every change undone with ``txn`` (a job rolled back whole gets its reservation back first,
        then loses it with the rest)."""
        binding = self.bindings.get(pod.key)
        if binding is None:
            return
        for write in binding.claims:
            claim = self.claims.get(write.claim)
            if claim is None or write.consumer.resource != "pods":
                # A Workload PodGroup's reservation (and its allocation) is its other members' too.
                continue
            mine = write.consumer.name
            others = tuple(c for c in claim.reserved_for if not (c.resource == "pods" and c.name == mine))
            if write.allocation is not None and not others and claim.allocation is not None:
                # Allocated for this pod in this cycle and nobody else took it since: free again.
                self._undo(txn, self.in_use.remove(claim.allocation), self._pinned(claim.allocation))
                self._swap(txn, claim.key, replace(claim, allocation=None, reserved_for=()))
            elif others != claim.reserved_for:
                self._swap(txn, claim.key, replace(claim, reserved_for=others))
        if binding.extended is not None:
            own = binding.extended.allocation
            self._undo(txn, self.in_use.remove(own), self._pinned(own))
        bindings = self.bindings
        del bindings[pod.key]

        def back() -> None:
            bindings[pod.key] = binding
        txn.record(_Undo(self, back, changed=False))

    def new_job(self) -> None:
        """A job's evaluation begins: its gang searches get the whole budget again."""
        self.gang_spent = 0.0

    def _lay(self, pod: Pod, node: Node, found: PodClaims, fresh: Mapping[str, Allocation],
             special: tuple[tuple[ResourceClaim, extended.Special], Allocation] | None, txn: Txn) -> None:
        """The pod's allocations (``fresh``, by claim key; its special claim's with ``special``) laid
        over the claims and the devices in use, each claim reserved for its consumer, the PreBind
        writes recorded: every change undone with ``txn``."""
        ext = None
        if special is not None:
            (special_claim, how), own = special
            self._undo(txn, self.in_use.add(own), _pinned(own))
            ext = ExtendedClaim(pod.namespace, pod.name + extended.SUFFIX + "-", pod.name, pod.uid, special_claim.spec,
                                own, consumer_of(pod), how.mappings)
        writes = []
        for claim, consumer in zip(found.claims, found.consumers, strict=True):
            allocation = fresh.get(claim.key)
            writes.append(ClaimWrite(claim.key, consumer, allocation))
            if allocation is not None:
                self._undo(txn, self.in_use.add(allocation), self._pinned(allocation))
            held = _holds(claim, consumer)
            if allocation is not None or not held:
                self._swap(txn, claim.key, replace(
                    claim, allocation=claim.allocation if allocation is None else allocation,
                    reserved_for=claim.reserved_for if held else (*claim.reserved_for, consumer)))
        if writes or ext is not None:
            self._bind(txn, pod.key, DeviceBinding(node.name, tuple(writes), ext))

    @staticmethod
    def _unavailable(found: PodClaims, node: Node) -> str | None:
        """A claim allocated already whose devices ``node`` cannot reach (the pod goes where they are),
        or whose devices will not bind (kube-scheduler's Filter: not available on any node)."""
        for claim in found.claims:
            if claim.allocation is None:
                continue
            if not admits(claim.allocation, node):
                return CLAIM_UNAVAILABLE
        return CLAIM_UNAVAILABLE if found.unbindable else None

    def release(self, pods: Iterable[Pod], txn: Txn) -> None:
        """A preemption what-if: the devices of ``pods`` (victims) are free where each is its claim's
        only consumer (a claim others still use stays allocated), undone with ``txn``."""
        for pod in pods:
            names = [entry.claim or pod.claim_statuses.get(entry.name, "") for entry in pod.claims]
            for name in [*names, pod.extended_claim]:
                claim = self.claims.get(f"{pod.namespace}/{name}") if name else None
                if claim is None or claim.allocation is None:
                    continue
                others = tuple(c for c in claim.reserved_for if not (c.resource == "pods" and c.name == pod.name))
                if others or not _freed_with(claim, pod):
                    # Still in use (another victim that shares it may free it), or an allocation nobody
                    # clears when the pod goes: it keeps its devices.
                    self._swap(txn, claim.key, replace(claim, reserved_for=others))
                    continue
                self._undo(txn, self.in_use.remove(claim.allocation), self._pinned(claim.allocation))
                self._swap(txn, claim.key, replace(claim, allocation=None, reserved_for=()))

    # -- the undo log ------------------------------------------------------------------------

    def _changed(self) -> None:
        self.version = next(_VERSIONS)
        self._kept += 1
        self.assumed = True

    def _undo(self, txn: Txn, undo: Callable[[], None], nodes: tuple[str, ...] | None) -> None:
        self._changed()
        self.touch(nodes)
        txn.record(_Undo(self, undo, nodes))

    def _pinned(self, allocation: Allocation) -> tuple[str, ...] | None:
        """The only nodes whose devices in use the allocation changes: those it is pinned to by name
        when every device it holds is node-local (a network-attached device it took with a node-local
        one is seen from other nodes too), else None (every node)."""
        nodes = _pinned(allocation)
        if nodes is None:
            return None
        if self._shared_pools is None:
            self._shared_pools = {(s.driver, s.pool) for s in self._made_of[0].values()
                                  if s.node is None or not s.node.node_name}
        shared = self._shared_pools
        return None if any((r.driver, r.pool) in shared for r in allocation.results) else nodes

    def touch(self, nodes: tuple[str, ...] | None) -> None:
        """The devices in use on ``nodes`` (None: anywhere) changed: their cached answers expire."""
        if nodes is None:
            self._common = self.version
        else:
            for name in nodes:
                self._stamps[name] = self.version

    def _swap(self, txn: Txn, key: str, claim: ResourceClaim) -> None:
        self._put(txn, self.claims, key, claim)
        self._changed()

    def _bind(self, txn: Txn, pod: str, binding: DeviceBinding) -> None:
        self._put(txn, self.bindings, pod, binding, changed=False)

    def _put(self, txn: Txn, table: dict[str, _V], key: str, value: _V, changed: bool = True) -> None:
        """``table[key] = value``, put back as it was (or removed) if the job's transaction is undone."""
        old = table.get(key)
        table[key] = value

        def back() -> None:
            if old is None:
                table.pop(key, None)
            else:
                table[key] = old
        txn.record(_Undo(self, back, changed=changed))


@dataclass(frozen=True)
class _Undo:
    """One change to the device state, undone with the job's transaction."""

    rules: DeviceRules
    back: Callable[[], None]
    nodes: tuple[str, ...] | None = ()  # where the devices in use changed (None: anywhere; (): none)
    changed: bool = True  # it undoes one of ``_changed``'s

    def undo(self) -> None:
        self.back()
        rules = self.rules
        rules.version = next(_VERSIONS)
        rules.touch(self.nodes)
        if self.changed:
            rules._kept -= 1
            rules.assumed = rules._kept > 0


def _freed_with(claim: ResourceClaim, pod: Pod) -> bool:
    """Whether the claim's devices are free once ``pod``, its last consumer, is gone: the ResourceClaim
    controller clears an allocation a scheduler made (its delete-protection finalizer), and a claim
    made for the pod is deleted with it; another's allocation (a driver's) stays."""
    owner = claim.owner
    return DELETE_PROTECTION in claim.finalizers or (
        owner is not None and owner[0] == "Pod" and owner[1] == pod.name and (not owner[2] or owner[2] == pod.uid))


def _pinned(allocation: Allocation) -> tuple[str, ...] | None:
    """The nodes an allocation is pinned to by name (it has a node-local device), else None."""
    terms = allocation.node_selector
    if not terms or len(terms) != 1 or terms[0].match_expressions:
        return None
    fields = terms[0].match_fields
    if len(fields) != 1 or fields[0].key != "metadata.name" or fields[0].operator != "In":
        return None
    return tuple(fields[0].values)


def _prefers(spec: Sequence[ClaimSpec]) -> bool:
    """Whether a request of the claims lists alternatives (``firstAvailable``)."""
    return any(r.first_available for s in spec for r in s.requests)


def _specs_key(claims: tuple[ResourceClaim, ...]) -> str:
    # A spec holds mappings (not hashable): its repr stands for it.
    return repr(tuple(c.spec for c in claims))


def _same(a: Mapping[str, object], b: Mapping[str, object]) -> bool:
    return a.keys() == b.keys() and all(v is b[k] for k, v in a.items())
