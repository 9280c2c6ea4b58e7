"""Issue 32, item 1: a fifth dialect needs no change outside its module and a line in each registry.

The toy dialect here has its own gang kind (``ToyGang`` of ``toy.example.com``, which pods join by a
label) and a topology object (``ToyFabric``: a tree over node labels, whose status, the nodes it
holds, the dialect computes from the core's tree). The fixture adds it with one line in the kind
registry (``kinds.register``, its two kinds) and one in the dialect registry (``dialects.register``)
and takes both out after. With nothing else changed: ``koordpy simulate`` reads its kind and holds
its gang all or nothing, the simulator reports its fabric's status and the live loop writes it
through the writer, ``koordpy topology show`` draws its tree under the title it gives, and the live
cache reads its gang kind from watch events."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
import yaml

from koordpy.api import kinds
from koordpy.api.errors import ParseError
from koordpy.api.kinds import Kind
from koordpy.api.objects import Pod
from koordpy.api.owners import Owner
from koordpy.api.podgroup import GangConfig
from koordpy.cli.main import main
from koordpy.controller.cache import Cache
from koordpy.core import dialects
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Bind, GangStatus, ObjectStatus
from koordpy.core.dialects.base import GangsBase, GroupRow, StatusesBase, TopologiesBase, fields_row
from koordpy.core.model import Gang, TreeSource
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.tree import ShownTree, TopologyTree, TreeKey, label_levels_tree
from koordpy.sim.simulator import World, simulate
from tests.builders import node, pod
from tests.controller.test_topology_status_writer import harness, rv, settle

GROUP = "toy.example.com"
GANG_LABEL = f"{GROUP}/gang"
RACK = f"{GROUP}/rack"
NAME = "toy"


# -- the dialect: its objects, its kinds, its module's code ------------------------------------------


@dataclass(frozen=True)
class ToyGang:
    namespace: str
    name: str
    min_member: int
    running: int = 0  # its status, which the dialect writes (no ``.status`` attribute: the shells ask the dialect)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> ToyGang:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        minimum = spec.get("minMember")
        if not isinstance(minimum, int) or minimum < 1:
            raise ParseError(f"ToyGang {meta.get('name')}", "spec.minMember", "a whole number of at least 1")
        running = (raw.get("status") or {}).get("running") or 0
        return cls(str(meta.get("namespace") or "default"), str(meta.get("name")), minimum, int(running))


@dataclass(frozen=True)
class ToyFabric:
    name: str
    levels: tuple[str, ...]

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> ToyFabric:
        return cls(str((raw.get("metadata") or {}).get("name")), tuple((raw.get("spec") or {}).get("levels") or ()))


GANG_KIND = Kind("ToyGang", GROUP, "v1", "toygangs", True, ToyGang.from_raw, "toy-gang", "toy_gangs",
                 writes=("status:patch",), change="gangs", errors="invalid_podgroups", own_field=False)
FABRIC_KIND = Kind("ToyFabric", GROUP, "v1", "toyfabrics", False, ToyFabric.from_raw, "toy-fabric",
                   "toy_fabrics", writes=("status:patch",), source=NAME, own_field=False)


@dataclass(frozen=True)
class ToyGangStatus:
    """A ToyGang's status as the dialect computes it: how many of its members are on a node."""

    running: int
    kind: Kind = GANG_KIND

    def wire(self) -> dict[str, object]:
        return {"running": self.running}

    def applied(self, obj: Any) -> Any:
        assert isinstance(obj, ToyGang)
        return dataclasses.replace(obj, running=self.running)


def _gangs(snapshot: Snapshot) -> dict[str, ToyGang]:
    return cast(dict[str, ToyGang], snapshot.of(GANG_KIND.store))


def _fabrics(snapshot: Snapshot) -> dict[str, ToyFabric]:
    return cast(dict[str, ToyFabric], snapshot.of(FABRIC_KIND.store))


def tree_key(name: str) -> TreeKey:
    return TreeKey(NAME, name, f"{NAME}/{name}")


class Toy(GangsBase, StatusesBase, TopologiesBase):
    name = NAME
    roles = (GANG_KIND.role, FABRIC_KIND.role)
    sources: Mapping[str, str] = {NAME: "ToyFabric"}

    def member(self, pod: Pod, owners: dict[str, Owner] | None) -> str | None:
        group = pod.labels.get(GANG_LABEL)
        return f"{pod.namespace}/{group}" if group else None

    def declared(self, snapshot: Snapshot) -> Iterable[str]:
        return list(_gangs(snapshot))

    def declares(self, key: str, snapshot: Snapshot) -> bool:
        return key in _gangs(snapshot)

    def gang(self, key: str, pods: list[Pod], snapshot: Snapshot) -> Gang | None:
        found = _gangs(snapshot).get(key)
        if found is None:
            return None
        config = GangConfig(key=key, min_member=found.min_member, total_number=found.min_member, from_crd=True)
        return Gang(key, config, pods, 0.0)

    def object_kind(self, key: str, snapshot: Snapshot) -> str | None:
        return GANG_KIND.label if key in _gangs(snapshot) else None

    def statuses(self, key: str, members: list[Pod], bound_now: dict[str, str], reserved: dict[str, str],
                 now: float, snapshot: Snapshot, pending: Mapping[str, str]) -> Iterable[tuple[str, GangStatus]]:
        found = _gangs(snapshot).get(key)
        running = sum(1 for p in members if p.node_name or p.key in bound_now)
        return () if found is None or found.running == running else ((key, ToyGangStatus(running)),)

    def said(self, kind: Kind, obj: Any) -> Mapping[str, object] | None:
        assert isinstance(obj, ToyGang)
        if obj.name == "broken":  # a comparison that fails: it must cost that write only
            raise RuntimeError("cannot read the status of a broken ToyGang")
        return {"running": obj.running}

    def shown_groups(self, snapshot: Snapshot) -> Iterable[tuple[str, str, dict[str, Any], GroupRow]]:
        for key, found in _gangs(snapshot).items():
            shown: dict[str, Any] = {"running": found.running, "minMember": found.min_member}
            yield key, "TOYGANG", shown, fields_row(shown)

    def object_statuses(self, trees: TreeSource) -> Iterable[ObjectStatus]:
        out = []
        for name, fabric in sorted(_fabrics(trees.snapshot).items()):
            count = sum(1 for n in trees.nodes if all(n.labels.get(k) for k in fabric.levels))
            out.append(ObjectStatus(FABRIC_KIND, name, {"nodeCount": count},
                                    {"type": "Valid", "status": "True", "reason": "Reconciled", "message": ""},
                                    write="toyfabric-status", section="toyfabrics", shown={"nodeCount": count}))
        return out

    def tree_keys(self, snapshot: Snapshot) -> Iterator[TreeKey]:
        for name in sorted(_fabrics(snapshot)):
            yield tree_key(name)

    def tree(self, key: TreeKey, trees: TreeSource) -> TopologyTree | None:
        fabric = _fabrics(trees.snapshot).get(key.name)
        if key.dialect != NAME or fabric is None:
            return None
        return label_levels_tree(fabric.levels, trees.nodes, fabric.name)

    def shown_trees(self, trees: TreeSource) -> Iterable[ShownTree]:
        return [ShownTree(tree_key(name), f"ToyFabric {name}", short=name) for name in sorted(_fabrics(trees.snapshot))]


DIALECT = Toy()


@pytest.fixture
def toy() -> Iterator[Toy]:
    """The dialect, added as a fifth: its kinds in the kind registry, itself in the dialects' (one
    line each), both taken out after the test."""
    undo_kinds = kinds.register(GANG_KIND, FABRIC_KIND, passive=frozenset({(f"{GROUP}/v1", "ToyJob")}))
    undo_dialect = dialects.register(DIALECT)
    yield DIALECT
    undo_dialect()
    undo_kinds()


# -- what the shells do with it, unchanged -----------------------------------------------------------


def _gang(name: str, minimum: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "ToyGang", "metadata": {"name": name, "namespace": "default"},
            "spec": {"minMember": minimum}}


def _fabric(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "ToyFabric", "metadata": {"name": name}, "spec": {"levels": [RACK]}}


def _members(gang: str, count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        raw = pod(f"{gang}-{i}", cpu="8")
        raw["metadata"]["labels"] = {GANG_LABEL: gang}
        out.append(raw)
    return out


def _nodes(count: int) -> list[dict[str, Any]]:
    return [node(f"n{i}", cpu="8", labels={RACK: f"r{i // 2}"}) for i in range(count)]


def _world(*objects: dict[str, Any]) -> World:
    return World.from_objects([("toy.yaml", o) for o in objects])


def test_simulate_reads_its_kind_and_holds_its_gang_all_or_nothing(toy: Toy) -> None:
    fits = simulate(_world(*_nodes(4), _fabric("fab"), _gang("train", 3), *_members("train", 3)))
    assert sorted(fits.bound) == ["default/train-0", "default/train-1", "default/train-2"]
    # Five members of minimum five on four nodes: none is placed, rather than four of them.
    held = simulate(_world(*_nodes(4), _fabric("fab"), _gang("big", 5), *_members("big", 5)))
    assert held.bound == {}
    assert sorted(held.pending) == [f"default/big-{i}" for i in range(5)]
    # Without its ToyGang, the pods wait for it rather than being placed one by one.
    missing = simulate(_world(*_nodes(4), *_members("lost", 2)))
    assert missing.bound == {}


def test_simulate_reports_the_status_the_dialect_computes(toy: Toy) -> None:
    out = simulate(_world(*_nodes(3), node("bare"), _fabric("fab"), _gang("train", 1), *_members("train", 1)))
    assert out.to_json()["toyfabrics"] == {"fab": {"nodeCount": 3}}
    assert [(s.kind.kind, s.name, s.fields) for s in out.statuses if s.kind is FABRIC_KIND] == [
        ("ToyFabric", "fab", {"nodeCount": 3})]


async def test_the_live_writer_writes_its_status(toy: Toy) -> None:
    objects = [("Node", raw) for raw in _nodes(3)] + [("ToyFabric", _fabric("fab"))]
    _, loop, custom, _ = harness(*objects)
    await loop.cycle()
    await settle(loop)
    [(group, version, plural, name, body)] = custom.calls
    assert (group, version, plural, name) == (GROUP, "v1", "toyfabrics", "fab")
    assert body["status"]["nodeCount"] == 3
    assert body["status"]["conditions"][0]["reason"] == "Reconciled"


def test_simulate_writes_the_gang_status_the_dialect_computes(toy: Toy) -> None:
    out = simulate(_world(*_nodes(4), _gang("train", 3), *_members("train", 3)))
    assert out.groups["default/train"] == {"running": 3, "minMember": 3}
    assert out.group_headings["default/train"] == "TOYGANG"


def _recorded(custom: Any) -> list[tuple[Any, ...]]:
    """The namespaced status patches ``custom`` is sent, as they are sent."""
    calls: list[tuple[Any, ...]] = []

    async def patch(*args: Any, **_: Any) -> None:
        calls.append(args)

    custom.patch_namespaced_custom_object_status = patch
    return calls


async def test_the_live_loop_writes_its_gang_status(toy: Toy) -> None:
    """A status written by both shells covers a gang's: the loop finds what the object says through
    the dialect (the ToyGang has no ``status`` attribute), and writes the difference."""
    objects = [("Node", n) for n in _nodes(4)] + [("ToyGang", _gang("train", 2))] + [
        ("Pod", p) for p in _members("train", 2)]
    cache, loop, custom, _ = harness(*objects)
    calls = _recorded(custom)
    await loop.cycle()
    await settle(loop)
    loop.writer.flush(loop._pending_info, loop._status_now)
    await settle(loop)
    assert [c[:5] for c in calls] == [(GROUP, "v1", "default", "toygangs", "train")]
    assert calls[0][5] == {"status": {"running": 2}}
    # Once the object says so (the write came back on the watch), it is not written again.
    written = {**_gang("train", 2), "status": {"running": 2}}
    cache.observe("ToyGang", "MODIFIED", rv(written, 100))
    assert loop._status_now(GANG_KIND.id, "default/train") == {"running": 2}


async def test_a_status_that_cannot_be_compared_costs_that_write_only(
        toy: Toy, caplog: pytest.LogCaptureFixture) -> None:
    objects = [("Node", n) for n in _nodes(4)] + [("ToyGang", _gang("broken", 1)), ("ToyGang", _gang("train", 1))] + [
        ("Pod", p) for p in [*_members("broken", 1), *_members("train", 1)]]
    _, loop, custom, _ = harness(*objects)
    calls = _recorded(custom)
    await loop.cycle()
    await settle(loop)
    with caplog.at_level(logging.ERROR):
        loop.writer.flush(loop._pending_info, loop._status_now)  # does not raise
    await settle(loop)
    assert [c[4] for c in calls] == ["train"]
    assert loop.writer.skipped.get(("podgroup-status", "error")) == 1


def test_simulate_and_explain_show_its_gangs_in_its_words(toy: Toy, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The table's rows of its gang objects are the dialect's (``Statuses.shown_groups`` gives each
    row: here the base's ``fields_row``, the fields as they are); explain states a minimum it has no words
    for plainly, not in another dialect's (``minMember``)."""
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump_all([*_nodes(4), _gang("train", 3), *_members("train", 3), _gang("big", 5),
                                        *_members("big", 4)]))
    assert main(["simulate", "-f", str(path)]) == 0
    table = capsys.readouterr().out
    assert "\nTOYGANG          STATUS\ndefault/big      running=0, minMember=5\n" in table
    assert "default/train    running=3, minMember=3\n" in table
    assert main(["explain", "podgroup", "default/big", "-f", str(path)]) == 0
    said = capsys.readouterr().out
    assert "4 pod(s) of minimum 5 (SHORT by 1)" in said and "minMember 5" not in said


def test_topology_show_draws_its_tree_under_its_title(toy: Toy, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "toy.yaml"
    path.write_text(yaml.safe_dump_all([*_nodes(4), _fabric("fab")]))
    assert main(["topology", "show", "-f", str(path)]) == 0
    drawn = capsys.readouterr().out
    assert "ToyFabric fab" in drawn and "r0" in drawn and "r1" in drawn
    assert main(["topology", "show", "-f", str(path), "--tree", "fab"]) == 0  # its short name
    assert "ToyFabric fab" in capsys.readouterr().out


def test_the_live_cache_reads_its_gang_kind(toy: Toy) -> None:
    cache = Cache()
    objects = [*(("Node", n) for n in _nodes(4)), ("ToyGang", _gang("train", 3)), ("ToyGang", _gang("big", 5)),
               *(("Pod", p) for p in [*_members("train", 3), *_members("big", 5)])]
    for version, (kind, raw) in enumerate(objects, start=1):
        cache.observe(kind, None, rv(raw, version))
    snapshot = cache.snapshot(frozenset({"koordpy"}))
    assert set(snapshot.of(GANG_KIND.store)) == {"default/train", "default/big"}
    result = schedule(snapshot, SchedulerState(), 0.0)
    bound = sorted(d.pod for d in result.decisions if isinstance(d, Bind))
    assert bound == ["default/train-0", "default/train-1", "default/train-2"]  # big waits whole


def test_the_fixture_leaves_the_registries_as_they_were(toy: Toy) -> None:
    assert dialects.BY_NAME[NAME] is toy and kinds.kind_for(f"{GROUP}/v1", "ToyGang") is GANG_KIND
    assert kinds.passive(f"{GROUP}/v1", "ToyJob") and "toy-gang" in kinds.roles()


def test_simulate_lists_its_passive_kind_as_ignored(toy: Toy) -> None:
    """A kind the dialect's users write but koordpy does not read (as the Workload of the upstream
    dialect) is one more entry given to the kind registry, not a change of a module-level set."""
    job = {"apiVersion": f"{GROUP}/v1", "kind": "ToyJob", "metadata": {"name": "j"}}
    out = simulate(_world(*_nodes(1), job))
    assert out.ignored == ["toy.yaml: ToyJob j"]


def test_a_dialect_whose_roles_no_kind_has_is_refused() -> None:
    with pytest.raises(ValueError, match="toy-gang"):
        dialects.register(DIALECT)  # its kinds not registered
    assert NAME not in dialects.BY_NAME


def test_without_the_fixture_the_kind_is_unknown() -> None:
    assert NAME not in dialects.BY_NAME and kinds.kind_for(f"{GROUP}/v1", "ToyGang") is None
    assert not kinds.passive(f"{GROUP}/v1", "ToyJob") and "toy-gang" not in kinds.roles()
    assert [d.name for d in dialects.DIALECTS] == ["koordinator", "volcano", "kai", "upstream", "jobset"]
    assert json.dumps(dialects.TOPOLOGY_SOURCES) == json.dumps(
        {"koordinator": "ClusterNetworkTopology", "volcano": "HyperNode", "kueue": "Kueue and KAI Topology"})


def test_the_shells_read_the_registries_when_they_ask(toy: Toy) -> None:
    """What the live controller lists and watches, and the refused fields, are the registries as
    they are when asked, not copies taken at import (before a fifth dialect was registered)."""
    from koordpy.controller.main import resources
    from koordpy.core.refusals import REFUSED_FIELDS

    assert GANG_KIND in [kind for kind, *_ in resources()] and FABRIC_KIND not in [k for k, *_ in resources(())]
    assert REFUSED_FIELDS is dialects.REFUSED_FIELDS
