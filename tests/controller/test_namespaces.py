"""Namespace labels reach the core (``Snapshot.namespaces``) from the live cache and from ``koordpy
simulate``, for inter-pod affinity's namespaceSelector; a change to them is a change the core sees."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.kinds import kind_for, watched
from koordpy.api.objects import NAMESPACE_NAME_LABEL, Namespace
from koordpy.controller.cache import Cache
from koordpy.core.cycle import schedule
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import node, pod

NAMES = frozenset({"koordpy"})


def namespace(name: str, rv: int = 1, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "resourceVersion": str(rv), "labels": labels}}


def test_namespace_is_a_registered_kind_that_is_listed_and_watched() -> None:
    kind = kind_for("v1", "Namespace")
    assert kind is not None and kind.role == "namespace" and not kind.namespaced
    assert kind in watched() and kind.plural == "namespaces" and kind.group == ""


def test_a_namespace_carries_the_name_label_the_api_server_gives_it() -> None:
    ns = Namespace.from_raw(namespace("team-a", team="a"))
    assert ns.labels == {"team": "a", NAMESPACE_NAME_LABEL: "team-a"}


def test_a_namespace_with_a_bad_label_value_is_refused_naming_the_field() -> None:
    raw = namespace("team-a")
    raw["metadata"]["labels"] = {"tier": 1}
    with pytest.raises(ParseError, match=r"metadata.labels\[tier\].*quote it"):
        Namespace.from_raw(raw)


def test_the_cache_hands_namespace_labels_to_the_core_and_follows_their_changes() -> None:
    cache = Cache()
    cache.observe("Namespace", None, namespace("team-a", 1, team="a"))
    first = cache.snapshot(NAMES)
    assert first.namespaces == {"team-a": {"team": "a", NAMESPACE_NAME_LABEL: "team-a"}}
    cache.changed.clear()
    cache.observe("Namespace", "MODIFIED", namespace("team-a", 2, team="b"))
    assert cache.changed.is_set()  # a cycle is owed
    second = cache.snapshot(NAMES)
    assert second.namespaces["team-a"]["team"] == "b"
    assert first.namespaces["team-a"]["team"] == "a"  # a snapshot handed out keeps what it saw
    cache.observe("Namespace", "DELETED", namespace("team-a", 3, team="b"))
    assert cache.snapshot(NAMES).namespaces == {}


def test_an_unreadable_namespace_is_reported_not_dropped_silently() -> None:
    cache = Cache()
    raw = namespace("team-a")
    raw["metadata"]["labels"] = {"tier": 1}
    cache.observe("Namespace", None, raw)
    assert [(o.kind, o.key) for o in cache.invalid_objects(NAMES)] == [("Namespace", "team-a")]
    assert cache.snapshot(NAMES).namespaces == {}


def test_simulate_reads_namespaces_instead_of_ignoring_them() -> None:
    world = World.from_objects([("t", namespace("team-a", team="a")), ("t", node("n0"))])
    assert world.ignored == []
    assert world.snapshot(NAMES).namespaces == {"team-a": {"team": "a", NAMESPACE_NAME_LABEL: "team-a"}}


def test_simulate_gives_a_pods_namespace_without_a_manifest_its_name_label() -> None:
    p = pod("p", cpu="1")
    p["metadata"]["namespace"] = "team-b"
    world = World.from_objects([("t", node("n0")), ("t", p)])
    assert world.snapshot(NAMES).namespaces == {"team-b": {NAMESPACE_NAME_LABEL: "team-b"}}


def test_simulate_refuses_a_namespace_defined_twice() -> None:
    from koordpy.sim.errors import InputError

    with pytest.raises(InputError, match="defined twice"):
        World.from_objects([("a", namespace("team-a")), ("b", namespace("team-a"))])


def test_a_namespace_label_change_makes_the_core_try_parked_jobs_again() -> None:
    # A pod that does not fit is parked until room appears; a namespace's labels changing can make a
    # namespaceSelector match other pods, so the core must look again rather than keep it parked.
    world = World.from_objects([("t", o) for o in (node("n0", cpu="1"), pod("big", cpu="4"))])
    state = SchedulerState()
    snap = world.snapshot(NAMES)
    snap.namespaces = {"default": {"team": "a"}}
    schedule(snap, state, 0.0)
    again = schedule(_with_namespaces(snap, {"default": {"team": "a"}}), state, 1.0)
    assert again.queues["unschedulable"] == 1  # unchanged: still parked
    relabelled = schedule(_with_namespaces(snap, {"default": {"team": "b"}}), state, 2.0)
    assert relabelled.queues["unschedulable"] == 0 and relabelled.queues["active"] == 1


def _with_namespaces(snap: Snapshot, namespaces: dict[str, dict[str, str]]) -> Snapshot:
    return Snapshot(nodes=list(snap.nodes), pods=list(snap.pods), scheduler_names=snap.scheduler_names,
                    namespaces=namespaces)


def test_every_core_kind_of_the_registry_is_listed_by_its_own_call() -> None:
    # A core kind without a call of its own was once listed as pods: namespaces named after pods.
    from kubernetes_asyncio.client import CoreV1Api

    from koordpy.controller.client import _core_list

    core = CoreV1Api(api_client=object())
    calls = {kind.plural: _core_list(core, kind.plural).__name__ for kind in watched() if kind.group == ""}
    assert calls["namespaces"] == "list_namespace"
    assert len(set(calls.values())) == len(calls)
    with pytest.raises(ValueError, match="no LIST call for the core kind 'secrets'"):
        _core_list(core, "secrets")
