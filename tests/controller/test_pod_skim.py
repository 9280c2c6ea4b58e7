"""A pod's watch events read without their spec when koordpy has read that spec before
(``podwatch.skim``, ``Cache.observe_skimmed``, ``Pod.renewed``): most of a running pod's events
(its status, a condition, its deletion) leave the spec as it was, and parsing the spec was most of
what an event cost. The pod filed so must be the one the whole event would have given."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.api.kinds import by_id
from koordpy.api.objects import Pod
from koordpy.controller.cache import Cache
from koordpy.controller.podwatch import skim
from koordpy.controller.wire import loads
from tests.builders import pod
from tests.controller.test_watch_kinds import FakeApi, run_watch, rv, served

POD = by_id("pods")


def running(name: str = "p", **kw: Any) -> dict[str, Any]:
    """A pod as the API server shows it once bound and running, with what a watch line carries."""
    p = pod(name, cpu="500m", node_name="n1", labels={"app": "a", "spec": "value"},
            annotations={"note": json.dumps({"spec": {"x": 1}, "status": {"y": 2}})}, **kw)
    p["metadata"].update(uid="u-1", resourceVersion="10", creationTimestamp="2026-11-28T09:00:00Z")
    p["metadata"]["managedFields"] = [{"manager": "kwok", "fieldsV1": {"f:spec": {"f:nodeName": {}},
                                                                       "f:status": {"f:phase": {}}}}]
    p["spec"]["tolerations"] = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                 "effect": "NoExecute", "tolerationSeconds": 300}]
    p["status"] = {"phase": "Running", "startTime": "2026-11-28T09:00:01Z", "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}],
        "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": "2026-11-28T09:00:01Z"}}}]}
    return p


def line(event_type: str, obj: dict[str, Any]) -> bytes:
    return json.dumps({"type": event_type, "object": obj}, separators=(",", ":")).encode()


def test_skim_cuts_out_the_spec_and_nothing_else() -> None:
    # The labels and an annotation spell "spec" and "status" too; only the object's own are cut.
    p = running()
    data = line("MODIFIED", p)
    cut = skim(data, "spec")
    assert cut is not None
    left = loads(data[:cut[0]] + data[cut[1]:])
    assert left == {"type": "MODIFIED", "object": {k: v for k, v in p.items() if k != "spec"}}
    assert json.loads(b"{" + data[cut[0] + 1:cut[1]] + b"}") == {"spec": p["spec"]}


def test_skim_gives_up_where_it_cannot_be_sure() -> None:
    p = running()
    del p["status"]
    assert skim(line("MODIFIED", p), "spec") is None
    assert skim(json.dumps({"type": "MODIFIED", "object": running()}).encode(), "spec") is None  # not compact
    assert skim(line("ERROR", {"kind": "Status", "code": 410}), "spec") is None


def _skimmed(event_type: str, obj: dict[str, Any]) -> tuple[dict[str, Any], int]:
    data = line(event_type, obj)
    cut = skim(data, "spec")
    assert cut is not None
    return loads(data[:cut[0]] + data[cut[1]:])["object"], hash(data[cut[0]:cut[1]])


def test_a_status_change_is_filed_from_the_pod_held() -> None:
    cache = Cache()
    first = running()
    _, sign = _skimmed("ADDED", first)
    cache.observe(POD, "ADDED", first, sign)
    held = cache.pods["default/p"]
    later = copy.deepcopy(first)
    later["metadata"].update(resourceVersion="11", deletionTimestamp="2026-11-28T09:05:00Z")
    later["status"]["conditions"].append({"type": "DisruptionTarget", "status": "True",
                                          "reason": "PreemptionByScheduler"})
    obj, sign2 = _skimmed("MODIFIED", later)
    assert sign2 == sign
    assert cache.observe_skimmed(POD, "MODIFIED", obj, sign2)
    now = cache.pods["default/p"]
    assert now == Pod.from_raw(later) and now.deleting and now.preempted
    assert now.requests is held.requests and now.tolerations is held.tolerations  # the spec's, kept
    # A deletion needs no spec at all.
    gone, sign3 = _skimmed("DELETED", later)
    assert cache.observe_skimmed(POD, "DELETED", gone, sign3)
    assert "default/p" not in cache.pods


@pytest.mark.parametrize("change", ["spec", "labels", "annotations", "uid", "listed"])
def test_the_whole_pod_is_read_when_more_than_status_changed(change: str) -> None:
    cache = Cache()
    first = running()
    _, sign = _skimmed("ADDED", first)
    cache.observe(POD, "ADDED", first, sign)
    later = copy.deepcopy(first)
    later["metadata"]["resourceVersion"] = "11"
    if change == "spec":
        later["spec"]["tolerations"].append({"key": "k", "operator": "Exists"})
    elif change == "labels":
        later["metadata"]["labels"]["app"] = "b"
    elif change == "annotations":
        later["metadata"]["annotations"]["more"] = "x"
    elif change == "uid":
        later["metadata"]["uid"] = "u-2"
    held = first
    if change == "listed":
        # Read from a LIST since, with another spec: the event's spec is the first one's, whose sign
        # the watch kept, but the pod held is no longer read from it.
        held = rv(copy.deepcopy(first), 11)
        held["spec"]["tolerations"] = []
        cache.observe(POD, None, held)
        later["metadata"]["resourceVersion"] = "12"
    obj, sign2 = _skimmed("MODIFIED", later)
    assert not cache.observe_skimmed(POD, "MODIFIED", obj, sign2)
    assert cache.pods["default/p"] == Pod.from_raw(held)  # nothing filed from the skimmed event


_STATUS = st.fixed_dictionaries({}, optional={
    "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed"]),
    "reason": st.sampled_from(["", "OutOfcpu", "Evicted"]),
    "nominatedNodeName": st.sampled_from(["", "n2"]),
    "startTime": st.sampled_from(["2026-11-28T09:00:01Z", "2026-11-28T10:00:00Z"]),
    "conditions": st.lists(st.fixed_dictionaries({
        "type": st.sampled_from(["PodScheduled", "DisruptionTarget", "Ready"]),
        "status": st.sampled_from(["True", "False"]),
        "reason": st.sampled_from(["PreemptionByScheduler", "StaleGangEviction", "Other"]),
        "message": st.sampled_from(["", "0/3 nodes are available"])}), max_size=3)})


@settings(max_examples=150, deadline=None)
@given(status=_STATUS, deleting=st.booleans(), owned=st.booleans())
def test_renewed_is_what_reading_the_whole_pod_gives(status: dict[str, Any], deleting: bool, owned: bool) -> None:
    first = running()
    later = copy.deepcopy(first)
    later["status"] = status
    if deleting:
        later["metadata"]["deletionTimestamp"] = "2026-11-28T09:05:00Z"
    if owned:
        later["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j",
                                                 "uid": "j-1", "controller": True}]
    obj, _ = _skimmed("MODIFIED", later)
    got, want = Pod.from_raw(first).renewed(obj), Pod.from_raw(later)
    assert got == want and got is not None
    assert got.key == want.key and repr(got) == repr(want)  # every slot set, the derived key too


async def test_the_pod_watch_reads_a_spec_once() -> None:
    first = rv(running(), 10)
    later = copy.deepcopy(first)
    later["metadata"]["resourceVersion"] = "11"
    later["status"]["phase"] = "Succeeded"
    fake = FakeApi("/api/v1/pods", lists=[(200, [], 1)], compact=True, watches=[
        (200, [{"type": "ADDED", "object": first}, {"type": "MODIFIED", "object": later}]), (200, [])])
    cache = Cache()
    parsed: list[str] = []
    real = Pod.from_raw

    def counted(raw: dict[str, Any]) -> Pod:
        parsed.append(raw["metadata"]["resourceVersion"])
        return real(raw)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Pod, "from_raw", staticmethod(counted))
        async with served(fake) as api:
            await run_watch(api, cache, POD, "5", lambda: "default/p" in cache.pods
                            and cache.pods["default/p"].phase == "Succeeded")
    assert parsed == ["10"]  # the MODIFIED event was filed from the pod held
    assert cache.pods["default/p"] == real(later)


async def test_an_object_written_in_another_order_is_read_whole() -> None:
    # Not what an API server writes, but the cut must never file half a pod: with the spec before the
    # metadata, what skim cuts out is both, and the line is read whole.
    first = rv(running(), 10)
    reordered = {"kind": "Pod", "apiVersion": "v1", "spec": first["spec"], "metadata": first["metadata"],
                 "status": first["status"]}
    fake = FakeApi("/api/v1/pods", lists=[(200, [], 1)], compact=True,
                   watches=[(200, [{"type": "ADDED", "object": reordered}]), (200, [])])
    cache = Cache()
    async with served(fake) as api:
        await run_watch(api, cache, POD, "5", lambda: "default/p" in cache.pods)
    assert cache.pods["default/p"] == Pod.from_raw(first) and not cache.invalid
