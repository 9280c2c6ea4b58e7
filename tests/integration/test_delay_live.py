"""``koordpy run`` holds a job's preemption back for its delay on a real kube-apiserver (issue 33, item
3c): a high-priority gang that fits only by evicting low-priority pods waits, holding nothing and
evicting nobody, and takes a node that arrives within the delay; with no node arriving it preempts
once the delay has passed, and not before.

Two nodes (4 CPUs each) run four low-priority pods of 2 CPUs that koordpy bound; the gang asks for two
members of 4 CPUs, so it fits only by evicting all four. The nodes are kwok's: a victim is deleted at
once, so an eviction shows as a Preempted Event and a pod gone (or marked DisruptionTarget), and the
waits look at all three. The delay is the job's own: koordpy's annotation on a Koordinator
(scheduler-plugins) PodGroup, and, for the node that arrives, KAI's ``spec.preemptionDelay`` too.
With the delay ignored, both tests fail at once (the low pods evicted before the members say they
wait); with the cycle not woken at the delay's end, the second times out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.builders import node, pod, podgroup, priority_class
from tests.integration.kube import Kube, Scheduler, fake, settle, wait_for, when

DELAY = 20  # seconds: long enough for case 1 to look and add a node, short enough for CI
CLASSES = [priority_class("delay-high", 1_000_000), priority_class("delay-low", 1000)]
LOW = {f"low-{i}" for i in range(4)}
MEMBERS = {"job-0", "job-1"}
WAITING = "once its preemption delay of 20 s"
LATE = 8  # seconds after the delay's end by which the gang must have preempted


def _in(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    obj["metadata"]["namespace"] = namespace
    return obj


def koordinator_gang(ns: str) -> list[dict[str, Any]]:
    """A scheduler-plugins (Koordinator) PodGroup with koordpy's per-job delay annotation."""
    group = podgroup("job", 2, annotations={"koordpy.io/preemption-delay": f"{DELAY}s"})
    return [_in(group, ns), *[_in(pod(m, cpu="4", group="job", priority_class="delay-high"), ns)
                              for m in sorted(MEMBERS)]]


def kai_gang(ns: str) -> list[dict[str, Any]]:
    """A KAI PodGroup with its own field, ``spec.preemptionDelay``."""
    group = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "job"},
             "spec": {"minMember": 2, "queue": "q", "preemptionDelay": f"{DELAY}s"}}
    return [_in(group, ns), *[_in(pod(m, cpu="4", annotations={"pod-group-name": "job"},
                                      priority_class="delay-high"), ns) for m in sorted(MEMBERS)]]


def full_cluster(kube: Kube, ns: str) -> dict[str, str]:
    """Two kwok nodes full with four low-priority pods koordpy bound; returns their uids."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}, CLASSES)
    kube.apply(fake([node(f"n{i}", cpu="4") for i in range(2)]))
    kube.apply([_in(pod(name, cpu="2", priority_class="delay-low"), ns) for name in sorted(LOW)])
    wait_for(lambda: when(kube.bound(ns).keys() >= LOW, True), "the four low pods bound")
    return {name: raw["metadata"]["uid"] for name, raw in kube.pods(ns).items()}


def evicted(kube: Kube, ns: str, uids: dict[str, str]) -> dict[str, str]:
    """Low pods evicted so far -> how it shows: Preempted Event, DisruptionTarget, deletion, gone."""
    pods = kube.pods(ns)
    out: dict[str, str] = {}
    for e in kube.events(ns):
        if e["reason"] == "Preempted" and e["involvedObject"]["name"] in uids:
            out[e["involvedObject"]["name"]] = "Preempted Event"
    for name, uid in uids.items():
        raw = pods.get(name)
        if raw is None or raw["metadata"]["uid"] != uid:
            out[name] = "gone"
        elif raw["metadata"].get("deletionTimestamp"):
            out[name] = "deletionTimestamp"
        elif any(c.get("type") == "DisruptionTarget" and c.get("status") == "True"
                 for c in (raw.get("status") or {}).get("conditions") or []):
            out[name] = "DisruptionTarget"
    return out


def nominated(kube: Kube, ns: str) -> dict[str, str]:
    return {name: raw["status"]["nominatedNodeName"] for name, raw in kube.pods(ns).items()
            if (raw.get("status") or {}).get("nominatedNodeName")}


def told(kube: Kube, ns: str, uids: dict[str, str]) -> dict[str, str]:
    """Each member's PodScheduled=False message, once both say they wait for the delay; fails at once
    if a low pod is evicted or a member nominated or bound first (the delay not honoured)."""
    said: dict[str, str] | None = None

    def check() -> dict[str, str] | str | None:
        nonlocal said
        gone, held = evicted(kube, ns, uids), nominated(kube, ns)
        bound = MEMBERS & kube.bound(ns).keys()
        if gone or held or bound:
            return f"evicted {gone}, nominated {held}, bound {sorted(bound)}"
        said = {m: kube.condition_message(m, ns) for m in sorted(MEMBERS)}
        return said if all(WAITING in s for s in said.values()) else None

    first = wait_for(check, f"both members told they wait for the delay ({WAITING!r})")
    assert isinstance(first, dict), f"before its delay of {DELAY}s, the gang did not wait: {first} (told {said})"
    return first


@pytest.mark.parametrize("gang", [koordinator_gang, kai_gang], ids=["koordinator", "kai"])
def test_a_node_that_arrives_within_the_delay_takes_the_gang_and_nobody_is_evicted(
        kube: Kube, scheduler: Scheduler, gang: Callable[[str], list[dict[str, Any]]]) -> None:
    ns = "delay-arrives"
    uids = full_cluster(kube, ns)
    kube.apply(gang(ns))
    created = time.monotonic()

    said = told(kube, ns, uids)
    assert all("would preempt in " in s for s in said.values()), list(said.items())
    events = wait_for(lambda: [e["message"] for e in kube.events(ns)
                               if e["involvedObject"]["name"] in MEMBERS and WAITING in e["message"]] or None,
                      "an Event on a member saying it waits for the delay")
    assert all("would preempt in " in m for m in events), events
    # While it waits it holds nothing and evicts nobody.
    assert settle(lambda: (evicted(kube, ns, uids), nominated(kube, ns)), 2.0) == ({}, {})
    assert not MEMBERS & kube.bound(ns).keys()

    assert time.monotonic() - created < DELAY - 5, "too slow to test a node arriving within the delay"
    kube.apply(fake([node("n-new", cpu="8")]))
    bound = wait_for(lambda: when(kube.bound(ns).keys() >= MEMBERS, kube.bound(ns)), "the gang bound on n-new")
    assert time.monotonic() - created < DELAY, "bound only after the delay: it should not have waited for it"
    assert {bound[m] for m in MEMBERS} == {"n-new"}, bound
    assert {bound[name] for name in LOW} == {"n0", "n1"}, bound
    assert evicted(kube, ns, uids) == {}
    assert nominated(kube, ns) == {}


def test_with_no_new_node_the_gang_preempts_once_its_delay_has_passed(kube: Kube, scheduler: Scheduler) -> None:
    ns = "delay-passes"
    uids = full_cluster(kube, ns)
    kube.apply(koordinator_gang(ns))
    created = time.monotonic()
    told(kube, ns, uids)
    assert settle(lambda: evicted(kube, ns, uids), 2.0) == {}

    # The PodGroup's creationTimestamp is rounded down to the second: the delay may end up to 1 s
    # before ``created`` says; the gang is woken by the clock (nothing else changes), within LATE.
    first = wait_for(lambda: evicted(kube, ns, uids) or None, "a low pod evicted once the delay has passed",
                     timeout=round(created + DELAY + LATE - time.monotonic(), 1))
    waited = time.monotonic() - created
    assert waited >= DELAY - 1.5, f"evicted after {waited:.1f}s, before the delay of {DELAY}s: {first}"
    wait_for(lambda: when(evicted(kube, ns, uids).keys() == LOW, True), "all four low pods evicted")
    bound = wait_for(lambda: when(kube.bound(ns).keys() >= MEMBERS, kube.bound(ns)), "the gang bound after preempting")
    assert {bound[m] for m in MEMBERS} == {"n0", "n1"}, bound
    preempted = [e for e in kube.events(ns) if e["reason"] == "Preempted"]
    assert {e["involvedObject"]["name"] for e in preempted} == LOW, preempted
