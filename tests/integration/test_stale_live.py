"""``koordpy run`` evicts a stale gang on a real kube-apiserver (issue 33 item 1): a running gang of
bare pods loses a member (deleted, and nothing makes it again), runs below its minimum for its
grace, and is then evicted whole, with the Events that say so."""

from __future__ import annotations

import time

from tests.builders import node, pod, podgroup
from tests.integration.kube import Kube, Scheduler, fake, settle, wait_for, when

NS = "stale-live"
GRACE = 5  # seconds, the PodGroup's own koordpy.io/staleness-grace-period


def reasons(kube: Kube) -> dict[str, list[tuple[str, str, str]]]:
    """Events by reason: (involved object's kind/name, type, message)."""
    out: dict[str, list[tuple[str, str, str]]] = {}
    for e in kube.events(NS):
        involved = e["involvedObject"]
        out.setdefault(e["reason"], []).append((f"{involved['kind']}/{involved['name']}", e["type"], e["message"]))
    return out


def test_a_gang_that_loses_a_member_is_evicted_whole_after_its_grace(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    kube.apply(fake([node(f"n{i}", cpu="4") for i in range(3)]))
    group = podgroup("job", 3, annotations={"koordpy.io/staleness-grace-period": f"{GRACE}s"})
    group["metadata"]["namespace"] = NS
    members = [pod(f"job-{i}", cpu="4", group="job") for i in range(3)]
    for m in members:
        m["metadata"]["namespace"] = NS
    kube.apply(group, members)
    names = {f"job-{i}" for i in range(3)}
    wait_for(lambda: when(names <= kube.bound(NS).keys(), True), "the gang bound")
    wait_for(lambda: when(all((p.get("status") or {}).get("phase") == "Running" for p in kube.pods(NS).values()),
                          True), "the gang running")

    kube.kubectl("delete", "-n", NS, "pod", "job-2", "--wait=true")
    lost_at = time.monotonic()
    # Stale, and told so at once; the two left run on through the grace.
    stale = wait_for(lambda: reasons(kube).get("GangStale"), "a GangStale Event")
    [(on, kind, message)] = stale
    assert (on, kind) == ("PodGroup/job", "Warning"), stale
    assert f"gang {NS}/job is stale since " in message and "2 members running, minimum 3" in message, message
    assert settle(lambda: set(kube.pods(NS)), 1.0) == {"job-0", "job-1"}
    annotations = kube.get("podgroups.scheduling.sigs.k8s.io", "job", NS)["metadata"].get("annotations") or {}
    assert "koordpy.io/stale-since" in annotations, annotations

    wait_for(lambda: when(not kube.pods(NS), True), "the rest of the gang evicted", timeout=GRACE + 30)
    assert time.monotonic() - lost_at >= GRACE - 1  # not before its grace (the clocks' second rounding aside)
    events = reasons(kube)
    assert sorted(on for on, _, _ in events.get("StaleGangEviction", [])) == ["Pod/job-0", "Pod/job-1"], events
    assert all(kind == "Warning" and f"grace of {GRACE}s" in said for _, kind, said in events["StaleGangEviction"])
    assert [(on, kind) for on, kind, _ in events.get("StaleGangEvicted", [])] == [("PodGroup/job", "Warning")]
    # Whole again (nothing left to be stale): the stale-since is cleared from the PodGroup.
    wait_for(lambda: when("koordpy.io/stale-since" not in (kube.get("podgroups.scheduling.sigs.k8s.io", "job", NS)
                                                           ["metadata"].get("annotations") or {}), True),
             "the stale-since annotation cleared")
