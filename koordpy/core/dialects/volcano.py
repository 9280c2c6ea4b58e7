"""Volcano's dialect: the HyperNode tree (with what is wrong in it), each HyperNode's status, and
a job's ``networkTopology`` (mode, highest tier, sub-groups) turned into a ``Requirement``.

The tree is built from the members each HyperNode lists, so it may skip tiers and hold nodes at
any depth. A virtual root one tier above the highest contains every node; nodes no HyperNode
claims hang from it directly. What the webhook cannot see (a cycle, a member HyperNode whose tier
is not below its parent's, a node or HyperNode claimed twice) is reported per HyperNode and the
offending edge left out, so the rest of the tree keeps working.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx

from koordpy.api.objects import Node, Pod
from koordpy.api.volcano import HyperNode, NetworkTopology, SubGroupPolicy
from koordpy.core.naming import natural_key
from koordpy.core.requirement import Requirement, SubGroup
from koordpy.core.tree import ROOT, DomainId, TopologyTree

TREE = "hypernodes"
ROOT_NAME = "<cluster-top-hypernode>"


@dataclass
class HyperNodeTree:
    tree: TopologyTree
    problems: dict[str, list[str]] = field(default_factory=dict)  # HyperNode -> what is wrong with it
    tiers: dict[str, set[int]] = field(default_factory=dict)  # tierName -> the tiers that carry it

    def node_count(self, name: str) -> int:
        """``status.nodeCount``: the nodes inside the HyperNode, through its member HyperNodes."""
        d = self.tree.index.get(("hn", name))
        if d is None:
            return 0
        return int((self.tree.domain_node[d: self.tree.end[d]] >= 0).sum())


_CACHE: dict[object, tuple[tuple[HyperNode, ...], tuple[Node, ...], HyperNodeTree]] = {}


def hypernode_tree(hypernodes: Mapping[str, HyperNode], nodes: Sequence[Node]) -> HyperNodeTree:
    """The tree for these objects, cached: the same HyperNode and Node objects (the shells keep the
    ones that did not change) are found by identity without looking inside them; new objects with
    the same specs and labels (a status write, a node heartbeat) by content, without a rebuild."""
    hns, ns = tuple(hypernodes.values()), tuple(nodes)
    key = (tuple(map(id, hns)), tuple(map(id, ns)))
    cached = _CACHE.get(key)
    if cached is not None:
        return cached[2]
    content = (tuple(sorted((h.name, h.tier, h.tier_name, repr(h.members), h.creation or 0.0) for h in hns)),
               tuple((n.name, tuple(sorted(n.labels.items()))) for n in ns))
    built = _BY_CONTENT.get(content)
    if built is None:
        built = _build(hypernodes, nodes)
        if len(_BY_CONTENT) >= 4:
            _BY_CONTENT.pop(next(iter(_BY_CONTENT)))
        _BY_CONTENT[content] = built
    if len(_CACHE) >= 4:
        _CACHE.pop(next(iter(_CACHE)))
    _CACHE[key] = (hns, ns, built)  # the objects are kept, so their ids cannot be reused while cached
    return built


_BY_CONTENT: dict[object, HyperNodeTree] = {}


def spec_of(h: HyperNode) -> tuple[object, ...]:
    """What of a HyperNode shapes the tree (its status does not)."""
    return (h.tier, h.tier_name, h.members)


def _build(hypernodes: Mapping[str, HyperNode], nodes: Sequence[Node]) -> HyperNodeTree:
    problems: dict[str, list[str]] = {}

    def report(names: Sequence[str], message: str) -> None:
        for n in names:
            problems.setdefault(n, []).append(message)

    by_name = {n.name: n for n in nodes}
    scanned: dict[str, list[str]] = {}
    hn_edges: dict[str, list[str]] = {}  # parent -> member HyperNodes
    node_claims: dict[str, list[str]] = {}  # node -> HyperNodes listing it
    for h in sorted(hypernodes.values(), key=lambda h: natural_key(h.name)):
        for member in h.members:
            if member.type == "HyperNode":
                target = member.hypernode
                if target and target in hypernodes:
                    hn_edges.setdefault(h.name, []).append(target)
            else:
                exact = member.selector.exact
                if exact:
                    matched = [exact] if exact in by_name else []
                else:  # each distinct regex or selector scans the nodes once per build
                    sel = repr(member.selector)
                    found = scanned.get(sel)
                    if found is None:
                        found = scanned[sel] = [n.name for n in nodes if member.matches_node(n.name, n.labels)]
                    matched = found
                for name in matched:
                    claims = node_claims.setdefault(name, [])
                    if h.name not in claims:
                        claims.append(h.name)
    graph = nx.DiGraph([(p, c) for p, kids in hn_edges.items() for c in kids])
    # Strongly connected components, not every cycle: their number is linear, a dense bad graph's
    # cycles are not.
    for component in nx.strongly_connected_components(graph):
        ring = sorted(component, key=natural_key)
        if len(ring) > 1 or graph.has_edge(ring[0], ring[0]):
            report(ring, "HyperNodes " + ", ".join(ring) + " form a cycle of members")
    parent_of: dict[str, str] = {}
    for parent, kids in hn_edges.items():
        for child in kids:
            hp, hc = hypernodes[parent], hypernodes[child]
            if hc.tier >= hp.tier:
                if not (child == parent or _in_cycle(problems, child)):
                    report([parent, child], f"member HyperNode {child} has tier {hc.tier}, not below the tier "
                                            f"{hp.tier} of {parent}")
                continue
            other = parent_of.get(child)
            if other is not None:
                report([other, parent, child], f"HyperNode {child} is a member of both {other} and {parent}")
                if _seniority(hypernodes[other]) <= _seniority(hp):
                    continue
            parent_of[child] = parent
    node_parent: dict[str, DomainId] = {}
    for name, claims in node_claims.items():
        by_tier: dict[int, list[str]] = {}
        for claimant in claims:
            by_tier.setdefault(hypernodes[claimant].tier, []).append(claimant)
        for tier, hs in by_tier.items():
            if len(hs) > 1:
                report(hs, f"node {name} is claimed by HyperNodes {', '.join(hs)} of tier {tier}")
        lowest = min(claims, key=lambda c: (hypernodes[c].tier, *_seniority(hypernodes[c])))
        node_parent[name] = ("hn", lowest)
        above = set()
        climb = lowest
        for _ in range(len(hypernodes)):  # the ancestors of the HyperNode that keeps the node
            climb = parent_of.get(climb, "")
            if not climb:
                break
            above.add(climb)
        for other in claims:
            if other != lowest and other not in above and hypernodes[other].tier != hypernodes[lowest].tier:
                report([other, lowest], f"node {name} is claimed by {lowest} (tier {hypernodes[lowest].tier}) and by "
                                        f"{other} (tier {hypernodes[other].tier}), which does not contain {lowest}; "
                                        f"it counts in {lowest}")
    top = max((h.tier for h in hypernodes.values()), default=0) + 1
    inner: dict[DomainId, tuple[DomainId, str, str, int]] = {}
    for h in hypernodes.values():
        up = ("hn", parent_of[h.name]) if h.name in parent_of else ROOT
        inner[("hn", h.name)] = (up, h.tier_name or f"tier{h.tier}", h.name, h.tier)
    tiers: dict[str, set[int]] = {}
    for h in hypernodes.values():
        if h.tier_name:
            tiers.setdefault(h.tier_name, set()).add(h.tier)
    layers = tuple(sorted({layer for _, layer, _, _ in inner.values()}))
    tree = TopologyTree.from_edges(layers, [n.name for n in nodes], inner, node_parent, node_layer="Node",
                                   root_rank=top, root_layer=ROOT_NAME, leaf_rank=-1)
    return HyperNodeTree(tree, {k: sorted(set(v)) for k, v in problems.items()}, tiers)


def _seniority(h: HyperNode) -> tuple[float, tuple[object, ...]]:
    """Who keeps a contested member: the HyperNode that existed first, so that a new object in
    conflict with the tree never takes nodes from the HyperNodes already in use."""
    return (h.creation if h.creation is not None else 0.0, natural_key(h.name))


def _in_cycle(problems: Mapping[str, list[str]], name: str) -> bool:
    return any("form a cycle" in p for p in problems.get(name, ()))


# -- requirements ---------------------------------------------------------------------------------


def _limit(topology: NetworkTopology, hn: HyperNodeTree) -> tuple[int | None, str | None]:
    """The highest tier a constraint allows (None: no limit), or why it names none. A
    ``highestTierName`` that is the tierName of no HyperNode sets no limit, as in Volcano, which
    logs a warning and schedules without one (``unknown_tier_name`` says so)."""
    if topology.highest_tier is not None:
        return topology.highest_tier, None
    if topology.highest_tier_name:
        tiers = hn.tiers.get(topology.highest_tier_name)
        if not tiers:
            return None, None
        if len(tiers) > 1:
            return None, (f"highestTierName {topology.highest_tier_name!r} names tiers "
                          f"{', '.join(map(str, sorted(tiers)))}; a tier name must name one tier")
        return next(iter(tiers)), None
    return None, None


def unknown_tier_name(topology: NetworkTopology | None, hn: HyperNodeTree) -> str | None:
    """Why a constraint's tier limit is dropped: its ``highestTierName`` names no tier; else None."""
    if topology is None or topology.highest_tier is not None or not topology.highest_tier_name:
        return None
    if hn.tiers.get(topology.highest_tier_name):
        return None
    known = ", ".join(sorted(hn.tiers)) or "none"
    return f"highestTierName {topology.highest_tier_name!r} is the tierName of no HyperNode (tier names: {known})"


def dropped_limits(topology: NetworkTopology | None, policies: Sequence[SubGroupPolicy],
                   hn: HyperNodeTree) -> tuple[str, ...]:
    """What a job is told when a tier name it gives names no tier: the limit is dropped, as Volcano
    drops it (a warning in its log; here an Event on the PodGroup)."""
    out = []
    why = unknown_tier_name(topology, hn)
    if why is not None:
        out.append(f"networkTopology: {why}; the job is scheduled with no tier limit, as Volcano does")
    for policy in policies:
        why = unknown_tier_name(policy.network_topology, hn)
        if why is not None:
            out.append(f"subGroupPolicy {policy.name}: {why}; its sub-groups are placed with no tier limit of their "
                       "own, as Volcano does")
    return tuple(out)


def requirement(topology: NetworkTopology | None, hn: HyperNodeTree, subgroups: tuple[SubGroup, ...] = (),
                minimums: tuple[tuple[str, int], ...] = ()) -> Requirement:
    """Volcano's constraint over the HyperNode tree: hard keeps every pod inside one HyperNode of at
    most the highest tier; soft searches the same tiers first, then those above, then the cluster."""
    hard = topology is None or topology.mode == "hard"
    scope, error = _limit(topology, hn) if topology is not None else (None, None)
    if error is not None:
        return Requirement(TREE, "tiers", failure=f"network topology: {error}")
    return Requirement(TREE, "tiers", hard=hard and topology is not None, scope=scope, subgroups=subgroups,
                       policy_minimums=minimums)


def subgroup_limit(topology: NetworkTopology | None, hn: HyperNodeTree) -> tuple[int | None, bool, str | None]:
    if topology is None:
        return None, False, None
    scope, error = _limit(topology, hn)
    return scope, topology.mode == "hard", error


def membership(labels: dict[str, str], policies: Sequence[SubGroupPolicy]) -> tuple[SubGroupPolicy, list[str]] | None:
    """The first policy that claims a pod with these labels, with the pod's values of its
    ``matchLabelKeys`` (``SubGroupPolicy.match_values``); None for the job's default group. A pod one
    policy does not claim is tried against the next, as Volcano does."""
    for policy in policies:
        values = policy.match_values(labels)
        if values is not None:
            return policy, values
    return None


def subgroups_of(job_key: str, members: Sequence[Pod], pending: set[str], policies: Sequence[SubGroupPolicy],
                 hn: HyperNodeTree, node_index: Mapping[str, int]) -> tuple[tuple[SubGroup, ...], str | None]:
    """The job's sub-groups in Volcano's order (first match value as a number, then id), built from
    all its live members (``pending`` names those to place; the others run and anchor their
    sub-group: it grows only inside the HyperNode of its own limit around them), or an error."""
    grouped: dict[str, tuple[SubGroupPolicy, int, list[Pod]]] = {}
    for pod in members:
        found = membership(pod.labels, policies)
        if found is None:
            continue  # the job's default group: placed inside the job's HyperNode, in no sub-group
        policy, values = found
        sid = f"{job_key}/{policy.name}-" + "-".join(values)
        # Volcano's MatchIndex: the first value read as Go's strconv.Atoi reads it, else 0.
        digits = values[0][1:] if values[0][:1] in "+-" else values[0]
        index = int(values[0]) if digits.isascii() and digits.isdigit() else 0
        grouped.setdefault(sid, (policy, index, []))[2].append(pod)
    tree = hn.tree
    out = []
    for sid, (policy, _, pods) in sorted(grouped.items(), key=lambda kv: (kv[1][1], kv[0])):
        scope, hard, error = subgroup_limit(policy.network_topology, hn)
        if error is not None:
            return (), f"subGroupPolicy {policy.name}: {error}"
        bound = [node_index[p.node_name] for p in pods if p.key not in pending and p.node_name in node_index]
        anchor = None
        if bound and hard and scope is not None:
            lca = tree.lca(int(tree.node_domain[n]) for n in bound)
            anchor = tree.ancestor_at_most(lca, scope)
            if anchor < 0:
                return (), (f"sub-group {sid}: its running members span {tree.name(lca) or 'the cluster'}, above "
                            f"its highest tier {scope}")
        size = policy.sub_group_size or len(pods)
        out.append(SubGroup(sid, tuple(p.key for p in pods if p.key in pending), size, scope, hard,
                            policy=policy.name, bound=len(bound), anchor=anchor))
    return tuple(out), None


def policy_minimums(subgroups: Sequence[SubGroup], policies: Sequence[SubGroupPolicy]) -> tuple[tuple[str, int], ...]:
    """How many sub-groups of each policy the job needs: its ``minSubGroups``, else all it has."""
    count: dict[str, int] = {}
    for g in subgroups:
        count[g.policy] = count.get(g.policy, 0) + 1
    return tuple((p.name, p.min_sub_groups if p.min_sub_groups else count.get(p.name, 0)) for p in policies)
