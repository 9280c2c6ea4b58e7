"""Verdicts: what a filter, the gang rule or a placement says about a job, as values.

kube-scheduler's shape: a plugin's answer is a status with an intent code (Unschedulable,
UnschedulableAndUnresolvable, Wait, ...) and the events that may undo it (a queueing hint); the
text a user reads is rendered from the diagnosis last. Here a ``Verdict`` is a ``Code``, a
structured reason and its wake hint; a ``Failure`` is a placement's diagnosis (the pod that carries
it, its reason and code, the nodes each filter ruled out, the domains searched).

Belongs here: the codes, the wake hints, the verdict and failure values, and one small frozen
dataclass per kind of reason, holding the facts a message needs (never text a caller composed,
except where a reason wraps words another module produces: see ``Text`` and the ``why`` fields
named as such). Does not belong here: any wording (``koordpy.core.messages`` renders every reason,
once), deciding a verdict (the cycle, placement, preemption, refusals), decisions (``decisions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Literal, TypeAlias

from koordpy.api.objects import Pod
from koordpy.devices.reasons import GangStopped

# A verdict's wake hint (kube-scheduler's queueing hints, by job; ``Queue.park``): what can let a
# waiting job go on, besides a change to its own pods or gangs (a new Job object) and the end of a
# NonStrict wait: "changed", nothing else (a config error, a timed-out gang, too few members);
# "room", room freed where one of its pod shapes fits (placement or permit failed); "any-room", room
# freed anywhere (minResources counts the whole cluster); "victims", the victims of its preemption
# still terminating on the nodes its pods are nominated to are gone (at once, no backoff), or room
# freed as for "room". None: the job is tried every cycle.
Wake = Literal["changed", "room", "any-room", "victims"]

# A GangGroup as messages name it: its gangs' keys (comma-joined when given as one string).
GroupId: TypeAlias = str | tuple[str, ...]


class Code(Enum):
    """The intent of a verdict (kube-scheduler's ``framework.Code``)."""

    UNSCHEDULABLE = "Unschedulable"  # no room now: removing pods (preemption) may help
    UNRESOLVABLE = "UnschedulableAndUnresolvable"  # filters, configuration: no preemption helps
    WAIT = "Wait"  # waits for something other than room: members, an owner, a peer gang
    TIMED_OUT = "TimedOut"  # a gang's wait expired: what it holds is released
    ERROR = "Error"  # evaluating the job raised


# -- reasons: one kind of fact each ---------------------------------------------------------


class PreFilterReason(str):
    """A per-node filter reason that rules out every node before any is looked at (kube-scheduler's
    PreFilter): a node count message names it alone. Produced by the volume rules."""

    __slots__ = ()


class FilterError(PreFilterReason):
    """An error status from a filter, not a node that does not fit (kube-scheduler's DynamicResources
    on input its allocator cannot work with, or a device search past its time bound): it ends the
    pod's attempt on every node, no preemption is tried, and the pod's condition says
    ``SchedulerError``."""

    __slots__ = ()


@dataclass(frozen=True)
class Text:
    """Words another module produced that are not (yet) a reason of their own: a gang's parse
    error, a topology requirement's failure from its dialect, a ``ParseError``."""

    text: str


@dataclass(frozen=True)
class OwnerMissing:
    kind: str
    namespace: str
    name: str
    pod: str
    grace: float


@dataclass(frozen=True)
class MarkedTimedOut:
    """A gang whose pods carry the timed-out annotation: it is not tried again."""

    gang: str
    annotation: str


@dataclass(frozen=True)
class TooFewMembers:
    gang: str
    have: int
    need: int
    # What declares the gang (``dialects.declared_by``): a Workload PodGroup's gang is told in
    # kube-scheduler's terms (minCount), a JobSet's in its Jobs', every other in Koordinator's. Wording,
    # not the verdict: not compared.
    declared_by: str = field(default="", compare=False)
    # Whether it is a gang of parts (``Gang.parts``): a JobSet's minimum then counts a leader per Job
    # placed exclusively, which its words say. Wording: not compared.
    parts: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class GatedMembers:
    gang: str
    gated: int
    total: int
    need: int


@dataclass(frozen=True)
class PeerUndeclared:
    """A gang names in its groups a gang nothing declares (``error``: why the declaration failed)."""

    gang: str
    other: str
    error: str | None = None


@dataclass(frozen=True)
class PeerNotBack:
    """A gang names in its groups a gang that does not name it back and has not its minimum bound."""

    gang: str
    other: str
    other_namespace: bool


@dataclass(frozen=True)
class MinResourcesShort:
    podgroup: str
    resource: str
    want: int
    have: int


@dataclass(frozen=True)
class GangCount:
    """One gang of a GangGroup: the members that count towards its minimum, and the minimum."""

    gang: str
    have: int
    need: int


@dataclass(frozen=True)
class GangStale:
    """A gang running below its minimum (``koordpy.core.stale``): since when, how many of its members
    still run against its minimum (for a gang of parts, the parts that meet theirs of those needed),
    and when the rest of it is evicted (None: never, its grace is negative). ``held``: its grace ran
    out, but its pending members hold nominations (room a preemption is making for them) or bound
    just now, so the eviction waits for them. ``by``: the controller in front of koordpy that
    admitted it (Kueue), its object (``what``) and how it recovers the gang (``recovers``), said when
    koordpy only reports it; "" when none did."""

    gang: str
    since: float
    live: int
    minimum: int
    ends: float | None
    parts: tuple[int, int] | None = None
    held: bool = False
    by: str = ""
    what: str = ""
    recovers: str = ""
    # What declares the gang (``dialects.declared_by``): a JobSet's parts are its Jobs. Wording: not compared.
    declared_by: str = field(default="", compare=False)


@dataclass(frozen=True)
class StaleEvicted:
    """The Event and the DisruptionTarget message of a stale gang's members evicted after its grace."""

    gang: str
    live: int
    minimum: int
    grace: float
    parts: tuple[int, int] | None = None
    declared_by: str = field(default="", compare=False)  # as ``GangStale``'s


@dataclass(frozen=True)
class TimedOut:
    group: GroupId
    limit: float
    counts: tuple[GangCount, ...] = ()


@dataclass(frozen=True)
class GangTimeoutEvent:
    """The Event on a PodGroup whose gang timed out."""

    limit: float


@dataclass(frozen=True)
class WaitingForMembers:
    group: GroupId
    counts: tuple[GangCount, ...]
    already: int


@dataclass(frozen=True)
class GroupNamedOtherwise:
    """A pod names its Workload PodGroup by a field koordpy does not read."""

    pod: str
    group: str


@dataclass(frozen=True)
class GroupMissing:
    pod: str
    namespace: str
    group: str


@dataclass(frozen=True)
class GroupRefused:
    """A pod of a Workload PodGroup whose policy (``gang``, with its ``min_count``) or whose other asks
    (``asks``: field names) koordpy does not apply."""

    pod: str
    group: str
    gang: bool
    min_count: int | None
    asks: tuple[str, ...] = ()


@dataclass(frozen=True)
class GroupSchedulers:
    """A Workload PodGroup whose pods name different ``schedulerName``s: no scheduler may place it
    (two would write one PodGroup), as kube-scheduler refuses it."""

    pod: str
    group: str  # namespace/name
    names: tuple[str, ...]
    kind: str = "PodGroup"  # or "CompositePodGroup": the whole tree under it is one group


@dataclass(frozen=True)
class CompositeMissing:
    """A pod whose Workload PodGroup names a parent CompositePodGroup that does not exist (yet)."""

    pod: str
    group: str  # namespace/name of the pod's PodGroup
    parent: str  # namespace/name of the CompositePodGroup it names


@dataclass(frozen=True)
class CompositeShort:
    """A CompositePodGroup with fewer than ``need`` children that have their minimum of pods
    (``children``: each child's name, pods and minimum), as kube-scheduler waits for them."""

    composite: str
    need: int
    children: tuple[tuple[str, int, int], ...]


@dataclass(frozen=True)
class GroupNameShared:
    """A PodGroup and a CompositePodGroup of one namespace/name: the gang key cannot tell them apart."""

    pod: str
    group: str  # namespace/name


@dataclass(frozen=True)
class GroupPriority:
    """A pod whose priority differs from its Workload PodGroup's, as kube-scheduler refuses it."""

    pod: str
    group: str  # namespace/name
    pod_priority: int
    group_priority: int
    kind: str = "PodGroup"  # or "CompositePodGroup": a child's pods have the priority of the tree's root


@dataclass(frozen=True)
class GroupPreemptionPolicy:
    """A pod whose preemptionPolicy differs from its Workload PodGroup's (the tree root's), as
    kube-scheduler refuses it with the PodGroupPreemptionPolicy gate on."""

    pod: str
    group: str  # namespace/name
    pod_policy: str
    group_policy: str
    kind: str = "PodGroup"  # or "CompositePodGroup"


@dataclass(frozen=True)
class Refused:
    """A GangGroup waits as a whole for a member that is refused (``inner``)."""

    group: GroupId
    inner: Reason


@dataclass(frozen=True)
class JobFailed:
    """Evaluating the job raised: it is skipped, the rest of the queue goes on."""

    error: str  # the exception's type name
    detail: str


@dataclass(frozen=True)
class NodesFiltered:
    """kube-scheduler's ``0/N nodes are available: ...``: per filter reason, the nodes it ruled out,
    in the order counted (a ``PreFilterReason`` among them is said alone)."""

    total: int
    counts: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Inside:
    """``inner`` (a node count) searched only inside ``domain`` (None: the region searched, unnamed),
    the widest the job may take; ``others``: the next domains of its level, tried after it, that
    failed too; ``untried``: how many more of that level had the room but were not tried (the search
    is bounded)."""

    inner: Reason
    domain: str | None = None
    others: tuple[str, ...] = ()
    untried: int = 0


@dataclass(frozen=True)
class OnePerNode:
    """``inner`` where the members of a job repel each other per node: they share host ports
    (``ports``), else their anti-affinity on ``keys``."""

    inner: Reason
    ports: bool
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class WithNotes:
    """``inner`` followed by the notes of the job's topology requirement (layers it ignored)."""

    inner: Reason
    notes: tuple[str, ...]


@dataclass(frozen=True)
class NoCandidate:
    """No domain of a gather tree takes the job (Koordinator's words for its own tree, else a
    Topology's domains by level). ``domains``: (layer, name, offerslot) listed, ``more`` not listed;
    ``split``: the multiples per layer no allowed domain with room splits the job into; ``unlike``:
    members of several shapes went with their common shape; ``filtered``: static counts."""

    total: int
    desired: int
    koordinator: bool
    root_layer: str
    domains: tuple[tuple[str, str, int], ...]
    more: int = 0
    split: tuple[tuple[int, str], ...] = ()
    unlike: bool = False
    filtered: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class TierOffer:
    rank: int
    slots: int
    among: int  # domains of that tier searched
    name: str  # the best one ("the cluster" for the root)


@dataclass(frozen=True)
class NoHyperNode:
    """Volcano's tiers: no HyperNode (up to ``highest``, when hard and limited) takes all the pods."""

    total: int
    hard: bool
    highest: int | None
    pods: int
    offers: tuple[TierOffer, ...] = ()


@dataclass(frozen=True)
class SubGroupLeft:
    """Enough sub-groups went into a HyperNode, but this one fits nowhere within the job's limit (or,
    ``placed`` > 0, a sub-group that counts with its minimum placed only that many of its pods).
    ``composite``: the CompositePodGroup whose child PodGroup the sub-group is, said in its words:
    ``level`` names the node label whose domain ``within`` is, ``key`` the child's own topology key."""

    subgroup: str
    pending: int
    size: int
    within: str  # the domain's name; "" the whole cluster
    placed: int = 0
    composite: str = ""
    level: str = ""
    key: str = ""


@dataclass(frozen=True)
class KindsNoHyperNode:
    """Volcano's tiers for a job of several kinds of pod: no HyperNode within tier ``highest`` takes
    every kind (``tried`` of ``candidates`` searched before the work bound)."""

    total: int
    highest: int
    pods: int
    tried: int
    candidates: int
    offers: tuple[TierOffer, ...] = ()


@dataclass(frozen=True)
class SubGroupsNoHyperNode:
    """Volcano's sub-groups: no HyperNode within tier ``highest`` holds the sub-groups each policy
    needs (``wanted``), each inside one HyperNode of its own limit (``subgroups``: id, pods, tier); or a
    CompositePodGroup's children, no domain of its key holds the children it needs."""

    total: int
    highest: int
    tried: int
    candidates: int
    wanted: tuple[tuple[str, int], ...]
    subgroups: tuple[tuple[str, int, int | None], ...]
    offers: tuple[TierOffer, ...] = ()
    # A CompositePodGroup's children (``composite``, its namespace/name), said in its words: the node
    # label of each rank (``labels``), each child's minimum (``sizes``, in ``subgroups`` order) and how
    # many children count already by their bound pods (``ready``).
    composite: str = ""
    labels: tuple[tuple[int, str], ...] = ()
    sizes: tuple[int, ...] = ()
    ready: int = 0


@dataclass(frozen=True)
class NoDomainAtLevel:
    """KAI's levels: no domain at or above the preferred level within the required one takes the job."""

    total: int
    root_layer: str
    preferred: str
    within: str
    desired: int
    offers: tuple[tuple[str, int], ...] = ()  # each domain of the required level listed, with its offerslot


@dataclass(frozen=True)
class NoExclusiveDomain:
    """JobSet's exclusive placement: no domain of its label takes one Job alone with room for all the
    pods it runs, or the domain its running pods keep it in has no room for the ones pending."""

    total: int
    job: str  # the Job's name
    pods: int  # the pods it needs room for
    label: str  # the node label of the exclusive placement
    offers: tuple[tuple[str, int], ...] = ()  # domains it may take, each with the room for its pods
    taken: tuple[str, ...] = ()  # domains the JobSet's other Jobs hold
    within: str = ""  # the domain its running pods keep it in ("" when none runs)


@dataclass(frozen=True)
class VolumesTogether:
    """The members' volumes pass one by one but not placed together (``why``: the volume rules')."""

    total: int
    why: str


@dataclass(frozen=True)
class DevicesTogether:
    """A member's claims cannot be allocated on the node placement gave it, once the members before it
    in rank order took their devices (``why``: the device rules' per-node reason)."""

    total: int
    node: str
    why: str
    # The gang's devices searched as a whole stopped at its bound before it could tell (None: it did
    # not run, or found there is no assignment).
    stopped: GangStopped | None = None


@dataclass(frozen=True)
class PreBindConflict:
    """A member's claim lost its PV to a member bound before it (``why``: the volume rules')."""

    total: int
    why: str


@dataclass(frozen=True)
class WithPreemption:
    """The failed member's reason followed by what preemption did (a rendered preemption reason)."""

    inner: Reason
    preemption: str


@dataclass(frozen=True)
class MemberRejected:
    """Kube-scheduler's coscheduling words for the other members of a GangGroup whose member failed."""

    group: GroupId
    member: str
    inner: Reason
    already: int
    preemption: str = ""  # the failed member's preemption message, quoted


@dataclass(frozen=True)
class GroupUnschedulable:
    """Kube-scheduler's words for the other pods of a group its group cycle could not place (a
    ``scheduling.k8s.io`` PodGroup or CompositePodGroup): the group is unschedulable, for the member
    that failed."""

    group: GroupId
    member: str
    inner: Reason
    preemption: str = ""  # the failed member's preemption message, quoted


@dataclass(frozen=True)
class BeyondMinimum:
    """A GangGroup met its minimums; its members that did not fit wait on their own."""

    group: GroupId
    bound: int
    pending: int
    inner: Reason


@dataclass(frozen=True)
class ReplacementsDoNotFit:
    """A gang below its minimum because members were lost (a failed node, an eviction, a failure)
    cannot take the replacements it needs together in the domain its live members keep it in (``""``:
    anywhere), nor with the room preemption could make there (``preemption``: what it said)."""

    gang: str
    domain: str
    missing: int
    inner: Reason
    preemption: str = ""


@dataclass(frozen=True)
class NotEligible:
    """Preemption may not run: the pod's policy is Never, or victims still terminate."""

    why: Literal["never", "terminating"]


@dataclass(frozen=True)
class NotHelpful:
    """Preemption cannot help: even without every lower-priority pod no candidate takes the job
    (``best``: the most one offers, ``where``), or (``best`` None) none verified."""

    desired: int
    best: int | None = None
    where: str = ""


@dataclass(frozen=True)
class RoomTakenBack:
    where: str


@dataclass(frozen=True)
class PreemptionDelayed:
    """Preemption would make room, but the job's preemption delay (``delay`` seconds, set by
    ``where``) has not passed: it may preempt in ``left`` seconds, at ``ends``."""

    left: float
    ends: float
    delay: float
    where: str


@dataclass(frozen=True)
class MinRuntimeProtected:
    """Lower-priority pods that could make room run for less than their minimum runtime: ``victim``
    (a job, as jobs are named) has run ``ran`` seconds of its ``minimum``; ``others`` more jobs are
    protected too. Preemption is tried again when the first protection ends."""

    victim: str
    ran: float
    minimum: float
    others: int = 0


@dataclass(frozen=True)
class AdmittedElsewhere:
    """Lower-priority pods that could make room were admitted by a controller in front of koordpy
    (``by``, Kueue), whose own preemption decides about them: ``victim`` is one of them, of its
    object ``what`` ("" when the pod does not name it); ``others`` more pods too. Only a change in
    the cluster (that controller's preemption, pods leaving) can make room."""

    victim: str
    by: str
    what: str = ""
    others: int = 0


@dataclass(frozen=True)
class AssignmentUnmet:
    """``inner`` for a pod a controller in front of koordpy (``by``, Kueue) admitted and assigned to
    a topology domain, by the node labels ``assigned`` (its nodeSelector): the domain cannot take the
    job, and koordpy places it nowhere else. ``what``: the object admitted ("" when the pod does not
    name it); ``recovers``: how that controller ends the wait (Kueue's waitForPodsReady)."""

    inner: Reason
    by: str
    assigned: tuple[tuple[str, str], ...]
    what: str = ""
    recovers: str = ""


@dataclass(frozen=True)
class Preempting:
    victims: tuple[str, ...]
    jobs: int
    where: str
    # PodDisruptionBudgets broken: (namespace/name, victims beyond its budget); pods a budget kept.
    beyond: tuple[tuple[str, int], ...] = ()
    kept: tuple[str, ...] = ()


@dataclass(frozen=True)
class PreemptedBy:
    """The message on a victim."""

    preemptor: GroupId
    trigger: str


@dataclass(frozen=True)
class Assigned:
    pod: str
    node: str


@dataclass(frozen=True)
class BoundWithoutOwner:
    kind: str
    namespace: str
    name: str
    grace: float


Reason: TypeAlias = (
    Text | OwnerMissing | MarkedTimedOut | TooFewMembers | GatedMembers | PeerUndeclared | PeerNotBack
    | MinResourcesShort | TimedOut | GangTimeoutEvent | WaitingForMembers | GangStale | StaleEvicted
    | GroupNamedOtherwise | GroupMissing | GroupRefused | GroupSchedulers | GroupPriority
    | GroupPreemptionPolicy | Refused
    | CompositeMissing | CompositeShort | GroupNameShared
    | JobFailed | NodesFiltered | Inside
    | OnePerNode | WithNotes | NoCandidate | NoHyperNode | SubGroupLeft | KindsNoHyperNode
    | SubGroupsNoHyperNode | NoDomainAtLevel | NoExclusiveDomain | VolumesTogether | DevicesTogether
    | PreBindConflict | WithPreemption
    | MemberRejected | GroupUnschedulable | BeyondMinimum | ReplacementsDoNotFit
    | NotEligible | NotHelpful | RoomTakenBack | Preempting
    | PreemptionDelayed | MinRuntimeProtected | AdmittedElsewhere | AssignmentUnmet | PreemptedBy
    | Assigned | BoundWithoutOwner
)


@dataclass(frozen=True)
class Verdict:
    """Why a job is not tried now (pre_filter's answer): its intent, its reason and what may wake it."""

    code: Code
    reason: Reason
    wake: Wake | None = None


@dataclass(frozen=True)
class Closest:
    """The domain that came closest to taking a job that fits none: its name as the failure lists
    it, the pods it offers room for, its nodes, and per reason how many of them the job's first pod
    cannot use at all (each node under the first filter it fails, kube-scheduler's words: devices a
    claim finds too few of, a resource short, a taint). Worked out only for ``koordpy explain``."""

    domain: str
    offers: int
    nodes: int
    lacks: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Failure:
    """Why a job was not placed: the diagnosis its messages are rendered from.

    ``code``: UNSCHEDULABLE when removing pods could change the answer (room, offerslots), else
    UNRESOLVABLE (filters, an unknown layer or a configuration that no preemption can fix).
    ``filtered`` counts the nodes each reason rules out (kube-scheduler's ``0/N nodes are
    available``); ``domains`` gives the offerslot of each domain the message lists against ``desired``;
    ``closest``, when a dry run asked for it, what the best of them lacked."""

    pod: Pod
    why: Reason
    code: Code = Code.UNSCHEDULABLE
    filtered: tuple[tuple[str, int], ...] = ()
    domains: tuple[tuple[str, int], ...] = ()
    desired: int = 0
    closest: Closest | None = None

    @property
    def resolvable(self) -> bool:
        """Whether removing pods (preemption) could change the answer."""
        return self.code is Code.UNSCHEDULABLE


def condition_reason(reason: Reason) -> str:
    """The reason of the ``PodScheduled=False`` condition a refused pod gets: ``SchedulerError`` for a
    group kube-scheduler's own validation refuses (its pods' schedulerNames, priorities or preemption
    policies do not match), as it writes it; ``Unschedulable`` for everything else."""
    while isinstance(reason, AssignmentUnmet):
        reason = reason.inner
    inner = reason.inner if isinstance(reason, Refused) else reason
    if isinstance(inner, GroupSchedulers | GroupPriority | GroupPreemptionPolicy) or filter_error(reason):
        return "SchedulerError"
    return "Unschedulable"


def filter_error(reason: Reason) -> FilterError | None:
    """The filter's error status a node count carries, under the reasons that wrap one."""
    while isinstance(reason, Refused | Inside | OnePerNode | WithNotes | AssignmentUnmet):
        reason = reason.inner
    if isinstance(reason, NodesFiltered):
        return next((r for r, _ in reason.counts if isinstance(r, FilterError)), None)
    return None


def resolvable(flag: bool) -> Code:
    """The code of a failure from whether removing pods could change its answer."""
    return Code.UNSCHEDULABLE if flag else Code.UNRESOLVABLE
