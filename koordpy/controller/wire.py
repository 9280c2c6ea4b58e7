"""HTTP/1.1 to the API server for the hot writes, on keep-alive connections of its own.

Belongs here: a pool of connections to one API server (TLS as the client's own session sets it up),
one request and its whole response at a time on each, the response read as the API server sends
it (Content-Length, chunked, or to the end of the connection), and the one error a lost or broken
connection ends in (``WireError``, an OSError: the writes' retries know it), and how the shell reads
the API server's JSON (``loads``: its responses, list pages and watch lines). Not here: which writes
go this way and what they say (``koordpy.controller.transport``), retries, fencing and metrics
(``transport.call``).

Why: a bind, an Event or a status patch cost the scheduler ~185 us of CPU through aiohttp's client
(its request and response objects, payloads, timers, the connector) against ~100 us here, for the
same bytes on the wire; two such writes a bound pod make this most of the scheduler's CPU while it
binds (docs/benchmarks.md, issue 21).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

# pydantic's JSON parser (a dependency already): json.loads' result in ~60% of its time.
from pydantic_core import from_json

# What a response's head may hold, and a chunk's size line: an API server's are far smaller.
MAX_HEAD = 1 << 16
READ_LIMIT = 2**21  # the stream's buffer, as the client's session reads watch lines
TIMEOUT = 60.0  # seconds a connection or a response may take before the write counts as failed
# A connection idle this long is never taken again (and is closed when the next one is put back):
# the API server closes its own after 90 s, so one still open past that is one whose end never
# reached us (a server gone without a FIN, a load balancer or firewall that dropped the flow), and a
# write sent on it would wait out TIMEOUT. (aiohttp's connector reused none idle over 15 s.)
IDLE_SECONDS = 60.0


class WireError(ConnectionError):
    """The connection was lost, refused or sent something that is not an HTTP/1.1 response."""


def loads(data: bytes) -> Any:
    """JSON as ``json.loads`` reads it, in ~60% of its time on a watch event: pydantic's parser, then
    ``json.loads`` for what that one refuses though it is valid JSON (nesting past 200 levels, a
    lone surrogate escape: an API server passes both on in a claim's opaque parameters, kept as the
    client wrote them), whose error is the one raised for malformed input, as before."""
    try:
        return from_json(data)
    except ValueError:
        return json.loads(data)


@dataclass(frozen=True, slots=True)
class Response:
    """A whole response: its status, reason and body as sent."""

    status: int
    reason: str
    body: bytes

    def json(self) -> Any:
        return loads(self.body) if self.body else None


class _Conn:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.idle_since = 0.0

    def usable(self) -> bool:
        """Whether it may carry another request: the server has not closed it while it was idle."""
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class Wire:
    """Keep-alive connections to the API server at ``host`` (``scheme://host[:port][/prefix]``), at most
    ``limit`` at once; a request waits for one when all are busy."""

    def __init__(self, host: str, ssl_context: ssl.SSLContext | None, server_hostname: str | None = None,
                 limit: int = 64, timeout: float = TIMEOUT) -> None:
        url = urlsplit(host)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"not an API server address: {host!r}")
        default = 443 if url.scheme == "https" else 80
        self._host, self._port = url.hostname, url.port or default
        # The Host header as aiohttp sends it: the port only when it is not the scheme's own.
        self._authority = url.netloc.rpartition("@")[2] if url.port not in (None, default) else (
            f"[{url.hostname}]" if ":" in url.hostname else url.hostname)
        self._prefix = url.path.rstrip("/")
        self._ssl = ssl_context if url.scheme == "https" else None
        if url.scheme == "https" and self._ssl is None:
            self._ssl = ssl.create_default_context()
        self._server_hostname = server_hostname if self._ssl is not None else None
        self._idle: list[_Conn] = []
        self._slots = asyncio.Semaphore(limit)
        self._timeout = timeout
        self._closed = False

    async def request(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> Response:
        """Sends one request (``path`` quoted already) and reads its whole response. A connection the
        server closed while it was idle, or idle IDLE_SECONDS, is never used; one it closes as the
        request goes out is replaced once, at once, before anything of the response was read."""
        head = self._head(method, path, headers, body)
        async with self._slots:
            for attempt in range(2):
                stale = time.monotonic() - IDLE_SECONDS
                conn, reused = (self._idle.pop(), True) if self._idle else (None, False)
                while conn is not None and (not conn.usable() or conn.idle_since < stale):
                    conn.close()
                    conn, reused = (self._idle.pop(), True) if self._idle else (None, False)
                try:
                    if conn is None:
                        conn = await self._open()
                    async with asyncio.timeout(self._timeout):
                        conn.writer.write(head if body is None else head + body)
                        response, keep = await _read_response(conn.reader, method)
                except _Unanswered as exc:
                    if conn is not None:
                        conn.close()
                    if reused and attempt == 0:
                        continue  # it went away idle: the request was never read
                    raise WireError(f"{method} {path}: the API server closed the connection") from exc
                except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                        TimeoutError) as exc:
                    if conn is not None:
                        conn.close()
                    if isinstance(exc, TimeoutError):
                        raise
                    raise WireError(f"{method} {path}: {type(exc).__name__}: {exc}") from exc
                except BaseException:  # cancelled mid-request: the connection's state is unknown
                    if conn is not None:
                        conn.close()
                    raise
                if keep and not self._closed:
                    self._release(conn)
                else:
                    conn.close()
                return response
        raise AssertionError("unreachable")

    def _release(self, conn: _Conn) -> None:
        """Keeps ``conn`` for the next request (the most recent first), and closes the one idle longest
        if it has been idle IDLE_SECONDS: a burst's connections do not stay open for ever after it."""
        now = time.monotonic()
        conn.idle_since = now
        idle = self._idle
        idle.append(conn)
        if len(idle) > 1 and now - idle[0].idle_since > IDLE_SECONDS:
            idle.pop(0).close()

    def _head(self, method: str, path: str, headers: dict[str, str], body: bytes | None) -> bytes:
        lines = [f"{method} {self._prefix}{path} HTTP/1.1", f"Host: {self._authority}"]
        for name, value in headers.items():
            text = str(value)
            if "\r" in text or "\n" in text or "\r" in name or "\n" in name:
                raise ValueError(f"header {name!r}: a line break in a header would split the request")
            lines.append(f"{name}: {text}")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {0 if body is None else len(body)}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode()

    async def _open(self) -> _Conn:
        async with asyncio.timeout(self._timeout):
            reader, writer = await asyncio.open_connection(
                self._host, self._port, ssl=self._ssl, server_hostname=self._server_hostname, limit=READ_LIMIT)
        return _Conn(reader, writer)

    async def close(self) -> None:
        """Drops the idle connections at once (no TLS goodbye: a server that no longer answers would
        hold a stop for the SSL shutdown's 30 s); those busy close when their request ends."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.writer.transport.abort()


class _Unanswered(Exception):
    """The connection ended before the first byte of a response."""


async def _read_head(reader: asyncio.StreamReader, status_line: bytes,
                     size: int) -> tuple[int, str, int | None, bool, bool, int]:
    """The head of one response after its status line: status, reason, Content-Length, chunked,
    keep-alive, and the head's bytes read so far (``size`` before it: interim heads count too)."""
    size += len(status_line)
    version, _, rest = status_line.decode("latin-1").rstrip("\r\n").partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.startswith("HTTP/1.") or len(code) != 3 or not code.isdigit():
        raise ValueError(f"not an HTTP/1.1 status line: {status_line[:80]!r}")
    length: int | None = None
    chunked = False
    keep = version == "HTTP/1.1"
    while True:
        line = await reader.readuntil(b"\r\n")
        size += len(line)
        if size > MAX_HEAD:
            raise ValueError("the response's head is too long")
        if line == b"\r\n":
            return int(code), reason, length, chunked, keep, size
        name, _, value = line.decode("latin-1").partition(":")
        name, value = name.strip().lower(), value.strip()
        if name == "content-length":
            length = int(value)
            if length < 0:
                raise ValueError(f"Content-Length {value!r}")
        elif name == "transfer-encoding":
            chunked = value.lower().split(",")[-1].strip() == "chunked"
        elif name == "connection":
            tokens = {t.strip() for t in value.lower().split(",")}
            keep = "keep-alive" in tokens if version == "HTTP/1.0" else "close" not in tokens


async def _read_response(reader: asyncio.StreamReader, method: str) -> tuple[Response, bool]:
    """One response: status, reason and body; and whether the connection may carry another request."""
    try:
        status_line = await reader.readuntil(b"\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise _Unanswered() from exc
        raise
    status, reason, length, chunked, keep, size = await _read_head(reader, status_line, 0)
    while 100 <= status < 200:
        if status == 101:
            raise ValueError("switching protocols (101) on a request that asked for no upgrade")
        # An interim response (100 Continue, 103 Early Hints): the final one follows. A client must
        # parse those it did not ask for (RFC 9110, 15.2); taken for a broken connection, a request
        # the server carried out would be failed and sent again.
        status, reason, length, chunked, keep, size = await _read_head(
            reader, await reader.readuntil(b"\r\n"), size)
    if method == "HEAD" or status in (204, 304):
        body = b""
    elif chunked:
        parts = []
        while True:
            size_line = await reader.readuntil(b"\r\n")
            chunk = int(size_line.split(b";", 1)[0].strip(), 16)
            if chunk == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, if any
                    pass
                break
            parts.append(await reader.readexactly(chunk))
            if await reader.readexactly(2) != b"\r\n":
                raise ValueError("a chunk not followed by CRLF")
        body = b"".join(parts)
    elif length is not None:
        body = await reader.readexactly(length)
    else:  # neither: the body ends with the connection
        body = await reader.read()
        keep = False
    return Response(status, reason, body), keep
