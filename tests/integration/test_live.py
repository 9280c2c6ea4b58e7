"""``koordpy run`` against a real kube-apiserver: the seeds' cases end to end, bad input, restarts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.builders import SEED_12, SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, spine_block_nodes
from tests.integration.kube import PG, ROOT, ControlPlane, Kube, Scheduler, fake, settle, wait_for

PREFER_BLOCK_SPINE = [{"layer": "BlockLayer", "strategy": "PreferGather"},
                      {"layer": "SpineLayer", "strategy": "PreferGather"}]


def cnt_status(kube: Kube) -> dict[str, Any]:
    status: dict[str, Any] = kube.get("clusternetworktopology", "default", None).get("status") or {}
    return status


def test_crds_are_served_with_printer_columns(kube: Kube) -> None:
    kube.apply(podgroup("columns", 3))
    table = kube.kubectl("get", PG, "-n", "default")
    header = table.splitlines()[0].split()
    assert header[:5] == ["NAME", "MINMEMBER", "PHASE", "SCHEDULED", "AGE"]
    assert table.splitlines()[1].split()[:2] == ["columns", "3"]


def test_seed_example_1_end_to_end(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake(spine_block_nodes(SEED_12)), SPINE_BLOCK_CNT)
    kube.apply(podgroup("topology-demo-job", 4, gather=PREFER_BLOCK_SPINE),
               [pod(f"training-pod-{i}", memory="1Gi", group="topology-demo-job", index=i) for i in range(4)])
    wait_for(lambda: len(kube.bound()) == 4, "4 pods bound")
    assert kube.bound() == {f"training-pod-{i}": f"node-{5 + i}" for i in range(4)}
    detail = wait_for(lambda: cnt_status(kube).get("detailStatus"), "CNT status")
    assert detail[0] == {"childTopologyLayer": "SpineLayer", "childTopologyNames": ["spine-0", "spine-1", "spine-2"],
                         "nodeNum": 12, "topologyInfo": {"topologyLayer": "ClusterTopologyLayer", "topologyName": ""}}
    assert detail[2] == {"childTopologyLayer": "NodeTopologyLayer", "nodeNum": 3,
                         "parentTopologyInfo": {"topologyLayer": "SpineLayer", "topologyName": "spine-0"},
                         "topologyInfo": {"topologyLayer": "BlockLayer", "topologyName": "block-0"}}
    def pg_status() -> dict[str, Any]:
        status: dict[str, Any] = kube.get(PG, "topology-demo-job").get("status") or {}
        return status

    # kwok starts the pods at once, so the gang may already be Running.
    wait_for(lambda: pg_status().get("phase") in ("Scheduled", "Running"), "PodGroup Scheduled")
    assert pg_status()["scheduled"] == 4
    events = wait_for(lambda: [e for e in kube.events() if e["reason"] == "Scheduled"], "Scheduled events")
    assert any("training-pod-0 to node-5" in e["message"] for e in events)
    # No kopf state on the objects it scheduled: no annotations of its own, no finalizers.
    for obj in [*kube.pods().values(), kube.get(PG, "topology-demo-job")]:
        assert not [k for k in (obj["metadata"].get("annotations") or {}) if "kopf" in k]
        assert not obj["metadata"].get("finalizers")


def test_cnt_status_follows_node_changes(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake(spine_block_nodes({"s1": {"b1": [0, 1]}})), SPINE_BLOCK_CNT)
    wait_for(lambda: (cnt_status(kube).get("detailStatus") or [{}])[0].get("nodeNum") == 2, "2 nodes in the status")
    kube.apply(fake(spine_block_nodes({"s2": {"b9": [7]}})))
    wait_for(lambda: (cnt_status(kube).get("detailStatus") or [{}])[0].get("childTopologyNames") == ["s1", "s2"],
             "s2 in the status")
    assert cnt_status(kube)["detailStatus"][0]["nodeNum"] == 3


def test_gang_all_or_nothing_and_a_solo_pod(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node(f"n{i}") for i in range(3)]))
    kube.apply(podgroup("big", 4), [pod(f"big-{i}", group="big") for i in range(4)], pod("solo", cpu="4"))
    wait_for(lambda: "solo" in kube.bound(), "solo bound")
    assert settle(lambda: kube.bound()) == {"solo": kube.bound()["solo"]}
    def messages() -> list[str]:
        return [kube.condition_message(f"big-{i}") for i in range(4)]

    wait_for(lambda: all(messages()), "conditions on the gang")
    msgs = messages()
    assert sum(m.startswith("0/3 nodes are available") for m in msgs) == 1
    assert sum(m.startswith('GangGroup "default/big" gets rejected') for m in msgs) == 3
    assert any(e["reason"] == "FailedScheduling" and e["type"] == "Warning" for e in kube.events())


def test_ganggroup_binds_all(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node(f"n{i}") for i in range(3)]))
    groups = ["default/master", "default/worker"]
    kube.apply(podgroup("master", 1, groups=groups), podgroup("worker", 2, groups=groups),
               pod("m-0", group="master"), pod("w-0", group="worker"), pod("w-1", group="worker"))
    wait_for(lambda: len(kube.bound()) == 3, "3 bound")
    assert sorted(kube.bound().values()) == ["n0", "n1", "n2"]


def test_annotation_gangs(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("n0"), node("n1")]))
    ann = {"gang.scheduling.koordinator.sh/name": "ann", "gang.scheduling.koordinator.sh/min-available": "3"}
    short = {"gang.scheduling.koordinator.sh/name": "short", "gang.scheduling.koordinator.sh/min-available": "3"}
    kube.apply([pod(f"ann-{i}", cpu="4", annotations=ann) for i in range(3)],
               [pod(f"short-{i}", cpu="1", annotations=short) for i in range(2)])
    wait_for(lambda: sum(k.startswith("ann-") for k in kube.bound()) == 3, "ann gang bound")
    msg = wait_for(lambda: kube.condition_message("short-0"), "short gang condition")
    assert msg == "gang child pod not collect enough, gangName: default/short, podNum: 2, minMember: 3"
    assert not any(k.startswith("short-") for k in kube.bound())


def test_bad_input_is_reported_and_the_rest_schedules(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake(spine_block_nodes({"s1": {"b1": [0, 1, 2]}})))
    bad_cnt = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
               "metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
                   {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpinLayer",
                    "labelKey": ["network.topology.nvidia.com/block"]}]}}
    kube.apply(bad_cnt, podgroup("zero", 0), pod("zero-0", cpu="1", group="zero"),
               pod("bad-json", cpu="1", annotations={"gang.scheduling.koordinator.sh/name": "x",
                                                     "gang.scheduling.koordinator.sh/min-available": "1",
                                                     "gang.scheduling.koordinator.sh/groups": "[not json"}),
               podgroup("layer", 1, gather=[{"layer": "RackLayer", "strategy": "MustGather"}]),
               pod("layer-0", cpu="1", group="layer"), pod("good", cpu="1"))
    wait_for(lambda: "good" in kube.bound(), "the good pod bound")
    assert "spec.minMember" in wait_for(lambda: kube.condition_message("zero-0"), "zero-0 condition")
    assert "JSON array" in wait_for(lambda: kube.condition_message("bad-json"), "bad-json condition")
    layer_msg = wait_for(lambda: kube.condition_message("layer-0"), "layer-0 condition")
    assert "unknown topology layer 'RackLayer'" in layer_msg and "SpinLayer" in layer_msg
    cond = wait_for(lambda: cnt_status(kube).get("conditions"), "CNT condition")
    assert cond[0]["type"] == "Valid" and cond[0]["status"] == "False" and "SpinLayer" in cond[0]["message"]
    wait_for(lambda: {e["reason"] for e in kube.events()} >= {"InvalidPodGroup", "FailedScheduling"}, "events")
    assert set(kube.bound()) == {"good"}


def test_restart_in_the_middle_of_a_gang(kube: Kube, scheduler: Scheduler) -> None:
    # 1,000 one-CPU pods in one Strict gang on 125 eight-CPU nodes: exactly full. The scheduler
    # is killed as soon as the first binds land; a new one must finish the gang, binding no pod
    # twice and overcommitting no node (the invariants after the test check the same).
    kube.apply(fake([node(f"n{i}") for i in range(125)]))
    kube.apply(podgroup("big", 1000), [pod(f"big-{i}", cpu="1", group="big") for i in range(1000)])
    wait_for(lambda: len(kube.bound()) > 0, "the first binds", timeout=60, every=0.02)
    scheduler.kill()
    print(f"killed with {len(kube.bound())}/1000 bound")
    scheduler.start()
    wait_for(lambda: len(kube.bound()) == 1000, "all 1000 bound after the restart", timeout=180)
    per_node: dict[str, int] = {}
    for n in kube.bound().values():
        per_node[n] = per_node.get(n, 0) + 1
    assert set(per_node.values()) == {8}


def bind_directly(kube: Kube, pod_name: str, node_name: str) -> None:
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod_name},
               "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
    kube.kubectl("create", "--raw", f"/api/v1/namespaces/default/pods/{pod_name}/binding", "-f", "-",
                 stdin=json.dumps(binding))


def test_a_gang_left_half_bound_is_finished_first(kube: Kube, controlplane: ControlPlane, tmp_path: Path) -> None:
    # The state a scheduler leaves when it dies between binds: 2 of a 4-pod Strict gang bound.
    # A higher-priority gang arrived meanwhile; the half-bound gang must still get n2 and n3. (The
    # newcomer does not preempt here, so what is checked is the queue's order, not preemption.)
    kube.apply(fake([node(f"n{i}") for i in range(4)]))
    kube.apply(podgroup("half", 4), [pod(f"half-{i}", group="half") for i in range(4)])
    bind_directly(kube, "half-0", "n0")
    bind_directly(kube, "half-1", "n1")
    kube.apply(priority_class("urgent", 1000, "Never"), podgroup("urgent", 2),
               [pod(f"urgent-{i}", group="urgent", priority_class="urgent") for i in range(2)])
    s = Scheduler(controlplane, tmp_path / "koordpy.log")
    s.start()
    try:
        wait_for(lambda: len(kube.bound()) == 4, "the half-bound gang finished")
        assert settle(lambda: kube.bound()) == {f"half-{i}": f"n{i}" for i in range(4)}
    finally:
        s.kill()


def test_pods_of_other_schedulers_are_left_alone(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("n0")]))
    kube.apply(pod("theirs", cpu="1", scheduler="someone-else"))
    assert settle(lambda: kube.bound()) == {}
    raw = kube.get("pod", "theirs")
    assert not any(k.startswith("kopf") for k in (raw["metadata"].get("annotations") or {}))
    assert not raw["metadata"].get("finalizers")
    assert json.dumps(raw).count("koordpy") == 0


def test_the_scheduler_survives_an_apiserver_restart(kube: Kube, scheduler: Scheduler,
                                                    controlplane: ControlPlane) -> None:
    kube.apply(fake([node(f"n{i}") for i in range(3)]))
    kube.apply(pod("before", cpu="1"))
    wait_for(lambda: "before" in kube.bound(), "a pod bound before the restart")
    restart = subprocess.run([str(ROOT / "e2e/controlplane/restart-apiserver.sh"), str(controlplane.dir), "3"],
                             capture_output=True, text=True, timeout=180, check=False)
    assert restart.returncode == 0, restart.stderr
    kube.apply(podgroup("after", 3), [pod(f"after-{i}", cpu="1", group="after") for i in range(3)])
    wait_for(lambda: sum(k.startswith("after-") for k in kube.bound()) == 3, "a gang bound after the restart",
             timeout=90)
    assert scheduler.alive()


def test_a_gated_gang_member_waits_and_the_gang_binds_once_its_gate_is_removed(kube: Kube,
                                                                               scheduler: Scheduler) -> None:
    kube.apply(fake([node("n0")]))
    held = pod("g-2", cpu="1", group="g")
    held["spec"]["schedulingGates"] = [{"name": "example.com/admission"}]
    kube.apply(podgroup("g", 3), pod("g-0", cpu="1", group="g"), pod("g-1", cpu="1", group="g"), held,
               pod("solo", cpu="1"))
    wait_for(lambda: "solo" in kube.bound(), "solo bound")
    # The gang waits for its gated member; the gated pod is reported by the API server, not by us.
    settle(lambda: kube.bound())
    assert sorted(kube.bound()) == ["solo"]
    assert "gated members" in wait_for(lambda: kube.condition_message("g-0"), "g-0's condition")
    assert not [e for e in kube.events() if e["involvedObject"]["name"] == "g-2"]
    kube.kubectl("patch", "pod", "g-2", "-n", "default", "--type=json",
                 "-p", '[{"op": "remove", "path": "/spec/schedulingGates"}]')
    wait_for(lambda: {"g-0", "g-1", "g-2"} <= set(kube.bound()), "the gang bound once the gate is gone")
