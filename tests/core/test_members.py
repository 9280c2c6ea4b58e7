"""Issue 21, goal 3: a gang's pods read in bulk give what reading them one by one gives.

Each fast path of the 3,000-pod cycle is held to the path it replaced (kept here as the reference):
the topology indexes parsed once per text, the rank order by index alone, request shapes grouped by
the requests as stated, one pod per constraint set, a gang's assumptions, adoptions and binds
recorded as one undo each, presence moves without trackers, the Binds and Events made at once, a
Koordinator PodGroup's status counted in one pass, and new pending pods noted without a recount.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.api import Node, Pod
from koordpy.api.errors import ParseError
from koordpy.api.podgroup import ANN_TOPOLOGY_INDEX, PodGroup, topology_index
from koordpy.api.workload import completion_index
from koordpy.core.cluster import Cluster, PodMeta
from koordpy.core.decisions import Bind, Event, EventReason, bind_of, event_of, scheduled
from koordpy.core.dialects.koordinator import podgroup_status
from koordpy.core.filters import Filters, constraints_key
from koordpy.core.members import topology_indexes
from koordpy.core.messages import assigned_many, render
from koordpy.core.naming import natural_key
from koordpy.core.placement import Placer, rank_order
from koordpy.core.podrules import rules_key
from koordpy.core.snapshot import Snapshot
from koordpy.core.statement import Statement
from koordpy.core.txn import Txn
from koordpy.core.verdicts import Assigned
from tests.builders import node, pod

# Index texts: valid, negative, not a number, out of int32, spaced.
INDEX_TEXTS = st.one_of(st.none(), st.integers(0, 40).map(str),
                        st.sampled_from(["-1", "x", "", " 3", "2147483648", "007", "1e3"]))


def _pod(name: str, index: str | None = None, cpu: str = "1", *, group: str = "", labels: dict[str, str] | None = None,
         extra: dict[str, Any] | None = None) -> Pod:
    raw = pod(name, cpu)
    ann = raw["metadata"].setdefault("annotations", {})
    if index is not None:
        ann[ANN_TOPOLOGY_INDEX] = index
    if labels:
        raw["metadata"].setdefault("labels", {}).update(labels)
    if group:
        raw["spec"]["schedulingGroup"] = {"podGroupName": group}
    if extra:
        raw["spec"].update(extra)
    return Pod.from_raw(raw)


def _error(fn: Any, *args: Any) -> tuple[Any, str | None]:
    try:
        return fn(*args), None
    except ParseError as exc:
        return None, str(exc)


@given(st.lists(INDEX_TEXTS, max_size=12))
@settings(max_examples=150, deadline=None)
def test_topology_indexes_parse_as_topology_index_pod_by_pod(texts: list[str | None]) -> None:
    pods = [_pod(f"p-{i}", t) for i, t in enumerate(texts)]
    want, want_err = None, None
    got_each = []
    for p in pods:
        value, err = _error(topology_index, f"Pod {p.key}", p.annotations)
        if err is not None:
            want_err = err
            break
        got_each.append(value)
    else:
        want = got_each
    # Twice: the second time the texts come from the memo.
    for _ in range(2):
        assert _error(topology_indexes, pods) == (want, want_err)


def _rank_order_reference(pods: list[Pod]) -> list[Pod]:
    """``rank_order`` before issue 21: a natural-key sort of every pod."""

    def key(p: Pod) -> tuple[bool, int, bool, int, tuple[object, ...], str]:
        idx = topology_index(f"Pod {p.key}", p.annotations)
        done = completion_index(p.annotations, p.labels) if p.scheduling_group else None
        return (idx is None, idx or 0, done is None, done or 0, natural_key(p.name), p.namespace)

    return sorted(pods, key=key)


@given(st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 8).map(str)), st.booleans(),
                          st.one_of(st.none(), st.integers(0, 5))), max_size=14),
       st.permutations(list(range(14))))
@settings(max_examples=200, deadline=None)
def test_rank_order_fast_path_orders_as_the_natural_key_sort(spec: list[tuple[str | None, bool, int | None]],
                                                            names: list[int]) -> None:
    pods = []
    for i, (index, grouped, completion) in enumerate(spec):
        labels = {"batch.kubernetes.io/job-completion-index": str(completion)} if completion is not None else None
        pods.append(_pod(f"w-{names[i]}", index, group="pg" if grouped else "", labels=labels))
    assert [p.key for p in rank_order(pods)] == [p.key for p in _rank_order_reference(pods)]


def test_rank_order_with_distinct_indexes_uses_them_alone() -> None:
    pods = [_pod(f"w-{i}", str(9 - i)) for i in range(10)]
    assert [p.name for p in rank_order(pods)] == [f"w-{i}" for i in range(9, -1, -1)]


def _cluster(pods: list[Pod], nodes: int = 4) -> Cluster:
    return Cluster(Snapshot(nodes=[Node.from_raw(node(f"n{i}", cpu="64")) for i in range(nodes)], pods=pods))


REQUESTS = st.lists(st.tuples(st.sampled_from(["1", "2", "500m"]), st.sampled_from(["1Gi", "2Gi"]),
                              st.booleans()), min_size=1, max_size=10)


def _requested(i: int, cpu: str, mem: str, gpu: bool) -> Pod:
    raw = pod(f"r-{i}", cpu, mem)
    if gpu:
        raw["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
    if i % 3 == 1:  # the same requests stated in another order
        req = raw["spec"]["containers"][0]["resources"]["requests"]
        raw["spec"]["containers"][0]["resources"]["requests"] = dict(reversed(list(req.items())))
    return Pod.from_raw(raw)


@given(REQUESTS)
@settings(max_examples=100, deadline=None)
def test_shapes_group_pods_as_their_request_vectors_do(spec: list[tuple[str, str, bool]]) -> None:
    pods = [_requested(i, *s) for i, s in enumerate(spec)]
    cluster, reference = _cluster(pods), _cluster(pods)
    want: dict[bytes, tuple[Any, list[int]]] = {}
    for i, p in enumerate(pods):
        vec = reference.request_vector(p)
        want.setdefault(vec.tobytes(), (vec, []))[1].append(i)
    got = cluster.shapes(pods)
    assert list(got) == list(want)
    for b, (vec, members) in got.items():
        assert members == want[b][1] and np.array_equal(vec, want[b][0])
        # The group's vector is its first pod's own: the object recount later compares by identity.
        assert vec is cluster.request_vector(pods[members[0]])


@given(st.lists(st.sampled_from(["plain", "selector", "toleration", "soft-spread", "hard-spread", "anti"]),
                max_size=10), st.booleans())
@settings(max_examples=100, deadline=None)
def test_distinct_keeps_one_pod_per_constraint_set_as_the_keyed_comprehension(kinds: list[str],
                                                                             repelling: bool) -> None:
    spread = {"maxSkew": 1, "topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "a"}}}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}}
    extras: dict[str, dict[str, Any]] = {
        "plain": {}, "selector": {"nodeSelector": {"zone": "z1"}},
        "toleration": {"tolerations": [{"key": "k", "operator": "Exists"}]},
        "soft-spread": {"topologySpreadConstraints": [{**spread, "whenUnsatisfiable": "ScheduleAnyway"}]},
        "hard-spread": {"topologySpreadConstraints": [{**spread, "whenUnsatisfiable": "DoNotSchedule"}]},
        "anti": {"affinity": anti}}
    pods = [_pod(f"k-{i}", labels={"app": "a"}, extra=extras[k]) for i, k in enumerate(kinds)]
    running = [_pod("holder", labels={"app": "a"}, extra={"nodeName": "n0", **extras["anti"]})] if repelling else []
    placer = Placer(Filters(_cluster(running + pods)))
    rules = placer.filters.rules
    want = list({(constraints_key(p), rules_key(p, rules.presence) if rules.applies(p) else None): p
                 for p in pods}.values())
    assert placer._distinct(pods) == want


def test_bind_of_and_event_of_make_the_objects_their_constructors_make() -> None:
    fast, slow = bind_of("default/p", "n1"), Bind("default/p", "n1")
    assert (type(fast), fast, hash(fast), repr(fast)) == (type(slow), slow, hash(slow), repr(slow))
    fe = event_of("Pod", "default/p", "Normal", EventReason.SCHEDULED, "Successfully assigned default/p to n1")
    se = Event("Pod", "default/p", "Normal", EventReason.SCHEDULED, "Successfully assigned default/p to n1")
    assert (type(fe), fe, hash(fe), repr(fe)) == (type(se), se, hash(se), repr(se))
    with pytest.raises(AttributeError):
        fast.node = "n2"  # type: ignore[misc]
    pods, nodes = ["default/a", "default/b"], ["n1", "n2"]
    texts = assigned_many(pods, nodes)
    assert texts == [render(Assigned(p, n)) for p, n in zip(pods, nodes, strict=True)]
    made = scheduled(pods, nodes, texts)
    want = [d for p, n, t in zip(pods, nodes, texts, strict=True)
            for d in (Bind(p, n), Event("Pod", p, "Normal", EventReason.SCHEDULED, t))]
    assert made == want and [type(d) for d in made] == [type(d) for d in want]


def _state(cluster: Cluster, spare: bool = True) -> tuple[object, ...]:
    """What the cluster counts, row by row (``spare``: with the rows free for reuse, which growing
    the index adds to and an undo does not take back)."""
    idx = cluster.index
    rows = sorted(idx.row.items())
    at = np.array([i for _, i in rows], dtype=np.int64)
    return (cluster.used.tolist(), {k: (n, v.tolist()) for k, (n, v) in cluster.counted.items()}, rows,
            idx.node[at].tolist(), idx.req[at].tolist(), idx.live[at].tolist(), idx.held[at].tolist(),
            idx.prio[at].tolist(), idx.protected[at].tolist(), idx.doomed[at].tolist(),
            sorted(idx._spare) if spare else None,
            {k: cluster._meta_for(k) for k in sorted({*cluster.objects, *cluster.meta})},
            {k: dict(v) for k, v in cluster.presence._at.items()})


@given(st.lists(st.integers(0, 3), min_size=1, max_size=8), st.booleans())
@settings(max_examples=60, deadline=None)
def test_a_batch_of_assumptions_commits_binds_and_rolls_back_as_pod_by_pod(nodes: list[int], in_txn: bool) -> None:
    pods = [_pod(f"g-{i}", str(i)) for i in range(len(nodes))]
    keys = [p.key for p in pods]
    batch, single = _cluster(pods), _cluster(pods)
    vec = batch.request_vector(pods[0])
    assert np.array_equal(vec, single.request_vector(pods[0]))
    start = _state(batch, spare=False)
    for cluster, many in ((batch, True), (single, False)):
        txn = Txn(cluster) if in_txn else None
        stmt = Statement(cluster)
        if many:
            stmt.assume_many(keys, np.array(nodes, dtype=np.int64), vec)
        else:
            for k, n in zip(keys, nodes, strict=True):
                stmt.assume(k, n, vec)
        assert stmt.placed == dict(zip(keys, nodes, strict=True))
        assert [(o.kind, o.pod, o.node) for o in stmt.ops()] == [("assume", k, n) for k, n in zip(keys, nodes,
                                                                                                  strict=True)]
        stmt.commit()
        if many:
            cluster.bound_many(keys)
        else:
            for k in keys:
                cluster.bound(k)
        if txn is not None:
            txn.savepoint()
    assert _state(batch) == _state(single)
    if in_txn:
        for cluster in (batch, single):
            assert cluster.txn is not None
            cluster.txn.discard()
        assert _state(batch) == _state(single)
        assert _state(batch, spare=False) == start


def test_a_batch_rolled_back_before_commit_leaves_the_cluster_as_it_was() -> None:
    pods = [_pod(f"g-{i}", str(i)) for i in range(5)]
    cluster = _cluster(pods)
    start = _state(cluster, spare=False)
    stmt = Statement(cluster)
    stmt.assume_many([p.key for p in pods], np.array([0, 0, 1, 2, 3], dtype=np.int64), cluster.request_vector(pods[0]))
    assert _state(cluster, spare=False) != start
    stmt.discard()
    assert _state(cluster, spare=False) == start


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3), st.sampled_from([1, -1])), max_size=30))
@settings(max_examples=100, deadline=None)
def test_presence_moves_without_trackers_count_as_each_move_does(moves: list[tuple[int, int, int]]) -> None:
    pods = [_pod(f"m-{i}") for i in range(6)]
    fast, slow = _cluster(pods).presence, _cluster(pods).presence
    for i, n, sign in moves:
        fast.move_many([pods[i].key], np.array([n], dtype=np.int64), sign)
        slow._add(pods[i].key, pods[i], n, sign)
    assert fast._at == slow._at


@given(st.lists(st.tuples(st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]), st.booleans(),
                          st.sampled_from(["none", "now", "reserved"])), max_size=10), st.integers(1, 6))
@settings(max_examples=150, deadline=None)
def test_podgroup_status_counts_in_one_pass_as_it_counted_in_six(spec: list[tuple[str, bool, str]],
                                                                 minimum: int) -> None:
    members = []
    for i, (phase, on_node, where) in enumerate(spec):
        extra = {"nodeName": "n0"} if on_node else {}
        raw = pod(f"s-{i}")
        raw["spec"].update(extra)
        raw["status"] = {"phase": phase}
        members.append((Pod.from_raw(raw), where))
    pods = [p for p, _ in members]
    now = {p.key: "n1" for p, w in members if w == "now"}
    reserved = {p.key: "n2" for p, w in members if w == "reserved"}
    pg = PodGroup.from_raw({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                            "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": minimum}})
    got = podgroup_status(pg, pods, now, reserved, 5.0)
    scheduled = sum(1 for p in pods if p.node_name or p.key in now)
    running = sum(1 for p in pods if p.phase == "Running")
    succeeded = sum(1 for p in pods if p.phase == "Succeeded")
    failed = sum(1 for p in pods if p.phase == "Failed")
    assert (got.scheduled, got.running, got.succeeded, got.failed) == (scheduled, running, succeeded, failed)
    live = [p for p in pods if not p.terminal]
    waiting = sum(1 for p in pods if p.key in reserved)
    if not (succeeded >= minimum or (failed and succeeded + running < minimum) or running + succeeded >= minimum
            or scheduled >= minimum or scheduled or waiting):
        assert got.phase == ("PreScheduling" if len(live) >= minimum else "Pending")


@given(st.lists(st.tuples(st.sampled_from(["pending", "bound", "nominated", "assumed"]), st.booleans()),
                max_size=8))
@settings(max_examples=100, deadline=None)
def test_recount_many_counts_as_recount_of_each(spec: list[tuple[str, bool]]) -> None:
    pods, assumed = [], {}
    for i, (how, known) in enumerate(spec):
        extra = {"nodeName": "n1"} if how == "bound" else {}
        raw = pod(f"c-{i}")
        raw["spec"].update(extra)
        if how == "nominated":
            raw["status"] = {"nominatedNodeName": "n2"}
        if how == "assumed":
            assumed[f"default/c-{i}"] = "n3"
        pods.append((Pod.from_raw(raw), known))
    known_pods = [p for p, k in pods if k]
    fast, slow = _cluster(known_pods), _cluster(known_pods)
    by_key = {p.key: p for p, _ in pods}
    keys = [*by_key, "default/gone"]
    fast.recount_many(keys, by_key, assumed)
    for k in keys:
        slow.recount(k, by_key.get(k), assumed)
    assert _state(fast) == _state(slow)
    assert fast.objects == slow.objects
    assert all(isinstance(m, PodMeta) for m in fast.meta.values())
    # The PodMeta a new pending pod gets when first asked for is the one recount gave it at once,
    # for what reads it later: counting it, binding it, dooming it, and undoing all that.
    vec = fast.request_vector(next(iter(by_key.values()))) if by_key else None
    for cluster in (fast, slow):
        Txn(cluster)  # attaches itself: what follows is recorded
        for i, k in enumerate(by_key):
            if i % 2:
                cluster.count(k, (i % 4, vec), held=True)  # type: ignore[arg-type]
            cluster.doom(k)
        cluster.bound_many(list(by_key))
    assert _state(fast) == _state(slow)
    for cluster in (fast, slow):
        assert cluster.txn is not None
        cluster.txn.discard()
    assert _state(fast) == _state(slow)


@given(st.lists(st.tuples(st.one_of(st.none(), st.sampled_from([0.0, 5.0, 7.5])), st.integers(0, 12)),
                min_size=1, max_size=10, unique_by=lambda t: t[1]))
@settings(max_examples=150, deadline=None)
def test_earliest_is_the_min_by_creation_then_name(spec: list[tuple[float | None, int]]) -> None:
    from koordpy.core.model import creation_time, earliest

    pods = [_pod(f"e-{n}").model_copy(update={"creation": c}) for c, n in spec]
    assert earliest(pods) is min(pods, key=lambda p: (creation_time(p.creation), p.name))


# A pod: (name, gang it joins now or None); a step of refreshes: the pods that changed in it.
FILINGS = st.lists(st.lists(st.tuples(st.integers(0, 7), st.sampled_from([None, "a", "b", "c"])), max_size=10),
                   min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(FILINGS)
def test_new_pods_are_filed_a_gang_at_a_time_as_pod_by_pod(steps: list[list[tuple[int, str | None]]]) -> None:
    """The view files the pods it never filed a gang at a time (``View._file_fresh``): each gang's
    members, the view's tables and the gangs marked for a rebuild come out as ``_file`` of each pod
    in turn leaves them."""
    from koordpy.core.view import View

    bulk, ref = View(), View()
    for changed in steps:
        pods = {}
        for i, gang in changed:  # a pod changed twice in a step is seen once, as the last change
            labels = {"pod-group.scheduling.sigs.k8s.io": gang} if gang else {}
            pods[f"p{i}"] = _pod(f"p{i}", labels=labels)
        touched_bulk: set[str] = set()
        touched_ref: set[str] = set()
        fresh: dict[str, dict[str, Pod]] = {}
        for p in pods.values():
            new = p.gang_name
            if p.key in bulk.member_of:
                bulk._file_fresh(fresh, touched_bulk)
                bulk._file(p, new, touched_bulk, p.key)
            elif new is not None:
                fresh.setdefault(new, {})[p.key] = p
            ref._file(p, new, touched_ref, p.key)
        bulk._file_fresh(fresh, touched_bulk)
        assert touched_bulk == touched_ref
        assert bulk.member_of == ref.member_of
        assert {g: list(m.items()) for g, m in bulk.members.items()} == \
            {g: list(m.items()) for g, m in ref.members.items()}


def test_parked_messages_are_found_through_their_jobs_as_merging_them_finds_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21, goal 4: the message a member not tried this cycle was left with is found through its
    parked job (``Cycle._kept``) rather than by merging every parked job's messages
    (``CycleResult.pending``): after every cycle of 40 simulated runs, for every gang, the same."""
    from koordpy.core.cycle import Cycle
    from koordpy.sim.simulator import World, simulate
    from tests.core.test_view import workload

    found_kept = [0]  # messages found through a parked job, not among the cycle's own
    real = Cycle.run

    def checking(cycle: Cycle) -> Any:
        result = real(cycle)
        merged = result.pending
        for key, gang in cycle.view.gangs.items():
            found: dict[str, str] = {k: result.waiting[k] for k in gang.keys if k in result.waiting}
            tried = len(found)
            cycle._kept(key, gang.keys, found)
            assert found == {k: merged[k] for k in gang.keys if k in merged}
            found_kept[0] += len(found) - tried
        return result

    monkeypatch.setattr(Cycle, "run", checking)
    for seed in range(40):
        simulate(World.from_objects([("t", o) for o in workload(seed)]))
    assert found_kept[0] > 0  # the runs did leave members parked while their gangs were looked at
