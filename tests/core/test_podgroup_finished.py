"""Issue 29, item 16: a PodGroup's status after its job ends. A member that finishes (Succeeded,
Failed) is no longer placed, but the status koordpy writes counts it: ``succeeded`` and ``failed``,
``Running`` while those that finished and those running make the minimum, ``Finished`` once the
minimum succeeded (scheduler-plugins' PodGroup controller's phases). Before, a pod that finished left
its gang's members, so one finished pod turned the status back to ``Scheduling, scheduled: 3`` and
the last ones left it at ``Running, running: 4, succeeded: 0`` (a gang with no live member was not
written at all)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.core.cycle import schedule
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup

NAMES = frozenset({"koordpy"})
ANN = "scheduling.k8s.io/group-name"


class Run:
    """A world and the scheduler's state across cycles, as the live loop keeps them."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.world = World.from_objects([("t", o) for o in objects])
        self.state = SchedulerState()
        self.now = self.world.now

    def cycle(self) -> None:
        self.now += 1
        self.world.apply(schedule(self.world.snapshot(NAMES), self.state, self.now))

    def phase(self, *names: str, to: str) -> None:
        for name in names:
            key = f"default/{name}"
            self.world.pods[key] = self.world.pods[key].model_copy(update={"phase": to})
        self.cycle()

    def delete(self, *names: str) -> None:
        for name in names:
            del self.world.pods[f"default/{name}"]
        self.cycle()

    def status(self) -> dict[str, object]:
        return self.world.podgroups["default/g"].status.counts()


NAMES4 = [f"g-{i}" for i in range(4)]


def _running_gang() -> Run:
    run = Run(node("n0"), podgroup("g", 4), *(pod(n, cpu="1", group="g") for n in NAMES4))
    run.cycle()
    run.phase(*NAMES4, to="Running")
    assert run.status() == {"phase": "Running", "scheduled": 4, "running": 4, "succeeded": 0, "failed": 0}
    return run


def test_members_that_succeed_one_by_one_are_counted_until_the_group_is_finished() -> None:
    run = _running_gang()
    run.phase("g-0", to="Succeeded")
    # Not "Scheduling, scheduled: 3": the member that finished ran, and still counts.
    assert run.status() == {"phase": "Running", "scheduled": 4, "running": 3, "succeeded": 1, "failed": 0}
    run.phase("g-1", "g-2", to="Succeeded")
    assert run.status() == {"phase": "Running", "scheduled": 4, "running": 1, "succeeded": 3, "failed": 0}
    run.phase("g-3", to="Succeeded")
    assert run.status() == {"phase": "Finished", "scheduled": 4, "running": 0, "succeeded": 4, "failed": 0}


def test_members_that_all_succeed_at_once_finish_the_group() -> None:
    run = _running_gang()
    run.phase(*NAMES4, to="Succeeded")
    assert run.status() == {"phase": "Finished", "scheduled": 4, "running": 0, "succeeded": 4, "failed": 0}


def test_a_member_that_fails_is_counted() -> None:
    run = _running_gang()
    run.phase("g-0", to="Failed")
    assert run.status() == {"phase": "Failed", "scheduled": 4, "running": 3, "succeeded": 0, "failed": 1}


def test_a_finished_group_stays_finished_as_its_pods_are_deleted() -> None:
    run = _running_gang()
    run.phase(*NAMES4, to="Succeeded")
    run.delete("g-0")
    run.delete("g-1", "g-2")
    assert run.status()["phase"] == "Finished"
    assert run.status()["succeeded"] == 4


def test_a_view_rebuilt_from_scratch_finds_the_finished_members() -> None:
    # The live loop drops the standing view now and then (a full cycle): the finished pods are found
    # in the snapshot as the incremental refresh found them.
    run = _running_gang()
    run.phase("g-0", to="Succeeded")
    run.state.view = None
    run.phase("g-1", to="Succeeded")
    assert run.status() == {"phase": "Running", "scheduled": 4, "running": 2, "succeeded": 2, "failed": 0}


@pytest.mark.parametrize("count", [1, 3])
def test_a_volcano_podgroup_is_completed_once_its_minimum_succeeded(count: int) -> None:
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 3}}
    run = Run(node("n0"), pg, *(pod(f"v-{i}", cpu="1", annotations={ANN: "g"}) for i in range(3)))
    run.cycle()
    run.phase("v-0", "v-1", "v-2", to="Running")
    run.phase(*(f"v-{i}" for i in range(count)), to="Succeeded")
    status = run.world.volcano_podgroups["default/g"].status
    assert (status.phase, status.running, status.succeeded) == (
        ("Completed", 0, 3) if count == 3 else ("Running", 2, 1))
