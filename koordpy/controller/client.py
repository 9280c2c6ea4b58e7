"""The API client and its LIST calls: what every other controller module talks to the API server through.

Belongs here: the client factory (``api_client``), one LIST in pages (``list_pages``, ``list_objects``),
one WATCH's stream (``watch_stream``), the call each kind of the registry is listed with
(``Kind.list_call``), telling a kind the cluster does not serve (``not_served``) and the version of
a kind registered at several that it serves (``first_served``). Not here: what is done with the
objects (the cache, ``listing``), reading watches (``podwatch``, kopf) and writes (``writer``,
``transport``).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes_asyncio import config as kube_config
from kubernetes_asyncio.client import ApiClient, Configuration, CoreV1Api, CustomObjectsApi, SchedulingV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from yarl import URL

from koordpy.api.kinds import Kind, alternatives, optional, watched
from koordpy.controller.wire import Wire, loads

# Objects a LIST page asks for. A LIST of every pod at once held all of them as JSON and as
# decoded dicts (managedFields included) at the same moment: at 16,000 pods the periodic resync
# took the scheduler's memory from ~650 MiB to 1.1 GiB, and Python keeps what it grew into.
PAGE = 500
# The typed clients a ``Kind.list_call`` names.
# What kubernetes_asyncio gives its session: a watch event of a large object can exceed aiohttp's default.
READ_BUFSIZE = 2**21
_CLIENTS: dict[str, type[Any]] = {"CoreV1Api": CoreV1Api, "SchedulingV1Api": SchedulingV1Api}


class Client(ApiClient):  # type: ignore[misc]
    """The generated client, with a ``Wire`` of its own for the hot writes (``transport``) when the
    API server is reached directly; closing it closes both."""

    wire: Wire | None = None

    async def close(self) -> None:
        if self.wire is not None:
            await self.wire.close()
        await super().close()


async def api_client(kubeconfig: str | None, qps_unlimited: bool = True) -> Client:
    cfg = Configuration()
    if kubeconfig or os.environ.get("KUBECONFIG"):
        await kube_config.load_kube_config(config_file=kubeconfig or os.environ["KUBECONFIG"],
                                           client_configuration=cfg)
    else:
        kube_config.load_incluster_config(client_configuration=cfg)
    # Room for every write the writer allows at once (binds 64, events 64, reports 8, preemption
    # 8) beside a watch of each kind (each holds its connection) and the Lease's renewals: a write
    # never waits for a connection.
    cfg.connection_pool_maxsize = 176 + len(watched()) if qps_unlimited else 16
    if not cfg.proxy:  # a proxy the kubeconfig names wins, as it does per request in aiohttp
        cfg.proxy = proxy_from_env(cfg.host)
    api = Client(cfg)
    _trust_env_once(api)
    api.wire = wire_of(api)
    return api


def wire_of(api: ApiClient) -> Wire | None:
    """A ``Wire`` to the client's API server with the TLS its session uses (its CA, client certificate,
    verification and server name), as many connections as its pool; None when requests go through a
    proxy (aiohttp's CONNECT stays in charge of those)."""
    rest = api.rest_client
    if rest.proxy:
        return None
    context = getattr(rest.pool_manager.connector, "_ssl", None)  # the context kubernetes_asyncio made
    if api.configuration.host.startswith("https") and not isinstance(context, ssl.SSLContext):
        return None  # not the session kubernetes_asyncio sets up: leave its requests to it
    return Wire(api.configuration.host, context if isinstance(context, ssl.SSLContext) else None,
                rest.server_hostname or None, limit=api.configuration.connection_pool_maxsize)


def proxy_from_env(host: str) -> str | None:
    """The proxy for the API server at ``host`` as aiohttp's ``trust_env`` finds it (HTTPS_PROXY or
    HTTP_PROXY unless NO_PROXY names the host), with its credentials (from the proxy URL or
    ~/.netrc) in the URL, where aiohttp reads them for a CONNECT and a plain request alike; None
    for a direct connection."""
    try:
        proxy, auth = get_env_proxy_for_url(URL(host))
    except LookupError:  # no proxy for this scheme, or NO_PROXY covers the host
        return None
    if auth is not None:
        proxy = proxy.with_user(auth.login).with_password(auth.password)
    return str(proxy)


def _trust_env_once(api: ApiClient) -> None:
    """The client's session with ``trust_env`` off. kubernetes_asyncio turns it on, and then aiohttp
    reads the proxy environment and ~/.netrc again on every request, in a thread of its own: a
    tenth of the scheduler's CPU while it binds (docs/benchmarks.md, issue 21). ``api_client``
    has read the proxy once instead (``proxy_from_env``) and the client names it on each request.
    The API server's own credentials come from the kubeconfig, never from ~/.netrc."""
    rest = api.rest_client
    old = rest.pool_manager
    rest.pool_manager = aiohttp.ClientSession(connector=old.connector, trust_env=False,
                                              read_bufsize=READ_BUFSIZE)
    old.detach()  # the connector is the new session's now; the old one is closed without closing it


def not_served(exc: ApiException, group: str, plural: str, refused: bool = True) -> bool:
    """Whether a LIST failed because the cluster does not serve an optional kind (``Kind.optional``):
    404, a CRD not installed or an API not enabled, or with ``refused`` 403, RBAC that does not grant it."""
    return exc.status in ((403, 404) if refused else (404,)) and optional(group, plural)


T = TypeVar("T")


async def first_served(kind: Kind, call: Callable[[Kind], Awaitable[T]]) -> tuple[Kind, T]:
    """``call`` (a LIST) at the first of ``alternatives(kind)`` the cluster serves, with that entry.
    A 404 moves on to the next: a CRD that serves other versions of the resource, or none. A 403 is
    raised at once, as RBAC grants a resource at all its versions alike; so is any other failure, and
    the last alternative's 404 (the resource is not served at all)."""
    tried = alternatives(kind)
    for alt in tried[:-1]:
        try:
            return alt, await call(alt)
        except ApiException as exc:
            if not not_served(exc, alt.group, alt.plural, refused=False):
                raise
    return tried[-1], await call(tried[-1])


def _list_call(api: ApiClient, group: str, plural: str) -> Any:
    """The typed LIST call of a kind the custom-objects call does not reach (``Kind.list_call``)."""
    for kind in watched():
        if kind.group == group and kind.plural == plural and kind.list_call:
            client, _, method = kind.list_call.partition(".")
            return getattr(_CLIENTS[client](api), method)
    return None


def _core_list(core: CoreV1Api, plural: str) -> Any:
    """The LIST call of a core-API kind (each has its own method); a kind without one is a bug here,
    said as such rather than listed as some other kind."""
    call = _list_call(core.api_client, "", plural)
    if call is None:
        raise ValueError(f"koordpy.controller.listing has no LIST call for the core kind {plural!r}")
    return call


async def list_pages(api: ApiClient, group: str, version: str, plural: str,
                     page: int | None = None) -> AsyncIterator[tuple[list[dict[str, Any]], int]]:
    """One LIST in pages of ``page`` objects, decoded as plain JSON: each page's items with the
    list's resourceVersion (0 if none; every page of one list has the same)."""
    cont: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": page or PAGE, "_preload_content": False}
        if cont:
            kwargs["_continue"] = cont
        call = _core_list(CoreV1Api(api), plural) if group == "" else _list_call(api, group, plural)
        if call is not None:
            resp = await call(**kwargs)
        else:
            resp = await CustomObjectsApi(api).list_cluster_custom_object(group, version, plural, **kwargs)
        try:
            if resp.status >= 400:  # unread, a raw response does not raise: a kind not served is a 404 here
                raise ApiException(status=resp.status, reason=str(resp.reason))
            data = loads(await resp.read())
        finally:
            resp.release()
        meta = data.get("metadata") or {}
        try:
            list_version = int(meta.get("resourceVersion") or 0)
        except ValueError:
            list_version = 0
        yield data.get("items") or [], list_version
        cont = meta.get("continue")
        if not cont:
            return


async def watch_stream(api: ApiClient, group: str, version: str, plural: str, resource_version: str,
                       seconds: int) -> Any:
    """One WATCH of a kind from ``resource_version`` (bookmarks asked for), ended by the API server
    after ``seconds`` and by the client 30 s later (a connection gone silent must not hold the watch
    forever): the raw response, its body one JSON event a line. Raises ApiException when refused."""
    kwargs: dict[str, Any] = {"watch": True, "resource_version": resource_version, "allow_watch_bookmarks": True,
                              "timeout_seconds": seconds, "_preload_content": False,
                              "_request_timeout": seconds + 30}
    call = _core_list(CoreV1Api(api), plural) if group == "" else _list_call(api, group, plural)
    if call is not None:
        resp = await call(**kwargs)
    else:
        resp = await CustomObjectsApi(api).list_cluster_custom_object(group, version, plural, **kwargs)
    if resp.status >= 400:  # unread, a raw response does not raise (a kind not served: 404)
        resp.release()
        raise ApiException(status=resp.status, reason=str(resp.reason))
    return resp


async def list_objects(api: ApiClient, group: str, version: str, plural: str) -> tuple[list[dict[str, Any]], int]:
    """One whole LIST (for one-off looks): every item and the list's resourceVersion."""
    items: list[dict[str, Any]] = []
    list_version = 0
    async for page, page_version in list_pages(api, group, version, plural):
        items += page
        list_version = list_version or page_version
    return items, list_version
