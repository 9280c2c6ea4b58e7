"""The dialects: the only core code that knows an API family, and the registries that list them.

Each module here is one dialect behind the capability protocols of ``base``: ``koordinator``
(scheduler-plugins PodGroups, gang annotations, the ClusterNetworkTopology and gather specs),
``volcano`` (its PodGroups, HyperNodes, network topology modes and sub-groups), ``kai`` (its
PodGroups, owners' implicit groups, Kueue and KAI Topology objects and KAI's placement keys) and
``upstream`` (Kubernetes' own Workload PodGroup) and ``jobset`` (a JobSet's pods no other dialect
claims, and JobSet's exclusive placement). Dialects do not import each other.

This module is the registries and the dispatch over them: ``DIALECTS`` (the one line a dialect is
added by; the order is the precedence when two declare the same gang), and per capability the
dialects that have it (``GANGS``, ``STATUSES``, ``ADMISSION`` and its ``DECLARING``, ``ADMITTERS``, ``EXPLAINS``,
``TOPOLOGIES``, ``MANIFESTS``), each asked only through its own registry; the gang resolution that asks each in
turn, the topology keys one dialect may find written in another's object (a PodGroup of one API
carrying Volcano's or KAI's annotations), and ``Trees``, the cluster's trees by ``TreeKey``, each
built by its dialect the first time a cycle asks for it (each dialect caches its trees while their
inputs stay the same). Does not belong here: choosing domains or nodes
(``koordpy.core.placement``), the gang rule (``koordpy.core.gang``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from functools import cached_property
from typing import Any, TypeVar, cast

from koordpy.api.dra import ClaimGroup
from koordpy.api.errors import ParseError
from koordpy.api.kinds import Kind, Role
from koordpy.api.kinds import roles as kind_roles
from koordpy.api.objects import Node, Pod
from koordpy.api.volcano import network_topology_from_annotations
from koordpy.core.decisions import Decision, GangStatus, ObjectStatus
from koordpy.core.dialects import jobset, kai, koordinator, upstream, volcano
from koordpy.core.dialects.base import (
    Admission,
    Admitted,
    Admitters,
    Dialect,
    Explains,
    Finishing,
    Gangs,
    GroupTerms,
    Manifests,
    Runtimes,
    RuntimesBase,
    Staleness,
    StalenessBase,
    Statuses,
    Topologies,
)
from koordpy.core.dialects.base import (
    GroupRow as GroupRow,  # re-exported: the simulator keeps the rows
)
from koordpy.core.dialects.volcano import HyperNodeTree
from koordpy.core.model import Gang, earliest
from koordpy.core.owners import top_owner
from koordpy.core.runtime import ANN_MIN_RUNTIME, Delay, Runtime, with_default
from koordpy.core.snapshot import Snapshot
from koordpy.core.tree import ShownTree, TopologyTree, TreeKey
from koordpy.core.verdicts import Reason

T = TypeVar("T")

# The dialects, in the order of precedence when two declare the same gang (a dialect is added by
# its line here; ``register`` adds one from outside, as a test does).
DIALECTS: tuple[Dialect, ...]
BY_NAME: dict[str, Dialect] = {}
# One registry per capability, in the order of precedence: a dialect is in those whose protocol it
# implements (``base``), found once (``_index``) rather than asked of every object.
GANGS: tuple[Gangs, ...]
STATUSES: tuple[Statuses, ...]
STALENESS: tuple[Staleness, ...]
ADMISSION: tuple[Admission, ...]
# Those that check pending pods' own declarations before the core sees them (``koordpy.core.declarations``).
DECLARING: tuple[Admission, ...]
# The controllers in front of koordpy that admit jobs (Kueue): the pods they admitted.
ADMITTERS: tuple[Admitters, ...]
EXPLAINS: tuple[Explains, ...]
TOPOLOGIES: tuple[Topologies, ...]
MANIFESTS: tuple[Manifests, ...]
RUNTIMES: tuple[Runtimes, ...]
_RUNTIMES_BY_NAME: dict[str, Runtimes] = {}
FINISHING: tuple[Finishing, ...]
_FINISHING_BY_NAME: dict[str, Finishing] = {}
# What a gang of a dialect without ``Runtimes`` is asked instead: koordpy's annotations.
_NEUTRAL_RUNTIMES = RuntimesBase()
# The tree a job without a topology request is placed in: the ClusterNetworkTopology's (the
# cluster and its nodes when there is none).
DEFAULT_TREE = koordinator.TREE
# The gangs no object declares (gang annotations on the pods) are Koordinator's.
ANNOTATION_GANGS: Gangs = koordinator.DIALECT
# Which object an Event about a gang goes to when two kinds declare it: a Volcano PodGroup is told
# before a scheduler-plugins one of the same name, as it always was.
_EVENT_ORDER: tuple[Statuses, ...]
_STATUSES_BY_NAME: dict[str, Statuses] = {}
_STALENESS_BY_NAME: dict[str, Staleness] = {}
# The topology sources (``Kind.source``) and what each brings, as help texts say it.
TOPOLOGY_SOURCES: dict[str, str] = {}
_INVALID_REASONS: dict[tuple[str, str], str] = {}
_EXPLAINS_BY_NAME: dict[str, Explains] = {}
_TOPOLOGIES_BY_NAME: dict[str, Topologies] = {}
_ADMISSION_BY_NAME: dict[str, Admission] = {}
# Pod-spec fields a dialect refuses, and the words their messages start with.
REFUSED_FIELDS: dict[str, str] = {}


def _index(dialects: tuple[Dialect, ...]) -> None:
    """Every registry from the dialects: the tuples rebound, the tables filled again in place (a
    module that took one by name sees the change)."""
    global DIALECTS, GANGS, STATUSES, STALENESS, ADMISSION, DECLARING, ADMITTERS, EXPLAINS, TOPOLOGIES, MANIFESTS, \
        RUNTIMES, FINISHING, _EVENT_ORDER
    DIALECTS = dialects
    GANGS = tuple(d for d in dialects if isinstance(d, Gangs))
    STATUSES = tuple(d for d in dialects if isinstance(d, Statuses))
    STALENESS = tuple(d for d in dialects if isinstance(d, Staleness))
    ADMISSION = tuple(d for d in dialects if isinstance(d, Admission))
    DECLARING = tuple(d for d in ADMISSION if d.checks_declarations)
    ADMITTERS = tuple(d for d in dialects if isinstance(d, Admitters))
    EXPLAINS = tuple(d for d in dialects if isinstance(d, Explains))
    TOPOLOGIES = tuple(d for d in dialects if isinstance(d, Topologies))
    MANIFESTS = tuple(d for d in dialects if isinstance(d, Manifests))
    RUNTIMES = tuple(d for d in dialects if isinstance(d, Runtimes))
    FINISHING = tuple(d for d in dialects if isinstance(d, Finishing))
    _EVENT_ORDER = (volcano.DIALECT, *(d for d in STATUSES if d is not volcano.DIALECT))
    tables: list[tuple[dict[Any, Any], dict[Any, Any]]] = [
        (BY_NAME, {d.name: d for d in dialects}),
        (_STATUSES_BY_NAME, {d.name: d for d in STATUSES}),
        (_STALENESS_BY_NAME, {d.name: d for d in STALENESS}),
        (TOPOLOGY_SOURCES, {s: said for d in TOPOLOGIES for s, said in d.sources.items()}),
        (_INVALID_REASONS, {at: why for d in STATUSES for at, why in d.invalid_reasons.items()}),
        (_EXPLAINS_BY_NAME, {d.name: d for d in EXPLAINS}),
        (_TOPOLOGIES_BY_NAME, {d.name: d for d in TOPOLOGIES}),
        (_ADMISSION_BY_NAME, {d.name: d for d in ADMISSION}),
        (_RUNTIMES_BY_NAME, {d.name: d for d in RUNTIMES}),
        (_FINISHING_BY_NAME, {d.name: d for d in FINISHING}),
        (REFUSED_FIELDS, {f: words for d in ADMISSION for f, words in d.refused_fields.items()}),
    ]
    for table, entries in tables:
        table.clear()
        table.update(entries)


# JobSet's last: a JobSet's pods are its gang only when no other declaration claims them (a PodGroup,
# a pod's schedulingGroup, gang annotations, a KAI topology on the pods or the JobSet).
_index((koordinator.DIALECT, volcano.DIALECT, kai.DIALECT, upstream.DIALECT, jobset.DIALECT))


def register(dialect: Dialect) -> Callable[[], None]:
    """Adds ``dialect`` to the registries, after those there (a dialect written outside this package,
    as a test's); returns what takes it out again. Its kinds are registered first
    (``koordpy.api.kinds.register``): a role no kind has is refused (ValueError)."""
    unknown = set(dialect.roles) - kind_roles()
    if unknown:
        raise ValueError(f"dialect {dialect.name!r} reads roles no registered kind has: {', '.join(sorted(unknown))}")
    before = DIALECTS
    _index((*before, dialect))
    return lambda: _index(before)


D = TypeVar("D", bound=Dialect)


def first(answer: Callable[[D], T | None], among: Iterable[D]) -> T | None:
    """The first answer that is not None, asking the dialects ``among`` (a capability's registry, in
    its order of precedence) in turn: a dialect answers None for what is not its own."""
    for dialect in among:
        found = answer(dialect)
        if found is not None:
            return found
    return None


C = TypeVar("C", bound=Dialect)


def _capable(dialect: Dialect | None, registry: Mapping[str, C]) -> C | None:
    """``dialect`` as one of a capability's registry (by name), None when it lacks the capability."""
    return registry.get(dialect.name) if dialect is not None else None


def compare_key(role: Role) -> Callable[[Any], object] | None:
    """How the core's standing view compares objects of kind ``role``: the key the dialect that
    reads the kind gives (None: whole objects, also for a kind no dialect reads)."""
    for dialect in DIALECTS:
        if role in dialect.roles:
            return dialect.compare_key(role)
    return None


def claim_groups(snapshot: Snapshot) -> dict[str, ClaimGroup]:
    """The groups members' ResourceClaims may be reserved for, by namespace/name, each dialect's
    (the first to name one wins, as for gangs)."""
    out: dict[str, ClaimGroup] = {}
    for dialect in reversed(GANGS):
        out.update(dialect.claim_groups(snapshot))
    return out


# -- gangs -----------------------------------------------------------------------------------------


def gang_member(pod: Pod, snapshot: Snapshot | None = None) -> str | None:
    """The gang a live pod belongs to, if any, in the first dialect that claims it: a Koordinator
    gang, a Volcano or KAI PodGroup, or (``snapshot`` given) the implicit group of its top-level
    owner among the snapshot's owners (``gang_of`` for a pod that finished: the gang rule never
    counts it)."""
    return None if pod.terminal else gang_of(pod, snapshot)


def gang_of(pod: Pod, snapshot: Snapshot | None = None) -> str | None:
    """The gang the pod is in or, once it finished (Succeeded, Failed), was in: what its gang's
    object status counts it under (``gang_member`` for the gang it is scheduled with)."""
    # ``first`` over ``_claim``, spelled out: asked of every pod the view files (a 3,000-pod gang's
    # refresh paid ~2 ms for the two calls a pod and dialect).
    owners = snapshot.owners if snapshot is not None else None
    for dialect in GANGS:
        key = dialect.member(pod, owners)
        if key is not None:
            # A group that is part of a larger one (a CompositePodGroup's child) joins that gang.
            return (dialect.enclosing(key, snapshot) or key) if snapshot is not None else key
    return None


def _claim(dialect: Gangs, pod: Pod, snapshot: Snapshot | None) -> str | None:
    """The gang ``dialect`` alone puts the pod in (``snapshot`` None: only what the pod itself says)."""
    key = dialect.member(pod, snapshot.owners if snapshot is not None else None)
    if key is None or snapshot is None:
        return key
    # A group that is part of a larger one (a CompositePodGroup's child) joins that gang.
    return dialect.enclosing(key, snapshot) or key


def own_group(pod: Pod, snapshot: Snapshot) -> str | None:
    """The group the pod names itself, before the gang that group may be part of (``enclosing``)."""
    return first(lambda d: d.member(pod, snapshot.owners), GANGS)


def enclosing(key: str, snapshot: Snapshot) -> str | None:
    """The gang that the group ``key`` is part of when its object says so (a CompositePodGroup's
    child PodGroup); None for a group that is its own gang, or that no object declares."""
    dialect = declaring(key, snapshot)
    return dialect.enclosing(key, snapshot) if dialect is not None else None


def declared_keys(snapshot: Snapshot) -> list[str]:
    """Every gang key an object declares: each dialect's, and those of PodGroups that failed to parse."""
    return [*GANGS[0].declared(snapshot), *snapshot.invalid_podgroups,
            *(k for d in GANGS[1:] for k in d.declared(snapshot))]


def declaring(key: str, snapshot: Snapshot) -> Gangs | None:
    """The dialect whose object declares the gang ``key``; None when none does (an annotation gang)."""
    return next((d for d in GANGS if d.declares(key, snapshot)), None)


def build_gang(key: str, pods: list[Pod], snapshot: Snapshot, finished: Collection[Pod] = ()) -> Gang | None:
    """One gang from what declares it, its live member pods and those that were members and finished
    (``finished``: how many Succeeded is ``Gang.succeeded``); None when nothing declares it any more.
    A PodGroup that failed to parse makes a gang that carries the error."""
    invalid = snapshot.invalid_podgroups.get(key)
    if invalid is not None:
        return Gang(key, None, pods, 0.0, f"PodGroup {key} is invalid: {invalid}")
    # Else the dialect whose pods name the key (a group they name that does not exist yet), and
    # for pods no dialect claims that way, gang annotations.
    dialect = declaring(key, snapshot) or _naming(key, pods, snapshot) or ANNOTATION_GANGS
    done = list(finished)
    # Only a dialect whose minimum is what its job still has to run is told what finished.
    finishing = _capable(dialect, _FINISHING_BY_NAME) if done else None
    if finishing is None:
        gang = dialect.gang(key, pods, snapshot)
    else:
        gang = finishing.finishing_gang(key, pods, done, snapshot)
        if gang is not None:
            gang.finished_out = True
    if gang is not None:
        gang.succeeded = sum(1 for p in done if p.phase == "Succeeded")
    written = dialect.written_asks(gang, snapshot) if gang is not None else None
    if gang is not None and written is not None:
        _written_ask(gang, *written, pods, snapshot)
    return gang


def _runtimes(gang: Gang, snapshot: Snapshot) -> Runtimes:
    """The dialect that built the gang (as ``build_gang`` chose it), as ``Runtimes``."""
    built = declaring(gang.key, snapshot) or _naming(gang.key, gang.pods, snapshot) or ANNOTATION_GANGS
    return _capable(built, _RUNTIMES_BY_NAME) or _NEUTRAL_RUNTIMES


def runtime(gang: Gang, snapshot: Snapshot) -> tuple[Runtime, str | None]:
    """The gang's minimum runtime (the settings' default where its objects set none) and last start,
    in its dialect's words, with why a value its objects hold is not used. The start is asked only
    of a gang with a minimum (most have none: their members are not looked at again)."""
    dialect = _runtimes(gang, snapshot)
    minimum = with_default(dialect.min_runtime(gang, snapshot), snapshot.default_min_runtime)
    if not minimum.seconds:
        return Runtime(minimum, None), minimum.problem
    start, problem = dialect.last_start(gang, snapshot)
    return Runtime(minimum, start), minimum.problem or problem


def may_protect(snapshot: Snapshot) -> bool:
    """Whether a minimum runtime may protect any job now: the settings' default, a dialect's objects
    or a pod set one (most clusters: none, and preemption then asks no gang)."""
    return (bool(snapshot.default_min_runtime) or any(d.sets_min_runtime(snapshot) for d in RUNTIMES)
            or any(ANN_MIN_RUNTIME in p.annotations for p in snapshot.pods))


def delay(gang: Gang, snapshot: Snapshot) -> Delay:
    """The pending gang's preemption delay (the settings' default where its objects set none) and
    what it counts from, in its dialect's words."""
    said, anchor = _runtimes(gang, snapshot).preemption_delay(gang, snapshot)
    return Delay(with_default(said, snapshot.default_preemption_delay), anchor)


def _naming(key: str, pods: list[Pod], snapshot: Snapshot) -> Gangs | None:
    """The dialect that puts the first of ``pods`` in the gang ``key`` by naming an object of its own
    that may not exist yet (``names_objects``): that dialect says why they wait for it. A dialect
    whose pods name no such object (Volcano's, KAI's) leaves a missing group to gang annotations,
    as before."""
    first = pods[0] if pods else None
    # The dialect's own claim, not the pod's gang: a pod two dialects name (a Job's pod with
    # ``spec.schedulingGroup`` and a scheduler-plugins label) is in the first one's gang, and when
    # that one's object is missing the other, whose object exists, must not speak for it: the pods
    # wait for the object they were filed under, as pods that name only that one do.
    return next((d for d in GANGS if first is not None and d.name in _ADMISSION_BY_NAME
                 and _ADMISSION_BY_NAME[d.name].names_objects(first) and _claim(d, first, snapshot) == key), None)


def _written_ask(gang: Gang, annotations: Mapping[str, str], spec: Mapping[str, str], pods: list[Pod],
                 snapshot: Snapshot) -> None:
    """Volcano's or KAI's topology keys on a PodGroup (and for KAI its pods and owner): one of them,
    and not beside a Koordinator gather spec."""
    try:
        topology = network_topology_from_annotations(f"PodGroup {gang.key}", dict(annotations))
    except ParseError as exc:
        gang.error = str(exc)
        return
    first = earliest(pods) if pods else None
    owner = top_owner(first, snapshot.owners) if first is not None else None
    keys = kai.layered(first.annotations if first else {}, {**annotations, **spec},
                       owner.annotations if owner else {})
    if topology is not None and keys:
        gang.error = f"PodGroup {gang.key} declares both a Volcano and a KAI topology constraint; choose one"
    elif topology is not None and gang.asks:
        gang.error = (f"PodGroup {gang.key} declares both a Koordinator network-topology-spec and a Volcano "
                      "network topology; choose one")
    elif topology is not None:
        gang.asks = (*gang.asks, volcano.VolcanoAsk(topology))
    elif keys:
        gang.asks = (*gang.asks, kai.ask(keys))


def declared_by(key: str, snapshot: Snapshot) -> str:
    """What declares the gang, as ``koordpy explain`` says it."""
    return first(lambda d: d.declared_by(key, snapshot), EXPLAINS) or koordinator.ANNOTATION_GANG


def group_terms(key: str, minimum: int | None, snapshot: Snapshot) -> GroupTerms | None:
    """How ``koordpy explain`` states the group's minimum, in the words of the object that declares it
    (a gang no object declares is Koordinator's, of annotations)."""
    dialect = _EXPLAINS_BY_NAME.get((declaring(key, snapshot) or ANNOTATION_GANGS).name)
    if dialect is not None:
        return dialect.group_terms(key, minimum, snapshot)
    # A dialect that has no words of its own for explain: the minimum, plainly.
    return None if minimum is None else GroupTerms("", f"minimum {minimum}", minimum)


def object_facts(key: str, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """What ``koordpy explain`` says of the object that declares the gang, in its dialect's terms."""
    dialect = _capable(declaring(key, snapshot), _EXPLAINS_BY_NAME)
    return dialect.object_facts(key, snapshot) if dialect is not None else ()


def gang_object(key: str, snapshot: Snapshot) -> str | None:
    """The Event kind of the object that declares the gang; None when it has none (its first pod is told)."""
    return first(lambda d: d.object_kind(key, snapshot), _EVENT_ORDER)


def timeout_object(key: str, snapshot: Snapshot) -> str | None:
    """The Event kind of the object told that the gang timed out, if its dialect reports timeouts."""
    dialect = _capable(declaring(key, snapshot), _STATUSES_BY_NAME)
    return dialect.object_kind(key, snapshot) if dialect is not None and dialect.reports_timeout else None


def min_resources(key: str, snapshot: Snapshot) -> Mapping[str, int] | None:
    """The minimum resources the gang's object asks to be free before its pods are tried."""
    return first(lambda d: d.min_resources(key, snapshot), GANGS)


def statuses(key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str], now: float,
             snapshot: Snapshot, pending: Mapping[str, str]) -> list[tuple[str, GangStatus]]:
    """The statuses the gang's objects should have after this cycle (object key, status), written by
    the dialect that declares it, where they differ from what the objects say (``members``: its pods,
    finished ones included; ``pending``: why each unbound member waits). Most gangs have one object;
    a CompositePodGroup's gang writes its children."""
    dialect = _capable(declaring(key, snapshot), _STATUSES_BY_NAME)
    return [] if dialect is None else list(dialect.statuses(key, members, bound_now, reserved, now, snapshot, pending))


class _NoObject(StalenessBase):
    """What a gang no dialect's object declares keeps of its staleness: its members say it."""

    name = ""
    roles: tuple[Role, ...] = ()


_NO_OBJECT = _NoObject()


def _stale_keeper(key: str, snapshot: Snapshot) -> Staleness:
    found = _capable(declaring(key, snapshot), _STALENESS_BY_NAME)
    return found if found is not None else _NO_OBJECT


def stale_since(key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
    """Since when the gang is stale as its object (or its live members) keeps it; None: not said."""
    return _stale_keeper(key, snapshot).stale_since(key, members, snapshot)


def stale_grace(key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
    """The gang's own grace before it is evicted once stale (negative: never); None: the setting's."""
    return _stale_keeper(key, snapshot).stale_grace(key, members, snapshot)


def stale_marks(key: str, members: Sequence[Pod], since: float | None, snapshot: Snapshot,
                decided: Mapping[str, GangStatus]) -> Sequence[Decision]:
    """The writes that keep the gang's stale-since where its dialect keeps it (None: clear it), on
    top of the statuses this cycle ``decided`` already (by object key)."""
    return _stale_keeper(key, snapshot).stale_marks(key, members, since, snapshot, decided)


def status_said(kind: Kind, obj: Any) -> Mapping[str, object] | None:
    """What ``obj`` (of ``kind``, a gang's object whose status the core writes) says its status is now,
    as the dialect that reads the kind spells it (``Statuses.said``); None: unknown."""
    for dialect in STATUSES:
        if kind.role in dialect.roles:
            return dialect.said(kind, obj)
    return None


def object_statuses(trees: Trees) -> list[ObjectStatus]:
    """The status each dialect's topology objects should have, computed from the core's trees
    (``Trees``): what both shells write, whoever's objects they are."""
    return [s for d in STATUSES for s in d.object_statuses(trees)]


def invalid_reason(kind: str, error: str) -> str:
    """The Event reason for an object that does not parse (``kind``: the cache's name for its kind):
    ``Invalid<Kind>``, unless its dialect gives one for the field the error names."""
    field = error.split(": ", 1)[-1]  # the error names the object first, then the field
    for (named, prefix), reason in _INVALID_REASONS.items():
        if named == kind and field.startswith(prefix):
            return reason
    return f"Invalid{kind}"


def manifest_formats() -> tuple[str, ...]:
    """The formats ``koordpy topology generate`` writes (``Manifests.manifest_format``), the default
    first: Volcano's HyperNodes, what the command wrote before it wrote others."""
    return tuple(d.manifest_format for d in sorted(MANIFESTS, key=lambda d: d is not volcano.DIALECT))


def warm_up_objects() -> Sequence[dict[str, Any]]:
    """A gang of two pods with a topology ask, as raw objects, in the words of the first dialect that
    gives one (``Manifests.warm_up``): what the live controller runs the core over before its first cycle."""
    return first(lambda d: d.warm_up() or None, MANIFESTS) or ()


def shown_groups(snapshot: Snapshot) -> tuple[dict[str, dict[str, Any]], dict[str, str], dict[str, GroupRow]]:
    """What ``koordpy simulate`` reports of the objects that declare gangs once the world settled, by
    object key, the heading its table shows each under and its row there; in the order Events go to
    them (a Volcano PodGroup's fields are overwritten by a scheduler-plugins one of the same name)."""
    fields: dict[str, dict[str, Any]] = {}
    headings: dict[str, str] = {}
    rows: dict[str, GroupRow] = {}
    for dialect in _EVENT_ORDER:
        for key, heading, shown, row in dialect.shown_groups(snapshot):
            fields[key] = shown
            headings[key] = heading
            rows[key] = row
    return fields, headings, rows


def shown_empty() -> dict[str, Any]:
    """What ``koordpy simulate`` reports of the topology objects a dialect has none of, by JSON key."""
    return {k: v for d in STATUSES for k, v in d.shown_empty.items()}


# -- admitted in front of koordpy ------------------------------------------------------------------


def admitted_by(pod: Pod) -> Admitted | None:
    """Who admitted ``pod`` before koordpy places it (Kueue), when a dialect's controller did: its
    preemption and its recovery are that controller's; None for most pods."""
    for dialect in ADMITTERS:
        found = dialect.admitted_by(pod)
        if found is not None:
            return found
    return None


def first_admitted(pods: Iterable[Pod]) -> Admitted | None:
    """Who admitted the first of ``pods`` a controller in front of koordpy admitted (a gang's: any
    member admitted makes the gang that controller's to recover); None: none."""
    return next(filter(None, map(admitted_by, pods)), None)


# -- pods refused ----------------------------------------------------------------------------------


def refusal(pod: Pod, snapshot: Snapshot) -> Reason | None:
    """Why a dialect will not let koordpy place ``pod``, or None."""
    # Only the dialects with an admission are asked: each pod of a gang of thousands is.
    for dialect in ADMISSION:
        found = dialect.refusal(pod, snapshot)
        if found is not None:
            return found
    return None


def names_objects(pod: Pod) -> bool:
    """Whether the pod names an object some dialect reads that may appear or change while the pod does not."""
    return any(d.names_objects(pod) for d in ADMISSION)


# -- trees -----------------------------------------------------------------------------------------


def default_tree(snapshot: Snapshot) -> TreeKey | None:
    """The first tree the snapshot defines, for paths of a job that asks for none."""
    return first(lambda d: d.default_tree(snapshot), TOPOLOGIES)


def shown_trees(trees: Trees) -> list[ShownTree]:
    """The trees ``koordpy topology show`` draws, each with the title its dialect gives it."""
    return [s for d in TOPOLOGIES for s in d.shown_trees(trees)]


class Trees(Mapping[TreeKey, TopologyTree]):
    """The cluster's trees by key, each built by its dialect the first time it is asked for. A key
    may also be given as its text (``"cnt"``, ``"topology/<name>"``), as ``--tree`` gives it."""

    def __init__(self, snapshot: Snapshot, nodes: Sequence[Node]) -> None:
        self.snapshot = snapshot
        self.nodes = nodes
        self._built: dict[TreeKey, TopologyTree] = {}
        self._memo: dict[str, object] = {}

    @cached_property
    def node_index(self) -> Mapping[str, int]:
        return {n.name: i for i, n in enumerate(self.nodes)}

    def memo(self, name: str, build: Callable[[], T]) -> T:
        if name not in self._memo:
            self._memo[name] = build()
        return cast(T, self._memo[name])

    def hypernode_tree(self) -> HyperNodeTree:
        """Volcano's HyperNode tree with its problems, which the shells write as HyperNode statuses."""
        return volcano.hypernodes(self)

    def __getitem__(self, key: TreeKey | str) -> TopologyTree:
        if isinstance(key, str):
            found = next((k for k in self if k.text == key), None)
            if found is None:
                raise KeyError(key)
            key = found
        tree = self._built.get(key)
        if tree is not None:
            return tree
        dialect = _TOPOLOGIES_BY_NAME.get(key.dialect)
        built = dialect.tree(key, self) if dialect is not None else None
        if built is None:
            raise KeyError(key)
        self._built[key] = built
        return built

    def __iter__(self) -> Iterator[TreeKey]:
        for dialect in TOPOLOGIES:
            yield from dialect.tree_keys(self.snapshot)

    def __len__(self) -> int:
        return sum(1 for _ in self)
