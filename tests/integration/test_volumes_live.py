"""Volumes end to end on the real API server: a WaitForFirstConsumer claim bound at PreBind.

Dynamic provisioning needs no controller: the test plays the provisioner (it sees the claim's
``volume.kubernetes.io/selected-node``, creates a PersistentVolume on that node and binds the claim
as the PV controller would). A static PersistentVolume is bound by the PV controller of
kube-controller-manager after koordpy sets its claimRef: that test skips only when the control plane
runs no kube-controller-manager (e2e/controlplane/up.sh writes ``controller-manager.pid`` when it does).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.builders import node, pod
from tests.integration.kube import ControlPlane, Kube, Scheduler, fake, wait_for

PROVISIONER = "provisioner.koordpy.test"


@pytest.fixture(autouse=True)
def _no_protection_left(kube: Kube) -> Iterator[None]:
    """Claims and volumes carry protection finalizers that only kube-controller-manager removes: they
    are dropped after each test, so that a control plane without it does not keep them forever."""
    yield
    for kind, ns in (("pvc", ["-n", "default"]), ("pv", [])):
        for item in kube.get(kind, namespace="default" if ns else None)["items"]:
            kube.kubectl("patch", kind, item["metadata"]["name"], *ns, "--type=merge", "-p",
                         '{"metadata": {"finalizers": null}}', check=False)
            kube.kubectl("delete", kind, item["metadata"]["name"], *ns, "--wait=false", check=False)


def _class(name: str, provisioner: str) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
            "provisioner": provisioner, "volumeBindingMode": "WaitForFirstConsumer"}


def _claim(name: str, cls: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"storageClassName": cls, "accessModes": ["ReadWriteOnce"],
                     "resources": {"requests": {"storage": "1Gi"}}}}


def _volume(name: str, cls: str, on: str, claim: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"storageClassName": cls, "capacity": {"storage": "2Gi"}, "accessModes": ["ReadWriteOnce"],
                            "hostPath": {"path": f"/tmp/{name}"},
                            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [on]}]}]}}}
    if claim is not None:
        spec["claimRef"] = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": "default",
                            "name": claim["metadata"]["name"], "uid": claim["metadata"]["uid"]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def _user(name: str, claim: str) -> dict[str, Any]:
    return pod(name, cpu="1", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": claim}}])


def test_dynamic_provisioning_selected_node_then_bound(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("node-a", cpu="4"), node("node-b", cpu="4")]), _class("fast", PROVISIONER),
               _claim("data", "fast"))
    # Only node-b has room for the pod: the node the claim is provisioned for must be the pod's.
    kube.apply(pod("filler", cpu="4", nodeSelector={"kubernetes.io/hostname": "node-a"}))
    wait_for(lambda: kube.bound().get("filler"), "the filler bound")
    kube.apply(_user("user", "data"))
    selected = wait_for(lambda: (kube.get("pvc", "data")["metadata"].get("annotations") or {}).get(
        "volume.kubernetes.io/selected-node"), "koordpy to select a node for the claim")
    assert selected == "node-b"
    assert "user" not in kube.bound()  # PreBind waits for the provisioner before the pod is bound
    # The provisioner: a volume on the selected node, bound to the claim.
    claim = kube.get("pvc", "data")
    kube.apply(_volume("pv-data", "fast", selected, claim))
    kube.kubectl("patch", "pv", "pv-data", "--subresource=status", "--type=merge", "-p",
                 '{"status": {"phase": "Bound"}}')
    kube.kubectl("patch", "pvc", "data", "-n", "default", "--type=merge", "-p",
                 '{"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}, '
                 '"spec": {"volumeName": "pv-data"}}')
    kube.kubectl("patch", "pvc", "data", "-n", "default", "--subresource=status", "--type=merge", "-p",
                 '{"status": {"phase": "Bound"}}')
    wait_for(lambda: kube.bound().get("user") == "node-b", "the pod bound once its claim is", timeout=30)


def test_missing_claim_waits_with_kube_schedulers_message_and_binds_once_it_exists(
        kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("node-a", cpu="4")]), _class("fast", PROVISIONER), _user("user", "later"))
    wait_for(lambda: kube.condition_message("user") == (
        '0/1 nodes are available: persistentvolumeclaim "later" not found.'), "the pod's condition")
    kube.apply(_claim("later", "fast"))
    wait_for(lambda: (kube.get("pvc", "later")["metadata"].get("annotations") or {}).get(
        "volume.kubernetes.io/selected-node") == "node-a", "the claim appearing to wake the pod")


def test_static_volume_is_bound_by_the_pv_controller(controlplane: ControlPlane, kube: Kube,
                                                     scheduler: Scheduler) -> None:
    if not (controlplane.dir / "controller-manager.pid").exists():
        pytest.skip("this control plane runs no kube-controller-manager, whose PV controller completes the bind")
    kube.apply(fake([node("node-a", cpu="4"), node("node-b", cpu="4")]),
               _class("local", "kubernetes.io/no-provisioner"), _volume("local-b", "local", "node-b"),
               _claim("data", "local"))
    kube.apply(_user("user", "data"))
    wait_for(lambda: kube.bound().get("user") == "node-b", "the pod bound to the volume's node", timeout=60)
    assert kube.get("pvc", "data")["spec"]["volumeName"] == "local-b"
    assert kube.get("pv", "local-b", None)["spec"]["claimRef"]["name"] == "data"
