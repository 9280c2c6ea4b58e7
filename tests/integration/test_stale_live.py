"""``koordpy run`` evicts a stale gang on a real kube-apiserver (issue 33 item 1): a running gang of
bare pods loses a member (deleted, and nothing makes it again), runs below its minimum for its
grace, and is then evicted whole, with the Events that say so."""

from __future__ import annotations

import time
from typing import Any

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


def _in(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    obj["metadata"]["namespace"] = namespace
    return obj


def stale_gangs_of_every_kind(kube: Kube, namespace: str) -> dict[str, tuple[str, str]]:
    """One running gang below its minimum per kind of object that keeps a stale-since (a
    scheduler-plugins, a Volcano and a KAI PodGroup, a CompositePodGroup with an annotation; a
    Kubernetes PodGroup with its GangStale condition): two of three members bound on kwok's nodes,
    the third never made. Returns resource -> (object name, what keeps it): "annotation <key>" or
    "condition GangStale". The default grace (60 s) leaves them running while they are looked at."""
    from tests.core.dialects.test_upstream import group as workload_group
    from tests.core.dialects.test_upstream import member
    from tests.core.dialects.test_upstream_composite import child, composite

    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    kube.apply(fake([node(f"s{i}", cpu="64") for i in range(2)]))

    def bound(raw: dict[str, Any], i: int) -> dict[str, Any]:
        raw["spec"]["nodeName"] = f"s{i % 2}"
        return _in(raw, namespace)

    volcano = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "vc", "namespace": namespace}, "spec": {"minMember": 3}}
    kai = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
           "metadata": {"name": "kai", "namespace": namespace}, "spec": {"minMember": 3, "queue": "q"}}
    objects: list[dict[str, Any]] = [_in(podgroup("sp", 3), namespace), volcano, kai,
                                     _in(workload_group("wl", min_count=3), namespace),
                                     _in(composite("cp", count=2), namespace),
                                     _in(child("c0", 1, parent="cp"), namespace),
                                     _in(child("c1", 1, parent="cp"), namespace)]
    for i in range(2):
        objects.append(bound(pod(f"sp-{i}", cpu="1", group="sp"), i))
        objects.append(bound(pod(f"vc-{i}", cpu="1", annotations={"scheduling.k8s.io/group-name": "vc"}), i))
        objects.append(bound(pod(f"kai-{i}", cpu="1", annotations={"pod-group-name": "kai"}), i))
        objects.append(bound(member(f"wl-{i}", cpu="1", group_name="wl"), i))
    objects.append(bound(member("c0-0", cpu="1", group_name="c0"), 0))  # c1 never gets a member
    kube.apply(objects)
    return {"podgroups.scheduling.sigs.k8s.io": ("sp", "annotation koordpy.io/stale-since"),
            "podgroups.scheduling.volcano.sh": ("vc", "annotation koordpy.io/stale-since"),
            "podgroups.scheduling.run.ai": ("kai", "annotation kai.scheduler/stale-podgroup-timestamp"),
            "compositepodgroups.scheduling.k8s.io": ("cp", "annotation koordpy.io/stale-since"),
            "podgroups.scheduling.k8s.io": ("wl", "condition GangStale")}


def kept(kube: Kube, namespace: str, resource: str, name: str, how: str) -> bool:
    obj = kube.get(resource, name, namespace)
    what, key = how.split(" ", 1)
    if what == "annotation":
        return key in (obj["metadata"].get("annotations") or {})
    return any(c.get("type") == key and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or [])


def test_every_kind_of_gang_object_keeps_its_stale_since(kube: Kube, scheduler: Scheduler) -> None:
    ns = "stale-kinds"
    expected = stale_gangs_of_every_kind(kube, ns)
    for resource, (name, how) in expected.items():
        wait_for(lambda r=resource, n=name, h=how: when(kept(kube, ns, r, n, h), True),  # type: ignore[misc]
                 f"{resource} {name}: its stale-since as {how}")
    # Nobody evicted within the default grace.
    assert len(kube.pods(ns)) == 9
    # Let them go before the invariant check (a Strict gang partly bound is what this test makes).
    kube.kubectl("delete", "pods", "--all", "-n", ns, "--grace-period=0", "--force", "--wait=true")
