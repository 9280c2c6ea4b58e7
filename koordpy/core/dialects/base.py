"""The one protocol every dialect implements: what the core asks of an API family.

A dialect is one API family's words for gangs and topology (Koordinator's scheduler-plugins
PodGroup and ClusterNetworkTopology, Volcano's PodGroup and HyperNodes, KAI's PodGroup, Topology
objects and placement annotations, Kubernetes' own Workload PodGroup). Each module of
``koordpy.core.dialects`` defines one ``Dialect`` object; the registry
(``koordpy.core.dialects.DIALECTS``) is the only place that lists them, and the rest of the core
reaches a dialect only through the registry, an ``Ask`` (``koordpy.core.model``) or a
``GangStatus`` (``koordpy.core.decisions``), never by testing which one it is.

Belongs here: the protocol, and ``DialectBase``, the neutral answer to every question (no gang,
no tree, no refusal, no status, no manifests...) that a dialect derives from so that it writes only
what it does. Does not belong here: any one dialect's code (its module), the dispatch over all of
them (``koordpy.core.dialects``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from koordpy.api.dra import ClaimGroup
from koordpy.api.kinds import Role
from koordpy.api.objects import Node, Pod
from koordpy.api.owners import Owner
from koordpy.core.decisions import GangStatus
from koordpy.core.model import Gang, TreeSource
from koordpy.core.snapshot import Snapshot
from koordpy.core.topology_manifests import Generated
from koordpy.core.tree import TopologyTree, TreeKey
from koordpy.core.verdicts import Reason


@dataclass(frozen=True)
class GroupTerms:
    """A group's minimum as ``koordpy explain`` states it, in the words of the object that declares it."""

    field: str  # the field that sets it: minMember, minCount, minGroupCount
    said: str  # the minimum as the object says it ("minCount 8", "minGroupCount 2 child PodGroups ...")
    minimum: int  # in pods
    # Whether a mode (Strict / NonStrict) and a waiting time are the gang's own words (Koordinator's);
    # other dialects' gangs have neither, and explain does not speak of them.
    modes: bool = False


class Dialect(Protocol):
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

    # -- gangs ---------------------------------------------------------------------------

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

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        """What declares the gang, as ``koordpy explain`` says it; None: not this dialect."""
        ...

    def object_kind(self, key: str, snapshot: Snapshot) -> str | None:
        """The Event kind of its object that declares ``key`` (Events about the gang go there)."""
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

    @property
    def reports_timeout(self) -> bool:
        """Whether a gang that times out gets a GangTimeout Event on its object."""
        ...

    def min_resources(self, key: str, snapshot: Snapshot) -> Mapping[str, int] | None:
        """The minimum resources its object asks to be free before the gang is tried."""
        ...

    def status(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
               now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> GangStatus | None:
        """The status its object declaring ``key`` should have after this cycle, when it differs from
        what the object says; else None. ``members``: its pods, those that finished (Succeeded,
        Failed) included; ``pending``: why each member left unbound waits, by pod key."""
        ...

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        """Every object whose status the gang ``key`` sets after this cycle, by its key, with that
        status: ``status`` on the object ``key`` names, or several objects for a gang that spans
        them (a CompositePodGroup's children)."""
        ...

    # -- pods it refuses -----------------------------------------------------------------

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

    # -- devices -------------------------------------------------------------------------

    def claim_groups(self, snapshot: Snapshot) -> Mapping[str, ClaimGroup]:
        """The groups of this dialect that a member's ResourceClaims may be reserved for instead of
        the member (a Workload PodGroup with ``spec.resourceClaims``), by namespace/name: what the
        device rules bind a member's identical entry to."""
        ...

    # -- trees ---------------------------------------------------------------------------

    def tree_keys(self, snapshot: Snapshot) -> Iterable[TreeKey]:
        """The trees it defines over the snapshot's nodes (always-present ones included)."""
        ...

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        """Its tree ``key`` over ``trees.nodes``, or None when the snapshot does not define it."""
        ...

    def default_tree(self, snapshot: Snapshot) -> TreeKey | None:
        """The tree ``koordpy explain`` draws paths in when the job asks for none, if it has one."""
        ...

    # -- manifests -----------------------------------------------------------------------

    @property
    def manifest_format(self) -> str | None:
        """The ``--format`` of ``koordpy topology generate`` that writes its topology objects; None
        when it has none."""
        ...

    def manifests(self, nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
        """Its topology objects over ``nodes`` from the label ``keys`` (top level first), named
        ``name`` where the user names them, with warnings about nodes the labels leave out; raises
        ``Unusable`` (``koordpy.core.topology_manifests``) for keys or a name it cannot use."""
        ...


class DialectBase:
    """The neutral answer to each of the protocol's questions: a dialect derives from it and writes
    only what it does (it must name itself and its kinds). Every answer here is what the registry
    takes as "not this dialect": None, nothing, False."""

    name: str
    roles: tuple[Role, ...]
    reports_timeout = False
    refused_fields: Mapping[str, str] = {}
    manifest_format: str | None = None

    def compare_key(self, role: Role) -> Callable[[Any], object] | None:
        return None

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        return None

    def enclosing(self, key: str, snapshot: Snapshot) -> str | None:
        return None

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        return ()

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        return False

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        return None

    def written_asks(self, gang: Gang, snapshot: Snapshot) -> tuple[Mapping[str, str], Mapping[str, str]] | None:
        return None

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        return None

    def object_kind(self, key: str, snapshot: Snapshot) -> str | None:
        return None

    def object_facts(self, key: str, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
        return ()

    def group_terms(self, key: str, minimum: int | None, snapshot: Snapshot) -> GroupTerms | None:
        # scheduler-plugins', Volcano's and KAI's PodGroups all call it minMember; only the
        # registry's dispatch asks, and only the dialect that declares the group.
        return None if minimum is None else GroupTerms("minMember", f"minMember {minimum}", minimum)

    def min_resources(self, key: str, snapshot: Snapshot) -> Mapping[str, int] | None:
        return None

    def status(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
               now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> GangStatus | None:
        return None

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        found = self.status(key, members, bound_now, reserved, now, snapshot, pending)
        return () if found is None else ((key, found),)

    def refusal(self, pod: Pod, snapshot: Snapshot) -> Reason | None:
        return None

    def names_objects(self, pod: Pod) -> bool:
        return False

    def claim_groups(self, snapshot: Snapshot) -> Mapping[str, ClaimGroup]:
        return {}

    def tree_keys(self, snapshot: Snapshot) -> Iterable[TreeKey]:
        return ()

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        return None

    def default_tree(self, snapshot: Snapshot) -> TreeKey | None:
        return None

    def manifests(self, nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
        raise NotImplementedError(f"the {self.name} dialect writes no topology manifest (its manifest_format is None)")


def final_stands(phase: str | None, finals: Collection[str], members: Iterable[Pod]) -> bool:
    """Whether a PodGroup's final phase (its job over: ``finals``) stands: while none of its pods is
    live, what is left of them (its finished pods deleted one by one, with their Job or by the pod
    garbage collector) says nothing new, as the PodGroup controllers stop at those phases."""
    return phase in finals and all(p.terminal for p in members)
