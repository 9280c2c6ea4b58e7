"""How one write reaches the API server: retries with backoff, the leader fence, and the write metrics.

Belongs here: ``call`` (one write, retried, fenced and counted), ``with_retries``, telling a refused
raw response from a written one (``raise_for_status``), the errors a write ends in (``Gone``,
``Conflict``, ``NotLeader``), and the direct requests of the hot writes (``DirectCore``,
``DirectCustom``). Not here: what to write and when (``reports``, the pacing policy), nor the
bodies of the writes (``writer``).
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

import aiohttp
import structlog
from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.controller.metrics import Metrics
from koordpy.controller.wire import Response, Wire

log = structlog.get_logger("koordpy.writer")
T = TypeVar("T")


class Gone(Exception):
    """The object no longer exists (404): nothing to retry."""


class Conflict(Exception):
    """The API server refused the write as conflicting (409); ``message`` is its own word for why
    (the Status body's message), which tells a pod bound already from one being deleted."""

    def __init__(self, what: str, message: str = "") -> None:
        super().__init__(f"{what}: {message}" if message else what)
        self.message = message


def status_message(body: object) -> str:
    """The ``message`` of the Status an API server's refusal carries ("" when the body holds none)."""
    text = body.decode(errors="replace") if isinstance(body, bytes) else str(body or "")
    try:
        found = json.loads(text)
    except ValueError:
        return text.strip()
    return str(found.get("message") or "") if isinstance(found, dict) else ""


class NotLeader(Exception):
    """This replica may not write: it does not hold the leader Lease (or no longer does)."""


async def with_retries(what: str, op: Callable[[], Awaitable[T]], attempts: int = 6,
                       fence: Callable[[], bool] | None = None,
                       retried: Callable[[str], None] | None = None) -> T:
    """Retries 429, 5xx and connection errors with jittered exponential backoff. ``fence()`` is
    asked before every attempt, a retry included: a replica that lost its lease while backing
    off must not send the write afterwards. ``retried(reason)`` counts the retries."""
    delay = 0.2
    for attempt in range(1, attempts + 1):
        if fence is not None and not fence():
            raise NotLeader(what)
        try:
            return await op()
        except ApiException as exc:
            if exc.status == 404:
                raise Gone(what) from exc
            if exc.status == 409:
                raise Conflict(what, status_message(exc.body) or str(exc.reason or "")) from exc
            if exc.status not in (429, 500, 502, 503, 504) or attempt == attempts:
                raise
            log.warning("api write failed, retrying", what=what, status=exc.status, attempt=attempt)
            if retried is not None:
                retried(str(exc.status))
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            if attempt == attempts:
                raise
            log.warning("api unreachable, retrying", what=what, error=str(exc), attempt=attempt)
            if retried is not None:
                retried("unreachable")
        await asyncio.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 5.0)
    raise AssertionError("unreachable")


async def raise_for_status(result: T) -> T:
    """``result`` once it is known to be a success. With ``_preload_content=False`` the client hands
    back the raw response without looking at its status, so a refused write (404, 409, 422, 5xx)
    would pass for a written one and never be retried: here it raises ApiException as a preloaded
    call does. Reading the body also frees the connection for the next write. A direct write's
    ``Response`` has its body read already."""
    if isinstance(result, aiohttp.ClientResponse):
        _refused(result.status, result.reason, await result.read())
    elif isinstance(result, Response):
        _refused(result.status, result.reason, result.body)
    return result


def _refused(status: int, reason: str | None, body: bytes) -> None:
    if not 200 <= status <= 299:
        exc = ApiException(status=status, reason=reason)
        exc.body = body
        raise exc


async def call(kind: str, what: str, op: Callable[[], Awaitable[T]], fence: Callable[[], bool] | None = None,
               metrics: Metrics | None = None) -> T:
    """One write, retried, fenced (``fence()`` false: NotLeader) and counted by ``kind`` (bind,
    status, event...) in ``metrics``."""
    retried = metrics.api_retries.labels if metrics is not None else None

    async def checked() -> T:
        return await raise_for_status(await op())

    try:
        result = await with_retries(what, checked, fence=fence,
                                    retried=(lambda reason: retried(reason).inc()) if retried else None)
    except NotLeader:
        if metrics is not None:
            metrics.api_writes.labels(kind, "fenced").inc()
        raise
    except BaseException:
        if metrics is not None:
            metrics.api_writes.labels(kind, "failed").inc()
        raise
    if metrics is not None:
        metrics.api_writes.labels(kind, "ok").inc()
    return result


# -- the hot writes, sent directly -------------------------------------------------------------

JSON = "application/json"
# What the generated client sends a PATCH with a dict body as when no content type is named.
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
_NO_TIMEOUT = aiohttp.ClientTimeout()  # as the generated client's: none unless the call names one


class _Direct:
    """The generated client's calls of the same names, for the writes a bound pod costs (its bind,
    its Scheduled Event, a condition, its PodGroup's status) and those a victim costs (its
    condition, its deletion, its Event), sent as one request with the client's credentials: the
    generated methods validated every argument, walked every body to serialize it and built each
    request through three layers, a tenth of the scheduler's CPU while binding (docs/benchmarks.md,
    issue 21). They go on the client's own ``Wire`` (``koordpy.controller.wire``) when it has one,
    else on its aiohttp session, connections and proxy. What goes on the wire is the same either way
    (tests/controller/test_direct_writes.py). Every other call, and these with any option but the
    content type, go to the generated client."""

    def __init__(self, api: ApiClient, generated: Any) -> None:
        self._api = api
        self._generated = generated

    def __getattr__(self, name: str) -> Any:
        return getattr(self._generated, name)

    async def _send(self, method: str, path: str, body: object, content_type: str) -> Response:
        api = self._api
        headers = {"Accept": JSON, "Content-Type": content_type, **api.default_headers}
        if api.cookie:
            headers["Cookie"] = api.cookie
        await api.update_params_for_auth(headers, [], ["BearerToken"])  # a token refresh hook runs here
        data = None if body is None else json.dumps(body)
        wire: Wire | None = getattr(api, "wire", None)
        if wire is not None:
            return await wire.request(method, path, headers, None if data is None else data.encode())
        rest = api.rest_client
        options: dict[str, Any] = {name: getattr(rest, name) for name in ("proxy", "proxy_headers", "server_hostname")
                                   if getattr(rest, name)}
        response: aiohttp.ClientResponse = await rest.pool_manager.request(
            method, api.configuration.host + path, data=data, headers=headers, timeout=_NO_TIMEOUT, **options)
        async with response:
            return Response(response.status, response.reason or "", await response.read())


def _plain(options: dict[str, Any], also: frozenset[str] = frozenset()) -> bool:
    """Whether a call asks for nothing the direct request does not do: a raw response, and at most
    a content type (and the options ``also`` names)."""
    return options.get("_preload_content") is False and set(options) <= {"_preload_content", "_content_type", *also}


def _p(value: str) -> str:
    return quote(str(value), safe="")  # as the generated client quotes a path parameter


class DirectCore(_Direct):
    """``CoreV1Api`` with its hot writes sent directly."""

    def __init__(self, api: ApiClient) -> None:
        super().__init__(api, CoreV1Api(api))

    async def create_namespaced_pod_binding(self, name: str, namespace: str, body: object, **options: Any) -> Any:
        if not _plain(options):
            return await self._generated.create_namespaced_pod_binding(name, namespace, body, **options)
        return await self._send("POST", f"/api/v1/namespaces/{_p(namespace)}/pods/{_p(name)}/binding", body,
                                options.get("_content_type", JSON))

    async def create_namespaced_event(self, namespace: str, body: object, **options: Any) -> Any:
        if not _plain(options):
            return await self._generated.create_namespaced_event(namespace, body, **options)
        return await self._send("POST", f"/api/v1/namespaces/{_p(namespace)}/events", body,
                                options.get("_content_type", JSON))

    async def patch_namespaced_event(self, name: str, namespace: str, body: object, **options: Any) -> Any:
        if not _plain(options):
            return await self._generated.patch_namespaced_event(name, namespace, body, **options)
        return await self._send("PATCH", f"/api/v1/namespaces/{_p(namespace)}/events/{_p(name)}", body,
                                options.get("_content_type", STRATEGIC_MERGE))

    async def patch_namespaced_pod_status(self, name: str, namespace: str, body: object, **options: Any) -> Any:
        if not _plain(options):
            return await self._generated.patch_namespaced_pod_status(name, namespace, body, **options)
        return await self._send("PATCH", f"/api/v1/namespaces/{_p(namespace)}/pods/{_p(name)}/status", body,
                                options.get("_content_type", STRATEGIC_MERGE))


    async def delete_namespaced_pod(self, name: str, namespace: str, **options: Any) -> Any:
        if not _plain(options, frozenset({"body"})):
            return await self._generated.delete_namespaced_pod(name, namespace, **options)
        return await self._send("DELETE", f"/api/v1/namespaces/{_p(namespace)}/pods/{_p(name)}",
                                options.get("body"), options.get("_content_type", JSON))


class DirectCustom(_Direct):
    """``CustomObjectsApi`` with a namespaced object's patches sent directly: a PodGroup's status, and a
    ResourceClaim's finalizer and status (PreBind's, one of each a pod's claim, ``/apis`` serves
    ``resource.k8s.io`` as it serves a custom resource)."""

    def __init__(self, api: ApiClient) -> None:
        super().__init__(api, CustomObjectsApi(api))

    async def patch_namespaced_custom_object(self, group: str, version: str, namespace: str, plural: str,
                                             name: str, body: object, **options: Any) -> Any:
        return await self._patch(self._generated.patch_namespaced_custom_object, "",
                                 group, version, namespace, plural, name, body, options)

    async def patch_namespaced_custom_object_status(self, group: str, version: str, namespace: str, plural: str,
                                                    name: str, body: object, **options: Any) -> Any:
        return await self._patch(self._generated.patch_namespaced_custom_object_status, "/status",
                                 group, version, namespace, plural, name, body, options)

    async def _patch(self, generated: Callable[..., Awaitable[Any]], subresource: str, group: str, version: str,
                     namespace: str, plural: str, name: str, body: object, options: dict[str, Any]) -> Any:
        """A patch of the object (``subresource`` "") or its status ("/status"): sent directly when
        plain and typed, else by the generated client's method ``generated``."""
        if not _plain(options) or "_content_type" not in options:
            return await generated(group, version, namespace, plural, name, body, **options)
        return await self._send(
            "PATCH", f"/apis/{_p(group)}/{_p(version)}/namespaces/{_p(namespace)}/{_p(plural)}/{_p(name)}{subresource}",
            body, options["_content_type"])
