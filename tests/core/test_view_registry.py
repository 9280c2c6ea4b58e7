"""The standing view's refresh is driven by the kind registry (issue 19, item 2): what a change of a
kind costs the view is the kind's ``change`` in ``koordpy.api.kinds``, how its objects compare comes
from the dialect that reads the kind (``Dialect.compare_key``), and the view copies every Snapshot
field without naming it. So a new kind is one registry entry, and ``koordpy.core.view`` names no
dialect's module and no dialect's Snapshot field."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path
from typing import Any, get_args

import pytest

from koordpy.api import kinds
from koordpy.api.objects import Node
from koordpy.api.volcano import HyperNode
from koordpy.api.workload import WorkloadPodGroup
from koordpy.core import view as view_module
from koordpy.core.dialects import DIALECTS, compare_key
from koordpy.core.dialects.volcano import spec_of
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from tests.builders import node

VIEW = Path(view_module.__file__)
# Snapshot fields no kind fills: settings and what the shell says changed.
NOT_KINDS = {"scheduler_names", "preemption", "pods_per_cycle", "gang_search_seconds", "default_min_runtime",
             "default_preemption_delay", "stale_grace", "admitted_stale_grace", "changes"}


def _fields(kind: kinds.Kind) -> set[str]:
    """The Snapshot fields the kind fills: a kind without a field of its own fills ``objects``."""
    store = kind.store.partition(".")[0] if kind.own_field else "objects"
    return {store} | ({kind.errors.partition(".")[0]} if kind.errors else set())


def hypernode(name: str, members: list[str], tier: int = 1, node_count: int | None = None) -> HyperNode:
    raw: dict[str, Any] = {
        "apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
        "spec": {"tier": tier, "members": [{"type": "Node", "selector": {"exactMatch": {"name": m}}} for m in members]}}
    if node_count is not None:
        raw["status"] = {"nodeCount": node_count}
    return HyperNode.from_raw(raw)


def snapshot(hypernodes: dict[str, HyperNode], **more: Any) -> Snapshot:
    nodes = [Node.from_raw(node(f"n{i}")) for i in range(2)]
    return Snapshot(nodes=nodes, pods=[], hypernodes=hypernodes, **more)


def test_the_view_names_no_dialect_module_and_no_dialect_field() -> None:
    """The rule: a dialect's kinds reach the view only through the registry, so the next dialect
    touches no line of the view."""
    tree = ast.parse(VIEW.read_text())
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    imported |= {a.name for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    assert not {m for m in imported if m.startswith("koordpy.core.dialects.")}
    # ``objects`` holds every kind without a field of its own, whichever dialect reads it: no dialect's.
    dialect_fields = {f for k in kinds.KINDS if any(k.role in d.roles for d in DIALECTS) for f in _fields(k)}
    dialect_fields -= {"objects"}
    assert {"hypernodes", "volcano_podgroups", "kai_podgroups", "topology", "owners"} <= dialect_fields
    named = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert not named & dialect_fields


def test_every_snapshot_field_but_the_settings_is_a_kinds_and_each_field_has_one_change() -> None:
    """The view learns of a change only through a kind: every field but the settings is one kind's
    store or errors, and the kinds that share a field share what its change costs."""
    filled: dict[str, set[str]] = {}
    for kind in kinds.KINDS:
        for name in _fields(kind):
            # ``objects`` holds one store per kind without a field of its own, each compared apart.
            filled.setdefault(f"objects.{kind.store}" if name == "objects" else name, set()).add(kind.change)
    assert {n.partition(".")[0] for n in filled} | NOT_KINDS == {f.name for f in dataclasses.fields(Snapshot)}
    assert {name: len(changes) for name, changes in filled.items() if len(changes) > 1} == {}
    assert set(kinds.CHANGES) == set(get_args(kinds.Change))
    assert {k.label for k in kinds.KINDS if k.gang} == {"PodGroup", "VolcanoPodGroup", "KaiPodGroup",
                                                        "WorkloadPodGroup", "CompositePodGroup"}


def test_a_kinds_change_decides_what_the_view_rebuilds(monkeypatch: pytest.MonkeyPatch) -> None:
    """A HyperNode whose members change rebuilds the arrays and trees ("all"); the same kind
    registered as "none" would not: the view reads the registry, not a list of its own."""
    before = {"h1": hypernode("h1", ["n0"])}
    after = {"h1": hypernode("h1", ["n0", "n1"])}

    def rebuilt() -> bool:
        state = SchedulerState()
        view = state.standing_view()
        first = view.refresh(snapshot(before), state)
        return view.refresh(snapshot(after), state) is not first

    assert rebuilt()
    table = tuple(dataclasses.replace(k, change="none") if k.role == "hypernode" else k for k in kinds.KINDS)
    monkeypatch.setattr(kinds, "KINDS", table)
    assert not rebuilt()


def test_a_hypernode_compares_by_the_spec_its_dialect_gives() -> None:
    """A HyperNode whose status alone changed (the scheduler's own nodeCount write coming back)
    rebuilds nothing: Volcano's dialect says what of it the view compares."""
    assert compare_key("hypernode") is spec_of
    assert compare_key("node") is None and compare_key("podgroup") is None
    state = SchedulerState()
    view = state.standing_view()
    first = view.refresh(snapshot({"h1": hypernode("h1", ["n0"])}), state)
    assert view.refresh(snapshot({"h1": hypernode("h1", ["n0"], node_count=1)}), state) is first
    assert view.refresh(snapshot({"h1": hypernode("h1", ["n0"], tier=2)}), state) is not first


def test_the_views_copy_holds_every_field_of_the_snapshot() -> None:
    """The copy the view compares the next snapshot with is made field by field from the dataclass,
    so a field added to the Snapshot is copied too (and a list or dict changed in place afterwards
    leaves the copy as it was)."""
    group = WorkloadPodGroup.from_raw({
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g", "namespace": "ns"},
        "spec": {"schedulingPolicy": {"basic": {}}}})
    snap = snapshot({}, objects={"workload_podgroups": {"ns/g": group}}, preemption=False)
    state = SchedulerState()
    view = state.standing_view()
    view.refresh(snap, state)
    kept = view.snapshot
    assert kept is not None
    for f in dataclasses.fields(Snapshot):
        assert getattr(kept, f.name) == getattr(snap, f.name), f.name
    snap.objects["workload_podgroups"].clear()
    snap.storage.claims["x/y"] = None  # type: ignore[assignment]
    assert kept.of("workload_podgroups") == {"ns/g": group} and kept.storage.claims == {}


def test_a_change_of_the_dra_objects_wakes_the_jobs_whose_pods_claim_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """The DRA kinds' change ("devices"): a new ResourceSlice (or class, claim, template, taint rule)
    rebuilds nothing the view keeps, and wakes the parked jobs whose pods name claims, not others."""
    from types import SimpleNamespace

    from koordpy.api.dra import Devices, ResourceSlice
    from koordpy.api.objects import Pod
    from tests.builders import pod

    assert {k.kind for k in kinds.KINDS if k.change == "devices"} == {
        "DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceTaintRule"}
    gpus = ResourceSlice.from_raw({"metadata": {"name": "n0-gpu"}, "spec": {
        "driver": "gpu.example.com", "nodeName": "n0", "pool": {"name": "n0", "resourceSliceCount": 1},
        "devices": [{"name": "gpu-0"}]}})
    state = SchedulerState()
    view = state.standing_view()
    woken: list[Any] = []
    monkeypatch.setattr(view.queue, "unpark", woken.append)
    claiming = pod("c")
    claiming["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]
    parked = [SimpleNamespace(job=SimpleNamespace(pods=[Pod.from_raw(raw)])) for raw in (claiming, pod("p"))]

    def wakes() -> list[list[bool]]:
        found = [[predicate(p) for p in parked] for predicate in woken]
        woken.clear()
        return found

    first = view.refresh(snapshot({}), state)
    wakes()
    assert view.refresh(snapshot({}, devices=Devices(slices={gpus.key: gpus})), state) is first
    assert [True, False] in wakes()
    view.refresh(snapshot({}, devices=Devices(slices={gpus.key: gpus})), state)
    assert [True, False] not in wakes()  # the same objects again: nothing changed
