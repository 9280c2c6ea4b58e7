"""The DRA kinds of the registry on the v1.37 control plane: each is listed and watched into the live
cache, parses as the API server serves it, and fills Snapshot.devices; a PodGroup keeps its
spec.resourceClaims (DRAWorkloadResourceClaims is on) and the ResourceClaim controller makes the
claims of templates, the group's shared by a member whose entry is the group's."""

from __future__ import annotations

import asyncio
from typing import Any

from koordpy.api.kinds import DEVICE_ROLES, KINDS
from koordpy.controller.cache import Cache
from koordpy.controller.client import api_client
from koordpy.controller.podwatch import relist, watch_kind
from tests.builders import pod
from tests.integration.kube import ControlPlane, Kube, wait_for

NS = "dra-registry"
DRIVER = "gpu.example.com"
DRA = [k for k in KINDS if k.role in DEVICE_ROLES]


def objects(generation: int = 1) -> list[dict[str, Any]]:
    template_spec = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "reg-gpu"}}]}}
    return [
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "reg-gpu"},
         "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                  "extendedResourceName": "example.com/reg-gpu"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "reg-n1-gpu"},
         "spec": {"driver": DRIVER, "nodeName": "reg-n1",
                  "pool": {"name": "reg-n1", "generation": generation, "resourceSliceCount": 1},
                  "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "h100"}},
                               "capacity": {"memory": {"value": "80Gi"}}} for i in range(2)]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "gpu-t", "namespace": NS}, "spec": {"spec": template_spec}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "reg-broken"},
         "spec": {"deviceSelector": {"driver": DRIVER, "device": "gpu-1"},
                  "taint": {"key": "example.com/broken", "effect": "NoSchedule"}}},
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "train", "namespace": NS},
         "spec": {"schedulingPolicy": {"gang": {"minCount": 1}},
                  "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}]}},
    ]


def member() -> dict[str, Any]:
    p = pod("m0", cpu="1", scheduler="nobody")  # no scheduler takes it: only the controllers act
    p["metadata"]["namespace"] = NS
    p["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"},
                                   {"name": "own", "resourceClaimTemplateName": "gpu-t"}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}, {"name": "own"}]
    return p


def test_the_dra_kinds_are_listed_watched_and_fill_the_snapshot(controlplane: ControlPlane, kube: Kube) -> None:
    assert {k.kind for k in DRA} == {"DeviceClass", "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate",
                                     "DeviceTaintRule"}
    kube.kubectl("create", "namespace", NS, check=False)

    async def go() -> None:
        api = await api_client(controlplane.kubeconfig)
        cache = Cache()
        watches: list[asyncio.Task[None]] = []
        try:
            for kind in DRA:  # listed first, as the shell does at the start: all served, nothing there
                _, version = await relist(api, cache, kind)
                assert version, kind.label
                watches.append(asyncio.create_task(watch_kind(api, cache, kind, version)))
            await asyncio.to_thread(kube.apply, objects(), member())

            def arrived() -> bool:
                d = cache.devices
                return ("reg-gpu" in d.classes and "reg-n1-gpu" in d.slices and f"{NS}/gpu-t" in d.templates
                        and "reg-broken" in d.taint_rules
                        and {c.owner[0] for c in d.claims.values() if c.namespace == NS and c.owner}
                        == {"Pod", "PodGroup"})

            await asyncio.to_thread(wait_for, arrived, "the DRA objects in the live cache", 60)
            snap = cache.snapshot(frozenset({"koordpy"})).devices
            assert snap.invalid == {}
            assert snap.classes["reg-gpu"].extended_resources[0] == "example.com/reg-gpu"
            assert [d.name for d in snap.slices["reg-n1-gpu"].devices] == ["gpu-0", "gpu-1"]
            assert snap.taint_rules["reg-broken"].selects(DRIVER, "reg-n1", "gpu-1")
            by_owner = {c.owner[0]: c for c in snap.claims.values() if c.namespace == NS and c.owner}
            assert by_owner["PodGroup"].owner is not None and by_owner["PodGroup"].owner[1] == "train"
            assert by_owner["Pod"].owner is not None and by_owner["Pod"].owner[1] == "m0"
            # The group kept its claims and the member's status names the group's claim for its
            # identical entry, its own claim for the other.
            group = kube.get("podgroups.scheduling.k8s.io", "train", NS)
            assert group["spec"]["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "gpu-t"}]
            statuses = {s["name"]: s["resourceClaimName"]
                        for s in kube.get("pod", "m0", NS)["status"]["resourceClaimStatuses"]}
            assert statuses == {"gpu": by_owner["PodGroup"].name, "own": by_owner["Pod"].name}
            # A change and a deletion come through the watch.
            await asyncio.to_thread(kube.apply, objects(generation=2)[1])
            await asyncio.to_thread(wait_for, lambda: cache.devices.slices["reg-n1-gpu"].generation == 2,
                                    "the new generation of the slice", 30)
            await asyncio.to_thread(kube.kubectl, "delete", "devicetaintrule", "reg-broken")
            await asyncio.to_thread(wait_for, lambda: "reg-broken" not in cache.devices.taint_rules,
                                    "the taint rule gone from the cache", 30)
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
            await api.close()

    try:
        asyncio.run(asyncio.wait_for(go(), 180))
    finally:
        kube.kubectl("delete", "pods", "--all", "-n", NS, "--grace-period=0", "--force", check=False)
        kube.kubectl("delete", "podgroups.scheduling.k8s.io,resourceclaims,resourceclaimtemplates", "--all",
                     "-n", NS, "--wait=false", check=False)
        kube.kubectl("delete", "resourceslice/reg-n1-gpu", "deviceclass/reg-gpu", "devicetaintrule/reg-broken",
                     "--wait=false", "--ignore-not-found", check=False)


