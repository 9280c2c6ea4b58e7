"""Review of issue 21's records and shared values (``koordpy.api.model.Shared``): what the change to
frozen slotted records must not have changed, and what the shared tables may keep alive."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordpy.api import model as api_model
from koordpy.api import objects
from koordpy.api.model import SHARED_CHARS, SHARED_LIMIT, Shared
from koordpy.api.objects import _SHARED_ANNOTATIONS, Pod
from koordpy.cli.main import main
from tests.builders import pod


def _held_chars(table: Shared[Any]) -> int:
    return sum(len(k) + len(v) for held in table._memo.values() for k, v in held.items())


def test_a_shared_table_keeps_a_bounded_number_of_characters_alive() -> None:
    # Rule: a Shared table keeps values of objects long gone, so what it keeps must be small. By count
    # alone (4,096 maps), pods with large unique annotations (a last-applied-configuration, a
    # workflow template: up to 256 KiB a pod) kept up to a GiB alive after they were deleted.
    table = Shared[dict[str, str]]()
    big = 20_000
    for i in range(300):  # 6 million characters read, each map its own
        held = table.map({"note": f"{i:06d}" * (big // 6)})
        assert held["note"].startswith(f"{i:06d}")
    assert len(table._memo) < SHARED_LIMIT  # the count bound alone would have kept all 300
    assert _held_chars(table) <= SHARED_CHARS


def test_a_map_too_large_to_hold_is_handed_back_unshared() -> None:
    table = Shared[dict[str, str]]()
    huge = {"note": "x" * (SHARED_CHARS + 1)}
    assert table.map(huge) == huge and not table._memo


def test_large_maps_read_alike_are_still_shared() -> None:
    # The bound is on what is kept, not on sharing: a gang's long annotation is still kept once.
    table = Shared[dict[str, str]]()
    long = {"spec": "y" * 10_000}
    assert table.map(dict(long)) is table.map(dict(long))


def test_the_bound_empties_the_table_rather_than_refusing_new_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(api_model, "SHARED_CHARS", 100)
    table = Shared[dict[str, str]]()
    first = table.map({"a": "1" * 60})
    second = table.map({"a": "2" * 60})  # 122 characters with the first: the table starts afresh
    assert list(table._memo.values()) == [second] and table.map({"a": "2" * 60}) is second
    assert table.map({"a": "1" * 60}) is not first


def test_pods_with_large_unique_annotations_leave_a_bounded_table() -> None:
    for i in range(120):
        raw = pod(f"big-{i}")
        raw["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": f"{i:08d}" * 8_000}
        Pod.from_raw(raw)
    assert _held_chars(_SHARED_ANNOTATIONS) <= SHARED_CHARS


class _Sealed(dict):  # type: ignore[type-arg]
    """A map that refuses every change: what a shared map must be treated as."""

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a map shared between pods or nodes was written to")

    def __reduce__(self) -> Any:
        return (dict, (dict(self),))

    __setitem__ = __delitem__ = update = pop = popitem = setdefault = clear = __ior__ = _refuse


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.parametrize("example", ["preemption", "volcano-tiers", "workload-api"])
def test_nothing_writes_into_a_shared_map(example: str, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    # Rule: maps are shared between pods (and nodes) only because nobody writes into them; a write
    # would change every other pod holding the map. Simulated with every shared map sealed, each
    # example schedules exactly as it does with plain ones.
    assert main(["simulate", "-f", str(EXAMPLES / example), "-o", "json"]) == 0
    plain = capsys.readouterr().out
    unsealed_get = Shared.get

    def sealed_get(self: Shared[Any], value: Any, key: Any = None, chars: int = 0) -> Any:
        if isinstance(value, dict):
            value = _Sealed(value)
        elif isinstance(value, tuple) and value and all(isinstance(v, dict) for v in value):
            value = tuple(_Sealed(v) for v in value)  # owner references
        return unsealed_get(self, value, key, chars)

    monkeypatch.setattr(Shared, "get", sealed_get)
    for name in [n for n in vars(objects) if n.startswith("_SHARED_")]:
        monkeypatch.setattr(objects, name, Shared())  # fresh tables: none holds an unsealed map
    interned = objects._interned_map
    monkeypatch.setattr(objects, "_interned_map", lambda values: _Sealed(interned(values)))
    assert main(["simulate", "-f", str(EXAMPLES / example), "-o", "json"]) == 0
    assert capsys.readouterr().out == plain
    assert isinstance(Pod.from_raw(pod("sealed")).labels, _Sealed)
