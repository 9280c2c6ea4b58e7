"""``koordpy simulate`` as a user runs it: the example, JSON and table output, bad input on stderr."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.builders import node, pod, podgroup

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "spine-block"


def koordpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "koordpy", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False)


def test_simulate_example_json() -> None:
    run = koordpy("simulate", "-f", str(EXAMPLE), "-o", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert {out["bound"][f"default/training-pod-{i}"] for i in range(4)} == {f"node-{i}" for i in range(5, 9)}
    assert set(out["bound"]) >= {f"default/block-pod-{i}" for i in range(6)}
    assert "desiredOfferSlot: 6" in out["pending"]["default/too-big-0"]
    assert out["preempted"] == []
    assert out["topology"]["detailStatus"][0]["nodeNum"] == 12
    assert out["podgroups"]["default/too-big"]["phase"] == "PreScheduling"


def test_simulate_example_table() -> None:
    run = koordpy("simulate", "-f", str(EXAMPLE / "cluster.yaml"), "-f", str(EXAMPLE / "jobs.yaml"))
    assert run.returncode == 0, run.stderr
    assert re.search(r"default/training-pod-0 +node-5 +Bound", run.stdout)
    assert "10 bound, 6 pending, 0 preempted" in run.stdout


def write(tmp_path: Path, name: str, *objects: object) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


@pytest.mark.parametrize(("objects", "needles"), [
    ([podgroup("g", 0)], ["PodGroup default/g", "spec.minMember", "at least 1"]),
    ([pod("p", cpu="many")], ["Pod default/p", "spec.containers[0].resources.requests.cpu"]),
    ([pod("p", priority_class="missing")], ["Pod default/p", "spec.priorityClassName", "'missing'"]),
    ([pod("p", annotations={"gang.scheduling.koordinator.sh/network-topology-index": "x"})],
     ["Pod default/p", "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-index]"]),
    ([pod("p", annotations={"gang.scheduling.koordinator.sh/name": "g"})],
     ["Pod default/p", "metadata.annotations[gang.scheduling.koordinator.sh/min-available]"]),
    ([{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}], ["Service s", "unsupported v1/Service"]),
    ([{"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
       "metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
           {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": ["b"]}]}}],
     ["ClusterNetworkTopology default", "parentTopologyLayer", "'SpineLayer'"]),
])
def test_invalid_input_exits_2_naming_file_object_and_field(tmp_path: Path, objects: list[object],
                                                            needles: list[str]) -> None:
    path = write(tmp_path, "bad.yaml", node("n"), *objects)
    run = koordpy("simulate", "-f", path, "-o", "json")
    assert run.returncode == 2 and run.stdout == ""
    assert path in run.stderr
    for needle in needles:
        assert needle in run.stderr


def test_unparseable_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("kind: [unclosed")
    run = koordpy("simulate", "-f", str(bad))
    assert run.returncode == 2 and "broken.yaml: not valid YAML" in run.stderr
    missing = koordpy("simulate", "-f", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_unschedulable_workload_exits_0(tmp_path: Path) -> None:
    run = koordpy("simulate", "-f", write(tmp_path, "w.yaml", node("n"), pod("huge", cpu="64")), "-o", "json")
    assert run.returncode == 0
    assert json.loads(run.stdout)["pending"] == {"default/huge": "0/1 nodes are available: 1 Insufficient cpu."}


def test_scheduler_name_option(tmp_path: Path) -> None:
    path = write(tmp_path, "w.yaml", node("n"), pod("mine", cpu="1", scheduler="team-a"))
    assert json.loads(koordpy("simulate", "-f", path, "-o", "json").stdout)["bound"] == {}
    named = koordpy("simulate", "-f", path, "-o", "json", "--scheduler-name", "team-a")
    assert json.loads(named.stdout)["bound"] == {"default/mine": "n"}


def test_list_kind_and_folder_order(tmp_path: Path) -> None:
    (tmp_path / "a-nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node("n")]}))
    write(tmp_path, "b-pods.yaml", pod("p", cpu="1"))
    (tmp_path / "expected.json").write_text("{}")  # a folder's JSON is not read as manifests
    out = json.loads(koordpy("simulate", "-f", str(tmp_path), "-o", "json").stdout)
    assert out["bound"] == {"default/p": "n"}
