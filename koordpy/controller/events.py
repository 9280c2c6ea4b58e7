"""Events written as client-go's recorder writes them: a repeat is counted on the Event already
written, similar ones are combined into one, and a flood about one object is cut off.

What belongs here: the bookkeeping that decides what one reported Event becomes (a new object,
a patch of the object written before, or nothing), and the ordering of the writes of one kind of
Event. What an Event looks like on the wire and how it is sent belong to the writer
(``ApiWriter``), which is this module's ``EventSink``.

The rules are those of client-go's event correlator, so that ``kubectl describe`` and event
exporters read koordpy's Events as they read kube-scheduler's:

- The same event (the involved object, its UID included, type, reason, message and source) seen
  again while it is remembered (the MAX_ENTRIES most recent) patches the Event written before:
  ``count`` goes up and ``lastTimestamp`` moves. When that Event no longer exists (the API server
  drops Events an hour after their last write, or someone deleted it) the patch gets 404 and a new
  Event is created, carrying the count on.
- Similar events (the same object, type and reason, another message): the first
  SIMILAR_LIMIT - 1 distinct messages get an Event each; further messages go to one Event whose
  message is the latest prefixed with COMBINED_PREFIX, counted like any other. The messages are
  forgotten once SIMILAR_WINDOW seconds pass without a similar event. (client-go drops an arbitrary
  remembered message to make room; here the newcomer is the one left out, so that a message
  keeps the one Event it has for as long as the group is remembered.)
- Per object, SPAM_BURST events go out at once and then one every SPAM_REFILL seconds; the rest
  are dropped (the writer counts them as skipped writes). As in client-go, a dropped occurrence
  still counts: the next Event written for it carries it in ``count``.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

MAX_ENTRIES = 4096  # remembered events, groups of similar events, and objects' spam buckets (each)
SIMILAR_LIMIT = 10
SIMILAR_WINDOW = 600.0
COMBINED_PREFIX = "(combined from similar events): "
SPAM_BURST = 25
SPAM_REFILL = 300.0  # seconds per token

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A mapping that forgets its least recently used entry beyond ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key: K, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True)
class Involved:
    """The Event's ``involvedObject``."""

    kind: str
    name: str
    namespace: str  # "" for a cluster-scoped object
    uid: str
    api_version: str


@dataclass(frozen=True)
class Report:
    """One event as the scheduler reports it, before correlation."""

    namespace: str  # where the Event object lives
    involved: Involved
    type: str
    reason: str
    message: str
    component: str

    @property
    def object_key(self) -> tuple[str, ...]:
        """Whose spam bucket it draws on: the source and the object."""
        i = self.involved
        return (self.component, i.kind, i.namespace, i.name, i.uid, i.api_version)

    @property
    def similar_key(self) -> tuple[str, ...]:
        """The group of similar events it belongs to: all but the message."""
        return (*self.object_key, self.type, self.reason)

    @property
    def key(self) -> tuple[str, ...]:
        """The same event: everything."""
        return (*self.similar_key, self.message)


@dataclass(frozen=True)
class Outgoing:
    """What to write for one report: a patch of the Event ``name``, or a new Event when it has none."""

    key: tuple[str, ...]  # what it is remembered by: the report's key, or its similar key if combined
    message: str
    count: int
    first: float  # epoch seconds
    last: float
    name: str | None
    combined: bool = False


@dataclass
class _Written:
    count: int
    first: float
    name: str | None  # None until a create succeeded (or after the Event turned out gone)


@dataclass
class _Similar:
    last: float
    messages: set[str] = field(default_factory=set)  # those with an Event of their own


@dataclass
class _Bucket:
    tokens: float
    at: float


class EventCorrelator:
    """The decisions, with the time passed in: no I/O, no clock, no locking (the recorder
    serializes the reports of one similar key around them)."""

    def __init__(self, size: int = MAX_ENTRIES, similar_limit: int = SIMILAR_LIMIT,
                 similar_window: float = SIMILAR_WINDOW, spam_burst: int = SPAM_BURST,
                 spam_refill: float = SPAM_REFILL) -> None:
        self.similar_limit = similar_limit
        self.similar_window = similar_window
        self.spam_burst = spam_burst
        self.spam_refill = spam_refill
        self._written: _Lru[tuple[str, ...], _Written] = _Lru(size)
        self._similar: _Lru[tuple[str, ...], _Similar] = _Lru(size)
        self._buckets: _Lru[tuple[str, ...], _Bucket] = _Lru(size)

    def correlate(self, report: Report, now: float) -> Outgoing | None:
        """What to write for ``report`` seen at ``now``; None when the object's spam bucket is empty."""
        key, message, combined = self._aggregate(report, now)
        seen = self._written.get(key)
        if seen is None:
            out = Outgoing(key, message, 1, now, now, None, combined)
        else:
            out = Outgoing(key, message, seen.count + 1, seen.first, now, seen.name, combined)
        # Counted before the spam filter, as client-go does: what is dropped still happened.
        self._written.put(key, _Written(out.count, out.first, out.name))
        if not self._take_token(report.object_key, now):
            return None
        return out

    def written(self, out: Outgoing, name: str | None) -> None:
        """``out`` was written as the Event ``name``; None: the Event it named is gone."""
        seen = self._written.get(out.key)
        if seen is None:  # forgotten meanwhile: remembered again, as the API server has it
            self._written.put(out.key, _Written(out.count, out.first, name))
        else:
            seen.name = name

    def _aggregate(self, report: Report, now: float) -> tuple[tuple[str, ...], str, bool]:
        similar_key = report.similar_key
        group = self._similar.get(similar_key)
        if group is None or now - group.last > self.similar_window:
            group = _Similar(now)
        group.last = now
        self._similar.put(similar_key, group)
        if report.message in group.messages or len(group.messages) < self.similar_limit - 1:
            group.messages.add(report.message)
            return report.key, report.message, False
        return similar_key, COMBINED_PREFIX + report.message, True

    def _take_token(self, object_key: tuple[str, ...], now: float) -> bool:
        bucket = self._buckets.get(object_key)
        if bucket is None:
            bucket = _Bucket(float(self.spam_burst), now)
        else:
            # max(): a wall clock stepped back refills nothing rather than draining the bucket.
            bucket.tokens = min(float(self.spam_burst),
                                bucket.tokens + max(0.0, now - bucket.at) / self.spam_refill)
            bucket.at = now
        self._buckets.put(object_key, bucket)
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True


class Patched(enum.Enum):
    OK = "ok"
    GONE = "gone"  # 404: the Event expired or was deleted
    FAILED = "failed"


class Outcome(enum.Enum):
    CREATED = "created"
    PATCHED = "patched"
    SKIPPED = "skipped"  # dropped by the spam filter
    FAILED = "failed"


class EventSink(Protocol):
    """The API calls, which the writer makes (retried, fenced and counted)."""

    async def create_event(self, report: Report, out: Outgoing) -> str | None:
        """Creates the Event; its name as the API server gave it, or None when not written."""

    async def patch_event(self, report: Report, out: Outgoing, name: str) -> Patched:
        """Raises the Event ``name``'s count and lastTimestamp (and sets its message) to ``out``'s."""


@dataclass
class _Holders:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


class EventRecorder:
    """Correlates each report and writes the outcome through an ``EventSink``. The reports of one
    similar key are handled one at a time, correlation and write together: two identical events
    at once must make one Event counted twice, not two Events (the second has to know the name
    the first one's create got)."""

    def __init__(self, correlator: EventCorrelator | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.correlator = correlator or EventCorrelator()
        self.clock = clock
        self._locks: dict[tuple[str, ...], _Holders] = {}

    async def record(self, report: Report, sink: EventSink) -> Outcome:
        async with self._hold(report.similar_key):
            out = self.correlator.correlate(report, self.clock())
            if out is None:
                return Outcome.SKIPPED
            if out.name is not None:
                patched = await sink.patch_event(report, out, out.name)
                if patched is Patched.OK:
                    return Outcome.PATCHED
                if patched is Patched.FAILED:
                    return Outcome.FAILED
                # Gone: forgotten first, so that a failed create is not followed by another 404.
                self.correlator.written(out, None)
            name = await sink.create_event(report, out)
            if name is None:
                return Outcome.FAILED
            self.correlator.written(out, name)
            return Outcome.CREATED

    @contextlib.asynccontextmanager
    async def _hold(self, key: tuple[str, ...]) -> AsyncIterator[None]:
        # One lock per key while someone holds or waits for it, dropped after: keys are unbounded.
        holders = self._locks.get(key)
        if holders is None:
            holders = self._locks[key] = _Holders()
        holders.users += 1
        try:
            async with holders.lock:
                yield
        finally:
            holders.users -= 1
            if not holders.users:
                del self._locks[key]
