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

from collections.abc import Callable, Hashable, Mapping
from typing import TypeVar

from koordpy.api.objects import Pod

F = TypeVar("F")

# ``attempt(pods, keep)``: places ``pods`` together, or nothing, and says why not (None: placed);
# placed pods stay placed only with ``keep``.
Attempt = Callable[[list[Pod], bool], F | None]


def skipping(pods: list[Pod], enough: Callable[[list[Pod]], bool], attempt: Attempt[F],
             kind: Mapping[str, Hashable]) -> tuple[list[Pod] | None, dict[str, F]]:
    """The members of ``pods`` (in rank order) placed as kube-scheduler's group cycle places them,
    left placed; None when the members that could still be placed are not ``enough`` (nothing is
    then placed). Also why each skipped member was skipped (the failure of the attempt that took it).

    Each member fits or not given the ones placed before it, so the first member that does not fit
    is found as the end of the longest prefix that fits (fewer pods never need more room). Members
    of its kind (``kind``: same request, node constraints and rules between pods) that come after
    it meet the same room or less, so they are skipped with it: a gang of thousands of like pods
    costs a few attempts, not one per pod."""
    skipped: dict[str, F] = {}
    left = list(pods)
    while True:
        if not enough(left):
            return None, skipped
        if not left:
            return left, skipped
        failure = attempt(left, True)
        if failure is None:
            return left, skipped
        failures = {len(left): failure}
        lo, hi, best = 1, len(left) - 1, 0
        if len({kind.get(p.key) for p in left}) == 1:
            # Like members: the ones placed are a prefix, so a prefix shorter than enough ends the
            # attempt, and is never searched (a gang of thousands too large for the room costs one try).
            least = max(1, _least(left, enough))
            if least >= len(left) or attempt(left[:least], False) is not None:
                return None, skipped  # which of them fit is not known: none is said to be passed over
            lo, best = least + 1, least
        while lo <= hi:
            mid = (lo + hi) // 2
            found = attempt(left[:mid], False)
            if found is None:
                best, lo = mid, mid + 1
            else:
                failures[mid], hi = found, mid - 1
        first = left[best]
        why = failures[best + 1]
        like = kind.get(first.key)
        rest = []
        for p in left[best + 1:]:
            if like is not None and kind.get(p.key) == like:
                skipped[p.key] = why
            else:
                rest.append(p)
        skipped[first.key] = why
        left = left[:best] + rest


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
