"""bench_live's pure parts (issue 21): the time-to-an-answer round (goal 6; live with ``bench_live
--answer``), what it reads from koordpy's log and how it counts; and kube-scheduler's reference round
on the same gangs as upstream PodGroups with a rack key (goal 1): its bodies, the nodes' racks, the
sizes it refuses, and the summary's rows."""

from __future__ import annotations

import json
from typing import Any

from benchmarks.bench_live import (
    answer_stream,
    answer_summary,
    deciding_cycle,
    gang_racks,
    labelled,
    node_body,
    rack_misfit,
    stream,
    summary,
)
from benchmarks.bench_workloads import RACK


def line(end: str, seconds: float, **counts: int) -> bytes:
    return json.dumps({"event": "cycle", "level": "debug", "timestamp": end, "seconds": seconds,
                       "cycle": 1, **counts}).encode()


AFTER = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def test_the_deciding_cycle_is_the_first_after_the_member_that_wrote_the_answer() -> None:
    chunk = b"\n".join([
        line("2027-01-15T07:59:59.900Z", 0.05, unschedulable=40),  # started before the last member: not it
        b'{"event": "binding", "job": "x"}',
        line("2027-01-15T08:00:00.100Z", 0.02, unschedulable=0, nominated=0),  # first to start after: counted
        b"not json",
        line("2027-01-15T08:00:00.300Z", 0.1, unschedulable=20),  # the answer
        line("2027-01-15T08:00:00.500Z", 0.1, unschedulable=3),
    ])
    got = deciding_cycle(chunk, AFTER, "unschedulable")
    assert got is not None and got["cycles"] == 2
    assert abs(got["first_start"] - (AFTER + 0.08)) < 1e-6 and abs(got["end"] - (AFTER + 0.3)) < 1e-6
    assert abs(got["seconds"] - 0.22) < 1e-6
    assert deciding_cycle(chunk, AFTER, "nominated") is None  # no cycle nominated anything


def test_a_log_without_the_counts_finds_nothing() -> None:
    assert deciding_cycle(line("2027-01-15T08:00:01Z", 0.01), AFTER, "unschedulable") is None


def test_end_to_end_is_from_the_last_member_created_to_the_last_answer_seen() -> None:
    assert answer_summary(10.0, {"a": 10.5, "b": 11.25, "c": 99.0}, ["a", "b"]) == 1.25
    assert answer_summary(10.0, {"a": 10.5}, ["a", "b"]) is None


def test_the_gangs_are_complete_and_the_preemptor_names_its_class() -> None:
    pods, groups = answer_stream("preempt20", 20, 4, "high")
    assert len(pods) == 20 and groups[0]["spec"]["minMember"] == 20
    assert {p["spec"]["priorityClassName"] for p in pods} == {"high"}
    assert {p["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] for p in pods} == {"preempt20-0"}
    assert all(p["metadata"]["labels"]["bench-round"] == "preempt20" for p in pods)
    nofit, _ = answer_stream("nofit1000", 1000, 9)
    assert len(nofit) == 1000 and "priorityClassName" not in nofit[0]["spec"]
    assert nofit[0]["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "9"


# -- kube-scheduler's reference round on upstream PodGroups (issue 21, goal 1) ----------------------

def test_a_node_s_rack_is_its_block_and_a_rack_holds_one_gang_of_20_exactly() -> None:
    """Both schedulers gather a gang on the same domain: koordpy on the block, kube-scheduler on the
    rack, the same 10 nodes; 10 x 8 CPUs = 20 pods x 4 CPUs."""
    nodes = [node_body(i) for i in range(200)]
    for n in nodes:
        labels = n["metadata"]["labels"]
        assert labels[RACK] == labels["network.topology.nvidia.com/block"]
    racks: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        racks.setdefault(n["metadata"]["labels"][RACK], []).append(n)
    assert len(racks) == 20 and {len(r) for r in racks.values()} == {10}
    pods, _ = stream("r", 1, 20, "default-scheduler", grouped=True, upstream=True)
    need = sum(int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"]) for p in pods)
    assert need == sum(int(n["status"]["allocatable"]["cpu"]) for n in racks["block-0"]) == 80


def test_the_upstream_stream_is_the_same_pods_as_kubernetes_own_gangs_in_one_rack() -> None:
    koord, _ = stream("ks", 3, 20, "default-scheduler", grouped=True)
    pods, groups = stream("ks", 3, 20, "default-scheduler", grouped=True, upstream=True)
    assert [g["metadata"]["name"] for g in groups] == ["ks-0", "ks-1", "ks-2"]
    for g in groups:
        assert g["apiVersion"] == "scheduling.k8s.io/v1beta1" and g["kind"] == "PodGroup"
        assert g["spec"]["schedulingPolicy"] == {"gang": {"minCount": 20}}
        assert g["spec"]["schedulingConstraints"] == {"topology": [{"key": "topology.kubernetes.io/rack"}]}
    assert len(pods) == 60
    assert [p["spec"]["schedulingGroup"] for p in pods[:21:20]] == [{"podGroupName": "ks-0"}, {"podGroupName": "ks-1"}]
    for p, k in zip(pods, koord, strict=True):
        assert p["metadata"]["name"] == k["metadata"]["name"]
        assert p["metadata"]["labels"] == {"bench-round": "ks"} and "annotations" not in p["metadata"]
        assert p["spec"]["containers"] == k["spec"]["containers"]  # the same requests as koordpy's pods
        assert p["spec"]["schedulerName"] == "default-scheduler"
    plain, none = stream("ks", 3, 20, "default-scheduler", upstream=True)  # not grouped: plain pods
    assert none == [] and all("schedulingGroup" not in p["spec"] for p in plain)


def test_the_upstream_reference_is_refused_where_a_gang_has_no_rack_of_its_own() -> None:
    assert rack_misfit(5000, 500, 20) is None and rack_misfit(200, 10, 20) is None
    assert rack_misfit(200, 20, 20) is None and rack_misfit(209, 20, 20) is None
    assert "only 20 whole racks" in (rack_misfit(209, 21, 20) or "")
    assert "does not fit one rack" in (rack_misfit(5000, 100, 21) or "")


def test_a_node_labelled_by_an_older_run_is_replaced() -> None:
    n = node_body(7)
    assert labelled(n, 10) and not labelled(n, 7)  # beyond the count: deleted
    n["metadata"]["labels"]["kubernetes.io/hostname"] = "bench-node-7"  # kwok's own labels are kept
    assert labelled(n, 10)
    del n["metadata"]["labels"][RACK]  # no rack: an older run's node
    assert not labelled(n, 10)
    assert not labelled({"metadata": {"name": "other-1", "labels": {}}}, 10)


def test_the_racks_of_each_gang_are_read_from_its_bound_pods() -> None:
    nodes = [node_body(i) for i in range(30)]
    pods, _ = stream("ks", 2, 3, "default-scheduler", grouped=True, upstream=True)
    for p, node in zip(pods, ["bench-node-0", "bench-node-9", None, "bench-node-3", "bench-node-10", "x"],
                       strict=True):
        if node:
            p["spec"]["nodeName"] = node
    assert gang_racks(nodes, pods) == {"ks-0": {"block-0"}, "ks-1": {"block-0", "block-1", "-"}}


def figures(reference: str | None) -> dict[str, Any]:
    fig: dict[str, Any] = {
        "ceiling": {"pods_per_s": 200.0},
        "koordpy1": {"pods_per_s": 180.0, "cycles": {"p99_s": 0.3}, "writes_audited": {"bind": 20}, "pods": 10,
                     "cpu_s_per_1000": 2.0},
        "koordpy2": {"pods_per_s": 170.0, "cycles": {"p99_s": 0.33}},
        "steady": {"koordpy_writes_audited": {}, "seconds": 60.0},
        "koordpy_memory_mib": {"VmRSS": 500.0},
        "kube_scheduler": {"pods_per_s": 40.0, "cpu_s_per_1000": 8.0},
        "kube_scheduler_memory_mib": {"VmRSS": 300.0}}
    if reference:
        fig["reference"] = reference
    return fig


def test_the_summary_names_what_kube_scheduler_placed() -> None:
    rows = {r["figure"]: r for r in summary(figures("upstream"))}
    cpu = rows["1 CPU per 1,000 pods, koordpy round 1 vs kube-scheduler "
               "(the same gangs as upstream PodGroups, one rack each)"]
    assert cpu["value"] == "2.00 s vs 8.00 s = 0.25x" and cpu["met"] is True
    assert "2 koordpy round 1 vs kube-scheduler (the same gangs as upstream PodGroups, one rack each)" in rows
    for ref in ("plain", None):  # a run from before the option compared with plain pods
        assert "1 CPU per 1,000 pods, koordpy round 1 vs kube-scheduler (plain pods)" in {
            r["figure"] for r in summary(figures(ref))}
