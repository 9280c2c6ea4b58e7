"""The workload-aware scheduling API of Kubernetes v1.37 is served by the local control plane.

e2e/controlplane/up.sh turns on the gates GenericWorkload, TopologyAwareWorkloadScheduling,
WorkloadWithJob, PodGroupPreemptionPolicy and CompositePodGroup in kube-apiserver and
kube-controller-manager and serves scheduling.k8s.io/v1beta1 (Workload, PodGroup) and v1alpha3
(CompositePodGroup). A gate that is off makes the API server drop its fields silently, so each is
checked by a field it guards coming back as written: a pod's ``spec.schedulingGroup``
(GenericWorkload), a PodGroup's ``schedulingConstraints`` (TopologyAwareWorkloadScheduling) and
``parentCompositePodGroupName`` (CompositePodGroup), and the Workload and PodGroup the Job controller
makes for a Job (WorkloadWithJob).
"""

from __future__ import annotations

import json
from typing import Any

from tests.integration.kube import Kube, wait_for, when

V1BETA1 = "scheduling.k8s.io/v1beta1"
V1ALPHA3 = "scheduling.k8s.io/v1alpha3"
WORKLOADS = "workloads.scheduling.k8s.io"
PODGROUPS = "podgroups.scheduling.k8s.io"
COMPOSITES = "compositepodgroups.scheduling.k8s.io"
NOBODY = "no-scheduler-here"  # no scheduler runs under this name: the pods stay as written


def served(kube: Kube, group_version: str) -> set[str]:
    raw = json.loads(kube.kubectl("get", "--raw", f"/apis/{group_version}"))
    return {r["name"] for r in raw["resources"]}


def test_the_api_server_serves_workload_podgroup_and_compositepodgroup(kube: Kube) -> None:
    assert {"workloads", "podgroups", "podgroups/status"} <= served(kube, V1BETA1)
    assert "compositepodgroups" in served(kube, V1ALPHA3)
    kinds = {line.split()[0]: line.split()[1] for line in
             kube.kubectl("api-resources", "--api-group", "scheduling.k8s.io", "--no-headers",
                          "-o", "wide").splitlines()}
    assert kinds["workloads"] == V1BETA1 and kinds["podgroups"] == V1BETA1
    assert kinds["compositepodgroups"] == V1ALPHA3


def test_a_pods_scheduling_group_and_the_gated_podgroup_fields_are_kept(kube: Kube) -> None:
    workload = {"apiVersion": V1BETA1, "kind": "Workload", "metadata": {"name": "train", "namespace": "default"},
                "spec": {"compositePodGroupTemplates": [{
                             "name": "replicas", "schedulingPolicy": {"gang": {"minGroupCount": 2}},
                             "podGroupTemplates": [{"name": "workers",
                                                    "schedulingPolicy": {"gang": {"minCount": 2}}}]}]}}
    composite = {"apiVersion": V1ALPHA3, "kind": "CompositePodGroup",
                 "metadata": {"name": "train-replicas", "namespace": "default"},
                 "spec": {"workloadRef": {"workloadName": "train", "templateName": "replicas"},
                          "schedulingPolicy": {"gang": {"minGroupCount": 2}}}}
    group = {"apiVersion": V1BETA1, "kind": "PodGroup", "metadata": {"name": "train-0", "namespace": "default"},
             "spec": {"parentCompositePodGroupName": "train-replicas",
                      "workloadRef": {"workloadName": "train", "templateName": "workers"},
                      "schedulingPolicy": {"gang": {"minCount": 2}},
                      "schedulingConstraints": {"topology": [{"key": "topology.kubernetes.io/zone"}]}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker-0", "namespace": "default"},
           "spec": {"schedulerName": NOBODY, "schedulingGroup": {"podGroupName": "train-0"},
                    "containers": [{"name": "main", "image": "busybox"}]}}
    kube.apply(workload, composite, group, pod)
    assert kube.get(COMPOSITES, "train-replicas")["spec"]["workloadRef"] == {"workloadName": "train",
                                                                             "templateName": "replicas"}
    spec = kube.get(PODGROUPS, "train-0")["spec"]
    assert spec["parentCompositePodGroupName"] == "train-replicas"
    assert spec["schedulingConstraints"] == {"topology": [{"key": "topology.kubernetes.io/zone"}]}
    assert spec["schedulingPolicy"] == {"gang": {"minCount": 2}}
    assert kube.get("pod", "worker-0")["spec"]["schedulingGroup"] == {"podGroupName": "train-0"}


def test_the_job_controller_makes_a_workload_and_podgroup_that_its_pods_name(kube: Kube) -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "tune", "namespace": "default"},
           "spec": {"parallelism": 2, "completions": 2, "template": {"spec": {
               "schedulerName": NOBODY, "restartPolicy": "Never",
               "containers": [{"name": "main", "image": "busybox"}]}}}}
    kube.apply(job)
    uid = kube.get("jobs.batch", "tune")["metadata"]["uid"]

    def owned(resource: str) -> list[dict[str, Any]]:
        return [o for o in kube.get(resource)["items"]
                if any(r["uid"] == uid and r.get("controller") for r in o["metadata"].get("ownerReferences") or [])]

    [workload] = wait_for(lambda: owned(WORKLOADS) or None, "the Job's Workload")
    assert workload["spec"]["controllerRef"]["kind"] == "Job" and workload["spec"]["controllerRef"]["name"] == "tune"
    [group] = wait_for(lambda: owned(PODGROUPS) or None, "the Job's PodGroup")
    assert group["spec"]["workloadRef"]["workloadName"] == workload["metadata"]["name"]
    pods = wait_for(lambda: when(len(owned("pods")) == 2, owned("pods")), "the Job's two pods")
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {group["metadata"]["name"]}
