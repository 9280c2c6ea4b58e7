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
from tests.builders import SPINE_BLOCK_CNT, pod, podgroup, priority_class, run, spine_block_nodes

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
    # Low pods the gang's affinity matches are no help where an anchor that stays matches it already.
    gauged, plain, with_gauge, without = _both(_affinity_workload(4, 10, low_labels))
    assert gauged == plain
    assert len(gauged[0]) == 40 and len(gauged[1]) == 4  # every low pod goes, the gang binds
    # Without the gauge each of the first MAX_REFINED victims is put back and the gang placed again.
    assert without > 40 and with_gauge <= 4, (with_gauge, without)


def test_a_victim_the_affinity_wants_is_still_tried() -> None:
    # The gang's affinity names app=x, which only low pods carry: the gauge may not turn them away
    # (their return could be what lets the job in), so the placements are tried as before.
    objects: list[dict[str, Any]] = [*spine_block_nodes({"s": {"b": [0, 1]}}, cpu="4"), SPINE_BLOCK_CNT, HIGH, LOW]
    objects += [pod(f"x-{n}", cpu="2", node_name=f"node-{n}", priority_class="low", scheduler="other",
                    labels={"app": "x"}) for n in range(2)]
    p = pod("p", cpu="3", priority_class="high")
    p["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [_term("x", BLOCK)]}}
    objects.append(p)
    gauged, plain, with_gauge, without = _both(objects)
    assert gauged == plain and with_gauge == without


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


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_clusters())
def test_the_gauge_changes_no_outcome(objects: list[dict[str, Any]]) -> None:
    gauged, plain, with_gauge, without = _both(objects)
    assert gauged == plain
    assert with_gauge <= without
