"""Issue 33, items 3b and 3c in ``koordpy simulate``, over time: a victim whose minimum runtime has not
passed is protected until it has (the simulated clock runs to that moment, then it is preempted), and a
job within its preemption delay waits, then preempts at its creation plus the delay. In each dialect:
koordpy's annotations on a pod, a Koordinator (scheduler-plugins) PodGroup, a Volcano PodGroup and a
Kubernetes ``scheduling.k8s.io`` PodGroup; KAI's Queue and PodGroup fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import node, podgroup
from tests.core.dialects.test_upstream import group as workload_group
from tests.core.dialects.test_upstream import member as workload_member
from tests.core.test_runtime import CLASSES, at, kai_group, kai_queue, pending, running, seconds


def sim(*objects: dict[str, Any] | list[dict[str, Any]]) -> tuple[SimulationResult, World]:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    w = World.from_objects([("test", o) for o in flat])
    return simulate(w), w


def messages(out: SimulationResult, pod_key: str) -> list[str]:
    return [e.message for e in out.events if e.obj == pod_key and e.reason == "FailedScheduling"]


def test_a_victim_started_minutes_ago_is_protected_until_its_minimum_runtime_passes() -> None:
    # Started at 00:02 with a minimum of 10 min; the preemptor comes at 00:05.
    victim = running("v", "n1", started=2, annotations={"koordpy.io/min-runtime": "10m"})
    out, w = sim(CLASSES, node("n1"), victim, pending("p", created=5))
    said = messages(out, "default/p")
    assert "victim default/v is protected by its minimum runtime: runs for 3 min of its 10" in said[0]
    assert out.preempted == ["default/v"] and out.bound == {"default/p": "n1"}
    assert w.now >= seconds(12)  # the clock ran to the end of the protection, then the victim's grace


def test_a_job_waits_for_its_delay_then_preempts_at_creation_plus_delay() -> None:
    victim = running("v", "n1", started=0)
    out, w = sim(CLASSES, node("n1"), victim,
                 pending("p", created=5, annotations={"koordpy.io/preemption-delay": "90s"}))
    said = messages(out, "default/p")
    # The simulation starts a second after the last creation it reads.
    assert "would preempt in 89 s (at 2026-01-01T00:06:30Z)" in said[0]
    assert any("preempting 1 lower-priority pod(s)" in m for m in said[1:])
    assert out.preempted == ["default/v"] and out.bound == {"default/p": "n1"}
    assert seconds(6.5) <= w.now


def test_a_koordinator_podgroup_sets_the_minimum_runtime_of_its_members() -> None:
    members = [running(f"g-{i}", f"n{i}", started=2, group="g") for i in range(2)]
    out, w = sim(CLASSES, node("n0"), node("n1"), podgroup("g", 2, annotations={"koordpy.io/min-runtime": "10m"}),
                 *members, pending("p", created=5))
    assert "protected by its minimum runtime" in messages(out, "default/p")[0]
    assert out.preempted and w.now >= seconds(12)


def volcano_group(name: str, min_member: int, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations,
                         "creationTimestamp": at(0)},
            "spec": {"minMember": min_member}}


def test_a_volcano_podgroup_sets_the_minimum_runtime_of_its_members() -> None:
    members = [running(f"g-{i}", f"n{i}", started=2, annotations={"scheduling.k8s.io/group-name": "g"})
               for i in range(2)]
    out, w = sim(CLASSES, node("n0"), node("n1"), volcano_group("g", 2, {"koordpy.io/min-runtime": "10m"}),
                 *members, pending("p", created=5))
    assert "protected by its minimum runtime" in messages(out, "default/p")[0]
    assert out.preempted and w.now >= seconds(12)


def test_a_workload_podgroup_sets_the_preemption_delay_of_its_members() -> None:
    group = workload_group("p", min_count=1, priorityClassName="high")
    group["metadata"]["annotations"] = {"koordpy.io/preemption-delay": "2m"}
    group["metadata"]["creationTimestamp"] = at(5)
    preemptor = workload_member("p-0", group_name="p", priority_class="high")
    preemptor["metadata"]["creationTimestamp"] = at(5)
    out, w = sim(CLASSES, node("n1"), running("v", "n1", started=0), group, preemptor)
    assert "would preempt in 119 s (at 2026-01-01T00:07:00Z)" in messages(out, "default/p-0")[0]
    assert out.preempted == ["default/v"] and w.now >= seconds(7)


def test_a_kai_queue_protects_its_jobs_from_their_last_start() -> None:
    queues = [kai_queue("org", minimum="10m"), kai_queue("team", parent="org")]
    victim_group = kai_group("v", "team", {"kai.scheduler/last-start-timestamp": at(3)})
    victim = running("v-0", "n1", started=1, annotations={"pod-group-name": "v"})
    out, w = sim(CLASSES, node("n1"), *queues, victim_group, victim, pending("p", created=5))
    assert "runs for 2 min of its 10" in messages(out, "default/p")[0]
    assert out.preempted == ["default/v-0"] and w.now >= seconds(13)


def test_a_kai_podgroups_delay_counts_from_its_last_eviction() -> None:
    group = kai_group("p", annotations={"kai.scheduler/last-eviction-timestamp": at(4)}, created=1,
                      preemptionDelay="3m", priorityClassName="high")
    # Its member was made before the eviction KAI stamped (a member made after it would be the
    # eviction koordpy did, unstamped: the later of the two counts).
    preemptor = pending("p-0", created=3, annotations={"pod-group-name": "p"})
    out, w = sim(CLASSES, node("n1"), running("v", "n1", started=0), group, preemptor)
    assert "would preempt in 3 min (at 2026-01-01T00:07:00Z)" in messages(out, "default/p-0")[0]
    assert out.preempted == ["default/v"] and w.now >= seconds(7)


def test_explain_says_the_victim_is_protected_and_when_preemption_is_tried_again(tmp_path: Path,
                                                                                  capsys: Any) -> None:
    from koordpy.cli.main import main

    victim = running("v", "n1", started=2, annotations={"koordpy.io/min-runtime": "10m"})
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all([*CLASSES, node("n1"), victim, pending("p", created=5)]))
    assert main(["explain", "pod", "default/p", "-f", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["preemption"]["tryAgainAt"] == "2026-01-01T00:12:00Z"
    assert any(c.startswith("preemption waits: victim default/v is protected") for c in out["changes"])


def test_a_pod_without_annotations_is_unaffected() -> None:
    out, _ = sim(CLASSES, node("n1"), running("v", "n1", started=4), pending("p", created=5))
    assert "preempting 1 lower-priority pod(s)" in messages(out, "default/p")[0]


def test_simulate_warns_of_a_minimum_runtime_it_cannot_read(tmp_path: Path, capsys: Any) -> None:
    from koordpy.cli.main import main

    victim = running("v", "n1", started=2, annotations={"koordpy.io/min-runtime": "ten minutes"})
    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all([*CLASSES, node("n1"), victim, pending("p", created=5)]))
    assert main(["simulate", "-f", str(path)]) == 0
    err = capsys.readouterr().err
    assert ("koordpy simulate: warning: pod default/v annotation koordpy.io/min-runtime: not a Go duration" in err
            and "counted as 0" in err)


def test_a_protected_composite_keeps_each_child_at_its_minimum() -> None:
    # Composite low needs both children (minGroupCount 2), each at its minimum of 1: child a runs two
    # pods, child b one. Three members bound above a minimum of two, but the one above is a's: b's only
    # pod, whose node the preemptor needs, is protected with the rest.
    from tests.core.dialects.test_upstream_composite import child, composite

    top = composite("low", count=2, priorityClassName="low")
    top["metadata"]["annotations"] = {"koordpy.io/min-runtime": "10m"}
    kids = [child("low-a", 1, parent="low"), child("low-b", 1, parent="low")]
    for kid in kids:
        kid["spec"]["priorityClassName"] = "low"
    members = [workload_member(name, "8", kid, node_name=where, scheduler="other", priority_class="low")
               for name, kid, where in (("a-0", "low-a", "n0"), ("a-1", "low-a", "n1"), ("b-0", "low-b", "n2"))]
    for m in members:
        m["metadata"]["creationTimestamp"] = at(0)
        m["status"] = {"phase": "Running", "startTime": at(2)}
    wanted = pending("p", created=5, nodeSelector={"kubernetes.io/hostname": "n2"})
    out, w = sim(CLASSES, node("n0"), node("n1"), node("n2"), top, *kids, *members, wanted)
    assert "protected by its minimum runtime" in messages(out, "default/p")[0]
    assert out.preempted == ["default/b-0"] and w.now >= seconds(12)


def test_simulate_takes_the_default_delay_from_its_flag(tmp_path: Path, capsys: Any) -> None:
    from koordpy.cli.main import main

    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all([*CLASSES, node("n1"), running("v", "n1", started=0), pending("p", created=5)]))
    assert main(["simulate", "-f", str(path), "-o", "json", "--default-preemption-delay", "60"]) == 0
    out = json.loads(capsys.readouterr().out)
    said = [e["message"] for e in out["events"] if e["object"] == "default/p" and e["reason"] == "FailedScheduling"]
    assert "would preempt in 59 s" in said[0] and "(the default)" in said[0]
    assert out["preempted"] == ["default/v"]
    with pytest.raises(SystemExit) as refused:  # argparse's usage error
        main(["simulate", "-f", str(path), "--default-preempt-min-runtime", "-1"])
    assert refused.value.code == 2
