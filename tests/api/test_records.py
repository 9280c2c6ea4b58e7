"""What the cache keeps per pod and per node (issue 21, goal 2): frozen slotted records in place of
pydantic models, behaving as the models did, and equal parts of different objects kept once.

The parity tests hold each record against a pydantic twin: a frozen pydantic model of the same name
and fields (what the record replaced), built from the same values. Equality, hashing, ``repr`` (which
a message may quote) and ``model_copy`` must agree."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import pickle
import typing
from collections.abc import Hashable
from typing import Any, cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, create_model

from koordpy.api import model as api_model
from koordpy.api.gangname import pod_gang_name
from koordpy.api.model import SHARED_LIMIT, Shared
from koordpy.api.objects import (
    HostPort,
    Node,
    Pod,
    PodAffinityTerm,
    PodSelector,
    SpreadConstraint,
    Taint,
    Toleration,
)
from koordpy.api.podvolumes import Disk, PodVolume
from tests.builders import node, pod

RECORDS = (Pod, Node, Taint, Toleration, HostPort, PodSelector, PodAffinityTerm, SpreadConstraint, PodVolume, Disk)


@functools.cache
def _twin(cls: Any) -> type[BaseModel]:
    """The pydantic model ``cls`` was: same name, same fields, frozen, forbidding extras."""
    hints = typing.get_type_hints(cls)
    spec: dict[str, Any] = {f.name: (hints[f.name], ...) for f in dataclasses.fields(cls) if f.init}
    return create_model(cls.__name__, __config__=ConfigDict(frozen=True, extra="forbid",
                                                            arbitrary_types_allowed=True), **spec)


def _values(record: object) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in dataclasses.fields(record) if f.init}  # type: ignore[arg-type]


def _as_twin(record: object) -> BaseModel:
    return _twin(cast(Hashable, type(record))).model_construct(**_values(record))


def _rich_pod(name: str = "p") -> dict[str, Any]:
    raw = pod(name, cpu="2", group="g", index=1)
    raw["metadata"]["labels"]["app"] = "train"
    raw["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u",
                                           "controller": True}]
    raw["spec"].update(
        nodeName="n1", priority=5, tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        nodeSelector={"zone": "a"},
        affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "train"}}, "topologyKey": "kubernetes.io/hostname"}]}},
        topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                                    "labelSelector": {"matchLabels": {"app": "train"}}}],
        volumes=[{"name": "d", "gcePersistentDisk": {"pdName": "disk-1", "readOnly": True}},
                 {"name": "c", "persistentVolumeClaim": {"claimName": "data"}}])
    raw["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
    return raw


def _samples() -> list[object]:
    p = Pod.from_raw(_rich_pod())
    raw = node("n1", labels={"zone": "a"})
    raw["spec"] = {"taints": [{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]}
    n = Node.from_raw(raw)
    out: list[object] = [p, n, n.taints[0], p.tolerations[0], p.host_ports[0], p.pod_anti_affinity[0],
                         p.pod_anti_affinity[0].selector, p.spread[0], *p.volumes, p.volumes[0].disk]
    assert {type(o) for o in out} == set(RECORDS)
    return out


def _other(value: str | bool) -> str | bool:
    return not value if isinstance(value, bool) else value + "x"


@pytest.mark.parametrize("record", _samples(), ids=lambda r: type(r).__name__)
def test_a_record_compares_prints_and_copies_as_its_pydantic_model_did(record: object) -> None:
    twin = _as_twin(record)
    assert repr(record) == repr(twin)
    same = copy.copy(record)
    assert same == record and _as_twin(same) == twin
    name = next(f.name for f in dataclasses.fields(record)  # type: ignore[arg-type]
                if isinstance(getattr(record, f.name), str | bool))
    other = _other(getattr(record, name))
    changed = record.model_copy(update={name: other})  # type: ignore[attr-defined]
    assert changed != record and twin.model_copy(update={name: other}) != twin
    assert _values(changed) == {**_values(record), name: other} and _values(same) == _values(record)
    assert pickle.loads(pickle.dumps(record)) == record
    # Hashable exactly when the pydantic model was (a model with a dict field is not).
    try:
        hash(twin)
    except TypeError:
        with pytest.raises(TypeError):
            hash(record)
    else:
        assert hash(record) == hash(same) and len({record, same}) == 1


@pytest.mark.parametrize("cls", RECORDS, ids=lambda c: c.__name__)
def test_records_are_frozen_and_slotted(cls: type) -> None:
    # Slotted: no per-instance dict, which was most of a pydantic pod's 2 KiB.
    record = next(r for r in _samples() if type(r) is cls)
    assert not hasattr(record, "__dict__")
    first = dataclasses.fields(record)[0].name  # type: ignore[arg-type]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(record, first, getattr(record, first))


@given(key=st.text(max_size=5), value=st.text(max_size=5), effect=st.sampled_from(["NoSchedule", "NoExecute"]),
       operator=st.sampled_from(["Equal", "Exists"]), tkey=st.text(max_size=5), tvalue=st.text(max_size=5),
       teffect=st.sampled_from(["", "NoSchedule", "NoExecute"]))
def test_taints_and_tolerations_agree_with_their_pydantic_twins(key: str, value: str, effect: str, operator: str,
                                                                 tkey: str, tvalue: str, teffect: str) -> None:
    taint = Taint(key=key, value=value, effect=effect)
    tol = Toleration(key=tkey, operator=operator, value=tvalue, effect=teffect)  # type: ignore[arg-type]
    other = Taint(key=tkey, value=tvalue, effect=effect)
    alike = Toleration(key=key, operator=operator, value=value)  # type: ignore[arg-type]
    for a, b in ((taint, other), (tol, alike)):
        assert (a == b) == (_as_twin(a) == _as_twin(b))
        assert repr(a) == repr(_as_twin(a))
    assert tol.tolerates(taint) == tol.tolerates(_as_twin(taint))  # type: ignore[arg-type]


def test_the_pod_key_is_made_once_and_follows_a_copy() -> None:
    p = Pod.from_raw(pod("p"))
    assert p.key == "default/p" and p.key is p.key
    moved = p.model_copy(update={"name": "q"})
    assert moved.key == "default/q" and p.key == "default/p"
    assert "_key" not in repr(p)


def _decoded(raw: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(raw))  # type: ignore[no-any-return]  # as a watch event: no string shared


def test_a_gangs_pods_share_what_they_have_alike() -> None:
    # Each pod of a gang, decoded from its own watch event, would hold its own copy of each map,
    # tuple and string; the cache keeps one.
    raws = [_rich_pod(f"p{i}") for i in range(2)]
    a, b = (Pod.from_raw(_decoded(r)) for r in raws)
    for name in ("labels", "annotations", "requests", "node_selector", "tolerations", "owner_references"):
        assert getattr(a, name) is getattr(b, name), name
    assert a.namespace is b.namespace and a.scheduler_name is b.scheduler_name and a.node_name is b.node_name
    n = Node.from_raw(_decoded(node("n1")))
    assert n.name is a.node_name  # the pod's nodeName is the node's own string
    n2 = Node.from_raw(_decoded(node("n2")))
    assert n.allocatable is n2.allocatable and next(iter(n.labels)) is next(iter(n2.labels))


def test_shared_values_differ_where_the_objects_do() -> None:
    # Maps are shared only with the same items in the same order: the order a message lists them in.
    a = Pod.from_raw(_decoded(_rich_pod("a")))
    raw = _rich_pod("b")
    raw["metadata"]["labels"] = dict(reversed(raw["metadata"]["labels"].items()))
    b = Pod.from_raw(_decoded(raw))
    assert a.labels == b.labels and a.labels is not b.labels and list(b.labels) == list(reversed(a.labels))
    c = Pod.from_raw(_decoded(_rich_pod("c") | {"spec": {**_rich_pod("c")["spec"], "priority": 1}}))
    assert c.priority == 1 and c.tolerations is a.tolerations


def test_shared_table_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_model, "SHARED_LIMIT", 3)
    table = Shared[dict[str, str]]()
    held = [table.map({"k": str(i)}) for i in range(10)]
    assert len(table._memo) <= 3 and [h["k"] for h in held] == [str(i) for i in range(10)]
    assert table.map({"k": "9"}) is held[9]
    assert SHARED_LIMIT >= 1000  # a big gang's members, at least, fit in one table's life


def test_a_gangs_pods_name_their_gang_with_one_string() -> None:
    # The core files each member under its gang's name: one string for the gang, not one a pod.
    a, b = (Pod.from_raw(_decoded(_rich_pod(f"p{i}"))) for i in range(2))
    ga, gb = (pod_gang_name(p.namespace, p.labels, p.annotations) for p in (a, b))
    assert ga == "default/g" and ga is gb
    assert a.gang_name is ga and b.gang_name is ga  # read once, when the record is made


def test_a_pods_gang_name_is_read_again_by_every_copy() -> None:
    # ``gang_name`` is made with the record: a copy with other labels or annotations names its own gang.
    pod = Pod.from_raw(_decoded(_rich_pod("p0")))
    assert pod.gang_name == "default/g"
    renamed = pod.model_copy(update={"annotations": {**pod.annotations, "gang.scheduling.koordinator.sh/name": "h"}})
    assert renamed.gang_name == "default/h"
    alone = pod.model_copy(update={"labels": {}, "annotations": {}, "namespace": "other"})
    assert alone.gang_name is None
    moved = pod.model_copy(update={"namespace": "other"})
    assert moved.gang_name == pod_gang_name("other", moved.labels, moved.annotations)
    assert moved == pod.model_copy(update={"namespace": "other"}) and "_gang" not in repr(pod)
