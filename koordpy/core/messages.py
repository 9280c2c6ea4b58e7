"""Every message koordpy writes about a verdict, rendered from its structured reason, in one place.

The wordings come from the schedulers koordpy stands in for, so that users and their tools find
the text they know: Koordinator's coscheduling ("gang child pod not collect enough", "GangGroup ...
gets rejected due to member Pod ...", "no candidate topology nodes can accommodate job"),
kube-scheduler's ("0/N nodes are available: ..." with its counted reasons sorted, "preemption: not
eligible due to ...", "Successfully assigned ..."), Volcano's network-topology terms (tiers,
HyperNodes), KAI's levels, and koordpy's own. Tests quote these texts byte for byte.

Belongs here: ``render`` (one reason -> its text), the text constants other modules match on,
kube-scheduler's per-node filter reasons (the keys of ``NodesFiltered.counts``: each filter module
imports the words it counts from here), and what the domain that came closest lacked (``lacked``,
from ``Failure.closest``). Does not belong here: deciding anything (the reason types are in
``koordpy.core.verdicts``; which filter rules a node out is in ``filters``, ``podrules``,
``volumes``); ``koordpy explain``'s advice, which is a report of its own.
"""

from __future__ import annotations

from typing import assert_never

from koordpy.api.dra import RESERVED_FOR_MAX
from koordpy.api.quantity import format_quantity
from koordpy.api.raw import rfc3339
from koordpy.core.verdicts import (
    AdmittedElsewhere,
    Assigned,
    AssignmentUnmet,
    BeyondMinimum,
    BoundWithoutOwner,
    Closest,
    CompositeMissing,
    CompositeShort,
    DevicesTogether,
    FilterError,
    GangCount,
    GangStale,
    GangTimeoutEvent,
    GatedMembers,
    GroupId,
    GroupMissing,
    GroupNamedOtherwise,
    GroupNameShared,
    GroupPreemptionPolicy,
    GroupPriority,
    GroupRefused,
    GroupSchedulers,
    GroupUnschedulable,
    Inside,
    JobFailed,
    KindsNoHyperNode,
    MarkedTimedOut,
    MemberRejected,
    MinResourcesShort,
    MinRuntimeProtected,
    NoCandidate,
    NodesFiltered,
    NoDomainAtLevel,
    NoExclusiveDomain,
    NoHyperNode,
    NotEligible,
    NotHelpful,
    OnePerNode,
    OwnerMissing,
    PeerNotBack,
    PeerUndeclared,
    PreBindConflict,
    PreemptedBy,
    Preempting,
    PreemptionDelayed,
    PreFilterReason,
    Reason,
    Refused,
    ReplacementsDoNotFit,
    RoomTakenBack,
    StaleEvicted,
    SubGroupLeft,
    SubGroupsNoHyperNode,
    Text,
    TierOffer,
    TimedOut,
    TooFewMembers,
    VolumesTogether,
    WaitingForMembers,
    WithNotes,
    WithPreemption,
)
from koordpy.devices.reasons import GangStopped, Unallocatable

# How the message to the pods of a job whose evaluation raised begins: the shell counts their
# attempt as an error (kube-scheduler's "error" result), not as unschedulable.
JOB_ERROR_PREFIX = "koordpy failed while scheduling this job"

# The words users search for; tests and docs quote them (koordpy.core.refusals).
SCHEDULING_GROUP = "koordpy does not schedule this Workload PodGroup (spec.schedulingGroup) yet"
# What declares a gang of Kubernetes' own PodGroup (``dialects.declared_by``): its messages use
# kube-scheduler's terms.
WORKLOAD_PODGROUP = "PodGroup scheduling.k8s.io"
COMPOSITE_PODGROUP = "CompositePodGroup scheduling.k8s.io"
# How what declares a JobSet's gang begins (the JobSet dialect's ``declared_by``, "JobSet NAME's pods
# ..."): its messages speak of the JobSet's Jobs. No other dialect's words begin so (KAI's group of a
# JobSet's pods is "the pods of JobSet NAME", and keeps Koordinator's words).
JOBSET_PODS = "JobSet "


def jobset_minimum(minimum: int, leaders: bool) -> str:
    """A JobSet gang's minimum as its messages and ``koordpy explain`` state it: what its Jobs still run
    at once, or (``leaders``: some Job placed exclusively, which counts its leader alone) need first."""
    if leaders:
        return (f"{minimum}, what its Jobs need first (a Job placed exclusively counts its leader alone: "
                "JobSet's webhook makes its other pods only once the leader is bound)")
    return f"{minimum}, what its Jobs still run at once"

# -- kube-scheduler v1.37's per-node filter reasons, counted in "0/N nodes are available" -------------

# NodeUnschedulable, TaintToleration, NodeAffinity, NodeDeclaredFeatures (koordpy.core.filters).
UNSCHEDULABLE = "node(s) were unschedulable"
NOT_READY = "node(s) were not ready"
AFFINITY = "node(s) didn't match Pod's node affinity/selector"
FEATURES = "node(s) didn't match Pod's required features"
TOO_MANY_PODS = "Too many pods"

# InterPodAffinity, PodTopologySpread, NodePorts (koordpy.core.podrules).
AFFINITY_RULES = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY_RULES = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
SPREAD = "node(s) didn't match pod topology spread constraints"
SPREAD_LABEL = "node(s) didn't match pod topology spread constraints (missing required label)"
PORTS = "node(s) didn't have free ports for the requested pod ports"

# VolumeBinding, VolumeRestrictions, NodeVolumeLimits, VolumeZone (koordpy.core.volumes).
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
# Members of one job sharing an unbound WaitForFirstConsumer claim: it binds once, for one node.
SHARED_CLAIM = "members sharing an unbound WaitForFirstConsumer claim must go to the node its volume is bound for"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ZONE_CONFLICT = "node(s) had no available volume zone"
RWOP_CONFLICT = ("node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already "
                 "in-use by another pod")
DISK_CONFLICT = "node(s) had no available disk"
MAX_VOLUME_COUNT = "node(s) exceed max volume count"
UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"


# VolumeBinding's and VolumeZone's PreFilter reasons: one of the pod's claims rules out every node.


def claim_unreadable(claim: str, why: str) -> PreFilterReason:
    return PreFilterReason(f'persistentvolumeclaim "{claim}" cannot be read: {why}')


def ephemeral_claim_missing(claim: str) -> PreFilterReason:
    return PreFilterReason(f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{claim}"')


def claim_not_found(claim: str) -> PreFilterReason:
    return PreFilterReason(f'persistentvolumeclaim "{claim}" not found')


def claim_lost(claim: str, volume: str) -> PreFilterReason:
    return PreFilterReason(f'persistentvolumeclaim "{claim}" bound to non-existent persistentvolume "{volume}"')


def claim_deleting(claim: str) -> PreFilterReason:
    return PreFilterReason(f'persistentvolumeclaim "{claim}" is being deleted')


def claim_not_owned(claim: str, pod: str) -> PreFilterReason:
    """A generic ephemeral volume's claim another pod's controller created (``claim``: ns/name)."""
    return PreFilterReason(f"PVC {claim} was not created for pod {pod} (pod is not owner)")


def volume_not_found(volume: str) -> PreFilterReason:
    return PreFilterReason(f'persistentvolume "{volume}" not found')


# DynamicResources' reasons (koordpy.core.claims): its PreFilter's rule out every node, in its words
# (a claim not found is the API's NotFound, as the lister reports it).


def device_claim_not_created(pod: str) -> PreFilterReason:
    """A template's claim the ResourceClaim controller has not made yet (no resourceClaimStatuses entry)."""
    namespace, _, name = pod.partition("/")
    return PreFilterReason(f'pod "{namespace}/{name}": ResourceClaim not created yet')


def device_claim_not_found(claim: str) -> PreFilterReason:
    return PreFilterReason(f'resourceclaim.resource.k8s.io "{claim}" not found')


def device_claim_unreadable(claim: str, why: str) -> PreFilterReason:
    return PreFilterReason(f'resourceclaim "{claim}" cannot be read: {why}')


def device_claim_deleting(claim: str) -> PreFilterReason:
    return PreFilterReason(f'resourceclaim "{claim}" is being deleted')


def device_claim_not_owned(claim: str, pod: str, group: str = "") -> PreFilterReason:
    """A template's claim made for neither the pod nor (``group``: its Workload PodGroup's name, ""
    none) its group (``claim``, ``pod``: namespace/name)."""
    whose = f"neither Pod nor PodGroup {group} is the owner" if group else "Pod is not owner"
    return PreFilterReason(f"ResourceClaim {claim} was not created for Pod {pod} ({whose})")


def device_claim_extended_left(claim: str, pod: str) -> PreFilterReason:
    """The claim for the pod's DRA-backed extended resources exists already (``claim``, ``pod``:
    namespace/name): left by a try whose binding failed; kube-scheduler deletes it and tries again."""
    return PreFilterReason(f"cannot schedule extended resource claim {claim} of Pod {pod}: it is left from an "
                           "earlier try whose binding failed; the pod is tried again once it is deleted")


def device_claim_in_use(claim: str) -> PreFilterReason:
    """Allocated, reserved for as many consumers as a claim may have, none of them the pod."""
    return PreFilterReason(f"resourceclaim in use ({claim} is reserved for {RESERVED_FOR_MAX} other consumers)")


def class_missing(claim: str, request: str, device_class: str) -> PreFilterReason:
    return PreFilterReason(f"request {request}: device class {device_class} does not exist (resourceclaim {claim})")


def alpha_field(claim: str, field: str) -> PreFilterReason:
    """A field of a feature still alpha in kube-scheduler v1.37.2: refused, never half-honoured."""
    return PreFilterReason(f"resourceclaim {claim} uses {field}, an alpha feature of Kubernetes v1.37 that koordpy "
                           "does not allocate")


def device_error(message: str) -> FilterError:
    """Input the allocator cannot work with (a CEL expression failing at run time, its cost limit,
    "All" devices of a pool being updated or invalid) or a search past its time bound:
    kube-scheduler's error status, which ends the pod's attempt on every node."""
    return FilterError(message)


# Its Filter's, per node: an allocated claim whose devices the node cannot reach; claims the node's
# devices cannot satisfy (with the claim, the request and why, from the allocator's typed reason).
CLAIM_UNAVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
NO_DEVICES = f"{CANNOT_ALLOCATE} (no ResourceSlice publishes devices for the node)"
# A gang member that passes a node's filters alone where the node's devices take fewer of the job's
# pods than were given it: kube-scheduler would say so on that node once the members before it had
# allocated theirs.
AFTER_MEMBERS = f"{CANNOT_ALLOCATE} (too few devices left once the members of its job before it take theirs)"


def gang_stopped(reason: GangStopped) -> str:
    """Why a gang's device search gave up before it could say whether its members' devices fit together."""
    bound = (f"its time budget of {reason.seconds:g}s" if reason.bound == "time"
             else f"its bound of {reason.steps} search steps")
    return (f"The search of the gang's devices as a whole stopped at {bound} before finding an assignment "
            f"(a coupled group of {reason.group} of its {reason.members} members sharing devices).")


def unallocatable(reason: Unallocatable, claim: str = "") -> str:
    """A node's allocator failure: kube-scheduler's words, then which claim (``claim``: as the pod
    names it in its spec.resourceClaims, else the ResourceClaim) and request, and why."""
    where = (f"claim {claim}" if claim else f"resourceclaim {reason.claim}") + (
        f", request {reason.request}" if reason.request else "")
    have, _, want = reason.detail.partition("/")
    match reason.why:
        case "not-on-node":
            return CLAIM_UNAVAILABLE
        case "too-many-consumers":
            return f"resourceclaim in use ({reason.claim} is reserved for {reason.detail} consumers)"
        case "class-missing":
            why = f"device class {reason.detail} does not exist"
        case "no-device-matches":
            why = f"too few devices match its class and selectors ({have} of {want})"
        case "taint-not-tolerated":
            why = "the devices that match have taints it does not tolerate"
        case "all-taken":
            why = f"too few of the devices that match are free ({have} of {want})"
        case "constraint-unmet":
            why = ("its requests cannot all be met together (matchAttribute, distinctAttribute, or devices they "
                   "compete for)")
        case "pool-incomplete":
            why = f"pool {reason.detail} is incomplete (fewer ResourceSlices than it announces)"
        case "pool-invalid":
            why = f"invalid resource pool {reason.detail}"
        case "binding-failed":
            why = f"the binding of device {reason.detail} failed"
        case "binding-timeout":
            why = "timed out waiting for its devices' binding conditions"
        case _:
            assert_never(reason.why)
    return f"{CANNOT_ALLOCATE} ({where}: {why})"


def absent_gang_kind(pods: int, kind: str, group: str, kind_id: str, shown: str) -> str:
    """``koordpy simulate``'s warning for ``pods`` pods that name a gang object of kind ``kind`` of
    ``group`` (``kind_id``: ``Kind.id``) while the input holds none of that kind (``shown``: the first
    gangs they name): a dump that left the kind out, most likely by a bare ``kubectl get podgroups``."""
    return (f"{pods} pod(s) name a {kind} of {group} as their gang ({shown}), and the input holds no {kind_id} "
            f"at all: they wait for it to exist. Was the kind left out of a dump? Name it in full, {kind_id}: a "
            "bare `kubectl get podgroups` lists one kind of PodGroup only (Kubernetes' own, scheduling.k8s.io, "
            "on a v1.37 cluster that serves it)")


def assigned(pod: str, node: str) -> str:
    """``Assigned``'s text (kube-scheduler's words), for the bind of each pod of a gang without
    making the reason first."""
    return f"Successfully assigned {pod} to {node}"


def assigned_many(pods: list[str], nodes: list[str]) -> list[str]:
    """``assigned`` of each pod and its node."""
    return [f"Successfully assigned {pod} to {node}" for pod, node in zip(pods, nodes, strict=True)]


def untolerated_taint(key: str, value: str) -> str:
    return f"node(s) had untolerated taint {{{key}: {value}}}"


def insufficient(resource: str) -> str:
    """NodeResourcesFit's reason for a resource short on a node (the pods column: too many pods)."""
    return f"Insufficient {resource}"


def binding_conditions_pending(node: str) -> str:
    """The ``BindingConditionsPending`` Event's words (kube-scheduler's), as a pod's binding starts to
    wait for its devices' binding conditions on ``node``."""
    return f"waiting for binding conditions for device on node {node}"


# What DynamicResources' PostFilter (and PodGroupPostFilter) did, in kube-scheduler's words: said before
# preemption's, joined as kube-scheduler joins the PostFilter plugins' reasons.
DEALLOCATED = "deallocation of ResourceClaim completed"
GROUP_DEALLOCATED = "deallocation of PodGroup ResourceClaim completed"
GROUP_UNRESERVED = "ResourceClaim unreserved for PodGroup"


def released(deallocated: bool, group_deallocated: bool, unreserved: bool) -> str:
    """What the PostFilter gave up for a job this cycle ("" nothing): a pod's claim, a PodGroup's claim
    (PodGroupPostFilter, which words it apart), the PodGroup's reservation."""
    return ", ".join(w for w, done in ((DEALLOCATED, deallocated), (GROUP_DEALLOCATED, group_deallocated),
                                        (GROUP_UNRESERVED, unreserved)) if done)


def post_filter_said(released_words: str, preemption: str) -> str:
    """The PostFilter's message after the failure: what was given up, then what preemption did."""
    return ", ".join(w for w in (released_words, preemption) if w)


# kube-scheduler's preemption words.
NOT_ELIGIBLE_NEVER = "preemption: not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "preemption: not eligible due to terminating pod on the nominated node."


def group_name(gid: GroupId) -> str:
    """A GangGroup as its messages name it: its gangs' keys, comma-joined."""
    return gid if isinstance(gid, str) else ",".join(gid)


def nodes_unavailable(total: int, counts: tuple[tuple[str, int], ...]) -> str:
    """kube-scheduler's ``0/N nodes are available: ...``: the reasons sorted, each with its count;
    a PreFilter reason rules out every node before any is looked at, and is said alone."""
    first = next((reason for reason, _ in counts if isinstance(reason, PreFilterReason)), None)
    if isinstance(first, FilterError):  # no node count: the attempt ended on an error, as kube-scheduler's does
        return f'running "DynamicResources" filter plugin: {first}'
    if first is not None:
        return f"0/{total} nodes are available: {first}."
    parts = ", ".join(f"{n} {reason}" for reason, n in sorted(counts))
    return f"0/{total} nodes are available: {parts}." if parts else f"0/{total} nodes are available."


def lacked(c: Closest) -> str:
    """What the domain that came closest lacked (``Failure.closest``): its nodes the job cannot use,
    counted per reason in kube-scheduler's words (``of its 18 node(s), 1 cannot allocate all claims
    (...)``), or that none is ruled out and it simply holds too few."""
    if not c.lacks:
        return f"none of its {c.nodes} node(s) is ruled out: it holds too few"
    return f"of its {c.nodes} node(s), " + ", ".join(f"{n} {why}" for why, n in c.lacks)


def counts(gangs: tuple[GangCount, ...]) -> str:
    """A GangGroup's gangs with the members that count towards each minimum: ``ns/a 2/3, ns/b 1/1``."""
    return ", ".join(f"{g.gang} {g.have}/{g.need}" for g in gangs)


def _no_candidate(r: NoCandidate) -> str:
    if r.koordinator:  # Koordinator's own words
        shown = "; ".join(f"topology topologyNode {name}: {slots}" for _, name, slots in r.domains).replace("; ", ";")
    else:  # a Topology's domains are label values: the domains of the required level
        shown = f"Topology {r.root_layer}: " + ";".join(f"{layer}={name}: {slots}" for layer, name, slots in r.domains)
    more = f";... {r.more} more" if r.more else ""
    split = ""
    if r.split:
        per_layer = " and ".join(f"{m} per {layer} domain" for m, layer in r.split)
        split += f"; podCountMultiple: {r.desired} pods cannot be split into multiples of {per_layer}"
    if r.unlike:
        split += "; podCountMultiple is set, so unlike members are only placed with their common shape"
    reason = f"no candidate topology nodes can accommodate job, desiredOfferSlot: {r.desired}, {shown}{more}{split}"
    # Offerslots alone do not say why a node offers nothing; taints, selectors and cordons do, so
    # they follow in kube-scheduler's words.
    if r.filtered:
        reason += "; " + ", ".join(f"{n} {why}" for why, n in r.filtered)
    return f"0/{r.total} nodes are available: {reason}."


def _offers(offers: tuple[TierOffer, ...]) -> str:
    """The largest offerslot in each tier searched, and where."""
    parts = [f"tier {o.rank}: {o.slots} ({f'best of {o.among}: ' if o.among > 1 else ''}{o.name})" for o in offers]
    return "; largest offerslot per tier: " + ", ".join(parts) if parts else ""


def _cut(tried: int, candidates: int) -> str:
    """A search the work bound cut short does not claim that no HyperNode holds the job."""
    return (f" (the search stopped at its work bound after {tried} of {candidates} candidate HyperNodes; "
            "the others were not tried)") if tried < candidates else ""


def _children(r: SubGroupsNoHyperNode) -> str:
    """A CompositePodGroup whose children do not fit, in Kubernetes' words: domains of node labels and
    child PodGroups with their minimums, where Volcano speaks of tiers and sub-groups."""
    names = dict(r.labels)
    need = sum(n for _, n in r.wanted)
    more = " more" if r.ready else ""
    top = names.get(r.highest)
    where = f"no domain of {top} holds" if top else "the cluster does not hold"
    kids = ", ".join(
        f"{sid} ({n} pending pods, minimum {size}"
        f"{f', topology key {names[scope]}' if scope is not None and scope in names else ''})"
        for (sid, n, scope), size in zip(r.subgroups, r.sizes, strict=False))
    cut = (f" (the search stopped at its work bound after {r.tried} of {r.candidates} candidate domains; "
           "the others were not tried)") if r.tried < r.candidates else ""
    offers = ", ".join(f"{names[o.rank]}: {o.slots} ({f'best of {o.among}: ' if o.among > 1 else ''}{o.name})"
                       if o.rank in names else f"the cluster: {o.slots}" for o in r.offers)
    return (f"0/{r.total} nodes are available: CompositePodGroup {r.composite}: {where} {need}{more} of its child "
            f"PodGroups at once, each with its minimum of pods inside one domain of its own topology key: "
            f"{kids}{cut}{f'; the most pods a domain takes: {offers}' if offers else ''}.")


def _tiers(r: NoHyperNode | KindsNoHyperNode | SubGroupsNoHyperNode | SubGroupLeft) -> str:
    match r:
        case NoHyperNode():
            mode = "hard" if r.hard else "soft"
            limit = f", highest tier {r.highest}" if r.hard and r.highest is not None else ""
            return (f"0/{r.total} nodes are available: network topology ({mode}{limit}): "
                    f"no HyperNode can take all {r.pods} pods{_offers(r.offers)}.")
        case KindsNoHyperNode():
            cut = _cut(r.tried, r.candidates)
            what = f"none of the first {r.tried} candidate HyperNodes" if cut else "no HyperNode"
            return (f"0/{r.total} nodes are available: network topology: {what} "
                    f"within tier {r.highest} takes all {r.pods} pods, each kind of pod where "
                    f"it fits{cut}{_offers(r.offers)}.")
        case SubGroupsNoHyperNode() if r.composite:
            return _children(r)
        case SubGroupsNoHyperNode():
            cut = _cut(r.tried, r.candidates)
            what = f"none of the first {r.tried} candidate HyperNodes" if cut else "no HyperNode"
            sub = ", ".join(f"{sid} ({n} pods, highest tier {tier if tier is not None else 'any'})"
                            for sid, n, tier in r.subgroups)
            wanted = ", ".join(f"{n} of policy {p}" for p, n in r.wanted if n)
            return (f"0/{r.total} nodes are available: network topology: {what} "
                    f"within tier {r.highest} holds {wanted or 'the'} sub-groups the job needs, each inside "
                    f"one HyperNode of its own tier limit: {sub}{cut}{_offers(r.offers)}.")
        case SubGroupLeft() if r.composite:  # a CompositePodGroup's child, in Kubernetes' words
            where = f"{r.level}={r.within}" if r.within else "the cluster"
            own = f" inside one domain of its topology key {r.key}" if r.key else ""
            child = f"child PodGroup {r.subgroup} of CompositePodGroup {r.composite}"
            if r.placed:
                return (f"{child}: {r.pending - r.placed} of its {r.pending} pending pods do not fit{own} beside "
                        f"the {r.placed} placed (minimum {r.size}) within {where}")
            return f"{child} ({r.pending} pending pods, minimum {r.size}) does not fit{own} within {where}"
        case SubGroupLeft():
            where = f"HyperNode {r.within}" if r.within else "the cluster"
            return (f"sub-group {r.subgroup} ({r.pending} pending pods, size {r.size}) does not "
                    f"fit inside one HyperNode of its tier limit within {where}, the job's limit around "
                    "where its other sub-groups went")
        case _:
            assert_never(r)


def _budgets(r: Preempting) -> str:
    """What a preemption does to PodDisruptionBudgets, said after its victims."""
    out = "".join(f"; it evicts {n} pod(s) of PodDisruptionBudget {name} beyond its budget" for name, n in r.beyond)
    if r.kept:
        shown = ", ".join(r.kept[:3]) + (f" and {len(r.kept) - 3} more" if len(r.kept) > 3 else "")
        out += f"; PodDisruptionBudgets kept {shown} running"
    return out


def span(seconds: float) -> str:
    """A length of time as people say it: seconds below two minutes, minutes below two hours."""
    if seconds < 120:
        return f"{max(0, round(seconds))} s"
    if seconds < 7200:
        return f"{int(seconds // 60)} min"
    return f"{seconds / 3600:.1f} h".replace(".0 h", " h")


def _ran_of(ran: float, minimum: float) -> str:
    """How long a job ran of its minimum, both in the minimum's unit ("3 min of its 10")."""
    unit, size = ("s", 1.0) if minimum < 120 else ("min", 60.0) if minimum < 7200 else ("h", 3600.0)
    return f"{int(max(0.0, ran) // size)} {unit} of its {minimum / size:g}"


def _preemption(r: NotEligible | NotHelpful | RoomTakenBack | Preempting | PreemptionDelayed
                | MinRuntimeProtected | AdmittedElsewhere) -> str:
    match r:
        case NotEligible(why="never"):
            return NOT_ELIGIBLE_NEVER
        case NotEligible():
            return NOT_ELIGIBLE_TERMINATING
        case NotHelpful(best=None):
            return (f"preemption: not helpful: no candidate takes all {r.desired} pods once its "
                    "lower-priority pods are gone.")
        case NotHelpful():
            return (f"preemption: not helpful: even without every lower-priority pod, no candidate can "
                    f"take all {r.desired} pods (the most is {r.best}, in {r.where}).")
        case RoomTakenBack():
            return f"preemption: room taken back from lower-priority nominations in {r.where}."
        case Preempting():
            shown = ", ".join(r.victims[:3]) + (f" and {len(r.victims) - 3} more" if len(r.victims) > 3 else "")
            return (f"preemption: preempting {len(r.victims)} lower-priority pod(s) of {r.jobs} job(s) in "
                    f"{r.where} ({shown}){_budgets(r)}; the job is nominated there and waits for them to terminate.")
        case PreemptionDelayed():
            return (f"preemption: would preempt in {span(r.left)} (at {rfc3339(r.ends)}), once its preemption "
                    f"delay of {span(r.delay)} ({r.where}) has passed; free room it takes at once.")
        case MinRuntimeProtected():
            more = f" (and {r.others} more job(s))" if r.others else ""
            return (f"preemption: victim {r.victim} is protected by its minimum runtime{more}: runs for "
                    f"{_ran_of(r.ran, r.minimum)}; preemption is tried again when that has passed.")
        case AdmittedElsewhere():
            more = f" (and {r.others} more pod(s))" if r.others else ""
            what = f" ({r.what})" if r.what else ""
            return (f"preemption: victim {r.victim}{more} is not preempted: {r.by} admitted it{what}; {r.by}'s own "
                    "preemption decides; the job waits for room.")
        case _:
            assert_never(r)


def _running(reason: GangStale | StaleEvicted) -> str:
    """How many of a stale gang's members still run, against its minimum."""
    said = f"{reason.live} member{'' if reason.live == 1 else 's'} running, minimum {reason.minimum}"
    if reason.parts is not None and reason.declared_by.startswith(JOBSET_PODS):
        met, need = reason.parts
        said += f", {met} of the {need} Jobs it needs with a pod running"
    elif reason.parts is not None:
        met, need = reason.parts
        said += f", {met} of the {need} parts it needs at their own minimum"
    return said


def render(reason: Reason) -> str:
    """The one text of ``reason``."""
    match reason:
        case Text():
            return reason.text
        case OwnerMissing():
            return (f"waiting for its owner {reason.kind} {reason.namespace}/{reason.name} to appear (koordpy reads "
                    f"topology constraints from it): pod {reason.pod} is not placed without it for "
                    f"{reason.grace:g}s after its creation")
        case MarkedTimedOut():
            return (f'gang "{reason.gang}" timed out waiting for its members and will not be scheduled '
                    f"({reason.annotation}=true); delete and recreate its pods to try again")
        case TooFewMembers() if reason.declared_by == WORKLOAD_PODGROUP:  # kube-scheduler's terms
            return (f"waiting for minCount pods of PodGroup {reason.gang} to exist: {reason.have} of minCount "
                    f"{reason.need} created")
        case TooFewMembers() if reason.declared_by == COMPOSITE_PODGROUP:  # its children's minimums, summed
            return (f"waiting for the pods of CompositePodGroup {reason.gang} to exist: {reason.have} created, "
                    f"and its minGroupCount child PodGroups need at least {reason.need} (each its own minCount)")
        case TooFewMembers() if reason.declared_by.startswith(JOBSET_PODS):  # its Jobs'
            return (f"waiting for {reason.declared_by} to exist: {reason.have} created, minimum "
                    f"{jobset_minimum(reason.need, reason.parts)}")
        case TooFewMembers():  # Koordinator's words
            return (f"gang child pod not collect enough, gangName: {reason.gang}, podNum: {reason.have}, "
                    f"minMember: {reason.need}")
        case GatedMembers():
            return (f"gang {reason.gang} waits for its gated members: {reason.gated} of its {reason.total} pods "
                    f"still have spec.schedulingGates, and the others cannot reach minMember {reason.need}")
        case PeerUndeclared():
            error = f": {reason.error}" if reason.error else ""
            return (f'gang "{reason.gang}" names "{reason.other}" in its groups, but no PodGroup or pod declares '
                    f"that gang{error}")
        case PeerNotBack():
            where = " in another namespace" if reason.other_namespace else ""
            return (f'gang "{reason.gang}" names "{reason.other}"{where} in its groups, which does not name it '
                    f'back; it waits until "{reason.other}" has its minimum bound')
        case MinResourcesShort():
            return (f"PodGroup {reason.podgroup} minResources not available: {reason.resource} wants "
                    f"{format_quantity(reason.resource, reason.want)}, the cluster has "
                    f"{format_quantity(reason.resource, reason.have)} free")
        case TimedOut():
            return (f'GangGroup "{group_name(reason.group)}" timed out after {reason.limit:g}s waiting for its '
                    f"members ({counts(reason.counts)}); reservations released")
        case GangTimeoutEvent():
            return f"gang did not reach its minimum within {reason.limit:g}s"
        case GangStale():
            if reason.ends is None and reason.by:
                what = f" ({reason.what})" if reason.what else ""
                then = (f"{reason.by} admitted it{what} and recovers it ({reason.recovers}): koordpy reports it "
                        "only, never evicts it")
            elif reason.ends is None:
                then = "its grace is negative: reported only, never evicted"
            elif reason.held:
                then = ("its grace ended; its eviction waits while its pending members bind or hold the room "
                        "a preemption is making for them")
            else:
                then = f"its running members are evicted at {rfc3339(reason.ends)} unless replacements bind"
            return f"gang {reason.gang} is stale since {rfc3339(reason.since)}: {_running(reason)}; {then}"
        case StaleEvicted():
            return (f"gang {reason.gang} ran below its minimum ({_running(reason)}) for its grace of "
                    f"{reason.grace:g}s: evicted so that its controller starts it again whole")
        case WaitingForMembers():  # Koordinator's words, with koordpy's counts
            return (f'GangGroup "{group_name(reason.group)}" is waiting for its members: '
                    f"{counts(reason.counts)}, alreadyWaitForBound: {reason.already}")
        case GroupNamedOtherwise():
            return (f"{SCHEDULING_GROUP}: pod {reason.pod} names its group by {reason.group!r}, which "
                    "koordpy does not read; it stays pending")
        case GroupMissing():
            return (f"waiting for PodGroup {reason.namespace}/{reason.group} (scheduling.k8s.io), which pod "
                    f"{reason.pod} names in spec.schedulingGroup, to exist")
        case GroupRefused():
            what = f"gang policy (minCount {reason.min_count})" if reason.gang else ", ".join(reason.asks)
            return (f"{SCHEDULING_GROUP}: pod {reason.pod} belongs to PodGroup {reason.group!r} with {what}, "
                    "which kube-scheduler's GangScheduling plugin would apply; it stays pending")
        case CompositeMissing():
            return (f"waiting for CompositePodGroup {reason.parent} (scheduling.k8s.io/v1alpha3), which PodGroup "
                    f"{reason.group} of pod {reason.pod} names in spec.parentCompositePodGroupName, to exist")
        case CompositeShort():
            ready = sum(1 for _, have, need in reason.children if have >= need)
            shown = ", ".join(f"{name} {have}/{need}" for name, have, need in reason.children[:8])
            more = f" and {len(reason.children) - 8} more" if len(reason.children) > 8 else ""
            return (f"CompositePodGroup {reason.composite} waits for {reason.need} child PodGroups (minGroupCount) "
                    f"to have their minimum of pods: {ready} of its {len(reason.children)} have "
                    f"({shown or 'no child PodGroup names it'}{more})")
        case GroupNameShared():
            return (f"PodGroup {reason.group} and CompositePodGroup {reason.group} (scheduling.k8s.io) share a "
                    f"namespace and name, which koordpy cannot tell apart; pod {reason.pod} stays pending "
                    "until one is renamed")
        case GroupSchedulers():
            return (f"{reason.kind} {reason.group} (scheduling.k8s.io) is refused: its pods name different "
                    f"schedulerNames ({', '.join(reason.names)}), and only one scheduler may place a group; "
                    f"pod {reason.pod} stays pending")
        case GroupPriority():
            return (f"{reason.kind} {reason.group} (scheduling.k8s.io) is refused: pod {reason.pod} has priority "
                    f"{reason.pod_priority} and the group {reason.group_priority}; every pod of a group must have "
                    "the group's priority")
        case GroupPreemptionPolicy():
            return (f"{reason.kind} {reason.group} (scheduling.k8s.io) is refused: pod {reason.pod} has "
                    f"preemptionPolicy {reason.pod_policy} and the group {reason.group_policy}; every pod of a group "
                    "must have the group's preemptionPolicy")
        case Refused():
            return f'GangGroup "{group_name(reason.group)}" waits as a whole: {render(reason.inner)}'
        case JobFailed():
            return (f"{JOB_ERROR_PREFIX} and skipped it: {reason.error}: {reason.detail}; "
                    "the rest of the queue was scheduled")
        case NodesFiltered():  # kube-scheduler's words
            return nodes_unavailable(reason.total, reason.counts)
        case Inside():
            where = (f" inside {reason.domain}, the widest domain the job's topology requirement allows"
                     if reason.domain is not None else "")
            also = []
            if reason.others:
                also.append(f"{', '.join(reason.others)}, the next of that level, failed too")
            if reason.untried:
                also.append(f"{reason.untried} more of that level with room were not tried")
            return render(reason.inner).rstrip(".") + where + (f" ({'; '.join(also)})" if also else "") + "."
        case OnePerNode():
            why = "they share host ports" if reason.ports else f"anti-affinity between them on {', '.join(reason.keys)}"
            return f"{render(reason.inner).rstrip('.')}; at most one member per node, as {why}."
        case WithNotes():
            return f"{render(reason.inner).rstrip('.')}; {'; '.join(reason.notes)}."
        case AssignmentUnmet():
            what = f" for {reason.what}" if reason.what else ""
            labels = ", ".join(f"{k}={v}" for k, v in reason.assigned)
            then = f"; {reason.recovers} if this lasts" if reason.recovers else ""
            return (f"{render(reason.inner).rstrip('.')}; {reason.by}'s topology assignment{what} (nodeSelector "
                    f"{labels}) cannot take the job now: koordpy places the pod nowhere else{then}.")
        case NoCandidate():
            return _no_candidate(reason)
        case NoHyperNode() | KindsNoHyperNode() | SubGroupsNoHyperNode() | SubGroupLeft():  # Volcano's terms
            return _tiers(reason)
        case NoDomainAtLevel():  # KAI's levels
            shown = ", ".join(f"{name} {slots}" for name, slots in reason.offers)
            return (f"0/{reason.total} nodes are available: no domain of Topology {reason.root_layer} at or above "
                    f"{reason.preferred} within {reason.within} can take all {reason.desired} pods; "
                    f"offerslots at {reason.within}: {shown}.")
        case NoExclusiveDomain():  # JobSet's exclusive placement
            if reason.within:
                room = dict(reason.offers).get(reason.within, 0)
                return (f"0/{reason.total} nodes are available: Job {reason.job} runs in {reason.label}="
                        f"{reason.within}, which has room for {room} of its {reason.pods} pending pod(s) "
                        "(JobSet exclusive placement: a Job's pods share its leader's domain).")
            shown = ", ".join(f"{name} {n}" for name, n in reason.offers) or "none"
            taken = f"; held by its JobSet's other Jobs: {', '.join(reason.taken)}" if reason.taken else ""
            return (f"0/{reason.total} nodes are available: Job {reason.job} needs a domain of {reason.label} "
                    f"of its own with room for all its {reason.pods} pods (JobSet exclusive placement); room "
                    f"for them: {shown}{taken}.")
        case VolumesTogether():
            return (f"0/{reason.total} nodes are available: {reason.why} (with the other "
                    "members of its job placed together).")
        case PreBindConflict():
            return f"0/{reason.total} nodes are available: {reason.why}."
        case DevicesTogether():
            said = (f"0/{reason.total} nodes are available: {reason.why} (on {reason.node}, with the members of "
                    "its job before it placed).")
            return f"{said} {gang_stopped(reason.stopped)}" if reason.stopped is not None else said
        case WithPreemption():
            return f"{render(reason.inner)} {reason.preemption}" if reason.preemption else render(reason.inner)
        case MemberRejected():  # Koordinator's words
            quoted = ""
            if reason.preemption:
                said = reason.preemption.removeprefix("preemption: ")
                quoted = f". preemption: preemption already attempted by {reason.member} with message {said}"
            return (f'GangGroup "{group_name(reason.group)}" gets rejected due to member Pod "{reason.member}" '
                    f'is unschedulable with reason "{render(reason.inner)}", '
                    f"alreadyWaitForBound: {reason.already}{quoted}")
        case GroupUnschedulable():  # kube-scheduler's errPodGroupUnschedulable, with the member's reason
            said = f" {reason.preemption}" if reason.preemption else ""
            return (f"pod group {group_name(reason.group)} is unschedulable: pod {reason.member}: "
                    f"{render(reason.inner)}{said}")
        case BeyondMinimum():
            return (f'GangGroup "{group_name(reason.group)}" reached its minimum with {reason.bound} of '
                    f'{reason.pending} pending members bound; the rest wait: "{render(reason.inner)}"')
        case ReplacementsDoNotFit():
            where = f"inside {reason.domain}, where its running members are" if reason.domain else "anywhere"
            said = f" {reason.preemption}" if reason.preemption else ""
            return (f'gang "{reason.gang}" lost members and cannot take the {reason.missing} replacement(s) it '
                    f'needs together {where}: "{render(reason.inner)}"{said}')
        case (NotEligible() | NotHelpful() | RoomTakenBack() | Preempting() | PreemptionDelayed()
              | MinRuntimeProtected() | AdmittedElsewhere()):
            return _preemption(reason)
        case PreemptedBy():
            return (f"koordpy: preempting to accommodate higher priority pods, preemptor: "
                    f"{group_name(reason.preemptor)}, triggerpod: {reason.trigger}")
        case Assigned():
            return assigned(reason.pod, reason.node)
        case BoundWithoutOwner():
            return (f"bound without its owner {reason.kind} {reason.namespace}/{reason.name}, which koordpy did not "
                    f"see within {reason.grace:g}s of the pod's creation: no topology constraint the owner "
                    "declares was applied")
        case _:
            assert_never(reason)
