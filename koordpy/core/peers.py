"""A job's running peers in its topology requirement: the domain of its scope its running members
(those that still count, ``Gang.lost``) keep it inside (``Requirement.anchor``) and the smallest
domain holding its running and reserved members, which its pending pods join first when there is
room (``Requirement.peers``).

Does not belong here: what a dialect asks (``koordpy.core.dialects``), how far a search reaches
from them (``SearchScope`` in ``koordpy.core.requirement``), the search itself
(``koordpy.core.placement``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from koordpy.api.objects import Pod
from koordpy.core.cluster import Cluster
from koordpy.core.gang import Job
from koordpy.core.model import Gang
from koordpy.core.requirement import Requirement
from koordpy.core.snapshot import Snapshot


def requirement(job: Job, pods: list[Pod], cluster: Cluster, snapshot: Snapshot,
                reserved: Mapping[str, str]) -> Requirement | None:
    """What the job asks of the topology, from the first of its gangs that asks anything, in terms
    of the cluster's trees as they are now, held to its running members (``reserved``: the nodes
    members of NonStrict gangs hold room on)."""
    for gang in job.gangs:
        for ask in gang.asks:
            asked = ask.requirement(gang, pods, cluster.trees, snapshot)
            if asked is None:
                continue
            req = _anchored(asked.requirement, cluster, job.gangs if asked.whole_job else [gang], asked.anchored)
            return _with_peers(req, cluster, job, reserved) if asked.peers else req
    return None


def members_placed(cluster: Cluster, gangs: list[Gang], reserved: Mapping[str, str] | None = None) -> list[int]:
    """The nodes of the gangs' members that run and still count (not ``Gang.lost``: a member
    terminating, or on a node that failed for it, must not keep the job in a dead rack), and
    (``reserved``) of those reserved, which bind there at the end of their wait."""
    index = cluster.node_index
    held = reserved or {}
    out = []
    for gang in gangs:
        lost = gang.lost
        for p in gang.pods:
            if lost and p.key in lost:
                continue
            name = p.node_name or (held.get(p.key) if held else None)
            if name and name in index:
                out.append(index[name])
    return out


def _with_peers(req: Requirement, cluster: Cluster, job: Job, reserved: Mapping[str, str]) -> Requirement:
    """Where the job's running and reserved members are (their lowest common domain), so that its
    pending pods join them when there is room (``Requirement.peers``)."""
    placed = members_placed(cluster, job.gangs, reserved)
    if req.failure is not None or not placed:
        return req
    tree = cluster.trees[req.tree]
    return replace(req, peers=tree.lca(int(tree.node_domain[n]) for n in placed))


def _anchored(req: Requirement, cluster: Cluster, gangs: list[Gang], message: str) -> Requirement:
    """A job with members running grows only inside the domain of its scope around them (Volcano's
    allocated HyperNode, recovered from where they run; KAI's required domain; Koordinator's
    MustGather domain)."""
    bound = members_placed(cluster, gangs)
    if req.failure is not None or not req.hard or req.scope is None or not bound:
        return req
    tree = cluster.trees[req.tree]
    lca = tree.lca(int(tree.node_domain[n]) for n in bound)
    anchor = tree.ancestor_at_most(lca, req.scope)  # ``lca`` itself when the scope is its rank (one node)
    if anchor < 0:
        return replace(req, failure=message.format(where=tree.name(lca) or "the cluster", scope=req.scope))
    return replace(req, anchor=anchor)
