"""Issue 20, koordpy's addition: a preferred level below a Workload PodGroup's topology key. The
``kai.scheduler/topology-preferred-placement`` annotation on the PodGroup names a node label; the
group goes into the smallest domain of that label (inside one domain of the required key) that takes
it, else one level up, as KAI's preferred level does. A preference never holds a group: when no node
carries the label it is dropped, and said in a TopologyLimitDropped Event."""

from __future__ import annotations

from typing import Any

from koordpy.api.kueue import ANN_PREFERRED
from koordpy.api.workload import WorkloadPodGroup
from koordpy.core.dialects import upstream
from koordpy.sim.simulator import SimulationResult, World, simulate
from tests.builders import node, pod
from tests.core.dialects.test_upstream import group, member

BLOCK = "example.com/block"
RACK = "example.com/rack"


def preferring(label: str, **kw: Any) -> dict[str, Any]:
    body = group(**kw)
    body["metadata"]["annotations"] = {ANN_PREFERRED: label}
    return body


def interleaved() -> list[dict[str, Any]]:
    """One block; its nodes alternate between racks a and b in name order, so that a placement that
    ignores the racks takes n1 and n2, one in each."""
    return [node(f"n{i}", labels={BLOCK: "b1", RACK: "a" if i % 2 else "b"}) for i in range(1, 5)]


def run(*objects: dict[str, Any] | list[dict[str, Any]]) -> SimulationResult:
    flat: list[dict[str, Any]] = []
    for o in objects:
        flat.extend(o if isinstance(o, list) else [o])
    return simulate(World.from_objects([("test", o) for o in flat]))


def racks_of(out: SimulationResult, nodes: list[dict[str, Any]]) -> set[str]:
    label = {n["metadata"]["name"]: n["metadata"]["labels"].get(RACK, "-") for n in nodes}
    return {label[n] for n in out.bound.values()}


def dropped_events(out: SimulationResult) -> list[str]:
    return [e.message for e in out.events if e.reason == "TopologyLimitDropped"]


def test_the_preferred_label_is_read_from_the_podgroups_annotation() -> None:
    parsed = WorkloadPodGroup.from_raw(preferring(RACK, min_count=2, topology=BLOCK))
    assert parsed.preferred_label == RACK
    assert WorkloadPodGroup.from_raw(group(min_count=2)).preferred_label == ""


def test_a_group_lands_in_one_domain_of_the_preferred_label_inside_the_required_one() -> None:
    nodes = interleaved()
    out = run(nodes, preferring(RACK, min_count=2, topology=BLOCK), member("t-0"), member("t-1"))
    assert len(out.bound) == 2
    assert len(racks_of(out, nodes)) == 1  # both in one rack, not n1 and n2
    assert dropped_events(out) == []


def test_the_group_climbs_to_the_required_level_when_no_preferred_domain_takes_it() -> None:
    # Three whole-node pods: no rack holds them, the block does; the preference never holds a group.
    nodes = interleaved()
    out = run(nodes, preferring(RACK, min_count=3, topology=BLOCK), *(member(f"t-{i}") for i in range(3)))
    assert len(out.bound) == 3


def test_nodes_without_the_preferred_label_stay_candidates() -> None:
    # A node of the block without a rack label still takes a member (the level is only preferred);
    # a node without the block label does not (the topology key is required).
    nodes = [node("n1", labels={BLOCK: "b1", RACK: "a"}), node("n2", labels={BLOCK: "b1"}), node("n3")]
    out = run(nodes, preferring(RACK, min_count=2, topology=BLOCK), member("t-0"), member("t-1"))
    assert sorted(out.bound.values()) == ["n1", "n2"]


def test_a_preferred_label_no_node_carries_is_dropped_and_said_in_an_event() -> None:
    nodes = interleaved()
    out = run(nodes, preferring("example.com/nowhere", min_count=2, topology=BLOCK), member("t-0"), member("t-1"))
    assert len(out.bound) == 2  # placed by the required key alone
    assert dropped_events(out) == [
        f"{ANN_PREFERRED} 'example.com/nowhere': no node labelled {BLOCK} carries the label example.com/nowhere; "
        f"the preferred level is dropped and the group placed by {BLOCK} alone"]


def test_a_preferred_value_that_is_not_a_label_key_is_dropped_not_refused() -> None:
    out = run(interleaved(), preferring("not a label", min_count=1, topology=BLOCK), member("t-0"))
    assert len(out.bound) == 1
    assert "is no node label key" in dropped_events(out)[0]


def test_a_preferred_label_not_nested_in_the_required_one_is_taken_within_each_required_domain() -> None:
    # Rack "a" exists in both blocks; b1 has one node. Were rack a one domain, the gang could take
    # x1 and y1 across blocks; the required key holds, so it goes to b2 (its two racks).
    nodes = [node("x1", labels={BLOCK: "b1", RACK: "a"}),
             node("y1", labels={BLOCK: "b2", RACK: "a"}), node("y2", labels={BLOCK: "b2", RACK: "b"})]
    out = run(nodes, preferring(RACK, min_count=2, topology=BLOCK), member("t-0"), member("t-1"))
    assert sorted(out.bound.values()) == ["y1", "y2"]
    tree = upstream.preferred_tree(BLOCK, RACK, World.from_objects([("t", n) for n in nodes]).snapshot(
        frozenset({"koordpy"})).nodes)
    assert sorted(tree.name(d) for d in tree.domains_at(2)) == ["a", "a", "b"]  # rack a once per block


def test_a_preferred_level_without_a_required_key_spans_the_whole_cluster() -> None:
    nodes = [*interleaved(), node("bare")]
    out = run(nodes, preferring(RACK, min_count=2), member("t-0"), member("t-1"))
    assert len(out.bound) == 2 and len(racks_of(out, nodes)) == 1
    # Not required: with the racks full, the node without the label takes the pod.
    busy = [pod(f"b{i}", node_name=f"n{i}", scheduler="x") for i in range(1, 5)]
    out = run(nodes, busy, preferring(RACK, min_count=1), member("t-0"))
    assert out.bound == {"default/t-0": "bare"}


def test_a_basic_group_with_only_a_preferred_level_places_each_pod_near_its_bound_peers() -> None:
    # t-0 runs on n1 (rack a); the new member prefers its peer's rack: n3, not n2.
    nodes = interleaved()
    out = run(nodes, preferring(RACK), member("t-0", node_name="n1"), member("t-1"))
    assert out.bound == {"default/t-1": "n3"}


def test_the_hostname_as_the_preferred_level_prefers_one_node() -> None:
    nodes = [node(f"n{i}", cpu="16", labels={BLOCK: "b1"}) for i in range(1, 3)]
    out = run(nodes, preferring("kubernetes.io/hostname", min_count=2, topology=BLOCK),
              member("t-0", cpu="8"), member("t-1", cpu="8"))
    assert len(set(out.bound.values())) == 1
