"""Issue 34, item 2's decision: behind Kueue, koordpy's preemption never takes a pod Kueue admitted
(its label ``kueue.x-k8s.io/podset`` or its annotation ``kueue.x-k8s.io/workload``): Kueue holds
that job's quota and preempts by its own rules. A job that could only fit by evicting such pods
waits and says so; a pod Kueue admitted may still preempt pods Kueue did not admit."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from koordpy.api import Node, Pod
from koordpy.core import dialects
from koordpy.core.cluster import Cluster
from koordpy.core.cycle import schedule
from koordpy.core.decisions import CycleResult
from koordpy.core.messages import render
from koordpy.core.preemption import Plan, Preemptor
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.verdicts import AdmittedElsewhere
from koordpy.sim.simulator import World
from tests.builders import node, pod
from tests.core.test_runtime import CLASSES, cycle, pending, running, seconds, victims, world

PODSET = "kueue.x-k8s.io/podset"
WORKLOAD = "kueue.x-k8s.io/workload"


def admitted(raw: dict[str, Any], workload: str | None = "job-v-1a2b3", podset: bool = True) -> dict[str, Any]:
    """``raw`` as Kueue leaves a pod of a workload it admitted."""
    if podset:
        raw["metadata"]["labels"][PODSET] = "main"
    if workload is not None:
        raw["metadata"]["annotations"][WORKLOAD] = workload
    return raw


def test_the_kueue_dialect_says_who_admitted_a_pod_from_either_key() -> None:
    both = World.from_objects([("t", admitted(pod("a")))]).snapshot(frozenset({"koordpy"})).pods[0]
    label = World.from_objects([("t", admitted(pod("b"), workload=None))]).snapshot(frozenset({"koordpy"})).pods[0]
    note = World.from_objects([("t", admitted(pod("c"), podset=False))]).snapshot(frozenset({"koordpy"})).pods[0]
    plain = World.from_objects([("t", pod("d"))]).snapshot(frozenset({"koordpy"})).pods[0]
    found = dialects.admitted_by(both)
    assert found is not None and (found.by, found.what) == ("Kueue", "workload default/job-v-1a2b3")
    label_only = dialects.admitted_by(label)
    assert label_only is not None and label_only.what == ""
    assert dialects.admitted_by(note) is not None
    assert dialects.admitted_by(plain) is None


def test_an_admitted_victim_is_spared_and_an_equal_pod_kueue_did_not_admit_is_taken() -> None:
    # Two equal low-priority pods, each filling a node; the preemptor needs one node.
    w = world(CLASSES, node("n1"), node("n2"), admitted(running("kueued", "n1", started=0)),
              running("plain", "n2", started=0), pending("p"))
    assert victims(cycle(w, 5)) == ["default/plain"]


def test_the_same_pods_without_kueue_keys_are_both_candidates() -> None:
    # The control: without Kueue's keys, the name order picks n1's pod (the first candidate).
    w = world(CLASSES, node("n1"), node("n2"), running("kueued", "n1", started=0),
              running("plain", "n2", started=0), pending("p"))
    assert victims(cycle(w, 5)) == ["default/kueued"]


def test_a_job_that_only_fits_by_evicting_admitted_pods_waits_and_says_why() -> None:
    w = world(CLASSES, node("n1"), admitted(running("kueued", "n1", started=0)), pending("p"))
    out = cycle(w, 5)
    assert victims(out) == []
    assert ("victim default/kueued is not preempted: Kueue admitted it (workload default/job-v-1a2b3); Kueue's own "
            "preemption decides; the job waits for room.") in out.waiting["default/p"]
    assert out.next_deadline is None  # only a change in the cluster helps


def test_a_job_needing_admitted_and_plain_pods_names_the_admitted_ones_and_takes_none() -> None:
    # The preemptor needs two nodes; one holds a pod Kueue admitted.
    w = world(CLASSES, node("n1"), node("n2"), admitted(running("kueued", "n1", started=0)),
              running("plain", "n2", started=0),
              pending("p-0", annotations={"pod-group-name": "p"}), pending("p-1", annotations={"pod-group-name": "p"}),
              {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
               "metadata": {"name": "p", "namespace": "default"}, "spec": {"minMember": 2}})
    out = cycle(w, 5)
    assert victims(out) == []
    assert "victim default/kueued is not preempted: Kueue admitted it" in out.waiting["default/p-0"]


def test_a_pod_kueue_admitted_still_preempts_pods_it_did_not() -> None:
    w = world(CLASSES, node("n1"), running("plain", "n1", started=0), admitted(pending("p"), workload="job-p-9z"))
    assert victims(cycle(w, 5)) == ["default/plain"]


def test_a_minimum_runtime_is_named_first_when_it_alone_keeps_the_room() -> None:
    # n1's pod is protected by its minimum runtime, n2's admitted by Kueue: once the minimum runtime
    # passes the job fits on n1, so it waits for that and says so.
    w = world(CLASSES, node("n1"), node("n2"),
              running("young", "n1", started=2, annotations={"koordpy.io/min-runtime": "10m"}),
              admitted(running("kueued", "n2", started=0)), pending("p"))
    out = cycle(w, 5)
    assert victims(out) == []
    assert "victim default/young is protected by its minimum runtime" in out.waiting["default/p"]
    assert out.next_deadline is not None


def test_a_pod_both_protected_and_admitted_is_named_as_admitted() -> None:
    # Its minimum runtime passing would not let the job preempt it: Kueue's keys are what stops it.
    w = world(CLASSES, node("n1"),
              admitted(running("kueued", "n1", started=2, annotations={"koordpy.io/min-runtime": "10m"})),
              pending("p"))
    out = cycle(w, 5)
    assert victims(out) == []
    assert "victim default/kueued is not preempted: Kueue admitted it" in out.waiting["default/p"]


def test_the_words() -> None:
    assert render(AdmittedElsewhere("default/v", "Kueue", "", 2)) == (
        "preemption: victim default/v (and 2 more pod(s)) is not preempted: Kueue admitted it; Kueue's own "
        "preemption decides; the job waits for room.")


def test_explain_says_the_victim_kueue_admitted_is_not_preempted(tmp_path: Path, capsys: Any) -> None:
    from koordpy.cli.main import main

    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all([*CLASSES, node("n1"), admitted(running("kueued", "n1", started=0)),
                                        pending("p")]))
    assert main(["explain", "pod", "default/p", "-f", str(path), "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    said = ("victim default/kueued is not preempted: Kueue admitted it (workload default/job-v-1a2b3); Kueue's own "
            "preemption decides; the job waits for room.")
    assert out["preemption"]["outcome"] == "none" and out["preemption"]["wouldEvict"] == []
    assert out["preemption"]["message"] == said
    assert f"preemption cannot help: {said}" in out["changes"]


def test_a_pod_admitted_between_two_cycles_of_the_standing_view_stops_being_a_victim() -> None:
    # Whether a pod was admitted is kept with its other preemption facts (``PodMeta.admitted``): the
    # standing view's cluster must make them again when Kueue writes its keys on a pod it counts.
    w = world(CLASSES, node("n1"), node("n2"), running("kueued", "n1", started=0), running("plain", "n2", started=0))
    state = SchedulerState()
    assert victims(schedule(w.snapshot(frozenset({"koordpy"})), state, seconds(4))) == []
    cluster = state.standing_view().cluster
    assert cluster is not None and not cluster.index.admitted[cluster.index.row["default/kueued"]]
    was = w.pods["default/kueued"]
    w.pods[was.key] = was.model_copy(update={"labels": {**was.labels, PODSET: "main"},
                                             "annotations": {**was.annotations, WORKLOAD: "job-v-1a2b3"}})
    w.pods["default/p"] = world(CLASSES, pending("p")).pods["default/p"]
    out = schedule(w.snapshot(frozenset({"koordpy"})), state, seconds(5))
    assert state.standing_view().cluster is cluster  # counted again pod by pod, not made afresh
    # Not admitted, the name order would take n1's pod (test_the_same_pods_without_kueue_keys_...).
    assert victims(out) == ["default/plain"]


def test_pods_alike_but_for_kueues_keys_are_told_apart_when_counted_in_bulk() -> None:
    # ``Cluster.adopt_many`` hands one member's PodMeta to the next one alike (a gang's members):
    # whether Kueue admitted it is part of what makes them alike.
    plain, kueued = Pod.from_raw(pod("a", "1")), Pod.from_raw(admitted(pod("b", "1")))
    cluster = Cluster(Snapshot(nodes=[Node.from_raw(node("n1", cpu="64"))], pods=[]))
    keys = [plain.key, kueued.key]
    cluster.recount_many(keys, {plain.key: plain, kueued.key: kueued}, {})  # new pending pods: only noted
    cluster.adopt_many(keys, np.zeros(2, dtype=np.int64), cluster.request_vector(plain))
    idx = cluster.index
    assert [bool(idx.admitted[idx.row[k]]) for k in keys] == [False, True]


def _anchored(kueued_on: str) -> World:
    """A gang gathered on a spine (MustGather) whose running member keeps it in spine-a; spine-a's other
    node is held by a pod of its own priority (no victim), spine-b holds a low-priority pod Kueue did
    not admit and, unless ``kueued_on`` names spine-a's node, one it admitted."""
    from tests.builders import SPINE_BLOCK_CNT, podgroup, priority_class, spine_block_nodes
    from tests.core.test_preemption import MUST_SPINE
    from tests.core.test_preemption import running as placed

    layout = {"spine-a": {"blk-a": [0, 1]}, "spine-b": {"blk-b": [2, 3, 4]}}
    return world(spine_block_nodes(layout), SPINE_BLOCK_CNT, priority_class("high", 1000), priority_class("low", 10),
                 podgroup("train", 2, gather=MUST_SPINE),
                 pod("train-0", group="train", index=0, node_name="node-0", priority_class="high"),
                 pod("train-1", group="train", index=1, priority_class="high"),
                 placed("keep", "node-1" if kueued_on != "node-1" else "node-4", prio="high"),
                 admitted(placed("kueued", kueued_on)), placed("plain", "node-3"))


def _runs_without_the_mask(w: World, monkeypatch: Any) -> tuple[list[bool], CycleResult]:
    """The cycle's result, and per dry run whether it was the one without the admitted mask."""
    runs: list[bool] = []
    real = Preemptor.plan

    def plan(self: Preemptor, *args: Any) -> Plan:
        runs.append(self._unadmitted)
        return real(self, *args)

    with monkeypatch.context() as m:
        m.setattr(Preemptor, "plan", plan)
        out = cycle(w, 5)
    return runs, out


def test_the_dry_run_without_the_admitted_mask_runs_only_where_an_admitted_pod_takes_part(monkeypatch: Any) -> None:
    # The pod Kueue admitted is outside the gang's only candidate (spine-a): the dry run without the
    # mask would have one victim more where no plan takes any, and is not run.
    runs, out = _runs_without_the_mask(_anchored("node-2"), monkeypatch)
    assert runs == [False]
    said = out.waiting["default/train-1"]
    assert "preemption: not helpful" in said and "Kueue" not in said
    # The same answer as that dry run gives when it is run (every node taken to take part).
    monkeypatch.setattr(Preemptor, "_reach", lambda self, *a: np.ones(len(self.cluster.nodes), dtype=np.bool_))
    runs, ran = _runs_without_the_mask(_anchored("node-2"), monkeypatch)
    assert runs == [False, True]
    assert (ran.waiting, ran.decisions) == (out.waiting, out.decisions)


def test_the_dry_run_without_the_admitted_mask_runs_where_an_admitted_pod_is_in_the_candidate(
        monkeypatch: Any) -> None:
    runs, out = _runs_without_the_mask(_anchored("node-1"), monkeypatch)
    assert runs == [False, True]
    assert "victim default/kueued is not preempted: Kueue admitted it" in out.waiting["default/train-1"]


# -- Kueue's topology assignment (TAS), kept and named -------------------------------------------------

RACK = "example.com/rack"
REQUIRED_RACK = {"kueue.x-k8s.io/podset-required-topology": RACK}


def racks() -> list[dict[str, Any]]:
    """n1 in rack r1, full (a pod Kueue did not admit, of equal priority: no preemption); n2 in r2, empty."""
    full = running("other", "n1", started=0)
    full["spec"]["priorityClassName"] = "high"
    return [node("n1", labels={RACK: "r1"}), node("n2", labels={RACK: "r2"}), full]


def ungated(raw: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """``raw`` as Kueue's topology ungater leaves a pod it assigned to rack r1: its pod set's TAS
    annotation, the domain's level label in its nodeSelector, the gate gone."""
    raw["metadata"]["annotations"].update(annotations)
    raw["spec"]["nodeSelector"] = {RACK: "r1"}
    return raw


def test_a_kueue_topology_assignment_that_cannot_be_met_is_named_and_nothing_else_is_tried() -> None:
    w = world(CLASSES, *racks(), admitted(ungated(pending("p"), **REQUIRED_RACK)))
    out = cycle(w, 5)
    assert not [d for d in out.decisions if type(d).__name__ == "Bind"]  # never r2's empty node
    said = out.waiting["default/p"]
    assert ("Kueue's topology assignment for workload default/job-v-1a2b3 (nodeSelector example.com/rack=r1) cannot "
            "take the job now: koordpy places the pod nowhere else; its waitForPodsReady requeues it if this lasts."
            ) in said, said
    assert said.startswith("0/2 nodes are available"), said  # kube-scheduler's count comes first


def test_every_tas_annotation_kueue_writes_marks_an_assignment() -> None:
    for what in ("preferred", "unconstrained", "slice-required"):
        w = world(CLASSES, *racks(), admitted(ungated(pending("p"), **{f"kueue.x-k8s.io/podset-{what}-topology": "x"})))
        assert "Kueue's topology assignment" in cycle(w, 5).waiting["default/p"], what


def test_without_kueue_tas_the_same_selector_is_the_pods_own_and_not_credited_to_kueue() -> None:
    # Controls: admitted without TAS (its selector is its own, or the flavor's), and TAS-annotated
    # but not admitted (Kueue has assigned nothing yet): the plain filter message.
    for raw in (admitted(ungated(pending("p"))), ungated(pending("p"), **REQUIRED_RACK)):
        said = cycle(world(CLASSES, *racks(), raw), 5).waiting["default/p"]
        assert "topology assignment" not in said and said.startswith("0/2 nodes are available"), said


def test_a_gang_kueue_assigned_names_the_assignment_on_every_member() -> None:
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    members = [admitted(ungated(pending(f"g-{i}", cpu="4", annotations={"pod-group-name": "g"}), **REQUIRED_RACK))
               for i in range(2)]
    out = cycle(world(CLASSES, *racks(), group, *members), 5)
    for i in range(2):
        said = out.waiting[f"default/g-{i}"]
        assert "Kueue's topology assignment for workload default/job-v-1a2b3 (nodeSelector example.com/rack=r1)" in said


def test_explain_names_the_assignment_too(tmp_path: Path, capsys: Any) -> None:
    from koordpy.cli.main import main

    path = tmp_path / "world.yaml"
    path.write_text(yaml.safe_dump_all([*CLASSES, *racks(), admitted(ungated(pending("p"), **REQUIRED_RACK))]))
    assert main(["explain", "pod", "default/p", "-f", str(path)]) == 0
    assert "Kueue's topology assignment for workload default/job-v-1a2b3" in capsys.readouterr().out


def test_the_assignment_is_not_said_unmeetable_while_preemption_makes_room_inside_it() -> None:
    # r1 holds a lower-priority pod Kueue did not admit: koordpy preempts it for the TAS pod, which
    # will fit in its assignment once it is gone (review of issue 34: the message contradicted that).
    w = world(CLASSES, node("n1", labels={RACK: "r1"}), node("n2", labels={RACK: "r2"}),
              running("low", "n1", started=0), admitted(ungated(pending("p"), **REQUIRED_RACK)))
    out = cycle(w, 5)
    assert victims(out) == ["default/low"]
    assert "topology assignment" not in out.waiting["default/p"], out.waiting


def test_replacements_that_do_not_fit_name_the_assignment_too() -> None:
    # A gang of 2 ran (satisfied once); one member was lost, its replacement is pinned by Kueue to r1,
    # which is full: the replacements' message names Kueue's assignment as the first failure does.
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState
    from tests.core.test_runtime import seconds

    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}
    member = admitted(running("g-0", "n2", started=0, annotations={"pod-group-name": "g"}))
    member["spec"]["priorityClassName"] = "high"
    lost = admitted(ungated(pending("g-1", annotations={"pod-group-name": "g"}), **REQUIRED_RACK))
    state = SchedulerState()
    state.mark_satisfied(["default/g"])
    out = schedule(world(CLASSES, *racks(), group, member, lost).snapshot(frozenset({"koordpy"})), state, seconds(5))
    said = out.waiting["default/g-1"]
    assert "Kueue's topology assignment" in said, said
