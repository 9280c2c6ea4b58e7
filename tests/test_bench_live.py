"""bench_live's time-to-an-answer round (issue 21, goal 6): its pure parts. The round itself runs
live (``bench_live --answer``); what it reads from koordpy's log and how it counts is checked here."""

from __future__ import annotations

import json

from benchmarks.bench_live import answer_stream, answer_summary, deciding_cycle


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
