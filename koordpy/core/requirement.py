"""What a job asks of the network topology, whichever API it was written in.

The dialects (``koordpy.core.dialects``) turn Koordinator's gather spec, Volcano's
mode and highest tier (with sub-groups) and KAI's required / preferred levels into one
``Requirement`` over one of the cluster's trees; placement reads nothing else. Scopes are
ranks of the tree (``TopologyTree.rank``): 0 for a node, growing towards the root.
``SearchScope`` is where a requirement lets a search look in its tree, the one place the rule
"a hard limit stops at its scope, a soft one searches on up to the root" is applied for the job
(placement's styles and preemption's candidates read it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.core.tree import TopologyTree, TreeKey

# How a domain is chosen among those that fit:
# - "gather": Koordinator's offerslot + binpack, the deepest fitting domain inside the scope
#   (also KAI's required level alone);
# - "tiers": Volcano's gradients, the lowest rank that fits, binpack by utilisation within it;
# - "levels": KAI's preferred level, the smallest fitting domain at that level inside the
#   required scope, climbing one level at a time;
# - "exclusive": JobSet's exclusive placement, each sub-group (a Job) alone in a domain of its scope
#   that has room for ``min_pods`` of its pods (all the Job runs, though only its leader may exist
#   yet), or inside the domain its running pods keep it in (``SubGroup.anchor``).
Style = Literal["gather", "tiers", "levels", "exclusive"]

# How the "gather" and "levels" styles tell equally tight domains apart (same depth, same offerslot):
# - "chain": the smaller ancestor offerslot, layer by layer from the parent up, then the name
#   (Koordinator's node order; KAI sorts the more packed ancestor first the same way);
# - "values": the names on the domain's path from the root, top level first (Kueue's BestFit keeps
#   the first fitting domain in the order of its level values).
Ties = Literal["chain", "values"]


def highest_rank(scope: int | None, hard: bool, top: int) -> int:
    """The highest rank pods held to ``scope`` may share a domain under, ``top`` being the tree's
    root: a hard limit stops at its scope; a soft one (or none) searches on up to the root."""
    return top if scope is None or not hard else min(scope, top)


@dataclass(frozen=True)
class SubGroup:
    """Pods of one job placed together inside one domain of their own scope (a Volcano partition, a
    CompositePodGroup's child)."""

    id: str  # <job>/<policy>-<match values>
    pods: tuple[str, ...]  # its pending pods' keys, in rank order
    min_pods: int  # subGroupSize: running and placed members together must reach it
    scope: int | None  # highest rank allowed for the sub-group (None: the job's scope)
    hard: bool = True
    policy: str = ""
    bound: int = 0  # members already running
    anchor: int | None = None  # the domain its running members keep it in
    # False: placed whole, every pending member or none (a Volcano sub-group). True: it counts once
    # ``min_pods`` of its members are bound or placed, and every other member that fits goes with
    # them, one that fits nowhere passed over (a CompositePodGroup's child PodGroup, as kube-scheduler
    # places it: ``koordpy.core.skipping``).
    skips: bool = False

    def highest(self, top: int) -> int:
        """The highest rank the sub-group may take (``highest_rank``)."""
        return highest_rank(self.scope, self.hard, top)

    @property
    def ready(self) -> bool:
        """Whether it needs nothing more: its running members reach its size."""
        return self.bound >= self.min_pods

    def needs(self, pending: int) -> int:
        """How many of its ``pending`` members must be placed for it to count."""
        return max(0, self.min_pods - self.bound) if self.skips else pending


@dataclass(frozen=True)
class Requirement:
    tree: TreeKey  # which of ``Cluster.trees``
    style: Style
    hard: bool = True
    scope: int | None = None  # every pod inside one domain of at most this rank (None: the whole tree)
    preferred: int | None = None  # "levels": the rank tried first
    multiples: tuple[tuple[int, int], ...] = ()  # (rank, podCountMultiple)
    notes: tuple[str, ...] = ()  # preferences the topology cannot express, said in the pending message
    # Limits dropped because the names given for them name nothing (a Volcano highestTierName of no
    # tier), said in an Event on the job's PodGroup.
    dropped: tuple[str, ...] = ()
    failure: str | None = None  # set when the job can never be placed as asked (an unknown hard layer)
    listed: tuple[int, ...] = ()  # domains a "gather" failure message lists
    subgroups: tuple[SubGroup, ...] = ()
    policy_minimums: tuple[tuple[str, int], ...] = ()  # sub-groups each policy needs (minSubGroups)
    # A job with members running stays where they run: its scope is the domain of at most
    # ``scope`` rank around them (Volcano's allocated HyperNode), set by the cycle.
    anchor: int | None = None
    # The smallest domain holding the job's running (and reserved) members, set by the cycle: a
    # preference, for every style. The pending pods go into it when it has room, else into its
    # lowest ancestor that has, before anywhere else, so that all of the job shares the smallest
    # domain it can (a replacement rejoins its peers rather than taking the tightest fit elsewhere).
    peers: int | None = None
    labels: tuple[tuple[int, str], ...] = field(default=())  # rank -> how messages name that level
    # The CompositePodGroup (namespace/name) whose child PodGroups the sub-groups are: failures speak
    # of its children and of domains of node labels (``labels``), not of Volcano's tiers; "" else.
    composite: str = ""
    ties: Ties = "chain"  # how equally tight candidates are ordered (the dialect's rule)

    def highest(self, top: int) -> int:
        """The highest rank the job may take (``highest_rank``), ``top`` being the tree's root rank."""
        return highest_rank(self.scope, self.hard, top)


@dataclass(frozen=True)
class SearchScope:
    """Where a job's topology search looks in its tree, computed once from its ``Requirement``."""

    lowest: int  # the lowest rank of a domain that is not a node (Volcano's lowest tier)
    highest: int  # the highest rank a chosen domain may take (``highest_rank``)
    rank: int  # the rank the job's scope names, the root's when it names none
    anchor: int | None  # the domain the job's running members keep it inside, if any
    hard: bool
    limited: bool  # hard with a scope named: the search stops below the root

    @classmethod
    def of(cls, req: Requirement, tree: TopologyTree) -> SearchScope:
        top = int(tree.rank[0])
        return cls(lowest=tree.lowest_rank, highest=req.highest(top),
                   rank=top if req.scope is None else req.scope, anchor=req.anchor, hard=req.hard,
                   limited=req.hard and req.scope is not None)

    @property
    def outer(self) -> int:
        """The domain every choice lies inside: the anchor, else the root."""
        return 0 if self.anchor is None else self.anchor

    def holds(self, domain: int) -> bool:
        """Whether an ancestor a search climbs to is still inside the anchor (preorder: an ancestor
        has the smaller index, so climbing past the anchor goes below it); its rank is the caller's."""
        return self.anchor is None or domain >= self.anchor

    def within(self, tree: TopologyTree, allowed: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """``allowed`` kept only inside the anchor, if any."""
        return allowed if self.anchor is None else tree.in_subtree(self.anchor, allowed)
