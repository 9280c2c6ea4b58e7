"""Review of issue 21's allocator calls (``controller.memory``): the C library is told apart by what
it has, not by its name. A C library without ``malloc_trim`` (musl, macOS's libSystem) or none found
at all (no ``libc.so.6``) makes every call a no-op instead of crashing ``koordpy run`` at start."""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from koordpy.controller import memory


@pytest.fixture(autouse=True)
def _fresh() -> Iterator[None]:
    memory._glibc.cache_clear()  # the C library is looked for once per process
    yield
    memory._glibc.cache_clear()


class _NoTrim:
    """A C library as ctypes shows musl's or macOS's: symbols it lacks raise AttributeError."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"dlsym: symbol not found: {name}")


@pytest.mark.parametrize("found", ["libc.musl-x86_64.so.1", "/usr/lib/libc.dylib"])
def test_a_c_library_without_malloc_trim_makes_the_calls_no_ops(monkeypatch: pytest.MonkeyPatch, found: str) -> None:
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: found)
    monkeypatch.setattr(ctypes, "CDLL", lambda name: _NoTrim())
    assert memory.limit_arenas() is False
    assert memory.trim_memory() is False


def test_no_c_library_found_makes_the_calls_no_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def missing(name: str) -> Any:
        asked.append(name)
        raise OSError(f"{name}: cannot open shared object file")

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    monkeypatch.setattr(ctypes, "CDLL", missing)
    assert memory.limit_arenas() is False
    assert memory.trim_memory() is False
    assert asked == ["libc.so.6"]  # looked for once, by glibc's name when nothing else was found


def test_an_unreadable_rss_line_is_none_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop's idle trim reads the RSS outside the cycle's guard: a malformed VmRSS line must not
    end the loop."""
    import builtins

    real_open = builtins.open
    for text in ("VmRSS:\n", "VmRSS: lots kB\n"):
        status = tmp_path / "status"
        status.write_text(text)

        def fake_open(f: Any, *a: Any, _status: Path = status, **k: Any) -> Any:
            return real_open(_status if f == "/proc/self/status" else f, *a, **k)

        monkeypatch.setattr(builtins, "open", fake_open)
        assert memory.rss() is None
        monkeypatch.setattr(builtins, "open", real_open)
