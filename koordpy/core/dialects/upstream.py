"""Kubernetes' own PodGroup (``scheduling.k8s.io/v1beta1``, the Workload API) as a dialect.

A pod joins the group its ``spec.schedulingGroup.podGroupName`` names, in its namespace. What
kube-scheduler v1.37 does with such a group, koordpy does:

- ``gang: {minCount}``: a gang (one ``Gang``, Strict, no waiting-time limit of its own: kube-scheduler
  places a group in one attempt and holds nothing between attempts). It waits until ``minCount`` of
  its pods exist, binds only when its bound members and the ones placed in one attempt reach
  ``minCount`` (every attempt: a replacement too, whatever the group's condition says), and every
  member that fits binds with them. Its members are tried as kube-scheduler's group cycle tries them
  (``Gang.skips``): in rank order, each given the ones before it, one that fits nowhere passed over.
- ``basic: {}``: a gang of minimum 1, as kube-scheduler's group cycle takes it: every pod that fits
  binds, one that fits nowhere does not hold the others; each lands in the group's domain (with a
  topology constraint) and the group gets its condition (without one too).
- ``schedulingConstraints.topology[].key``: every member in one domain of that node label (one tree
  per label, one level: the label's values; a node without the label is no candidate). A group with
  members bound is held to their domain.
- ``status.conditions``: ``PodGroupInitiallyScheduled`` as kube-scheduler writes it (``GroupStatus``):
  True, ``Scheduled``, once the group's minimum is bound, and never changed again (``initially_scheduled``;
  it says what happened, and lowers no quorum); False, ``Unschedulable``, with why its pods wait;
  False, ``SchedulerError``, for a group refused as kube-scheduler refuses it (schedulerNames,
  priority, preemptionPolicy, claims).
- CompositePodGroup (``scheduling.k8s.io/v1alpha3``): the PodGroups that name it in
  ``parentCompositePodGroupName`` are its children, and all their pods are one gang keyed by the
  composite's ``namespace/name`` (``enclosing``). Each child is a sub-group inside one domain of its
  own topology key that counts once its own minimum (``minCount``; 1 for ``basic``) is placed or bound
  (``SubGroup.skips``: its other pods that fit go with it, one that fits nowhere is passed over); the
  gang binds only when ``minGroupCount`` children (one for ``basic``) count at once, inside one
  domain of the composite's own key, and every other member that fits binds with them. It waits,
  as kube-scheduler does, until that many children have their minimum of pods, and while the
  CompositePodGroup it names does not exist. The tree is the node labels of the composite's key
  above its children's. Like kube-scheduler, koordpy reads neither the Workload nor the template
  ``workloadRef`` names; it writes ``PodGroupInitiallyScheduled`` on each child, none on the
  composite. Nested composites (a CompositePodGroup with a parent) are refused.
- ``spec.resourceClaims`` (KEP-5729): each group with claims is handed to the device rules
  (``claim_groups``: its uid, its entries, the claims made from its templates), which reserve a
  member's claim for the group when the member's entry is identical to one of these.

Belongs here: everything koordpy does with these groups. Does not belong here: refusals that are no
dialect's (``koordpy.core.refusals``), parsing the object (``koordpy.api.workload``), the gang rule
(``koordpy.core.gangrule``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from koordpy.api.dra import ClaimGroup
from koordpy.api.kinds import Kind, Role, by_id
from koordpy.api.kueue import ANN_PREFERRED
from koordpy.api.objects import Node, Pod, PriorityClass
from koordpy.api.owners import Owner
from koordpy.api.podgroup import GangConfig
from koordpy.api.selectors import qualified_name_problem
from koordpy.api.topology import NODE_LAYER
from koordpy.api.workload import (
    INITIALLY_SCHEDULED,
    SCHEDULED,
    SCHEDULER_ERROR,
    UNSCHEDULABLE,
    CompositePodGroup,
    GroupCondition,
    WorkloadPodGroup,
)
from koordpy.core.decisions import Decision, GangStatus, GangStatusUpdate
from koordpy.core.dialects.base import (
    AdmissionBase,
    ExplainsBase,
    GangsBase,
    GroupRow,
    GroupTerms,
    RuntimesBase,
    StalenessBase,
    StatusesBase,
    TopologiesBase,
    annotates_min_runtime,
)
from koordpy.core.messages import COMPOSITE_PODGROUP, WORKLOAD_PODGROUP, render
from koordpy.core.messages import SCHEDULING_GROUP as SCHEDULING_GROUP
from koordpy.core.model import Asked, Gang, TopologyFacts, TreeSource, creation_time
from koordpy.core.naming import natural_key
from koordpy.core.requirement import Requirement, SubGroup
from koordpy.core.snapshot import Snapshot
from koordpy.core.tree import HOSTNAME, ROOT, DomainId, ShownTree, TopologyTree, TreeKey, label_levels_tree
from koordpy.core.verdicts import (
    CompositeMissing,
    CompositeShort,
    GroupMissing,
    GroupNamedOtherwise,
    GroupNameShared,
    GroupPreemptionPolicy,
    GroupPriority,
    GroupRefused,
    GroupSchedulers,
    Reason,
)

NAME = "upstream"
# The registry store its PodGroups land in (``Snapshot.of``): the core has no field for them.
STORE = "workload_podgroups"
DECLARED_BY = WORKLOAD_PODGROUP


# Its CompositePodGroups' store (an optional kind: a cluster without the CompositePodGroup gate has none).
COMPOSITES = "composite_podgroups"
COMPOSITE_DECLARED_BY = COMPOSITE_PODGROUP


def groups(snapshot: Snapshot) -> Mapping[str, WorkloadPodGroup]:
    found: Mapping[str, WorkloadPodGroup] = snapshot.of(STORE)
    return found


# The groups claim_groups handed out last: asked again whenever a gang-declaring object changed (a
# PodGroup's status, which this scheduler writes, most cycles), it hands out the same object for a
# group whose claims did not change, so the view compares the groups by identity, not field by field.
_CLAIM_GROUPS: list[dict[str, ClaimGroup]] = [{}]


def composites(snapshot: Snapshot) -> Mapping[str, CompositePodGroup]:
    found: Mapping[str, CompositePodGroup] = snapshot.of(COMPOSITES)
    return found


def parent_key(group: WorkloadPodGroup) -> str | None:
    """``namespace/name`` of the CompositePodGroup the group names as its parent, else None."""
    return f"{group.namespace}/{group.parent}" if group.parent else None


# Each CompositePodGroup's children, for one snapshot at a time (the last one asked about).
_CHILDREN: list[tuple[Snapshot, dict[str, list[WorkloadPodGroup]]]] = []


def children(key: str, snapshot: Snapshot) -> list[WorkloadPodGroup]:
    """The PodGroups that name the CompositePodGroup ``key`` as their parent, in natural name order."""
    if not (_CHILDREN and _CHILDREN[0][0] is snapshot):
        index: dict[str, list[WorkloadPodGroup]] = {}
        for g in groups(snapshot).values():
            up = parent_key(g)
            if up is not None:
                index.setdefault(up, []).append(g)
        for found in index.values():
            found.sort(key=lambda g: natural_key(g.name))
        _CHILDREN[:] = [(snapshot, index)]
    return _CHILDREN[0][1].get(key, [])


def child_minimum(group: WorkloadPodGroup) -> int:
    """A child's own minimum: its gang's ``minCount``; 1 for ``basic``, as kube-scheduler counts it."""
    return group.min_count if group.policy == "gang" and group.min_count is not None else 1


def group_count(composite: CompositePodGroup) -> int:
    """The children a CompositePodGroup needs at once: ``minGroupCount``; 1 for ``basic``."""
    return composite.min_group_count if composite.policy == "gang" else 1


def group_key(pod: Pod) -> str | None:
    """``namespace/name`` of the group the pod names by ``podGroupName``, else None."""
    if not pod.scheduling_group or pod.scheduling_group_other:
        return None
    return f"{pod.namespace}/{pod.scheduling_group}"


def makes_gang(group: WorkloadPodGroup) -> bool:
    """Every group is a gang: a gang policy with its ``minCount``, a basic group with a minimum of 1
    (as kube-scheduler's group cycle takes a basic group: its minimum is 1), so that each group gets
    its ``PodGroupInitiallyScheduled`` condition, a basic one without a topology constraint too, as
    kube-scheduler writes it for every group it schedules."""
    return group.policy in ("gang", "basic")


# The schedulerNames the pods of each group name, for one snapshot at a time (the last one asked
# about): a refusal is asked per pod, and the answer is the group's.
_SCHEDULERS: list[tuple[Snapshot, dict[str, tuple[str, ...]]]] = []


def schedulers(snapshot: Snapshot) -> Mapping[str, tuple[str, ...]]:
    """Per group key, the schedulerNames its live pods name, sorted."""
    if _SCHEDULERS and _SCHEDULERS[0][0] is snapshot:
        return _SCHEDULERS[0][1]
    found: dict[str, set[str]] = {}
    known = groups(snapshot)
    for p in snapshot.pods:
        key = group_key(p)
        if key is not None and not p.terminal:
            found.setdefault(key, set()).add(p.scheduler_name)
            group = known.get(key)
            up = parent_key(group) if group is not None else None
            if up is not None:  # the whole tree under a CompositePodGroup is one group
                found.setdefault(up, set()).add(p.scheduler_name)
    index = {k: tuple(sorted(v)) for k, v in found.items()}
    _SCHEDULERS[:] = [(snapshot, index)]
    return index


def priority_of(class_name: str, value: int | None, snapshot: Snapshot) -> int:
    """A priority as the Priority admission gives it: the value set, else the named PriorityClass's,
    else the global default's, else 0."""
    if value is not None:
        return value
    found = _admitted_class(class_name, snapshot)
    return found.value if found is not None else 0


def _admitted_class(class_name: str, snapshot: Snapshot) -> PriorityClass | None:
    """The PriorityClass the Priority admission takes a group's values from: the one named, else the
    global default, else None."""
    classes = snapshot.priority_classes
    return classes.get(class_name) if class_name else next((c for c in classes.values() if c.global_default), None)


def refusal(pod: Pod, snapshot: Snapshot) -> Reason | None:
    """Why koordpy will not place ``pod`` for the group it names, or None (no group, or one koordpy
    schedules). Each of these holds the whole group: kube-scheduler refuses it too (a group two
    schedulers would write, a pod whose priority is not the group's) or koordpy cannot do it yet
    (claims, a parent group)."""
    if not pod.scheduling_group:
        return None
    if pod.scheduling_group_other:
        return GroupNamedOtherwise(pod.key, pod.scheduling_group)
    key = f"{pod.namespace}/{pod.scheduling_group}"
    group = groups(snapshot).get(key)
    if group is None:
        return GroupMissing(pod.key, pod.namespace, pod.scheduling_group)
    if group.asks:
        return GroupRefused(pod.key, pod.scheduling_group, group.policy == "gang", group.min_count, tuple(group.asks))
    # The root of the group's tree: kube-scheduler holds every pod of a tree to the root's scheduler,
    # priority and preemptionPolicy.
    root, kind, priority = key, "PodGroup", (group.priority_class_name, group.priority)
    policy = group.preemption_policy or _class_policy(group.priority_class_name, snapshot)
    up = parent_key(group)
    if up is not None:
        composite = composites(snapshot).get(up)
        if composite is None:
            return CompositeMissing(pod.key, key, up)
        if composite.asks:
            return GroupRefused(pod.key, pod.scheduling_group, False, None,
                                tuple(f"CompositePodGroup {up} with {a}" for a in composite.asks))
        root, kind, priority = up, "CompositePodGroup", (composite.priority_class_name, composite.priority)
        policy = composite.preemption_policy or _class_policy(composite.priority_class_name, snapshot)
    elif key in composites(snapshot):
        return GroupNameShared(pod.key, key)
    names = schedulers(snapshot).get(root, ())
    if len(names) > 1:
        return GroupSchedulers(pod.key, root, names, kind)
    own = priority_of(pod.priority_class_name, pod.priority, snapshot)
    theirs = priority_of(*priority, snapshot)
    if own != theirs:
        return GroupPriority(pod.key, root, own, theirs, kind)
    # PodGroupPreemptionPolicy (on in v1.37's control plane): the pod's policy must be the root's.
    mine = pod.preemption_policy or _class_policy(pod.priority_class_name, snapshot) or LOWER
    if mine != (policy or LOWER):
        return GroupPreemptionPolicy(pod.key, root, mine, policy or LOWER, kind)
    return None


LOWER = "PreemptLowerPriority"  # the preemptionPolicy of a pod or group that has none


# -- the topology trees: one label, or a preferred label below it ---------------------------------


def tree_key(label: str, preferred: str = "") -> TreeKey:
    """The tree of the node label ``label``: one level, its values. With ``preferred`` (koordpy's
    preferred level), a second level below it: the preferred label's values inside each of the
    required label's domains (``label`` "": under the whole cluster)."""
    if not preferred:
        return TreeKey(NAME, label, f"label/{label}")
    return TreeKey(NAME, PREFERRED_PREFIX + json.dumps([label, preferred]), f"label/{label}>{preferred}")


# The name of a two-level tree's key says both labels (a label key holds no such prefix).
PREFERRED_PREFIX = "preferred:"


def label_tree(label: str, nodes: Sequence[Node]) -> TopologyTree:
    """One domain per value of ``label``; a node without the label is outside the tree (no
    requirement on it uses that node)."""
    return label_levels_tree((label,), nodes, "cluster")


# Label trees of two or more levels, kept (a few) while the nodes' labels stay the same.
_LEVEL_TREES: dict[object, TopologyTree] = {}


def _levels_tree(levels: tuple[str, ...], nodes: Sequence[Node], optional: str, node_layer: str) -> TopologyTree:
    """Nodes grouped by the values of ``levels``, the widest first, each level a layer of domains. A
    node without one of the labels is outside the tree, except for ``optional`` (a preferred
    level): a node without it hangs from the domain above, in no domain of that level. A value found
    under two domains of the level above is two domains (the wider label is the harder one)."""
    key = (levels, optional, node_layer, tuple((n.name, tuple(n.labels.get(k) for k in levels)) for n in nodes))
    cached = _LEVEL_TREES.get(key)
    if cached is not None:
        return cached
    height = len(levels)
    inner: dict[DomainId, tuple[DomainId, str, str, int]] = {}
    node_parent: dict[str, DomainId] = {}
    outside = []
    for n in nodes:
        if any(not n.labels.get(k) for k in levels if k != optional):
            outside.append(n.name)
            continue
        prefix: DomainId = ROOT
        for i, level in enumerate(levels):
            value = n.labels.get(level)
            if not value:  # only the optional level may be missing here
                break
            child = (*prefix, value)
            inner.setdefault(child, (prefix, level, value, height - i))
            prefix = child
        node_parent[n.name] = prefix
    tree = TopologyTree.from_edges(levels, [n.name for n in nodes], inner, node_parent, node_layer=node_layer,
                                   root_rank=height + 1, root_layer="cluster", leaf_depth=height + 1,
                                   outside=outside)
    if len(_LEVEL_TREES) >= 8:
        _LEVEL_TREES.pop(next(iter(_LEVEL_TREES)))
    _LEVEL_TREES[key] = tree
    return tree


def preferred_tree(required: str, preferred: str, nodes: Sequence[Node]) -> TopologyTree:
    """The required label's domains (none when ``required`` is ""), each holding the preferred
    label's domains. A node without the required label is outside the tree, as in ``label_tree``;
    a node without the preferred label is still a candidate (the level is only preferred): it hangs
    from its required domain (or the root), in no preferred domain. A preferred value found in two
    required domains is two domains, one in each (the required key is hard). ``kubernetes.io/hostname``
    as the preferred label adds no level: the nodes are that level."""
    levels = tuple(k for k in (required, preferred) if k and k != HOSTNAME)
    return _levels_tree(levels, nodes, preferred, HOSTNAME)


def preferred_problem(required: str, preferred: str, nodes: Sequence[Node]) -> str | None:
    """Why the preferred level cannot be used, so that it is dropped (the group is then placed by
    its required key alone, or anywhere without one), or None. A preference never holds a group."""
    what = f"{ANN_PREFERRED} {preferred!r}"
    problem = qualified_name_problem(preferred)
    if problem:
        return f"{what} is no node label key ({problem}): the preferred level is dropped"
    if preferred == required:
        return f"{what} names the topology key itself: there is no level below it to prefer; dropped"
    if required == HOSTNAME:
        return f"{what}: the topology key {HOSTNAME} is a single node, with no level below it; dropped"
    if preferred == HOSTNAME:
        return None  # the nodes themselves: every node carries it as far as the tree is concerned
    if not any(n.labels.get(preferred) for n in nodes if not required or n.labels.get(required)):
        where = f"labelled {required} " if required else ""
        rest = f"by {required} alone" if required else "anywhere"
        return f"{what}: no node {where}carries the label {preferred}; the preferred level is dropped and " \
               f"the group placed {rest}"
    return None


COMPOSITE_TREE = "composite:"  # how a composite tree's name starts (a label key has no colon)


def levels_key(levels: Sequence[str]) -> TreeKey:
    """The tree of a CompositePodGroup: node labels, the widest first, every one an inner level (the
    hostname too, so that a child held to one node is a sub-group of that level). Label keys have
    no comma, so the name joins them with one."""
    name = ",".join(levels)
    return TreeKey(NAME, COMPOSITE_TREE + name, f"labels/{name}" if name else "nodes")


def composite_tree(levels: Sequence[str], nodes: Sequence[Node]) -> TopologyTree:
    """Nodes grouped by the values of ``levels``, each level a layer of domains (the hostname's
    domains hold one node each); a node that lacks one of the labels is outside the tree."""
    return _levels_tree(tuple(levels), nodes, "", NODE_LAYER)


def composite_levels(composite: CompositePodGroup, kids: Sequence[WorkloadPodGroup],
                     nodes: Sequence[Node]) -> tuple[str, ...]:
    """The labels of a CompositePodGroup's tree: its own key above its children's. Children's keys
    that differ are ordered by how many values the nodes give them (fewer: wider), the hostname last
    (it is the nodes themselves)."""
    own = composite.topology_keys
    below = {k for g in kids for k in g.topology_keys if k not in own}

    def width(label: str) -> tuple[bool, int, str]:
        return (label == HOSTNAME, len({n.labels.get(label) for n in nodes} - {None}), label)

    return (*own, *sorted(below, key=width))


def level_rank(levels: Sequence[str], label: str) -> int:
    """The rank of ``label``'s domains in the tree of ``levels`` (``composite_tree``)."""
    return len(levels) - list(levels).index(label)


@dataclass(frozen=True)
class TopologyAsk:
    """``schedulingConstraints.topology[].key``: every member in one domain of the label; and
    koordpy's preferred level below it (``preferred``, a node label), the smallest domain of which
    that takes the group is tried first, one level up after it, as KAI's preferred level is. With no
    required key (``label`` ""), the preference spans the whole cluster."""

    label: str
    preferred: str = ""
    keeps_gang = True  # a member added later still lands in the group's domain

    def requirement(self, gang: Gang, pods: list[Pod], trees: TreeSource, snapshot: Snapshot) -> Asked:
        required, preferred = self.label, self.preferred
        dropped: tuple[str, ...] = ()
        if preferred:
            problem = trees.memo(f"{NAME}/preferred/{required}>{preferred}",
                                 lambda: preferred_problem(required, preferred, trees.nodes))
            if problem is not None:
                dropped, preferred = (problem,), ""
        failure = None
        if required:
            label = trees[tree_key(required)]
            if not label.domains_at(1):
                failure = (f"0/{len(trees.nodes)} nodes are available: PodGroup {gang.key}'s topology constraint "
                           f"needs nodes labelled {required}, and no node carries that label.")
        anchored = ("topology: the group's bound members span {where}, more than one domain of "
                    f"{required}")
        if not preferred:
            key = tree_key(required) if required else tree_key("", self.preferred)
            scope = 1 if required else None  # without a required key, the whole cluster
            labels = ((1, required), (0, HOSTNAME)) if required else ((0, HOSTNAME),)
            req = Requirement(key, "gather", scope=scope, failure=failure, labels=labels, dropped=dropped)
            return Asked(req, anchored, peers=True)
        below = preferred != HOSTNAME  # the hostname level is the nodes: no level of its own
        key = tree_key(required, preferred) if below else tree_key(required) if required else tree_key("", HOSTNAME)
        top = (1 if required else 0) + (1 if below else 0)  # the height of the tree's inner levels
        labels = (*(((top, required),) if required else ()), *(((1, preferred),) if below else ()), (0, HOSTNAME))
        req = Requirement(key, "levels", hard=bool(required), scope=top if required else None,
                          preferred=1 if below else 0, failure=failure, labels=labels)
        return Asked(req, anchored, peers=True)

    def tree_key(self, snapshot: Snapshot) -> TreeKey:
        if not self.preferred or self.preferred == self.label:
            return tree_key(self.label) if self.label else tree_key("", self.preferred)
        if self.preferred == HOSTNAME and self.label:
            return tree_key(self.label)
        return tree_key(self.label, self.preferred)

    def facts(self) -> TopologyFacts:
        required = (f"one domain of {self.label}",) if self.label else ()
        within = f" inside it ({ANN_PREFERRED})" if self.label else f" ({ANN_PREFERRED})"
        preferred = (f"one domain of {self.preferred}{within}",) if self.preferred else ()
        return TopologyFacts(NAME, required, preferred)


def topology_ask(group: WorkloadPodGroup) -> TopologyAsk | None:
    """What the group asks of the topology: its topology key, its preferred level, both, or None."""
    if not group.topology_keys and not group.preferred_label:
        return None
    return TopologyAsk(group.topology_keys[0] if group.topology_keys else "", group.preferred_label)


@dataclass(frozen=True)
class CompositeAsk:
    """A CompositePodGroup's children as sub-groups: each whole inside one domain of its own key, with
    its own minimum; ``minGroupCount`` of them at once inside one domain of the composite's key."""

    key: str  # the CompositePodGroup's namespace/name
    keeps_gang = True  # a child placed later still lands whole, inside the composite's domain

    def requirement(self, gang: Gang, pods: list[Pod], trees: TreeSource, snapshot: Snapshot) -> Asked:
        composite = composites(snapshot).get(self.key)
        kids = children(self.key, snapshot)
        levels = composite_levels(composite, kids, trees.nodes) if composite is not None else ()
        key = levels_key(levels)
        own = composite.topology_keys[0] if composite is not None and composite.topology_keys else None
        anchored = f"topology: the CompositePodGroup's bound members span {{where}}, more than one domain of {own}"
        need = group_count(composite) if composite is not None else 1
        pending = {p.key for p in pods}
        order = {p.key: i for i, p in enumerate(pods)}
        by_child: dict[str, list[Pod]] = {}
        for p in sorted(gang.pods, key=lambda p: (order.get(p.key, -1), p.key)):
            child = group_key(p)
            if child is not None:
                by_child.setdefault(child, []).append(p)
        counts = tuple((g.name, len(by_child.get(g.key, [])), child_minimum(g)) for g in kids)
        if composite is None or sum(1 for _, have, least in counts if have >= least) < need:
            # kube-scheduler does not try the tree before that many children have their pods.
            return Asked(Requirement(key, "tiers", failure=render(CompositeShort(self.key, need, counts))), anchored)
        tree = trees[key]
        if own is not None and not tree.domains_at(1):
            failure = (f"0/{len(trees.nodes)} nodes are available: CompositePodGroup {self.key}'s topology "
                       f"constraint needs nodes labelled {own}, and no node carries that label.")
            return Asked(Requirement(key, "tiers", failure=failure), anchored)
        subgroups = []
        for g in kids:
            members = by_child.get(g.key, [])
            scope = level_rank(levels, g.topology_keys[0]) if g.topology_keys else None
            bound = [trees.node_index[p.node_name] for p in members
                     if p.key not in pending and p.node_name in trees.node_index]
            anchor = None
            if bound and scope is not None:
                # A child with members bound grows only inside their domain of its key.
                lca = tree.lca(int(tree.node_domain[n]) for n in bound)
                anchor = tree.ancestor_at_most(lca, scope)
                if anchor < 0 and tree.domain_node[lca] >= 0 and int(tree.rank[lca]) == scope:
                    anchor = lca
                if anchor < 0:
                    continue  # its members already span more than its domain: it can take no more
            subgroups.append(SubGroup(g.key, tuple(p.key for p in members if p.key in pending), child_minimum(g),
                                      scope, policy="", bound=len(bound), anchor=anchor, skips=True))
        labels = tuple((level_rank(levels, k), k) for k in levels)
        req = Requirement(key, "tiers", scope=level_rank(levels, own) if own is not None else None,
                          subgroups=tuple(subgroups), policy_minimums=(("", need),), labels=(*labels, (0, "node")),
                          composite=self.key)
        return Asked(req, anchored)

    def tree_key(self, snapshot: Snapshot) -> TreeKey:
        composite = composites(snapshot).get(self.key)
        if composite is None:
            return levels_key(())
        return levels_key(composite_levels(composite, children(self.key, snapshot), snapshot.nodes))

    def facts(self) -> TopologyFacts:
        return TopologyFacts(NAME, (f"CompositePodGroup {self.key}: minGroupCount children, each whole inside "
                                    "one domain of its own key, all inside one domain of the composite's key",), ())


# -- gangs -----------------------------------------------------------------------------------------


def group_gang(group: WorkloadPodGroup, pods: list[Pod], snapshot: Snapshot) -> Gang:
    # minCount every time, whatever PodGroupInitiallyScheduled says: kube-scheduler counts the bound
    # and placed members against it at each attempt (a replacement too), and reads no condition.
    minimum = child_minimum(group)
    # Strict (all or nothing in one attempt); bound members count, as kube-scheduler counts the
    # assigned ones, and nothing is remembered once the minimum was met ("waiting-and-running"); the
    # waiting time is never used, since a Strict gang holds no reservation to time out.
    config = GangConfig(key=group.key, min_member=minimum, total_number=max(minimum, len(pods)), mode="Strict",
                        match_policy="waiting-and-running", from_crd=True)
    gang = Gang(group.key, config, pods, creation_time(group.creation))
    gang.skips = True  # a member that fits nowhere is passed over, as kube-scheduler's group cycle does
    ask = topology_ask(group)
    gang.asks = (ask,) if ask is not None else ()
    # The group speaks for its pods in preemption, as kube-scheduler's PodGroup preemption has it:
    # its priority (its pods must match it, or they are refused), its policy, its disruption mode.
    gang.priority = priority_of(group.priority_class_name, group.priority, snapshot)
    gang.preemption_policy = group.preemption_policy or _class_policy(group.priority_class_name, snapshot)
    gang.whole = group.disruption_mode == "all"
    return gang


def _class_policy(class_name: str, snapshot: Snapshot) -> str | None:
    """The preemptionPolicy the Priority admission would give a group naming ``class_name`` without
    one (None: no class to take it from, the pods' own then decides)."""
    found = _admitted_class(class_name, snapshot)
    return found.preemption_policy if found is not None else None
def composite_gang(composite: CompositePodGroup, pods: list[Pod], snapshot: Snapshot) -> Gang:
    """All the pods of a CompositePodGroup's children, one Strict gang. Its minimum is what the
    ``minGroupCount`` smallest children need together (the sub-groups, ``CompositeAsk``, say which)."""
    kids = children(composite.key, snapshot)
    least = sorted(child_minimum(g) for g in kids)
    minimum = max(1, sum(least[: group_count(composite)]))
    config = GangConfig(key=composite.key, min_member=minimum, total_number=max(minimum, len(pods)), mode="Strict",
                        match_policy="waiting-and-running", from_crd=True)
    gang = Gang(composite.key, config, pods, creation_time(composite.creation))
    gang.skips = True  # each child's members as a PodGroup's (``SubGroup.skips``)
    # The minimum in pods above is a floor; what binds it is minGroupCount children each at theirs.
    mine: dict[str | None, set[str]] = {}
    for p in pods:
        mine.setdefault(group_key(p), set()).add(p.key)
    gang.parts = (group_count(composite), tuple((frozenset(mine.get(g.key, ())), child_minimum(g)) for g in kids))
    gang.asks = (CompositeAsk(composite.key),)
    # The root speaks for the whole tree in preemption: its priority (every pod must have it), its
    # policy, and disruptionMode all (the children go together). Under a root in single mode, a
    # child in disruptionMode all is a unit of its own: kube-scheduler evicts with a pod the highest
    # group above it in mode all.
    gang.priority = priority_of(composite.priority_class_name, composite.priority, snapshot)
    gang.preemption_policy = composite.preemption_policy or _class_policy(composite.priority_class_name, snapshot)
    gang.whole = composite.disruption_mode == "all"
    if not gang.whole:
        whole = {g.key for g in kids if g.disruption_mode == "all"}
        gang.units = {p.key: k for p in pods if (k := group_key(p)) in whole}
    return gang


# -- status ----------------------------------------------------------------------------------------

PODGROUP_KIND: Kind = by_id("podgroups.scheduling.k8s.io")
COMPOSITE_KIND: Kind = by_id("compositepodgroups.scheduling.k8s.io")
# metav1.Condition's limit on ``message`` (bytes): a longer one is refused by the API server.
MESSAGE_LIMIT = 32768


@dataclass(frozen=True)
class GroupStatus:
    """A Workload PodGroup's ``status``: its whole ``conditions`` list as it should stand (a merge
    patch of ``status`` replaces the list, so the entries koordpy did not change are written back)."""

    conditions: tuple[GroupCondition, ...]
    kind: Kind = PODGROUP_KIND

    def wire(self) -> dict[str, object]:
        return {"conditions": [c.wire() for c in self.conditions]}

    def applied(self, obj: Any) -> Any:
        assert isinstance(obj, WorkloadPodGroup)
        return obj.model_copy(update={"conditions": self.conditions})


def initially_scheduled(group: WorkloadPodGroup) -> bool:
    """Whether the group's ``PodGroupInitiallyScheduled`` is True (whoever wrote it: kube-scheduler,
    koordpy, a manifest given to ``koordpy simulate``). Terminal, as kube-scheduler keeps it: never
    written again. It relaxes nothing: the pods that come later (replacements, a grown Job) are held
    to ``minCount`` with the bound ones, as kube-scheduler counts them at every attempt."""
    current = group.condition(INITIALLY_SCHEDULED)
    return current is not None and current.status == "True"


def _clipped(message: str) -> str:
    data = message.encode()
    return message if len(data) <= MESSAGE_LIMIT else data[:MESSAGE_LIMIT].decode(errors="ignore")


def scheduled_condition(group: WorkloadPodGroup, members: list[Pod], bound_now: Mapping[str, str],
                        pending: Mapping[str, str], snapshot: Snapshot) -> tuple[str, str, str] | None:
    """``PodGroupInitiallyScheduled`` as kube-scheduler would set it after this cycle: (status,
    reason, message), or None when this cycle says nothing new (no member tried says why it waits)."""
    waiting = sorted((p for p in members if not p.node_name and p.key not in bound_now), key=lambda p: p.key)
    for p in waiting:
        refused = refusal(p, snapshot)
        if isinstance(refused, GroupSchedulers | GroupPriority | GroupPreemptionPolicy):
            # kube-scheduler validates the group before placing it and says so as an error.
            return "False", SCHEDULER_ERROR, render(refused)
    if len(members) - len(waiting) >= child_minimum(group):
        return "True", SCHEDULED, ""
    why = next((pending[p.key] for p in waiting if p.key in pending), None)
    return None if why is None else ("False", UNSCHEDULABLE, why)


def group_status(group: WorkloadPodGroup, members: list[Pod], bound_now: Mapping[str, str],
                 pending: Mapping[str, str], now: float, snapshot: Snapshot) -> GroupStatus | None:
    """The group's conditions after this cycle when ``PodGroupInitiallyScheduled`` changes; else None.
    Once True the condition is terminal (kube-scheduler never turns it back, whatever happens to the
    pods later); ``lastTransitionTime`` moves only when its status does."""
    current = group.condition(INITIALLY_SCHEDULED)
    if initially_scheduled(group):
        return None
    found = scheduled_condition(group, members, bound_now, pending, snapshot)
    if found is None:
        return None
    status, reason, message = found
    if (reason == SCHEDULER_ERROR and current is not None and current.reason == SCHEDULER_ERROR
            and len(schedulers(snapshot).get(group.key, ())) > 1):
        # Pods of two schedulers: kube-scheduler says the same in its own words, and rewording each
        # other's message would make the two write the group in turn for as long as it lasts.
        return None
    since = current.last_transition_time if current is not None and current.status == status else None
    new = GroupCondition(type=INITIALLY_SCHEDULED, status=status, reason=reason, message=_clipped(message),
                         last_transition_time=now if since is None else since,
                         observed_generation=group.generation)
    if new == current:
        return None
    if current is None:
        return GroupStatus((*group.conditions, new))
    return GroupStatus(tuple(new if c.type == INITIALLY_SCHEDULED else c for c in group.conditions))


# koordpy's condition on a PodGroup whose gang runs below its minimum (``koordpy.core.stale``): its
# lastTransitionTime is since when, read back after a restart; removed once the gang is whole again.
STALE = "GangStale"
STALE_REASON = "BelowMinimum"
STALE_MESSAGE = ("fewer members run than the group's minimum; koordpy evicts the rest once its grace ends "
                 "(koordpy.io/staleness-grace-period), unless replacements bind first")


def stale_status(group: WorkloadPodGroup, since: float | None) -> GroupStatus | None:
    """The group's conditions with ``GangStale`` True since ``since`` (None: without it), or None
    when they say so already. The other conditions are written back as they are."""
    current = group.condition(STALE)
    others = tuple(c for c in group.conditions if c.type != STALE)
    if since is None:
        return None if current is None else GroupStatus(others)
    new = GroupCondition(type=STALE, status="True", reason=STALE_REASON, message=STALE_MESSAGE,
                         last_transition_time=float(int(since)), observed_generation=group.generation)
    if current == new:
        return None
    if current is None:
        return GroupStatus((*group.conditions, new))
    return GroupStatus(tuple(new if c.type == STALE else c for c in group.conditions))


def group_facts(group: WorkloadPodGroup, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """What ``koordpy explain`` says of the group: its policy, topology key, preferred label, priority
    and ``PodGroupInitiallyScheduled`` condition, each as kube-scheduler (or koordpy) reads it."""
    policy = f"gang, minCount {group.min_count}" if group.policy == "gang" else "basic (no quorum)"
    value = priority_of(group.priority_class_name, group.priority, snapshot)
    named = f" (PriorityClass {group.priority_class_name})" if group.priority_class_name else ""
    facts = [("policy", policy), ("topology key", ", ".join(group.topology_keys) or "-"),
             ("preferred label", f"{group.preferred_label} ({ANN_PREFERRED})" if group.preferred_label else "-"),
             ("priority", f"{value}{named}")]
    current = group.condition(INITIALLY_SCHEDULED)
    if current is None:
        facts.append((INITIALLY_SCHEDULED, "not set"))
    else:
        said = f": {current.message}" if current.message else ""
        facts.append((INITIALLY_SCHEDULED, f"{current.status}, {current.reason}{said}"))
    return tuple(facts)


# How many children ``koordpy explain`` lists in a CompositePodGroup's facts before "and N more".
SHOWN_CHILDREN = 8


def composite_facts(composite: CompositePodGroup, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
    """What ``koordpy explain`` says of a CompositePodGroup: its policy, topology key, priority and
    each child PodGroup with its pods (bound of live) against its own minimum."""
    policy = (f"gang, minGroupCount {composite.min_group_count}" if composite.policy == "gang"
              else "basic (one child PodGroup at a time)")
    value = priority_of(composite.priority_class_name, composite.priority, snapshot)
    named = f" (PriorityClass {composite.priority_class_name})" if composite.priority_class_name else ""
    kids = children(composite.key, snapshot)
    counts = {g.key: [0, 0] for g in kids}  # child -> [live pods, bound]
    for p in snapshot.pods:
        found = counts.get(group_key(p) or "") if not p.terminal else None
        if found is not None:
            found[0] += 1
            found[1] += bool(p.node_name)
    said = [f"{g.name} {counts[g.key][1]}/{counts[g.key][0]} bound "
            f"({'minCount ' + str(g.min_count) if g.policy == 'gang' else 'basic'})" for g in kids[:SHOWN_CHILDREN]]
    if len(kids) > SHOWN_CHILDREN:
        said.append(f"and {len(kids) - SHOWN_CHILDREN} more")
    return (("policy", policy), ("topology key", ", ".join(composite.topology_keys) or "-"),
            ("priority", f"{value}{named}"), ("child PodGroups", ", ".join(said) or "none yet"))


class Upstream(GangsBase, RuntimesBase, StatusesBase, StalenessBase, AdmissionBase, ExplainsBase, TopologiesBase):
    """Events about its gangs go to their first pod (no Event kind is named for the group). It has
    no ``Manifests``: Kubernetes' own PodGroup API defines no topology object, nodes' labels are it."""

    name = NAME
    roles: tuple[Role, ...] = ("workload-podgroup",)
    refused_fields: Mapping[str, str] = {"spec.schedulingGroup": SCHEDULING_GROUP}

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        return group_key(pod)

    def enclosing(self, key: str, snapshot: Snapshot) -> str | None:
        group = groups(snapshot).get(key)
        return parent_key(group) if group is not None else None

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        own = [k for k, g in groups(snapshot).items() if makes_gang(g) and not g.asks and not g.parent]
        return [*own, *(k for k, c in composites(snapshot).items() if not c.asks)]

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        return key in groups(snapshot) or key in composites(snapshot)

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        composite = composites(snapshot).get(key)
        if composite is not None:
            return None if composite.asks else composite_gang(composite, pods, snapshot)
        group = groups(snapshot).get(key)
        # A missing group, or one with asks koordpy refuses, leaves its pods to the refusal; a child's
        # pods are its parent's.
        if group is None or not makes_gang(group) or group.asks or group.parent:
            return None
        return group_gang(group, pods, snapshot)

    def gang_object(self, key: str, snapshot: Snapshot) -> tuple[str, Mapping[str, str]] | None:
        composite = composites(snapshot).get(key)
        if composite is not None:
            return f"CompositePodGroup {key}", composite.annotations
        group = groups(snapshot).get(key)
        return None if group is None else (f"PodGroup {key}", group.annotations)

    def sets_min_runtime(self, snapshot: Snapshot) -> bool:
        return annotates_min_runtime(composites(snapshot).values()) or annotates_min_runtime(groups(snapshot).values())

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        if key in composites(snapshot):
            return COMPOSITE_DECLARED_BY
        return DECLARED_BY if key in groups(snapshot) else None

    def object_facts(self, key: str, snapshot: Snapshot) -> tuple[tuple[str, str], ...]:
        composite = composites(snapshot).get(key)
        if composite is not None:
            return composite_facts(composite, snapshot)
        group = groups(snapshot).get(key)
        return () if group is None else group_facts(group, snapshot)

    def group_terms(self, key: str, minimum: int | None, snapshot: Snapshot) -> GroupTerms | None:
        composite = composites(snapshot).get(key)
        if composite is not None:
            kids = children(key, snapshot)
            need = group_count(composite)
            pods = minimum if minimum is not None else max(1, sum(sorted(child_minimum(g) for g in kids)[:need]))
            if composite.policy == "gang":
                return GroupTerms("minGroupCount", f"minGroupCount {need} of its {len(kids)} child PodGroups "
                                  f"(at least {pods} pods)", pods)
            return GroupTerms("", f"basic: 1 of its {len(kids)} child PodGroups (at least {pods} pods)", pods)
        group = groups(snapshot).get(key)
        if group is None:
            return None
        held = minimum if minimum is not None else child_minimum(group)
        if group.policy == "gang" and group.min_count is not None:
            return GroupTerms("minCount", f"minCount {group.min_count}", held)
        return GroupTerms("", "basic (minimum 1)", held)

    def claim_groups(self, snapshot: Snapshot) -> Mapping[str, ClaimGroup]:
        # Only groups with claims: a member of one without binds every claim to itself (BindTo).
        before, made = _CLAIM_GROUPS[0], {}
        for k, g in groups(snapshot).items():
            if not g.claims:
                continue
            statuses = tuple(sorted(g.claim_statuses.items()))
            old = before.get(k)
            made[k] = old if old is not None and (old.uid, old.claims, old.statuses) == (g.uid, g.claims, statuses) \
                else ClaimGroup(g.uid, g.claims, statuses)
        _CLAIM_GROUPS[0] = made
        return made

    def refusal(self, pod: Pod, snapshot: Snapshot) -> Reason | None:
        # Asked of every member of every gang: a pod that names no group is answered here.
        return refusal(pod, snapshot) if pod.scheduling_group else None

    def said(self, kind: Kind, obj: Any) -> Mapping[str, object] | None:
        return obj.status.written() if isinstance(obj, WorkloadPodGroup) else None

    def stale_object(self, key: str, snapshot: Snapshot) -> tuple[Kind, Mapping[str, str]] | None:
        # A CompositePodGroup has no status koordpy writes: its stale-since is an annotation. (A
        # PodGroup's is its GangStale condition, below; its grace is read from its annotations.)
        composite = composites(snapshot).get(key)
        if composite is not None:
            return COMPOSITE_KIND, composite.annotations
        group = groups(snapshot).get(key)
        return None if group is None else (PODGROUP_KIND, group.annotations)

    def stale_since(self, key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
        group = None if key in composites(snapshot) else groups(snapshot).get(key)
        if group is None:
            return super().stale_since(key, members, snapshot)
        found = group.condition(STALE)
        return found.last_transition_time if found is not None and found.status == "True" else None

    def stale_marks(self, key: str, members: Sequence[Pod], since: float | None, snapshot: Snapshot,
                    decided: Mapping[str, GangStatus]) -> Sequence[Decision]:
        group = None if key in composites(snapshot) else groups(snapshot).get(key)
        if group is None:
            return super().stale_marks(key, members, since, snapshot, decided)
        before = decided.get(key)
        if before is not None:  # PodGroupInitiallyScheduled changed this cycle: on top of that list
            group = before.applied(group)
        return () if (status := stale_status(group, since)) is None else (GangStatusUpdate(key, status),)

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        if key not in composites(snapshot):
            group = groups(snapshot).get(key)
            found = None if group is None else group_status(group, members, bound_now, pending, now, snapshot)
            return () if found is None else ((key, found),)
        # kube-scheduler v1.37 writes each child's PodGroupInitiallyScheduled (a child is scheduled
        # once its own minimum is, which only happens with its parent's), nothing on the composite.
        out = []
        for child in children(key, snapshot):
            mine = [p for p in members if group_key(p) == child.key]
            found = group_status(child, mine, bound_now, pending, now, snapshot)
            if found is not None:
                out.append((child.key, found))
        return out

    def shown_groups(self, snapshot: Snapshot) -> Iterable[tuple[str, str, dict[str, Any], GroupRow]]:
        # The status the scheduler wrote (PodGroupInitiallyScheduled), on the groups it wrote one on.
        for k, g in groups(snapshot).items():
            if g.conditions:
                wired = [c.wire() for c in g.conditions]
                said = ", ".join(f"{w['type']}={w['status']} ({w['reason']})" for w in wired)
                shown = g.status.written()
                yield k, "PODGROUP (scheduling.k8s.io)", shown, GroupRow((("CONDITIONS", 0),), (said,))

    def names_objects(self, pod: Pod) -> bool:
        # The group may appear or change, which is no change of the pod.
        return bool(pod.scheduling_group)

    def tree_keys(self, snapshot: Snapshot) -> Iterator[TreeKey]:
        asks = (topology_ask(g) for g in groups(snapshot).values() if not g.parent)
        keys = {a.tree_key(snapshot) for a in asks if a is not None}
        for key, composite in composites(snapshot).items():
            keys.add(levels_key(composite_levels(composite, children(key, snapshot), snapshot.nodes)))
        yield from sorted(keys, key=lambda k: k.text)

    def shown_trees(self, trees: TreeSource) -> Iterable[ShownTree]:
        # The node-label trees its PodGroups use: their topology key, with koordpy's preferred label
        # below it when they name one, and the groups that use each.
        snapshot = trees.snapshot
        users: dict[str, tuple[TreeKey, list[str]]] = {}
        for key, group in sorted(groups(snapshot).items()):
            ask = topology_ask(group) if not group.parent else None  # a child uses its composite's tree
            if ask is not None:
                found = ask.tree_key(snapshot)
                users.setdefault(found.text, (found, []))[1].append(f"PodGroup {key}")
        for key, composite in sorted(composites(snapshot).items()):
            found = levels_key(composite_levels(composite, children(key, snapshot), snapshot.nodes))
            users.setdefault(found.text, (found, []))[1].append(f"CompositePodGroup {key}")
        return [ShownTree(found, f"node labels, for {', '.join(names)} (scheduling.k8s.io)")
                for _, (found, names) in sorted(users.items())]

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        if key.dialect != NAME:
            return None
        if key.name.startswith(COMPOSITE_TREE):
            name = key.name.removeprefix(COMPOSITE_TREE)
            return composite_tree(tuple(name.split(",")) if name else (), trees.nodes)
        if key.name.startswith(PREFERRED_PREFIX):
            required, preferred = json.loads(key.name[len(PREFERRED_PREFIX):])
            return preferred_tree(str(required), str(preferred), trees.nodes)
        return label_tree(key.name, trees.nodes)


DIALECT = Upstream()
