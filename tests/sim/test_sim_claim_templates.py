"""The simulation plays kube-controller-manager's ResourceClaim controller: a pod's (or a Workload
PodGroup's) ResourceClaimTemplate becomes a claim named ``<owner>-<claim>``, owned by it, recorded in
its ``resourceClaimStatuses``; a PodGroup member whose entry is the group's shares the group's claim."""

from __future__ import annotations

from typing import Any

from koordpy.api.dra import POD_CLAIM_NAME
from koordpy.sim.claims import generated_name
from koordpy.sim.simulator import World
from tests.builders import node, pod

GPU = {"name": "gpu", "resourceClaimTemplateName": "gpu-t"}


def template(name: str = "gpu-t", count: int = 8) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"metadata": {"annotations": {"team": "a"}},
                     "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
                         "deviceClassName": "gpu", "count": count}}]}}}}


def claiming(name: str, *entries: dict[str, Any], group: str = "") -> dict[str, Any]:
    p = pod(name, cpu="1")
    p["metadata"]["uid"] = f"uid-{name}"
    p["spec"]["resourceClaims"] = list(entries)
    if group:
        p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


def world(*objects: dict[str, Any]) -> World:
    return World.from_objects([("in.yaml", o) for o in (node("n0"), *objects)])


def test_a_pods_template_becomes_its_own_claim() -> None:
    w = world(template(), claiming("p", GPU))
    claim = w.devices.claims["default/p-gpu"]
    assert claim.owner == ("Pod", "p", "uid-p")
    assert claim.annotations == {"team": "a", POD_CLAIM_NAME: "gpu"}
    request = claim.spec.requests[0].exactly
    assert request is not None and request.count == 8
    assert w.pods["default/p"].claim_statuses == {"gpu": "p-gpu"}
    assert any("ResourceClaim default/p-gpu was created from ResourceClaimTemplate default/gpu-t for Pod default/p"
               in said and said.startswith("in.yaml") for said in w.created)
    snapshot = w.snapshot(frozenset({"koordpy"}))
    assert snapshot.devices.claims["default/p-gpu"] is claim and "default/gpu-t" in snapshot.devices.templates


def test_nothing_is_made_for_a_missing_template_a_recorded_status_or_a_claim_already_owned() -> None:
    assert world(claiming("p", GPU)).devices.claims == {}
    recorded = claiming("q", GPU)
    recorded["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "q-gpu-x7k2p"}]}
    owned = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "r-gpu-abcde", "namespace": "default", "annotations": {POD_CLAIM_NAME: "gpu"},
                          "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "r", "uid": "uid-r",
                                               "controller": True}]},
             "spec": template()["spec"]["spec"]}
    w = world(template(), recorded, claiming("r", GPU), owned)
    assert set(w.devices.claims) == {"default/r-gpu-abcde"}
    assert w.pods["default/q"].claim_statuses == {"gpu": "q-gpu-x7k2p"}
    assert w.pods["default/r"].claim_statuses == {"gpu": "r-gpu-abcde"}


def podgroup(*claims: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default", "uid": "uid-train"},
            "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": list(claims)}}


def test_a_podgroups_template_claim_is_shared_by_the_members_naming_it_alike() -> None:
    own = {"name": "gpu", "resourceClaimTemplateName": "other-t"}  # same name, another template: its own claim
    w = world(template(), template("other-t", 1), podgroup(GPU),
              claiming("a", GPU, group="train"), claiming("b", GPU, group="train"), claiming("c", own, group="train"))
    claim = w.devices.claims["default/train-gpu"]
    assert claim.owner == ("PodGroup", "train", "uid-train") and claim.annotations[POD_CLAIM_NAME] == "gpu"
    assert w.workload_podgroups["default/train"].claim_statuses == {"gpu": "train-gpu"}
    assert w.pods["default/a"].claim_statuses == w.pods["default/b"].claim_statuses == {"gpu": "train-gpu"}
    assert w.pods["default/c"].claim_statuses == {"gpu": "c-gpu"}
    assert set(w.devices.claims) == {"default/train-gpu", "default/c-gpu"}


def test_long_names_are_cut_as_the_controller_cuts_them() -> None:
    assert generated_name("p", "gpu") == "p-gpu"
    long_pod, long_claim = "x" * 60, "gpu-claim"
    name = generated_name(long_pod, long_claim)
    base = len(long_pod) + len(long_claim) + 2
    assert name == f"{long_pod[:60 * 57 // base]}-{long_claim[:9 * 57 // base]}"
    assert len(name) <= 57 and not name.endswith("-")
