"""Koordinator's dialect: scheduler-plugins PodGroups and gang annotations, the
ClusterNetworkTopology tree and its ``detailStatus``, and a gang's gather spec turned into a
``Requirement``; a PodGroup's status.

Belongs here: everything that knows Koordinator's PodGroup, gang annotations, layer names, label
keys and messages about them. A gang no object declares is an annotation gang, built here too.
Does not belong here: the gang rule (``koordpy.core.gang``), choosing domains
(``koordpy.core.placement``), topology keys of other dialects written on a PodGroup (read by the
registry, ``koordpy.core.dialects``).
"""

from __future__ import annotations

import re
from collections.abc import Container, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from koordpy.api.errors import ParseError
from koordpy.api.kinds import Kind, Role, by_id
from koordpy.api.objects import Node, Pod
from koordpy.api.owners import Owner
from koordpy.api.podgroup import (
    GANG_DECLARATION,
    GangConfig,
    PodGroup,
    PodGroupStatus,
    check_pod_annotations,
    gang_config_from_pod,
    gang_config_from_podgroup,
)
from koordpy.api.topology import CLUSTER_LAYER, NODE_LAYER, ClusterNetworkTopology, GatherRule, NetworkTopologySpec
from koordpy.core.decisions import GangStatus, ObjectStatus
from koordpy.core.dialects.base import (
    AdmissionBase,
    Declaration,
    ExplainsBase,
    GangsBase,
    GroupRow,
    GroupTerms,
    ManifestsBase,
    Objects,
    RuntimesBase,
    StalenessBase,
    StatusesBase,
    TopologiesBase,
    annotates_min_runtime,
    final_stands,
    phase_row,
)
from koordpy.core.members import topology_indexes
from koordpy.core.model import Asked, Gang, TopologyFacts, TreeSource, creation_time, earliest
from koordpy.core.naming import natural_key
from koordpy.core.requirement import Requirement
from koordpy.core.snapshot import Snapshot
from koordpy.core.topology_manifests import Generated, missing_warnings, short_names
from koordpy.core.tree import ROOT, DomainId, ShownTree, TopologyTree, TreeKey
from koordpy.core.verdicts import Reason

NAME = "koordinator"
# The ClusterNetworkTopology's tree (the cluster and its nodes when there is none). Koordinator's
# messages name its domains by layer and label.
TREE = TreeKey(NAME, text="cnt", labelled=True)

_TREE_CACHE: dict[object, TopologyTree] = {}
_TREE_CACHE_SIZE = 4


def tree_from_cluster_network_topology(cnt: ClusterNetworkTopology | None, nodes: Iterable[Node]) -> TopologyTree:
    """The tree for these nodes under ``cnt``; the same node names, labels and CNT give the same
    (cached, never mutated) tree, so a cycle pays for the build only when the topology changed."""
    node_list = list(nodes)
    label_layers = [layer for layer in cnt.layers if layer.label_keys] if cnt else []
    node_layer = next((layer.layer for layer in cnt.layers if not layer.label_keys), NODE_LAYER) if cnt else NODE_LAYER
    paths: dict[str, tuple[str, ...]] = {}
    for n in node_list:
        path: list[str] = []
        for layer in label_layers:
            value = next((n.labels[k] for k in layer.label_keys if n.labels.get(k)), None)
            if value is None:
                break
            path.append(value)
        paths[n.name] = tuple(path)
    names = [n.name for n in node_list]
    layer_names = tuple(layer.layer for layer in label_layers)
    key = (layer_names, node_layer, tuple((name, paths[name]) for name in names))
    tree = _TREE_CACHE.get(key)
    if tree is None:
        tree = TopologyTree.build(layer_names, names, paths, node_layer=node_layer)
        if len(_TREE_CACHE) >= _TREE_CACHE_SIZE:
            _TREE_CACHE.pop(next(iter(_TREE_CACHE)))
        _TREE_CACHE[key] = tree
    return tree


def detail_status(tree: TopologyTree) -> list[dict[str, Any]]:
    """ClusterNetworkTopology ``status.detailStatus``: one entry per inner domain, top-down.

    Entries and child names follow the order in which each domain's first node appears
    in natural node order, which is how Koordinator lists them (a block whose first node is
    node-0 comes first even when its name sorts later).
    """
    g = tree.graph
    first: dict[DomainId, tuple[Any, ...]] = {}
    for d in reversed(tree.order):
        if d[:1] == ("\0node",):
            first[d] = natural_key(d[1])
        else:
            first[d] = min((first[c] for c in g.successors(d)), default=())

    def inner_kids(d: DomainId) -> list[DomainId]:
        return sorted((c for c in g.successors(d) if c[:1] != ("\0node",)), key=lambda c: first[c])

    def node_count(d: DomainId) -> int:
        return int(np.count_nonzero(tree.domain_node[tree.index[d] : tree.end[tree.index[d]]] >= 0))

    def info(d: DomainId) -> dict[str, str]:
        return {"topologyLayer": g.nodes[d]["layer"], "topologyName": g.nodes[d]["name"]}

    out: list[dict[str, Any]] = []
    stack: list[DomainId] = [ROOT]
    while stack:
        d = stack.pop()
        kids = inner_kids(d)
        depth = g.nodes[d]["depth"]
        entry: dict[str, Any] = {
            "childTopologyLayer": tree.layers[depth] if depth < len(tree.layers) else tree.node_layer,
        }
        if kids:
            entry["childTopologyNames"] = [g.nodes[c]["name"] for c in kids]
        entry["nodeNum"] = node_count(d)
        if d != ROOT:
            entry["parentTopologyInfo"] = info(next(iter(g.predecessors(d))))
        entry["topologyInfo"] = info(d)
        out.append(entry)
        stack.extend(reversed(kids))
    return out


def ignored_layers(spec: NetworkTopologySpec, tree: TopologyTree) -> list[str]:
    """Notes for PreferGather rules on layers the topology does not define: they are ignored."""
    return [f'layer "{rule.layer}" is not in the ClusterNetworkTopology; ignored{did_you_mean(rule.layer, tree)}'
            for rule in spec.gather if rule.strategy == "PreferGather" and tree.layer_depth(rule.layer) is None]


def did_you_mean(layer: str, tree: TopologyTree) -> str:
    """Layer names are case-sensitive, as in Koordinator; a near miss in case gets a hint."""
    close = [known for known in tree.known_layers if known.lower() == layer.lower()]
    return f'; did you mean "{close[0]}"?' if close else ""


def requirement(spec: NetworkTopologySpec, tree: TopologyTree, layer_labels: Mapping[str, tuple[str, ...]],
                topology_error: str | None, node_count: int) -> Requirement:
    """The gather spec over the ClusterNetworkTopology tree: MustGather sets the scope (the
    deepest MustGather layer), podCountMultiple the multiples per layer; a PreferGather rule on
    an unknown layer is dropped with a note, a MustGather one makes the job unplaceable."""
    root_rank = len(tree.layers) + 1
    must_depth = 0
    multiples: list[tuple[int, int]] = []
    for rule in spec.gather:
        depth = tree.layer_depth(rule.layer)
        if depth is None:
            if rule.strategy == "PreferGather":
                continue
            invalid = (f" (ClusterNetworkTopology default is invalid and ignored: {topology_error})"
                       if topology_error else "")
            return Requirement(TREE, "gather", failure=(
                f"unknown topology layer {rule.layer!r} in network-topology-spec; known layers: "
                f"{', '.join(tree.known_layers)}{did_you_mean(rule.layer, tree)}{invalid}"))
        if rule.strategy == "MustGather":
            must_depth = max(must_depth, depth)
        if rule.pod_count_multiple > 1:
            multiples.append((root_rank - depth, rule.pod_count_multiple))
    listed = tree.domains_at(must_depth if must_depth > 0 else min(1, int(tree.depth.max())))
    failure = None
    if must_depth > 0 and not listed:
        layer = tree.known_layers[must_depth]
        keys = layer_labels.get(layer, ())
        failure = (f"0/{node_count} nodes are available: MustGather on {layer}, "
                   f"but no node carries its label{' ' + ', '.join(keys) if keys else ''}.")
    if must_depth == 0 and len(tree.layers) == 0:
        listed = [0]
    return Requirement(TREE, "gather", scope=root_rank - must_depth, multiples=tuple(multiples),
                       notes=tuple(ignored_layers(spec, tree)), failure=failure, listed=tuple(listed),
                       labels=tuple((root_rank - i, layer) for i, layer in enumerate(tree.known_layers)))


# -- gangs ---------------------------------------------------------------------------------------

NOT_FOUND = ("PodGroup {key} not found; its pods wait until it is created "
             "(or declare gang.scheduling.koordinator.sh/min-available on them)")
ANNOTATION_GANG = "gang annotations"  # what declares a gang no object declares, as explain says it


@dataclass(frozen=True)
class GatherAsk:
    """A gang's ``network-topology-spec`` (from its PodGroup or pod annotations)."""

    spec: NetworkTopologySpec
    keeps_gang = False  # a satisfied gang's later members schedule as ordinary pods

    def requirement(self, gang: Gang, pods: list[Pod], trees: TreeSource, snapshot: Snapshot) -> Asked:
        req = requirement(self.spec, trees[TREE], layer_labels(trees.snapshot.topology), trees.snapshot.topology_error,
                          len(trees.nodes))
        return Asked(req, "network topology: the job's running members span {where}, wider than its MustGather "
                          "layer", whole_job=True, peers=True)

    def tree_key(self, snapshot: Snapshot) -> TreeKey:
        return TREE

    def facts(self) -> TopologyFacts:
        rules = self.spec.gather
        return TopologyFacts(NAME, tuple(_rule(r) for r in rules if r.strategy == "MustGather"),
                             tuple(_rule(r) for r in rules if r.strategy == "PreferGather"))


def layer_labels(cnt: ClusterNetworkTopology | None) -> dict[str, tuple[str, ...]]:
    """Each layer's label keys, for messages about a layer no node carries."""
    return {layer.layer: layer.label_keys for layer in cnt.layers} if cnt else {}


def _rule(rule: GatherRule) -> str:
    multiple = f" (podCountMultiple {rule.pod_count_multiple})" if rule.pod_count_multiple > 1 else ""
    return f"{rule.strategy} {rule.layer}{multiple}"


def _gathering(gang: Gang) -> Gang:
    """The gang with its config's gather spec as its first ask."""
    if gang.config is not None and gang.config.topology is not None:
        gang.asks = (GatherAsk(gang.config.topology), *gang.asks)
    return gang


def build(key: str, podgroup: PodGroup | None, pods: list[Pod]) -> Gang | None:
    """The gang of a scheduler-plugins PodGroup (``podgroup``) or of gang annotations: config from the
    PodGroup, overridden by the earliest pod's annotations; None when nothing declares it."""
    if podgroup is None and not pods:
        return None
    cfg: GangConfig | None = None
    err = None
    if podgroup is not None:
        creation = creation_time(podgroup.creation)
        try:
            cfg = gang_config_from_podgroup(podgroup)
        except ParseError as exc:
            err = str(exc)
    else:  # an annotation gang is as old as its first pod
        creation = min(creation_time(p.creation) for p in pods)
    gang = Gang(key, cfg, pods, creation, err)
    if err or not pods:
        return _gathering(gang)
    # Annotation values on the pods override the PodGroup; the earliest pod speaks for the gang.
    first = earliest(pods)
    try:
        cfg = gang_config_from_pod(f"Pod {first.key}", first.namespace, first.annotations, podgroup)
    except ParseError as exc:
        gang.error = str(exc)
        return _gathering(gang)
    if cfg is None:
        gang.error = NOT_FOUND.format(key=key)
    gang.config = cfg
    return _gathering(gang)


# -- status --------------------------------------------------------------------------------------

PODGROUP_KIND: Kind = by_id("podgroups.scheduling.sigs.k8s.io")
TOPOLOGY_KIND: Kind = by_id("clusternetworktopologies.scheduling.koordinator.sh")


@dataclass(frozen=True)
class PodGroupGangStatus:
    """A scheduler-plugins PodGroup's ``status`` as the gang stands after a cycle."""

    phase: str
    scheduled: int
    running: int
    succeeded: int
    failed: int
    schedule_start_time: float | None
    kind: Kind = PODGROUP_KIND

    def _status(self) -> PodGroupStatus:
        return PodGroupStatus(phase=self.phase, scheduled=self.scheduled, running=self.running,
                              succeeded=self.succeeded, failed=self.failed,
                              schedule_start_time=self.schedule_start_time)

    def wire(self) -> dict[str, object]:
        # As the object reads back once written (``PodGroupStatus.written``): the start time in whole
        # seconds, so that the shells compare and write the value as it is.
        return self._status().written()

    def applied(self, obj: Any) -> Any:
        assert isinstance(obj, PodGroup)
        return obj.model_copy(update={"status": self._status()})


# The phases that say the job is over: they stand while none of its pods is live (its finished pods
# deleted with their Job, say), as scheduler-plugins' PodGroup controller stops at them.
FINAL_PHASES = ("Finished", "Failed")


def podgroup_status(pg: PodGroup, members: list[Pod], bound_now: dict[str, str],
                    reserved: dict[str, str], now: float) -> PodGroupGangStatus:
    """PodGroup ``status`` as the gang stands after this cycle (``members``: its finished pods too)."""
    # One pass over the members (a gang may have thousands), each asked its key once.
    scheduled = waiting = 0
    phases: dict[str, int] = {}
    for p in members:
        key = p.key
        if p.node_name or key in bound_now:
            scheduled += 1
        if key in reserved:
            waiting += 1
        phases[p.phase] = phases.get(p.phase, 0) + 1
    running, succeeded, failed = (phases.get(phase, 0) for phase in ("Running", "Succeeded", "Failed"))
    live = len(members) - succeeded - failed  # not terminal (``Pod.terminal``)
    if succeeded >= pg.min_member:
        phase = "Finished"
    elif failed and succeeded + running < pg.min_member:
        phase = "Failed"
    elif running + succeeded >= pg.min_member:  # the members that finished ran
        phase = "Running"
    elif scheduled >= pg.min_member:
        phase = "Scheduled"
    elif scheduled or waiting:
        phase = "Scheduling"
    elif live >= pg.min_member:
        phase = "PreScheduling"
    else:
        phase = "Pending"
    start = pg.status.schedule_start_time
    if start is None and phase not in ("Pending", "PreScheduling"):
        start = now
    return PodGroupGangStatus(phase, scheduled, running, succeeded, failed, start)


# -- manifests ----------------------------------------------------------------------------------


def _camel(text: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in re.split(r"[^A-Za-z0-9]+", text) if part)


def cluster_network_topology(nodes: Sequence[Node], keys: Sequence[str]) -> Generated:
    """The ClusterNetworkTopology ``default`` whose layers read the label ``keys``, top layer first."""
    layers = [_camel(s) + "Layer" for s in short_names(keys)]
    spec: list[dict[str, Any]] = []
    parent = CLUSTER_LAYER
    for layer, key in zip(layers, keys, strict=True):
        spec.append({"topologyLayer": layer, "parentTopologyLayer": parent, "labelKey": [key]})
        parent = layer
    spec.append({"topologyLayer": NODE_LAYER, "parentTopologyLayer": parent})
    doc = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
           "metadata": {"name": "default"}, "spec": {"networkTopologySpec": spec}}
    warnings = missing_warnings(nodes, keys, lambda _: "such a node hangs from the domain above that layer")
    return Generated([doc], warnings)


# -- the dialect ---------------------------------------------------------------------------------


class Koordinator(GangsBase, RuntimesBase, StatusesBase, StalenessBase, AdmissionBase, ExplainsBase, TopologiesBase,
                  ManifestsBase):
    name = NAME
    roles: tuple[Role, ...] = ("podgroup", "cnt")
    reports_timeout = True
    # A pending pod's gang annotations (over its PodGroup) and network-topology index are checked
    # before the core sees it: ``koordpy simulate`` refuses them, the live scheduler reports them.
    checks_declarations = True
    sources: Mapping[str, str] = {"koordinator": "ClusterNetworkTopology"}
    # ``koordpy simulate`` always reports the ClusterNetworkTopology's detailStatus, empty without one.
    shown_empty: Mapping[str, Any] = {"topology": {"detailStatus": []}}
    manifest_format = "cnt"

    def manifests(self, nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
        return cluster_network_topology(nodes, keys)  # koordpy reads the one named "default"

    def warm_up(self) -> Sequence[dict[str, Any]]:
        group = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": "w", "namespace": "default", "annotations": {
                     "gang.scheduling.koordinator.sh/network-topology-spec":
                         '{"gatherStrategy": [{"layer": "ClusterTopologyLayer", "strategy": "PreferGather"}]}'}},
                 "spec": {"minMember": 2}}
        pods = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"warm-up-{i}", "namespace": "default", "labels": {"pod-group.scheduling.sigs.k8s.io": "w"}},
            "spec": {"schedulerName": "koordpy", "containers": [{"name": "c", "image": "x"}]}} for i in range(2)]
        return (group, *pods)

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        return pod.gang_name

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        return snapshot.podgroups

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        return key in snapshot.podgroups

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        return build(key, snapshot.podgroups.get(key), pods)

    def gang_object(self, key: str, snapshot: Snapshot) -> tuple[str, Mapping[str, str]] | None:
        pg = snapshot.podgroups.get(key)
        return None if pg is None else (f"PodGroup {key}", pg.annotations)

    def sets_min_runtime(self, snapshot: Snapshot) -> bool:
        return annotates_min_runtime(snapshot.podgroups.values())

    def written_asks(self, gang: Gang, snapshot: Snapshot) -> tuple[Mapping[str, str], Mapping[str, str]] | None:
        podgroup = snapshot.podgroups.get(gang.key)
        if podgroup is None or gang.error or not gang.pods:
            return None
        return podgroup.annotations, {}

    def refusal(self, pod: Pod, snapshot: Snapshot) -> Reason | None:
        return None

    def declaration(self, pod: Pod, objects: Objects, invalid: Container[str]) -> Declaration | None:
        gang = pod.gang_name
        if gang is None:
            return _NO_GANG  # its network-topology index is still checked
        return gang, objects["podgroups"].get(gang), gang in invalid

    def declared_words(self, pod: Pod) -> Hashable:
        # Its namespace and gang annotations: what ``gang_config_from_pod`` reads beside the PodGroup.
        declared = [(k, v) for k, v in pod.annotations.items() if k in GANG_DECLARATION]
        return pod.namespace, tuple(sorted(declared) if len(declared) > 1 else declared)

    def declaration_error(self, pod: Pod, objects: Objects, invalid: Container[str], accepted: bool) -> str | None:
        try:
            if accepted:  # only the index is left (parsed once per text, ``topology_indexes``)
                topology_indexes((pod,))
            else:
                check_pod_annotations(pod, objects["podgroups"], invalid)
        except ParseError as exc:
            return str(exc)
        return None

    def group_terms(self, key: str, minimum: int | None, snapshot: Snapshot) -> GroupTerms | None:
        # Its gangs (of a PodGroup or of annotations) have a mode and a waiting time of their own.
        return None if minimum is None else GroupTerms("minMember", f"minMember {minimum}", minimum, modes=True)

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        # A PodGroup that failed to parse is one of any kind; explain has always called it this.
        if key in snapshot.podgroups or key in snapshot.invalid_podgroups:
            return "PodGroup scheduling.sigs.k8s.io"
        return None

    def object_kind(self, key: str, snapshot: Snapshot) -> str | None:
        return "PodGroup" if key in snapshot.podgroups else None

    def stale_object(self, key: str, snapshot: Snapshot) -> tuple[Kind, Mapping[str, str]] | None:
        pg = snapshot.podgroups.get(key)
        return None if pg is None else (PODGROUP_KIND, pg.annotations)

    def min_resources(self, key: str, snapshot: Snapshot) -> Mapping[str, int] | None:
        pg = snapshot.podgroups.get(key)
        return pg.min_resources if pg is not None else None

    def said(self, kind: Kind, obj: Any) -> Mapping[str, object] | None:
        return obj.status.written() if isinstance(obj, PodGroup) else None

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        pg = snapshot.podgroups.get(key)
        if pg is None:
            return ()
        if final_stands(pg.status.phase, FINAL_PHASES, members):
            return ()
        status = podgroup_status(pg, members, bound_now, reserved, now)
        current = pg.status.counts()
        wire = status.wire()
        return ((key, status),) if {k: wire[k] for k in current} != current else ()

    def shown_groups(self, snapshot: Snapshot) -> Iterable[tuple[str, str, dict[str, Any], GroupRow]]:
        for k, pg in snapshot.podgroups.items():
            shown: dict[str, Any] = {"phase": pg.status.phase, "scheduled": pg.status.scheduled,
                                     "minMember": pg.min_member}
            yield k, "PODGROUP", shown, phase_row(shown)

    def object_statuses(self, trees: TreeSource) -> Iterable[ObjectStatus]:
        # The ClusterNetworkTopology "default": its tree's domains, or why it is not used (then it
        # loses the detailStatus it had).
        snapshot = trees.snapshot
        if snapshot.topology_error:
            valid = {"type": "Valid", "status": "False", "reason": "InvalidSpec", "message": snapshot.topology_error}
            detail: list[dict[str, Any]] | None = None
        elif snapshot.topology is not None:
            valid = {"type": "Valid", "status": "True", "reason": "Reconciled", "message": ""}
            detail = detail_status(tree_from_cluster_network_topology(snapshot.topology, trees.nodes))
        else:
            return ()
        return (ObjectStatus(TOPOLOGY_KIND, TOPOLOGY_KIND.only, {"detailStatus": detail}, valid,
                             write="topology-status", section="topology", shown={"detailStatus": detail or []},
                             keyed=False),)

    def tree_keys(self, snapshot: Snapshot) -> Iterator[TreeKey]:
        yield TREE

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        return tree_from_cluster_network_topology(trees.snapshot.topology, trees.nodes) if key == TREE else None

    def default_tree(self, snapshot: Snapshot) -> TreeKey | None:
        return TREE if snapshot.topology is not None else None

    def shown_trees(self, trees: TreeSource) -> Iterable[ShownTree]:
        topology = trees.snapshot.topology
        return () if topology is None else (ShownTree(TREE, f"ClusterNetworkTopology {topology.name}",
                                                      loose_said=False),)


_NO_GANG: Declaration = (None, None, False)
DIALECT = Koordinator()
