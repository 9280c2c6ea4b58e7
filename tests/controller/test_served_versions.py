"""A kind registered at several versions (Kueue's Topology: v1beta2, v1beta1, v1alpha1) is listed and
watched at the first one the cluster serves, the one in use first (``client.first_served``,
``kinds.alternatives``): at the start, at each resync, after its CRD is upgraded, and by the one-off
reads. Against a small HTTP server standing in for the API server, which serves the Topology CRD at
the versions a test names."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from aiohttp import web
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api import kinds as registry
from koordpy.api.kinds import Kind, alternatives, by_id, grants, watched
from koordpy.controller import oneshot, podwatch
from koordpy.controller.cache import Cache
from koordpy.controller.client import first_served, list_objects
from koordpy.controller.listing import list_everything
from koordpy.controller.main import build_registry, kopf_kinds, resources, sync, watch_tasks
from tests.controller.served import api_for
from tests.controller.test_watch_kinds import until

TOPOLOGY = by_id("topologies.kueue.x-k8s.io")
GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1", "v1alpha1")


def topology(name: str, version: int) -> dict[str, Any]:
    # As a list's items and watch events come from the API server: the apiVersion the path asked for.
    return {"metadata": {"name": name, "resourceVersion": str(version)},
            "spec": {"levels": [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}


class Cluster:
    """Serves the Topology CRD at ``served`` (each version alike, as with conversion None), the
    registry's kinds that are always served as empty lists, and nothing else (404). A watch sends
    ``events`` (those not sent yet) and ends. ``calls``: "list <version>" or "watch <version>"."""

    def __init__(self, served: set[str], items: list[dict[str, Any]], forbidden: bool = False) -> None:
        self.served, self.items, self.forbidden = served, items, forbidden
        self.events: list[dict[str, Any]] = []
        self.calls: list[str] = []

    async def topologies(self, request: web.Request) -> web.StreamResponse:
        version = request.match_info["version"]
        watch = request.query.get("watch") in ("true", "True", "1")
        self.calls.append(f"{'watch' if watch else 'list'} {version}")
        if self.forbidden:
            return web.json_response({"kind": "Status", "code": 403}, status=403)
        if version not in self.served:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        if not watch:
            items = [{**i, "apiVersion": f"{GROUP}/{version}", "kind": "Topology"} for i in self.items]
            return web.json_response({"items": items, "metadata": {"resourceVersion": "10"}})
        resp = web.StreamResponse()
        await resp.prepare(request)
        while self.events:
            obj = {**self.events.pop(0), "apiVersion": f"{GROUP}/{version}", "kind": "Topology"}
            await resp.write(json.dumps({"type": "ADDED", "object": obj}).encode() + b"\n")
        await asyncio.sleep(0.05)
        return resp

    @staticmethod
    async def empty(request: web.Request) -> web.Response:
        return web.json_response({"items": [], "metadata": {"resourceVersion": "1"}})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/apis/kueue.x-k8s.io/{version}/topologies", self.topologies)
        for kind in watched():
            if not kind.optional:
                prefix = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
                app.router.add_get(f"{prefix}/{kind.plural}", self.empty)
        return app


@asynccontextmanager
async def serving(cluster: Cluster) -> AsyncIterator[ApiClient]:
    async with api_for(cluster.app()) as api:
        yield api


def kueue_kinds() -> list[tuple[Kind, str, str, str]]:
    return [entry for entry in resources() if entry[0].id == TOPOLOGY.id]


def test_the_registry_lists_kueues_topology_at_three_versions_newest_first() -> None:
    assert TOPOLOGY.version == "v1beta2"  # the one named, watched and granted
    assert [k.version for k in alternatives(TOPOLOGY)] == list(VERSIONS)
    older = registry.kind_for(f"{GROUP}/v1beta1", "Topology")
    assert older is not None and [k.version for k in alternatives(older)] == ["v1beta1", "v1beta2", "v1alpha1"]
    assert [k for k in watched() if k.id == TOPOLOGY.id] == [TOPOLOGY]
    assert alternatives(by_id("nodes")) == (by_id("nodes"),)
    # RBAC is per resource: the three versions are one rule.
    assert {g for g in grants() if g[:2] == (GROUP, "topologies")} == {(GROUP, "topologies", "list"),
                                                                       (GROUP, "topologies", "watch")}


@pytest.mark.parametrize(("served", "found", "lists"), [
    ({"v1beta2", "v1beta1"}, "v1beta2", ["list v1beta2"]),
    ({"v1beta1"}, "v1beta1", ["list v1beta2", "list v1beta1"]),
    ({"v1alpha1"}, "v1alpha1", ["list v1beta2", "list v1beta1", "list v1alpha1"]),
])
async def test_a_topology_is_listed_and_watched_at_the_newest_version_served(
        served: set[str], found: str, lists: list[str]) -> None:
    cluster = Cluster(served, [topology("racks", 5)])
    cache = Cache()
    using: dict[str, Kind] = {}
    async with serving(cluster) as api:
        versions = await asyncio.wait_for(sync(api, cache, kueue_kinds(), set(), using), 5)
        assert cluster.calls == lists
        assert versions == {TOPOLOGY.id: 10} and using[TOPOLOGY.id].version == found
        assert cache.topologies["racks"].api_version == f"{GROUP}/{found}"
        assert kopf_kinds(kueue_kinds(), versions) == []  # served: its own watch, not kopf's
        cluster.events.append(topology("blocks", 11))
        (task,) = watch_tasks(api, cache, kueue_kinds(), versions, using)  # as ``koordpy run`` starts them
        try:
            await until(lambda: "blocks" in cache.topologies)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    assert {c for c in cluster.calls if c.startswith("watch")} == {f"watch {found}"}
    assert cache.topologies["blocks"].api_version == f"{GROUP}/{found}"


async def test_a_topology_served_at_no_version_is_said_once_and_left_to_kopf_at_the_newest() -> None:
    cluster = Cluster(set(), [])
    using: dict[str, Kind] = {}
    unserved: set[str] = set()
    async with serving(cluster) as api:
        with structlog.testing.capture_logs() as logs:
            for _ in range(3):  # the start's sync and two resyncs
                versions = await asyncio.wait_for(sync(api, Cache(), kueue_kinds(), unserved, using), 5)
    assert versions == {} and using == {}
    assert cluster.calls == ["list v1beta2", "list v1beta1", "list v1alpha1"] * 3
    said = [e for e in logs if e["event"].startswith("kind not served")]
    assert [e["kind"] for e in said] == ["Topology"]
    left = kopf_kinds(kueue_kinds(), versions)
    assert [entry[0] for entry in left] == [TOPOLOGY]
    # kopf watches a resource at the version its handler names: the newest, which a Kueue installed
    # later serves (and koordpy's own copy of the CRD).
    handlers = build_registry(Cache(), None, left)._watching.get_all_handlers()
    selectors = [h.selector for h in handlers]
    assert None not in selectors
    assert [(s.group, s.version, s.any_name) for s in selectors if s is not None] == [
        (GROUP, "v1beta2", "topologies")]


async def test_a_topology_gone_and_back_is_looked_for_at_the_newest_version_first() -> None:
    cluster = Cluster(set(), [topology("racks", 5)])
    using = {TOPOLOGY.id: alternatives(TOPOLOGY)[1]}  # read at v1beta1 until its CRD was deleted
    async with serving(cluster) as api:
        await asyncio.wait_for(sync(api, Cache(), kueue_kinds(), set(), using), 5)
        assert using == {}
        cluster.served = {"v1beta2", "v1beta1"}  # a newer Kueue installed
        cluster.calls.clear()
        await asyncio.wait_for(sync(api, Cache(), kueue_kinds(), set(), using), 5)
    assert cluster.calls == ["list v1beta2"] and using[TOPOLOGY.id] is TOPOLOGY


async def test_a_version_refused_by_rbac_is_not_tried_at_the_others() -> None:
    cluster = Cluster({"v1beta1"}, [], forbidden=True)
    async with serving(cluster) as api:
        with pytest.raises(ApiException) as caught:
            await first_served(TOPOLOGY, lambda k: list_objects(api, k.group, k.version, k.plural))
    assert caught.value.status == 403 and cluster.calls == ["list v1beta2"]


async def test_a_resync_lists_at_the_version_in_use_while_it_is_served() -> None:
    # The watch reads v1beta1 (found at the start); a Kueue upgrade now serves v1beta2 as well. The
    # resync stays with the watch's version: its objects are those the watch reads.
    cluster = Cluster({"v1beta2", "v1beta1"}, [topology("racks", 5)])
    older = alternatives(TOPOLOGY)[1]
    using = {TOPOLOGY.id: older}
    cache = Cache()
    async with serving(cluster) as api:
        await asyncio.wait_for(sync(api, cache, kueue_kinds(), set(), using), 5)
    assert cluster.calls == ["list v1beta1"] and using[TOPOLOGY.id] is older
    assert cache.topologies["racks"].api_version == f"{GROUP}/v1beta1"


async def test_a_crd_upgrade_that_drops_the_watched_version_moves_the_watch_and_the_resync(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podwatch, "NOT_SERVED_FIRST", 0.01)
    cluster = Cluster({"v1beta1"}, [topology("racks", 5)])
    cache = Cache()
    using: dict[str, Kind] = {}
    async with serving(cluster) as api:
        with structlog.testing.capture_logs() as logs:
            versions = await asyncio.wait_for(sync(api, cache, kueue_kinds(), set(), using), 5)
            assert using[TOPOLOGY.id].version == "v1beta1"
            (task,) = watch_tasks(api, cache, kueue_kinds(), versions, using)
            try:
                await until(lambda: "watch v1beta1" in cluster.calls)
                cluster.served = {"v1beta2"}  # the CRD replaced: v1beta1 no longer served
                cluster.events.append(topology("blocks", 12))
                await until(lambda: "blocks" in cache.topologies)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
            assert using[TOPOLOGY.id].version == "v1beta2"
            assert cache.topologies["blocks"].api_version == f"{GROUP}/v1beta2"
            # Looked for at the version in use, then at the others newest first; then watched there.
            moved_at = len(cluster.calls) - 1 - cluster.calls[::-1].index("list v1beta2")
            assert cluster.calls[moved_at - 1] == "list v1beta1"
            assert set(cluster.calls[moved_at + 1:]) == {"watch v1beta2"}
            cluster.calls.clear()
            await asyncio.wait_for(sync(api, cache, kueue_kinds(), set(), using), 5)  # a resync
    assert cluster.calls == ["list v1beta2"]
    moved = [(e["event"], e["version"]) for e in logs if "another version" in e["event"]]
    assert moved == [("kind served at another version, reading that one", f"{GROUP}/v1beta1"),
                     ("kind served at another version, watching that one", f"{GROUP}/v1beta2")]


def kubeconfig_for(tmp_path: Path, api: ApiClient) -> str:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
              "clusters": [{"name": "fake", "cluster": {"server": api.configuration.host}}],
              "users": [{"name": "fake", "user": {"token": "x"}}],
              "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    return str(path)


async def test_the_one_off_reads_find_the_version_served(tmp_path: Path) -> None:
    # ``koordpy topology show`` (list_everything) and ``koordpy explain`` (oneshot) read once.
    cluster = Cluster({"v1beta1"}, [topology("racks", 5)])
    async with serving(cluster) as api:
        kubeconfig = kubeconfig_for(tmp_path, api)
        listed = await list_everything(kubeconfig)
        notes: list[str] = []
        snapshot, _ = await oneshot._read(kubeconfig, frozenset({"koordpy"}), notes)
    assert [(source, raw["apiVersion"]) for source, raw in listed if raw["kind"] == "Topology"] == [
        ("topologies.kueue.x-k8s.io racks", f"{GROUP}/v1beta1")]
    assert snapshot.topologies["racks"].api_version == f"{GROUP}/v1beta1" and notes == []
    assert [c for c in cluster.calls if c.startswith("list")] == ["list v1beta2", "list v1beta1"] * 2

