"""Gangs and GangGroups as the snapshot declares them, and the gang state kept between cycles.

Three gang sources produce the one ``Gang`` type: Koordinator's PodGroup (scheduler-plugins
``scheduling.sigs.k8s.io``) and gang annotations, Volcano's PodGroup (pods joined by the
``scheduling.k8s.io/group-name`` annotation, sub-groups from its ``subGroupPolicy``), and
KAI's grouping (its PodGroup, joined by ``pod-group-name``, or else every pod of one
top-level owner, found through the owner references). ``resolve_jobs`` groups the claimed
pending pods into jobs: a GangGroup (every gang that names the others in its groups
annotation, closed transitively) or a single pod. Config errors stay attached to the gang so
the cycle can report them where the user looks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from koordpy.api.errors import ParseError
from koordpy.api.kinds import KINDS
from koordpy.api.kueue import KaiPodGroup
from koordpy.api.objects import Pod
from koordpy.api.owners import Owner, OwnerRef, controller_ref, pod_owner_refs
from koordpy.api.podgroup import (
    ANN_TIMEOUT,
    GangConfig,
    PodGroup,
    gang_config_from_pod,
    gang_config_from_podgroup,
    pod_gang_name,
)
from koordpy.api.volcano import (
    GROUP_NAME_ANN,
    NetworkTopology,
    SubGroupPolicy,
    VolcanoPodGroup,
    network_topology_from_annotations,
)
from koordpy.core.cluster import effective_priority
from koordpy.core.dialects.kai import KEYS as KAI_KEYS
from koordpy.core.dialects.kai import layered
from koordpy.core.snapshot import Snapshot

if TYPE_CHECKING:
    from koordpy.core.view import View


@dataclass
class SchedulerState:
    """What the scheduler remembers between cycles; all of it can be lost safely.

    ``reserved`` holds NonStrict members placed while their gang waits (kube-scheduler's
    assumed pods in Permit); nothing is bound for them, so a restart only forgets a wait.
    """

    reserved: dict[str, str] = field(default_factory=dict)  # pod -> node
    wait_since: dict[str, float] = field(default_factory=dict)  # GangGroup id -> first reservation
    satisfied: set[str] = field(default_factory=set)  # gangs that met their minimum once
    # What was last said about each gang's dropped limits (Requirement.dropped): the Event is written
    # when it changes, not each time the job is tried.
    told: dict[str, str] = field(default_factory=dict)
    # The cycle's standing view of the cluster (koordpy.core.view); rebuilt when missing.
    view: View | None = field(default=None, repr=False, compare=False)


KAI_GROUP_ANN = "pod-group-name"
# Owners whose pods are not one job: a DaemonSet's pods each belong to their node, a static
# pod's owner is its node.
NOT_JOBS = frozenset({"DaemonSet", "Node"})


@dataclass(frozen=True)
class TopologyAsk:
    """What a gang asks of the topology in its own dialect; the cycle turns it into a Requirement
    against the trees of the moment (``koordpy.core.dialects``)."""

    volcano: NetworkTopology | None = None
    policies: tuple[SubGroupPolicy, ...] = ()
    kai: tuple[tuple[str, str], ...] = ()  # the KAI keys, each from the first place that sets it

    @property
    def is_volcano(self) -> bool:
        return self.volcano is not None or bool(self.policies)


@dataclass
class Gang:
    key: str
    config: GangConfig | None
    pods: list[Pod]  # non-terminal members, bound or not
    creation: float
    error: str | None = None
    ask: TopologyAsk | None = None

    def bound(self) -> list[Pod]:
        return [p for p in self.pods if p.node_name]

    @property
    def timed_out(self) -> bool:
        return any(p.annotations.get(ANN_TIMEOUT) == "true" for p in self.pods)


@dataclass
class Job:
    """One unit of the queue: a GangGroup's gangs, or a lone pod."""

    id: str
    gangs: list[Gang]
    pods: list[Pod]  # the claimed pending pods this job places
    priority: int
    creation: float

    @property
    def is_gang(self) -> bool:
        return bool(self.gangs)

    @property
    def binding(self) -> bool:
        """A GangGroup with members bound but a gang short of its minimum is mid-bind: a
        scheduler that stopped between binds. It goes first, so the room it holds is not lost."""
        return any(
            g.config is not None and 0 < len(g.bound()) < g.config.min_member for g in self.gangs
        )

    @cached_property
    def _queue_key(self) -> tuple[bool, int, float, str]:
        return (not self.binding, -self.priority, self.creation, self.id)

    def queue_key(self) -> tuple[bool, int, float, str]:
        """A job is rebuilt whenever its pods or gangs change, so its place in the queue is kept."""
        return self._queue_key


def _creation(value: float | None) -> float:
    return value if value is not None else 0.0


NOT_FOUND = ("PodGroup {key} not found; its pods wait until it is created "
             "(or declare gang.scheduling.koordinator.sh/min-available on them)")


def build_gang(key: str, podgroup: PodGroup | None, invalid: str | None, pods: list[Pod],
               snapshot: Snapshot | None = None) -> Gang | None:
    """One gang from what declares it: its PodGroup (or the error that PodGroup failed to parse
    with) and its live member pods; None when nothing declares it any more. ``snapshot`` supplies
    the other sources' declarations (Volcano's and KAI's PodGroups, the owners)."""
    if invalid is not None:
        return Gang(key, None, pods, 0.0, f"PodGroup {key} is invalid: {invalid}")
    if podgroup is None and snapshot is not None:
        other = _other_source(key, pods, snapshot)
        if other is not None or key.count("/") > 1:
            return other
    if podgroup is None and not pods:
        return None
    cfg: GangConfig | None = None
    err = None
    if podgroup is not None:
        creation = _creation(podgroup.creation)
        try:
            cfg = gang_config_from_podgroup(podgroup)
        except ParseError as exc:
            err = str(exc)
    else:  # an annotation gang is as old as its first pod
        creation = min(_creation(p.creation) for p in pods)
    gang = Gang(key, cfg, pods, creation, err)
    if err or not pods:
        return gang
    # Annotation values on the pods override the PodGroup; the earliest pod speaks for the gang.
    first = min(pods, key=lambda p: (_creation(p.creation), p.name))
    try:
        cfg = gang_config_from_pod(f"Pod {first.key}", first.namespace, first.annotations, podgroup)
    except ParseError as exc:
        gang.error = str(exc)
        return gang
    if cfg is None:
        gang.error = NOT_FOUND.format(key=key)
    gang.config = cfg
    if podgroup is not None and snapshot is not None:
        _podgroup_ask(gang, podgroup.annotations, {}, pods, snapshot)
    return gang


def _podgroup_ask(gang: Gang, annotations: dict[str, str], spec_kai: dict[str, str], pods: list[Pod],
                  snapshot: Snapshot) -> None:
    """Volcano's or KAI's topology keys on a PodGroup (and for KAI its pods and owner)."""
    try:
        volcano = network_topology_from_annotations(f"PodGroup {gang.key}", annotations)
    except ParseError as exc:
        gang.error = str(exc)
        return
    first = min(pods, key=lambda p: (_creation(p.creation), p.name)) if pods else None
    owner = top_owner(first, snapshot.owners) if first is not None else None
    kai = layered(first.annotations if first else {}, {**annotations, **spec_kai},
                  owner.annotations if owner else {})
    if volcano is not None and kai:
        gang.error = f"PodGroup {gang.key} declares both a Volcano and a KAI topology constraint; choose one"
    elif volcano is not None and gang.config is not None and gang.config.topology is not None:
        gang.error = (f"PodGroup {gang.key} declares both a Koordinator network-topology-spec and a Volcano "
                      "network topology; choose one")
    elif volcano is not None or kai:
        gang.ask = TopologyAsk(volcano=volcano, kai=tuple(sorted(kai.items())))


def _other_source(key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
    """The gang of a Volcano or KAI PodGroup, or of a top-level owner's pods."""
    vpg = snapshot.volcano_podgroups.get(key)
    if vpg is not None:
        return _volcano_gang(vpg, pods, snapshot)
    kpg = snapshot.kai_podgroups.get(key)
    if kpg is not None:
        return _kai_gang(kpg, pods, snapshot)
    if key.count("/") > 1:  # namespace/Kind/name: an implicit group of one owner's pods
        return _owner_gang(key, pods, snapshot) if pods else None
    return None


def _default_config(key: str, min_member: int) -> GangConfig:
    return GangConfig(key=key, min_member=max(1, min_member), total_number=max(1, min_member), from_crd=True)


def _volcano_gang(pg: VolcanoPodGroup, pods: list[Pod], snapshot: Snapshot) -> Gang:
    gang = Gang(pg.key, _default_config(pg.key, pg.min_member), pods, _creation(pg.creation))
    if pg.network_topology is not None or pg.sub_group_policy:
        gang.ask = TopologyAsk(volcano=pg.network_topology, policies=pg.sub_group_policy)
    return gang


def _kai_gang(pg: KaiPodGroup, pods: list[Pod], snapshot: Snapshot) -> Gang:
    gang = Gang(pg.key, _default_config(pg.key, pg.min_member), pods, _creation(pg.creation))
    tc = pg.topology_constraint
    spec = {k: v for k, v in zip(KAI_KEYS, (tc.topology, tc.required, tc.preferred), strict=True) if v} if tc else {}
    _podgroup_ask(gang, pg.annotations, spec, pods, snapshot)
    return gang


def _owner_gang(key: str, pods: list[Pod], snapshot: Snapshot) -> Gang:
    first = min(pods, key=lambda p: (_creation(p.creation), p.name))
    owner = top_owner(first, snapshot.owners)
    replicas = owner.replicas if owner is not None and owner.replicas else None
    if owner is not None and owner.kind == "StatefulSet":
        replicas = 1  # its controller may create one pod after another runs: waiting for all could be forever
    # The owner's parallelism or replicas when it says; else all the pods it has now.
    gang = Gang(key, _default_config(key, replicas or len(pods)), pods,
                _creation(owner.creation if owner is not None else first.creation))
    kai = layered(first.annotations, owner.annotations if owner is not None else {})
    if kai:
        gang.ask = TopologyAsk(kai=tuple(sorted(kai.items())))
    return gang


MAX_OWNER_DEPTH = 8


def _lookup(owners: dict[str, Owner], ref: OwnerRef, namespace: str) -> Owner | None:
    """The owner a reference names: by uid, or (a hand-written manifest without uids) by kind and name."""
    found = owners.get(ref.uid) if ref.uid else None
    return found if found is not None else owners.get(f"{ref.kind}/{namespace}/{ref.name}")


def _chain(pod: Pod, owners: dict[str, Owner]) -> tuple[OwnerRef | None, Owner | None]:
    """The pod's top-level controller reference and, when the cache holds it, that owner. Owner
    references the pod cannot state properly make it a pod of its own (its parse reports them)."""
    try:
        ref = controller_ref(pod_owner_refs(pod))
    except ParseError:
        return None, None
    owner = _lookup(owners, ref, pod.namespace) if ref is not None else None
    for _ in range(MAX_OWNER_DEPTH):  # owners form a chain; a loop in bad data must still end
        if owner is None or ref is None:
            break
        up = controller_ref(owner.owner_refs)
        if up is None:
            break
        ref, owner = up, _lookup(owners, up, pod.namespace)
    return ref, owner


def owner_chain_key(pod: Pod, owners: dict[str, Owner]) -> str | None:
    """``namespace/Kind/name`` of the pod's top-level controller when the pod or that owner asks for
    a KAI topology, else None. Only then do an owner's pods form a group: plain Deployments,
    StatefulSets and Jobs keep scheduling pod by pod, as they always did."""
    ref, owner = _chain(pod, owners)
    if ref is None or ref.kind in NOT_JOBS:
        return None
    asks = any(pod.annotations.get(k) for k in KAI_KEYS) or (
        owner is not None and any(owner.annotations.get(k) for k in KAI_KEYS))
    return f"{pod.namespace}/{ref.kind}/{ref.name}" if asks else None


def gangs_named(keys: Iterable[str], target: str) -> list[str]:
    """The gang keys a user may mean by ``target``: the key itself when it is one; else, for
    ``namespace/name``, the implicit groups of that name (``namespace/Kind/name``, as messages call
    an owner's or a lone pod's group), and for ``namespace/kind/name`` the group whose kind matches
    regardless of case (``job`` for ``Job``, as kubectl takes it). More than one means ambiguous."""
    keys = list(keys)
    if target in keys:
        return [target]
    parts = target.split("/")
    if len(parts) == 2:
        ns, name = parts
        return sorted(k for k in keys if k.count("/") == 2 and k.startswith(f"{ns}/") and k.endswith(f"/{name}"))
    if len(parts) == 3:
        want = (parts[0], parts[1].lower(), parts[2])
        return sorted(k for k in keys if k.count("/") == 2 and _kind_folded(k) == want)
    return []


def _kind_folded(key: str) -> tuple[str, str, str]:
    ns, kind, name = key.split("/")
    return ns, kind.lower(), name


# The owner kinds koordpy lists and reads topology annotations from (``koordpy.api.kinds``), by
# API group and kind: a pod naming one that is not known yet may be placed too early without them.
OWNER_KINDS = frozenset((k.group, k.kind) for k in KINDS if k.role == "owner")
# How long a pod waits, from its creation, for such an owner to appear before it is placed without
# it. Watches of different kinds arrive in no set order, and a Job controller creates pods
# moments after their Job; a few seconds covers that lag, and an owner that never comes (deleted,
# or a manifest's made-up uid) costs only this much.
OWNER_GRACE_SECONDS = 5.0


def missing_owner(pod: Pod, owners: dict[str, Owner]) -> OwnerRef | None:
    """The controller reference in the pod's owner chain that names an owner of a kind koordpy reads
    topology from but that ``owners`` does not hold (by uid, or by kind and name for manifests
    without uids), else None."""
    if not pod.owner_references:  # most pods of a large gang: asked every cycle, so kept cheap
        return None
    ref, owner = _chain(pod, owners)
    if ref is None or owner is not None:
        return None
    return ref if (ref.api_version.rpartition("/")[0], ref.kind) in OWNER_KINDS else None


def top_owner(pod: Pod, owners: dict[str, Owner]) -> Owner | None:
    return _chain(pod, owners)[1]


def gang_member(pod: Pod, owners: dict[str, Owner] | None = None) -> str | None:
    """The gang a live pod belongs to, if any: a Koordinator gang, a Volcano or KAI PodGroup, or
    (``owners`` given) the implicit group of its top-level owner."""
    if pod.terminal:
        return None
    name = pod_gang_name(pod.namespace, pod.labels, pod.annotations)
    if name is not None:
        return name
    group = pod.annotations.get(GROUP_NAME_ANN) or pod.annotations.get(KAI_GROUP_ANN)
    if group:
        return f"{pod.namespace}/{group}"
    if owners is None:
        return None
    key = owner_chain_key(pod, owners)
    if key is None and any(pod.annotations.get(k) for k in KAI_KEYS) and not _is_daemon(pod, owners):
        return f"{pod.namespace}/Pod/{pod.name}"  # a lone pod with a topology of its own
    return key


def _is_daemon(pod: Pod, owners: dict[str, Owner]) -> bool:
    ref, _ = _chain(pod, owners)
    return ref is not None and ref.kind in NOT_JOBS


def resolve_gangs(snapshot: Snapshot) -> tuple[dict[str, Gang], dict[str, str]]:
    """Every gang the pods and PodGroups declare, and each member pod's gang key."""
    member_of: dict[str, str] = {}
    members: dict[str, list[Pod]] = {}
    for pod in snapshot.pods:
        key = gang_member(pod, snapshot.owners)
        if key is not None:
            member_of[pod.key] = key
            members.setdefault(key, []).append(pod)
    gangs: dict[str, Gang] = {}
    for key in [*snapshot.podgroups, *snapshot.invalid_podgroups, *snapshot.volcano_podgroups,
                *snapshot.kai_podgroups, *members]:
        if key not in gangs:
            gang = build_gang(key, snapshot.podgroups.get(key), snapshot.invalid_podgroups.get(key),
                              members.get(key, []), snapshot)
            if gang is not None:
                gangs[key] = gang
    return gangs, member_of


def group_of(gangs: dict[str, Gang]) -> dict[str, str]:
    """GangGroup id per gang: the sorted member keys, closed over mutual claims.

    A gang is tied only to the gangs its own ``groups`` list names, and two gangs are placed
    as one job only when each names the other: a one-sided claim (say from another
    namespace) must never pull someone else's gang into a job it did not ask for.
    """
    parent = {k: k for k in gangs}

    def find(k: str) -> str:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    for key, gang in gangs.items():
        for other in claims(gang):
            peer = gangs.get(other)
            if peer is None or key not in claims(peer):
                continue
            a, b = find(key), find(other)
            if a != b:
                parent[max(a, b)] = min(a, b)
    members: dict[str, list[str]] = {}
    for k in parent:
        members.setdefault(find(k), []).append(k)
    return {k: ",".join(sorted(members[find(k)])) for k in parent}


def claims(gang: Gang) -> tuple[str, ...]:
    """The other gangs this gang's ``groups`` names."""
    return tuple(k for k in gang.config.groups if k != gang.key) if gang.config else ()


def resolve_jobs(snapshot: Snapshot, state: SchedulerState) -> tuple[list[Job], dict[str, Gang], dict[str, str]]:
    gangs, member_of = resolve_gangs(snapshot)
    groups = group_of(gangs)
    claimed: dict[str, list[Pod]] = {}
    singles: list[Job] = []
    for pod in snapshot.pods:
        if not snapshot.claims(pod):
            continue
        gang = gangs.get(member_of.get(pod.key, ""))
        if gang is None or holds_alone(gang, state):
            singles.append(single_job(pod, snapshot))
        else:
            claimed.setdefault(gang.key, []).append(pod)
    jobs = {}
    for key in claimed:
        gid = groups[key]
        if gid not in jobs:
            job = group_job(gid, gangs, claimed, snapshot)
            if job is not None:
                jobs[gid] = job
    return [*jobs.values(), *singles], gangs, groups


def holds_alone(gang: Gang, state: SchedulerState) -> bool:
    """Whether the gang's pending pods schedule as ordinary pods: once satisfied, gang rules end.
    Not for a job with a Volcano or KAI topology: a member added later must still land where the
    topology allows, next to those running (and a later sub-group still binds whole)."""
    if gang.ask is not None:
        return False
    return gang.config is not None and not gang.error and _satisfied_once(gang, state)


def single_job(pod: Pod, snapshot: Snapshot) -> Job:
    return Job(pod.key, [], [pod], effective_priority(pod, snapshot.priority_classes), _creation(pod.creation))


def group_job(gid: str, gangs: dict[str, Gang], claimed: dict[str, list[Pod]], snapshot: Snapshot) -> Job | None:
    """The GangGroup ``gid``'s job: its gangs and their claimed pending pods (None without any)."""
    member_gangs = [gangs[k] for k in gid.split(",")]
    pods = [p for g in member_gangs for p in claimed.get(g.key, ())]
    if not pods:
        return None
    prio = max(effective_priority(p, snapshot.priority_classes) for p in pods)
    return Job(gid, member_gangs, pods, prio, min(g.creation for g in member_gangs))


def _satisfied_once(gang: Gang, state: SchedulerState) -> bool:
    cfg = gang.config
    if cfg is None or cfg.match_policy != "once-satisfied":
        return False
    return gang.key in state.satisfied or len(gang.bound()) >= cfg.min_member
