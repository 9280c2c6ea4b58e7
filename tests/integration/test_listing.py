"""LISTs in pages on the real API server: every object arrives, and a resync drops only what is gone."""

from __future__ import annotations

import asyncio

from koordpy.controller import client, listing
from koordpy.controller.cache import Cache
from koordpy.controller.client import api_client
from tests.builders import node
from tests.integration.kube import ControlPlane, Kube, fake


def test_a_list_in_pages_fills_the_cache_and_drops_what_is_gone(controlplane: ControlPlane, kube: Kube) -> None:
    kube.apply(fake([node(f"page-{i}") for i in range(7)]))

    async def go() -> tuple[int, int, int, int, int]:
        api = await api_client(controlplane.kubeconfig)
        try:
            cache = Cache()
            pages = [len(items) async for items, _ in client.list_pages(api, "", "v1", "nodes", page=3)]
            version, dropped = await listing.list_into(cache, "Node", api, "", "v1", "nodes")
            assert version > 0
            held = len(cache.nodes)
            kube.kubectl("delete", "node", "page-3", "page-5")
            old = client.PAGE
            client.PAGE = 2
            try:
                _, dropped_after = await listing.list_into(cache, "Node", api, "", "v1", "nodes")
            finally:
                client.PAGE = old
            return sum(pages), len(pages), held, dropped, dropped_after
        finally:
            await api.close()

    listed, n_pages, held, dropped, dropped_after = asyncio.run(asyncio.wait_for(go(), 120))
    assert listed == 7 and n_pages == 3  # 3 + 3 + 1
    assert held == 7 and dropped == 0
    assert dropped_after == 2
