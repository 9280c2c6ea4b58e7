"""Every example under examples/ applied to a real API server as it is (`kubectl apply -f`), and
placed live as `koordpy simulate` places it (issue 17 item 14).

The local control plane runs no kube-controller-manager, so nothing turns a Job into pods there:
after the apply, e2e/controlplane/job-pods.py (the documented step) creates each Job's pods from
its template, owned by the Job's real uid, with the names `simulate` gives them. On kind the Job
controller does that itself (with random names)."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial

import pytest

from tests.integration.kube import ROOT, Kube, Scheduler, settle, wait_for, when

EXAMPLES = sorted(p.name for p in (ROOT / "examples").iterdir() if p.is_dir())


def simulated(name: str) -> dict[str, object]:
    run = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", str(ROOT / "examples" / name), "-o",
                          "json"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    out: dict[str, object] = json.loads(run.stdout)
    return out


def test_the_examples_are_all_here() -> None:
    assert EXAMPLES == ["kai-rack", "preemption", "spine-block", "volcano-tiers"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_applies_as_it_is_and_binds_where_simulate_says(kube: Kube, scheduler: Scheduler,
                                                                      name: str) -> None:
    out = simulated(name)
    want_bound = {k.split("/", 1)[1]: v for k, v in out["bound"].items()}  # type: ignore[attr-defined]
    want_pending = {k.split("/", 1)[1] for k in out["pending"]}  # type: ignore[attr-defined]
    want_gone = {k.split("/", 1)[1] for k in out["preempted"]}  # type: ignore[attr-defined]
    applied = kube.kubectl("apply", "-f", str(ROOT / "examples" / name))  # refused in part: raises
    assert "created" in applied
    jobs = kube.kubectl("get", "jobs", "-n", "default", "-o", "json")
    made = subprocess.run([sys.executable, str(ROOT / "e2e" / "controlplane" / "job-pods.py")], input=jobs,
                          capture_output=True, text=True, timeout=60, check=True, cwd=ROOT).stdout
    if made.strip():
        kube.kubectl("create", "-f", "-", stdin=made)
    # kwok adopted every node (the example's annotation) and reports it Ready.
    nodes = kube.get("nodes", namespace=None)["items"]
    wait_for(lambda: all(any(c["type"] == "Ready" and c["status"] == "True"
                             for c in (n.get("status") or {}).get("conditions") or [])
                         for n in kube.get("nodes", namespace=None)["items"]) or None, f"{name}'s nodes Ready", 60)
    assert nodes and all(n["metadata"]["annotations"].get("kwok.x-k8s.io/node") == "fake" for n in nodes)
    placed_before = {p for p, pod in kube.pods().items() if pod["spec"].get("nodeName") and p not in want_bound}

    def placed() -> dict[str, str]:
        return {p: n for p, n in kube.bound().items() if p not in placed_before}

    got = wait_for(lambda: when(placed().keys() >= want_bound.keys(), placed()), f"example {name} bound", 120)
    assert got == want_bound, f"example {name}: the live scheduler bound {got}, the simulator {want_bound}"
    for p in sorted(want_pending):
        wait_for(partial(kube.condition_message, p), f"example {name}: {p}'s PodScheduled=False condition")
    for p in sorted(want_gone):
        wait_for(lambda p=p: p not in kube.pods() or None, f"example {name}: victim {p} gone")  # type: ignore[misc]
    assert settle(placed, 2.0) == want_bound
    # No pod went without its owner's constraint.
    assert not [e for e in kube.events() if e["reason"] == "OwnerNotFound"]


def test_pods_whose_owner_never_appears_wait_then_bind_with_a_warning(kube: Kube, scheduler: Scheduler) -> None:
    # What the old kai-rack example did: pods naming their Job by a made-up uid. They say they wait
    # for the owner, then (after OWNER_GRACE_SECONDS) are placed, with an OwnerNotFound warning.
    from koordpy.core.gang import OWNER_GRACE_SECONDS

    kube.kubectl("apply", "-f", str(ROOT / "examples" / "kai-rack" / "cluster.yaml"))
    pods = []
    for i in range(2):
        p = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"orphan-{i}", "namespace": "default",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "orphan", "uid": "uid-made-up",
                                 "controller": True}]},
            "spec": {"schedulerName": "koordpy", "containers": [{"name": "main", "image": "busybox"}]}}
        pods.append(p)
    kube.apply(pods)
    message = wait_for(partial(kube.condition_message, "orphan-0"), "orphan-0 says it waits for its owner", 10)
    assert "waiting for its owner Job default/orphan to appear" in message
    assert "orphan-0" not in kube.bound()
    bound = wait_for(lambda: when({"orphan-0", "orphan-1"} <= kube.bound().keys(), kube.bound()), "orphans bound",
                     OWNER_GRACE_SECONDS + 30)
    assert bound
    warned = wait_for(lambda: {e["involvedObject"]["name"] for e in kube.events() if e["reason"] == "OwnerNotFound"}
                      >= {"orphan-0", "orphan-1"} or None, "OwnerNotFound events")
    assert warned
