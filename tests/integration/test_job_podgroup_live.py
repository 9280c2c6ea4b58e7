"""Issue 29, items 14 and 16, live: a Job's pods and the scheduler-plugins PodGroup their
``pod-group.scheduling.sigs.k8s.io`` label names, on the v1.37 control plane with ``WorkloadWithJob``
on (the Job controller also makes a ``scheduling.k8s.io`` PodGroup and names it in every pod's
``spec.schedulingGroup``). kwok runs the pods and completes a Job's pods as soon as they run."""

from __future__ import annotations

from typing import Any

from tests.builders import node, podgroup
from tests.integration.kube import PG, Kube, Scheduler, fake, settle, wait_for, when

NOT_FOUND = "PodGroup default/trian not found"


def job(name: str, pods: int, group: str) -> dict[str, Any]:
    """A plain Job of ``pods`` pods of 1 CPU whose template carries the scheduler-plugins label."""
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": "default"},
            "spec": {"completions": pods, "parallelism": pods, "template": {
                "metadata": {"labels": {"pod-group.scheduling.sigs.k8s.io": group}},
                "spec": {"schedulerName": "koordpy", "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "busybox",
                                         "resources": {"requests": {"cpu": "1", "memory": "64Mi"}}}]}}}}


def job_pods(kube: Kube, name: str) -> dict[str, dict[str, Any]]:
    return {n: p for n, p in kube.pods().items() if p["metadata"].get("labels", {}).get("job-name") == name}


def test_job_pods_whose_label_names_a_missing_podgroup_wait_for_it(kube: Kube, scheduler: Scheduler) -> None:
    """Item 14. The label names ``trian`` (a typo: no such PodGroup). The pods also name the Job's
    own ``scheduling.k8s.io`` PodGroup, which exists; still they wait, as bare pods with that label
    do, with the reason on each pod and an Event, and bind once the PodGroup is created."""
    kube.apply(fake([node("n0", cpu="4")]))
    kube.apply(job("trainer", 2, "trian"))
    pods = wait_for(lambda: when(len(job_pods(kube, "trainer")) == 2, job_pods(kube, "trainer")), "the Job's 2 pods")
    # The premise: the Job controller names its own PodGroup in each pod.
    assert all(p["spec"].get("schedulingGroup", {}).get("podGroupName") for p in pods.values()), pods
    wait_for(lambda: all(kube.condition_message(n).startswith(NOT_FOUND) for n in pods), "the pods told why they wait")
    assert settle(kube.bound, 3.0) == {}
    told = {e["involvedObject"]["name"] for e in kube.events()
            if e["reason"] == "FailedScheduling" and e["message"].startswith(NOT_FOUND)}
    assert told == set(pods), told
    kube.apply(podgroup("trian", 2))
    # A pod keeps its node once it Succeeded, which kwok makes it at once.
    wait_for(lambda: set(pods) <= kube.bound().keys(), "the pods bound once their PodGroup exists")


def test_a_podgroup_is_finished_once_its_job_succeeded(kube: Kube, scheduler: Scheduler) -> None:
    """Item 16. A Job of 4 pods in the PodGroup ``pi`` (minMember 4); kwok runs and completes them.
    The status koordpy writes ends ``Finished`` with the 4 pods counted as succeeded, not at the
    ``Running, running: 4, succeeded: 0`` (or ``Scheduling, scheduled: 3``) it last wrote while
    they ran."""
    kube.apply(fake([node("n0", cpu="4"), node("n1", cpu="4")]))
    kube.apply(podgroup("pi", 4), job("pi", 4, "pi"))

    def finished() -> dict[str, Any] | None:
        status: dict[str, Any] = kube.get(PG, "pi").get("status") or {}
        return when(status.get("phase") == "Finished", status)

    status = wait_for(finished, "the PodGroup Finished", timeout=60.0)
    assert (status["scheduled"], status["running"], status["succeeded"], status["failed"]) == (4, 0, 4, 0), status
    assert all(p["status"].get("phase") == "Succeeded" for p in job_pods(kube, "pi").values())
    # And it stays so (nothing rewrites it while the finished pods stand).
    assert settle(lambda: (kube.get(PG, "pi").get("status") or {}).get("phase"), 3.0) == "Finished"
