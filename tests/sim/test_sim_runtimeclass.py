"""``koordpy simulate`` and a RuntimeClass (``node.k8s.io/v1``): the class a new pod names is merged
into it as the API server's RuntimeClass admission does (kubernetes
``plugin/pkg/admission/runtimeclass``: overhead, node selector, tolerations), input it refuses is
refused (exit 2), and a pod read back from a cluster is not merged again (issue 29, item 12)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api.runtimeclass import merge_tolerations
from koordpy.sim.simulator import InputError, World
from tests.builders import node, pod, run

ROOT = Path(__file__).resolve().parents[2]


def runtime_class(name: str = "gvisor", *, overhead: dict[str, str] | None = None,
                  selector: dict[str, str] | None = None,
                  tolerations: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                           "handler": "runsc"}
    if overhead is not None:
        out["overhead"] = {"podFixed": overhead}
    if selector is not None or tolerations is not None:
        out["scheduling"] = {**({"nodeSelector": selector} if selector is not None else {}),
                             **({"tolerations": tolerations} if tolerations is not None else {})}
    return out


def tainted(name: str, key: str) -> dict[str, Any]:
    n = node(name, cpu="4")
    n["spec"] = {"taints": [{"key": key, "value": "true", "effect": "NoSchedule"}]}
    return n


def test_the_overhead_of_the_class_counts_in_the_pods_request() -> None:
    # 4 CPUs: a 3.5-CPU pod fits alone, not with the class's 1 CPU of overhead.
    bare = run(node("n0", cpu="4"), runtime_class(overhead={"cpu": "1"}), pod("p", cpu="3500m"))
    assert bare.bound == {"default/p": "n0"}
    result = run(node("n0", cpu="4"), runtime_class(overhead={"cpu": "1"}),
                 pod("p", cpu="3500m", runtimeClassName="gvisor"))
    assert result.bound == {}
    assert "Insufficient cpu" in result.pending["default/p"]


def test_the_class_node_selector_and_tolerations_are_merged_into_the_pod() -> None:
    # The class's nodes are tainted and labelled: only its selector and tolerations get the pod there.
    objects = [node("plain", cpu="1"), {**tainted("sandbox", "sandboxed"),
                                        "metadata": {"name": "sandbox", "labels": {"runtime": "gvisor"}}},
               runtime_class(selector={"runtime": "gvisor"},
                             tolerations=[{"key": "sandboxed", "operator": "Exists", "effect": "NoSchedule"}])]
    result = run(*objects, pod("p", cpu="2", runtimeClassName="gvisor", nodeSelector={"team": "a"}))
    assert result.pending  # the pod's own selector still holds: no node carries team=a
    result = run(*objects, pod("p", cpu="500m", runtimeClassName="gvisor"))
    assert result.bound == {"default/p": "sandbox"}
    world = World.from_objects([("t", o) for o in [*objects, pod("p", cpu="500m", runtimeClassName="gvisor")]])
    admitted = world.pods["default/p"]
    assert admitted.node_selector == {"runtime": "gvisor"}
    assert [(t.key, t.operator, t.effect) for t in admitted.tolerations] == [("sandboxed", "Exists", "NoSchedule")]


@pytest.mark.parametrize(("objects", "field", "words"), [
    ([pod("p", cpu="1", runtimeClassName="kata")], "spec.runtimeClassName", "no RuntimeClass named 'kata'"),
    ([runtime_class(overhead={"cpu": "1"}), pod("p", cpu="1", runtimeClassName="gvisor", overhead={"cpu": "2"})],
     "spec.overhead", "is not RuntimeClass gvisor's overhead.podFixed"),
    ([runtime_class(), pod("p", cpu="1", runtimeClassName="gvisor", overhead={"cpu": "1"})],
     "spec.overhead", "RuntimeClass gvisor defines no overhead"),
    ([pod("p", cpu="1", overhead={"cpu": "1"})], "spec.overhead", "without a RuntimeClass that defines it"),
    ([runtime_class(selector={"runtime": "gvisor"}),
      pod("p", cpu="1", runtimeClassName="gvisor", nodeSelector={"runtime": "runc"})],
     "spec.nodeSelector[runtime]", "'runc' conflicts with RuntimeClass gvisor's"),
])
def test_what_the_admission_refuses_is_refused_naming_the_field(objects: list[dict[str, Any]], field: str,
                                                                  words: str) -> None:
    with pytest.raises(InputError) as info:
        World.from_objects([("t.yaml", o) for o in [node("n0"), *objects]])
    assert f"t.yaml: Pod default/p: {field}: " in str(info.value)
    assert words in str(info.value)


def test_the_same_overhead_written_otherwise_is_accepted() -> None:
    world = World.from_objects([("t", o) for o in [
        node("n0"), runtime_class(overhead={"cpu": "250m", "memory": "1Gi"}),
        pod("p", cpu="1", runtimeClassName="gvisor", overhead={"cpu": "0.25", "memory": "1073741824"})]])
    assert world.pods["default/p"].requests["cpu"] == 1250


def test_a_pod_read_back_from_a_cluster_is_not_admitted_again() -> None:
    # spec.priority: the Priority admission let it in, and the RuntimeClass admission with it. Its
    # class may be left out of the dump, or have changed since: its spec stands as it is.
    running = pod("old", cpu="1", node_name="n0", runtimeClassName="kata", overhead={"cpu": "1"}, priority=0)
    world = World.from_objects([("t", o) for o in [node("n0"), runtime_class(overhead={"cpu": "2"}), running]])
    assert world.pods["default/old"].requests["cpu"] == 2000


def test_a_bad_runtime_class_names_its_field() -> None:
    bad = runtime_class(tolerations=[{"key": "k", "operator": "Gt", "value": "1"}])
    with pytest.raises(InputError, match=r"t: RuntimeClass gvisor: scheduling\.tolerations\[0\]\.operator: "
                                         r"unknown operator 'Gt'"):
        World.from_objects([("t", bad)])
    with pytest.raises(InputError, match=r"RuntimeClass gvisor: handler: is required"):
        World.from_objects([("t", {**runtime_class(), "handler": ""})])
    with pytest.raises(InputError, match="defined twice"):
        World.from_objects([("t", runtime_class()), ("t", runtime_class())])


def _tol(key: str = "", op: str = "", value: str = "", effect: str = "", seconds: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op, "value": value, "effect": effect}
    if seconds is not None:
        out["tolerationSeconds"] = seconds
    return out


@pytest.mark.parametrize(("pods", "classes", "want"), [
    # equal ones: the first is kept
    ([_tol("a", "Equal", "1", "NoSchedule")], [_tol("a", "Equal", "1", "NoSchedule")],
     [_tol("a", "Equal", "1", "NoSchedule")]),
    # an Exists on the key covers its values, whichever side it comes from
    ([_tol("a", "Equal", "1", "NoSchedule")], [_tol("a", "Exists", "", "NoSchedule")],
     [_tol("a", "Exists", "", "NoSchedule")]),
    # no effect covers every effect; the empty key with Exists covers every key
    ([_tol("a", "Exists", "", "NoExecute")], [_tol("", "Exists")], [_tol("", "Exists")]),
    # a shorter tolerationSeconds does not cover a longer one, the longer covers the shorter
    ([_tol("a", "Exists", "", "NoExecute", 60)], [_tol("a", "Exists", "", "NoExecute", 30)],
     [_tol("a", "Exists", "", "NoExecute", 60)]),
    # different keys or values both stay; an operator left out covers only a literal Equal
    ([_tol("a", "Equal", "1")], [_tol("b", "Equal", "1"), _tol("a", "", "2")],
     [_tol("a", "Equal", "1"), _tol("b", "Equal", "1"), _tol("a", "", "2")]),
])
def test_tolerations_merge_as_the_admission_merges_them(pods: list[Any], classes: list[Any], want: list[Any]) -> None:
    assert merge_tolerations(pods, classes) == want


def test_simulate_replays_a_dump_with_a_runtime_class(tmp_path: Path) -> None:
    dump = {"apiVersion": "v1", "kind": "List", "items": [
        node("n0", cpu="4"), runtime_class(overhead={"cpu": "1"}),
        pod("new", cpu="3500m", runtimeClassName="gvisor"), pod("small", cpu="1", runtimeClassName="gvisor")]}
    path = tmp_path / "dump.yaml"
    path.write_text(yaml.safe_dump(dump))
    run_ = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", str(path)], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    assert run_.returncode == 0, run_.stderr
    assert "default/small" in run_.stdout and "Insufficient cpu" in run_.stdout
