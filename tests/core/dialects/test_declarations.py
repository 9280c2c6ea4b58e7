"""Issue 32, item 1: a dialect's check of a pending pod's own declaration (Koordinator's gang and
topology annotations) is its ``Admission`` capability's; both shells ask the registry
(``dialects.DECLARING``, through ``koordpy.core.declarations``) and name no dialect. A dialect put
in the registry is what the live cache holds pods back for and what ``simulate`` refuses, and a
gang's pods that declare it alike are checked in full once."""

from __future__ import annotations

from collections.abc import Container, Hashable, Iterator
from typing import Any

import pytest

from koordpy.api.objects import Pod
from koordpy.controller.cache import Cache
from koordpy.core import dialects
from koordpy.core.dialects.base import AdmissionBase, Declaration, Objects
from koordpy.core.snapshot import Snapshot
from koordpy.core.verdicts import Reason
from koordpy.sim.simulator import InputError, World
from tests.builders import node, pod

NAMES = frozenset({"koordpy"})
WORD = "example.com/declares"


class Toy(AdmissionBase):
    """Refuses a pod whose label ``WORD`` says "bad"; counts its checks in full."""

    name = "toy"
    roles = ()
    checks_declarations = True

    def __init__(self) -> None:
        self.full: list[str] = []

    def refusal(self, pod: Pod, snapshot: Snapshot) -> Reason | None:
        return None

    def declaration(self, pod: Pod, objects: Objects, invalid: Container[str]) -> Declaration | None:
        said = pod.labels.get(WORD)
        return None if said is None else (said, None, False)

    def declared_words(self, pod: Pod) -> Hashable:
        return pod.namespace, pod.labels.get(WORD)

    def declaration_error(self, pod: Pod, objects: Objects, invalid: Container[str], accepted: bool) -> str | None:
        if not accepted:
            self.full.append(pod.key)
        return f"Pod {pod.key}: metadata.labels[{WORD}]: bad" if pod.labels.get(WORD) == "bad" else None


@pytest.fixture
def toy() -> Iterator[Toy]:
    dialect = Toy()
    undo = dialects.register(dialect)
    yield dialect
    undo()


def _pod(name: str, said: str, rv: int = 1) -> dict[str, Any]:
    raw = pod(name, cpu="1")
    raw["metadata"]["labels"] = {WORD: said}
    raw["metadata"]["resourceVersion"] = str(rv)
    return raw


def test_the_live_cache_holds_back_what_a_declaring_dialect_refuses(toy: Toy) -> None:
    cache = Cache()
    cache.observe("Node", None, {**node("n0"), "metadata": {**node("n0")["metadata"], "resourceVersion": "1"}})
    cache.observe("Pod", None, _pod("ok", "fine"))
    cache.observe("Pod", None, _pod("no", "bad"))
    snap = cache.snapshot(NAMES)
    assert {p.key for p in snap.pods} == {"default/ok"}
    assert cache.rejected == {"default/no": f"Pod default/no: metadata.labels[{WORD}]: bad"}


def test_simulate_refuses_what_a_declaring_dialect_refuses(toy: Toy) -> None:
    with pytest.raises(InputError, match=r"in\.yaml: Pod default/no: metadata\.labels\[example\.com/declares\]: bad"):
        World.from_objects([("in.yaml", node("n0")), ("in.yaml", _pod("no", "bad"))])


def test_a_gangs_pods_that_declare_it_alike_are_checked_in_full_once(toy: Toy) -> None:
    World.from_objects([("in.yaml", node("n0")), *(("in.yaml", _pod(f"p-{i}", "fine")) for i in range(50))])
    assert toy.full == ["default/p-0"]
