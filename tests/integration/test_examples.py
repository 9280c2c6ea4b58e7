"""Every example under examples/ applied to a real API server as it is (`kubectl apply -f`), and
placed live as `koordpy simulate` places it (issue 17 item 14).

A Job's pods come from kube-controller-manager's Job controller, named <job>-<random>; `simulate`
names the pods it makes for a Job <job>-0, <job>-1...: those are compared per Job, by the nodes the
Job's pods are on (what e2e/kind/run.sh does on kind), every other pod by its name."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from functools import partial
from typing import Any

import pytest

from tests.integration.kube import ROOT, Kube, Scheduler, settle, wait_for, when

# The guides of the controllers users run in front of koordpy (docs/behind-kueue.md, docs/jobset.md): their objects
# mean nothing without that controller, so they are not simulated here but applied live with it
# running, as the guide says (tests/integration/test_kueue_live.py).
FRONTED = {"jobset": "test_jobset_live.py", "kueue": "test_kueue_live.py"}
EXAMPLES = sorted(p.name for p in (ROOT / "examples").iterdir() if p.is_dir() and p.name not in FRONTED)


def simulated(name: str) -> dict[str, object]:
    run = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", str(ROOT / "examples" / name), "-o",
                          "json"], cwd=ROOT, capture_output=True, text=True, timeout=300, check=True)
    out: dict[str, object] = json.loads(run.stdout)
    return out


def test_the_examples_are_all_here() -> None:
    assert EXAMPLES == ["gb200", "kai-rack", "preemption", "spine-block", "volcano-tiers", "workload-api"]
    for name, test in FRONTED.items():  # each guide's folder is applied by a live test of its own
        assert (ROOT / "examples" / name).is_dir() and f'"examples" / "{name}"' in (
            ROOT / "tests" / "integration" / test).read_text(), (name, test)


def job_of(pod: dict[str, Any]) -> str | None:
    """The name of the Job that controls ``pod``, if one does."""
    for ref in pod["metadata"].get("ownerReferences") or []:
        if ref.get("controller") and ref.get("kind") == "Job":
            return str(ref["name"])
    return None


def per_job(where: dict[str, str], jobs: dict[str, str]) -> dict[str, object]:
    """``where`` (pod -> node) with the pods of a Job (``jobs``: pod -> Job) folded into one
    entry per Job, the sorted nodes its pods are on: the Job controller's pod names are random."""
    out: dict[str, object] = {p: n for p, n in where.items() if p not in jobs}
    folded: dict[str, list[str]] = {}
    for p, n in where.items():
        if p in jobs:
            folded.setdefault(f"Job {jobs[p]}", []).append(n)
    return out | {k: sorted(v) for k, v in folded.items()}


@pytest.mark.parametrize("name", EXAMPLES)
def test_each_example_applies_as_it_is_and_binds_where_simulate_says(kube: Kube, scheduler: Scheduler,
                                                                      name: str) -> None:
    out = simulated(name)
    want_bound = {k.split("/", 1)[1]: v for k, v in out["bound"].items()}  # type: ignore[attr-defined]
    want_pending = {k.split("/", 1)[1] for k in out["pending"]}  # type: ignore[attr-defined]
    want_gone = {k.split("/", 1)[1] for k in out["preempted"]}  # type: ignore[attr-defined]
    applied = kube.kubectl("apply", "-f", str(ROOT / "examples" / name))  # refused in part: raises
    assert "created" in applied
    # The pods simulate made for a Job (it says so on stderr): <job>-<i>, for a Job of the example.
    jobs = {j["metadata"]["name"] for j in kube.get("jobs.batch")["items"]}
    simulated_jobs = {p: p.rsplit("-", 1)[0] for p in want_bound.keys() | want_pending
                      if p.rsplit("-", 1)[0] in jobs and p.rsplit("-", 1)[1].isdigit()}
    assert not want_gone & simulated_jobs.keys(), "a Job's preempted pod is replaced by the Job controller"
    want_pending_jobs = Counter(simulated_jobs[p] for p in want_pending if p in simulated_jobs)
    want_pending -= simulated_jobs.keys()
    # kwok adopted every node (the example's annotation) and reports it Ready.
    nodes = kube.get("nodes", namespace=None)["items"]
    wait_for(lambda: all(any(c["type"] == "Ready" and c["status"] == "True"
                             for c in (n.get("status") or {}).get("conditions") or [])
                         for n in kube.get("nodes", namespace=None)["items"]) or None, f"{name}'s nodes Ready", 60)
    assert nodes and all(n["metadata"]["annotations"].get("kwok.x-k8s.io/node") == "fake" for n in nodes)
    # Pods the manifests place themselves (spec.nodeName); a Job's pods are all the controller's.
    placed_before = {p for p, pod in kube.pods().items()
                     if pod["spec"].get("nodeName") and p not in want_bound and not job_of(pod)}

    def placed() -> dict[str, object]:
        pods = kube.pods()
        live_jobs = {p: j for p, raw in pods.items() if (j := job_of(raw))}
        return per_job({p: n for p, n in kube.bound().items() if p not in placed_before}, live_jobs)

    want = per_job(want_bound, simulated_jobs)

    def all_placed() -> dict[str, object] | None:  # every pod simulate binds, and each Job as many
        got = placed()
        return when(all(k in got and (not isinstance(v, list) or len(got[k]) >= len(v))  # type: ignore[arg-type]
                        for k, v in want.items()), got)

    got = wait_for(all_placed, f"example {name} bound", 120)
    assert got == want, f"example {name}: the live scheduler bound {got}, the simulator {want}"
    for p in sorted(want_pending):
        wait_for(partial(kube.condition_message, p), f"example {name}: {p}'s PodScheduled=False condition")
    for job, count in sorted(want_pending_jobs.items()):
        wait_for(lambda job=job, count=count: len([p for p, raw in kube.pods().items()  # type: ignore[misc]
                                                   if job_of(raw) == job and kube.condition_message(p)]) >= count
                 or None, f"example {name}: {count} of Job {job}'s pods with a PodScheduled=False condition")
    for p in sorted(want_gone):
        wait_for(lambda p=p: p not in kube.pods() or None, f"example {name}: victim {p} gone")  # type: ignore[misc]
    assert settle(placed, 2.0) == want
    # No pod went without its owner's constraint.
    assert not [e for e in kube.events() if e["reason"] == "OwnerNotFound"]


def test_pods_whose_owner_never_appears_wait_then_bind_with_a_warning(kube: Kube, scheduler: Scheduler) -> None:
    # Pods naming an owner of a kind koordpy reads topology from, which never appears. They say they
    # wait for the owner, then (after OWNER_GRACE_SECONDS) are placed, with an OwnerNotFound warning.
    # The owner is a JobSet whose CRD is not installed: the garbage collector cannot look that kind
    # up, so it leaves the pods alone (a made-up batch/v1 Job uid, as the old kai-rack example had,
    # gets its pods deleted by the garbage collector in moments).
    from koordpy.core.owners import OWNER_GRACE_SECONDS

    wait_for(lambda: "jobsets.jobset.x-k8s.io" not in kube.kubectl("get", "crd", "-o", "name") or None,
             "no JobSet CRD (test_chart.py installs one for its own tests)", 60)
    kube.kubectl("apply", "-f", str(ROOT / "examples" / "kai-rack" / "cluster.yaml"))
    pods = []
    for i in range(2):
        p = {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"orphan-{i}", "namespace": "default",
            "ownerReferences": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "orphan",
                                 "uid": "uid-made-up", "controller": True}]},
            "spec": {"schedulerName": "koordpy", "containers": [{"name": "main", "image": "busybox"}]}}
        pods.append(p)
    kube.apply(pods)
    message = wait_for(partial(kube.condition_message, "orphan-0"), "orphan-0 says it waits for its owner", 10)
    assert "waiting for its owner JobSet default/orphan to appear" in message
    assert "orphan-0" not in kube.bound()
    bound = wait_for(lambda: when({"orphan-0", "orphan-1"} <= kube.bound().keys(), kube.bound()), "orphans bound",
                     OWNER_GRACE_SECONDS + 30)
    assert bound
    warned = wait_for(lambda: {e["involvedObject"]["name"] for e in kube.events() if e["reason"] == "OwnerNotFound"}
                      >= {"orphan-0", "orphan-1"} or None, "OwnerNotFound events")
    assert warned
