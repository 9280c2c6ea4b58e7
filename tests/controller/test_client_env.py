"""The API client reads the proxy environment once per process, not on every request (issue 21:
aiohttp's ``trust_env`` read HTTPS_PROXY, NO_PROXY and ~/.netrc in a thread per request, a tenth
of the scheduler's CPU while binding), and a proxy the environment names is still used."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp.client
import aiohttp.helpers
import pytest
from aiohttp import web
from kubernetes_asyncio.client import CoreV1Api

from koordpy.controller.client import api_client, proxy_from_env

PROXY_VARS = ("http_proxy", "https_proxy", "no_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
        monkeypatch.delenv(var.upper(), raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


async def serve(handler: Any) -> AsyncIterator[int]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server: Any = site._server
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        await runner.cleanup()


def kubeconfig(tmp_path: Path, server: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(f"""apiVersion: v1
kind: Config
clusters: [{{name: c, cluster: {{server: "{server}"}}}}]
users: [{{name: u, user: {{token: secret}}}}]
contexts: [{{name: x, context: {{cluster: c, user: u}}}}]
current-context: x
""")
    return str(path)


async def list_nodes(kubeconfig_path: str, times: int) -> None:
    api = await api_client(kubeconfig_path)
    try:
        for _ in range(times):
            resp = await CoreV1Api(api).list_node(_preload_content=False)
            assert resp.status == 200
            await resp.read()
    finally:
        await api.close()


async def test_the_proxy_environment_is_not_read_per_request(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    looked: list[str] = []
    real = aiohttp.helpers.get_env_proxy_for_url

    def counted(url: Any) -> Any:
        looked.append(str(url))
        return real(url)

    monkeypatch.setattr(aiohttp.client, "get_env_proxy_for_url", counted)

    async def api(request: web.Request) -> web.Response:
        return web.json_response({"kind": "NodeList", "items": [], "metadata": {}})

    async for port in serve(api):
        await list_nodes(kubeconfig(tmp_path, f"http://127.0.0.1:{port}"), 3)
    assert looked == []  # with trust_env on, aiohttp looked it up for each of the three requests


async def test_a_proxy_named_by_the_environment_is_used_with_its_credentials(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, str]] = []

    async def proxy(request: web.Request) -> web.Response:
        # A plain-HTTP proxy gets the whole URL as the request target.
        seen.append((str(request.url), request.headers.get("Proxy-Authorization", "")))
        return web.json_response({"kind": "NodeList", "items": [], "metadata": {}})

    async for port in serve(proxy):
        monkeypatch.setenv("HTTP_PROXY", f"http://me:pw@127.0.0.1:{port}")
        # api.invalid never resolves: only the proxy can answer for it.
        await list_nodes(kubeconfig(tmp_path, "http://api.invalid:8080"), 2)
    assert [url for url, _ in seen] == ["http://api.invalid:8080/api/v1/nodes"] * 2
    assert {auth for _, auth in seen} == {"Basic " + base64.b64encode(b"me:pw").decode()}


def test_https_proxy_and_no_proxy_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://me:pw@proxy.example:3128")
    assert proxy_from_env("https://10.1.2.3:6443") == "http://me:pw@proxy.example:3128"
    assert proxy_from_env("http://10.1.2.3:8080") is None  # HTTPS_PROXY is for https only
    monkeypatch.setenv("NO_PROXY", "10.1.2.3")
    assert proxy_from_env("https://10.1.2.3:6443") is None
    assert proxy_from_env("https://10.9.9.9:6443") == "http://me:pw@proxy.example:3128"


def test_proxy_credentials_may_come_from_netrc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine proxy.example login me password pw\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    assert proxy_from_env("https://10.1.2.3:6443") == "http://me:pw@proxy.example:3128"
