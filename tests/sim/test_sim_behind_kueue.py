"""Issue 34, item 2's decision, over time in ``koordpy simulate``: a stale gang any of whose members
Kueue admitted (``kueue.x-k8s.io/podset`` / ``kueue.x-k8s.io/workload``) is Kueue's to recover (its
waitForPodsReady): koordpy reports it (Event, condition, metric) and does not evict it, past the usual
grace too; unless ``admittedStaleGangGracePeriodSeconds`` is not negative or the job sets its own
grace. A gang Kueue did not admit is evicted as before. ``koordpy explain`` says who recovers it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from koordpy.api.raw import rfc3339
from koordpy.core.explain import explain_podgroup
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import podgroup
from tests.core.test_behind_kueue import admitted
from tests.sim.test_sim_stale import NODES, out_of_cpu, running

EVICTED = {"default/job-0", "default/job-1"}


def gang(kueue: bool, annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """A gang of three (a PodGroup) whose third member the kubelet refused: it runs two of its three.
    ``kueue``: its pods carry what Kueue writes on the pods of a workload it admitted."""
    pods = [running("job-0", "n0"), running("job-1", "n1"), out_of_cpu("job-2", "n2")]
    if kueue:
        pods = [admitted(p, workload="job-train-4c5d6") for p in pods]
    return [*NODES, podgroup("job", 3, annotations=annotations), *pods]


def run(objects: list[dict[str, Any]], stale_grace: float = 60.0,
        admitted_stale_grace: float = -1.0) -> tuple[SimulationResult, World]:
    w = World.from_objects([("test", o) for o in objects])
    return simulate(w, stale_grace=stale_grace, admitted_stale_grace=admitted_stale_grace), w


def told(result: SimulationResult, reason: str) -> list[str]:
    return [e.message for e in result.events if e.reason == reason]


def test_a_stale_gang_kueue_admitted_is_reported_and_not_evicted_past_the_usual_grace() -> None:
    w = World.from_objects([("test", o) for o in gang(kueue=True)])
    start = w.now
    result = simulate(w)
    assert result.evicted == {}
    assert told(result, "GangStale") == [
        f"gang default/job is stale since {rfc3339(start)}: 2 members running, minimum 3; Kueue admitted it "
        "(workload default/job-train-4c5d6) and recovers it (its waitForPodsReady requeues it): koordpy reports it "
        "only, never evicts it"]
    assert told(result, "StaleGangEvicted") == []


def test_the_same_gang_without_kueue_is_evicted_after_the_usual_grace() -> None:
    result, _ = run(gang(kueue=False))
    assert set(result.evicted) == EVICTED
    assert len(told(result, "StaleGangEvicted")) == 1


def test_a_stale_gang_kueue_admitted_is_evicted_when_the_setting_gives_a_grace() -> None:
    result, _ = run(gang(kueue=True), admitted_stale_grace=30)
    assert set(result.evicted) == EVICTED
    assert "for its grace of 30s" in told(result, "StaleGangEvicted")[0]
    assert "evicted at" in told(result, "GangStale")[0]


def test_a_stale_gang_kueue_admitted_is_evicted_when_the_job_sets_its_own_grace() -> None:
    result, _ = run(gang(kueue=True, annotations={"koordpy.io/staleness-grace-period": "20s"}))
    assert set(result.evicted) == EVICTED
    assert "for its grace of 20s" in told(result, "StaleGangEvicted")[0]


def test_the_setting_for_admitted_gangs_leaves_other_gangs_alone() -> None:
    # Other gangs keep staleGangGracePeriodSeconds: negative here, so reported only whatever the other.
    result, _ = run(gang(kueue=False), stale_grace=-1, admitted_stale_grace=5)
    assert result.evicted == {}


def test_explain_says_kueue_recovers_a_stale_gang_it_admitted() -> None:
    w = World.from_objects([("test", o) for o in gang(kueue=True)])
    snap = w.snapshot(frozenset({"koordpy"}))
    found = explain_podgroup(snap, SchedulerState(), w.now, "default/job")
    assert found is not None
    [facts] = found.gangs
    assert dict(facts.details)["stale"].endswith(
        "Kueue admitted it (workload default/job-train-4c5d6) and recovers it (its waitForPodsReady requeues it): "
        "koordpy reports it only, never evicts it")


def test_simulate_takes_the_grace_for_admitted_gangs_from_its_flag(tmp_path: Path, capsys: Any) -> None:
    import json

    from koordpy.cli.main import main

    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all(gang(kueue=True)))
    assert main(["simulate", "-f", str(path), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["evicted"] == {}
    assert main(["simulate", "-f", str(path), "-o", "json", "--admitted-stale-gang-grace-period", "10"]) == 0
    assert set(json.loads(capsys.readouterr().out)["evicted"]) == EVICTED


OWN_NEGATIVE = {"koordpy.io/staleness-grace-period": "-1s"}


def test_a_gang_kueue_admitted_that_sets_its_own_negative_grace_is_not_said_to_be_kueues_to_recover() -> None:
    # Its own grace decided (reported only), not the setting for admitted gangs: Kueue is not credited.
    w = World.from_objects([("test", o) for o in gang(kueue=True, annotations=OWN_NEGATIVE)])
    start = w.now
    result = simulate(w, admitted_stale_grace=30)  # were the setting's grace used, it would evict
    assert result.evicted == {}
    assert told(result, "GangStale") == [
        f"gang default/job is stale since {rfc3339(start)}: 2 members running, minimum 3; its grace is negative: "
        "reported only, never evicted"]


def test_explain_does_not_credit_kueue_with_a_gang_whose_own_grace_decided() -> None:
    w = World.from_objects([("test", o) for o in gang(kueue=True, annotations=OWN_NEGATIVE)])
    found = explain_podgroup(w.snapshot(frozenset({"koordpy"})), SchedulerState(), w.now, "default/job")
    assert found is not None
    [facts] = found.gangs
    assert dict(facts.details)["stale"].endswith(": 2 members running, minimum 3; its grace is negative: "
                                                 "reported only, never evicted")
