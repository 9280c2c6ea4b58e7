"""Kueue's Topology objects and KAI's placement annotations: one tree per Topology, and a job's
required / preferred levels turned into a ``Requirement``.

A Topology lists node labels top level first; a node's domains are the values of those labels,
and a node missing one of them, ``kubernetes.io/hostname`` included, is outside that topology (it
hangs from the root and no requirement on the tree uses it), as Kueue only reads nodes that carry
every level's label. ``kubernetes.io/hostname`` may only be the lowest level: it names the node
itself, so it adds no inner domain, but a node without it is still outside. Constraint keys
are looked up on the pod, then its PodGroup, then its top-level owner; the first that sets a key
wins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordpy.api.kueue import ANN_PREFERRED, ANN_REQUIRED, ANN_TOPOLOGY, Topology
from koordpy.api.objects import Node
from koordpy.core.requirement import Requirement
from koordpy.core.tree import ROOT, DomainId, TopologyTree

HOSTNAME = "kubernetes.io/hostname"
KEYS = (ANN_TOPOLOGY, ANN_REQUIRED, ANN_PREFERRED)


def tree_key(name: str) -> str:
    return f"topology/{name}"


_CACHE: dict[object, TopologyTree] = {}


def topology_tree(topology: Topology, nodes: Sequence[Node]) -> TopologyTree:
    inner_levels = topology.levels[:-1] if topology.levels[-1] == HOSTNAME else topology.levels
    levels = topology.levels
    key = (topology.name, levels, tuple((n.name, tuple(n.labels.get(k) for k in levels)) for n in nodes))
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    inner: dict[DomainId, tuple[DomainId, str, str, int]] = {}
    node_parent: dict[str, DomainId] = {}
    outside = []
    height = len(inner_levels)
    for n in nodes:
        # Every level counts for membership, the hostname level too: the leaf is the node itself,
        # but a node that lacks the label is one Kueue never sees in this topology.
        if any(not n.labels.get(k) for k in levels):
            outside.append(n.name)
            continue
        values = [n.labels.get(k) for k in inner_levels]
        prefix: DomainId = ROOT
        for i, value in enumerate(values):
            assert value is not None
            child = (*prefix, value)
            if child not in inner:
                inner[child] = (prefix, inner_levels[i], value, height - i)
            prefix = child
        node_parent[n.name] = prefix
    tree = TopologyTree.from_edges(inner_levels, [n.name for n in nodes], inner, node_parent, node_layer=HOSTNAME,
                                   root_rank=height + 1, root_layer=topology.name, leaf_depth=height + 1,
                                   outside=outside)
    if len(_CACHE) >= 8:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = tree
    return tree


def layered(*sources: Mapping[str, str]) -> dict[str, str]:
    """The constraint keys, each from the first source that sets it."""
    out: dict[str, str] = {}
    for src in sources:
        for k in KEYS:
            if k not in out and src.get(k):
                out[k] = src[k]
    return out


def requirement(constraint: Mapping[str, str], topologies: Mapping[str, Topology],
                invalid: Mapping[str, str]) -> Requirement | None:
    """None when the job asks for no topology; a Requirement carrying a failure when it asks for
    one it cannot have (no such Topology, an unknown level)."""
    name = constraint.get(ANN_TOPOLOGY, "")
    required, preferred = constraint.get(ANN_REQUIRED, ""), constraint.get(ANN_PREFERRED, "")
    if not (name or required or preferred):
        return None
    key = tree_key(name)
    if not name:
        return Requirement(key, "gather", failure=f"{ANN_REQUIRED if required else ANN_PREFERRED} is set but "
                                                  f"{ANN_TOPOLOGY} does not name a Topology")
    topo = topologies.get(name)
    if topo is None:
        why = f" (it is invalid: {invalid[name]})" if name in invalid else ""
        known = ", ".join(sorted(topologies)) or "none"
        return Requirement(key, "gather", failure=f"Topology {name!r} not found{why}; Topologies: {known}")
    height = len(topo.levels) - (1 if topo.levels[-1] == HOSTNAME else 0)
    ranks: dict[str, int] = {}
    for what, text in ((ANN_REQUIRED, required), (ANN_PREFERRED, preferred)):
        if not text:
            continue
        try:
            index = topo.resolve_level(text)
        except ValueError as exc:
            return Requirement(key, "gather", failure=f"{what}: {exc}")
        ranks[what] = 0 if topo.levels[index] == HOSTNAME else height - index
    req_rank, pref_rank = ranks.get(ANN_REQUIRED), ranks.get(ANN_PREFERRED)
    if req_rank is not None and pref_rank is not None and pref_rank > req_rank:
        return Requirement(key, "gather", failure=(f"{ANN_PREFERRED} {preferred!r} is above {ANN_REQUIRED} "
                                                   f"{required!r} in Topology {name!r}"))
    labels = (*tuple((height - i, level) for i, level in enumerate(topo.levels[:height])), (0, HOSTNAME))
    if pref_rank is None:
        return Requirement(key, "gather", scope=req_rank if req_rank is not None else height + 1, labels=labels)
    return Requirement(key, "levels", hard=req_rank is not None, scope=req_rank, preferred=pref_rank, labels=labels)
