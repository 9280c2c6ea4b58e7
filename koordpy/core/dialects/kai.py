"""KAI's dialect: its PodGroups (pods joined by ``pod-group-name``) and the implicit group of a
top-level owner's pods, one tree per Topology object (Kueue's or KAI's kind: KAI's constraints
name them, and koordpy reads no constraint of Kueue's own), and a job's required / preferred
levels (KAI's placement annotations or a PodGroup's ``topologyConstraint``) turned into a
``Requirement``. Kueue in front of koordpy: the pods it admitted (``Admitters``), whose
preemption and recovery are Kueue's (docs/design.md, "Behind Kueue").

A Topology lists node labels top level first; a node's domains are the values of those labels,
and a node missing one of them, ``kubernetes.io/hostname`` included, is outside that topology (it
hangs from the root and no requirement on the tree uses it), as Kueue only reads nodes that carry
every level's label. ``kubernetes.io/hostname`` may only be the lowest level: it names the node
itself, so it adds no inner domain, but a node without it is still outside. Constraint keys
are looked up on the pod, then its PodGroup, then its top-level owner; the first that sets a key
wins.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from koordpy.api.kinds import Kind, Role, by_id
from koordpy.api.kueue import (
    ANN_PREFERRED,
    ANN_REQUIRED,
    ANN_TOPOLOGY,
    ANN_WORKLOAD,
    KUEUE_GROUP,
    LABEL_PODSET,
    TAS_ANNOTATIONS,
    TOPOLOGY_GATE,
    KaiPodGroup,
    KaiQueue,
    Topology,
)
from koordpy.api.objects import Node, Pod
from koordpy.api.owners import Owner
from koordpy.api.podgroup import GangConfig
from koordpy.api.raw import subdomain_problem
from koordpy.core.dialects.base import (
    Admitted,
    ExplainsBase,
    GangsBase,
    ManifestsBase,
    RuntimesBase,
    StalenessBase,
    StatusesBase,
    TopologiesBase,
    annotates_min_runtime,
)
from koordpy.core.model import Asked, Gang, TopologyFacts, TreeSource, creation_time
from koordpy.core.owners import chain, top_owner
from koordpy.core.requirement import Requirement, Ties
from koordpy.core.runtime import Said, duration, pending_anchor, timestamp
from koordpy.core.snapshot import Snapshot
from koordpy.core.topology_manifests import Generated, Unusable, missing_warnings
from koordpy.core.tree import HOSTNAME as HOSTNAME
from koordpy.core.tree import ShownTree, TopologyTree, TreeKey, label_levels_tree

NAME = "kai"
KEYS = (ANN_TOPOLOGY, ANN_REQUIRED, ANN_PREFERRED)


def tree_key(name: str) -> TreeKey:
    """The tree of the Topology ``name``."""
    return TreeKey(NAME, name, f"topology/{name}")


def topology_tree(topology: Topology, nodes: Sequence[Node]) -> TopologyTree:
    return label_levels_tree(topology.levels, nodes, topology.name)


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
    # Equally tight domains: Kueue's BestFit keeps the first in the order of their level values (top
    # level first); KAI sorts its tree so the more packed ancestor comes first, the chain's order.
    ties: Ties = "values" if topo.group == KUEUE_GROUP else "chain"
    if pref_rank is None:
        return Requirement(key, "gather", scope=req_rank if req_rank is not None else height + 1, labels=labels,
                           ties=ties)
    return Requirement(key, "levels", hard=req_rank is not None, scope=req_rank, preferred=pref_rank, labels=labels,
                       ties=ties)


# -- asks and gangs ------------------------------------------------------------------------------

KAI_GROUP_ANN = "pod-group-name"
# KAI's annotations on a PodGroup that preemption reads (its scheduler writes the timestamps).
ANN_LAST_START = "kai.scheduler/last-start-timestamp"
ANN_LAST_EVICTION = "kai.scheduler/last-eviction-timestamp"
ANN_DELAY = "kai.scheduler/preemption-delay"


def queue_min_runtime(name: str, queues: Mapping[str, KaiQueue]) -> Said | None:
    """The minimum runtime of the queue ``name``: its own ``spec.preemptMinRuntime``, else its
    parent's, up to the top; None when none on the way sets one or the queue is missing."""
    seen: set[str] = set()
    while name and name not in seen:
        seen.add(name)
        queue = queues.get(name)
        if queue is None:
            return None
        if queue.preempt_min_runtime:
            return duration(queue.preempt_min_runtime, f"Queue {name} spec.preemptMinRuntime")
        name = queue.parent
    return None
# Owners whose pods are not one job: a DaemonSet's pods each belong to their node, a static
# pod's owner is its node.
NOT_JOBS = frozenset({"DaemonSet", "Node"})


@dataclass(frozen=True)
class KaiAsk:
    """KAI's constraint keys, each from the first place that sets it (pod, PodGroup, owner)."""

    keys: tuple[tuple[str, str], ...]
    keeps_gang = True

    def requirement(self, gang: Gang, pods: list[Pod], trees: TreeSource, snapshot: Snapshot) -> Asked | None:
        req = requirement(dict(self.keys), snapshot.topologies, snapshot.invalid_topologies)
        if req is None:
            return None
        return Asked(req, "topology: the job's running members span {where}, wider than its required level",
                     peers=True)

    def tree_key(self, snapshot: Snapshot) -> TreeKey | None:
        name = dict(self.keys).get(ANN_TOPOLOGY)
        return tree_key(name) if name and name in snapshot.topologies else None

    def facts(self) -> TopologyFacts:
        kai = dict(self.keys)
        topo = kai.get(ANN_TOPOLOGY, "")
        req = kai.get(ANN_REQUIRED)
        pref = kai.get(ANN_PREFERRED)
        return TopologyFacts(NAME, (f"{req} of Topology {topo}",) if req else (),
                             (f"{pref} of Topology {topo}",) if pref else ())


def ask(keys: Mapping[str, str]) -> KaiAsk:
    return KaiAsk(tuple(sorted(keys.items())))


def _default_config(key: str, min_member: int) -> GangConfig:
    return GangConfig(key=key, min_member=max(1, min_member), total_number=max(1, min_member), from_crd=True)


def owner_chain_key(pod: Pod, owners: dict[str, Owner]) -> str | None:
    """``namespace/Kind/name`` of the pod's top-level controller when the pod or that owner asks for
    a KAI topology, else None. Only then do an owner's pods form a group: plain Deployments,
    StatefulSets and Jobs keep scheduling pod by pod, as they always did."""
    ref, owner = chain(pod, owners)
    if ref is None or ref.kind in NOT_JOBS:
        return None
    asks = any(pod.annotations.get(k) for k in KEYS) or (
        owner is not None and any(owner.annotations.get(k) for k in KEYS))
    return f"{pod.namespace}/{ref.kind}/{ref.name}" if asks else None


def _is_daemon(pod: Pod, owners: dict[str, Owner]) -> bool:
    ref, _ = chain(pod, owners)
    return ref is not None and ref.kind in NOT_JOBS


def podgroup_gang(pg: KaiPodGroup, pods: list[Pod]) -> Gang:
    return Gang(pg.key, _default_config(pg.key, pg.min_member), pods, creation_time(pg.creation))


def owner_gang(key: str, pods: list[Pod], snapshot: Snapshot) -> Gang:
    first = min(pods, key=lambda p: (creation_time(p.creation), p.name))
    owner = top_owner(first, snapshot.owners)
    replicas = owner.replicas if owner is not None and owner.replicas else None
    if owner is not None and owner.kind == "StatefulSet":
        replicas = 1  # its controller may create one pod after another runs: waiting for all could be forever
    # The owner's parallelism or replicas when it says; else all the pods it has now.
    gang = Gang(key, _default_config(key, replicas or len(pods)), pods,
                creation_time(owner.creation if owner is not None else first.creation))
    kai = layered(first.annotations, owner.annotations if owner is not None else {})
    if kai:
        gang.asks = (ask(kai),)
    return gang


def _implicit(key: str) -> bool:
    """``namespace/Kind/name``: the implicit group of one owner's pods (or of a lone pod). Exactly that
    shape: other dialects' keys of more parts (a JobSet's restart attempt) are theirs."""
    return key.count("/") == 2


# -- manifests ----------------------------------------------------------------------------------


def topology_manifest(nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
    """A Kueue Topology ``name`` with the label ``keys`` as its levels, top level first, and the
    hostname level below them (KAI's constraints name such Topologies)."""
    problem = subdomain_problem(name)
    if problem:
        raise Unusable("name", problem)
    if HOSTNAME in keys[:-1]:
        raise Unusable("levels", f"{HOSTNAME} names single nodes, so it may only be the last (lowest) level")
    levels = [*keys, *([] if keys[-1] == HOSTNAME else [HOSTNAME])]
    doc = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": name},
           "spec": {"levels": [{"nodeLabel": k} for k in levels]}}
    # The hostname level too: a node without that label is outside the Topology like any other.
    warnings = missing_warnings(nodes, levels, lambda _: "such a node is outside this topology")
    return Generated([doc], warnings)


# -- the dialect ---------------------------------------------------------------------------------

PODGROUP_KIND: Kind = by_id("podgroups.scheduling.run.ai")
# KAI's own keys for a stale gang, so that KAI's tools and koordpy read one clock: since when it is
# stale (on the PodGroup, RFC 3339), and the job's grace (on the pods or their owner, a Go duration;
# KAI's podgrouper copies it to spec.stalenessGracePeriod).
STALE_SINCE = "kai.scheduler/stale-podgroup-timestamp"
GRACE = "kai.scheduler/staleness-grace-period"

class Kai(GangsBase, RuntimesBase, StatusesBase, StalenessBase, ExplainsBase, TopologiesBase, ManifestsBase):
    """Events about a KAI gang go to its first pod (it names no object kind); its PodGroup's status is
    KAI's to write (it gives none); its PodGroup asks no minimum resources."""

    name = NAME
    roles: tuple[Role, ...] = ("kai-podgroup", "topology", "owner", "kai-queue")
    manifest_format = "topology"
    sources: Mapping[str, str] = {"kueue": "Kueue and KAI Topology"}

    def manifests(self, nodes: Sequence[Node], keys: Sequence[str], name: str) -> Generated:
        return topology_manifest(nodes, keys, name)

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        group = pod.annotations.get(KAI_GROUP_ANN)
        if group:
            return f"{pod.namespace}/{group}"
        if owners is None:
            return None
        key = owner_chain_key(pod, owners)
        if key is None and any(pod.annotations.get(k) for k in KEYS) and not _is_daemon(pod, owners):
            return f"{pod.namespace}/Pod/{pod.name}"  # a lone pod with a topology of its own
        return key

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        return snapshot.kai_podgroups

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        return key in snapshot.kai_podgroups or _implicit(key)

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        pg = snapshot.kai_podgroups.get(key)
        if pg is not None:
            return podgroup_gang(pg, pods)
        return owner_gang(key, pods, snapshot) if pods else None

    def gang_object(self, key: str, snapshot: Snapshot) -> tuple[str, Mapping[str, str]] | None:
        pg = snapshot.kai_podgroups.get(key)
        return None if pg is None else (f"PodGroup {key}", pg.annotations)

    def sets_min_runtime(self, snapshot: Snapshot) -> bool:
        return (any(q.preempt_min_runtime for q in snapshot.kai_queues.values())
                or annotates_min_runtime(snapshot.kai_podgroups.values()))

    def min_runtime(self, gang: Gang, snapshot: Snapshot) -> Said:
        """The first ``spec.preemptMinRuntime`` up the PodGroup's Queue and its parents (a queue that
        is missing ends the walk); none set: koordpy's annotation, else the default."""
        pg = snapshot.kai_podgroups.get(gang.key)
        found = queue_min_runtime(pg.queue, snapshot.kai_queues) if pg is not None else None
        return found if found is not None else super().min_runtime(gang, snapshot)

    def last_start(self, gang: Gang, snapshot: Snapshot) -> tuple[float | None, str | None]:
        """The PodGroup's ``kai.scheduler/last-start-timestamp`` (KAI's scheduler stamps it when it
        allocates the job from nothing), or the live members' earliest start when later: koordpy does
        not stamp it, so a job restarted whole since KAI stamped it counts from its members."""
        pg = snapshot.kai_podgroups.get(gang.key)
        text = pg.annotations.get(ANN_LAST_START) if pg is not None else None
        at, problem = timestamp(text, f"PodGroup {gang.key} annotation {ANN_LAST_START}")
        earliest, _ = super().last_start(gang, snapshot)
        if at is not None:
            return (at if earliest is None else max(at, earliest)), None
        return earliest, problem

    def preemption_delay(self, gang: Gang, snapshot: Snapshot) -> tuple[Said, float]:
        """``spec.preemptionDelay``, else the PodGroup's ``kai.scheduler/preemption-delay``, counted from
        its creation or its ``kai.scheduler/last-eviction-timestamp`` when later, or its oldest pending
        member's creation when later still (koordpy evicts without that stamp: the member its
        controller recreated was created at the eviction); a job of no PodGroup as in any dialect."""
        pg = snapshot.kai_podgroups.get(gang.key)
        if pg is None:
            return super().preemption_delay(gang, snapshot)
        where = f"PodGroup {gang.key}"
        if pg.preemption_delay:
            said = duration(pg.preemption_delay, f"{where} spec.preemptionDelay")
        elif pg.annotations.get(ANN_DELAY):
            said = duration(pg.annotations[ANN_DELAY], f"{where} annotation {ANN_DELAY}")
        else:
            said = super().preemption_delay(gang, snapshot)[0]
        evicted, _ = timestamp(pg.annotations.get(ANN_LAST_EVICTION), f"{where} annotation {ANN_LAST_EVICTION}")
        anchor = pending_anchor(creation_time(pg.creation), gang.pods)
        return said, anchor if evicted is None else max(anchor, evicted)

    def written_asks(self, gang: Gang, snapshot: Snapshot) -> tuple[Mapping[str, str], Mapping[str, str]] | None:
        pg = snapshot.kai_podgroups.get(gang.key)
        if pg is None:
            return None
        tc = pg.topology_constraint
        spec = {k: v for k, v in zip(KEYS, (tc.topology, tc.required, tc.preferred), strict=True) if v} if tc else {}
        return pg.annotations, spec

    stale_annotation = STALE_SINCE
    grace_annotation = GRACE

    def stale_object(self, key: str, snapshot: Snapshot) -> tuple[Kind, Mapping[str, str]] | None:
        pg = snapshot.kai_podgroups.get(key)
        return None if pg is None else (PODGROUP_KIND, pg.annotations)

    def stale_grace(self, key: str, members: Sequence[Pod], snapshot: Snapshot) -> float | None:
        # spec.stalenessGracePeriod first (KAI's podgrouper fills it from the annotation), then the annotation.
        pg = snapshot.kai_podgroups.get(key)
        if pg is not None and pg.staleness_grace is not None:
            return pg.staleness_grace
        return super().stale_grace(key, members, snapshot)

    def admitted_by(self, pod: Pod) -> Admitted | None:
        """Kueue writes both keys on every pod of a workload it admitted (its pod set's label always,
        the Workload's name when topology-aware scheduling is on): either says Kueue holds the job's
        quota, preempts it by its own rules and requeues it when it breaks (waitForPodsReady)."""
        workload = pod.annotations.get(ANN_WORKLOAD)
        if not workload and LABEL_PODSET not in pod.labels:
            return None
        # A TAS pod Kueue has ungated carries its assigned domain in its nodeSelector, with the
        # flavor's node labels: which keys are the Topology's levels only the flavor says, and
        # koordpy reads no ResourceFlavor, so the whole selector is named.
        assigned: tuple[tuple[str, str], ...] = ()
        if TOPOLOGY_GATE not in pod.scheduling_gates and any(a in pod.annotations for a in TAS_ANNOTATIONS):
            assigned = tuple(sorted(pod.node_selector.items()))
        return Admitted("Kueue", f"workload {pod.namespace}/{workload}" if workload else "",
                        "its waitForPodsReady requeues it", assigned)

    def declared_by(self, key: str, snapshot: Snapshot) -> str | None:
        if key in snapshot.kai_podgroups:
            return "PodGroup scheduling.run.ai"
        if _implicit(key):
            _, kind, name = key.split("/", 2)
            return f"the pods of {kind} {name}"
        return None

    def tree_keys(self, snapshot: Snapshot) -> Iterator[TreeKey]:
        for name in sorted(snapshot.topologies):
            yield tree_key(name)

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        topology = trees.snapshot.topologies.get(key.name)
        if key.dialect != NAME or topology is None:
            return None
        return topology_tree(topology, trees.nodes)

    def shown_trees(self, trees: TreeSource) -> Iterable[ShownTree]:
        return [ShownTree(tree_key(name), f"Topology {name} ({topo.api_version})", short=name)
                for name, topo in sorted(trees.snapshot.topologies.items())]

    def default_tree(self, snapshot: Snapshot) -> TreeKey | None:
        return tree_key(min(snapshot.topologies)) if snapshot.topologies else None


DIALECT = Kai()
