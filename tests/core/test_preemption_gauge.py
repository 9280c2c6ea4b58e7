"""The refine's bound by resources (``preemption._Gauge``): it only skips placements certain to fail,
so a preemption ends as it would without it, and it skips most of them where a job's victims all
have to go (the GangPreemptionAffinity workload's shape)."""

from __future__ import annotations

from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from koordpy.core import preemption
from koordpy.sim.simulator import SimulationResult
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, run, spine_block_nodes

HIGH, LOW, TOP = priority_class("high", 1000), priority_class("low", 10), priority_class("top", 5000)
LAYOUT = {"spine-a": {"blk-a": [0, 1, 2], "blk-b": [3, 4, 5]}}
HOST, BLOCK = "kubernetes.io/hostname", "network.topology.nvidia.com/block"


def _term(app: str, key: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def _outcome(out: SimulationResult) -> tuple[Any, ...]:
    return (sorted(out.preempted), sorted(out.bound.items()), sorted(out.nominated.items()),
            sorted(out.pending.items()))


def _both(objects: list[dict[str, Any]]) -> tuple[tuple[Any, ...], tuple[Any, ...], int, int]:
    """The outcome with the gauge and without it, and how many placements each verified."""
    calls = [0, 0]
    verify = preemption.Preemptor._verify

    def counted(slot: int) -> Any:
        def wrapper(self: preemption.Preemptor, *a: Any, **kw: Any) -> Any:
            calls[slot] += 1
            return verify(self, *a, **kw)
        return wrapper

    with mock.patch.object(preemption.Preemptor, "_verify", counted(0)):
        gauged = _outcome(run(*objects))
    with mock.patch.object(preemption.Preemptor, "_verify", counted(1)), \
            mock.patch.object(preemption._Gauge, "may_return", lambda self, v: True):
        plain = _outcome(run(*objects))
    return gauged, plain, calls[0], calls[1]


def _affinity_workload(nodes: int, low_per_node: int, low_labels: dict[str, str]) -> list[dict[str, Any]]:
    """GangPreemptionAffinity's shape: each node runs an anchor pod the gang must sit beside (a
    priority above the gang's, so no victim) and low pods of which every one must go; there the low
    pods carry the anchor's labels too, so the gang's affinity matches them as well."""
    layout = {"spine-a": {"blk-a": list(range(nodes))}}
    out: list[dict[str, Any]] = [*spine_block_nodes(layout, cpu="4"), SPINE_BLOCK_CNT, HIGH, LOW, TOP]
    for n in range(nodes):
        out.append(pod(f"anchor-{n}", cpu="100m", node_name=f"node-{n}", priority_class="top", scheduler="other",
                       labels={"app": "anchor"}))
        out.extend(pod(f"low-{n}-{i}", cpu="300m", node_name=f"node-{n}", priority_class="low", scheduler="other",
                       labels=low_labels) for i in range(low_per_node))
    members = []
    for i in range(nodes):
        p = pod(f"train-{i}", cpu="3800m", group="train", index=i, priority_class="high")
        p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            _term("anchor", HOST)]}}
        members.append(p)
    out += [podgroup("train", nodes), *members]
    return out


@pytest.mark.parametrize("low_labels", [{}, {"app": "anchor"}], ids=["unlabelled", "like-the-anchors"])
def test_a_gang_whose_victims_all_have_to_go_is_not_placed_again_for_each_of_them(low_labels: dict[str, str]) -> None:
    # Low pods the gang's affinity matches too (as the benchmark's do) are turned away alike.
    gauged, plain, with_gauge, without = _both(_affinity_workload(4, 10, low_labels))
    assert gauged == plain
    assert len(gauged[0]) == 40 and len(gauged[1]) == 4  # every low pod goes, the gang binds
    # Without the gauge each of the first MAX_REFINED victims is put back and the gang placed again.
    assert without > 40 and with_gauge <= 4, (with_gauge, without)


def test_a_victim_the_affinity_wants_returns_only_where_room_allows() -> None:
    # The gang's affinity names app=x, which only low pods carry: putting one back adds a match but
    # no room, so the gauge's bound by resources holds for it as for any victim, and nothing changes.
    objects: list[dict[str, Any]] = [*spine_block_nodes({"s": {"b": [0, 1]}}, cpu="4"), SPINE_BLOCK_CNT, HIGH, LOW]
    objects += [pod(f"x-{n}", cpu="2", node_name=f"node-{n}", priority_class="low", scheduler="other",
                    labels={"app": "x"}) for n in range(2)]
    p = pod("p", cpu="3", priority_class="high")
    p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("x", BLOCK)]}}
    objects.append(p)
    gauged, plain, with_gauge, without = _both(objects)
    assert gauged == plain and with_gauge <= without


def _anti(*terms: tuple[str, str]) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"role": role}}, "topologyKey": key} for role, key in terms]}}


def test_the_gauge_caps_a_node_only_where_every_pair_of_members_repels() -> None:
    # (From a review.) Members a1, a2 repel each other on ka and b1 on kb; b1 repels b on ka. Node n
    # has kb only: a1 and a2 may share it. The cap once counted n as one member (it carried one of the
    # pairs' keys), so the gauge turned away m1's return, which the one-by-one placement (a1, a2 on n,
    # b1 on p) fits: m1 was evicted for nothing.
    objects: list[dict[str, Any]] = [
        node("n", cpu="4", labels={"kb": "n"}),
        node("m", cpu="4", labels={"ka": "m", "kb": "m", "b-ok": "true"}),
        node("p", cpu="4", labels={"ka": "p", "kb": "p", "b-ok": "true"}), HIGH, LOW, TOP]
    objects += [pod(f"y-{w}", cpu="1", node_name=w, priority_class="top", scheduler="other", labels={"role": "y"})
                for w in ("m", "p")]  # keeps a1 and a2 off m and p by a rule between pods
    objects += [pod(name, cpu=cpu, node_name=w, priority_class="low", scheduler="other")
                for name, cpu, w in (("n1", "2", "n"), ("n2", "2", "n"), ("m1", "3", "m"), ("p1", "3", "p"))]
    b = pod("b1", cpu="2", group="g", index=0, priority_class="high", labels={"role": "b"})
    b["spec"]["nodeSelector"] = {"b-ok": "true"}
    b["spec"]["affinity"] = _anti(("b", "ka"))
    b["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
                                               "labelSelector": {"matchLabels": {"role": "b"}}}]
    members = [b]
    for i in (1, 2):
        a = pod(f"a{i}", cpu="2", group="g", index=i, priority_class="high", labels={"role": "a"})
        a["spec"]["affinity"] = _anti(("a", "ka"), ("b", "kb"), ("y", HOST))
        members.append(a)
    gauged, plain, _, _ = _both([*objects, podgroup("g", 3), *members])
    assert gauged == plain
    assert gauged[0] == ["default/n1", "default/n2", "default/p1"]  # m1 stays


@st.composite
def _clusters(draw: st.DrawFn) -> list[dict[str, Any]]:
    objects: list[dict[str, Any]] = [*spine_block_nodes(LAYOUT, cpu="4"), SPINE_BLOCK_CNT, HIGH, LOW, TOP]
    apps = st.sampled_from(["a", "b", "c"])
    for n in range(6):
        if draw(st.booleans()):
            objects.append(pod(f"top-{n}", cpu="500m", node_name=f"node-{n}", priority_class="top",
                               scheduler="other", labels={"app": draw(apps)}))
        for i in range(draw(st.integers(1, 6))):
            objects.append(pod(f"low-{n}-{i}", cpu=draw(st.sampled_from(["300m", "500m", "1"])), node_name=f"node-{n}",
                               priority_class="low", scheduler="other", labels={"app": draw(apps)}))
    size = draw(st.integers(1, 4))
    members = []
    for i in range(size):
        cpu = draw(st.sampled_from(["1", "2", "3400m", "3800m"]))
        p = pod(f"g-{i}", cpu=cpu, group="g", index=i, priority_class="high", labels={"app": "g"})
        affinity: dict[str, Any] = {}
        if draw(st.booleans()):
            affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                _term(draw(apps), draw(st.sampled_from([HOST, BLOCK])))]}
        if draw(st.booleans()):
            affinity["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [
                _term(draw(st.sampled_from(["a", "b", "g"])), draw(st.sampled_from([HOST, BLOCK])))]}
        if affinity:
            p["spec"]["affinity"] = affinity
        if draw(st.booleans()):
            p["spec"]["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": draw(st.sampled_from([HOST, BLOCK])),
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": draw(st.sampled_from(["a", "g"]))}}}]
        members.append(p)
    gather = [{"layer": "BlockLayer", "strategy": "MustGather"}] if draw(st.booleans()) else None
    objects += [podgroup("g", size, gather=gather), *members]
    return objects




@st.composite
def _richer(draw: st.DrawFn) -> list[dict[str, Any]]:
    """More of what the count by resources must hold through (from a review): a node without the
    block label, nodes with only some of two anti-affinity keys, pending pods nominated on nodes (of
    lower and higher priority, the job's own too), terminating pods, host ports, victims in another
    namespace, victims repelling the job, members of two kinds repelling over different keys."""
    objects: list[dict[str, Any]] = [SPINE_BLOCK_CNT, HIGH, LOW, TOP, priority_class("mid", 100)]
    n_nodes = 7
    for n in range(n_nodes):
        labels = {"network.topology.nvidia.com/spine": "spine-a"}
        if n < 6:
            labels["network.topology.nvidia.com/block"] = "blk-a" if n < 3 else "blk-b"
        labels.update({k: f"{k}-{n}" for k in ("ka", "kb") if draw(st.booleans())})
        objects.append(node(f"node-{n}", cpu="4", labels=labels))
    apps = st.sampled_from(["a", "b", "c"])
    for n in range(n_nodes):
        if draw(st.booleans()):
            objects.append(pod(f"top-{n}", cpu="500m", node_name=f"node-{n}", priority_class="top",
                               scheduler="other", labels={"app": draw(apps)}))
        for i in range(draw(st.integers(0, 5))):
            p = pod(f"low-{n}-{i}", cpu=draw(st.sampled_from(["300m", "500m", "1"])), node_name=f"node-{n}",
                    priority_class=draw(st.sampled_from(["low", "low", "mid"])), scheduler="other",
                    labels={"app": draw(apps)})
            p["metadata"]["namespace"] = draw(st.sampled_from(["default", "other"]))
            if draw(st.integers(0, 9)) == 0:
                p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
            if draw(st.integers(0, 5)) == 0:
                p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
            if draw(st.integers(0, 5)) == 0:
                p["spec"]["affinity"] = _anti(("g", draw(st.sampled_from([HOST, BLOCK]))))
            objects.append(p)
    for j in range(draw(st.integers(0, 3))):  # pending, nominated somewhere
        p = pod(f"nom-{j}", cpu=draw(st.sampled_from(["500m", "1", "2"])),
                priority_class=draw(st.sampled_from(["low", "mid", "top"])), labels={"app": draw(apps)})
        p["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "nowhere"}
        p["status"] = {"nominatedNodeName": f"node-{draw(st.integers(0, n_nodes - 1))}"}
        objects.append(p)
    size = draw(st.integers(1, 4))
    ports = draw(st.booleans())
    members = []
    for i in range(size):
        role = draw(st.sampled_from(["a", "b"]))
        p = pod(f"g-{i}", cpu=draw(st.sampled_from(["1", "2", "3400m", "3800m"])), group="g", index=i,
                priority_class="high", labels={"app": "g", "role": role})
        if draw(st.booleans()):
            p["spec"]["affinity"] = _anti(("a", "ka" if role == "a" else "kb"), ("b", "kb" if role == "a" else "ka"))
        elif draw(st.booleans()):
            p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {**_term(draw(apps), draw(st.sampled_from([HOST, BLOCK]))), "namespaceSelector": {}}]}}
        if draw(st.integers(0, 3)) == 0:
            p["spec"]["topologySpreadConstraints"] = [{
                "maxSkew": 1, "topologyKey": HOST, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"role": role}}}]
        if ports:
            p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        if draw(st.integers(0, 3)) == 0:
            p["status"] = {"nominatedNodeName": f"node-{draw(st.integers(0, n_nodes - 1))}"}
        members.append(p)
    gather = [{"layer": "BlockLayer", "strategy": "MustGather"}] if draw(st.booleans()) else None
    return [*objects, podgroup("g", size, gather=gather), *members]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(_clusters(), _richer()))
def test_the_gauge_changes_no_outcome(objects: list[dict[str, Any]]) -> None:
    gauged, plain, with_gauge, without = _both(objects)
    assert gauged == plain
    assert with_gauge <= without
