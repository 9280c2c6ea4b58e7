"""The kind registry (koordpy.api.kinds) is what the shells dispatch on, and the controller's rooms
hold: no import circle dodged inside a function, and a warm-up that does not import the simulator."""

from __future__ import annotations

import ast
import copy
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from koordpy.api import kinds
from koordpy.api.kinds import GROUPS, KINDS, Kind, snapshot_fields, watched
from koordpy.api.owners import Owner
from koordpy.controller.cache import Cache
from koordpy.core.snapshot import Snapshot
from koordpy.sim.simulator import World
from tests.api.test_api_volcano_kai import minimal

ROOT = Path(__file__).resolve().parents[2]
NAMES = frozenset({"koordpy"})


def one_of_each() -> list[tuple[Kind, dict[str, Any]]]:
    """A valid object of every watched kind but pods, each named apart (the gang schedulers'
    PodGroups share one name space in ``koordpy simulate``, as do the Topology kinds)."""
    out = []
    for i, kind in enumerate(k for k in watched() if k.store != "pods"):
        raw = copy.deepcopy(minimal(kind.kind, kind.group))
        if not kind.only:
            raw["metadata"]["name"] = f"{raw['metadata']['name']}-{i}"
        if kind.kind == "Job":  # started: the simulation creates no pods for it, as the Job controller would
            raw["status"] = {"startTime": "2026-01-01T00:00:00Z"}
        if kind.kind == "PodDisruptionBudget":  # counted: the simulation counts one without a status
            raw["status"] = {"disruptionsAllowed": 1}
        if kind.store in ("workload_podgroups", "composite_podgroups"):  # admitted, as the API server gives
            raw["spec"]["priority"] = 0  # it: simulate's Priority admission fills a priority only where none is
        out.append((kind, raw))
    return out


def test_every_store_of_the_registry_is_a_snapshot_field() -> None:
    """Or, for a kind without a field of its own (``own_field=False``), a store in ``Snapshot.objects``."""
    fields = {f.name: f for f in dataclasses.fields(Snapshot)}
    for kind in KINDS:
        group, _, part = kind.store.partition(".")
        assert (group in fields) == kind.own_field and "objects" in fields, kind
        if part:
            assert part in {f.name for f in dataclasses.fields(GROUPS[group])}, kind
        target, _, sub = kind.errors.partition(".")
        assert not target or target in fields, kind
        assert not sub or sub in {f.name for f in dataclasses.fields(GROUPS[target])}, kind


def test_the_cache_and_the_world_file_every_kind_alike() -> None:
    objects = one_of_each()
    cache = Cache()
    for kind, raw in objects:
        cache.observe(kind, None, {**raw, "metadata": {**raw["metadata"], "resourceVersion": "1"}})
    assert not cache.invalid
    world = World.from_objects([(kind.id, {"apiVersion": kind.api_version, "kind": kind.kind, **raw})
                                for kind, raw in objects])
    live = dataclasses.asdict(cache.snapshot(NAMES))
    simulated = dataclasses.asdict(world.snapshot(NAMES))
    for name in ("pods", "changes"):
        live.pop(name), simulated.pop(name)
    # Objects the World stamped with a creation time differ in that alone.
    assert live.keys() == simulated.keys()
    for field, value in live.items():
        assert _unstamped(value) == _unstamped(simulated[field]), field
    snap = cache.snapshot(NAMES)
    counts = [len(snap.nodes), len(snap.podgroups), len(snap.volcano_podgroups), len(snap.kai_podgroups),
              len(snap.of("workload_podgroups")), len(snap.hypernodes), len(snap.namespaces),
              len(snap.priority_classes),
              len(snap.storage.claims), len(snap.storage.volumes), len(snap.storage.classes),
              len(snap.storage.csinodes)]
    assert counts == [1] * len(counts) and len(snap.topologies) == 2 and len(snap.owners) == 5
    assert snap.topology is not None


def _unstamped(value: Any) -> Any:
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, dict):
        return {k: _unstamped(v) for k, v in value.items() if k != "creation"}
    if isinstance(value, list | tuple):
        return [_unstamped(v) for v in value]
    return value


def test_a_new_kind_is_one_entry_and_its_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    # An owner kind the registry does not have: given its entry alone, the cache files it, the
    # World takes it, and both snapshots carry it.
    def parse(raw: dict[str, Any]) -> object:
        return Owner.from_raw(raw, "batch/v1", "CronJob")

    cron = Kind("CronJob", "batch", "v1", "cronjobs", True, parse, "owner", "owners", shape="by-uid")
    raw = {"metadata": {"name": "nightly", "namespace": "ns", "uid": "c-1", "resourceVersion": "3"}}
    cache = Cache()
    cache.observe(cron, None, raw)
    assert cache.snapshot(NAMES).owners["c-1"].kind == "CronJob"
    monkeypatch.setitem(kinds._BY_API, ("batch/v1", "CronJob"), cron)
    world = World.from_objects([("c.yaml", {"apiVersion": "batch/v1", "kind": "CronJob", **raw})])
    assert world.snapshot(NAMES).owners["c-1"].name == "nightly"


def test_a_kind_without_a_snapshot_field_reaches_the_core_through_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next dialect's kinds (a Workload, say) need no field in the core's Snapshot: an entry with
    ``own_field=False`` lands in ``Snapshot.objects`` under its store, where its dialect reads it."""
    workload = Kind("Workload", "scheduling.k8s.io", "v1beta1", "workloads", True, lambda raw: raw, "owner",
                    "workloads", change="none", own_field=False)
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, workload))
    stores = kinds.new_stores()
    stores["workloads"] = {"ns/w": {"name": "w"}}
    fields = {k: v for k, v in snapshot_fields(stores).items() if k not in ("nodes", "pods")}
    snap = Snapshot(nodes=[], pods=[], **fields)
    assert snap.of("workloads") == {"ns/w": {"name": "w"}}
    assert "workloads" not in {f.name for f in dataclasses.fields(Snapshot)}


def test_the_snapshot_says_which_objects_do_not_parse_by_the_registry() -> None:
    fields = snapshot_fields(kinds.new_stores(), {("VolcanoPodGroup", "ns/g"): "bad", ("Topology", "t"): "worse",
                                                  ("CSINode", "n1"): "no", ("ClusterNetworkTopology", "other"): "x",
                                                  ("ClusterNetworkTopology", "default"): "broken"})
    assert fields["invalid_podgroups"] == {"ns/g": "bad"}
    assert fields["invalid_topologies"] == {"t": "worse"}
    assert fields["storage"].invalid == {"CSINode n1": "no"}
    assert fields["topology_error"] == "broken"


def _function_local_koordpy_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.If):
            # An ``if TYPE_CHECKING:`` block is a circle dodged as surely as an import in a function.
            if isinstance(node, ast.If) and not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                continue
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (inner.module or "").startswith("koordpy"):
                    found.append(f"{path.relative_to(ROOT)}:{inner.lineno} {inner.module}")
    return found


def test_the_controller_imports_koordpy_at_module_level_only() -> None:
    found = [hit for path in sorted((ROOT / "koordpy" / "controller").glob("*.py"))
             for hit in _function_local_koordpy_imports(path)]
    assert found == []


def test_the_controller_warms_the_kernels_without_importing_the_simulator() -> None:
    code = ("import sys\nimport koordpy.controller.main as m\nm.warm_up()\n"
            "print(sorted(k for k in sys.modules if k.startswith('koordpy.sim')))\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT,
                         check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_a_node_that_does_not_parse_reaches_the_core_as_there_not_gone() -> None:
    # Its pods then still count to their gangs (a stale gang's eviction, replacements of lost members).
    fields = snapshot_fields(kinds.new_stores(), {("Node", "n1"): "Node n1: status.allocatable.cpu: not a quantity"})
    assert fields["invalid_nodes"] == {"n1": "Node n1: status.allocatable.cpu: not a quantity"}
    assert fields["nodes"] == []


def test_a_pod_that_does_not_parse_reaches_the_core_by_name() -> None:
    # A stale gang of its namespace is then not evicted for want of reading it.
    fields = snapshot_fields(kinds.new_stores(), {("Pod", "ns/p"): "Pod ns/p: status.phase: cannot be read"})
    assert fields["invalid_pods"] == {"ns/p": "Pod ns/p: status.phase: cannot be read"}
