"""A cycle's round under podsPerCycle (``koordpy.core.queue.Round``): past the cap the jobs after
wait for the next cycle, which goes on with exactly the jobs queued where the round stopped."""

from __future__ import annotations

from koordpy.api import Pod
from koordpy.core.gang import Job
from koordpy.core.queue import Queue, Round
from tests.builders import pod


def _job(name: str) -> Job:
    return Job(f"default/{name}", [], [Pod.from_raw(pod(name, "1"))], 0, 0.0)


def test_a_round_stops_at_the_cap_and_the_next_cycle_goes_on_with_the_jobs_left() -> None:
    jobs = [_job("a"), _job("b"), _job("c")]
    queue = Queue(lambda: jobs)
    first = Round(queue, 1, jobs)
    assert not first.outside(jobs[0]) and not first.beyond(False)
    first.count(jobs[0], set(), {jobs[0].pods[0].key: "n0"}, {})  # it bound: the cap is reached
    assert first.beyond(first.outside(jobs[1]))
    first.stop(1)
    first.close()
    assert queue.round == {"default/b", "default/c"} and queue.tried == {jobs[0].pods[0].key}
    late = _job("0-early")  # arrived during the round: waits for its end, wherever it sorts
    second = Round(queue, 1, [late, *jobs])
    assert second.outside(late) and second.outside(jobs[0]) and not second.outside(jobs[1])
    assert queue.round is None  # until it stops again


def test_without_a_cap_nothing_is_counted_or_left() -> None:
    jobs = [_job("a")]
    queue = Queue(lambda: jobs)
    r = Round(queue, 0, jobs)
    assert r.held(jobs[0], {jobs[0].pods[0].key: "n0"}) == set()
    r.count(jobs[0], set(), {jobs[0].pods[0].key: "n0"}, {})
    assert r.placed == 0 and not r.beyond(False)
    r.close()
    assert queue.round is None and queue.tried == set()


def test_members_reserved_before_the_job_is_tried_count_nothing_towards_the_cap() -> None:
    # A NonStrict gang's member reserved in an earlier cycle binds now: it counted when it was reserved.
    jobs = [_job("a"), _job("b")]
    queue = Queue(lambda: jobs)
    r = Round(queue, 1, jobs)
    key = jobs[0].pods[0].key
    held = r.held(jobs[0], {key: "n0"})
    assert held == {key}
    r.count(jobs[0], held, {key: "n0"}, {})
    assert r.placed == 0 and not r.beyond(r.outside(jobs[1]))


def test_a_round_that_ends_forgets_what_it_tried() -> None:
    jobs = [_job("a")]
    queue = Queue(lambda: jobs)
    r = Round(queue, 5, jobs)
    r.count(jobs[0], set(), {jobs[0].pods[0].key: "n0"}, {})
    r.close()  # never stopped under the cap: no round goes on
    assert queue.round is None and queue.tried == set()


def test_a_round_that_stops_again_keeps_the_jobs_it_went_on_with() -> None:
    # The second cycle of a round stops too: the round is still the jobs queued where it first
    # stopped, not those queued from where this cycle stopped.
    jobs = [_job("a"), _job("b"), _job("c")]
    queue = Queue(lambda: jobs)
    first = Round(queue, 1, jobs)
    first.count(jobs[0], set(), {jobs[0].pods[0].key: "n0"}, {})
    first.stop(1)
    first.close()
    late = _job("0-early")
    second = Round(queue, 1, [late, *jobs])
    second.count(jobs[1], set(), {jobs[1].pods[0].key: "n0"}, {})
    second.stop(3)  # at c in this cycle's order: the round stays {b, c}
    second.close()
    assert queue.round == {"default/b", "default/c"}
    assert queue.tried == {jobs[0].pods[0].key, jobs[1].pods[0].key}
