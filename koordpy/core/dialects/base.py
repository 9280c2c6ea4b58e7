"""The protocols a dialect implements, one per capability: what the core asks of an API family.

A dialect is one API family's words for gangs and topology (Koordinator's scheduler-plugins
PodGroup and ClusterNetworkTopology, Volcano's PodGroup and HyperNodes, KAI's PodGroup, Topology
objects and placement annotations, Kubernetes' own Workload PodGroup). Each module of
``koordpy.core.dialects`` defines one dialect object; ``Dialect`` is what every one has (its name
and kinds), and each capability is a small protocol of its own, as kube-scheduler has one interface
per extension point: ``Gangs`` (which pods form a gang and what it asks), ``Finishing`` (a gang's minimum lowered by
its pods that finished), ``Runtimes`` (a gang's
minimum runtime, last start and preemption delay), ``Statuses`` (what a
gang's objects are told: their status, Events), ``Staleness`` (where a stale gang's clock and grace
are kept), ``Admission`` (pods it refuses, and the check of
a pending pod's own declaration the shells make before the core sees it), ``Admitters`` (the
pods a controller in front of koordpy admitted, whose preemption and recovery are that
controller's), ``Explains`` (what ``koordpy explain`` says of its objects), ``Topologies`` (its
trees) and ``Manifests`` (``koordpy topology generate``). The registries
(``koordpy.core.dialects``) list, per capability, the dialects that have it; the rest of the
core reaches a dialect only through them, an ``Ask`` (``koordpy.core.model``) or a
``GangStatus`` (``koordpy.core.decisions``), never by testing which one it is.

Belongs here: the protocols, and per capability a base class (``GangsBase``...) with the neutral
answer to its optional questions (no parent group, no refusal, no status...), which a dialect
derives from for each capability it has, so that it writes only what it does. Does not belong here:
any one dialect's code (its module), the registries and the dispatch over them
(``koordpy.core.dialects``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Container, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from koordpy.api.dra import ClaimGroup
from koordpy.api.kinds import Kind, Role
from koordpy.api.objects import Node, Pod
from koordpy.api.owners import Owner
from koordpy.api.quantity import parse_go_duration
from koordpy.api.raw import rfc3339
from koordpy.core.decisions import Annotate, Decision, GangStatus, ObjectAnnotate, ObjectStatus
from koordpy.core.model import Gang, TreeSource
from koordpy.core.runtime import (
    ANN_MIN_RUNTIME,
    ANN_PREEMPTION_DELAY,
    NOT_SET,
    Said,
    Source,
    annotated,
    earliest_start,
    on_pods,
    pending_anchor,
)
from koordpy.core.snapshot import Snapshot
from koordpy.core.topology_manifests import Generated
from koordpy.core.tree import ShownTree, TopologyTree, TreeKey
from koordpy.core.verdicts import Reason

# koordpy's own keys for a stale gang (``koordpy.core.stale``): since when it is stale (RFC 3339),
# and a job's grace before it is evicted (a Go duration such as 90s or -1s, or a number of seconds).
STALE_SINCE_ANN = "koordpy.io/stale-since"
GRACE_ANN = "koordpy.io/staleness-grace-period"


@dataclass(frozen=True)
class GroupTerms:
    """A group's minimum as ``koordpy explain`` states it, in the words of the object that declares it."""

    field: str  # the field that sets it: minMember, minCount, minGroupCount
    said: str  # the minimum as the object says it ("minCount 8", "minGroupCount 2 child PodGroups ...")
    minimum: int  # in pods
    # Whether a mode (Strict / NonStrict) and a waiting time are the gang's own words (Koordinator's);
    # other dialects' gangs have neither, and explain does not speak of them.
    modes: bool = False


@dataclass(frozen=True)
class GroupRow:
    """A gang's object as ``koordpy simulate``'s table shows it, in its dialect's words: the columns
    after its key (title, and the width its cell is padded to) and its cells."""

    columns: tuple[tuple[str, int], ...]
    cells: tuple[str, ...]


def fields_row(shown: Mapping[str, Any]) -> GroupRow:
    """The row of an object reported by its fields as they are (``name=value``)."""
    return GroupRow((("STATUS", 0),), (", ".join(f"{k}={v}" for k, v in shown.items()),))


def phase_row(shown: Mapping[str, Any]) -> GroupRow:
    """The row of a PodGroup reported by its phase and its scheduled members of its minimum."""
    return GroupRow((("PHASE", 13), ("SCHEDULED/MIN", 0)),
                    (str(shown["phase"]), f"{shown['scheduled']}/{shown['minMember']}"))


# What a dialect's check of a pending pod's own declaration (its gang and topology annotations)
# depends on besides the pod, so that the shells check a pod again only when it changed: (the gang
# object the pod names, whose pods are checked again when it changes; that object as held now,
# None when there is none; whether that object failed to parse, when its error is its own and not
# its pods'). A plain tuple: it is made for every pending pod a snapshot shows.
Declaration = tuple[str | None, object, bool]


# The objects a shell holds, by store (``Kind.store``) and key: what a pod's declaration is checked
# against as it arrives, between snapshots.
Objects = Mapping[str, Mapping[str, Any]]


@runtime_checkable
class Dialect(Protocol):
    """What every dialect has, whatever it can do."""

    @property
    def name(self) -> str:
        """How ``TreeKey.dialect`` names it."""
        ...

    @property
    def roles(self) -> tuple[Role, ...]:
        """The kinds it reads (``koordpy.api.kinds`` roles), which fill its ``Snapshot`` fields."""
        ...

    def compare_key(self, role: Role) -> Callable[[Any], object] | None:
        """How the core's standing view tells a change that matters in its objects of kind ``role``:
        a function giving what of an object shapes scheduling (a HyperNode's spec, not the status the
        scheduler writes on it), or None to compare whole objects."""
        ...


@runtime_checkable
class Gangs(Dialect, Protocol):
    """Which pods form a gang in its words, and what the gang asks."""

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        """The gang key a live pod joins in this dialect's words, else None (``owners`` None: only
        what the pod itself says)."""
        ...

    def enclosing(self, key: str, snapshot: Snapshot) -> str | None:
        """The gang that the group ``key`` (as ``member`` gave it) is part of, when its object says
        so (a PodGroup that names a parent CompositePodGroup); None: the group is its own gang."""
        ...

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        """The keys of the gangs its objects declare (whether or not they have pods yet)."""
        ...

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        """Whether one of its objects declares the gang ``key`` (then it builds it)."""
        ...

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        """The gang ``key`` with its live members, or None when nothing declares it any more."""
        ...

    def written_asks(self, gang: Gang, snapshot: Snapshot) -> tuple[Mapping[str, str], Mapping[str, str]] | None:
        """Where other dialects' topology keys may be written for this gang: the annotations of its
        object and the keys its own spec sets; None when none are read."""
        ...

    def min_resources(self, key: str, snapshot: Snapshot) -> Mapping[str, int] | None:
        """The minimum resources its object asks to be free before the gang is tried."""
        ...

    def claim_groups(self, snapshot: Snapshot) -> Mapping[str, ClaimGroup]:
        """The groups of this dialect that a member's ResourceClaims may be reserved for instead of
        the member (a Workload PodGroup with ``spec.resourceClaims``), by namespace/name: what the
        device rules bind a member's identical entry to."""
        ...


@runtime_checkable
class Finishing(Dialect, Protocol):
    """A dialect whose gang's minimum is what its job still has to run (a JobSet's: a Job whose pods
    succeeded in part runs only the rest). Without it, a gang's minimum is its object's whatever
    finished, as a PodGroup states it (the gang rule counts ``Gang.succeeded``)."""

    def finishing_gang(self, key: str, pods: list[Pod], finished: Sequence[Pod], snapshot: Snapshot) -> Gang | None:
        """``Gangs.gang`` given also the pods that were its members and finished (Succeeded, Failed;
        never none: a gang none of whose pods finished is asked ``gang``)."""
        ...


@runtime_checkable
class Runtimes(Dialect, Protocol):
    """What a gang's objects say of its preemption over time (``koordpy.core.runtime``): how long it
    must have run before it is a victim, since when it runs, and how long it waits before it preempts."""

    def gang_object(self, key: str, snapshot: Snapshot) -> Source | None:
        """Its object that declares the gang ``key``, as messages name it, with its annotations: where
        koordpy's per-job annotations are read first (None: no object, only the pods)."""
        ...

    def min_runtime(self, gang: Gang, snapshot: Snapshot) -> Said:
        """How long the gang must have run since its last start before it may be preempted, as its
        objects set it (``Said.seconds`` None: not set, the settings' default applies)."""
        ...

    def sets_min_runtime(self, snapshot: Snapshot) -> bool:
        """Whether any of its objects (not the pods) sets a minimum runtime now: when none of any
        dialect does, nor a pod, nor the settings, preemption asks no gang (one pass over the objects
        instead of a question per gang in every cycle that preempts)."""
        ...

    def last_start(self, gang: Gang, snapshot: Snapshot) -> tuple[float | None, str | None]:
        """When the gang last started (None: it has not), and why a time its objects hold is not used."""
        ...

    def preemption_delay(self, gang: Gang, snapshot: Snapshot) -> tuple[Said, float]:
        """How long the pending gang waits before it may preempt, as its objects set it, and the time
        that counts from (its creation, or its last eviction when later)."""
        ...


@runtime_checkable
class Statuses(Dialect, Protocol):
    """What the objects that declare its gangs are told: their status after a cycle, and Events."""

    def object_kind(self, key: str, snapshot: Snapshot) -> str | None:
        """The Event kind of its object that declares ``key`` (Events about the gang go there)."""
        ...

    @property
    def reports_timeout(self) -> bool:
        """Whether a gang that times out gets a GangTimeout Event on its object."""
        ...

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        """Every object whose status the gang ``key`` sets after this cycle, by its key, with that
        status, where it differs from what the object says: most gangs set the one object ``key``
        names, a gang that spans several sets each (a CompositePodGroup's
        children). ``members``: its pods, those that finished (Succeeded, Failed) included;
        ``pending``: why each member left unbound waits, by pod key."""
        ...

    def said(self, kind: Kind, obj: Any) -> Mapping[str, object] | None:
        """What ``obj``, an object of its kind ``kind`` as a shell holds it, says its status is now, in
        the fields and the spelling its ``GangStatus.wire`` gives (the live writer skips a write the
        object says already); None: unknown, the write goes."""
        ...

    def object_statuses(self, trees: TreeSource) -> Iterable[ObjectStatus]:
        """The status each of its topology objects should have, computed from the core's trees over
        ``trees.nodes`` (a ClusterNetworkTopology's ``detailStatus``, a HyperNode's ``nodeCount``),
        whether or not the object says so already: the live shell writes those that differ."""
        ...

    @property
    def shown_empty(self) -> Mapping[str, Any]:
        """What ``koordpy simulate`` reports of its topology objects when it has none, by JSON key."""
        ...

    def shown_groups(self, snapshot: Snapshot) -> Iterable[tuple[str, str, dict[str, Any], GroupRow]]:
        """What ``koordpy simulate`` reports of the objects that declare its gangs, once the world
        settled (``snapshot``): (object key, the heading its table shows it under, its fields in the
        JSON, its row in that table) for each it reports."""
        ...

    @property
    def invalid_reasons(self) -> Mapping[tuple[str, str], str]:
        """The Event reason told an object of its that does not parse, by (the cache's name for the
        kind, the field the error starts with) where it is not ``Invalid<Kind>``."""
        ...


@runtime_checkable
class Staleness(Dialect, Protocol):
    """Where a stale gang (``koordpy.core.stale``) keeps since when it is stale, so that a restart or a
    new leader keeps the clock, and where its own grace before eviction is read."""

    @property
    def stale_annotation(self) -> str:
        """The annotation that holds the stale-since (RFC 3339)."""
        ...

    @property
    def grace_annotation(self) -> str:
        """The annotation a job sets its grace in (a Go duration or seconds; negative: never evicted)."""
        ...

    def stale_object(self, key: str, snapshot: Snapshot) -> tuple[Kind, Mapping[str, str]] | None:
        """The object that keeps the gang's stale-since (its kind and annotations); None: none, its
        live members keep it."""
        ...

    def stale_since(self, key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
        """Since when the gang ``key`` is stale as its object (or, with none, its live ``members``)
        says; None: not said."""
        ...

    def stale_grace(self, key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
        """The gang's own grace before it is evicted once stale, in seconds (negative: never, only
        reported); None: the job sets none (the setting's applies)."""
        ...

    def stale_marks(self, key: str, members: Sequence[Pod], since: float | None, snapshot: Snapshot,
                    decided: Mapping[str, GangStatus]) -> Sequence[Decision]:
        """The writes that make the gang's object (or its live ``members``) say it is stale since
        ``since`` (None: that it is not), only where they say otherwise: an annotation, or a
        condition of the object's status, then made on top of the status this cycle ``decided``
        for it already (by object key: the later write is the one that stands)."""
        ...


@runtime_checkable
class Admission(Dialect, Protocol):
    """The pods it will not let koordpy place, and why."""

    @property
    def refused_fields(self) -> Mapping[str, str]:
        """Pod-spec fields of this dialect koordpy refuses, and the words their messages start with."""
        ...

    def refusal(self, pod: Pod, snapshot: Snapshot) -> Reason | None:
        """Why koordpy will not place ``pod`` in this dialect's terms, or None."""
        ...

    def names_objects(self, pod: Pod) -> bool:
        """Whether the pod names an object of this dialect that may appear or change while the pod
        does not (a job refused for it is looked at every cycle)."""
        ...

    @property
    def checks_declarations(self) -> bool:
        """Whether it checks pending pods' own declarations (``declaration``), before the core sees them."""
        ...

    def declaration(self, pod: Pod, objects: Objects, invalid: Container[str]) -> Declaration | None:
        """What checking the pending pod's declaration in this dialect's words depends on, given the
        shell's ``objects`` and the gang keys whose objects failed to parse (``invalid``); None: the
        pod declares nothing it checks. Asked of every pending pod a snapshot shows: cheap.

        Two shortcuts of ``core/declarations.py`` rest on it, and a dialect must keep both true: the
        answer may depend on the objects of gang kinds only (``Kind.gang``), since a pod checked at
        the same count of their changes (the live cache's version) is answered without asking; and
        the objects it holds must compare equal (``__eq__``) only when they agree in everything
        ``declaration_error`` reads, since an equal declaration reuses the answer before it."""
        ...

    def declared_words(self, pod: Pod) -> Hashable:
        """What of the pod its declaration reads, beyond its ``Declaration`` (pods of one gang declare
        it alike): a declaration accepted against the same object is not checked again in full."""
        ...

    def declaration_error(self, pod: Pod, objects: Objects, invalid: Container[str], accepted: bool) -> str | None:
        """What is wrong in the pod's declaration, in its words (what ``koordpy simulate`` refuses
        up front and the live scheduler reports on the pod), or None. ``accepted``: a pod with the
        same ``declared_words`` was accepted against the same object already; only what is the pod's own
        is left to check."""
        ...


@dataclass(frozen=True)
class Admitted:
    """Who admitted a pod before koordpy places it, as messages name them: the controller
    (``by``), the object it admitted the pod's job as (``what``, "" when the pod does not say), and
    how that controller recovers a job that breaks (``recovers``), and the node labels it assigned the
    pod to (``assigned``: Kueue's topology assignment, written into the pod's nodeSelector; empty:
    none), which koordpy keeps to and names when they cannot take the job."""

    by: str
    what: str
    recovers: str
    assigned: tuple[tuple[str, str], ...] = ()


@runtime_checkable
class Admitters(Dialect, Protocol):
    """A controller in front of koordpy that admits jobs (their quota, their queue, their own
    preemption) before koordpy places their pods: the pods it admitted are not koordpy's preemption
    victims, and a broken gang of them is its to recover (``koordpy.core.preemption``,
    ``koordpy.core.stale``)."""

    def admitted_by(self, pod: Pod) -> Admitted | None:
        """Who admitted ``pod``, from what it carries; None: no controller of this dialect did.
        Asked of each pod the cluster counts whenever its object changes (kept as
        ``PodMeta.admitted``), and again of a victim a message names: cheap."""
        ...


@runtime_checkable
class Explains(Dialect, Protocol):
    """What ``koordpy explain`` says of the objects that declare its gangs."""

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        """What declares the gang, as ``koordpy explain`` says it; None: not this dialect."""
        ...

    def object_facts(self, key: str, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
        """What ``koordpy explain`` says of its object that declares ``key`` beyond the gang's counts
        (its policy, priority, conditions...), as (what, value) pairs in its own terms."""
        ...

    def group_terms(self, key: str, minimum: int | None, snapshot: Snapshot) -> GroupTerms | None:
        """How ``koordpy explain`` states the minimum of the group ``key`` its object declares:
        ``minimum`` is the gang's (as the gang rule counts it), None for a group that is part of a
        gang (``enclosing``), whose own minimum the dialect knows; None: not stated."""
        ...


@runtime_checkable
class Topologies(Dialect, Protocol):
    """The topology trees it defines over the cluster's nodes."""

    def tree_keys(self, snapshot: Snapshot) -> Iterable[TreeKey]:
        """The trees it defines over the snapshot's nodes (always-present ones included)."""
        ...

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        """Its tree ``key`` over ``trees.nodes``, or None when the snapshot does not define it."""
        ...

    def default_tree(self, snapshot: Snapshot) -> TreeKey | None:
        """The tree ``koordpy explain`` draws paths in when the job asks for none, if it has one."""
        ...

    def shown_trees(self, trees: TreeSource) -> Iterable[ShownTree]:
        """The trees ``koordpy topology show`` draws for the snapshot's objects, with their titles
        (only the trees some object defines: not an always-present tree without its object)."""
        ...

    @property
    def sources(self) -> Mapping[str, str]:
        """The topology sources (``Kind.source``, settings' ``topologySources``) that bring its
        objects, and what each brings as help texts say it."""
        ...


@runtime_checkable
class Manifests(Dialect, Protocol):
    """The topology objects ``koordpy topology generate`` writes in its words."""

    @property
    def manifest_format(self) -> str:
        """The ``--format`` of ``koordpy topology generate`` that writes its topology objects."""
        ...

    def manifests(self, nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
        """Its topology objects over ``nodes`` from the label ``keys`` (top level first), named
        ``name`` where the user names them, with warnings about nodes the labels leave out; raises
        ``Unusable`` (``koordpy.core.topology_manifests``) for keys or a name it cannot use."""
        ...

    def warm_up(self) -> Sequence[dict[str, Any]]:
        """A gang of two pods in its words, with a topology ask, as raw objects (the gang's object
        and its pods, in the default namespace, for the scheduler ``koordpy``): what the live
        controller runs the core over once before its first cycle. Nothing: it gives none."""
        ...


class DialectBase:
    """What every dialect derives from: it names itself and its kinds; objects are compared whole
    unless it says otherwise. A capability's base adds the neutral answers to its optional questions
    (None, nothing, False), which the registries take as "not this dialect"."""

    name: str
    roles: tuple[Role, ...]

    def compare_key(self, role: Role) -> Callable[[Any], object] | None:
        return None


class GangsBase(DialectBase):
    """``Gangs``: a dialect answers ``member``, ``declared``, ``declares`` and ``gang`` itself."""

    def enclosing(self, key: str, snapshot: Snapshot) -> str | None:
        return None

    def written_asks(self, gang: Gang, snapshot: Snapshot) -> tuple[Mapping[str, str], Mapping[str, str]] | None:
        return None

    def min_resources(self, key: str, snapshot: Snapshot) -> Mapping[str, int] | None:
        return None

    def claim_groups(self, snapshot: Snapshot) -> Mapping[str, ClaimGroup]:
        return {}


class RuntimesBase(DialectBase):
    """``Runtimes``: koordpy's annotations (``koordpy.io/min-runtime``, ``koordpy.io/preemption-delay``)
    on the gang's object (``gang_object``: none here), then on its pods; its live members' earliest
    start (one terminating, or on a failed node, is not of its run now); its delay counted from its
    creation or its oldest pending member's, when later."""

    def gang_object(self, key: str, snapshot: Snapshot) -> Source | None:
        return None

    def sets_min_runtime(self, snapshot: Snapshot) -> bool:
        return False

    def min_runtime(self, gang: Gang, snapshot: Snapshot) -> Said:
        return self._annotated(ANN_MIN_RUNTIME, gang, snapshot)

    def last_start(self, gang: Gang, snapshot: Snapshot) -> tuple[float | None, str | None]:
        return earliest_start(gang.live()), None

    def preemption_delay(self, gang: Gang, snapshot: Snapshot) -> tuple[Said, float]:
        return self._annotated(ANN_PREEMPTION_DELAY, gang, snapshot), pending_anchor(gang.creation, gang.pods)

    def _annotated(self, key: str, gang: Gang, snapshot: Snapshot) -> Said:
        """koordpy's annotation ``key`` on the gang's object, else on its pods."""
        own = self.gang_object(gang.key, snapshot)
        said = annotated(key, (own,)) if own is not None else NOT_SET
        return said if said.seconds is not None else on_pods(key, gang.pods)


class StatusesBase(DialectBase):
    """``Statuses``: a dialect writes ``status`` (or ``statuses``) and names its ``object_kind``."""

    reports_timeout = False
    shown_empty: Mapping[str, Any] = {}
    invalid_reasons: Mapping[tuple[str, str], str] = {}

    def object_kind(self, key: str, snapshot: Snapshot) -> str | None:
        return None

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        return ()

    def said(self, kind: Kind, obj: Any) -> Mapping[str, object] | None:
        return None

    def object_statuses(self, trees: TreeSource) -> Iterable[ObjectStatus]:
        return ()

    def shown_groups(self, snapshot: Snapshot) -> Iterable[tuple[str, str, dict[str, Any], GroupRow]]:
        return ()


def annotates_min_runtime(objects: Iterable[Any]) -> bool:
    """Whether any of ``objects`` (with ``annotations``) carries ``koordpy.io/min-runtime``."""
    return any(ANN_MIN_RUNTIME in o.annotations for o in objects)


def read_stamp(value: str | None) -> float | None:
    """Seconds since the epoch from an RFC 3339 time with its zone; None when absent or unreadable
    (a stamp someone mangled restarts the clock rather than stop the scheduler)."""
    if not value:
        return None
    try:
        found = datetime.fromisoformat(value.replace("z", "Z").replace("Z", "+00:00"))
    except ValueError:
        return None
    return found.timestamp() if found.tzinfo is not None else None


def read_grace(value: str | None) -> float | None:
    """A grace in seconds from a Go duration (``90s``, ``-1s``) or a number; None when absent or
    unreadable (KAI's podgrouper ignores an unparsable value the same way)."""
    if value is None or not value.strip():
        return None
    try:
        return parse_go_duration(value.strip())
    except ValueError:
        pass
    try:
        found = float(value)
    except ValueError:
        return None
    return found if math.isfinite(found) else None


def members_stale_since(members: Iterable[Pod]) -> float | None:
    """The earliest stale-since a live member carries (a member replaced since lost its own)."""
    found = [t for p in members if (t := read_stamp(p.annotations.get(STALE_SINCE_ANN))) is not None]
    return min(found, default=None)


def members_grace(members: Iterable[Pod], annotation: str) -> float | None:
    """The grace the first member that says one readably says."""
    for p in members:
        found = read_grace(p.annotations.get(annotation))
        if found is not None:
            return found
    return None


def member_marks(members: Iterable[Pod], since: float | None) -> tuple[Annotate, ...]:
    """The stale-since annotation written on each live member that does not carry it (removed from
    each that does, for None; a member being deleted is left alone)."""
    if since is None:
        return tuple(Annotate(p.key, STALE_SINCE_ANN, None) for p in members
                     if not p.deleting and STALE_SINCE_ANN in p.annotations)
    stamp = rfc3339(since)
    return tuple(Annotate(p.key, STALE_SINCE_ANN, stamp) for p in members
                 if not p.deleting and p.annotations.get(STALE_SINCE_ANN) != stamp)


def object_marks(kind: Kind, key: str, annotations: Mapping[str, str], annotation: str,
                 since: float | None) -> tuple[ObjectAnnotate, ...]:
    """The write that makes the object ``key`` of ``kind`` carry ``since`` in ``annotation``, if it
    does not already."""
    if since is None:
        return (ObjectAnnotate(kind, key, annotation, None),) if annotation in annotations else ()
    stamp = rfc3339(since)
    return () if annotations.get(annotation) == stamp else (ObjectAnnotate(kind, key, annotation, stamp),)


class StalenessBase(DialectBase):
    """``Staleness``: a gang with no object (gang annotations, a group implied by its owner) keeps its
    stale-since on its live members and reads its grace there; a dialect whose object declares the
    gang names it (``stale_object``), which then holds both, under koordpy's keys unless it says
    others."""

    stale_annotation = STALE_SINCE_ANN
    grace_annotation = GRACE_ANN

    def stale_object(self, key: str, snapshot: Snapshot) -> tuple[Kind, Mapping[str, str]] | None:
        return None

    def stale_since(self, key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
        obj = self.stale_object(key, snapshot)
        return members_stale_since(members) if obj is None else read_stamp(obj[1].get(self.stale_annotation))

    def stale_grace(self, key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
        obj = self.stale_object(key, snapshot)
        found = None if obj is None else read_grace(obj[1].get(self.grace_annotation))
        return found if found is not None else members_grace(members, self.grace_annotation)

    def stale_marks(self, key: str, members: Sequence[Pod], since: float | None, snapshot: Snapshot,
                    decided: Mapping[str, GangStatus]) -> Sequence[Decision]:
        obj = self.stale_object(key, snapshot)
        if obj is None:
            return member_marks(members, since)
        return object_marks(obj[0], key, obj[1], self.stale_annotation, since)


class AdmissionBase(DialectBase):
    """``Admission``: a dialect answers ``refusal`` itself."""

    refused_fields: Mapping[str, str] = {}
    checks_declarations = False

    def names_objects(self, pod: Pod) -> bool:
        return False

    def declaration(self, pod: Pod, objects: Objects, invalid: Container[str]) -> Declaration | None:
        return None

    def declared_words(self, pod: Pod) -> Hashable:
        return None

    def declaration_error(self, pod: Pod, objects: Objects, invalid: Container[str], accepted: bool) -> str | None:
        return None


class ExplainsBase(DialectBase):
    """``Explains``: a dialect answers ``declared_by`` itself."""

    def object_facts(self, key: str, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
        return ()

    def group_terms(self, key: str, minimum: int | None, snapshot: Snapshot) -> GroupTerms | None:
        # scheduler-plugins', Volcano's and KAI's PodGroups all call it minMember; only the
        # registry's dispatch asks, and only the dialect that declares the group.
        return None if minimum is None else GroupTerms("minMember", f"minMember {minimum}", minimum)


class TopologiesBase(DialectBase):
    """``Topologies``: a dialect answers ``tree_keys`` and ``tree`` itself."""

    sources: Mapping[str, str] = {}

    def default_tree(self, snapshot: Snapshot) -> TreeKey | None:
        return None

    def shown_trees(self, trees: TreeSource) -> Iterable[ShownTree]:
        return ()


class ManifestsBase(DialectBase):
    """``Manifests``: a dialect writes ``manifests`` and names its ``manifest_format`` itself."""

    def warm_up(self) -> Sequence[dict[str, Any]]:
        return ()


def final_stands(phase: str | None, finals: Collection[str], members: Iterable[Pod]) -> bool:
    """Whether a PodGroup's final phase (its job over: ``finals``) stands: while none of its pods is
    live, what is left of them (its finished pods deleted one by one, with their Job or by the pod
    garbage collector) says nothing new, as the PodGroup controllers stop at those phases."""
    return phase in finals and all(p.terminal for p in members)
