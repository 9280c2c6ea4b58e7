"""Issue 21, goal 3: a pending pod's gang and topology annotations are checked when its watch event
arrives, not in the snapshot that shows it; whatever arrives in whatever order, each snapshot holds
back exactly the pods a check of the whole cache against it would hold back, with the same errors."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.api.kinds import snapshot_fields
from koordpy.controller.cache import Cache, _InvalidGroups
from koordpy.core.declarations import Declarations
from tests.builders import node, pod, podgroup

NAMES = frozenset({"koordpy"})
INDEX = "gang.scheduling.koordinator.sh/network-topology-index"


def _pod(name: str, gang: str, variant: int) -> dict[str, Any]:
    """A member of ``gang`` whose annotations are fine or wrong in one of several ways."""
    annotations: dict[str, str] = {}
    scheduler = "koordpy"
    match variant:
        case 1:
            annotations[INDEX] = "x"  # not a number
        case 2:
            annotations["gang.scheduling.koordinator.sh/groups"] = "[oops"  # not JSON
        case 3:
            annotations["gang.scheduling.koordinator.sh/min-available"] = "-1"
        case 4:
            scheduler = "other"  # not ours: never checked, never held back
        case 5:
            annotations[INDEX] = "3"
    raw = pod(name, cpu="1", group=gang, annotations=annotations, scheduler=scheduler)
    if variant == 6:
        raw["spec"]["nodeName"] = "n0"  # bound: not pending, never checked
    return raw


def _podgroup(name: str, variant: int) -> dict[str, Any]:
    if variant == 1:  # does not parse: its pods wait for it, and are not blamed
        return podgroup(name, 2, annotations={"gang.scheduling.koordinator.sh/network-topology-spec": "[oops"})
    return podgroup(name, 1 + variant)


def _expected(cache: Cache) -> dict[str, str | None]:
    """Each pending pod of ours -> the error a check against the cache as it is now gives."""
    fields = snapshot_fields(cache.stores, {at: err for at, (err, _) in cache.invalid.items()},
                             skip=frozenset({"pods"}))
    out = {}
    fresh = Declarations()  # nothing remembered: each pod checked in full
    for key, p in cache.pods.items():
        if p.scheduler_name in NAMES and not p.node_name and not p.terminal and not p.deleting:
            out[key] = fresh.check(key, p, cache.stores, fields["invalid_podgroups"])[1]
    return out


step = st.one_of(
    st.tuples(st.just("pod"), st.integers(0, 5), st.sampled_from("ab"), st.integers(0, 6)),
    st.tuples(st.just("podgroup"), st.integers(0, 0), st.sampled_from("ab"), st.integers(0, 2)),
    st.tuples(st.just("delete-pod"), st.integers(0, 5), st.sampled_from("ab"), st.just(0)),
    st.tuples(st.just("delete-podgroup"), st.integers(0, 0), st.sampled_from("ab"), st.just(0)),
    st.tuples(st.just("snapshot"), st.just(0), st.just("a"), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(step, min_size=1, max_size=40))
def test_each_snapshot_holds_back_what_a_check_of_the_whole_cache_would(steps: list[tuple[str, int, str, int]]) -> None:
    cache = Cache()
    cache.observe("Node", None, {**node("n0"), "metadata": {**node("n0")["metadata"], "resourceVersion": "1"}})
    version = 1
    for what, i, gang, variant in [*steps, ("snapshot", 0, "a", 0)]:
        version += 1
        if what == "snapshot":
            snap = cache.snapshot(NAMES)
            expected = _expected(cache)
            shown = {p.key for p in snap.pods if p.key in expected}
            assert shown == {k for k, err in expected.items() if err is None}
            assert cache.rejected == {k: err for k, err in expected.items() if err is not None}
            continue
        if what.startswith("delete"):
            raw = pod(f"{gang}-{i}", cpu="1") if what == "delete-pod" else podgroup(gang, 1)
            raw["metadata"]["resourceVersion"] = str(version)
            cache.observe("Pod" if what == "delete-pod" else "PodGroup", "DELETED", raw)
            continue
        raw = _pod(f"{gang}-{i}", gang, variant) if what == "pod" else _podgroup(gang, variant)
        raw["metadata"]["resourceVersion"] = str(version)
        cache.observe("Pod" if what == "pod" else "PodGroup", "MODIFIED", raw)


def test_a_pod_that_arrives_after_a_snapshot_is_checked_then() -> None:
    cache = Cache()
    cache.observe("PodGroup", None, {**podgroup("a", 2), "metadata": {**podgroup("a", 2)["metadata"],
                                                                    "resourceVersion": "1"}})
    cache.snapshot(NAMES)
    raw = _pod("a-0", "a", 0)
    raw["metadata"]["resourceVersion"] = "2"
    cache.observe("Pod", "ADDED", raw)
    checked = cache.declarations.checked.get("default/a-0")
    assert checked is not None and checked[0] is cache.pods["default/a-0"] and checked[4] is None  # no error
    # Before any snapshot the cache does not know whose pods are its own: nothing is checked then.
    fresh = Cache()
    fresh.observe("Pod", "ADDED", raw)
    assert fresh.declarations.checked == {}


def test_the_invalid_groups_read_at_arrival_are_the_snapshots() -> None:
    cache = Cache()
    for i, (name, variant) in enumerate([("a", 1), ("b", 0), ("c", 1)]):
        raw = _podgroup(name, variant)
        raw["metadata"]["resourceVersion"] = str(i + 1)
        cache.observe("PodGroup", None, raw)
    invalid = snapshot_fields(cache.stores, {at: err for at, (err, _) in cache.invalid.items()},
                              skip=frozenset({"pods"}))["invalid_podgroups"]
    read = _InvalidGroups(cache.invalid)
    assert set(invalid) == {"default/a", "default/c"}
    assert all((key in read) == (key in invalid) for key in ["default/a", "default/b", "default/c", "x", None])
