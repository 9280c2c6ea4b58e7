"""The watches koordpy reads without kopf: every kind the API server served at the start.

Pods are the flood (each brings 3-5 watch events: created, bound, then the kubelet's status
updates). Through kopf's per-event machinery they took ~30% of the scheduler's CPU and held
the live benchmark at 51-58% of the raw binding ceiling; read straight off the API server's
watch stream, as plain JSON, the same run reached 92% (docs/benchmarks.md). The other kinds
followed (issue 21): a gang's PodGroup comes back once for each status the scheduler writes, and
kopf's handling of those events was a sixth of the scheduler's CPU on 3,000 small gangs. kopf
keeps what only it does: noticing a kind installed after the start (its CRDs' watch), for the
kinds not served then (``main.build_registry``).

Belongs here: one kind's watch loop (``watch_kind``), the splitting of a watch stream into
events (``lines``) and the cutting of a section koordpy has read before out of an event (``skim``).
The WATCH call itself is ``client.watch_stream``; filing an object is the cache's.

A watch resumes from the last resourceVersion it saw (bookmarks included); when the API
server says that version is gone (410), or the connection fails, it lists again and
reconciles the cache with the list: at once after a 410, after a growing pause (up to
RETRY_MAX) after a failure, an ERROR event of another code included. A stream that ends before
any event is resumed after such a pause too. A kind that stops being served (its CRD deleted) is
looked for again after NOT_SERVED_FIRST seconds, then twice as long each time up to
NOT_SERVED_RETRY seconds, said once in the log; each look lists it at the version in use, then at
its others (``kinds.alternatives``), and the watch goes on at the one that answered.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import structlog
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import Kind, by_id
from koordpy.controller.cache import Cache
from koordpy.controller.client import first_served, not_served, watch_stream
from koordpy.controller.listing import list_into
from koordpy.controller.wire import loads

POD = by_id("pods")
log = structlog.get_logger("koordpy.podwatch")
WATCH_SECONDS = 300
RETRY_MAX = 10.0
NOT_SERVED_RETRY = 60.0
NOT_SERVED_FIRST = 1.0


class WatchError(Exception):
    """A watch stream's ERROR event other than 410 Gone (a conversion webhook down, an internal error)."""


async def lines(resp: Any) -> AsyncIterator[bytes]:
    """Newline-separated records of a chunked response, of any length (aiohttp's readline
    refuses lines over 64 KiB, and a pod with large annotations can be longer)."""
    buffer = b""
    async for chunk in resp.content.iter_any():
        if b"\n" not in chunk:
            buffer += chunk
            continue
        # One split per chunk: a chunk of many events is not copied once per event.
        records = (buffer + chunk).split(b"\n")
        buffer = records.pop()
        for line in records:
            if line.strip():
                yield line
    if buffer.strip():
        yield buffer


async def relist(api: ApiClient, cache: Cache, kind: Kind) -> tuple[Kind, str]:
    """A LIST into the cache at ``kind``'s version or, not served, at the first of its others served
    (``first_served``): the registry's entry that answered, and the list's resourceVersion."""
    found, (version, _) = await first_served(
        kind, lambda k: list_into(cache, k, api, k.group, k.version, k.plural))
    return found, str(version) if version else ""


def skim(line: bytes, section: str) -> tuple[int, int] | None:
    """Where a watch event's top-level ``section`` (the pod's ``spec``) sits in ``line``: the slice
    from the comma before its key through its closing brace, which cut out leaves the event valid
    JSON without it; None when it cannot be told for sure (then the whole line is read).

    The API server writes an object's fields in its type's order, the status last. The first
    ``,"spec":{`` is the object's own: no metadata field holds an object under that key, and strings
    escape their quotes. The last ``},"status":{`` is where the spec ends, since no field of a pod's
    status is named status (its conditions' status is a string). Bytes so cut are the whole spec,
    so equal bytes are an equal spec."""
    start = line.find(b',"' + section.encode() + b'":{')
    if start < 0:
        return None
    end = line.rfind(b'},"status":{')
    return (start, end + 1) if end > start else None


async def watch_kind(api: ApiClient, cache: Cache, kind: Kind, version: str,
                     using: dict[str, Kind] | None = None) -> None:
    """Runs forever; ``version`` is the resourceVersion of the list the cache was filled from
    ("": list first). ``using``: the version of each kind in use, shared with the resync (``Kind.id``
    -> the registry's entry); each LIST starts at it, and one that finds the kind served at another
    version only (its CRD upgraded) goes on watching that one and says so there."""
    delay = 0.5
    gone = False  # said once that the kind is not served any more
    away = NOT_SERVED_FIRST  # the next pause before looking for it again
    while True:
        try:
            if not version:
                found, version = await relist(api, cache, kind if using is None else using.get(kind.id, kind))
                if found is not kind:
                    log.info("kind served at another version, watching that one", kind=kind.label,
                             version=found.api_version)
                    kind = found
                if using is not None:
                    using[kind.id] = kind
            if gone:
                log.info("kind served again, watching it", kind=kind.label)
                gone = False
            resp = await watch_stream(api, kind.group, kind.version, kind.plural, version, WATCH_SECONDS)
            read = False
            try:
                async for line in lines(resp):
                    read = True
                    cut = skim(line, kind.skim) if kind.skim else None
                    try:
                        event = loads(line if cut is None else line[:cut[0]] + line[cut[1]:])
                    except ValueError:
                        if cut is None:
                            raise
                        cut, event = None, loads(line)
                    type_ = event.get("type")
                    obj = event.get("object") or {}
                    if type_ == "ERROR":
                        if obj.get("code") != 410:
                            # Any other error is a failure, backed off (as kopf did): listing again
                            # at once looped as fast as the API server answered.
                            raise WatchError(f"ERROR event {obj.get('code')}: {obj.get('message', '')}")
                        # 410: our version is too old to resume from; listing again is the answer.
                        log.info("watch expired, listing again", kind=kind.label, status=obj.get("code"))
                        version = ""
                        break
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if type_ == "BOOKMARK":
                        continue
                    if cut is None:
                        cache.observe(kind, type_, obj)
                        continue
                    section = line[cut[0]:cut[1]]
                    sign = hash(section)
                    if "metadata" in obj and cache.observe_skimmed(kind, type_, obj, sign):
                        continue
                    # Read whole after all: only the section is left to decode, unless what was cut is
                    # not the section alone (an object written in another order), then the line.
                    part = loads(b"{" + section[1:] + b"}")
                    if "metadata" in obj and list(part) == [kind.skim]:
                        obj[kind.skim] = part[kind.skim]
                        cache.observe(kind, type_, obj, sign)
                    else:
                        cache.observe(kind, type_, loads(line).get("object") or {})
            finally:
                resp.release()
            if read:
                delay = 0.5
            else:
                # Ended before a single event or bookmark (the API server sends bookmarks during a
                # normal stream): a proxy or balancer that closes it at once. Resumed from the same
                # version, after a pause that grows, rather than asked for again in a tight loop
                # (kopf paused between reconnects too).
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            version = ""
            if isinstance(exc, ApiException) and not_served(exc, kind.group, kind.plural):
                if not gone:
                    log.warning("kind no longer served or readable; looking for it again, every "
                                f"{NOT_SERVED_RETRY:g}s at the most", kind=kind.label, status=exc.status)
                    gone = True
                    away = NOT_SERVED_FIRST
                # Soon at first: a CRD deleted is often installed again at once (an upgrade that
                # replaces it), and kopf, which watched these kinds before, took it up within a
                # second. Then less and less often: a kind gone for good costs a LIST a minute.
                await asyncio.sleep(min(away, NOT_SERVED_RETRY))
                away = min(away * 2, NOT_SERVED_RETRY)
                continue
            log.warning("watch failed, listing again", kind=kind.label, error=str(exc), retry_in=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_MAX)


async def watch_pods(api: ApiClient, cache: Cache, version: str) -> None:
    """The pod watch (``watch_kind`` of pods)."""
    await watch_kind(api, cache, POD, version)
