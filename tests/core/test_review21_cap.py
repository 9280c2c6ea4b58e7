"""Review of the cap on one cycle's work (``podsPerCycle``, issue 21 goal 4): the rules the cut
rounds must keep besides deciding as one long cycle would.

- A round is bounded by the jobs queued when it began: a job that arrives meanwhile waits for the
  round's end (docs/reference.md, ``podsPerCycle``) wherever it sorts, so a stream of arrivals
  cannot keep a round going and starve the jobs it has left behind (a higher-priority job that
  arrived, a parked job woken, a NonStrict gang whose wait ended).
- The cap counts pods placed, never pods released: a NonStrict gang whose wait times out gives
  its reservations back, which is no credit for the jobs after it.
- ``podsPerCycle`` is a count: a boolean in the file is refused, not read as 1 or 0.
"""

from __future__ import annotations

import pytest

from koordpy.settings import SettingsError, parse
from tests.builders import node, pod, podgroup, priority_class
from tests.core.test_cycle_cap import Live, bound_gangs


def test_arrivals_during_a_round_wait_for_its_end_so_a_new_high_priority_job_is_not_starved() -> None:
    live = Live(cap=2)
    live.add("Node", node("n0", cpu="1000"))
    live.add("PriorityClass", priority_class("high", 1000))
    live.add("PriorityClass", priority_class("mid", 500))
    live.add("Pod", pod("tail", "1"))  # priority 0: the last job of the queue when the round begins
    live.gang("mid0", 2, priority_class="mid")
    live.gang("mid1", 2, priority_class="mid")
    assert bound_gangs(live.cycle()) == ["mid0"]  # cut before mid1: a round begins
    live.gang("urgent", 2, priority_class="high")
    # Jobs of the middle priority keep arriving, one a cycle, as the round goes on: each sorts
    # after where the round resumes and before its last job.
    bound: list[str] = []
    for i in range(2, 10):
        live.gang(f"mid{i}", 2, priority_class="mid")
        bound += bound_gangs(live.cycle())
        if "urgent" in bound:
            break
    # The round of mid1 and tail ends after two cycles; the next one begins with urgent.
    assert "urgent" in bound, bound
    assert bound.index("urgent") <= 3, bound


@pytest.mark.parametrize("value", [True, False, "100", 1.0])
def test_pods_per_cycle_must_be_an_integer_in_the_file(value: object) -> None:
    # ``podsPerCycle: true`` read as 1 would make every cycle place one pod; ``false`` as 0, no limit.
    with pytest.raises(SettingsError) as err:
        parse({"podsPerCycle": value}, "cfg.yaml")
    assert str(err.value).startswith("cfg.yaml: podsPerCycle: Input should be a valid integer"), str(err.value)


def test_reservations_given_back_by_a_timed_out_gang_are_no_credit_against_the_cap() -> None:
    live = Live(cap=2)
    live.add("Node", node("n0", cpu="100"))  # two of the gang's three pods, nothing else
    live.add("Node", node("n1", cpu="20"))
    live.add("PriorityClass", priority_class("high", 1000))
    live.add("PodGroup", podgroup("slow", 3, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"}))
    for i in range(3):
        live.add("Pod", pod(f"slow-{i}", "50", group="slow", priority_class="high"))
    first = live.cycle()
    assert not first.binds and len(live.state.reserved) == 2  # it holds two, waiting for room
    for i in range(6):
        live.add("Pod", pod(f"lone-{i}", "1"))
    expired = live.cycle(after=301.0)  # its wait (scheduleTimeoutSeconds 300) is over: it times out first
    assert not live.state.reserved and "default/slow" in expired.gangs_timed_out
    assert len(expired.binds) == 2 and expired.deferred == 4, (len(expired.binds), expired.deferred)
