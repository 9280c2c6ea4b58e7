"""The elector's renew loop and release against a fake Lease API (the live tests are in
tests/integration/test_leader.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import structlog
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.controller.leader import LeaderElector


class FakeLeases:
    """One Lease; ``conflicts`` replaces in a row answer 409 (the server took a request of ours
    we gave up on, say), ``thief`` takes the Lease at the next read."""

    def __init__(self) -> None:
        self.holder = ""
        self.version = 0
        self.conflicts = 0
        self.thief: str | None = None
        self.replaces = 0

    def _lease(self) -> Any:
        spec = SimpleNamespace(holder_identity=self.holder, renew_time="t", lease_transitions=0,
                               lease_duration_seconds=12, acquire_time=None)
        return SimpleNamespace(spec=spec, metadata=SimpleNamespace(resource_version=str(self.version)))

    async def read_namespaced_lease(self, name: str, namespace: str) -> Any:
        if self.thief is not None:
            self.holder, self.thief = self.thief, None
            self.version += 1
        return self._lease()

    async def create_namespaced_lease(self, namespace: str, body: dict[str, Any]) -> None:
        raise AssertionError("the Lease exists")

    async def replace_namespaced_lease(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        self.replaces += 1
        if self.conflicts:
            self.conflicts -= 1
            self.version += 1
            raise ApiException(status=409, reason="Conflict")
        assert body["metadata"]["resourceVersion"] == str(self.version)
        self.holder = body["spec"].get("holderIdentity", "")
        self.version += 1


def elector(leases: FakeLeases) -> LeaderElector:
    e = LeaderElector(None, "l", "default", "me", lease_duration=1.2, renew_deadline=0.8,
                      retry_period=0.05)
    e.api = leases
    return e


async def test_a_conflict_on_our_own_lease_is_retried_not_taken_for_a_loss() -> None:
    leases = FakeLeases()
    e = elector(leases)
    await e.acquire()
    leases.conflicts = 3
    keeping = e.start_keeping()
    await asyncio.sleep(0.5)
    assert not e.lost.is_set() and e.may_write()
    assert leases.conflicts == 0 and leases.holder == "me"
    with structlog.testing.capture_logs() as logs:
        await e.release()
    assert keeping.done()
    assert [line["event"] for line in logs] == ["lease released"]
    assert leases.holder == ""


async def test_another_holder_ends_leadership_at_once() -> None:
    leases = FakeLeases()
    e = elector(leases)
    await e.acquire()
    leases.thief = "other"
    e.start_keeping()
    await asyncio.wait_for(e.lost.wait(), 0.5)  # well before the 0.8 s deadline
    assert not e.may_write()


async def test_a_release_that_finds_nothing_to_release_says_so() -> None:
    leases = FakeLeases()
    e = elector(leases)
    with structlog.testing.capture_logs() as logs:
        await e.release()
    assert [(line["event"], line["error"]) for line in logs] == [("lease not released", "not leading")]
    await e.acquire()
    leases.thief = "other"
    with structlog.testing.capture_logs() as logs:
        await e.release()
    assert [(line["event"], line["error"]) for line in logs] == [("lease not released", "held by another")]

