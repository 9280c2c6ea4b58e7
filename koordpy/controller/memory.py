"""What the scheduler does about the C allocator's memory (issue 21, goal 2): glibc's malloc arenas
and the free pages it keeps. Linux with glibc only; elsewhere every call here is a no-op.

Measured (docs/benchmarks.md, "Goal 2: memory", live against offline): in the live scheduler the
gap between its RSS and what the cache and the core hold is in glibc's heaps (the main heap and a
worker thread's arena), not in Python objects. Two remedies, neither changing what is scheduled:

- one malloc arena (``limit_arenas``): glibc gives each thread that allocates an arena of its own,
  and the core's cycle runs in a worker thread (``asyncio.to_thread``), so what the cycle frees stays
  in an arena the event loop's thread never allocates from. Under the GIL two threads seldom
  allocate at once, so a shared arena costs no measurable time (bench_memory --live-like);
- ``trim_memory`` (``malloc_trim``) when the loop goes idle after cycles and after each resync: what
  a burst of pods freed is handed back to the system instead of staying counted in the RSS.

Belongs here: the calls into the C library and reading the process's RSS for the log.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any

M_ARENA_MAX = -8  # glibc's mallopt parameter number


@functools.cache
def _glibc() -> Any:
    """The C library when it is glibc (it has ``malloc_trim`` and ``mallopt``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    except (OSError, AttributeError):  # musl, macOS: no such calls
        return None
    return libc


def limit_arenas(arenas: int = 1) -> bool:
    """At most ``arenas`` malloc arenas from now on (threads that have one keep it: call it before
    any thread starts). True when glibc took it."""
    libc = _glibc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1


def trim_memory() -> bool:
    """Hands the free pages of every malloc arena back to the system; True when some were."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) == 1


def rss() -> int | None:
    """The process's resident set in bytes (``/proc/self/status``), or None where there is none or
    it cannot be read: the loop calls this outside its cycle's guard, so it must never raise."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
