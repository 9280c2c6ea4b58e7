"""A job's minimum runtime and preemption delay: the values its objects set, and the times they give.

A job that has run less than its minimum runtime since it last started is no victim of preemption
(KAI's minruntime plugin); a pending job younger than its preemption delay, counted from its creation
or its last eviction, whichever is later, waits instead of preempting, while it still takes free room
at once (KAI's preemption delay). Each dialect says where its jobs set them (``Gangs.min_runtime``,
``last_start``, ``preemption_delay`` in ``koordpy.core.dialects.base``); the neutral answer, here, is
koordpy's annotations on the gang's object, then on its pods, and the live members' start.

Belongs here: the annotations' keys, reading a duration as a job's objects write it (a bad one counts
as 0 and is told, as KAI does), the neutral answers the dialects build on, a lone pod's values, and the
``Runtime`` / ``Delay`` of a job with the settings' defaults filled in. Does not belong here: where a
dialect's own objects set them (its module), and what preemption does with them
(``koordpy.core.preemption`` reads a ``Runtime`` per victim, ``koordpy.core.cycle`` a ``Delay``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from koordpy.api.errors import ParseError
from koordpy.api.objects import Pod
from koordpy.api.quantity import parse_go_duration
from koordpy.api.raw import Reader

ANN_MIN_RUNTIME = "koordpy.io/min-runtime"
ANN_PREEMPTION_DELAY = "koordpy.io/preemption-delay"


@dataclass(frozen=True)
class Said:
    """A duration a job's objects set: its seconds (None: not set), what set it, and why the value
    written is not used as written (it then counts as 0)."""

    seconds: float | None = None
    where: str = ""
    problem: str | None = None


NOT_SET = Said()
# Where a value comes from: (what it is, as messages name it; its annotations).
Source = tuple[str, Mapping[str, str]]


def duration(text: str, where: str) -> Said:
    """``text`` as a Go duration; unparsable or negative counts as 0 and says why (as KAI does)."""
    try:
        seconds = parse_go_duration(text.strip())
    except ValueError as exc:
        return Said(0.0, where, f"{where}: {exc}; counted as 0")
    if seconds < 0:
        return Said(0.0, where, f"{where}: {text!r} is negative; counted as 0")
    return Said(seconds, where)


def annotated(key: str, sources: Iterable[Source]) -> Said:
    """The annotation ``key`` of the first of ``sources`` that sets it."""
    for what, written in sources:
        text = written.get(key)
        if text:
            return duration(text, f"{what} annotation {key}")
    return NOT_SET


def timestamp(text: str | None, where: str) -> tuple[float | None, str | None]:
    """An RFC 3339 time an annotation holds, and why it is not used when it cannot be read."""
    if not text:
        return None, None
    try:
        return Reader(where).timestamp(text, "value"), None
    except ParseError as exc:
        return None, f"{where}: {exc.message}; ignored"


def on_pods(key: str, pods: Sequence[Pod]) -> Said:
    """The annotation ``key`` of the first of the members that sets it (made from one template, they
    agree): asked of every member of every gang a preemption looks at, so a lookup each, no more."""
    for p in pods:
        text = p.annotations.get(key)
        if text:
            return duration(text, f"pod {p.key} annotation {key}")
    return NOT_SET


def earliest_start(pods: Iterable[Pod]) -> float | None:
    """When the first of the running members started (``status.startTime``): a member replaced
    later does not move it, the whole job restarted does. None: none has started."""
    return min((p.start_time for p in pods if p.node_name and p.start_time is not None), default=None)


def pending_anchor(creation: float, pods: Iterable[Pod]) -> float:
    """Where a job's preemption delay counts from: its creation, or the creation of its oldest pending
    member when later (a controller recreates an evicted member: its creation is the eviction)."""
    pending = [p.creation for p in pods if not p.node_name and p.creation is not None]
    return max([creation, min(pending)]) if pending else creation


@dataclass(frozen=True)
class Runtime:
    """A job's minimum runtime (the default filled in) and its last start."""

    minimum: Said
    last_start: float | None

    @property
    def protected_until(self) -> float | None:
        """Until when it is no victim; None: never protected (no minimum, or never started)."""
        if self.last_start is None or not self.minimum.seconds:
            return None
        return self.last_start + self.minimum.seconds


@dataclass(frozen=True)
class Delay:
    """A job's preemption delay (the default filled in) and the time it counts from."""

    delay: Said
    anchor: float

    @property
    def ends(self) -> float | None:
        """When it may preempt; None: no delay."""
        return self.anchor + self.delay.seconds if self.delay.seconds else None


def with_default(said: Said, default: float) -> Said:
    return said if said.seconds is not None else Said(default, "the default")


def lone_runtime(pod: Pod, default: float) -> Runtime:
    """A pod of no gang: its own annotation or the default, from its own start."""
    said = annotated(ANN_MIN_RUNTIME, ((f"pod {pod.key}", pod.annotations),))
    return Runtime(with_default(said, default), pod.start_time)


def lone_delay(pod: Pod, default: float) -> Delay:
    """A pod of no gang: its own annotation or the default, from its own creation."""
    said = annotated(ANN_PREEMPTION_DELAY, ((f"pod {pod.key}", pod.annotations),))
    return Delay(with_default(said, default), pod.creation if pod.creation is not None else 0.0)


__all__ = ["ANN_MIN_RUNTIME", "ANN_PREEMPTION_DELAY", "NOT_SET", "Delay", "Runtime", "Said", "annotated",
           "duration", "earliest_start", "lone_delay", "lone_runtime", "on_pods", "pending_anchor", "timestamp",
           "with_default"]
