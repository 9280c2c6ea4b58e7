"""Issue 31 item 1 end to end: a gang whose members, allocated one by one first fit, do not all get
devices where another choice serves them all (kubernetes/kubernetes#138765: two pods, each asking
for a whole partitionable device "else half", on one device two halves would serve), in every
dialect; and a search past its budget says so."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod, podgroup, run
from tests.sim.test_dra import DRIVER, claiming, gpu_class, kai_gang, koord_gang, upstream_gang, volcano_gang


def partitionable(node_name: str) -> list[dict[str, Any]]:
    """One GPU of 2 memory units, published as the whole device and its two halves."""
    pool = {"name": node_name, "generation": 1, "resourceSliceCount": 2}

    def part(name: str, size: int) -> dict[str, Any]:
        return {"name": name, "attributes": {"size": {"string": "whole" if size == 2 else "half"}},
                "consumesCounters": [{"counterSet": "gpu-0", "counters": {"memory": {"value": str(size)}}}]}
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-counters"},
         "spec": {"driver": DRIVER, "nodeName": node_name, "pool": pool,
                  "sharedCounters": [{"name": "gpu-0", "counters": {"memory": {"value": "2"}}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{node_name}-gpus"},
         "spec": {"driver": DRIVER, "nodeName": node_name, "pool": pool,
                  "devices": [part("gpu-0", 2), part("gpu-0-half-0", 1), part("gpu-0-half-1", 1)]}},
    ]


def whole_else_half() -> dict[str, Any]:
    def sub(name: str, size: str) -> dict[str, Any]:
        return {"name": name, "deviceClassName": DRIVER,
                "selectors": [{"cel": {"expression": f'device.attributes["{DRIVER}"].size == "{size}"'}}]}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "firstAvailable": [sub("whole", "whole"), sub("half", "half")]}]}}}}


def koordinator(name: str, n: int) -> list[dict[str, Any]]:
    return [podgroup(name, n), *koord_gang(name, n)]


@pytest.mark.parametrize("make", [koordinator, volcano_gang, kai_gang, upstream_gang])
def test_two_members_each_wanting_a_whole_device_else_half_share_one_device(make: Any) -> None:
    # kube-scheduler's member-by-member first fit gives the first member the whole device and leaves
    # the second nothing; two halves serve both.
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(), *make("g", 2))
    assert out.bound == {"default/g-0": "node-a", "default/g-1": "node-a"}, out.pending
    assert out.allocations is not None
    held = sorted(d for k in ("default/g-0-gpus", "default/g-1-gpus") for d in out.allocations[k])
    assert held == [f"{DRIVER}/node-a/gpu-0-half-0", f"{DRIVER}/node-a/gpu-0-half-1"]


def test_a_lone_pod_still_gets_the_whole_device_it_prefers() -> None:
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(),
              claiming(pod("solo", cpu="1"), template_name="gpus"))
    assert out.allocations == {"default/solo-gpus": [f"{DRIVER}/node-a/gpu-0"]}


def test_three_members_on_one_device_wait_holding_nothing() -> None:
    out = run(node("node-a", cpu="64"), gpu_class(), *partitionable("node-a"), whole_else_half(),
              *koordinator("g", 3))
    assert not out.bound
    assert out.allocations == {}


def test_a_member_that_fails_after_a_search_stopped_early_says_so() -> None:
    from koordpy.core.messages import render
    from koordpy.core.verdicts import DevicesTogether
    from koordpy.devices.reasons import GangStopped

    said = render(DevicesTogether(3, "node-a", "cannot allocate all claims", GangStopped("time", 1.0, 10**6, 4, 2)))
    assert said == ("0/3 nodes are available: cannot allocate all claims (on node-a, with the members of its job "
                    "before it placed). The search of the gang's devices as a whole stopped at its time budget of 1s "
                    "before finding an assignment (a coupled group of 2 of its 4 members sharing devices).")


def test_a_podgroups_shared_claim_goes_through_the_search_allocated_once() -> None:
    # Both members on r1-0 (the only GPU), each with the group's channel and its own whole-else-half:
    # the channel is allocated once, by the first, and reserved for the group; the GPU halves.
    from koordpy.sim.simulator import World, simulate
    from tests.sim.test_dra import channel_objects

    entry = {"name": "channel", "resourceClaimTemplateName": "channel"}
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "train", "namespace": "default", "uid": "uid-train"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": [entry]}}
    members = []
    for i in range(2):
        body = pod(f"t-{i}", cpu="1", schedulingGroup={"podGroupName": "train"})
        body["spec"]["resourceClaims"] = [entry, {"name": "gpus", "resourceClaimTemplateName": "gpus"}]
        members.append(body)
    objs = [*channel_objects(), gpu_class(), *partitionable("r1-0"), whole_else_half(), group, *members]
    world = World.from_objects([("t", o) for o in objs])
    out = simulate(world)
    assert out.bound == {"default/t-0": "r1-0", "default/t-1": "r1-0"}, out.pending
    assert out.allocations is not None
    assert out.allocations["default/train-channel"] == ["channel.example.com/domain-r1/channel-0"]
    assert sorted(d for i in range(2) for d in out.allocations[f"default/t-{i}-gpus"]) == [
        f"{DRIVER}/r1-0/gpu-0-half-0", f"{DRIVER}/r1-0/gpu-0-half-1"]
    made = world.devices.claims["default/train-channel"]
    assert [(c.resource, c.name) for c in made.reserved_for] == [("podgroups", "train")]


@pytest.mark.parametrize("make", [koordinator, volcano_gang, kai_gang, upstream_gang])
def test_two_members_with_a_whole_device_idle_each_get_the_whole_device_they_prefer(make: Any) -> None:
    # Member by member (kube-scheduler's order) gives each a whole device on its own node; counting
    # what a node takes with the devices searched as a whole (two halves) must not pack both onto one.
    out = run(node("node-a", cpu="64"), node("node-b", cpu="64"), gpu_class(), *partitionable("node-a"),
              *partitionable("node-b"), whole_else_half(), *make("g", 2))
    assert sorted(out.bound.values()) == ["node-a", "node-b"], out.pending
    assert out.allocations is not None
    held = sorted(d for k in ("default/g-0-gpus", "default/g-1-gpus") for d in out.allocations[k])
    assert held == [f"{DRIVER}/node-a/gpu-0", f"{DRIVER}/node-b/gpu-0"]


def test_a_claim_shared_by_more_members_than_its_reserved_for_holds_keeps_the_gang_waiting_whole() -> None:
    # 257 members naming one claim: reservedFor holds 256 consumers, so the last member cannot have it.
    # Member by member fails there; the search's assignment (the claim allocated once) must not be laid
    # for the others alone, or the gang binds in part.
    from tests.sim.test_dra import claim, gpu_slice

    n = 257
    out = run(node("node-a", cpu="600", memory="1000Gi", extra={"pods": "500"}), gpu_class(),
              gpu_slice("node-a", 1), claim("shared", 1), podgroup("g", n),
              *(claiming(pod(f"g-{i}", cpu="1", group="g"), claim_name="shared") for i in range(n)))
    assert not out.bound
    assert "reserved for 256 other consumers" in out.pending["default/g-0"]


def test_a_jobs_searches_share_the_one_time_budget_the_setting_gives_it() -> None:
    # One node of 8 partitionable GPUs whose counters are named apart, 17 members each a whole GPU
    # else a half: no assignment, and no bound proves it quickly, so the search runs to its budget.
    # A job's placement may be tried many times in one cycle (prefixes, domains, preemption's what-ifs):
    # the second search of the same job stops at once, the next job gets the budget again.
    from koordpy.core.claims import DeviceRules
    from koordpy.core.txn import Txn
    from koordpy.sim.simulator import World

    def part(g: int, name: str, size: int) -> dict[str, Any]:
        return {"name": name, "attributes": {"size": {"string": "whole" if size == 2 else "half"}},
                "consumesCounters": [{"counterSet": f"gpu-{g}", "counters": {f"mem{g}": {"value": str(size)}}}]}
    pool = {"name": "node-a", "generation": 1, "resourceSliceCount": 2}
    slices = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "counters"},
         "spec": {"driver": DRIVER, "nodeName": "node-a", "pool": pool, "sharedCounters": [
             {"name": f"gpu-{g}", "counters": {f"mem{g}": {"value": "2"}}} for g in range(8)]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "gpus"},
         "spec": {"driver": DRIVER, "nodeName": "node-a", "pool": pool, "devices": [
             part(g, n, s) for g in range(8) for n, s in ((f"gpu-{g}", 2), (f"gpu-{g}-a", 1), (f"gpu-{g}-b", 1))]}}]
    spec = whole_else_half()["spec"]["spec"]
    claims = [{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "metadata": {"name": f"c-{i}", "namespace": "default"}, "spec": spec} for i in range(17)]
    pods = [claiming(pod(f"p-{i}", cpu="1"), claim_name=f"c-{i}") for i in range(17)]
    world = World.from_objects([("t", o) for o in (node("node-a", cpu="64"), gpu_class(), *slices, *claims, *pods)])
    snapshot = world.snapshot(frozenset({"koordpy"}))
    rules = DeviceRules(snapshot.devices)
    looks = [0]

    def clock() -> float:  # each look at the clock: a quarter of a second
        looks[0] += 1
        return looks[0] / 4
    rules.allocator.clock = clock
    members = [(p, snapshot.nodes[0]) for p in sorted(snapshot.pods, key=lambda p: int(p.name[2:]))]
    assert len(members) == 17
    spent = []
    for fresh in (False, False, True):
        if fresh:
            rules.new_job()
        before = looks[0]
        done, stopped = rules.reserve_together(members, Txn(), budget=1.0)
        assert not done and stopped is not None and stopped.bound == "time"
        spent.append(looks[0] - before)
    # The second search of the job found its budget spent (a look or two to see it); the next job's
    # searched as long as the first.
    assert spent[1] < spent[0] and spent[2] == spent[0], spent
