"""Issue 18 on the real API server: Namespace labels listed and watched into the cache, and the pod-spec
fields koordpy refuses left pending with a condition and an Event (a pod whose ResourceClaim does not
exist, in kube-scheduler's words, since claims are allocated)."""

from __future__ import annotations

import asyncio
import uuid

import kopf
import pytest

from koordpy.controller.cache import Cache
from koordpy.controller.main import _NoDiffBase, _NoProgress, api_client, build_registry, resources, sync
from tests.builders import node, pod, podgroup
from tests.integration.kube import ControlPlane, Kube, Scheduler, fake, settle, wait_for

NAMES = frozenset({"koordpy"})


def test_namespace_labels_are_listed_then_watched_into_the_snapshot(controlplane: ControlPlane, kube: Kube,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", controlplane.kubeconfig)  # kopf's login reads it, as `koordpy run` sets it
    # Namespaces stay between tests (no namespace controller finishes deleting one): a fresh name.
    ns = f"team-{uuid.uuid4().hex[:8]}"
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": {"team": "a"}}})
    kinds = [r for r in resources() if r[0].label == "Namespace"]

    async def go() -> tuple[dict[str, str] | None, dict[str, str] | None, bool]:
        api = await api_client(controlplane.kubeconfig)
        cache = Cache()
        stop, ready = asyncio.Event(), asyncio.Event()
        operator = None
        try:
            await sync(api, cache, kinds)
            listed = cache.snapshot(NAMES).namespaces.get(ns)
            settings = kopf.OperatorSettings()
            settings.posting.enabled = False
            settings.persistence.diffbase_storage = _NoDiffBase()
            settings.persistence.progress_storage = _NoProgress()
            operator = asyncio.ensure_future(kopf.operator(
                registry=build_registry(cache, controlplane.kubeconfig, kinds), settings=settings, clusterwide=True,
                standalone=True, stop_flag=stop, ready_flag=ready))
            await asyncio.wait_for(ready.wait(), 30)
            await asyncio.to_thread(kube.kubectl, "label", "namespace", ns, "team=b", "--overwrite")
            watched = None
            for _ in range(300):
                watched = cache.snapshot(NAMES).namespaces.get(ns)
                if watched is not None and watched.get("team") == "b":
                    break
                await asyncio.sleep(0.1)
            await asyncio.to_thread(kube.kubectl, "delete", "namespace", ns, "--wait=false")
            # Deleting only marks it Terminating here (no namespace controller): it is still there.
            still = ns in cache.snapshot(NAMES).namespaces
            return listed, watched, still
        finally:
            stop.set()
            if operator is not None:
                await asyncio.wait_for(operator, 30)
            await api.close()

    listed, watched, still = asyncio.run(asyncio.wait_for(go(), 120))
    assert listed == {"team": "a", "kubernetes.io/metadata.name": ns}
    assert watched == {"team": "b", "kubernetes.io/metadata.name": ns}
    assert still


def test_pods_whose_resource_claim_does_not_exist_stay_pending_saying_why(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node("n0")]))
    dra = pod("dra", cpu="1")
    dra["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    member = pod("g-1", cpu="1", group="g")
    member["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    kube.apply(dra, podgroup("g", 2), pod("g-0", cpu="1", group="g"), member, pod("plain", cpu="1"))
    wait_for(lambda: "plain" in kube.bound(), "the plain pod bound")
    message = wait_for(lambda: kube.condition_message("dra"), "dra's condition")
    missing = 'resourceclaim.resource.k8s.io "gpu-claim" not found'
    assert message == f"0/1 nodes are available: {missing}."
    for name in ("g-0", "g-1"):
        gang = wait_for(lambda n=name: kube.condition_message(n), f"{name}'s condition")  # type: ignore[misc]
        assert missing in gang
    events = wait_for(lambda: [e for e in kube.events() if e["reason"] == "FailedScheduling"
                               and e["involvedObject"]["name"] == "dra"], "dra's FailedScheduling Event")
    assert events[0]["type"] == "Warning" and events[0]["message"] == message
    assert settle(lambda: sorted(kube.bound())) == ["plain"]
