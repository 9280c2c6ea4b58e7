"""``koordpy run`` with Volcano HyperNodes, Volcano PodGroups and a KAI Topology on a real kube-apiserver."""

from __future__ import annotations

from typing import Any

from tests.builders import node, pod
from tests.core.dialects.test_topology_sources import (
    NET,
    PARTITIONS,
    RACKS,
    hypernode,
    kai,
    seed_004,
    vc_job,
    vc_pod,
    volcano_pg,
    zoned,
)
from tests.integration.kube import Kube, Scheduler, fake, wait_for

HN = "hypernodes.topology.volcano.sh"


def nodes_and_hypernodes(objs: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return fake([o for o in objs if o["kind"] == "Node"]), [o for o in objs if o["kind"] == "HyperNode"]


def gpus(p: dict[str, Any]) -> dict[str, Any]:
    """Four GPUs, requested and limited (the API server wants both for an extended resource)."""
    resources = p["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = "4"
    resources["limits"] = {"nvidia.com/gpu": "4"}
    return p


def hn_status(kube: Kube, name: str) -> dict[str, Any]:
    status: dict[str, Any] = kube.get(HN, name, None).get("status") or {}
    return status


def test_volcano_hard_tier_job_lands_in_the_fuller_tier_two_hypernode(kube: Kube, scheduler: Scheduler) -> None:
    nodes, hns = nodes_and_hypernodes(seed_004())
    kube.apply(nodes, hns, pod("busy", cpu="4", node_name="node4", scheduler="default-scheduler"))
    kube.apply(vc_job("within", 3, tier=2), vc_job("tight", 3, tier=1))
    wait_for(lambda: len([p for p in kube.bound() if p.startswith("within-")]) == 3, "the tier-2 job bound")
    assert {n for p, n in kube.bound().items() if p.startswith("within-")} == {"node5", "node6", "node7"}
    message = wait_for(lambda: kube.condition_message("tight-0") or None, "tight-0's condition")
    assert "network topology (hard, highest tier 1)" in message
    assert not [p for p in kube.bound() if p.startswith("tight-")]


def test_volcano_podgroup_with_two_partitions(kube: Kube, scheduler: Scheduler) -> None:
    nodes, hns = nodes_and_hypernodes(seed_004())
    kube.apply(nodes, hns)
    kube.apply(volcano_pg("train", 4, {"mode": "hard", "highestTierAllowed": 2}, PARTITIONS),
               [vc_pod(f"train-{i}", "train", i // 2) for i in range(4)])
    bound = wait_for(lambda: kube.bound() if len(kube.bound()) == 4 else None, "4 partition members bound")
    tier1 = [{f"node{2 * i}", f"node{2 * i + 1}"} for i in range(4)]
    assert {bound["train-0"], bound["train-1"]} in tier1 and {bound["train-2"], bound["train-3"]} in tier1
    status = wait_for(lambda: (kube.get("podgroups.scheduling.volcano.sh", "train").get("status") or {}).get("phase")
                      == "Running" or None, "the Volcano PodGroup Running")
    assert status


def test_kai_required_rack_job_owned_by_a_real_batch_job(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([o for o in zoned(RACKS) if o["kind"] == "Node"]), NET)
    kube.apply(gpus(pod("busy", cpu="1", node_name="n-a1-0", scheduler="default-scheduler")))
    # The Job controller of kube-controller-manager makes the pods from this template (named
    # train-<random>, owned by the Job's uid), as in a real cluster.
    template = gpus(pod("template", cpu="1"))["spec"] | {"restartPolicy": "Never"}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "default",
                        "annotations": kai("network", required="example.com/rack")},
           "spec": {"parallelism": 2, "completions": 2, "template": {"spec": template}}}
    kube.apply(job)
    uid = kube.get("jobs.batch", "train")["metadata"]["uid"]

    def train() -> dict[str, str] | None:
        owned = [p for p in kube.pods().values()
                 if any(r["uid"] == uid and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]
        bound = {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in owned}
        return bound if len(bound) == 2 and all(bound.values()) else None

    bound = wait_for(train, "the Job's two pods made by the Job controller and bound")
    assert set(bound.values()) == {"n-a2-0", "n-a2-1"}  # rack a2 is the exact fit


def test_hypernode_status_follows_nodes(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("gpu-1", cpu="4"), node("gpu-2", cpu="4")]),
               hypernode("rack", 1, extra=[{"type": "Node", "selector": {"regexMatch": {"pattern": "^gpu-"}}}]))
    wait_for(lambda: hn_status(kube, "rack").get("nodeCount") == 2 or None, "nodeCount 2")
    valid = next(c for c in hn_status(kube, "rack")["conditions"] if c["type"] == "Valid")
    assert valid["status"] == "True"
    kube.apply(fake([node("gpu-3", cpu="4")]))
    wait_for(lambda: hn_status(kube, "rack").get("nodeCount") == 3 or None, "nodeCount 3 after a node is added")
    kube.kubectl("delete", "node", "gpu-1", "gpu-2")
    wait_for(lambda: hn_status(kube, "rack").get("nodeCount") == 1 or None, "nodeCount 1 after two are deleted")


def test_a_hypernode_cycle_is_reported_while_everything_else_schedules(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("n0", cpu="4")]), hypernode("loop-a", 2, members=["loop-b"]),
               hypernode("loop-b", 3, members=["loop-a"]))
    kube.apply(pod("plain", cpu="1"))
    wait_for(lambda: kube.bound().get("plain"), "an ordinary pod bound")

    def invalid() -> dict[str, Any] | None:
        conds = hn_status(kube, "loop-a").get("conditions") or []
        return next((c for c in conds if c["type"] == "Valid" and c["status"] == "False"), None)

    cond = wait_for(invalid, "Valid=False on loop-a")
    assert "form a cycle" in cond["message"]
    events = wait_for(lambda: [e for e in kube.events() if e["reason"] == "InvalidMembers"] or None,
                      "an InvalidMembers event")
    assert any(e["involvedObject"]["name"] in ("loop-a", "loop-b") for e in events)
