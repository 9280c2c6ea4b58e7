"""Review of issue 21's bulk cycle (goal 3): "behaviour byte-identical, only cheaper".

The batched undo records (``Statement.assume_many`` -> ``Assumed``, ``Cluster.adopt_many``,
``Cluster.bound_many``), the lazy ``PodMeta`` of pods ``recount_many`` only noted, and presence
moves without trackers are held here to two rules under random sequences of a job's moves:

- a transaction rolled back to a savepoint leaves the cluster exactly as it was at the savepoint
  (usage, what is counted where, the pod index row by row, each pod's metadata, where the rules
  between pods see each pod, their trackers and the counts of anti-affinity and host ports), which
  preemption's what-ifs, ``dry_run`` and ``explain`` rely on;
- the batched paths leave the cluster as the pod-by-pod paths they replaced (``Statement.assume``,
  ``Cluster.adopt``, ``Cluster.bound``) after every move, and their undo does too.

Pods of every kind take part: running, nominated (held), new pending ones the cluster only noted,
pods with anti-affinity or host ports (the tracked presence path) and plain ones, some admitted by a
controller in front of koordpy (``PodMeta.admitted``), with trackers made before the moves or
between them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.api import Node, Pod
from koordpy.core.cluster import Cluster
from koordpy.core.podrules import Match
from koordpy.core.snapshot import Snapshot
from koordpy.core.statement import Statement
from koordpy.core.txn import Txn
from tests.builders import node, pod

NODES = 4
KINDS = ("running", "nominated", "new", "anti", "ports", "new-anti")


def _pod(i: int, kind: str, cpu: str) -> Pod:
    raw: dict[str, Any] = pod(f"p-{i}", cpu, labels={"app": "a" if i % 2 else "b"})
    if kind == "running":
        raw["spec"]["nodeName"] = f"n{i % NODES}"
    elif kind == "nominated":
        raw["status"] = {"nominatedNodeName": f"n{(i + 1) % NODES}"}
    elif kind in ("anti", "new-anti"):
        raw["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}
        if kind == "anti":
            raw["spec"]["nodeName"] = f"n{i % NODES}"
    elif kind == "ports":
        raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8000 + i % 2}]
        raw["spec"]["nodeName"] = f"n{i % NODES}"
    if i % 3 == 0:
        raw["spec"]["priority"] = 100 + i
    if i % 4 == 1:  # admitted in front of koordpy (Kueue's key): alike its neighbours in all but that
        raw["metadata"]["labels"]["kueue.x-k8s.io/podset"] = "main"
    return Pod.from_raw(raw)


def _world(kinds: list[tuple[str, str]]) -> tuple[Cluster, list[Pod]]:
    """A cluster that knows the pods of ``kinds`` whose kind is not new from its snapshot, and the
    new ones only as ``recount_many`` notes them (their PodMeta made when first asked for)."""
    pods = [_pod(i, kind, cpu) for i, (kind, cpu) in enumerate(kinds)]
    known = [p for p, (kind, _) in zip(pods, kinds, strict=True) if not kind.startswith("new")]
    cluster = Cluster(Snapshot(nodes=[Node.from_raw(node(f"n{i}", cpu="64")) for i in range(NODES)], pods=known))
    cluster.recount_many([p.key for p in pods], {p.key: p for p in pods}, {})
    return cluster, pods


def _state(cluster: Cluster) -> tuple[object, ...]:
    """Everything a later job or a what-if reads of the cluster, keyed by pod (not by row number)."""
    idx = cluster.index
    rows = {k: (int(idx.node[i]), idx.req[i].tolist(), bool(idx.live[i]), bool(idx.held[i]), int(idx.prio[i]),
                bool(idx.protected[i]), bool(idx.doomed[i]), bool(idx.admitted[i])) for k, i in idx.row.items()}
    live = int(np.count_nonzero(idx.live))
    presence = cluster.presence
    metas = {k: cluster._meta_for(k) for k in sorted({*cluster.objects, *cluster.meta})}
    return (cluster.used.tolist(), {k: (n, v.tolist()) for k, (n, v) in sorted(cluster.counted.items())}, rows, live,
            metas, {k: dict(sorted(v.items())) for k, v in sorted(presence._at.items())},
            {str(m): _tracked(cluster, m) for m in (_APP_A, _ANY)},
            {k: v.tolist() for k, v in presence._holders.items() if v.any()},
            {k: v.tolist() for k, v in presence._ports.items() if v.any()}, presence.holding,
            sorted(cluster._held()))


def _tracked(cluster: Cluster, match: Match) -> list[int]:
    """Per node, the pods ``match`` counts where the rules see them: the tracker's counts when it
    was made (they must equal a fresh count from where each pod is), else that fresh count (a
    tracker is made when first asked for, not undone: what it counts is what must be)."""
    fresh = np.zeros(NODES, dtype=np.int64)
    for key, at in cluster.presence._at.items():
        if match(cluster.objects[key]):
            for n, count in at.items():
                fresh[n] += count
    tracker = cluster.presence._trackers.get(match)
    if tracker is not None:
        assert tracker.per_node.tolist() == fresh.tolist(), "a tracker lost count of a move"
    return fresh.tolist()


# One move of a job: (what, which pods by position, nodes).
MOVES = st.lists(st.tuples(st.sampled_from(["assume", "evict", "nominate", "commit", "bound", "doom", "tracker",
                                            "savepoint-rollback"]),
                           st.lists(st.integers(0, 9), min_size=1, max_size=5, unique=True),
                           st.lists(st.integers(0, NODES - 1), min_size=5, max_size=5)),
                 max_size=10)
WORLDS = st.lists(st.tuples(st.sampled_from(KINDS), st.sampled_from(["1", "2"])), min_size=10, max_size=10)
# Trackers of the rules between pods: one found by its label (guarded), one asked on every move.
_APP_A = Match(None, (_pod(1, "anti", "1").pod_anti_affinity[0].selector,))
_ANY = Match(None, ())


def _play(cluster: Cluster, pods: list[Pod], moves: list[tuple[str, list[int], list[int]]], batched: bool) -> list[
        tuple[object, ...]]:
    """Plays ``moves`` on ``cluster`` (batched: through the bulk paths; else pod by pod) as a cycle
    would make them, returning the state after each: only pending pods not placed yet are assumed,
    a counted pod is evicted at most once between commits, only placed pods are bound."""
    after = []
    stmt = Statement(cluster)
    placed: set[int] = set()  # assumed since the statement began (committed or not)
    evicted: set[int] = set()  # evicted since the last commit
    bound: set[int] = set()

    def pending(i: int) -> bool:
        return not pods[i].node_name and i not in placed

    for what, which, nodes in moves:
        if what == "assume":
            which = [i for i in which if pending(i)]
        elif what == "evict":
            which = [i for i in which if pods[i].key in cluster.counted and i not in evicted]
        elif what == "nominate":
            which = [i for i in which if pending(i)][:1]
        elif what == "bound":
            which = [i for i in which if i in placed and i not in bound]
        elif what == "savepoint-rollback":
            which = [i for i in which if pending(i)]
        keys = [pods[i].key for i in which]
        at = nodes[: len(keys)]
        if what == "assume" and keys:
            vec = cluster.request_vector(pods[which[0]])
            if batched:
                stmt.assume_many(keys, np.array(at, dtype=np.int64), vec)
            else:
                for k, n in zip(keys, at, strict=True):
                    stmt.assume(k, n, vec)
            placed.update(which)
        elif what == "evict":
            for k in keys:
                assert stmt.evict(k)
            evicted.update(which)
        elif what == "nominate" and keys:
            stmt.nominate(keys[0], at[0], cluster.request_vector(pods[which[0]]))
        elif what == "commit":
            stmt.commit()
            evicted.clear()
        elif what == "bound":
            if batched:
                cluster.bound_many(keys)
            else:
                for k in keys:
                    cluster.bound(k)
            bound.update(which)
        elif what == "doom":
            for k in keys:
                cluster.doom(k)
        elif what == "tracker":
            cluster.presence.tracker(_APP_A)
            cluster.presence.tracker(_ANY)
        elif what == "savepoint-rollback" and keys:  # a nested what-if: its moves rolled back at once
            assert cluster.txn is not None
            mark = cluster.txn.savepoint()
            before = _state(cluster)
            what_if = Statement(cluster)  # as preemption's what-ifs and a job placed then undone make them
            what_if.assume_many(keys, np.array(at, dtype=np.int64), cluster.request_vector(pods[which[0]]))
            what_if.commit()
            cluster.bound_many(keys)
            cluster.txn.rollback(mark)
            assert _state(cluster) == before, "a what-if rolled back left a trace"
        after.append(_state(cluster))
    return after


@given(WORLDS, MOVES, st.booleans())
@settings(max_examples=300, deadline=None)
def test_a_job_rolled_back_leaves_the_cluster_as_at_its_savepoint(kinds: list[tuple[str, str]],
                                                                  moves: list[tuple[str, list[int], list[int]]],
                                                                  tracked: bool) -> None:
    cluster, pods = _world(kinds)
    if tracked:  # trackers to follow the moves (the presence's slow path)
        cluster.presence.tracker(_APP_A)
        cluster.presence.tracker(_ANY)
    txn = Txn(cluster)
    start = _state(cluster)
    mark = txn.savepoint()
    _play(cluster, pods, moves, batched=True)
    txn.rollback(mark)
    assert _state(cluster) == start
    txn.discard()
    assert _state(cluster) == start


@given(WORLDS, MOVES, st.booleans())
@settings(max_examples=300, deadline=None)
def test_the_bulk_paths_leave_the_cluster_as_the_pod_by_pod_paths(kinds: list[tuple[str, str]],
                                                                  moves: list[tuple[str, list[int], list[int]]],
                                                                  tracked: bool) -> None:
    (bulk, pods), (single, same) = _world(kinds), _world(kinds)
    for cluster in (bulk, single) if tracked else ():
        cluster.presence.tracker(_APP_A)
        cluster.presence.tracker(_ANY)
    states = []
    for cluster, ps, batched in ((bulk, pods, True), (single, same, False)):
        Txn(cluster)
        states.append(_play(cluster, ps, moves, batched))
    assert states[0] == states[1]
    for cluster in (bulk, single):
        assert cluster.txn is not None
        cluster.txn.discard()
    assert _state(bulk) == _state(single)
