"""``koordpy explain`` against a real kube-apiserver, while ``koordpy run`` schedules it."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from tests.builders import SEED_12, SPINE_BLOCK_CNT, pod, podgroup, spine_block_nodes
from tests.integration.kube import ROOT, ControlPlane, Kube, Scheduler, fake, wait_for

MUST_GATHER_SPINE = [{"layer": "SpineLayer", "strategy": "MustGather"}]


def explain(cp: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "koordpy", "explain", *args, "--kubeconfig", cp.kubeconfig],
                          capture_output=True, text=True, cwd=ROOT, check=False, timeout=120)


def test_explain_a_gang_that_cannot_fit(controlplane: ControlPlane, kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake(spine_block_nodes(SEED_12)), SPINE_BLOCK_CNT)
    # Six whole-node pods that must share a spine: no spine has six nodes.
    kube.apply(podgroup("too-big", 6, gather=MUST_GATHER_SPINE),
               [pod(f"too-big-{i}", memory="1Gi", group="too-big", index=i) for i in range(6)])
    wait_for(lambda: "desiredOfferSlot: 6" in kube.condition_message("too-big-0"), "too-big-0 marked unschedulable")
    before = {name: raw["metadata"]["resourceVersion"] for name, raw in kube.pods().items()}

    table = explain(controlplane, "default/too-big-0")
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("pod default/too-big-0: PENDING\n")
    assert "MustGather SpineLayer" in table.stdout
    assert "0 bound, 6 pending" in table.stdout
    assert "SpineLayer/spine-0" in table.stdout and "short 1" in table.stdout

    run = explain(controlplane, "default/too-big-0", "-o", "json")
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    assert out["status"] == "pending"
    d = out["diagnosis"]
    assert d["desired"] == 6 and d["nodes"] == 12
    assert d["domains"] == [{"name": "SpineLayer/spine-0", "offerslots": 5},
                            {"name": "SpineLayer/spine-1", "offerslots": 4},
                            {"name": "SpineLayer/spine-2", "offerslots": 3}]
    assert d["fitsEmptyCluster"] is False
    assert any("5 of 6, in SpineLayer/spine-0" in c for c in out["changes"])
    # The message koordpy run wrote is what explain shows for the pod.
    pods = {p["key"]: p for p in out["pods"]}
    assert "desiredOfferSlot: 6" in pods["default/too-big-0"]["message"]

    group = explain(controlplane, "podgroup", "default/too-big", "-o", "json")
    assert group.returncode == 0, group.stderr
    assert json.loads(group.stdout)["job"]["gangs"][0]["minMember"] == 6

    missing = explain(controlplane, "default/nobody")
    assert missing.returncode == 1
    assert "no pod default/nobody in the cluster" in missing.stderr
    # explain read and never wrote: no pod changed because of it.
    after = {name: raw["metadata"]["resourceVersion"] for name, raw in kube.pods().items()}
    assert after == before
