"""Gang semantics of seed 001: all-or-nothing, GangGroups, Strict/NonStrict, waiting time, match policy."""

from typing import Any

from koordpy.api import Node, Pod, PodGroup
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Annotate, Bind, GangStatusUpdate
from koordpy.core.gang import GangGroupId
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World, simulate
from tests.builders import node, pod, podgroup, run

THREE = [node("n0"), node("n1"), node("n2")]


def snap(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], pgs: list[dict[str, Any]]) -> Snapshot:
    return Snapshot(nodes=[Node.from_raw(n) for n in nodes], pods=[Pod.from_raw(p) for p in pods],
                    podgroups={f"default/{g['metadata']['name']}": PodGroup.from_raw(g) for g in pgs})


def test_gang_binds_nothing_when_one_member_does_not_fit_and_a_solo_pod_still_binds() -> None:
    out = run(THREE, podgroup("big", 4), [pod(f"big-{i}", group="big") for i in range(4)], pod("solo", cpu="4"))
    assert list(out.bound) == ["default/solo"]
    direct = [p for p, m in out.pending.items() if m.startswith("0/3 nodes are available: ")]
    assert len(direct) == 1 and "Insufficient cpu." in out.pending[direct[0]]
    for other in set(out.pending) - set(direct):
        assert out.pending[other] == (f'GangGroup "default/big" gets rejected due to member Pod "{direct[0]}" is '
                                      f'unschedulable with reason "{out.pending[direct[0]]}", alreadyWaitForBound: 0')
    assert out.groups["default/big"]["phase"] == "PreScheduling"


def test_gang_with_fewer_children_than_min_waits_and_names_its_counts() -> None:
    out = run(THREE, [pod(f"s-{i}", annotations={"gang.scheduling.koordinator.sh/name": "short",
                                                  "gang.scheduling.koordinator.sh/min-available": "3"})
                      for i in range(2)])
    assert out.bound == {}
    assert out.pending["default/s-0"] == (
        "gang child pod not collect enough, gangName: default/short, podNum: 2, minMember: 3")


def test_ganggroup_binds_only_when_every_gang_reaches_its_minimum() -> None:
    groups = ["default/master", "default/worker"]
    ok = run(THREE, podgroup("master", 1, groups=groups), podgroup("worker", 2, groups=groups),
             pod("m", group="master"), pod("w-0", group="worker"), pod("w-1", group="worker"))
    assert len(ok.bound) == 3
    short = run(THREE[:2], podgroup("master", 1, groups=groups), podgroup("worker", 2, groups=groups),
                pod("m", group="master"), pod("w-0", group="worker"), pod("w-1", group="worker"))
    assert short.bound == {}
    assert all(msg.startswith('GangGroup "default/master,default/worker"') or msg.startswith("0/2 nodes")
               for msg in short.pending.values())


def test_ganggroup_naming_a_missing_gang_waits() -> None:
    out = run(THREE, podgroup("a", 1, groups=["default/a", "default/ghost"]), pod("a-0", group="a"))
    assert out.bound == {}
    assert "default/ghost" in out.pending["default/a-0"]


def test_pods_of_a_podgroup_that_does_not_exist_wait_for_it() -> None:
    out = run(THREE, pod("p", group="later"))
    assert out.bound == {} and "PodGroup default/later not found" in out.pending["default/p"]


def test_invalid_annotations_on_pods_are_reported_on_them_and_the_rest_schedules() -> None:
    bad_mode = pod("p", group="g", annotations={"gang.scheduling.koordinator.sh/mode": "Lax"})
    bad_index = pod("q", group="h", annotations={"gang.scheduling.koordinator.sh/network-topology-index": "one"})
    result = schedule(snap(THREE, [bad_mode, bad_index, pod("fine")], [podgroup("g", 1), podgroup("h", 1)]),
                      SchedulerState(), 0.0)
    assert "Strict or NonStrict" in result.pending["default/p"]
    assert "network-topology-index" in result.pending["default/q"] and "'one'" in result.pending["default/q"]
    assert [b.pod for b in result.binds] == ["default/fine"]


def test_min_resources_must_be_free_before_the_gang_is_tried() -> None:
    greedy = podgroup("g", 1)
    greedy["spec"]["minResources"] = {"cpu": "100"}
    result = schedule(snap(THREE, [pod("g-0", group="g")], [greedy]), SchedulerState(), 0.0)
    assert result.binds == []
    assert result.pending["default/g-0"] == ("PodGroup default/g minResources not available: cpu wants 100, "
                                             "the cluster has 24 free")


def test_strict_gang_holds_nothing_after_a_failed_round() -> None:
    state = SchedulerState()
    s = snap(THREE, [pod(f"g-{i}", group="g") for i in range(4)], [podgroup("g", 4)])
    result = schedule(s, state, 0.0)
    assert result.binds == [] and state.reserved == {} and state.wait_since == {}


def test_nonstrict_reserves_what_fits_and_binds_when_room_appears() -> None:
    nonstrict = podgroup("g", 3, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"})
    pods = [pod(f"g-{i}", group="g") for i in range(3)]
    state = SchedulerState()
    first = schedule(snap(THREE[:2], pods, [nonstrict]), state, 100.0)
    assert first.binds == [] and len(state.reserved) == 2 and state.wait_since
    assert first.next_deadline == 400.0  # scheduleTimeoutSeconds 300
    second = schedule(snap(THREE, pods, [nonstrict]), state, 150.0)
    assert sorted(b.node for b in second.binds) == ["n0", "n1", "n2"]
    assert state.reserved == {} and state.wait_since == {}


def test_nonstrict_reservations_are_not_given_to_others() -> None:
    nonstrict = podgroup("g", 3, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"})
    state = SchedulerState()
    schedule(snap(THREE[:2], [pod(f"g-{i}", group="g") for i in range(3)], [nonstrict]), state, 0.0)
    later = schedule(snap(THREE[:2], [*(pod(f"g-{i}", group="g") for i in range(3)), pod("other")], [nonstrict]),
                     state, 1.0)
    assert later.binds == [] and "Insufficient cpu" in later.pending["default/other"]


def test_waiting_time_expiry_releases_and_marks_the_gang_timed_out() -> None:
    nonstrict = podgroup("g", 3, timeout=None, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict",
                                                             "gang.scheduling.koordinator.sh/waiting-time": "90s"})
    pods = [pod(f"g-{i}", group="g") for i in range(3)]
    state = SchedulerState()
    schedule(snap(THREE[:2], pods, [nonstrict]), state, 0.0)
    expired = schedule(snap(THREE[:2], pods, [nonstrict]), state, 90.0)
    assert state.reserved == {}
    assert {(d.pod, d.key, d.value) for d in expired.decisions if isinstance(d, Annotate)} == {
        (f"default/g-{i}", "gang.scheduling.koordinator.sh/timeout", "true") for i in range(3)}
    assert "timed out after 90s" in expired.pending["default/g-0"]


def test_simulation_runs_the_clock_to_the_timeout_and_timed_out_pods_stay_pending() -> None:
    world = World.from_objects([("t", o) for o in [*THREE[:2], podgroup("g", 3, annotations={
        "gang.scheduling.koordinator.sh/mode": "NonStrict"}), *(pod(f"g-{i}", group="g") for i in range(3))]])
    out = simulate(world)
    assert out.bound == {}
    assert all(world.pods[f"default/g-{i}"].annotations["gang.scheduling.koordinator.sh/timeout"] == "true"
               for i in range(3))
    assert "timed out" in out.pending["default/g-0"]
    assert any(e.reason == "GangTimeout" for e in out.events)


def test_once_satisfied_members_arriving_later_schedule_alone() -> None:
    bound = [pod(f"g-{i}", group="g", node_name=f"n{i}") for i in range(2)]
    out = run(THREE, podgroup("g", 2), bound, pod("g-late", group="g"))
    assert out.bound == {"default/g-late": "n2"}


def test_only_waiting_members_must_gather_a_minimum_again() -> None:
    policy = {"gang.scheduling.koordinator.sh/match-policy": "only-waiting"}
    bound = [pod(f"g-{i}", group="g", node_name=f"n{i}") for i in range(2)]
    out = run(THREE, podgroup("g", 2, annotations=policy), bound, pod("g-late", group="g"))
    # Three members exist (enough pods), but only waiting ones count towards binding.
    assert out.bound == {}
    assert out.pending["default/g-late"] == ('GangGroup "default/g" is waiting for its members: default/g 0/2, '
                                             "alreadyWaitForBound: 0")


def test_not_collect_enough_counts_every_member_the_gang_has() -> None:
    # As in Koordinator, podNum is the number of pods the gang has, bound ones included,
    # whatever the match policy.
    # (The gang runs below its minimum, stale: a negative grace keeps it from being evicted.)
    for policy in ("only-waiting", "waiting-and-running", "once-satisfied"):
        ann = {"gang.scheduling.koordinator.sh/match-policy": policy, "koordpy.io/staleness-grace-period": "-1"}
        out = run(THREE, podgroup("g", 3, annotations=ann), pod("g-0", group="g", node_name="n0"),
                  pod("g-1", group="g"))
        assert out.pending["default/g-1"] == ("gang child pod not collect enough, gangName: default/g, podNum: 2, "
                                              "minMember: 3"), policy


def test_waiting_and_running_counts_bound_members() -> None:
    policy = {"gang.scheduling.koordinator.sh/match-policy": "waiting-and-running"}
    bound = [pod("g-0", group="g", node_name="n0")]
    out = run(THREE, podgroup("g", 2, annotations=policy), bound, pod("g-late", group="g"))
    assert out.bound == {"default/g-late": "n1"} or out.bound == {"default/g-late": "n2"}


def test_annotation_gang_binds_as_a_whole() -> None:
    ann = {"gang.scheduling.koordinator.sh/name": "ann", "gang.scheduling.koordinator.sh/min-available": "3"}
    out = run(THREE, [pod(f"a-{i}", annotations=ann) for i in range(3)])
    assert sorted(out.bound.values()) == ["n0", "n1", "n2"]


def test_podgroup_status_follows_the_gang() -> None:
    s = snap(THREE, [pod(f"g-{i}", group="g") for i in range(2)], [podgroup("g", 2)])
    result = schedule(s, SchedulerState(), 5.0)
    update = next(d for d in result.decisions if isinstance(d, GangStatusUpdate))
    assert update.status.wire()["phase"] == "Scheduled" and update.status.wire()["scheduled"] == 2
    assert update.status.wire()["scheduleStartTime"] == "1970-01-01T00:00:05Z"  # as the API reads it back
    assert len([d for d in result.decisions if isinstance(d, Bind)]) == 2


def test_queue_takes_older_gangs_first_at_equal_priority() -> None:
    out = run(THREE, podgroup("first", 2), podgroup("second", 2),
              [pod(f"b-{i}", group="second") for i in range(2)], [pod(f"a-{i}", group="first") for i in range(2)])
    assert set(out.bound) == {"default/a-0", "default/a-1"}


def test_a_gang_left_half_bound_by_a_restart_goes_first_and_completes() -> None:
    # A scheduler stopped after binding g-0 and g-1 of a 4-pod gang; a higher-priority gang
    # arrived meanwhile. The half-bound gang holds n0/n1 and must finish on n2/n3 first.
    nodes = [node(f"n{i}") for i in range(4)]
    half = [pod("g-0", group="g", node_name="n0"), pod("g-1", group="g", node_name="n1"),
            pod("g-2", group="g"), pod("g-3", group="g")]
    urgent = [pod(f"u-{i}", group="u", priority=1000) for i in range(2)]
    result = schedule(snap(nodes, [*half, *urgent], [podgroup("g", 4), podgroup("u", 2)]), SchedulerState(), 0.0)
    assert sorted(b.pod for b in result.binds) == ["default/g-2", "default/g-3"]


def test_state_forgets_gangs_that_are_gone() -> None:
    state = SchedulerState(satisfied={"default/old"}, wait_since={GangGroupId.of("default/old"): 1.0})
    schedule(snap(THREE, [pod("p")], []), state, 2.0)
    assert state.satisfied == set() and state.wait_since == {}


def test_only_waiting_gang_satisfied_before_still_needs_its_minimum_again() -> None:
    policy = {"gang.scheduling.koordinator.sh/match-policy": "only-waiting",
              "gang.scheduling.koordinator.sh/mode": "NonStrict"}
    pg = podgroup("g", 2, annotations=policy)
    state = SchedulerState()
    first = schedule(snap(THREE, [pod(f"g-{i}", group="g") for i in range(2)], [pg]), state, 0.0)
    assert len(first.binds) == 2
    # Two more members arrive; only one node is left: the one that fits waits, reserved.
    later = [pod("g-0", group="g", node_name="n0"), pod("g-1", group="g", node_name="n1"),
             pod("g-2", group="g"), pod("g-3", group="g")]
    assert schedule(snap(THREE, later, [pg]), state, 1.0).binds == []
    assert len(state.reserved) == 1


def test_the_status_of_another_schedulers_podgroup_is_left_alone() -> None:
    # Beside koord-scheduler or Volcano, a PodGroup whose pods another scheduler places is theirs
    # to report on: two writers would fight over its status.
    theirs = [pod(f"t-{i}", cpu="1", group="theirs", scheduler="koord-scheduler") for i in range(2)]
    ours = [pod(f"o-{i}", cpu="1", group="ours") for i in range(2)]
    result = schedule(snap([node("n0")], theirs + ours, [podgroup("theirs", 2), podgroup("ours", 2)]),
                      SchedulerState(), 0.0)
    updated = {d.object_key for d in result.decisions if isinstance(d, GangStatusUpdate)}
    assert updated == {"default/ours"}
