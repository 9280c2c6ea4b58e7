"""Unit tests of the live scheduler's shell pieces that need no API server: the cache and retries.

Everything that talks to an API server is tested in tests/integration on a real one.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.controller.cache import Cache
from koordpy.controller.writer import Conflict, Gone, with_retries
from tests.builders import node, pod, podgroup


def rv(obj: dict[str, Any], version: int) -> dict[str, Any]:
    obj["metadata"]["resourceVersion"] = str(version)
    return obj


def test_an_older_resource_version_never_replaces_a_newer_one() -> None:
    cache = Cache()
    cache.observe("Pod", "MODIFIED", rv(pod("p", node_name="n1"), 20))
    cache.observe("Pod", None, rv(pod("p"), 10))  # a relist replaying older state
    assert cache.pods["default/p"].node_name == "n1"
    cache.observe("Pod", "DELETED", rv(pod("p", node_name="n1"), 21))
    assert "default/p" not in cache.pods


def test_assumed_pods_count_as_bound_until_the_watch_confirms() -> None:
    cache = Cache()
    cache.observe("Node", None, rv(node("n1"), 1))
    cache.observe("Pod", None, rv(pod("p"), 2))
    cache.assume("default/p", "n1")
    assert [p.node_name for p in cache.snapshot(frozenset({"koordpy"})).pods] == ["n1"]
    cache.observe("Pod", "MODIFIED", rv(pod("p", node_name="n1"), 3))
    assert cache.assumed == {}
    cache.assume("default/q", "n1")
    cache.forget("default/q")
    assert cache.assumed == {} and cache.changed.is_set()


def test_invalid_objects_are_kept_as_errors_for_reporting() -> None:
    cache = Cache()
    cache.observe("PodGroup", None, rv(podgroup("bad", 0), 1))
    cache.observe("Pod", None, rv(pod("p", cpu="lots"), 2))
    snap = cache.snapshot(frozenset({"koordpy"}))
    assert "spec.minMember" in snap.invalid_podgroups["default/bad"]
    [(key, err, _)] = cache.invalid_pending_pods(frozenset({"koordpy"}))
    assert key == "default/p" and "resources.requests.cpu" in err
    cache.observe("PodGroup", "MODIFIED", rv(podgroup("bad", 2), 3))  # fixed by the user
    assert "default/bad" in cache.podgroups and not cache.snapshot(frozenset()).invalid_podgroups


def test_an_invalid_cluster_network_topology_is_reported_not_used() -> None:
    cache = Cache()
    bad = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
           "metadata": {"name": "default", "resourceVersion": "1"},
           "spec": {"networkTopologySpec": [{"topologyLayer": "B", "parentTopologyLayer": "A", "labelKey": ["b"]}]}}
    cache.observe("ClusterNetworkTopology", None, bad)
    snap = cache.snapshot(frozenset())
    assert snap.topology is None and snap.topology_error and "'A'" in snap.topology_error


class Flaky:
    def __init__(self, *failures: int) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise ApiException(status=self.failures.pop(0), reason="test")
        return "ok"


async def test_retries_server_errors_then_succeeds() -> None:
    op = Flaky(500, 503, 429)
    assert await with_retries("thing", op) == "ok" and op.calls == 4


async def test_not_found_and_conflict_end_the_write() -> None:
    with pytest.raises(Gone):
        await with_retries("thing", Flaky(404))
    with pytest.raises(Conflict):
        await with_retries("thing", Flaky(409))
    with pytest.raises(ApiException):
        await with_retries("thing", Flaky(403))


def test_a_resync_drops_what_was_deleted_unseen_and_keeps_what_is_newer() -> None:
    cache = Cache()
    cache.observe("Pod", None, rv(pod("ghost", node_name="n1"), 5))  # deleted before the list, no event seen
    cache.observe("Pod", "ADDED", rv(pod("fresh"), 50))  # created after the list was taken
    dropped = cache.reconcile("Pod", [rv(pod("kept"), 7)], list_version=40)
    assert dropped == 1 and set(cache.pods) == {"default/fresh", "default/kept"}
