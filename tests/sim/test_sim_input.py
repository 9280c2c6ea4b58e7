"""The simulator's input side: loading manifests, duplicates, creation times, the round limit."""

from __future__ import annotations

import importlib
import io
import os
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import koordpy.cli.manifests as cli
import koordpy.sim.simulator as simulator
from koordpy.api.errors import ParseError
from koordpy.api.raw import Reader
from koordpy.cli.main import main
from koordpy.sim.simulator import InputError, World, simulate
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup

DATA = Path(__file__).resolve().parents[1] / "data"


def write(tmp_path: Path, name: str, *objects: object) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def load(paths: list[str], stdin: str = "") -> cli.Loaded:
    return cli.load_documents(paths, io.StringIO(stdin))


# --- YAML ---------------------------------------------------------------------------------------


def test_libyaml_loader_is_used_when_available() -> None:
    assert yaml.__with_libyaml__, "the venv's PyYAML is built without libyaml"
    assert issubclass(cli._Loader, yaml.CSafeLoader)


@pytest.fixture
def pure_python_yaml(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.delattr(yaml, "CSafeLoader")
    try:
        yield importlib.reload(cli)
    finally:
        monkeypatch.undo()
        importlib.reload(cli)


def test_falls_back_to_the_python_loader(pure_python_yaml: Any) -> None:
    assert pure_python_yaml._Loader.__mro__[2] is yaml.SafeLoader
    with pytest.raises(pure_python_yaml.UsageError, match=r"^f\.yaml:3:1: duplicate key 'b' \(first at line 2\)$"):
        pure_python_yaml.parse_manifests("f.yaml", "a: 1\nb: 2\nb: 3\n")
    docs, _ = pure_python_yaml.parse_manifests("f.yaml", "kind: Node\n---\nkind: Pod\n")
    assert [d for _, d in docs] == [{"kind": "Node"}, {"kind": "Pod"}]


@pytest.mark.parametrize(("text", "expected"), [
    ("a: 1\nb: 2\na: 3\n", "f.yaml:3:1: duplicate key 'a' (first at line 1)"),
    ("kind: Pod\nmetadata:\n  name: x\n  labels: {app: a, app: b}\n",
     "f.yaml:4:20: duplicate key 'app' (first at line 4)"),
    ("items:\n- spec:\n    nodeName: n\n    nodeName: m\n", "f.yaml:4:5: duplicate key 'nodeName' (first at line 3)"),
    ("kind: [unclosed", "f.yaml:2:1: did not find expected ',' or ']' (while parsing a flow sequence at line 1)"),
    ("a: 1\n b: 2\n", "f.yaml:2:3: mapping values are not allowed in this context"),
    ("a: b\nc: \x07\n", "f.yaml:2:4: unacceptable character #x0007: control characters are not allowed"),
    ("a: !!python/object:os.system x\n",
     "f.yaml:1:4: could not determine a constructor for the tag 'tag:yaml.org,2002:python/object:os.system'"),
])
def test_bad_yaml_is_one_line_with_place(text: str, expected: str) -> None:
    with pytest.raises(cli.UsageError) as info:
        cli.parse_manifests("f.yaml", text)
    assert str(info.value) == expected


def test_merge_keys_may_be_overridden_and_equal_keys_in_different_mappings_are_fine() -> None:
    text = "base: &b {cpu: '1', memory: 1Gi}\nreq:\n  <<: *b\n  cpu: '2'\nother: {cpu: '3'}\n"
    docs, _ = cli.parse_manifests("f.yaml", text)
    assert docs[0][1]["req"] == {"cpu": "2", "memory": "1Gi"}


def test_documents_and_list_items_are_named_by_place() -> None:
    text = "kind: Node\n---\n---\nkind: List\napiVersion: v1\nitems: [{kind: Pod}, {kind: Node}]\n"
    docs, _ = cli.parse_manifests("f.yaml", text)
    assert [s for s, _ in docs] == ["f.yaml (document 1)", "f.yaml (document 3, item 1)",
                                    "f.yaml (document 3, item 2)"]
    with pytest.raises(InputError, match=r"f\.yaml \(document 2\): not a Kubernetes object \(a str\)"):
        cli.parse_manifests("f.yaml", "kind: Node\n---\njust words\n")


# --- inputs -------------------------------------------------------------------------------------


def test_stdin_kubectl_list_loads_every_item() -> None:
    loaded = load(["-"], (DATA / "kubectl-get-cluster.yaml").read_text())
    kinds = [d["kind"] for _, d in loaded.docs]
    assert kinds.count("Node") == 3 and kinds.count("Pod") == 7 and kinds.count("PriorityClass") == 3
    assert loaded.docs[0][0] == "<stdin> (document 1, item 1)"
    world = World.from_objects(loaded.docs)
    assert world.priority_classes["system-node-critical"].value == 2000001000
    assert world.pods["kube-system/coredns-7c65d6cfc9-x2kq8"].priority == 2000000000
    assert world.podgroups["ml/old-job"].status.phase == "Running"


def test_stdin_can_be_read_once(tmp_path: Path) -> None:
    with pytest.raises(cli.UsageError, match="'-f -' given 2 times: standard input can be read once"):
        load(["-", write(tmp_path, "a.yaml", node("n")), "-"], "kind: Node\n")


def test_empty_inputs_say_what_was_read_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("# nothing yet\n")
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "notes.txt").write_text("kind: Node\n")
    (folder / "x.json").write_text("{}")
    (tmp_path / "empty").mkdir()
    blank = tmp_path / "blank"
    blank.mkdir()
    (blank / "a.yaml").write_text("---\n")
    (blank / "sub").mkdir()
    ok = write(tmp_path, "ok.yaml", node("n"))
    with pytest.raises(cli.UsageError) as info:
        load([str(tmp_path / "a.txt"), str(folder), ok, str(tmp_path / "empty"), str(blank), "-"],
             "apiVersion: v1\nkind: List\nitems: []\n")
    assert str(info.value) == (
        f"no Kubernetes objects in: {tmp_path}/a.txt (empty); {folder}/ (skipped notes.txt, x.json: "
        f"only *.yaml/*.yml are read from folders); {tmp_path}/empty/ (an empty folder); "
        f"{blank}/ (read a.yaml: no objects; skipped sub/: only *.yaml/*.yml are read from folders); "
        "<stdin> (a List with no items)")


def test_named_files_are_read_whatever_their_extension_and_folders_note_what_they_skip(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text('{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}')
    folder = tmp_path / "jobs"
    folder.mkdir()
    write(folder, "b.yml", pod("b"))
    write(folder, "a.YAML", pod("a"))
    (folder / "README.md").write_text("# jobs\n")
    loaded = load([str(tmp_path / "cluster.json"), str(folder)])
    assert [d["metadata"]["name"] for _, d in loaded.docs] == ["n", "a", "b"]
    assert loaded.notes == [f"{folder}/: skipped README.md (only *.yaml/*.yml are read from folders)"]


def test_missing_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"nope\.yaml: no such file or folder"):
        load([str(tmp_path / "nope.yaml")])
    (tmp_path / "bin.yaml").write_bytes(b"kind: \xff\xfe\n")
    with pytest.raises(InputError, match=r"bin\.yaml: cannot read: not UTF-8 text \(byte 6\)"):
        load([str(tmp_path / "bin.yaml")])


# --- duplicates ---------------------------------------------------------------------------------


PC = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"}, "value": 10}


@pytest.mark.parametrize(("obj", "ref"), [
    (node("n1"), "Node n1"),
    (podgroup("g", 1), "PodGroup default/g"),
    (PC, "PriorityClass high"),
    (SPINE_BLOCK_CNT, "ClusterNetworkTopology default"),
    (pod("p", cpu="1"), "Pod default/p"),
])
def test_an_object_twice_names_both_places(tmp_path: Path, obj: dict[str, Any], ref: str) -> None:
    a = write(tmp_path, "a.yaml", node("n0"), PC if obj is not PC else node("n2"), obj)
    b = write(tmp_path, "b.yaml", obj)
    with pytest.raises(InputError) as info:
        World.from_objects(load([a, b]).docs)
    assert str(info.value) == f"{b} (document 1): {ref}: metadata.name: defined twice, first in {a} (document 3)"


def test_same_name_in_other_namespace_or_kind_is_not_a_duplicate() -> None:
    other = pod("p", cpu="1")
    other["metadata"]["namespace"] = "team-b"
    world = World.from_objects([("t", o) for o in [node("p"), pod("p", cpu="1"), other, podgroup("p", 1)]])
    assert set(world.pods) == {"default/p", "team-b/p"}


# --- creation times -----------------------------------------------------------------------------


def test_creation_times_are_read_by_the_api_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[object, str]] = []
    original = Reader.timestamp

    def spy(self: Reader, value: object, field: str) -> float | None:
        seen.append((value, field))
        if value == "refuse-me":
            raise self.fail(field, "refused by the API layer")
        return original(self, value, field)

    monkeypatch.setattr(Reader, "timestamp", spy)
    stamped = node("n")
    stamped["metadata"]["creationTimestamp"] = "2027-03-01T00:00:00Z"
    world = World.from_objects([("a.yaml", stamped), ("a.yaml", pod("p", cpu="1"))])
    assert ("2027-03-01T00:00:00Z", "metadata.creationTimestamp") in seen
    # objects without a time are created after the latest stamped one
    assert world.pods["default/p"].creation is not None
    assert world.pods["default/p"].creation > datetime(2027, 3, 1, tzinfo=UTC).timestamp()
    bad = pod("q")
    bad["metadata"]["creationTimestamp"] = "refuse-me"
    with pytest.raises(InputError, match=r"^b\.yaml: Pod default/q: metadata\.creationTimestamp: refused by"):
        World.from_objects([("b.yaml", bad)])


@pytest.mark.parametrize("value", ["yesterday", ["2026-01-01T00:00:00Z"]])
def test_bad_creation_time_names_object_and_field(value: object) -> None:
    bad = node("n")
    bad["metadata"]["creationTimestamp"] = value
    with pytest.raises(InputError) as info:
        World.from_objects([("c.yaml (document 1)", bad)])
    assert isinstance(info.value.__cause__, ParseError)
    assert str(info.value).startswith("c.yaml (document 1): Node n: metadata.creationTimestamp: expected an RFC 3339")


# --- the round limit ----------------------------------------------------------------------------


def small_world() -> World:
    return World.from_objects([("t", o) for o in [node("n"), pod("a", cpu="1"), pod("b", cpu="1")]])


def test_round_limit_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    settled = simulate(small_world())
    assert not settled.truncated and settled.to_json()["truncated"] is False
    assert settled.rounds > 1
    monkeypatch.setattr(simulator, "MAX_ROUNDS", settled.rounds - 1)
    cut = simulate(small_world())
    assert cut.truncated and cut.rounds == settled.rounds - 1 and cut.to_json()["truncated"] is True


def test_round_limit_exactly_enough_is_not_truncation(monkeypatch: pytest.MonkeyPatch) -> None:
    rounds = simulate(small_world()).rounds
    monkeypatch.setattr(simulator, "MAX_ROUNDS", rounds)
    assert not simulate(small_world()).truncated


def test_cli_exits_3_on_the_round_limit(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                        tmp_path: Path) -> None:
    path = write(tmp_path, "w.yaml", node("n"), pod("a", cpu="1"))
    monkeypatch.setattr(simulator, "MAX_ROUNDS", 1)
    assert main(["simulate", "-f", path, "-o", "json"]) == 3
    out, err = capsys.readouterr()
    assert yaml.safe_load(out)["truncated"] is True
    assert err == ("koordpy simulate: error: stopped at the limit of 1 scheduling rounds before the cluster "
                   "settled; the result above is partial\n")


@pytest.mark.parametrize("value", ["9999-12-31T23:59:59Z", float("inf"), float("nan")])
def test_creation_time_out_of_range_is_refused(value: object) -> None:
    stamped = node("n")
    stamped["metadata"]["creationTimestamp"] = value
    with pytest.raises(InputError, match=r"^c\.yaml: Node n: metadata\.creationTimestamp: out of range"):
        World.from_objects([("c.yaml", stamped), ("c.yaml", pod("p", cpu="1"))])


def test_yaml_nested_too_deeply_is_one_line_not_a_traceback() -> None:
    with pytest.raises(cli.UsageError, match=r"^f\.yaml: nested too deeply"):
        cli.parse_manifests("f.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n")


def test_yaml_aliases_and_merge_keys_build_like_pyyaml() -> None:
    text = "base: &b {x: 1, y: [1, 2]}\nuse: *b\nmerged:\n  <<: *b\n  y: 3\nkind: Node\n"
    docs, _ = cli.parse_manifests("f.yaml", text)
    assert [d for _, d in docs] == list(yaml.safe_load_all(text))


@pytest.mark.parametrize("fork", [True, False])
def test_manifests_read_aside_or_in_line_give_the_same_result_and_errors(
        fork: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # The CLI reads the manifests in a forked child where it can; without fork it reads them itself.
    if not fork:
        monkeypatch.delattr(os, "fork")
    good = write(tmp_path, "good.yaml", node("n"), pod("a", cpu="1"))
    assert main(["simulate", "-f", good, "-o", "json"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["bound"] == {"default/a": "n"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: 1\na: 2\n")
    assert main(["simulate", "-f", str(bad)]) == 2
    assert capsys.readouterr().err == f"koordpy simulate: error: {bad}:2:1: duplicate key 'a' (first at line 1)\n"


# --- pods already terminating ------------------------------------------------------------------


def mid_preemption(**victim_meta: Any) -> list[dict[str, Any]]:
    """One 8-CPU node whose low-priority pod is being evicted (deletionTimestamp, DisruptionTarget)
    for a pending high-priority pod nominated to it: a snapshot taken mid-preemption."""
    victim = pod("victim", cpu="8", node_name="n1", scheduler="default-scheduler", priority=0,
                 terminationGracePeriodSeconds=45)
    victim["metadata"].update(victim_meta)
    victim["status"] = {"phase": "Running", "conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]}
    urgent = pod("urgent", cpu="8", priority=1000)
    urgent["status"] = {"nominatedNodeName": "n1"}
    return [node("n1"), victim, urgent]


@pytest.mark.parametrize(("victim_meta", "grace"), [
    ({"deletionTimestamp": "2030-01-01T00:00:00Z", "deletionGracePeriodSeconds": 5}, 5.0),
    ({"deletionTimestamp": "2030-01-01T00:00:00Z"}, 45.0),  # no deletion grace: the pod's own
])
def test_a_pod_given_terminating_leaves_after_its_grace_period(victim_meta: dict[str, Any], grace: float) -> None:
    # Issue 17 item 13: a terminating pod leaves as an evicted victim does, so the pending pod that
    # waits for its room binds and the snapshot completes instead of waiting forever.
    world = World.from_objects([("test", o) for o in mid_preemption(**victim_meta)])
    start = world.now
    assert world.next_deletion() == start + grace
    out = simulate(world)
    assert out.bound == {"default/urgent": "n1"} and not out.pending
    assert "default/victim" not in world.pods and out.preempted == []  # it was not ours to evict
    assert world.now == start + grace


def test_a_terminating_pod_goes_by_its_deletion_timestamp_when_that_comes_first() -> None:
    objects = mid_preemption(deletionTimestamp="2030-01-01T00:00:00Z", deletionGracePeriodSeconds=30)
    for o in objects:  # the snapshot's times: created 10 s before the deletion deadline
        o["metadata"]["creationTimestamp"] = "2029-12-31T23:59:50Z"
    world = World.from_objects([("test", o) for o in objects])
    deadline = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    assert world.now < deadline < world.now + 30
    assert world.next_deletion() == deadline
    assert simulate(world).bound == {"default/urgent": "n1"}


def test_bad_deletion_grace_names_the_field() -> None:
    objects = mid_preemption(deletionTimestamp="2030-01-01T00:00:00Z", deletionGracePeriodSeconds=-1)
    with pytest.raises(InputError) as err:
        World.from_objects([("f.yaml", o) for o in objects])
    assert "Pod default/victim" in str(err.value) and "metadata.deletionGracePeriodSeconds" in str(err.value)


# --- Jobs given without their pods --------------------------------------------------------------


def gpu_job(name: str, parallelism: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "default",
                         "annotations": {"kai.scheduler/topology": "hosts",
                                         "kai.scheduler/topology-required-placement": "kubernetes.io/hostname"}},
            "spec": {"parallelism": parallelism, **spec, "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"schedulerName": "koordpy", "restartPolicy": "Never",
                         "containers": [{"name": "main", "image": "busybox",
                                         "resources": {"requests": {"cpu": "2"}}}]}}}}


HOSTS = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "hosts"},
         "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}}


def test_a_job_given_without_its_pods_gets_them_as_the_job_controller_would() -> None:
    # Issue 17 item 14: an example's Job is valid for the API server and its pods come from its
    # template (live, from the Job controller); simulate does the same for a Job not yet started.
    world = World.from_objects([("f.yaml", o) for o in (node("n1"), node("n2"), HOSTS,
                                                        gpu_job("t", 3, completions=2, completionMode="Indexed"))])
    assert sorted(world.pods) == ["default/t-0", "default/t-1"]  # min(parallelism, completions)
    p = world.pods["default/t-1"]
    assert p.labels["app"] == "t" and p.labels["batch.kubernetes.io/job-name"] == "t"
    assert p.annotations["batch.kubernetes.io/job-completion-index"] == "1"
    assert p.owner_references[0]["kind"] == "Job" and p.owner_references[0]["name"] == "t"
    assert world.created and "Job default/t" in world.created[0] and "t-0, t-1" in world.created[0]
    out = simulate(world)
    assert set(out.bound) == {"default/t-0", "default/t-1"}
    assert len(set(out.bound.values())) == 1  # the Job's own constraint (one host) was read


@pytest.mark.parametrize("change", [
    {"status": {"startTime": "2026-01-01T00:00:00Z"}},  # the controller started it: its pods are elsewhere or gone
    {"spec": {"suspend": True}},
])
def test_a_started_or_suspended_job_gets_no_pods(change: dict[str, Any]) -> None:
    job = gpu_job("t", 2)
    for k, v in change.items():
        job.setdefault(k, {}).update(v)
    world = World.from_objects([("f.yaml", o) for o in (node("n1"), HOSTS, job)])
    assert world.pods == {} and world.created == []


def test_a_job_given_with_a_pod_of_its_own_gets_no_more() -> None:
    job = gpu_job("t", 2)
    mine = pod("t-abcde", cpu="2")
    mine["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "t", "uid": "u",
                                           "controller": True}]
    world = World.from_objects([("f.yaml", o) for o in (node("n1"), HOSTS, job, mine)])
    assert list(world.pods) == ["default/t-abcde"]
