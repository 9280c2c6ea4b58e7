"""Issue 29, item 18 (``koordpy run``'s parts): what the live scheduler's log says. A bind the API
server refuses with 409 is "already bound" only when the pod is; a start that compiles the kernels
says so rather than staying silent; a kind whose CRD is not installed (JobSet) is said once, not at
every resync."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import MutableMapping
from typing import Any

import pytest
import structlog
from aiohttp import web
from kubernetes_asyncio.client.exceptions import ApiException

from koordpy.api.kinds import by_id
from koordpy.controller import main as main_module
from koordpy.controller.cache import Cache
from koordpy.controller.writer import ApiWriter
from tests.controller.served import api_for

# What kube-apiserver v1.37's pods/binding answers (pkg/registry/core/pod/storage), in its words.
CONFLICTS = {
    "deleting": 'Operation cannot be fulfilled on pods/binding "p": pod p is being deleted, cannot be assigned to '
                "a host",
    "bound": 'Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "n0"',
    "uid": 'Operation cannot be fulfilled on pods "p": Precondition failed: UID in precondition: u1, UID in object '
           "meta: u2",
}


async def _bind_refused(message: str) -> list[MutableMapping[str, Any]]:
    async def binding(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message,
                                  "reason": "Conflict", "code": 409}, status=409)

    app = web.Application()
    app.router.add_post("/api/v1/namespaces/{ns}/pods/{name}/binding", binding)
    async with api_for(app) as api:
        with structlog.testing.capture_logs() as logs:
            assert await ApiWriter(api).bind("default/p", "u1", "n1") is False
    return logs


@pytest.mark.parametrize(("case", "said"), [
    ("deleting", "bind refused: the pod is being deleted"),
    ("bound", "bind conflict: the pod is already bound"),
    ("uid", "bind refused: the pod was recreated under its name (another UID)"),
])
async def test_a_bind_refused_with_409_is_logged_as_what_it_met(case: str, said: str) -> None:
    logs = await _bind_refused(CONFLICTS[case])
    assert [e["event"] for e in logs] == [said]
    assert CONFLICTS[case] in logs[0]["error"]  # the API server's own words, for whoever reads further


async def test_a_slow_warm_up_says_the_kernels_are_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(main_module, "warm_up", lambda: time.sleep(0.3))
    with structlog.testing.capture_logs() as logs:
        await main_module.warm_up_said(notice=0.05)
    assert [e["event"].split(":")[0] for e in logs] == ["warming the kernels", "kernels warm"]
    assert "about 20 s" in logs[0]["event"]


async def test_a_quick_warm_up_says_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(main_module, "warm_up", lambda: None)
    with structlog.testing.capture_logs() as logs:
        await main_module.warm_up_said(notice=1.0)
    assert logs == []


def test_a_warm_up_without_a_gang_is_skipped_and_said(monkeypatch: pytest.MonkeyPatch) -> None:
    """No dialect registered gives a warm-up gang: the warm-up says so and leaves the core to the
    first cycle (it raised IndexError on ``pods[0]``); a warm-up object of a kind not registered is
    left out with a warning (it was an ``assert``)."""
    monkeypatch.setattr(main_module, "warm_kernels", lambda: None)
    monkeypatch.setattr(main_module, "warm_up_objects", lambda: ())
    with structlog.testing.capture_logs() as logs:
        main_module.warm_up()
    assert [e["event"].split(":")[0] for e in logs] == ["no warm-up gang"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
           "spec": {"containers": [{"name": "c"}]}}
    stranger = {"apiVersion": "example.com/v1", "kind": "Stranger", "metadata": {"name": "s"}}
    monkeypatch.setattr(main_module, "warm_up_objects", lambda: (stranger, pod))
    with structlog.testing.capture_logs() as logs:
        main_module.warm_up()
    assert [(e["event"], e["kind"]) for e in logs] == [("warm-up object of a kind not registered, left out",
                                                        "Stranger")]


async def test_a_kind_not_served_is_said_once_across_resyncs(monkeypatch: pytest.MonkeyPatch) -> None:
    jobset = by_id("jobsets.jobset.x-k8s.io")
    served = {"now": False}

    async def list_into(cache: Cache, kind: Any, api: Any, group: str, version: str, plural: str) -> tuple[int, int]:
        if not served["now"]:
            exc = ApiException(status=404, reason="Not Found")
            exc.body = json.dumps({"kind": "Status", "code": 404}).encode()
            raise exc
        return 1, 0

    monkeypatch.setattr(main_module, "list_into", list_into)
    kinds = [(jobset, jobset.group, jobset.version, jobset.plural)]
    unserved: set[str] = set()
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):  # the start's sync and two resyncs
            await asyncio.wait_for(main_module.sync(None, Cache(), kinds, unserved), 5)
        served["now"] = True  # the CRD installed
        await main_module.sync(None, Cache(), kinds, unserved)
        served["now"] = False  # and removed again: said again
        await main_module.sync(None, Cache(), kinds, unserved)
    said = [e for e in logs if e["event"].startswith("kind not served")]
    assert [e["kind"] for e in said] == [jobset.label, jobset.label]


def test_kopf_does_not_say_again_that_a_kind_is_not_served() -> None:
    # kopf watches the kinds not served at the start, for a CRD installed later, and says they are
    # unresolved at the start and again at every change of any CRD; sync said it once already.
    main_module.configure_logging("INFO", "json")
    main_module.configure_logging("INFO", "json")
    kopf = logging.getLogger(main_module.KOPF_OBSERVATION)
    assert len(kopf.filters) == 1

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord(kopf.name, logging.WARNING, __file__, 1, message, None, None)

    unresolved = ("Unresolved resources cannot be served (try creating their CRDs): "
                  "Selector(group='jobset.x-k8s.io', version='v1alpha2', any_name='jobsets')")
    assert not kopf.filter(record(unresolved))
    assert kopf.filter(record("Ambiguous resources will not be served (try specifying API groups): x"))
