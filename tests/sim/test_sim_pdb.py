"""``koordpy simulate`` with PodDisruptionBudget manifests: a budget's status as given, or counted
from the pods when the manifest has none, and a budget that does not parse (exit 2, the field)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from koordpy.api.disruption import STORE
from koordpy.core.cluster import Cluster
from koordpy.core.decisions import CycleResult, Preempt
from koordpy.sim.simulator import World
from tests.builders import node
from tests.cli.test_simulate import NEW_JOB, NEW_POD, ROOT, koordpy, one_error_line, write

BEYOND = "it evicts 1 pod(s) of PodDisruptionBudget shop/web beyond its budget"


def _budget(status: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": "web", "namespace": "shop"},
                           "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec}}
    if status is not None:
        out["status"] = status
    return out


def _replay(tmp_path: Path, budget: dict[str, Any]) -> dict[str, Any]:
    """The kubectl dump's what-if (tests/cli/test_simulate.py): a job of 3 whose third member needs
    the room of shop's web pod, with a budget over that pod."""
    job = tmp_path / "new-job.yaml"
    job.write_text(NEW_JOB.replace("MIN", "3") + "".join(
        NEW_POD.replace("-I", f"-{i}").replace("POLICY", "PreemptLowerPriority") for i in range(3)))
    (tmp_path / "pdb.yaml").write_text(yaml.safe_dump(budget))
    cluster = (ROOT / "tests" / "data" / "kubectl-get-cluster.yaml").read_text()
    run = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", "-", "-f", str(job), "-f",
                          str(tmp_path / "pdb.yaml"), "-o", "json"], input=cluster, capture_output=True, text=True,
                         cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def _said(out: dict[str, Any]) -> str:
    return " ".join(e["message"] for e in out["events"] if "preemption: preempting" in e["message"])


def test_a_spent_budget_given_with_its_status_is_named_when_no_other_way_exists(tmp_path: Path) -> None:
    out = _replay(tmp_path, _budget({"disruptionsAllowed": 0}, minAvailable=1))
    assert out["preempted"] == ["shop/web-5d9c8b7f6d-q7w2e"]  # the only way: the budget cannot stop it
    assert BEYOND in _said(out)
    within = _replay(tmp_path, _budget({"disruptionsAllowed": 1}, minAvailable=1))
    assert within["preempted"] == ["shop/web-5d9c8b7f6d-q7w2e"] and "PodDisruptionBudget" not in _said(within)


def test_a_budget_without_status_is_counted_from_the_pods(tmp_path: Path) -> None:
    # One healthy web pod: minAvailable 1 allows none, maxUnavailable 1 allows it.
    assert BEYOND in _said(_replay(tmp_path, _budget(None, minAvailable=1)))
    assert "PodDisruptionBudget" not in _said(_replay(tmp_path, _budget(None, maxUnavailable=1)))


def test_a_budget_that_does_not_parse_exits_2_naming_the_field(tmp_path: Path) -> None:
    bad = _budget(None, minAvailable="most")
    path = write(tmp_path, "bad.yaml", node("n"), bad)
    line = one_error_line(koordpy("simulate", "-f", path, "-o", "json"))
    assert line.startswith(f"{path} (document 2): ")
    assert "PodDisruptionBudget shop/web" in line and "spec.minAvailable" in line


def test_each_eviction_spends_the_budgets_covering_the_pod_between_cycles() -> None:
    # The world plays the disruption controller: an evicted pod takes one from its budget (none from
    # a budget that lists it in disruptedPods already), so the next cycle's snapshot sees it spent.
    def budget(name: str, disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
        out = _budget({"disruptionsAllowed": 1, "disruptedPods": {p: "2026-01-01T00:00:00Z" for p in disrupted}},
                      minAvailable=1)
        out["metadata"]["name"] = name
        return out

    web = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": "shop",
                                                           "labels": {"app": "web"}},
           "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "nginx"}]}}
    world = World.from_objects([("t", o) for o in (node("n"), web, budget("a"), budget("b", ("web-0",)))])
    world.apply(CycleResult(decisions=[Preempt("shop/web-0", "m", "job", "p")]))
    allowed = {k: b.disruptions_allowed for k, b in world.snapshot(frozenset({"koordpy"})).of(STORE).items()}
    assert allowed == {"shop/a": 0, "shop/b": 1}


def test_an_eviction_lowers_the_healthy_count_too_so_the_next_cycle_spends_it_once() -> None:
    # A status with currentHealthy (as a live dump gives it): the world lowers both, as the disruption
    # controller would; the core, which takes off what a status has not counted yet
    # (Budgets.settle), must then take nothing more off. Three healthy pods, minAvailable 1: two
    # allowed; one evicted leaves one allowed, not none.
    def web(i: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"web-{i}", "namespace": "shop",
                                                               "labels": {"app": "web"}},
                "spec": {"nodeName": "n", "containers": [{"name": "c", "image": "nginx"}]}}

    budget = _budget({"disruptionsAllowed": 2, "currentHealthy": 3, "desiredHealthy": 1, "expectedPods": 3},
                     minAvailable=1)
    world = World.from_objects([("t", o) for o in (node("n"), web(0), web(1), web(2), budget)])
    world.apply(CycleResult(decisions=[Preempt("shop/web-0", "m", "job", "p")]))
    snap = world.snapshot(frozenset({"koordpy"}))
    [after] = snap.of(STORE).values()
    assert (after.disruptions_allowed, after.current_healthy) == (1, 2)
    assert Cluster(snap).budgets.allowed.tolist() == [1]
