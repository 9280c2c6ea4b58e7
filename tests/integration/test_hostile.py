"""Hostile but schema-valid objects against ``koordpy run`` on a real API server.

Each step applies objects the API server accepts but that once broke the scheduler (a
quantity that overflowed the parser, a gang name of 100 KB, a GangGroup reaching into another
namespace...), checks what that step promises, and then the scheduler's health: still
running, no traceback or failed cycle in its log, no node over its allocatable, and a small
valid gang still binds within 10 s. Every step runs alone on a fresh cluster and, in
``test_all_hostile_objects_in_one_cluster``, on top of all the steps before it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.builders import node, pod, podgroup
from tests.integration.kube import PG, Kube, Scheduler, check_invariants, fake, settle, wait_for

ANN = "gang.scheduling.koordinator.sh/"
CANARY = {"koordpy-test/role": "canary"}
DEDICATED = {"koordpy-test/role": "dedicated"}
CANARY_SECONDS = 10.0
PG_API = "scheduling.sigs.k8s.io/v1alpha1"


def in_ns(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    obj["metadata"]["namespace"] = namespace
    return obj


def small(name: str, **kw: Any) -> dict[str, Any]:
    """A pod that fits anywhere, pinned to the canary nodes unless told otherwise."""
    kw.setdefault("nodeSelector", CANARY)
    return pod(name, cpu="100m", memory="64Mi", **kw)


def raw_podgroup(name: str, spec: dict[str, Any], annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": PG_API, "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}}, "spec": spec}


def setup(kube: Kube) -> None:
    kube.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in ("team-a", "team-b")])
    kube.apply(fake([node("canary-0", labels=CANARY), node("canary-1", labels=CANARY),
                     node("dedicated", cpu="8", labels=DEDICATED)]))


class Health:
    """The checks after every step."""

    def __init__(self, kube: Kube, scheduler: Scheduler) -> None:
        self.kube = kube
        self.scheduler = scheduler
        self.canaries = 0

    def log(self) -> str:
        return self.scheduler.log.read_text(errors="replace")

    def check(self, after: str) -> None:
        """Every check runs, so one failure tells whether the others held (a logged traceback
        with scheduling going on is not a scheduler that stopped)."""
        problems = []
        if not self.scheduler.alive():
            problems.append(f"koordpy run exited:\n{self.log()[-4000:]}")
        escaped = [line for line in self.log().splitlines()
                   if "Traceback" in line or "scheduling cycle failed" in line or '"level": "error"' in line]
        if escaped:
            problems.append("the scheduler's log has tracebacks or errors:\n" +
                            "\n".join(line[:3000] for line in escaped[-3:]))
        problems += check_invariants(self.kube)
        if self.scheduler.alive():
            problems += self._canary()
        assert not problems, f"after {after}:\n" + "\n".join(f"- {p}" for p in problems)

    def _canary(self) -> list[str]:
        self.canaries += 1
        gang = f"canary-{self.canaries}"
        members = [f"{gang}-{i}" for i in range(2)]
        self.kube.apply(podgroup(gang, 2), [small(m, group=gang) for m in members])
        deadline = time.monotonic() + CANARY_SECONDS
        bound: dict[str, str] = {}
        while time.monotonic() < deadline:
            bound = self.kube.bound()
            if all(m in bound for m in members):
                return []
            time.sleep(0.2)
        missing = {m: self.kube.condition_message(m)[:500] or "(no condition)" for m in members if m not in bound}
        return [f"the 2-pod gang {gang} did not bind within {CANARY_SECONDS:g}s; unbound: {missing}"]


def pending_with_condition(kube: Kube, name: str, namespace: str = "default") -> str:
    """Waits for the pod's PodScheduled=False message, and checks the pod stayed unbound."""
    msg = wait_for(lambda: kube.condition_message(name, namespace), f"a condition on {namespace}/{name}")
    assert name not in kube.bound(namespace), f"{namespace}/{name} was bound"
    return msg


def events_about(kube: Kube, uid: str, reason: str, namespace: str = "default") -> list[dict[str, Any]]:
    return [e for e in kube.events(namespace)
            if e["reason"] == reason and (e.get("involvedObject") or {}).get("uid") == uid]


def events_of(kube: Kube, uid: str, reason: str) -> Callable[[], list[dict[str, Any]]]:
    return lambda: events_about(kube, uid, reason)


# -- the steps ---------------------------------------------------------------------------------


def huge_min_member(kube: Kube) -> None:
    kube.apply(podgroup("huge-min", 2147483647), small("huge-min-0", group="huge-min"))
    assert "minMember: 2147483647" in pending_with_condition(kube, "huge-min-0")


def huge_schedule_timeout(kube: Kube) -> None:
    kube.apply(raw_podgroup("huge-timeout-0", {"minMember": 2, "scheduleTimeoutSeconds": 2147483647}),
               [small(f"huge-timeout-0-{j}", group="huge-timeout-0") for j in range(2)])
    wait_for(lambda: sum(k.startswith("huge-timeout-") for k in kube.bound()) == 2, "the huge-timeout gang bound")
    # Beyond int32 (the field's Go type) the CRD's schema refuses it where the user applies it.
    try:
        kube.apply(raw_podgroup("huge-timeout-1", {"minMember": 2, "scheduleTimeoutSeconds": 9223372036854775807}))
    except RuntimeError as exc:
        assert "scheduleTimeoutSeconds" in str(exc), exc
    else:
        raise AssertionError("the API server accepted an int64 scheduleTimeoutSeconds")


def odd_min_resources(quantity: str) -> Callable[[Kube], None]:
    def step(kube: Kube) -> None:
        name = "minres-" + "".join(c if c.isalnum() else "-" for c in quantity.lower())
        kube.apply(raw_podgroup(name, {"minMember": 1, "minResources": {"cpu": quantity, "memory": quantity}}),
                   small(f"{name}-0", group=name))
        # Far more than the cluster has, or no quantity at all: either way the pod waits, saying why.
        pending_with_condition(kube, f"{name}-0")

    step.__name__ = f"min_resources_{quantity}"
    return step


def bad_podgroup_annotation(key: str, value: str) -> Callable[[Kube], None]:
    def step(kube: Kube) -> None:
        name = f"bad-pg-{key.rsplit('-', 1)[-1]}"
        kube.apply(raw_podgroup(name, {"minMember": 1}, {ANN + key: value}), small(f"{name}-0", group=name))
        msg = pending_with_condition(kube, f"{name}-0")
        assert name in msg, msg
        uid = kube.get(PG, name)["metadata"]["uid"]
        wait_for(lambda: events_about(kube, uid, "InvalidPodGroup"), f"an InvalidPodGroup event on {name}")

    step.__name__ = f"podgroup_annotation_{key}"
    return step


def huge_pod_count_multiple(kube: Kube) -> None:
    spec = {"gatherStrategy": [{"layer": "NodeTopologyLayer", "strategy": "MustGather"}],
            "podCountMultiple": 100000000000000000000}
    kube.apply(raw_podgroup("multiple", {"minMember": 1}, {ANN + "network-topology-spec": json.dumps(spec)}),
               small("multiple-0", group="multiple"))
    pending_with_condition(kube, "multiple-0")


def bad_pod_annotation(key: str, value: str) -> Callable[[Kube], None]:
    def step(kube: Kube) -> None:
        name = f"bad-ann-{key.rsplit('-', 1)[-1]}"
        ann = {ANN + "name": name, ANN + "min-available": "1", ANN + key: value}
        kube.apply(small(name, annotations=ann))
        msg = pending_with_condition(kube, name)
        assert ANN + key in msg, msg
        uid = kube.get("pod", name)["metadata"]["uid"]
        wait_for(lambda: events_about(kube, uid, "InvalidPod"), f"an InvalidPod event on {name}")

    step.__name__ = f"pod_annotation_{key}"
    return step


def topology_parent_cycle(kube: Kube) -> None:
    labels = ["network.topology.nvidia.com/spine", "network.topology.nvidia.com/block"]
    kube.apply({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
                "metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
                    {"topologyLayer": "SpineLayer", "parentTopologyLayer": "BlockLayer", "labelKey": [labels[0]]},
                    {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": [labels[1]]}]}})

    def invalid() -> list[dict[str, Any]] | None:
        status = kube.get("clusternetworktopology", "default", None).get("status") or {}
        conds = [c for c in status.get("conditions") or [] if c["type"] == "Valid" and c["status"] == "False"]
        return conds or None

    wait_for(invalid, "the ClusterNetworkTopology marked Valid=False")


def huge_memory(quantity: str) -> Callable[[Kube], None]:
    def step(kube: Kube) -> None:
        name = "memory-" + "".join(c if c.isalnum() else "-" for c in quantity.lower())
        kube.apply(pod(name, cpu="100m", memory=quantity))
        pending_with_condition(kube, name)

    step.__name__ = f"memory_{quantity}"
    return step


def gang_reaching_into_another_namespace(kube: Kube) -> None:
    intruder = pod("intruder", cpu="1000", memory="64Mi", nodeSelector=CANARY, annotations={  # can never fit
        ANN + "name": "intruder", ANN + "min-available": "1", ANN + "groups": '["team-b/victim"]'})
    kube.apply(in_ns(intruder, "team-a"))
    time.sleep(1.0)  # the intruder is known before the victim arrives
    kube.apply(in_ns(podgroup("victim", 2), "team-b"),
               [in_ns(small(f"victim-{i}", group="victim"), "team-b") for i in range(2)])
    wait_for(lambda: len(kube.bound("team-b")) == 2, "team-b's gang bound", timeout=CANARY_SECONDS)
    assert kube.bound("team-a") == {}


def native_sidecars(kube: Kube) -> None:
    def with_sidecar(name: str) -> dict[str, Any]:
        p = pod(name, cpu="4", memory="1Gi", nodeSelector=DEDICATED)
        p["spec"]["initContainers"] = [{"name": "proxy", "image": "busybox", "restartPolicy": "Always",
                                        "resources": {"requests": {"cpu": "4"}}}]
        return p

    kube.apply(with_sidecar("sidecar-0"), with_sidecar("sidecar-1"))
    wait_for(lambda: any(k.startswith("sidecar-") for k in kube.bound()), "a sidecar pod bound")
    bound = settle(lambda: sorted(k for k in kube.bound() if k.startswith("sidecar-")))
    assert len(bound) == 1, f"both 8-CPU pods (4-CPU sidecar + 4-CPU container) bound to one 8-CPU node: {bound}"


def recreated_invalid_podgroup(kube: Kube) -> None:
    uids = []
    for round_ in range(2):
        kube.apply(podgroup("again", 0))
        uid = kube.get(PG, "again")["metadata"]["uid"]
        assert uid not in uids
        uids.append(uid)
        events = wait_for(events_of(kube, uid, "InvalidPodGroup"),
                          f"an InvalidPodGroup event for incarnation {round_ + 1} (uid {uid})")
        assert "spec.minMember" in events[0]["message"]
        if round_ == 0:
            kube.kubectl("delete", PG, "again", "-n", "default")
            wait_for(lambda: not kube.get(PG)["items"] or
                     all(pg["metadata"]["name"] != "again" for pg in kube.get(PG)["items"]),
                     "the PodGroup deleted")


def huge_gang_name(kube: Kube) -> None:
    kube.apply(small("long-name", annotations={ANN + "name": "g" * 100_000, ANN + "min-available": "2"}))
    msg = pending_with_condition(kube, "long-name")
    # The name is refused without being echoed; whatever the message, it stays within the caps
    # (the cap itself, on a message that long, is tests/controller/test_controller_units.py's).
    assert len(msg.encode()) <= 4096 and "must be no more than 253 characters" in msg, \
        f"{len(msg)} characters: {msg[:200]}..."
    events = wait_for(lambda: [e for e in kube.events() if (e.get("involvedObject") or {}).get("name") == "long-name"
                               and e["reason"] == "FailedScheduling"], "a FailedScheduling event on long-name")
    assert all(len(e["message"].encode()) <= 1024 for e in events)


def churn(kube: Kube) -> None:
    for i in range(5):
        kube.apply(podgroup(f"churn-{i}", 2), [small(f"churn-{i}-{j}", group=f"churn-{i}") for j in range(2)],
                   podgroup(f"churn-bad-{i}", 0))
        kube.kubectl("delete", PG, f"churn-{i}", f"churn-bad-{i}", "--wait=false")
        kube.kubectl("delete", "pod", f"churn-{i}-0", f"churn-{i}-1", "--grace-period=0", "--force",
                     "--wait=false")
    wait_for(lambda: not any(k.startswith("churn-") for k in kube.pods()), "the churned pods gone")


STEPS: list[Callable[[Kube], None]] = [
    huge_min_member,
    huge_schedule_timeout,
    *(odd_min_resources(q) for q in ("1e999990", "1e999999", "9Ei", "1e3Ki")),
    bad_podgroup_annotation("groups", "[not json"),
    bad_podgroup_annotation("min-available", "many"),
    bad_podgroup_annotation("network-topology-spec", "{not json"),
    huge_pod_count_multiple,
    bad_pod_annotation("groups", "[not json"),
    bad_pod_annotation("min-available", "many"),
    topology_parent_cycle,
    huge_memory("9Pi"),
    gang_reaching_into_another_namespace,
    native_sidecars,
    recreated_invalid_podgroup,
    huge_gang_name,
    churn,
]


@pytest.mark.parametrize("step", STEPS, ids=[s.__name__ for s in STEPS])
def test_hostile_object(kube: Kube, scheduler: Scheduler, step: Callable[[Kube], None]) -> None:
    setup(kube)
    health = Health(kube, scheduler)
    health.check("setting up")
    step(kube)
    health.check(step.__name__)


def test_all_hostile_objects_in_one_cluster(kube: Kube, scheduler: Scheduler) -> None:
    setup(kube)
    health = Health(kube, scheduler)
    health.check("setting up")
    for step in STEPS:
        step(kube)
        health.check(step.__name__)
