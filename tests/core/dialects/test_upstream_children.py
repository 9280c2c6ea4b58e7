"""Issue 29, items 3 and 7: a CompositePodGroup's child counts once its own minimum (``minCount``; 1
for ``basic``) is placed or bound, not all its pods; the composite binds when ``minGroupCount``
children count, and every other member that fits binds with them (kube-scheduler v1.37 runs each
child's group cycle, ``podGroupSchedulingDefaultAlgorithm``, inside the composite's). Its pending
messages speak of child PodGroups and node labels, not of Volcano's HyperNodes and tiers."""

from __future__ import annotations

from typing import Any

from tests.builders import node
from tests.core.dialects.test_upstream import RACK, group, member, run
from tests.core.dialects.test_upstream_composite import child, composite, nodes, pods_of

NOWHERE = {"example.com/pool": "absent"}


def basic_child(name: str, parent: str = "train", topology: str | None = None) -> dict[str, Any]:
    return group(name, topology=topology, parentCompositePodGroupName=parent,
                 workloadRef={"workloadName": "train", "templateName": "workers"})


def count(out: Any, name: str, n: int = 3) -> int:
    return sum(f"default/{name}-{i}" in out.bound for i in range(n))


def test_children_count_with_their_min_count_and_the_rest_of_their_pods_that_fit_bind_too() -> None:
    # minGroupCount 2, two children of 3 pods with minCount 2, room for 5 (five nodes a pod fills):
    # kube-scheduler binds 5. Koordpy held each child to all its pods and bound none.
    objs = [composite(), child("c0", 2), *pods_of("c0", 3), child("c1", 2), *pods_of("c1", 3)]
    out = run(nodes(5), objs)
    assert len(out.bound) == 5
    assert sorted((count(out, "c0"), count(out, "c1"))) == [2, 3]
    # The pod left out says why.
    [left] = set(out.pending)
    assert out.pending[left].startswith(f"child PodGroup {left[:-2]} of CompositePodGroup default/train"), out.pending


def test_basic_children_count_with_one_pod_each() -> None:
    objs = [composite(), basic_child("c0"), *pods_of("c0", 3), basic_child("c1"), *pods_of("c1", 3)]
    out = run(nodes(5), objs)
    assert len(out.bound) == 5
    assert sorted((count(out, "c0"), count(out, "c1"))) == [2, 3]


def test_a_child_short_of_its_own_minimum_does_not_count() -> None:
    # Room for 3: c0 takes its 3, c1 none of its minCount 2: minGroupCount 2 is not met. (Room for 4
    # binds none either: kube-scheduler places the children in turn, each taking every pod that fits.)
    objs = [composite(), child("c0", 2), *pods_of("c0", 3), child("c1", 2), *pods_of("c1", 3)]
    assert run(nodes(3), objs).bound == {}
    assert len(run(nodes(5), objs).bound) == 5


def test_a_childs_pod_that_fits_nowhere_is_passed_over() -> None:
    # c0's middle pod asks for a label no node has; c0 still meets its minCount 2 with the other two.
    c0 = [member("c0-0", cpu="3", group_name="c0"), member("c0-1", cpu="3", group_name="c0", nodeSelector=NOWHERE),
          member("c0-2", cpu="3", group_name="c0")]
    objs = [composite(), child("c0", 2), *c0, child("c1", 2), *pods_of("c1", 2)]
    out = run(nodes(6), objs)
    assert set(out.bound) == {"default/c0-0", "default/c0-2", "default/c1-0", "default/c1-1"}


def test_a_child_whose_bound_pods_meet_its_minimum_counts_once() -> None:
    # c0 runs 2 pods (its minCount) and has two replacements pending; c1 needs 2 and finds no room
    # once they are placed. c0 counts once, by its bound pods: its replacements placed do not make it a
    # second child, so minGroupCount 2 is not met and nothing binds (kube-scheduler: 1 child of 2).
    # Koordpy counted c0 twice and bound its replacements. (The composite runs below its minimum
    # meanwhile, a stale gang: its grace is negative here, so it is only reported, never evicted;
    # tests/core/test_stale.py has it evicted.)
    train = composite()
    train["metadata"]["annotations"] = {"koordpy.io/staleness-grace-period": "-1s"}
    objs = [train, child("c0", 2), member("c0-0", cpu="3", group_name="c0", node_name="n0"),
            member("c0-1", cpu="3", group_name="c0", node_name="n1"), *pods_of("c0", 4)[2:],
            child("c1", 2), *pods_of("c1", 2)]
    out = run(nodes(4), objs)
    assert out.bound == {}
    assert {"default/c0-2", "default/c0-3"} <= set(out.pending)
    # With room for c1 as well, everything binds.
    assert len(run(nodes(6), objs).bound) == 4


def test_a_composite_that_does_not_fit_says_so_in_kubernetes_words() -> None:
    # Item 7: no HyperNode, tier or "policy  sub-groups" in the Kubernetes dialect's message.
    objs = [composite(), *(x for c in range(3) for x in (child(f"c{c}", 2), *pods_of(f"c{c}", 2)))]
    out = run(nodes(3), objs)
    assert out.bound == {}
    msg = out.pending["default/c0-0"]
    assert msg == ("0/3 nodes are available: CompositePodGroup default/train: the cluster does not hold 2 of its "
                   "child PodGroups at once, each with its minimum of pods inside one domain of its "
                   "own topology key: default/c0 (2 pending pods, minimum 2), default/c1 (2 pending pods, minimum "
                   "2), default/c2 (2 pending pods, minimum 2); the most pods a domain takes: the cluster: 3."), msg
    for word in ("HyperNode", "tier", "sub-group", "policy"):
        assert word not in msg


def test_a_keyed_composite_names_its_label_and_its_childrens_keys() -> None:
    racked = [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in ("ra", "rb") for i in range(2)]
    taken = [member(f"x-{r}", cpu="4", group_name="x", node_name=f"{r}-0") for r in ("ra", "rb")]
    for p in taken:
        del p["spec"]["schedulingGroup"]
    kids = [x for c in range(2) for x in (child(f"c{c}", 1, topology=RACK), *pods_of(f"c{c}", 1))]
    out = run(racked, taken, composite(topology=RACK), kids)
    assert out.bound == {}
    msg = out.pending["default/c0-0"]
    assert msg.startswith(f"0/4 nodes are available: CompositePodGroup default/train: no domain of {RACK} holds 2 "
                          "of its child PodGroups at once"), msg
    assert f"default/c0 (1 pending pods, minimum 1, topology key {RACK})" in msg
    assert f"the most pods a domain takes: {RACK}: 1 (best of 2: ra)" in msg
    for word in ("HyperNode", "tier", "sub-group", "policy"):
        assert word not in msg
