"""How one write reaches the API server: retries with backoff, the leader fence, and the write metrics.

Belongs here: ``call`` (one write, retried, fenced and counted), ``with_retries``, telling a refused
raw response from a written one (``raise_for_status``) and the errors a write ends in (``Gone``,
``Conflict``, ``NotLeader``). Not here: what to write and when (``reports``, the pacing policy),
nor the bodies of the writes (``writer``).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
import structlog
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.controller.metrics import Metrics

log = structlog.get_logger("koordpy.writer")
T = TypeVar("T")


class Gone(Exception):
    """The object no longer exists (404): nothing to retry."""


class Conflict(Exception):
    """The API server refused the write as conflicting (409)."""


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
                raise Conflict(f"{what}: {exc.reason}") from exc
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
    call does. Reading the body also frees the connection for the next write."""
    if isinstance(result, aiohttp.ClientResponse):
        body = await result.read()
        if not 200 <= result.status <= 299:
            exc = ApiException(status=result.status, reason=result.reason)
            exc.body = body
            raise exc
    return result


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
