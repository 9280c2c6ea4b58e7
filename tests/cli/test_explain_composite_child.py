"""``koordpy explain podgroup`` on a CompositePodGroup's child that the usual path does not reach:
one whose CompositePodGroup is missing, one whose pods finished while its siblings still run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.builders import node, pod
from tests.cli.test_explain import _explain_group, koordpy, write


def _child(name: str, parent: str) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"parentCompositePodGroupName": parent,
                     "workloadRef": {"workloadName": "w", "templateName": "t"},
                     "schedulingPolicy": {"gang": {"minCount": 2}}}}


COMPOSITE = {"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
             "metadata": {"name": "comp", "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minGroupCount": 2}},
                      "workloadRef": {"workloadName": "w", "templateName": "t"}}}


def _member(name: str, group: str, **kw: Any) -> dict[str, Any]:
    return pod(name, cpu="1", schedulingGroup={"podGroupName": group}, **kw)


def test_explain_podgroup_on_a_child_whose_composite_is_missing_explains_it(tmp_path: Path) -> None:
    # A child PodGroup whose CompositePodGroup does not exist (applied first, or the parent deleted)
    # is an object kubectl lists, and `explain pod` on its pods says they wait for the
    # CompositePodGroup: `explain podgroup` on the child explains it too, naming what it waits for.
    objects = [node("n0"), _child("c0", "comp"), *(_member(f"c0-{i}", "c0") for i in range(2))]
    run = koordpy("podgroup", "default/c0", "-f", write(tmp_path, "c.yaml", *objects))
    assert run.returncode == 0, run.stderr
    assert "CompositePodGroup default/comp" in run.stdout


def test_a_child_whose_composite_is_missing_and_whose_pods_run_says_the_composite_does_not_exist() -> None:
    objects = [node("n0"), _child("c0", "comp"), *(_member(f"c0-{i}", "c0", node_name="n0") for i in range(2))]
    exp = _explain_group(objects, "default/c0")
    assert exp.status == "bound"
    assert exp.job == "default/comp"
    assert "default/comp, which does not exist" in exp.summary, exp.summary


def test_a_finished_child_of_a_running_composite_does_not_say_the_job_finished() -> None:
    # A child is a part of the job, not the job: its pods all Succeeded while its sibling's still run
    # on n1, so the child has finished and the job (the CompositePodGroup's gang) has not.
    def done(p: dict[str, Any]) -> dict[str, Any]:
        p["status"] = {"phase": "Succeeded"}
        return p

    objects = [node("n0"), node("n1"), COMPOSITE, _child("c0", "comp"), _child("c1", "comp"),
               *(done(_member(f"c0-{i}", "c0", node_name="n0")) for i in range(2)),
               *(_member(f"c1-{i}", "c1", node_name="n1") for i in range(2))]
    exp = _explain_group(objects, "default/c0")
    assert exp.job == "default/comp"
    assert exp.status == "finished"
    assert "the job has finished" not in exp.summary, exp.summary
    assert exp.summary.startswith("the group has finished"), exp.summary
