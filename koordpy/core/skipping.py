"""kube-scheduler's pod group cycle over a gang's members: each tried in rank order with the ones
before it placed; one that fits nowhere is skipped rather than ending the attempt; the attempt gives
up only once the members left can no longer meet the minimum.

kube-scheduler v1.37 (``podGroupSchedulingDefaultAlgorithm``) schedules a Kubernetes PodGroup that
way, and a CompositePodGroup's children each the same way. Koordinator's Strict gangs keep the
longest rank-order prefix that fits instead (the cycle's ``_largest_prefix``): which rule a gang
follows is its own (``Gang.skips``, set by its dialect; ``SubGroup.skips`` for a sub-group).

Belongs here: the search, over an ``attempt`` the caller gives (the cycle's placement on its
Statement, or one sub-group's placement inside a domain). Does not belong here: placing pods
(``koordpy.core.placement``), the minimums (``koordpy.core.gangrule``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Mapping
from typing import TypeVar

from koordpy.api.objects import Pod

F = TypeVar("F")

# ``attempt(pods, keep)``: places ``pods`` together on top of nothing the search placed, or nothing,
# and says why not (None: placed); placed pods stay placed only with ``keep``.
Attempt = Callable[[list[Pod], bool], F | None]
# ``add(placed, pod)``: places one more pod beside ``placed`` (what the search keeps placed), kept when
# it fits; else leaves ``placed`` as it was.
Add = Callable[[list[Pod], Pod], F | None]


def skipping(pods: list[Pod], enough: Callable[[list[Pod]], bool], attempt: Attempt[F], add: Add[F],
             reset: Callable[[], None], kind: Mapping[str, Hashable],
             settled: Collection[Hashable] = ()) -> tuple[list[Pod] | None, dict[str, F]]:
    """The members of ``pods`` (in rank order) placed as kube-scheduler's group cycle places them,
    left placed; None when the members that could still be placed are not ``enough`` (nothing is
    then placed: ``reset``). Also why each member passed over did not fit (its own attempt's failure).

    The longest prefix that fits is placed together (fewer pods never need more room, so a binary
    search finds it in a logarithmic number of attempts, and a group that fits whole costs one).
    Each member after it is then added alone, given every member placed before it, as kube-scheduler
    tries them one by one. A member of a kind (``kind``: same request, node constraints and rules
    between pods) that failed since the last member placed meets the very same cluster, so it is
    passed over without an attempt; so is one of a ``settled`` kind (no rules between pods: members
    placed since only take room from it) that failed at all. A gang of thousands of like pods too
    large for the room costs a few attempts, not one per pod; a member after one passed over, where a
    member of another kind placed between may have made it room (a spread it evens out), is tried."""
    skipped: dict[str, F] = {}
    if not enough(pods):
        return None, skipped
    if not pods:
        return [], skipped
    failure = attempt(pods, True)
    if failure is None:
        return list(pods), skipped
    failures = {len(pods): failure}
    lo, hi, best = 1, len(pods) - 1, 0
    if len({kind.get(p.key) for p in pods}) == 1:
        # Like members: the ones placed are a prefix (each after a failed one meets the same cluster),
        # so a prefix shorter than enough ends the attempt and is never searched.
        least = max(1, _least(pods, enough))
        if least >= len(pods) or attempt(pods[:least], False) is not None:
            return None, skipped  # which of them fit is not known: none is said to be passed over
        lo, best = least + 1, least
    while lo <= hi:
        mid = (lo + hi) // 2
        found = attempt(pods[:mid], False)
        if found is None:
            best, lo = mid, mid + 1
        else:
            failures[mid], hi = found, mid - 1
    placed = pods[:best]
    if placed and attempt(placed, True) is not None:  # not monotone after all: nothing placed
        placed = []
    failed: dict[Hashable, F] = {}  # kinds that failed since the last member placed (settled ones for good)
    first = pods[best]
    skipped[first.key] = failures[best + 1]
    failed[kind.get(first.key)] = failures[best + 1]
    for at in range(best + 1, len(pods)):
        if not enough(placed + pods[at:]):
            reset()
            return None, skipped
        pod = pods[at]
        like = kind.get(pod.key)
        why = failed.get(like) if like is not None else None
        if why is None:
            why = add(placed, pod)
            if why is None:
                placed.append(pod)
                failed = {k: f for k, f in failed.items() if k in settled}
                continue
            failed[like] = why
        skipped[pod.key] = why
    if not enough(placed):
        reset()
        return None, skipped
    return placed, skipped


def _least(pods: list[Pod], enough: Callable[[list[Pod]], bool]) -> int:
    """The shortest prefix of ``pods`` that is ``enough`` (len + 1 when none is): more members never
    count less, so a binary search finds it."""
    lo, hi = 0, len(pods) + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if mid <= len(pods) and enough(pods[:mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo
