"""Issue 34, live: Kueue's ``waitForPodsReady`` in front of ``koordpy run``. Kueue v0.19 turns it on by
default with a 30-minute timeout; this module's Kueue waits 8 s (``KUEUE_CONFIG``), so that a gang
koordpy cannot place whole is requeued within the test. What the two sides do, as
``docs/design.md`` ("Behind Kueue") splits them: koordpy binds no member of a gang it cannot place
whole, and holds nothing for it while it waits; Kueue, not koordpy, ends the wait (it evicts the
workload, suspends the Job, whose pods are deleted, and requeues it with back-off)."""

from __future__ import annotations

from tests.builders import node, pod
from tests.integration.frontends import Frontends
from tests.integration.kube import Kube, Scheduler, settle, wait_for, when
from tests.integration.test_kueue_live import (
    GPU,
    NS,
    TIMEOUT,
    cleanup,
    condition,
    gang_job,
    job_pods,
    kueue_workloads,
    queues,
)
from tests.integration.test_preemption import held

# Kueue's Configuration for this module (the fixture sets it over its own): 8 s to get every pod
# ready, and a back-off long enough that the requeued workload is not admitted again within the test.
KUEUE_CONFIG = {"waitForPodsReady": {"timeout": "8s", "recoveryTimeout": "8s", "blockAdmission": False,
                                     "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 300}}}
OTHERS = "kueue-ready-others"


def test_a_gang_koordpy_cannot_place_whole_is_requeued_by_kueue_and_holds_nothing(
        frontends: Frontends, kube: Kube, scheduler: Scheduler) -> None:
    """Kueue's quota (16 GPUs) admits a Job of 4 pods x 4 GPUs that the nodes (3 x 4 GPUs) cannot hold
    whole: 3 of its pods would fit, and koordpy binds none. After Kueue's 8 s it evicts the workload
    (PodsReadyTimeout), the Job is suspended and its pods go, and the workload waits in Kueue's
    back-off. Nothing of the room is kept for it: a gang of 3 pods x 4 GPUs that Kueue did not admit
    is bound at once, on all three nodes."""
    try:
        kube.apply(queues(16), held([node(f"g{i}", cpu="16", memory="64Gi", extra={GPU: "4"}) for i in range(3)]),
                   {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OTHERS}})
        wait_for(lambda: condition(kube.get("clusterqueues.kueue.x-k8s.io", "shared", None), "Active")
                 .get("status") == "True", "the ClusterQueue active")
        kube.apply(gang_job("big", "team-a", pods=4, gpus=4))
        wait_for(lambda: when(condition(kueue_workloads(kube).get("big", {}), "Admitted").get("status") == "True",
                              True), "Kueue admits the Job (its quota holds it)", timeout=TIMEOUT)
        pods = wait_for(lambda: when(len(job_pods(kube, "big")) == 4, job_pods(kube, "big")), "the Job's 4 pods")
        # koordpy has looked at them (each says why it waits) before Kueue's 8 s run out.
        wait_for(lambda: len(job_pods(kube, "big")) == 4 and all(
            condition(p, "PodScheduled").get("status") == "False" for p in job_pods(kube, "big").values()),
            "koordpy's answer on the Job's pods", timeout=8.0)
        # koordpy places none: the gang is not whole; and it nominates nothing (nothing to preempt).
        for p in settle(lambda: job_pods(kube, "big"), 3.0).values():
            assert not p["spec"].get("nodeName") and not (p.get("status") or {}).get("nominatedNodeName"), p
        assert len(pods) == 4

        def evicted() -> dict[str, object] | None:
            w = kueue_workloads(kube).get("big", {})
            ev = condition(w, "Evicted")
            return when(ev.get("status") == "True" and ev.get("reason") == "PodsReadyTimeout", w)

        workload = wait_for(evicted, "Kueue evicting the workload for PodsReadyTimeout", timeout=TIMEOUT)
        wait_for(lambda: when(kube.get("jobs.batch", "big", NS)["spec"].get("suspend") is True
                              and not job_pods(kube, "big"), True),
                 "the Job suspended and its pods gone", timeout=TIMEOUT)
        # Kueue releases the quota once the Job is stopped, and the workload waits out its back-off.
        wait_for(lambda: condition(kueue_workloads(kube)["big"], "QuotaReserved").get("status") == "False",
                 "Kueue releasing the workload's quota", timeout=TIMEOUT)
        state = (kueue_workloads(kube)["big"].get("status") or {}).get("requeueState") or {}
        assert state.get("count") == 1 and state.get("requeueAt"), (state, workload)

        # Nothing held for the requeued gang: a gang of 3 pods Kueue did not admit fills the nodes.
        group = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": "fill", "namespace": OTHERS}, "spec": {"minMember": 3}}
        fill = [pod(f"fill-{i}", cpu="1", memory="1Gi", group="fill") for i in range(3)]
        for raw in fill:
            raw["metadata"]["namespace"] = OTHERS
            raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", GPU: "4"}, "limits": {GPU: "4"}}
        kube.apply(group, *fill)
        where = wait_for(lambda: when(all(p["spec"].get("nodeName") for p in kube.pods(OTHERS).values())
                                      and len(kube.pods(OTHERS)) == 3,
                                      {n: p["spec"]["nodeName"] for n, p in kube.pods(OTHERS).items()}),
                         "the other gang bound", timeout=TIMEOUT)
        assert sorted(where.values()) == ["g0", "g1", "g2"], where
        # Kueue's back-off holds the workload: it is not admitted again meanwhile.
        assert condition(kueue_workloads(kube)["big"], "Admitted").get("status") != "True"
    finally:
        kube.kubectl("delete", "namespace", OTHERS, "--ignore-not-found", "--timeout=60s", check=False)
        cleanup(kube)
