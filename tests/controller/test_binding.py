"""The live binding cycle (``koordpy.controller.binding``): reserve, pre-bind steps, bind, and on a
failure at any step the steps before it undone in reverse, with the pod back in the queue."""

from __future__ import annotations

from typing import Any

from koordpy.controller.binding import Binder
from koordpy.controller.cache import Cache
from koordpy.core.decisions import Bind, VolumeBinding
from tests.builders import node
from tests.core.test_volumes import pv, pvc, sc, using

NAMES = frozenset({"koordpy"})


class FakeWriter:
    """What a binding cycle asks of its writer, recorded; ``refuse`` makes the bind fail as a pod
    deleted meanwhile does (False)."""

    def __init__(self, refuse: bool = False) -> None:
        self.refuse = refuse
        self.calls: list[tuple[Any, ...]] = []
        self.conditions: dict[str, str] = {}

    async def claim_volume(self, pv: str, ns: str, claim: str, claim_uid: str, resource_version: str = "") -> None:
        self.calls.append(("claim_volume", pv, f"{ns}/{claim}"))

    async def select_node(self, claim_key: str, node_name: str) -> None:
        self.calls.append(("select_node", claim_key, node_name))

    async def bind(self, pod_key: str, uid: str, node_name: str) -> bool:
        self.calls.append(("bind", pod_key, node_name))
        return not self.refuse

    def bound(self, pod_key: str) -> None:
        self.calls.append(("bound", pod_key))

    def unschedulable(self, pod_key: str, message: str, reason: str = "Unschedulable") -> None:
        self.conditions[pod_key] = message

    def spawn_owed(self, coro: Any) -> None:
        coro.close()


def _static_volume_cache() -> Cache:
    cache = Cache()
    cache.observe("Node", "ADDED", node("a"))
    cache.observe("StorageClass", "ADDED", sc("local"))
    cache.observe("PersistentVolume", "ADDED", pv("only", on="a"))
    cache.observe("PersistentVolumeClaim", "ADDED", pvc("data"))
    cache.observe("Pod", "ADDED", using("p", "data"))
    return cache


async def test_a_bind_written_after_the_volume_prebind_confirms_the_pod() -> None:
    cache, writer = _static_volume_cache(), FakeWriter()
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)))
    binder.reserve(d)
    assert cache.assumed["default/p"][0] == "a" and cache.storage.volumes["only"].claim_ref is not None
    await binder.run(d, "uid-p")
    assert [c[0] for c in writer.calls] == ["claim_volume", "bind", "bound"]
    assert "default/p" in cache.assumed and cache.storage.volumes["only"].claim_ref is not None


async def test_a_bind_refused_after_the_volume_prebind_undoes_the_volume_assumption() -> None:
    """kube-scheduler's Unreserve reverts the volumes it assumed when the bind fails; the loop kept the
    PersistentVolume's claimRef assumed (the next cycles saw it taken by a pod that is pending again)."""
    cache, writer = _static_volume_cache(), FakeWriter(refuse=True)
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)))
    binder.reserve(d)
    await binder.run(d, "uid-p")
    assert "default/p" not in cache.assumed
    assert cache.storage.volumes["only"].claim_ref is None


async def test_a_failed_volume_write_puts_the_pod_back_with_kube_schedulers_words() -> None:
    cache = _static_volume_cache()

    class Failing(FakeWriter):
        async def claim_volume(self, pv: str, ns: str, claim: str, claim_uid: str,
                               resource_version: str = "") -> None:
            raise OSError("connection refused")

    writer = Failing()
    binder = Binder(cache, writer)  # type: ignore[arg-type]
    d = Bind("default/p", "a", VolumeBinding("a", static=(("default/data", "only"),)))
    binder.reserve(d)
    await binder.run(d, "uid-p")
    assert [c[0] for c in writer.calls] == []
    assert writer.conditions["default/p"] == 'running PreBind plugin "VolumeBinding": connection refused'
    assert "default/p" not in cache.assumed and cache.storage.volumes["only"].claim_ref is None
