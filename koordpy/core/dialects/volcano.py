"""Volcano's dialect: its PodGroups (pods joined by the ``scheduling.k8s.io/group-name``
annotation, sub-groups from ``subGroupPolicy``) and their status, the HyperNode tree (with what is
wrong in it) and each HyperNode's node count, and a job's ``networkTopology`` (mode, highest tier,
sub-groups) turned into a ``Requirement``.

The tree is built from the members each HyperNode lists, so it may skip tiers and hold nodes at
any depth. A virtual root one tier above the highest contains every node; nodes no HyperNode
claims hang from it directly. What the webhook cannot see (a cycle, a member HyperNode whose tier
is not below its parent's, a node or HyperNode claimed twice) is reported per HyperNode and the
offending edge left out, so the rest of the tree keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import networkx as nx

from koordpy.api.kinds import Kind, Role, by_id
from koordpy.api.objects import Node, Pod
from koordpy.api.owners import Owner
from koordpy.api.podgroup import GangConfig
from koordpy.api.volcano import GROUP_NAME_ANN, HyperNode, NetworkTopology, SubGroupPolicy, VolcanoPodGroup
from koordpy.core.decisions import GangStatus, ObjectStatus
from koordpy.core.dialects.base import (
    ExplainsBase,
    GangsBase,
    GroupRow,
    ManifestsBase,
    RuntimesBase,
    StalenessBase,
    StatusesBase,
    TopologiesBase,
    annotates_min_runtime,
    final_stands,
    phase_row,
)
from koordpy.core.model import Asked, Gang, TopologyFacts, TreeSource, creation_time
from koordpy.core.naming import natural_key
from koordpy.core.requirement import Requirement, SubGroup
from koordpy.core.snapshot import Snapshot
from koordpy.core.topology_manifests import Generated, missing_warnings, natural, sanitise, short_names
from koordpy.core.tree import ROOT, DomainId, ShownTree, TopologyTree, TreeKey

NAME = "volcano"
TREE = TreeKey(NAME, text="hypernodes")
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


# -- asks and gangs ------------------------------------------------------------------------------


def hypernodes(trees: TreeSource) -> HyperNodeTree:
    """The HyperNode tree of these trees' snapshot and nodes, with its problems and tier names."""
    return trees.memo(NAME, lambda: hypernode_tree(trees.snapshot.hypernodes, trees.nodes))


@dataclass(frozen=True)
class VolcanoAsk:
    """A job's ``networkTopology`` and ``subGroupPolicy`` (from its PodGroup's spec or annotations)."""

    topology: NetworkTopology | None = None
    policies: tuple[SubGroupPolicy, ...] = ()
    keeps_gang = True

    def requirement(self, gang: Gang, pods: list[Pod], trees: TreeSource, snapshot: Snapshot) -> Asked:
        hn = hypernodes(trees)
        anchored = "network topology: the job's running members span {where}, above its highest tier {scope}"
        subgroups: tuple[SubGroup, ...] = ()
        minimums: tuple[tuple[str, int], ...] = ()
        if self.policies:
            pending = {p.key for p in pods}
            # Members in rank order, so that each sub-group's pods keep it.
            order = {p.key: i for i, p in enumerate(pods)}
            members = sorted(gang.pods, key=lambda p: (order.get(p.key, -1), p.key))
            subgroups, error = subgroups_of(gang.key, members, pending, self.policies, hn, trees.node_index)
            if error is not None:
                return Asked(Requirement(TREE, "tiers", failure=f"network topology: {error}"), anchored)
            minimums = policy_minimums(subgroups, self.policies)
            for policy, need in minimums:
                have = sum(1 for g in subgroups if g.policy == policy)
                if need > have:
                    return Asked(Requirement(TREE, "tiers", failure=(
                        f"subGroupPolicy {policy}: minSubGroups is {need} but the job has {have} sub-groups")),
                        anchored)
        req = requirement(self.topology, hn, subgroups, minimums)
        # New members join the running ones' HyperNode when it has room, whatever the mode (Volcano
        # scores a candidate by the tier of its lowest common ancestor with the job's allocated
        # HyperNode); hard mode also keeps them inside its limit around them (the cycle's anchor).
        return Asked(replace(req, dropped=dropped_limits(self.topology, self.policies, hn)), anchored, peers=True)

    def tree_key(self, snapshot: Snapshot) -> TreeKey:
        return TREE

    def facts(self) -> TopologyFacts:
        hard: list[str] = []
        soft: list[str] = []
        if self.topology is not None:
            (hard if self.topology.mode == "hard" else soft).append(
                f"the job within one HyperNode up to {_tier_limit(self.topology)}")
        for pol in self.policies:
            if pol.network_topology is not None:
                size = f" of {pol.sub_group_size}" if pol.sub_group_size else ""
                (hard if pol.network_topology.mode == "hard" else soft).append(
                    f"each sub-group{size} of policy {pol.name} within one HyperNode up to "
                    f"{_tier_limit(pol.network_topology)}")
        return TopologyFacts(NAME, tuple(hard), tuple(soft))


def _tier_limit(nt: NetworkTopology) -> str:
    if nt.highest_tier_name:
        return nt.highest_tier_name
    return f"tier {nt.highest_tier}" if nt.highest_tier is not None else "any tier"


def _default_config(key: str, min_member: int) -> GangConfig:
    return GangConfig(key=key, min_member=max(1, min_member), total_number=max(1, min_member), from_crd=True)


def podgroup_gang(pg: VolcanoPodGroup, pods: list[Pod]) -> Gang:
    gang = Gang(pg.key, _default_config(pg.key, pg.min_member), pods, creation_time(pg.creation))
    if pg.network_topology is not None or pg.sub_group_policy:
        gang.asks = (VolcanoAsk(pg.network_topology, pg.sub_group_policy),)
    return gang


# -- status --------------------------------------------------------------------------------------

PODGROUP_KIND: Kind = by_id("podgroups.scheduling.volcano.sh")
HYPERNODE_KIND: Kind = by_id("hypernodes.topology.volcano.sh")


@dataclass(frozen=True)
class VolcanoGangStatus:
    """A Volcano PodGroup's ``status``: its phase and member counts."""

    phase: str
    running: int
    succeeded: int
    failed: int
    kind: Kind = PODGROUP_KIND

    def wire(self) -> dict[str, object]:
        return {"phase": self.phase, "running": self.running, "succeeded": self.succeeded, "failed": self.failed}

    def applied(self, obj: Any) -> Any:
        assert isinstance(obj, VolcanoPodGroup)
        return obj.model_copy(update={"status": obj.status.model_copy(update=self.wire())})


def volcano_status(pg: VolcanoPodGroup, members: list[Pod], bound_now: dict[str, str]) -> VolcanoGangStatus:
    """A Volcano PodGroup's ``status`` as Volcano's phases read: Completed once its minimum
    succeeded, Running once its minimum is bound, Inqueue while it has the members to try,
    else Pending."""
    scheduled = sum(1 for p in members if p.node_name or p.key in bound_now)
    running = sum(1 for p in members if p.phase == "Running")
    succeeded = sum(1 for p in members if p.phase == "Succeeded")
    failed = sum(1 for p in members if p.phase == "Failed")
    need = max(1, pg.min_member)
    if succeeded >= need:
        phase = "Completed"
    elif scheduled >= need:
        phase = "Running"
    elif sum(1 for p in members if not p.terminal) >= need:
        phase = "Inqueue"
    else:
        phase = "Pending"
    return VolcanoGangStatus(phase, running, succeeded, failed)


# -- manifests ----------------------------------------------------------------------------------

MAX_NAME = 63  # an RFC 1123 label: fits every kind's name rule and reads well in a listing


@dataclass
class _Domain:
    """One HyperNode to be: the label values from its key up the contiguous run of present labels."""

    tier: int
    path: tuple[str, ...]  # values, from the highest key the run reaches down to this domain's key
    parent: tuple[int, tuple[str, ...]] | None
    nodes: list[str] = field(default_factory=list)
    children: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    name: str = ""


def hypernode_manifests(nodes: Sequence[Node], keys: Sequence[str]) -> Generated:
    """HyperNodes from the label ``keys`` (top level first; tier 1 from the lowest key), each
    listing its member HyperNodes and nodes by name."""
    tiers = len(keys)
    tier_names = short_names(keys)
    domains: dict[tuple[int, tuple[str, ...]], _Domain] = {}
    for node in nodes:
        values = [node.labels.get(k) or "" for k in keys]
        below: tuple[int, tuple[str, ...]] | None = None
        # From the lowest key up; a missing label ends the node's climb (that tier and above).
        for i in range(tiers - 1, -1, -1):
            if not values[i]:
                break
            tier = tiers - i
            # The run of present values above i names the domain, so a rack r1 in zone a and one in
            # zone b are two HyperNodes, and a node without a zone label joins neither.
            top = i
            while top > 0 and values[top - 1]:
                top -= 1
            ident = (tier, tuple(values[top: i + 1]))
            dom = domains.get(ident)
            if dom is None:
                up = (tier + 1, tuple(values[top:i])) if i > 0 and values[i - 1] else None
                dom = domains[ident] = _Domain(tier, ident[1], up)
            if below is None:
                dom.nodes.append(node.name)
            elif below not in dom.children:
                dom.children.append(below)
            below = ident
    _name_domains(domains)
    docs = []
    ordered = sorted(domains.values(), key=lambda d: (-d.tier, _path_key(d.path)))
    for d in ordered:
        members = ([{"type": "HyperNode", "selector": {"exactMatch": {"name": domains[c].name}}}
                    for c in sorted(d.children, key=lambda c: natural(domains[c].name))]
                   + [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in sorted(d.nodes, key=natural)])
        docs.append({"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode",
                     "metadata": {"name": d.name},
                     "spec": {"tier": d.tier, "tierName": tier_names[tiers - d.tier], "members": members}})
    warnings = missing_warnings(nodes, keys, lambda k: (
        f"left out of tier {tiers - list(keys).index(k)} ({tier_names[list(keys).index(k)]}) and above"))
    return Generated(docs, warnings)


def _path_key(path: tuple[str, ...]) -> tuple[object, ...]:
    return tuple(natural(v) for v in path)


def _name_domains(domains: Mapping[tuple[int, tuple[str, ...]], _Domain]) -> None:
    """Names from the label values, top tier first: a value found under more than one parent (or
    with and without one) takes its parent's name as a prefix; a name that is still taken, after
    lower-casing and replacing what a name cannot hold, gets -2, -3... in sorted order. The same
    labels give the same names on every run."""
    parents: dict[tuple[int, str], set[tuple[str, ...] | None]] = {}
    for d in domains.values():
        parents.setdefault((d.tier, d.path[-1]), set()).add(d.path[:-1] if d.parent else None)
    taken: set[str] = set()
    for tier in sorted({t for t, _ in domains}, reverse=True):
        idents = sorted((i for i in domains if i[0] == tier), key=lambda i: _path_key(i[1]))
        bases: dict[tuple[int, tuple[str, ...]], str] = {}
        for ident in idents:
            d = domains[ident]
            base = sanitise(d.path[-1]) or f"tier{tier}"
            if d.parent is not None and len(parents[(tier, d.path[-1])]) > 1:
                base = f"{domains[d.parent].name}-{base}"
            bases[ident] = base[:MAX_NAME].strip("-")
        wished = set(bases.values())
        for ident in idents:
            name, k = bases[ident], 1
            while name in taken or (k > 1 and name in wished):
                k += 1
                suffix = f"-{k}"
                name = bases[ident][:MAX_NAME - len(suffix)].strip("-") + suffix
            taken.add(name)
            domains[ident].name = name


# -- the dialect ---------------------------------------------------------------------------------


class Volcano(GangsBase, RuntimesBase, StatusesBase, StalenessBase, ExplainsBase, TopologiesBase, ManifestsBase):
    name = NAME
    roles: tuple[Role, ...] = ("volcano-podgroup", "hypernode")
    manifest_format = "hypernode"
    sources: Mapping[str, str] = {"volcano": "HyperNode"}
    # A HyperNode whose members are wrong (a selector, a pattern RE2 refuses) says InvalidMembers, as
    # the problems only the whole tree shows do, so one reason covers every bad member.
    invalid_reasons: Mapping[tuple[str, str], str] = {("HyperNode", "spec.members"): "InvalidMembers"}

    def manifests(self, nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
        return hypernode_manifests(nodes, keys)  # HyperNodes are named from the label values

    def compare_key(self, role: Role) -> Callable[[Any], object] | None:
        return spec_of if role == "hypernode" else None

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        group = pod.annotations.get(GROUP_NAME_ANN)
        return f"{pod.namespace}/{group}" if group else None

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        return snapshot.volcano_podgroups

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        return key in snapshot.volcano_podgroups

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        return podgroup_gang(snapshot.volcano_podgroups[key], pods)

    def gang_object(self, key: str, snapshot: Snapshot) -> tuple[str, Mapping[str, str]] | None:
        pg = snapshot.volcano_podgroups.get(key)
        return None if pg is None else (f"PodGroup {key}", pg.annotations)

    def sets_min_runtime(self, snapshot: Snapshot) -> bool:
        return annotates_min_runtime(snapshot.volcano_podgroups.values())

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        return "PodGroup scheduling.volcano.sh" if key in snapshot.volcano_podgroups else None

    def object_kind(self, key: str, snapshot: Snapshot) -> str | None:
        return "VolcanoPodGroup" if key in snapshot.volcano_podgroups else None

    def stale_object(self, key: str, snapshot: Snapshot) -> tuple[Kind, Mapping[str, str]] | None:
        pg = snapshot.volcano_podgroups.get(key)
        return None if pg is None else (PODGROUP_KIND, pg.annotations)

    def min_resources(self, key: str, snapshot: Snapshot) -> Mapping[str, int] | None:
        pg = snapshot.volcano_podgroups.get(key)
        return pg.min_resources if pg is not None else None

    def said(self, kind: Kind, obj: Any) -> Mapping[str, object] | None:
        return obj.status.written() if isinstance(obj, VolcanoPodGroup) else None

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        pg = snapshot.volcano_podgroups.get(key)
        if pg is None or final_stands(pg.status.phase, ("Completed",), members):
            return ()
        status = volcano_status(pg, members, bound_now)
        return ((key, status),) if status.wire() != pg.status.counts() else ()

    def shown_groups(self, snapshot: Snapshot) -> Iterable[tuple[str, str, dict[str, Any], GroupRow]]:
        # Its PodGroups' scheduled count is that of their pods on a node, as Volcano's controller counts.
        scheduled: dict[str, int] = {}
        for p in snapshot.pods:
            group = p.annotations.get(GROUP_NAME_ANN)
            if group and p.node_name:
                scheduled[f"{p.namespace}/{group}"] = scheduled.get(f"{p.namespace}/{group}", 0) + 1
        out = []
        for k, pg in snapshot.volcano_podgroups.items():
            shown: dict[str, Any] = {"phase": pg.status.phase, "scheduled": scheduled.get(k, 0),
                                     "minMember": pg.min_member}
            out.append((k, "PODGROUP", shown, phase_row(shown)))
        return out

    def object_statuses(self, trees: TreeSource) -> Iterable[ObjectStatus]:
        # Each HyperNode: the nodes inside it, and what is wrong with it (told once as an Event).
        if not trees.snapshot.hypernodes:
            return ()
        hn = hypernodes(trees)
        out = []
        for name in trees.snapshot.hypernodes:
            problems = hn.problems.get(name, [])
            count = hn.node_count(name)
            valid = {"type": "Valid", "status": "False" if problems else "True",
                     "reason": "InvalidMembers" if problems else "Reconciled", "message": "; ".join(problems)}
            out.append(ObjectStatus(HYPERNODE_KIND, name, {"nodeCount": count}, valid, write="hypernode-status",
                                    section="hypernodes",
                                    shown={"nodeCount": count, **({"problems": problems} if problems else {})},
                                    problems=tuple(problems), warning="InvalidMembers"))
        return out

    def tree_keys(self, snapshot: Snapshot) -> Iterator[TreeKey]:
        yield TREE

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        return hypernodes(trees).tree if key == TREE else None

    def default_tree(self, snapshot: Snapshot) -> TreeKey | None:
        return TREE if snapshot.hypernodes else None

    def shown_trees(self, trees: TreeSource) -> Iterable[ShownTree]:
        count = len(trees.snapshot.hypernodes)
        return () if not count else (ShownTree(TREE, f"Volcano HyperNodes ({count})",
                                               problems=hypernodes(trees).problems, ranked=True),)


DIALECT = Volcano()
