"""The core's model of a gang and of what it asks of the topology, whichever dialect declared it.

Belongs here: the value types the dialects produce and the rest of the core reads without knowing
which dialect made them: ``Gang`` (one gang, its members, config and error), the ``Ask`` protocol
(what a gang asks of the topology, in its dialect's words, turned into a ``Requirement`` by the
dialect's own code), ``Asked`` (that requirement and how the cycle anchors it), ``TopologyFacts``
(what ``koordpy explain`` says of an ask) and ``TreeSource`` (what an ask reads of the cluster's
trees). Does not belong here: building gangs or asks (``koordpy.core.dialects``), the gang rule
and jobs (``koordpy.core.gang``), placement (``koordpy.core.placement``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Protocol, TypeVar

from koordpy.api.objects import Node, Pod
from koordpy.api.podgroup import ANN_TIMEOUT, GangConfig
from koordpy.core.requirement import Requirement
from koordpy.core.snapshot import Snapshot
from koordpy.core.tree import TopologyTree, TreeKey

T = TypeVar("T")


def creation_time(value: float | None) -> float:
    """An object's creation time; one without (a hand-written manifest) counts as the oldest."""
    return value if value is not None else 0.0


def earliest(pods: Sequence[Pod]) -> Pod:
    """The pod created first (by ``creation_time``), the first name among those created then: the
    member that speaks for its gang. Creation times are compared before any name (a gang of
    thousands shares a handful)."""
    times = [0.0 if p.creation is None else p.creation for p in pods]
    low = min(times)
    return min((p for p, t in zip(pods, times, strict=True) if t == low), key=attrgetter("name"))


class TreeSource(Protocol):
    """The cluster's trees as an ask reads them: by key, built on first use, over these nodes."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def nodes(self) -> Sequence[Node]: ...

    @property
    def node_index(self) -> Mapping[str, int]: ...

    def __getitem__(self, key: TreeKey | str) -> TopologyTree: ...

    def memo(self, name: str, build: Callable[[], T]) -> T:
        """What ``build`` returns, built once per set of trees (a dialect's own view of its tree)."""
        ...


@dataclass(frozen=True)
class TopologyFacts:
    """What ``koordpy explain`` says a job asks of the topology."""

    source: str  # koordinator, volcano or kai
    required: tuple[str, ...]
    preferred: tuple[str, ...]


@dataclass(frozen=True)
class Asked:
    """An ask as a ``Requirement``, and how the cycle fits it to the members that already run."""

    requirement: Requirement
    # Said when the running members span more than the requirement's scope ({where}, {scope}).
    anchored: str
    whole_job: bool = False  # every gang of the job anchors it (else only the gang that asks)
    peers: bool = False  # the pending pods prefer the smallest domain of the running ones (Requirement.peers)


class Ask(Protocol):
    """What one gang asks of the topology, in its dialect's words (made by that dialect)."""

    @property
    def keeps_gang(self) -> bool:
        """Whether the gang stays a gang once satisfied: a member added later must still land where
        the topology allows, next to those running."""
        ...

    def requirement(self, gang: Gang, pods: list[Pod], trees: TreeSource, snapshot: Snapshot) -> Asked | None:
        """The ask against the trees of the moment (``pods``: the members to place, in rank
        order); None when it asks nothing after all."""
        ...

    def tree_key(self, snapshot: Snapshot) -> TreeKey | None:
        """The tree the ask is written against, if the snapshot has it."""
        ...

    def facts(self) -> TopologyFacts: ...


@dataclass
class Gang:
    key: str
    config: GangConfig | None
    pods: list[Pod]  # non-terminal members, bound or not
    creation: float
    error: str | None = None
    # What the gang asks of the topology, first the one that counts: a gang may carry its own
    # dialect's ask and one written in another's annotations on its PodGroup.
    asks: tuple[Ask, ...] = ()
    # What the object that declares the gang says of preemption, when it speaks for its pods
    # (Kubernetes' PodGroup): its own priority, as preemptor and as victim (None: the pods'); its
    # own preemptionPolicy (None: the pods'); and whether it is only ever disrupted as a unit
    # (disruptionMode all: one member chosen as a victim evicts every member, wherever it runs).
    priority: int | None = None
    preemption_policy: str | None = None
    whole: bool = False
    # How an attempt that cannot place every pending member goes on: False, the longest rank-order
    # prefix that fits (Koordinator's Strict gang); True, every member tried in rank order with the
    # ones before it placed, one that fits nowhere skipped (kube-scheduler's pod group cycle,
    # ``koordpy.core.skipping``).
    skips: bool = False
    # Units inside a gang that is not whole: member key -> the unit it is only ever evicted with
    # (a CompositePodGroup child in disruptionMode all under a composite in single mode). Members
    # not named go alone.
    units: Mapping[str, str] = field(default_factory=dict)
    # A gang of parts (a CompositePodGroup's children): it meets its minimum only when this many parts
    # each count their own minimum of members (placed, reserved or bound), whatever the pods add up
    # to: (parts needed, ((the part's member keys, its minimum), ...)). None: its pods count.
    parts: tuple[int, tuple[tuple[frozenset[str], int], ...]] | None = None
    # Bound members that no longer count as running where they were put (``koordpy.core.liveness``:
    # terminating, their node gone or failed for them), and how many members Succeeded: set by the
    # view from the nodes and the time. A gang whose live members and finished ones fall below its
    # minimum places its missing members together again (``gangrule.short``).
    lost: frozenset[str] = frozenset()
    succeeded: int = 0
    # Whether the minimum is what the job still has to run (a ``Finishing`` dialect's, which left its
    # Succeeded members out already): then they are not counted again beside the live ones.
    finished_out: bool = False

    def unit(self, key: str) -> str | None:
        """The unit member ``key`` is evicted with, as a key (the gang's own when it is whole), or
        None when it is evicted alone."""
        return self.key if self.whole else self.units.get(key)

    def bound(self) -> list[Pod]:
        return [p for p in self.pods if p.node_name]

    def live(self) -> list[Pod]:
        """The bound members that still count (``bound`` less ``lost``)."""
        lost = self.lost
        return [p for p in self.pods if p.node_name and p.key not in lost]

    @cached_property
    def keys(self) -> list[str]:
        """The keys of ``pods``, in order (a member may be replaced by a newer object of itself, never
        by another pod: a gang is rebuilt when its members change)."""
        return [p.key for p in self.pods]

    @property
    def timed_out(self) -> bool:
        return any(p.annotations.get(ANN_TIMEOUT) == "true" for p in self.pods)
