"""Issue 20, koordpy's addition: the members of a Kubernetes Workload PodGroup are placed in the order
of their Job completion index (``batch.kubernetes.io/job-completion-index``, which the Job controller
sets on an Indexed Job's pods as an annotation and a label), beside the pod index annotations koordpy
already reads; kube-scheduler gives no order."""

from __future__ import annotations

from typing import Any

from koordpy.api.objects import Pod
from koordpy.api.workload import JOB_COMPLETION_INDEX
from koordpy.core.placement import rank_order
from koordpy.sim.simulator import World, simulate
from tests.builders import node, pod
from tests.core.dialects.test_upstream import RACK, group, member

# Names in the reverse of the index order, so that name order and index order disagree.
NAMES = ("w-a", "w-b", "w-c", "w-d")


def indexed(name: str, index: int, where: str = "annotations", **kw: Any) -> dict[str, Any]:
    p = member(name, **kw)
    p["metadata"].setdefault(where, {})[JOB_COMPLETION_INDEX] = str(index)
    return p


def run(*objects: dict[str, Any]) -> dict[str, str]:
    return simulate(World.from_objects([("t", o) for o in objects])).bound


def test_an_indexed_jobs_pods_are_placed_in_completion_index_order() -> None:
    nodes = [node(f"n{i}", labels={RACK: "r1"}) for i in range(4)]
    bound = run(*nodes, group(min_count=4, topology=RACK), *(indexed(n, 3 - i) for i, n in enumerate(NAMES)))
    assert bound == {"default/w-d": "n0", "default/w-c": "n1", "default/w-b": "n2", "default/w-a": "n3"}


def test_the_label_the_job_controller_sets_orders_them_too() -> None:
    nodes = [node(f"n{i}") for i in range(4)]
    bound = run(*nodes, group(min_count=4), *(indexed(n, 3 - i, where="labels") for i, n in enumerate(NAMES)))
    assert bound == {"default/w-d": "n0", "default/w-c": "n1", "default/w-b": "n2", "default/w-a": "n3"}


def test_the_completion_index_orders_only_workload_podgroup_members() -> None:
    # A pod of another gang (a Koordinator gang by annotation) keeps its order by name; a pod index
    # annotation koordpy read before still comes first; a value that is no index is ignored.
    def parsed(raw: dict[str, Any]) -> Pod:
        return Pod.from_raw(raw)

    other = [pod(n, annotations={JOB_COMPLETION_INDEX: str(3 - i)}) for i, n in enumerate(NAMES)]
    assert [p.name for p in rank_order([parsed(p) for p in other])] == list(NAMES)
    ours = [indexed(n, 3 - i) for i, n in enumerate(NAMES)]
    ours[0]["metadata"]["annotations"]["gang.scheduling.koordinator.sh/network-topology-index"] = "0"
    ours[3]["metadata"]["annotations"][JOB_COMPLETION_INDEX] = "x"
    assert [p.name for p in rank_order([parsed(p) for p in ours])] == ["w-a", "w-c", "w-b", "w-d"]
