"""koordpy.api.raw.Reader: the field checks every parser shares."""

from __future__ import annotations

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.raw import Reader


def test_an_integer_below_its_minimum_is_refused_with_the_api_servers_words() -> None:
    r = Reader("PodGroup ns/pg")
    assert r.integer(0, "spec.minMember", minimum=0) == 0
    assert r.integer(None, "spec.minMember", minimum=0) is None  # absent and no default: nothing to check
    with pytest.raises(ParseError) as negative:
        r.integer(-1, "spec.minMember", minimum=0)
    assert str(negative.value) == "PodGroup ns/pg: spec.minMember: must not be negative, got -1"
    with pytest.raises(ParseError) as small:
        r.integer(0, "spec.subGroupSize", minimum=1)
    assert str(small.value) == "PodGroup ns/pg: spec.subGroupSize: must be at least 1, got 0"


def test_a_default_standing_in_for_an_absent_integer_is_held_to_the_minimum_too() -> None:
    r = Reader("PodGroup ns/pg")
    assert r.integer(None, "spec.replicas", default=1, minimum=0) == 1
    with pytest.raises(ParseError, match=r"spec\.minMember: must be at least 1, got 0"):
        r.integer(None, "spec.minMember", default=0, minimum=1)


def test_the_range_of_the_go_type_is_checked_before_the_minimum() -> None:
    with pytest.raises(ParseError, match=r"out of range for int32"):
        Reader("Pod ns/p").integer(-2**40, "spec.x", minimum=0)
