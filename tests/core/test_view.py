"""The core's standing view (koordpy.core.view) against full rebuilds: a simulation that keeps
the view between cycles must reach exactly what one that rebuilds everything every cycle reaches."""

import json
import random
from typing import Any

import pytest

from koordpy.api import Node, Pod
from koordpy.core.cycle import Cycle, schedule
from koordpy.core.gang import Job
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.verdicts import Wake
from koordpy.sim.simulator import World, simulate
from tests.builders import SEED_12, SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, spine_block_nodes

PREFIX = "gang.scheduling.koordinator.sh/"


def workload(seed: int) -> list[dict[str, Any]]:
    """A random mix: whole- and half-node gangs, Strict and NonStrict with short waits, gather
    rules (PreferGather, MustGather, podCountMultiple), extra members, lone pods, running pods,
    priorities, and a GangGroup."""
    rnd = random.Random(seed)
    objs: list[dict[str, Any]] = [*spine_block_nodes(SEED_12), SPINE_BLOCK_CNT, priority_class("high", 100)]
    for n in rnd.sample(range(12), rnd.randint(0, 4)):
        objs.append(pod(f"running-{n}", cpu=rnd.choice(["2", "4", "8"]), node_name=f"node-{n}",
                        scheduler="default-scheduler"))
    for g in range(rnd.randint(3, 8)):
        size = rnd.randint(1, 6)
        minimum = rnd.randint(1, size)
        ann: dict[str, str] = {}
        if rnd.random() < 0.4:
            ann[PREFIX + "mode"] = "NonStrict"
            ann[PREFIX + "waiting-time"] = f"{rnd.randint(5, 60)}s"
        gather = rnd.choice([None, [{"layer": "BlockLayer", "strategy": "PreferGather"},
                                    {"layer": "SpineLayer", "strategy": "PreferGather"}],
                             [{"layer": "SpineLayer", "strategy": "MustGather"}],
                             [{"layer": "BlockLayer", "strategy": "PreferGather", "podCountMultiple": 2}]])
        objs.append(podgroup(f"g{g}", minimum, gather=gather, annotations=ann, timeout=None))
        cpu = rnd.choice(["2", "4", "8"])
        prio = "high" if rnd.random() < 0.2 else None
        objs += [pod(f"g{g}-{i}", cpu=cpu, group=f"g{g}", index=i, priority_class=prio) for i in range(size)]
    objs += [pod(f"solo-{i}", cpu=rnd.choice(["1", "3", "8"])) for i in range(rnd.randint(0, 4))]
    if rnd.random() < 0.5:
        groups = ["default/ma", "default/wo"]
        objs += [podgroup("ma", 1, groups=groups), podgroup("wo", 2, groups=groups),
                 pod("ma-0", cpu="2", group="ma"), pod("wo-0", cpu="8", group="wo"), pod("wo-1", cpu="8", group="wo")]
    return objs


def outcome(objs: list[dict[str, Any]], incremental: bool) -> dict[str, Any]:
    out = simulate(World.from_objects([("t", o) for o in objs]), incremental=incremental)
    return {"bound": out.bound, "pending": out.pending, "podgroups": out.groups, "rounds": out.rounds,
            "events": sorted(json.dumps([e.kind, e.obj, e.reason, e.message]) for e in out.events)}


@pytest.mark.parametrize("seed", range(40))
def test_incremental_view_matches_full_rebuilds(seed: int) -> None:
    objs = workload(seed)
    assert outcome(objs, incremental=True) == outcome(objs, incremental=False)


def test_a_parked_job_is_retried_only_when_room_appears_where_it_fits(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[str] = []
    real = Cycle._job

    def counting(self: Cycle, job: Job, preempt: bool = True) -> Wake | None:
        tried.append(job.pods[0].name)
        return real(self, job, preempt)

    monkeypatch.setattr(Cycle, "_job", counting)
    nodes = [Node.from_raw(n) for n in (node("n0"), node("n1", labels={"pool": "other"}))]
    waiting = Pod.from_raw(pod("p", cpu="8", nodeSelector={"kubernetes.io/hostname": "n0"}))
    on_n0 = Pod.from_raw(pod("blocker", cpu="8", node_name="n0", scheduler="x"))
    on_n1 = Pod.from_raw(pod("elsewhere", cpu="8", node_name="n1", scheduler="x"))
    state = SchedulerState()

    def cycle(*pods: Pod, now: float = 0.0) -> list[tuple[str, str]]:
        result = schedule(Snapshot(nodes=nodes, pods=list(pods)), state, now)
        assert result.binds or "default/p" in result.pending
        return [(b.pod, b.node) for b in result.binds]

    assert cycle(waiting, on_n0, on_n1) == [] and tried == ["p"]
    assert cycle(waiting, on_n0, on_n1) == [] and tried == ["p"]  # nothing changed: not tried again
    assert cycle(waiting, on_n0) == [] and tried == ["p"]  # room on n1, which p may not use
    # Room on n0: it is woken, but failed a moment ago, so it backs off first (kube-scheduler's 1 s).
    assert cycle(waiting, now=0.5) == [] and tried == ["p"]
    assert cycle(waiting, now=1.0) == [("default/p", "n0")] and tried == ["p", "p"]  # tried, and binds


def test_what_is_parked_for_a_job_that_is_gone_is_forgotten() -> None:
    nodes = [Node.from_raw(node("n0"))]
    waiting = Pod.from_raw(pod("p", cpu="16"))
    state = SchedulerState()
    schedule(Snapshot(nodes=nodes, pods=[waiting]), state, 0.0)
    assert state.view is not None and set(state.view.queue.parked) == {"default/p"}
    schedule(Snapshot(nodes=nodes, pods=[]), state, 1.0)
    assert state.view.queue.parked == {}
    assert state.view.cluster is not None and "default/p" not in state.view.cluster._requests
