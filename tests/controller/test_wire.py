"""The hot writes' own HTTP/1.1 connections (``koordpy.controller.wire``), against a server scripted
byte by byte: each way an API server may frame a response, keep-alive and its end, a connection that
goes away idle or mid-response, and a request whose header would break the request apart."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from koordpy.controller.transport import with_retries
from koordpy.controller.wire import Wire, WireError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def read_request(reader: asyncio.StreamReader) -> tuple[str, dict[str, str], bytes]:
    head = (await reader.readuntil(b"\r\n\r\n")).decode()
    lines = head.split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return lines[0], headers, body


@asynccontextmanager
async def server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server on a free port; each connection is handed to ``handler`` with its number. Yields its
    address and the connections it accepted."""
    accepted: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(len(accepted))
        try:
            await handler(reader, writer, accepted[-1])
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", accepted
    finally:
        srv.close()


def answer(status: str, body: bytes, *headers: str) -> bytes:
    return (f"HTTP/1.1 {status}\r\n" + "".join(f"{h}\r\n" for h in headers) + "\r\n").encode() + body


async def test_responses_framed_each_way_are_read_whole_and_connections_kept() -> None:
    body = json.dumps({"metadata": {"name": "e1"}, "pad": "x" * 5000}).encode()
    chunks = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:7], body[7:4000], body[4000:]))
    framings = [answer("201 Created", body, f"Content-Length: {len(body)}"),
                answer("201 Created", chunks + b"0\r\n\r\n", "Transfer-Encoding: chunked"),
                answer("201 Created", chunks + b"0\r\nX-Trailer: 1\r\n\r\n", "Transfer-Encoding: chunked"),
                answer("204 No Content", b""),
                answer("200 OK", body, f"content-length: {len(body)}", "Connection: keep-alive")]
    seen: list[tuple[str, dict[str, str], bytes]] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        for framed in framings:
            seen.append(await read_request(reader))
            writer.write(framed)
            await writer.drain()

    async with server(handler) as (host, accepted):
        wire = Wire(host + "/prefix/", None, limit=4)
        got = [await wire.request("POST", f"/api/v1/x{i}", {"Content-Type": "application/json", "Accept": "a"},
                                  b'{"a": 1}') for i in range(len(framings))]
        await wire.close()
    assert [r.status for r in got] == [201, 201, 201, 204, 200]
    assert [r.json() for r in got[:3]] == [json.loads(body)] * 3 and got[3].body == b"" and got[4].body == body
    assert accepted == [0]  # one connection for all five
    line, headers, sent = seen[0]
    assert line == "POST /prefix/api/v1/x0 HTTP/1.1" and sent == b'{"a": 1}'
    assert headers["host"] == host.removeprefix("http://") and headers["content-length"] == "8"
    assert headers["content-type"] == "application/json" and headers["accept"] == "a"


async def test_a_response_that_closes_or_says_close_is_not_kept() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        if n == 0:
            writer.write(answer("200 OK", b"{}", "Content-Length: 2", "Connection: close"))
        elif n == 1:
            writer.write(answer("200 OK", b'{"till": "the end"}'))  # no length: the body ends with the connection
        else:
            writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()

    async with server(handler) as (host, accepted):
        wire = Wire(host, None)
        got = [await wire.request("GET", "/", {}, None) for _ in range(3)]
        await wire.close()
    assert [r.json() for r in got] == [{}, {"till": "the end"}, {}]
    assert accepted == [0, 1, 2]


async def test_a_connection_the_server_closed_while_idle_is_replaced_at_once() -> None:
    async def two_then_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        for _ in range(2):  # then closes, as an idle timeout would: unseen by the wire until it looks
            await read_request(reader)
            writer.write(answer("200 OK", b"{}", "Content-Length: 2"))
            await writer.drain()

    async with server(two_then_close) as (host, accepted):
        wire = Wire(host, None)
        for _ in range(3):
            assert (await wire.request("GET", "/", {}, None)).status == 200
            await asyncio.sleep(0.05)
        await wire.close()
    assert accepted == [0, 1]  # the first connection served two, and the third went on a new one

    closed_after_one: list[int] = []

    async def one_only(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer("200 OK", b"{}", "Content-Length: 2"))
        await writer.drain()
        closed_after_one.append(n)

    async with server(one_only) as (host, accepted):
        wire = Wire(host, None)
        for _ in range(3):
            assert (await wire.request("POST", "/", {}, b"{}")).status == 200
            await asyncio.sleep(0.05)  # the close arrives while the connection is idle
        await wire.close()
    assert accepted == [0, 1, 2]


async def test_a_reused_connection_closed_as_the_request_goes_out_is_replaced_once() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer("200 OK", b"{}", "Content-Length: 2"))
        await writer.drain()
        if n == 0:
            await reader.readuntil(b"\r\n\r\n")  # reads the next request and answers nothing
            writer.transport.abort()
            return
        await read_request(reader)

    async with server(handler) as (host, accepted):
        wire = Wire(host, None)
        assert (await wire.request("GET", "/", {}, None)).status == 200
        assert (await wire.request("GET", "/", {}, None)).status == 200
        await wire.close()
    assert accepted == [0, 1]


async def test_a_response_cut_short_or_garbled_is_a_wire_error_that_writes_retry() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        if n == 0:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{}")  # 2 bytes of 10, then gone
        elif n == 1:
            writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
        elif n == 2:
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
        else:
            writer.write(answer("201 Created", b"{}", "Content-Length: 2"))
        await writer.drain()
        writer.transport.abort() if n < 3 else None

    async with server(handler) as (host, accepted):
        wire = Wire(host, None)
        for _ in range(3):
            with pytest.raises(WireError):
                await wire.request("POST", "/", {}, b"{}")
        assert (await wire.request("POST", "/", {}, b"{}")).status == 201
        await wire.close()
    assert accepted == [0, 1, 2, 3]
    assert issubclass(WireError, OSError)  # ``with_retries`` retries it as it does a lost connection


async def test_writes_retry_a_refused_connection_until_the_server_answers() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer("201 Created", b"{}", "Content-Length: 2"))
        await writer.drain()

    async with server(handler) as (host, _):
        pass  # the port is free again: connections are refused
    wire = Wire(host, None)
    with pytest.raises(WireError):
        await wire.request("POST", "/", {}, b"{}")
    attempts: list[int] = []

    async def attempt() -> int:
        attempts.append(1)
        return (await wire.request("POST", "/", {}, b"{}")).status

    with pytest.raises(OSError):
        await with_retries("write", attempt, attempts=2)
    assert len(attempts) == 2


async def test_a_response_that_never_comes_times_out() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async with server(handler) as (host, _):
        wire = Wire(host, None, timeout=0.2)
        with pytest.raises(TimeoutError):
            await wire.request("GET", "/", {}, None)
        await wire.close()


async def test_a_header_that_would_split_the_request_is_refused() -> None:
    wire = Wire("http://127.0.0.1:1", None)
    for name, value in [("X", "a\r\nInjected: 1"), ("X\nY", "a"), ("Authorization", "Bearer t\n")]:
        with pytest.raises(ValueError, match="line break"):
            await wire.request("GET", "/", {name: value}, None)


def test_addresses() -> None:
    with pytest.raises(ValueError):
        Wire("ftp://host", None)
    assert Wire("https://h.example", None)._authority == "h.example"
    assert Wire("https://h.example:443/", None)._authority == "h.example"
    assert Wire("https://h.example:6443/x", None)._authority == "h.example:6443"
    assert Wire("https://[::1]:6443", None)._authority == "[::1]:6443"
    assert Wire("https://[::1]", None)._authority == "[::1]"


async def test_every_idle_connection_the_server_closed_is_passed_over() -> None:
    async def one_only(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        await asyncio.sleep(0.05)  # both requests are in flight at once: two connections
        writer.write(answer("200 OK", b"{}", "Content-Length: 2"))
        await writer.drain()

    async with server(one_only) as (host, accepted):
        wire = Wire(host, None)
        got = await asyncio.gather(*(wire.request("GET", "/", {}, None) for _ in range(2)))
        assert [r.status for r in got] == [200, 200] and len(wire._idle) == 2
        await asyncio.sleep(0.1)  # both closed by the server while idle
        assert (await wire.request("GET", "/", {}, None)).status == 200  # more than the one retry would cover
        await wire.close()
    assert accepted == [0, 1, 2]


async def test_a_connection_idle_for_long_is_closed_when_another_is_put_back() -> None:
    import koordpy.controller.wire as wire_module

    async def serve_all(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while True:
            await read_request(reader)
            writer.write(answer("200 OK", b"{}", "Content-Length: 2"))
            await writer.drain()

    async with server(serve_all) as (host, accepted):
        wire = Wire(host, None)
        await asyncio.gather(*(wire.request("GET", "/", {}, None) for _ in range(3)))  # three connections
        assert len(wire._idle) == 3
        wire._idle[0].idle_since -= wire_module.IDLE_SECONDS + 1  # the one idle longest
        await wire.request("GET", "/", {}, None)  # takes the newest, puts it back: the oldest goes
        assert len(wire._idle) == 2
        await wire.close()
    assert len(accepted) == 3


async def test_a_connection_idle_for_long_is_not_taken_for_a_request() -> None:
    # Idle longer than the API server keeps a connection open (90 s), a connection it did not close is
    # one whose end never reached us: a server gone without a FIN, or a load balancer or firewall that
    # dropped the flow. A write sent on it waits out the whole timeout (or is reset) and its retry may
    # take the next such one; after a quiet spell all of them are. aiohttp never reused a connection
    # idle over 15 s; here none idle over IDLE_SECONDS is taken.
    import koordpy.controller.wire as wire_module

    async def answers_once_per_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        writer.write(answer("200 OK", b"{}", "Content-Length: 2"))
        await writer.drain()
        await read_request(reader)  # then silence: the peer is gone, and nothing says so
        await asyncio.sleep(5)

    async with server(answers_once_per_connection) as (host, accepted):
        wire = Wire(host, None, timeout=0.5)
        assert (await wire.request("POST", "/", {}, b"{}")).status == 200
        for conn in wire._idle:  # a quiet spell
            conn.idle_since -= wire_module.IDLE_SECONDS + 1
        assert (await wire.request("POST", "/", {}, b"{}")).status == 200
        await wire.close()
    assert accepted == [0, 1]


async def test_interim_responses_before_the_final_one_are_passed_over() -> None:
    # A client must parse 1xx responses it did not ask for (RFC 9110, 15.2): a proxy in front of the
    # API server may send them. Taken for a broken connection, a POST the server carried out (a bind,
    # an Event) would be failed and sent again.
    requests: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        for _ in range(2):
            requests.append((await read_request(reader))[0])
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"
                         + answer("201 Created", b"{}", "Content-Length: 2"))
            await writer.drain()

    async with server(handler) as (host, accepted):
        wire = Wire(host, None)
        got = [await wire.request("POST", "/api/v1/namespaces/d/pods/p/binding", {}, b"{}") for _ in range(2)]
        await wire.close()
    assert [(r.status, r.json()) for r in got] == [(201, {})] * 2
    assert len(requests) == 2 and accepted == [0]  # each sent once, on the one connection


def test_a_body_is_read_as_json_loads_reads_it() -> None:
    # pydantic's parser refuses a lone surrogate escape and nesting past 200 levels; both are valid
    # JSON, read as json.loads reads them. Malformed bodies still raise json.loads' error.
    from koordpy.controller.wire import Response

    for body in (b'{"s": "\\ud800"}', b'{"x": ' + b"[" * 300 + b"]" * 300 + b"}", b'{"n": 123456789012345678901234}'):
        assert Response(200, "OK", body).json() == json.loads(body)
    for bad in (b"Internal Server Error", b"{", b"\xff"):
        with pytest.raises(ValueError):
            Response(200, "OK", bad).json()
