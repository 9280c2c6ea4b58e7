"""The writer's pacing policy: which reports are due, and when. Pure: no I/O, no clock of its own.

Belongs here: coalescing a pod's Unschedulable condition (written once it has settled, then at
most once per cooldown, never twice while the same write is in flight) and a PodGroup's status
(the latest kept, written at most once per STATUS_INTERVAL within a phase, at once on a phase
change, never while a write of the same object is in flight, not at all when the object says it
already). Every method that needs the time takes
``now`` (seconds on any monotonic clock), so the policy is tested with a fake clock
(tests/controller/test_reports.py). Not here: the writes themselves, retries, the leader fence
and metrics (``transport``, ``writer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

STATUS_INTERVAL = 1.0  # seconds between two status writes of one PodGroup in the same phase
# A PodGroup's status write in flight this long is taken as lost, and the next one goes: a write has
# no timeout of its own through a proxy, and one that never ends must not hold the status for ever.
# (A write on the direct connection gives up well before: 60 s an attempt.)
STATUS_WRITE_LIMIT = 120.0


@dataclass
class Pending:
    message: str
    first_seen: float
    reason: str = "Unschedulable"  # the condition's reason, which goes with its message


@dataclass
class Due:
    """What a look at the reports found due: the writes to start, and those found needless."""

    conditions: list[tuple[str, str, str, str]] = field(default_factory=list)  # (pod, its uid, message, reason)
    statuses: list[tuple[str, str, dict[str, object]]] = field(default_factory=list)  # (group, key, status)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (kind, reason) of each write not made
    # (kind, key, error) of each status dropped because what its object says could not be read.
    failed: list[tuple[str, str, str]] = field(default_factory=list)


def says_already(current: Mapping[str, object], status: Mapping[str, object]) -> bool:
    """Whether a gang's object whose status is ``current`` needs no write of ``status``: each field
    the write sets (None: one it leaves alone) is there already. Both are spelled as the API reads
    them back (``GangStatus.wire``, ``Statuses.said``: a time in whole seconds, say)."""
    return all(value is None or current.get(name) == value for name, value in status.items())


class Reports:
    """The coalesced reports owed, and what was last sent of each."""

    def __init__(self, settle: float = 1.0, cooldown: float = 5.0, now: float = 0.0) -> None:
        self.settle = settle
        self.cooldown = cooldown
        self._conditions: dict[str, Pending] = {}
        self._last_written: dict[str, float] = {}
        self._pruned = now
        self._statuses: dict[str, dict[str, object]] = {}
        # What was last sent, with what the cache showed then: while the cache still shows that,
        # the write is in flight and the same one is not sent again; once the cache shows anything
        # else (another writer's message, say), the cache is what counts. A failed write forgets it.
        self._sent: dict[str, tuple[str, str]] = {}  # pod -> (condition message, the pod's before)
        # PodGroup -> (when, the status, the cache's before): also what paces a group's writes.
        self._status_sent: dict[str, tuple[float, dict[str, object], Mapping[str, object] | None]] = {}
        # The PodGroups with a status write in flight: two merge patches of one object sent at once
        # may land in either order, and an older status landing last stood (nothing the core sees
        # changes to make it write again once the job settles).
        self._status_writing: dict[str, float] = {}  # ... and when each was sent

    def unschedulable(self, pod_key: str, message: str, now: float, reason: str = "Unschedulable") -> None:
        """The pod's condition message as it should be (already capped), and its reason."""
        pending = self._conditions.get(pod_key)
        if pending is None:
            self._conditions[pod_key] = Pending(message, now, reason)
        else:
            pending.message, pending.reason = message, reason

    def bind_written(self, pod_key: str) -> None:
        """The pod's bind went through: no condition is owed."""
        self._conditions.pop(pod_key, None)

    def bound(self, pod_key: str) -> None:
        self._conditions.pop(pod_key, None)
        self._sent.pop(pod_key, None)

    def gang_status(self, key: str, status: dict[str, object], kind: str) -> None:
        """The status the object ``key`` of kind ``kind`` (``Kind.id``) that declares a gang should have."""
        self._statuses[f"{kind} {key}"] = status

    def condition_failed(self, pod_key: str, message: str) -> None:
        """The write of ``message`` failed: it is no longer in flight."""
        if (self._sent.get(pod_key) or ("",))[0] == message:
            del self._sent[pod_key]

    def status_failed(self, kind: str, key: str, status: dict[str, object]) -> None:
        """The write of ``status`` failed: it is no longer in flight (unless another was sent since)."""
        if (self._status_sent.get(f"{kind} {key}") or (0.0, None))[1] is status:
            del self._status_sent[f"{kind} {key}"]

    def status_done(self, kind: str, key: str) -> None:
        """The status write of the gang's object ended (written or not): the next one may go."""
        self._status_writing.pop(f"{kind} {key}", None)

    def due(self, now: float, still_pending: Callable[[str], dict[str, str] | None],
            status_now: Callable[[str, str], Mapping[str, object] | None]) -> Due:
        """What has settled and is to be written now. ``still_pending(pod)`` gives the pod's uid
        and current condition message while it waits, or None when it is bound or gone;
        ``status_now(kind, key)`` the status of the gang's object ``key`` of kind ``kind`` (``Kind.id``)
        as the cache holds it (None: unknown). A status whose object ``status_now`` fails on is dropped
        (``Due.failed``): that write is lost, not the others, and the core sends it again when its
        gang changes."""
        out = Due()
        for pod, pending in list(self._conditions.items()):
            info = still_pending(pod)
            if info is None:
                del self._conditions[pod]
                self._sent.pop(pod, None)
                continue
            if info["message"] == pending.message or self._sent.get(pod) == (pending.message, info["message"]):
                # On the pod already, or sent and not yet back on the watch: under a backlog of
                # reports a write can take longer than the cooldown to land, and the same message
                # went out again and again.
                del self._conditions[pod]
                out.skipped.append(("pod-status", "unchanged"))
                continue
            if now - pending.first_seen < self.settle or now - self._last_written.get(pod, -1e9) < self.cooldown:
                continue
            del self._conditions[pod]
            self._last_written[pod] = now
            self._sent[pod] = (pending.message, info["message"])
            out.conditions.append((pod, info["uid"], pending.message, pending.reason))
        if now - self._pruned >= self.cooldown:  # what is past its cooldown need not be remembered
            self._pruned = now
            self._last_written = {k: t for k, t in self._last_written.items() if now - t < self.cooldown}
        for k, st in list(self._statuses.items()):
            kind, key = k.split(" ", 1)
            try:
                current = status_now(kind, key)
                already = current is not None and says_already(current, st)
            except Exception as exc:  # a dialect's reading of its object: one status's failure
                del self._statuses[k]
                out.failed.append((kind, key, repr(exc)))
                out.skipped.append(("podgroup-status", "error"))
                continue
            if already:
                del self._statuses[k]  # the object says so already (a write in flight landed, say)
                out.skipped.append(("podgroup-status", "unchanged"))
                continue
            last = self._status_sent.get(k)
            if last is not None and last[1:] == (st, current):
                del self._statuses[k]  # sent already, not yet back on the watch
                out.skipped.append(("podgroup-status", "unchanged"))
                continue
            if last is not None and now - last[0] < STATUS_INTERVAL and last[1].get("phase") == st.get("phase"):
                continue  # written a moment ago in the same phase: the latest is written when due
            if now - self._status_writing.get(k, -STATUS_WRITE_LIMIT) < STATUS_WRITE_LIMIT:
                continue  # the latest goes once the write before it ended (or is taken as lost)
            del self._statuses[k]
            self._status_sent[k] = (now, st, current)
            self._status_writing[k] = now
            out.statuses.append((kind, key, st))
        if len(self._status_sent) > 10_000:  # groups long gone; the cache's answer is what counts
            self._status_sent = {k: v for k, v in self._status_sent.items() if now - v[0] < STATUS_INTERVAL}
        return out

    def clear(self) -> None:
        """Forgets every report owed and sent (a stop: whoever schedules next rebuilds them)."""
        self._conditions.clear()
        self._statuses.clear()
        self._sent.clear()
        self._status_sent.clear()
        self._status_writing.clear()
