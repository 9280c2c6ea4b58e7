"""bench_kueue's pure parts: the cluster it sizes (every Job fits a rack, all fit at once, the quota
admits all), the Jobs it makes, the order of its runs, the per-Job times it reads from a watch, its
medians and p90, and its check of the final state (``assignment_violations``): each rule it names
is caught and a state that keeps them passes, so its "assignment held" column can say no."""

from __future__ import annotations

import pytest

from benchmarks.bench_kueue import (
    BLOCK,
    HOST,
    JOB_LABEL,
    NODE_CPU,
    POD_CPU,
    QUEUE_LABEL,
    RACK,
    REQUIRED,
    JobTime,
    assignment_violations,
    job_body,
    job_times,
    kueue_objects,
    layout,
    median,
    nearest_rank,
    node_body,
    order,
    summarize,
    table,
)
from tests.integration.checker import Obj

NODES = [node_body(i) for i in range(20)]  # kq-node-0..9 in rack r0, kq-node-10..19 in r1


def bound(name: str, job: str, node: str, rack: str | None = "r0", phase: str = "Running") -> Obj:
    """A pod of ``job`` as the API shows it once bound, with the nodeSelector Kueue's ungater wrote."""
    selector = {BLOCK: "b0", RACK: rack} if rack else {}
    return {"metadata": {"name": name, "namespace": "bench-kueue", "labels": {JOB_LABEL: job}},
            "spec": {"nodeName": node, "nodeSelector": selector}, "status": {"phase": phase}}


def test_the_layout_rounds_to_racks_and_refuses_what_does_not_fit() -> None:
    lay = layout(50, 8, 500)
    assert (lay.nodes, lay.racks, lay.jobs_a_rack) == (500, 50, 5)  # 10 nodes x 4 pods of 2 CPUs, // 8
    assert layout(3, 2, 15).nodes == 20  # whole racks
    with pytest.raises(ValueError, match="does not fit one rack"):
        layout(1, 41, 500)
    assert layout(1, 40, 10).jobs_a_rack == 1
    with pytest.raises(ValueError, match="do not fit"):
        layout(11, 8, 20)  # 2 racks of 5 Jobs
    assert layout(10, 8, 20).capacity == 10


def test_nodes_queues_and_jobs_are_what_the_benchmark_says() -> None:
    assert [n["metadata"]["labels"][RACK] for n in (NODES[0], NODES[9], NODES[10])] == ["r0", "r0", "r1"]
    assert node_body(49)["metadata"]["labels"][BLOCK] == "b0" and node_body(50)["metadata"]["labels"][BLOCK] == "b1"
    assert node_body(0)["status"]["allocatable"]["cpu"] == str(NODE_CPU)
    assert node_body(0)["metadata"]["annotations"] == {"kwok.x-k8s.io/node": "fake"}
    lay = layout(50, 8, 500)
    objs = {o["kind"]: o for o in kueue_objects(lay, hostname_level=False)}
    assert objs["Namespace"]["metadata"]["labels"] == {"koordpy-test/frontends": "true"}  # Kueue's webhooks see it
    assert [lv["nodeLabel"] for lv in objs["Topology"]["spec"]["levels"]] == [BLOCK, RACK]
    levels = {o["kind"]: o for o in kueue_objects(lay, hostname_level=True)}["Topology"]["spec"]["levels"]
    assert [lv["nodeLabel"] for lv in levels] == [BLOCK, RACK, HOST]
    quota = objs["ClusterQueue"]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert int(next(q for q in quota if q["name"] == "cpu")["nominalQuota"]) >= 50 * 8 * POD_CPU  # all admitted
    job = job_body("kp1-j0", 8, "koordpy", "kp1")
    assert job["metadata"]["labels"][QUEUE_LABEL] == objs["LocalQueue"]["metadata"]["name"]
    assert job["spec"]["scheduling"] == {"schedulingPolicy": {"gang": {"minCount": 8}}}
    assert job["spec"]["parallelism"] == job["spec"]["completions"] == 8
    template = job["spec"]["template"]
    assert template["metadata"] == {"labels": {"bench-round": "kp1"}, "annotations": {REQUIRED: RACK}}
    assert template["spec"]["schedulerName"] == "koordpy"


def test_runs_alternate_between_the_schedulers() -> None:
    assert order(2, False) == [("koordpy", 1), ("kube-scheduler", 1), ("koordpy", 2), ("kube-scheduler", 2)]
    assert order(3, True) == [("koordpy", 1), ("koordpy", 2), ("koordpy", 3)]


def test_a_jobs_time_ends_at_its_size_th_bind_and_its_schedulers_share_starts_at_its_last_ungate() -> None:
    created = {"a": 10.0, "b": 10.5}
    job_of = {"a-1": "a", "a-2": "a", "a-3": "a", "b-1": "b", "b-2": "b", "x-1": "x"}
    ungated = {"a-1": 11.0, "a-2": 11.5, "a-3": 11.2, "b-1": 12.0}
    binds = {"a-1": 12.0, "a-2": 12.5, "a-3": 20.0, "b-1": 13.0, "x-1": 11.0}
    times = job_times(created, job_of, ungated, binds, 2)
    # a: its 2nd bind at 12.5; a-3 (bound later) is not among the first two; b has one bind of two.
    assert times == {"a": JobTime(2.5, 1.0)}
    binds["b-2"] = 14.0  # never seen gated (first seen bound on a LIST): ungated when bound
    assert job_times(created, job_of, ungated, binds, 2)["b"] == JobTime(3.5, 0.0)
    ungated["b-2"] = 15.0  # seen ungated only after its bind: held to the bind
    assert job_times(created, job_of, ungated, binds, 2)["b"] == JobTime(3.5, 0.0)


def test_median_and_p90_are_by_nearest_rank_and_summarize_pools_per_scheduler() -> None:
    assert nearest_rank(range(1, 11), 0.9) == 9 and nearest_rank([5.0], 0.9) == 5.0 and nearest_rank([], 0.9) is None
    assert nearest_rank(range(1, 21), 0.9) == 18
    assert median([3.0, None, 1.0, 2.0]) == 2.0 and median([None]) is None
    rounds = [
        {"scheduler": "koordpy", "jobs": 2, "job_s": [1.0, 3.0], "scheduler_s": [0.1, 0.3], "batch_s": 4.0,
         "cpu_s": 2.0, "kueue_cpu_s": 1.0, "violations": 0},
        {"scheduler": "kube-scheduler", "jobs": 2, "job_s": [2.0, 4.0], "scheduler_s": [0.2, 0.2], "batch_s": 5.0,
         "cpu_s": 3.0, "kueue_cpu_s": 1.0, "violations": 1},
        {"scheduler": "koordpy", "jobs": 2, "job_s": [2.0], "scheduler_s": [0.2], "batch_s": None, "cpu_s": 4.0,
         "kueue_cpu_s": 1.0, "violations": 0, "error": "1 Job missing"},
    ]
    s = summarize(rounds)
    k = s["koordpy"]
    assert (k["runs"], k["errors"], k["jobs_measured"], k["jobs"]) == (2, 1, 3, 4)
    assert (k["job_s_median"], k["job_s_p90"], k["batch_s_median"], k["cpu_s_median"]) == (2.0, 3.0, 4.0, 3.0)
    assert s["kube-scheduler"]["violations"] == 1
    shown = table({"jobs": 2, "size": 8, "nodes": 20, "racks": 2, "rounds": rounds, "summary": s})
    assert "| koordpy | 2 | 2.00 / 3.00 |" in shown and "3/4 Jobs bound, 1 runs in error" in shown
    assert "**no (1)**" in shown and "the batch 0.80x" in shown


def test_a_state_inside_kueues_assignment_passes() -> None:
    pods = [bound(f"a-{i}", "a", f"kq-node-{i}") for i in range(3)]
    pods.append(bound("a-3", "a", "kq-node-3", phase="Succeeded"))  # finished: kwok completed it
    pods.append({"metadata": {"name": "b-0", "labels": {JOB_LABEL: "b"}}, "spec": {}})  # not bound yet
    assert assignment_violations(NODES, pods, 4) == []
    host = bound("c-0", "c", "kq-node-5")
    host["spec"]["nodeSelector"][HOST] = "kq-node-5"  # --hostname-level: Kueue names the node too
    assert assignment_violations(NODES, [host], 1) == []


def test_a_pod_outside_its_assignment_or_without_one_is_caught() -> None:
    outside = bound("a-0", "a", "kq-node-12")  # selector r0, node in r1
    problems = assignment_violations(NODES, [outside], 1)
    assert len(problems) == 1 and "outside its nodeSelector" in problems[0], problems
    host = bound("a-0", "a", "kq-node-5")
    host["spec"]["nodeSelector"][HOST] = "kq-node-6"
    assert len(assignment_violations(NODES, [host], 1)) == 1
    none = bound("a-0", "a", "kq-node-1", rack=None)
    problems = assignment_violations(NODES, [none], 1)
    assert len(problems) == 1 and "no Kueue assignment" in problems[0], problems
    gone = bound("a-0", "a", "kq-node-99")
    assert assignment_violations(NODES, [gone], 1) == ["a-0 is bound to kq-node-99, which is not a node"]


def test_a_job_across_racks_or_bound_in_part_is_caught() -> None:
    # Each pod inside its own selector, but the Job's pods in two racks (Kueue assigns one).
    split = [bound("a-0", "a", "kq-node-1"), bound("a-1", "a", "kq-node-11", rack="r1")]
    problems = assignment_violations(NODES, split, 2)
    assert problems == ["Job a: its pods span racks ['r0', 'r1']"], problems
    part = assignment_violations(NODES, split[:1], 2)
    assert part == ["Job a: 1 of its 2 pods bound (a gang bound in part)"], part
