"""Cases found by reviewing the core's standing view (koordpy.core.view): cycles that keep the view
must decide exactly what cycles that rebuild it from the whole snapshot decide."""

from collections.abc import Callable
from typing import Any

from koordpy.api import Node, Pod
from koordpy.api.podgroup import PodGroup
from koordpy.core.cycle import schedule
from koordpy.core.decisions import CycleResult
from koordpy.core.gang import GangGroupId
from koordpy.core.queue import BACKOFF_MAX
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup

Step = Callable[[World], None]


def idle(world: World) -> None:
    pass


def add_pod(raw: dict[str, Any]) -> Step:
    def step(world: World) -> None:
        p = world._admit(Pod.from_raw(raw))
        world.pods[p.key] = p
    return step


def add_podgroup(raw: dict[str, Any]) -> Step:
    def step(world: World) -> None:
        pg = PodGroup.from_raw(raw)
        world.podgroups[pg.key] = pg
    return step


def both(*steps: Step) -> Step:
    def step(world: World) -> None:
        for s in steps:
            s(world)
    return step


def decided(result: CycleResult) -> dict[str, Any]:
    return {"decisions": sorted(repr(d) for d in result.decisions), "pending": result.pending}


def lockstep(objs: list[dict[str, Any]], steps: list[Step]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """Two worlds fed the same changes, one scheduled with the standing view kept and one with it
    dropped before every cycle; per cycle, what each decided. Objects that did not change stay the
    same objects, as the live cache hands them over."""
    worlds = [World.from_objects([("t", o) for o in objs]) for _ in range(2)]
    states = [SchedulerState(), SchedulerState()]
    out = []
    for step in [idle, *steps]:
        pair = []
        for full, (world, state) in enumerate(zip(worlds, states, strict=True)):
            step(world)
            if full:
                state.view = None
            result = schedule(world.snapshot(frozenset({"koordpy"})), state, world.now)
            world.apply(result)
            pair.append(decided(result))
        out.append((pair[0], pair[1]))
    return out


def assert_same(objs: list[dict[str, Any]], steps: list[Step]) -> None:
    for cycle, (kept, rebuilt) in enumerate(lockstep(objs, steps)):
        assert kept == rebuilt, f"cycle {cycle}"


def test_a_parked_gang_of_unlike_pods_is_retried_when_room_is_taken() -> None:
    """Greedy placement of unlike pods is not monotone in room: here the small pod goes to the most
    allocated node, the only one the big pod fits, until a foreign pod fills the other node enough
    to be the most allocated. Room taken can let such a job through, so it must not stay parked."""
    objs = [node("n0", cpu="20", memory="1000Gi"), node("n1", cpu="12", memory="1000Gi"),
            pod("r0", cpu="12", memory="0", node_name="n0", scheduler="other"),
            pod("r1", cpu="5", memory="0", node_name="n1", scheduler="other"),
            podgroup("g", 2), pod("a", cpu="4", memory="0", group="g", index=0),
            pod("b", cpu="8", memory="0", group="g", index=1)]
    foreign = add_pod(pod("r2", cpu="3", memory="0", node_name="n1", scheduler="other"))
    # Woken by the foreign pod, it is tried once its backoff has passed (the full cycle knows no backoff).
    assert_same(objs, [idle, idle, then_later(foreign, BACKOFF_MAX), idle])


def then_later(change: Step, seconds: float) -> Step:
    def step(world: World) -> None:
        change(world)
        world.now += seconds
    return step


def clobber(key: str) -> Step:
    def step(world: World) -> None:
        world.pods[key] = world.pods[key].model_copy(update={"unschedulable_message": "written by someone else"})
    return step


def test_a_message_someone_else_wrote_on_a_parked_pod_is_written_again() -> None:
    """Only the scheduler's own message coming back may leave a parked job parked; any other
    message (another writer's, or a stale write landing late) must be put right, as a full cycle does."""
    objs = [node("n0", cpu="4"), pod("p", cpu="8"), podgroup("g", 2),
            pod("a", cpu="8", group="g"), pod("b", cpu="8", group="g")]
    assert_same(objs, [idle, clobber("default/p"), idle])
    assert_same(objs, [idle, clobber("default/a"), idle])


GROUPS = ["default/a", "default/b"]


def test_a_gang_touched_while_its_gang_group_forms_leaves_no_job_of_its_own() -> None:
    objs = [node("n0"), node("n1"), podgroup("a", 2, groups=GROUPS), pod("a0", group="a")]
    forms = both(add_podgroup(podgroup("b", 1, groups=GROUPS)), add_pod(pod("b0", group="b")),
                 add_pod(pod("a1", group="a")))
    assert_same(objs, [idle, forms, idle, idle])


def test_gangs_touched_while_their_gang_group_splits_leave_no_job_of_the_old_group() -> None:
    objs = [node("n0", cpu="4"), podgroup("a", 1, groups=GROUPS), podgroup("b", 1, groups=GROUPS),
            pod("a0", group="a", cpu="4"), pod("b0", group="b")]
    splits = both(add_podgroup(podgroup("b", 1)), add_pod(pod("a1", group="a")))
    assert_same(objs, [idle, splits, idle, idle])


# -- found by the same review, in both modes ------------------------------------------------------

NONSTRICT = {"gang.scheduling.koordinator.sh/mode": "NonStrict"}


def test_a_reservation_on_a_node_that_is_gone_is_dropped_and_the_member_placed_again() -> None:
    state = SchedulerState()
    pods = [Pod.from_raw(pod(f"g-{i}", group="g")) for i in range(3)]
    pg = {"default/g": PodGroup.from_raw(podgroup("g", 3, annotations=NONSTRICT))}
    two = [Node.from_raw(node(n)) for n in ("n0", "n1")]
    first = schedule(Snapshot(nodes=two, pods=pods, podgroups=pg), state, 0.0)
    assert first.binds == [] and set(state.reserved.values()) == {"n0", "n1"}
    others = [Node.from_raw(node(n)) for n in ("n1", "n2", "n3")]  # n0 removed
    second = schedule(Snapshot(nodes=others, pods=pods, podgroups=pg), state, 1.0)
    assert second.job_errors == {}
    assert sorted(b.node for b in second.binds) == ["n1", "n2", "n3"]


def test_a_wait_is_forgotten_when_its_gang_joins_another_group() -> None:
    state = SchedulerState()
    nodes = [Node.from_raw(node("n0"))]
    a = [Pod.from_raw(pod(f"a-{i}", group="a")) for i in range(2)]
    pgs = {"default/a": PodGroup.from_raw(podgroup("a", 2, annotations=NONSTRICT))}
    schedule(Snapshot(nodes=nodes, pods=a, podgroups=pgs), state, 0.0)
    assert set(state.wait_since) == {GangGroupId.of("default/a")}
    # a and b now name each other: one GangGroup, whose wait starts when it is first tried.
    pgs["default/a"] = PodGroup.from_raw(podgroup("a", 2, groups=GROUPS, annotations=NONSTRICT))
    pgs["default/b"] = PodGroup.from_raw(podgroup("b", 1, groups=GROUPS, annotations=NONSTRICT))
    result = schedule(Snapshot(nodes=nodes, pods=[*a, Pod.from_raw(pod("b-0", group="b"))], podgroups=pgs),
                      state, 5.0)
    assert set(state.wait_since) == {GangGroupId.of("default/a", "default/b")}  # the new group's wait, from now
    assert result.next_deadline is not None and result.next_deadline > 5.0
