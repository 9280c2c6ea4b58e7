"""Pods' and Workload PodGroups' DRA claims (spec.resourceClaims, containers' resources.claims, the
claim statuses) parse as kube-apiserver v1.37.2 accepts them."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api import ParseError, Pod
from koordpy.api.dra import PodClaim
from koordpy.api.workload import WorkloadPodGroup
from tests.builders import pod


def with_claims(p: dict[str, Any], *claims: dict[str, Any]) -> dict[str, Any]:
    p["spec"]["resourceClaims"] = list(claims)
    return p


def uses(p: dict[str, Any], *entries: dict[str, Any], section: str = "containers") -> dict[str, Any]:
    if section == "initContainers":
        p["spec"]["initContainers"] = [{"name": "init", "image": "busybox"}]
    p["spec"][section][0].setdefault("resources", {})["claims"] = list(entries)
    return p


GPU = {"name": "gpu", "resourceClaimTemplateName": "gpu-t"}
NIC = {"name": "nic", "resourceClaimName": "shared-nic"}


def test_a_pods_claims_statuses_and_extended_claim() -> None:
    raw = uses(with_claims(pod("p"), GPU, NIC), {"name": "gpu"}, {"name": "nic", "request": "fast"})
    raw["status"] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2"}],
                     "extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-abcde",
                                                     "requestMappings": []}}
    p = Pod.from_raw(raw)
    assert p.claims == (PodClaim("gpu", template="gpu-t"), PodClaim("nic", claim="shared-nic"))
    assert p.resource_claims == ("gpu", "nic")
    assert p.claim_statuses == {"gpu": "p-gpu-x7k2"}
    assert p.extended_claim == "p-extended-resources-abcde"
    none_needed = with_claims(pod("q"), GPU)
    none_needed["status"] = {"resourceClaimStatuses": [{"name": "gpu"}]}
    assert Pod.from_raw(none_needed).claim_statuses == {"gpu": ""}


def test_pods_alike_share_one_claims_tuple_and_no_statuses_map() -> None:
    a, b = (Pod.from_raw(with_claims(pod(n), GPU)) for n in ("a", "b"))
    assert a.claims is b.claims
    assert a.claim_statuses is b.claim_statuses and Pod.from_raw(pod("c")).claims == ()


@pytest.mark.parametrize(("claims", "field", "words"), [
    ([{"name": "gpu"}], "spec.resourceClaims[0]", "must specify one of"),
    ([{"name": "gpu", "resourceClaimName": "a", "resourceClaimTemplateName": "b"}], "spec.resourceClaims[0]",
     "at most one of"),
    ([GPU, GPU], "spec.resourceClaims[1].name", "duplicate"),
    ([{"name": "GPU", "resourceClaimName": "a"}], "spec.resourceClaims[0].name", "RFC 1123"),
    ([{"name": "gpu", "resourceClaimName": "Not_A_Name"}], "spec.resourceClaims[0].resourceClaimName", "RFC 1123"),
    ([{"name": "gpu", "resourceClaimTemplateName": ""}], "spec.resourceClaims[0].resourceClaimTemplateName",
     "RFC 1123"),
])
def test_a_pod_claim_the_api_server_refuses(claims: list[dict[str, Any]], field: str, words: str) -> None:
    with pytest.raises(ParseError) as e:
        Pod.from_raw(with_claims(pod("p"), *claims))
    assert (e.value.field, words in e.value.message) == (field, True), e.value


@pytest.mark.parametrize(("entries", "section", "field", "words"), [
    ([{"name": "tpu"}], "containers", "spec.containers[0].resources.claims[0]",
     "must be one of the names in pod.spec.resourceClaims: gpu"),
    ([{"name": "tpu"}], "initContainers", "spec.initContainers[0].resources.claims[0]", "not found"),
    ([{"name": "gpu"}, {"name": "gpu"}], "containers", "spec.containers[0].resources.claims[1]", "duplicate"),
    ([{"name": "gpu", "request": "a"}, {"name": "gpu"}], "containers", "spec.containers[0].resources.claims[1]",
     "duplicate"),
    ([{"name": "gpu", "request": "A"}], "containers", "spec.containers[0].resources.claims[0].request", "RFC 1123"),
])
def test_a_container_naming_a_claim_the_pod_lacks_is_refused(entries: list[dict[str, Any]], section: str,
                                                              field: str, words: str) -> None:
    with pytest.raises(ParseError) as e:
        Pod.from_raw(uses(with_claims(pod("p"), GPU), *entries, section=section))
    assert (e.value.field, words in e.value.message) == (field, True), e.value


def test_a_container_claim_in_a_pod_without_claims_says_the_list_is_empty() -> None:
    with pytest.raises(ParseError, match="which is empty"):
        Pod.from_raw(uses(pod("p"), {"name": "gpu"}))


def test_a_status_naming_no_claim_of_the_spec_and_a_static_pod_with_claims_are_refused() -> None:
    raw = with_claims(pod("p"), GPU)
    raw["status"] = {"resourceClaimStatuses": [{"name": "tpu", "resourceClaimName": "x"}]}
    with pytest.raises(ParseError, match=r"status.resourceClaimStatuses\[0\].name.*must match"):
        Pod.from_raw(raw)
    static = with_claims(pod("p", annotations={"kubernetes.io/config.mirror": "x"}), GPU)
    with pytest.raises(ParseError, match="static pods do not support resource claims"):
        Pod.from_raw(static)


def podgroup(claims: list[dict[str, Any]], statuses: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    raw: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                           "metadata": {"name": "train", "namespace": "default"},
                           "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}, "resourceClaims": claims}}
    if statuses is not None:
        raw["status"] = {"resourceClaimStatuses": statuses}
    return raw


def test_a_workload_podgroups_claims_and_statuses() -> None:
    g = WorkloadPodGroup.from_raw(podgroup([GPU, NIC], [{"name": "gpu", "resourceClaimName": "train-gpu-4xk"}]))
    assert g.claims == (PodClaim("gpu", template="gpu-t"), PodClaim("nic", claim="shared-nic"))
    assert g.resource_claims == ("gpu", "nic") and g.claim_statuses == {"gpu": "train-gpu-4xk"}
    with pytest.raises(ParseError, match=r"spec.resourceClaims: must have at most 4"):
        WorkloadPodGroup.from_raw(podgroup([{"name": f"c{i}", "resourceClaimName": "x"} for i in range(5)]))
    with pytest.raises(ParseError, match=r"status.resourceClaimStatuses\[0\].name"):
        WorkloadPodGroup.from_raw(podgroup([GPU], [{"name": "nic"}]))
