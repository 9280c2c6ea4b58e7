"""PodDisruptionBudgets reach the live scheduler through the kind registry alone: watched and
granted, filed by the cache from a watch event into the snapshot the core reads, and a budget that
does not parse reported, never used and never a crash."""

from __future__ import annotations

from typing import Any

from koordpy.api import kinds
from koordpy.api.disruption import STORE, PodDisruptionBudget
from koordpy.controller.cache import Cache
from koordpy.core.cluster import Cluster
from tests.builders import node, pod

NAMES = frozenset({"koordpy"})


def _pdb(rv: str, selector: dict[str, Any], allowed: int = 0) -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "db", "namespace": "default", "resourceVersion": rv, "uid": "u-db"},
            "spec": {"minAvailable": 1, "selector": selector}, "status": {"disruptionsAllowed": allowed}}


def _versioned(raw: dict[str, Any], rv: str) -> dict[str, Any]:
    return {**raw, "metadata": {**raw["metadata"], "resourceVersion": rv}}


def test_the_registry_watches_and_grants_poddisruptionbudgets() -> None:
    kind = kinds.by_name("PodDisruptionBudget")
    assert kind is not None and kind in kinds.watched() and kind.group == "policy" and kind.optional
    granted = kinds.grants()
    assert {("policy", "poddisruptionbudgets", "list"), ("policy", "poddisruptionbudgets", "watch")} <= granted
    assert not {g for g in granted if g[1] == "poddisruptionbudgets" and g[2] not in ("list", "watch")}


def test_a_watch_event_files_the_budget_where_the_cluster_counts_pods_against_it() -> None:
    cache = Cache()
    cache.observe("Node", None, _versioned(node("n0"), "1"))
    cache.observe("Pod", "ADDED", _versioned(pod("a", node_name="n0", labels={"app": "db"}, scheduler="other"), "2"))
    cache.observe("PodDisruptionBudget", "ADDED", _pdb("3", {"matchLabels": {"app": "db"}}, allowed=2))
    snap = cache.snapshot(NAMES)
    budgets = snap.of(STORE)
    assert set(budgets) == {"default/db"} and isinstance(budgets["default/db"], PodDisruptionBudget)
    cluster = Cluster(snap)
    assert cluster.budgets.names == ["default/db"] and cluster.budgets.allowed.tolist() == [2]
    assert int(cluster.index.pdb[cluster.index.row["default/a"]]) == 0
    # A status that moves is taken as it is; a selector that changes counts the pods again.
    cache.observe("PodDisruptionBudget", "MODIFIED", _pdb("4", {"matchLabels": {"app": "web"}}, allowed=1))
    cluster.set_budgets(cache.snapshot(NAMES).of(STORE))
    assert cluster.budgets.allowed.tolist() == [1] and int(cluster.index.pdb[cluster.index.row["default/a"]]) == -1
    cache.observe("PodDisruptionBudget", "DELETED", _pdb("5", {"matchLabels": {"app": "web"}}))
    assert cache.snapshot(NAMES).of(STORE) == {}


def test_a_budget_that_does_not_parse_is_reported_and_left_out() -> None:
    cache = Cache()
    cache.observe("PodDisruptionBudget", "ADDED", _pdb("1", {"matchExpressions": [{"key": "app", "operator": "Near"}]}))
    assert cache.snapshot(NAMES).of(STORE) == {}
    [bad] = [b for b in cache.invalid_objects(NAMES) if b.kind == "PodDisruptionBudget"]
    assert bad.key == "default/db" and "spec.selector.matchExpressions[0].operator" in bad.error
    # Fixed, it is used.
    cache.observe("PodDisruptionBudget", "MODIFIED", _pdb("2", {"matchLabels": {"app": "db"}}))
    assert set(cache.snapshot(NAMES).of(STORE)) == {"default/db"} and not cache.invalid


def test_a_pod_whose_labels_change_is_counted_against_the_budget_it_now_matches() -> None:
    cache = Cache()
    cache.observe("Node", None, _versioned(node("n0"), "1"))
    cache.observe("PodDisruptionBudget", "ADDED", _pdb("2", {"matchLabels": {"app": "db"}}))
    cache.observe("Pod", "ADDED", _versioned(pod("a", node_name="n0", labels={"app": "web"}, scheduler="other"), "3"))
    snap = cache.snapshot(NAMES)
    cluster = Cluster(snap)
    assert int(cluster.index.pdb[cluster.index.row["default/a"]]) == -1
    cache.observe("Pod", "MODIFIED", _versioned(pod("a", node_name="n0", labels={"app": "db"}, scheduler="other"), "4"))
    snap = cache.snapshot(NAMES)
    cluster.recount("default/a", next(p for p in snap.pods if p.key == "default/a"), {})
    assert int(cluster.index.pdb[cluster.index.row["default/a"]]) == 0
