"""The pod watch's record splitting, which must take records longer than aiohttp's line limit."""

from __future__ import annotations

from collections.abc import AsyncIterator

from koordpy.controller.podwatch import lines


class _Content:
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def iter_any(self) -> AsyncIterator[bytes]:
        for c in self.chunks:
            yield c


class _Resp:
    def __init__(self, chunks: list[bytes]) -> None:
        self.content = _Content(chunks)


async def test_records_split_across_chunks_and_longer_than_64k() -> None:
    big = b'{"a": "' + b"x" * 200_000 + b'"}'
    chunks = [b'{"n": 1}\n{"n"', b": 2}\n", big[:70_000], big[70_000:] + b"\n\n", b'{"n": 3}']
    got = [line async for line in lines(_Resp(chunks))]
    assert got == [b'{"n": 1}', b'{"n": 2}', big, b'{"n": 3}']
