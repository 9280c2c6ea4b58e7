"""The hot writes sent directly (``transport.DirectCore``/``DirectCustom``, issue 21) put on the wire
what the generated client's calls of the same names put there: method, path, query, body, content
type, credentials. Property-based over names (quoted as path parameters) and bodies."""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import unquote

from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes_asyncio.client import ApiClient, Configuration, CoreV1Api, CustomObjectsApi

from koordpy.controller.client import Client, wire_of
from koordpy.controller.transport import DirectCore, DirectCustom, raise_for_status

MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
HEADERS = ("Content-Type", "Accept", "Authorization", "User-Agent", "Cookie")

# Names as the API server takes them in a path (``path.IsValidPathSegmentName``: never "." or "..",
# no "/" or "%"), any other character included (quoted as a path parameter); no surrogates: not UTF-8.
names = st.text(st.characters(codec="utf-8", exclude_characters="/%"), min_size=1, max_size=20).filter(
    lambda n: n not in (".", ".."))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10)
bodies = st.dictionaries(st.text(max_size=8), json_values, min_size=1, max_size=4)


async def seen_by_server(calls: list[Any], wire: bool = True) -> list[dict[str, Any]]:
    """What a server saw of each call: ``calls`` are (client -> awaitable) run against it in turn.
    ``wire``: the client has its own ``Wire`` (as ``api_client`` makes it), which the direct writes
    take; else they go on its aiohttp session."""
    seen: list[dict[str, Any]] = []

    async def handle(request: web.BaseRequest) -> web.Response:
        data = await request.read()
        # The path as the API server routes it: percent-decoded (aiohttp's URL handling sends ":" where
        # the generated client quoted "%3A"; the Wire sends what it was given).
        seen.append({"method": request.method, "path": unquote(request.raw_path),
                     "body": json.loads(data) if data else None,
                     **{h: request.headers.get(h) for h in HEADERS}})
        return web.json_response({"metadata": {"name": "e1"}}, status=201)

    runner = web.ServerRunner(web.Server(handle))  # any path, a newline in it included
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    server: Any = site._server
    cfg = Configuration(host=f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}",
                        api_key={"BearerToken": "secret"}, api_key_prefix={"BearerToken": "Bearer"})
    api = Client(cfg)
    api.cookie = "c=1"
    api.wire = wire_of(api) if wire else None
    assert (api.wire is not None) == wire
    try:
        for call in calls:
            await raise_for_status(await call(api))
    finally:
        await api.close()
        await runner.cleanup()
    return seen


def both(generated: Any, direct: Any) -> None:
    for wire in (True, False):
        old, new = asyncio.run(seen_by_server([generated, direct], wire))
        assert new == old


@settings(max_examples=40, deadline=None)
@given(name=names, ns=names, body=bodies)
def test_a_bind_is_sent_as_the_generated_client_sends_it(name: str, ns: str, body: dict[str, Any]) -> None:
    both(lambda api: CoreV1Api(api).create_namespaced_pod_binding(name, ns, body, _preload_content=False),
         lambda api: DirectCore(api).create_namespaced_pod_binding(name, ns, body, _preload_content=False))


@settings(max_examples=40, deadline=None)
@given(name=names, ns=names, body=bodies)
def test_an_event_create_and_patch_are_sent_as_the_generated_client_sends_them(
        name: str, ns: str, body: dict[str, Any]) -> None:
    both(lambda api: CoreV1Api(api).create_namespaced_event(ns, body, _preload_content=False),
         lambda api: DirectCore(api).create_namespaced_event(ns, body, _preload_content=False))
    both(lambda api: CoreV1Api(api).patch_namespaced_event(name, ns, body, _content_type=MERGE_PATCH,
                                                           _preload_content=False),
         lambda api: DirectCore(api).patch_namespaced_event(name, ns, body, _content_type=MERGE_PATCH,
                                                            _preload_content=False))


@settings(max_examples=40, deadline=None)
@given(name=names, ns=names, body=bodies, merge=st.booleans())
def test_a_pod_status_patch_is_sent_as_the_generated_client_sends_it(
        name: str, ns: str, body: dict[str, Any], merge: bool) -> None:
    options: dict[str, Any] = {"_content_type": MERGE_PATCH} if merge else {}  # default: strategic merge
    both(lambda api: CoreV1Api(api).patch_namespaced_pod_status(name, ns, body, _preload_content=False, **options),
         lambda api: DirectCore(api).patch_namespaced_pod_status(name, ns, body, _preload_content=False, **options))


@settings(max_examples=40, deadline=None)
@given(name=names, ns=names, body=st.none() | bodies)
def test_a_pod_deletion_is_sent_as_the_generated_client_sends_it(name: str, ns: str,
                                                                 body: dict[str, Any] | None) -> None:
    options: dict[str, Any] = {} if body is None else {"body": body}
    both(lambda api: CoreV1Api(api).delete_namespaced_pod(name, ns, _preload_content=False, **options),
         lambda api: DirectCore(api).delete_namespaced_pod(name, ns, _preload_content=False, **options))


@settings(max_examples=40, deadline=None)
@given(group=names, version=names, ns=names, plural=names, name=names, body=bodies)
def test_a_podgroup_status_patch_is_sent_as_the_generated_client_sends_it(
        group: str, version: str, ns: str, plural: str, name: str, body: dict[str, Any]) -> None:
    both(lambda api: CustomObjectsApi(api).patch_namespaced_custom_object_status(
        group, version, ns, plural, name, body, _content_type=MERGE_PATCH, _preload_content=False),
        lambda api: DirectCustom(api).patch_namespaced_custom_object_status(
        group, version, ns, plural, name, body, _content_type=MERGE_PATCH, _preload_content=False))


@settings(max_examples=40, deadline=None)
@given(ns=names, name=names, body=bodies, status=st.booleans())
def test_a_resourceclaim_patch_is_sent_as_the_generated_client_sends_it(
        ns: str, name: str, body: dict[str, Any], status: bool) -> None:
    """PreBind's claim writes (a finalizer, the status: strategic merge patches of resource.k8s.io)."""
    call = "patch_namespaced_custom_object_status" if status else "patch_namespaced_custom_object"
    both(lambda api: getattr(CustomObjectsApi(api), call)(
        "resource.k8s.io", "v1", ns, "resourceclaims", name, body, _content_type=STRATEGIC_MERGE,
        _preload_content=False),
        lambda api: getattr(DirectCustom(api), call)(
        "resource.k8s.io", "v1", ns, "resourceclaims", name, body, _content_type=STRATEGIC_MERGE,
        _preload_content=False))


async def test_other_calls_and_options_go_to_the_generated_client() -> None:
    api = ApiClient(Configuration(host="http://127.0.0.1:1"))
    try:
        core = DirectCore(api)
        assert core.patch_namespaced_pod == core._generated.patch_namespaced_pod
        called: list[str] = []

        async def generated(*args: Any, **options: Any) -> str:
            called.append(str(options))
            return "generated"

        core._generated.create_namespaced_pod_binding = generated
        assert await core.create_namespaced_pod_binding("p", "ns", {}, _request_timeout=5,
                                                        _preload_content=False) == "generated"
        assert await core.create_namespaced_pod_binding("p", "ns", {}) == "generated"  # a preloaded answer
        assert len(called) == 2
    finally:
        await api.close()
