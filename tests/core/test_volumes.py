"""Volume rules, with cases translated from kube-scheduler v1.37's own tests of its VolumeBinding
(volume_binding_test.go, binder_test.go), VolumeZone, VolumeRestrictions and NodeVolumeLimits (csi)
plugins, run through ``koordpy simulate``'s core."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.storage import PersistentVolumeClaim, StorageClass
from koordpy.core.cycle import schedule
from koordpy.core.state import SchedulerState
from koordpy.core.volumes import (
    BIND_CONFLICT,
    DISK_CONFLICT,
    MAX_VOLUME_COUNT,
    NODE_CONFLICT,
    PV_NOT_EXIST,
    RWOP_CONFLICT,
    UNBOUND_IMMEDIATE,
    ZONE_CONFLICT,
)
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup, run
from tests.core.dialects.test_upstream import group, member

if TYPE_CHECKING:
    from koordpy.controller.cache import Cache

ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def sc(name: str, mode: str = "WaitForFirstConsumer", provisioner: str = "kubernetes.io/no-provisioner",
       allowed: dict[str, list[str]] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                           "provisioner": provisioner, "volumeBindingMode": mode}
    if allowed:
        out["allowedTopologies"] = [{"matchLabelExpressions": [{"key": k, "values": v} for k, v in allowed.items()]}]
    return out


def pv(name: str, size: str = "10Gi", cls: str = "local", *, on: str | None = None, claim: str | None = None,
       phase: str = "Available", labels: dict[str, str] | None = None, modes: tuple[str, ...] = ("ReadWriteOnce",),
       csi: str | None = None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"capacity": {"storage": size}, "storageClassName": cls, "accessModes": list(modes),
                            **spec}
    if on is not None:
        body["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": [on]}]}]}}
    if claim is not None:
        body["claimRef"] = {"namespace": "default", "name": claim}
    if csi is not None:
        body["csi"] = {"driver": csi, "volumeHandle": f"{name}-handle"}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": labels or {}},
            "spec": body, "status": {"phase": phase}}


def pvc(name: str, cls: str | None = "local", size: str = "5Gi", *, volume: str = "", bound: bool | None = None,
        modes: tuple[str, ...] = ("ReadWriteOnce",), annotations: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    ann = dict(annotations or {})
    if volume and bound is not False:
        ann["pv.kubernetes.io/bind-completed"] = "yes"
    body: dict[str, Any] = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}, **spec}
    if cls is not None:
        body["storageClassName"] = cls
    if volume:
        body["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "default", "annotations": ann}, "spec": body,
            "status": {"phase": "Bound" if volume and bound is not False else "Pending"}}


def using(name: str, *claims: str, cpu: str = "1", node_name: str | None = None, **extra: Any) -> dict[str, Any]:
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    return pod(name, cpu=cpu, node_name=node_name, volumes=vols + extra.pop("more", []), **extra)


def one_pv_cache(pod_name: str, *claims: str) -> Cache:
    """A shell's cache of node a with one static local PV, ``only``, the unbound ``claims`` and the pod
    ``pod_name`` using the first of them."""
    from koordpy.controller.cache import Cache
    cache = Cache()
    cache.observe("Node", "ADDED", node("a"))
    cache.observe("StorageClass", "ADDED", sc("local"))
    cache.observe("PersistentVolume", "ADDED", pv("only", on="a"))
    for claim in claims:
        cache.observe("PersistentVolumeClaim", "ADDED", pvc(claim))
    cache.observe("Pod", "ADDED", using(pod_name, claims[0]))
    return cache


def csinode(name: str, **limits: int) -> dict[str, Any]:
    return {"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name},
            "spec": {"drivers": [{"name": d.replace("_", "."), "nodeID": name, "allocatable": {"count": n}}
                                 for d, n in limits.items()]}}


TWO = [node("a", labels={ZONE: "z1", REGION: "r1"}), node("b", labels={ZONE: "z2", REGION: "r1"})]


# -- VolumeBinding ---------------------------------------------------------------------------


def test_volume_binding_pod_without_claims_is_not_filtered() -> None:
    out = run(TWO, pod("p", cpu="1", volumes=[{"name": "tmp", "emptyDir": {}}]))
    assert out.bound == {"default/p": "a"}


def test_volume_binding_all_bound_follows_the_pv_node_affinity() -> None:
    out = run(TWO, sc("local"), pv("pv-b", on="b", claim="data", phase="Bound"), pvc("data", volume="pv-b"),
              using("p", "data"))
    assert out.bound == {"default/p": "b"}
    out = run(TWO, sc("local"), pv("pv-c", on="c", claim="data", phase="Bound"), pvc("data", volume="pv-c"),
              using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: 2 {NODE_CONFLICT}."


def test_volume_binding_pvc_does_not_exist_waits_with_kube_schedulers_message() -> None:
    out = run(TWO, using("p", "missing"))
    assert out.pending["default/p"] == '0/2 nodes are available: persistentvolumeclaim "missing" not found.'
    # Part of them missing: the first missing one is named.
    out = run(TWO, sc("local"), pv("pv-a", on="a", claim="ok", phase="Bound"), pvc("ok", volume="pv-a"),
              using("p", "ok", "gone"))
    assert out.pending["default/p"] == '0/2 nodes are available: persistentvolumeclaim "gone" not found.'


def test_volume_binding_immediate_claims_not_bound_wait() -> None:
    out = run(TWO, sc("fast", mode="Immediate", provisioner="csi.example.com"), pvc("data", cls="fast"),
              using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: {UNBOUND_IMMEDIATE}."
    # No class at all (no default class admitted one): as Immediate.
    out = run(TWO, pvc("data", cls=None), using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: {UNBOUND_IMMEDIATE}."
    # A volumeName set but the bind not completed by the PV controller: not bound yet.
    out = run(TWO, sc("local"), pv("pv-a", on="a", claim="data"), pvc("data", volume="pv-a", bound=False),
              using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: {UNBOUND_IMMEDIATE}."


def test_volume_binding_unbound_claims_no_matches() -> None:
    out = run(TWO, sc("local"), pvc("data"), using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: 2 {BIND_CONFLICT}."


def test_volume_binding_bound_and_unbound_unsatisfied() -> None:
    out = run(TWO, sc("local"), pv("pv-a", on="a", claim="bound", phase="Bound"), pvc("bound", volume="pv-a"),
              pv("free-b", on="b", labels={"tier": "x"}), pvc("unbound", selector={"matchLabels": {"tier": "y"}}),
              using("p", "bound", "unbound"))
    assert out.pending["default/p"] == f"0/2 nodes are available: 1 {BIND_CONFLICT}, 1 {NODE_CONFLICT}."


def test_volume_binding_pv_not_found() -> None:
    # A persistentVolumeClaim volume: VolumeZone's PreFilter cannot find the PV.
    out = run(TWO, sc("local"), pvc("data", volume="nowhere"), using("p", "data"))
    assert out.pending["default/p"] == '0/2 nodes are available: persistentvolume "nowhere" not found.'
    # A generic ephemeral one (VolumeZone does not read those): VolumeBinding's per-node reason.
    eph = pod("p", cpu="1", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}])
    claim = pvc("p-scratch", volume="nowhere")
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "",
                                            "controller": True}]
    out = run(TWO, sc("local"), claim, eph)
    assert out.pending["default/p"] == f"0/2 nodes are available: 2 {PV_NOT_EXIST}."


def test_volume_binding_pv_not_found_claim_lost() -> None:
    claim = pvc("data", volume="gone")
    claim["status"]["phase"] = "Lost"
    out = run(TWO, claim, using("p", "data"))
    assert out.pending["default/p"] == ('0/2 nodes are available: persistentvolumeclaim "data" bound to '
                                        'non-existent persistentvolume "gone".')


def test_volume_binding_deleting_claim_waits() -> None:
    claim = pvc("data", volume="pv-a")
    claim["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    out = run(TWO, sc("local"), pv("pv-a", on="a", claim="data", phase="Bound"), claim, using("p", "data"))
    assert out.pending["default/p"] == '0/2 nodes are available: persistentvolumeclaim "data" is being deleted.'


def test_wait_for_first_consumer_static_pv_sets_claim_ref_and_binds() -> None:
    """binder_test: the smallest available PV that fits the claim on the node is chosen; the PV
    controller (played by the simulator) completes the bind, then the pod is bound."""
    out = run(TWO, sc("local"), pv("big-b", "100Gi", on="b"), pv("small-b", "6Gi", on="b"), pv("tiny-a", "1Gi", on="a"),
              pvc("data"), using("p", "data"))
    assert out.bound == {"default/p": "b"}
    assert out.volumes == {"default/data": {"volume": "small-b"}}


@pytest.mark.parametrize(("why", "volume", "claim"), [
    ("access modes", pv("rox", on="a", modes=("ReadOnlyMany",)), pvc("data")),
    ("volume mode", pv("block", on="a", volumeMode="Block"), pvc("data")),
    ("class", pv("other", cls="other", on="a"), pvc("data")),
    ("capacity", pv("small", "1Gi", on="a"), pvc("data")),
    ("selector", pv("sel", on="a", labels={"tier": "x"}), pvc("data", selector={"matchLabels": {"tier": "y"}})),
    ("claimed by another", pv("taken", on="a", claim="other"), pvc("data")),
    ("not available", pv("released", on="a", phase="Released"), pvc("data")),
])
def test_wait_for_first_consumer_pv_matching(why: str, volume: dict[str, Any], claim: dict[str, Any]) -> None:
    out = run(TWO, sc("local"), volume, claim, using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: 2 {BIND_CONFLICT}.", why


def test_wait_for_first_consumer_prebound_pv_is_taken_whatever_its_phase() -> None:
    out = run(TWO, sc("local"), pv("mine", on="b", claim="data", phase="Pending"), pvc("data"), using("p", "data"))
    assert out.bound == {"default/p": "b"} and out.volumes == {"default/data": {"volume": "mine"}}


def test_two_pods_do_not_take_one_static_pv() -> None:
    out = run(TWO, sc("local"), pv("only", on="a"), pvc("d1"), pvc("d2"), using("p1", "d1"), using("p2", "d2"))
    assert out.bound == {"default/p1": "a"}
    assert out.pending["default/p2"] == f"0/2 nodes are available: 2 {BIND_CONFLICT}."


def test_dynamic_provisioning_annotates_the_claim_and_the_pod_waits_for_its_provisioner() -> None:
    out = run(TWO, sc("fast", provisioner="csi.example.com", allowed={ZONE: ["z2"]}), pvc("data", cls="fast"),
              using("p", "data"))
    assert out.bound == {}
    assert out.volumes == {"default/data": {"selectedNode": "b"}}
    assert "volume.kubernetes.io/selected-node=b" in out.pending["default/p"]


def test_dynamic_provisioning_allowed_topologies_restrict_nodes() -> None:
    out = run(TWO, sc("fast", provisioner="csi.example.com", allowed={ZONE: ["z9"]}), pvc("data", cls="fast"),
              using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: 2 {BIND_CONFLICT}."


def test_a_claim_whose_node_was_selected_only_fits_that_node() -> None:
    claim = pvc("data", cls="fast", annotations={"volume.kubernetes.io/selected-node": "a"})
    out = run(TWO, sc("fast", provisioner="csi.example.com"), claim,
              using("p", "data", nodeSelector={"kubernetes.io/hostname": "b"}))
    assert out.pending["default/p"] == (f"0/2 nodes are available: 1 {BIND_CONFLICT}, 1 node(s) didn't match "
                                        "Pod's node affinity/selector.")


def test_generic_ephemeral_volume_gets_its_claim_and_is_provisioned() -> None:
    template = {"volumeClaimTemplate": {"spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                                                 "resources": {"requests": {"storage": "1Gi"}}}}}
    out = run(TWO, sc("fast", provisioner="csi.example.com"),
              pod("p", cpu="1", volumes=[{"name": "scratch", "ephemeral": template}]))
    assert out.volumes == {"default/p-scratch": {"selectedNode": "a"}}


def test_generic_ephemeral_claim_of_another_pod_is_refused() -> None:
    claim = pvc("p-scratch", cls="fast")
    claim["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "other",
                                            "controller": True}]
    out = run(TWO, sc("fast", provisioner="csi.example.com"), claim,
              pod("p", cpu="1", volumes=[{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]))
    assert out.pending["default/p"] == ("0/2 nodes are available: PVC default/p-scratch was not created for pod "
                                        "default/p (pod is not owner).")


def test_missing_ephemeral_claim_waits_for_its_controller_live() -> None:
    snap = World.from_objects([("t", TWO[0])]).snapshot(frozenset({"koordpy"}))
    from koordpy.api.objects import Pod
    p = Pod.from_raw(pod("p", cpu="1", volumes=[{"name": "s", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]))
    snap.pods.append(p)
    result = schedule(snap, SchedulerState(), 0.0)
    assert result.waiting["default/p"] == ("0/1 nodes are available: waiting for ephemeral volume controller to "
                                           'create the persistentvolumeclaim "p-s".')


# -- VolumeZone ------------------------------------------------------------------------------


@pytest.mark.parametrize(("pv_labels", "node_labels", "fits"), [
    ({BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-a"}, True),  # beta zone label matched
    ({BETA_ZONE: "us-west1-a"}, {BETA_ZONE: "us-west1-b"}, False),  # beta zone label doesn't match
    ({ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),
    ({ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, False),
    ({REGION: "us-west1"}, {REGION: "us-east1"}, False),  # region label doesn't match
    ({ZONE: "us-west1-a", REGION: "us-west1"}, {ZONE: "us-west1-a"}, False),  # pv zone and region, node only zone
    ({BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-a"}, True),  # pv with beta label, node with GA label
    ({BETA_ZONE: "us-west1-a"}, {ZONE: "us-west1-b"}, False),
    ({ZONE: "us-west1-a__us-west1-b"}, {ZONE: "us-west1-b"}, True),  # several zones
    ({ZONE: "us-west1-a"}, {}, True),  # node without labels
])
def test_volume_zone(pv_labels: dict[str, str], node_labels: dict[str, str], fits: bool) -> None:
    out = run(node("n", labels=node_labels), sc("local"), pv("vol", claim="data", phase="Bound", labels=pv_labels),
              pvc("data", volume="vol"), using("p", "data"))
    if fits:
        assert out.bound == {"default/p": "n"}
    else:
        assert out.pending["default/p"] == f"0/1 nodes are available: 1 {ZONE_CONFLICT}."


# -- VolumeRestrictions -----------------------------------------------------------------------


def test_read_write_once_pod_claim_in_use_rules_out_every_node() -> None:
    out = run(TWO, sc("local"), pv("vol", claim="data", phase="Bound"),
              pvc("data", volume="vol", modes=("ReadWriteOncePod",)),
              using("running", "data", node_name="a"), using("p", "data"))
    assert out.pending["default/p"] == f"0/2 nodes are available: 2 {RWOP_CONFLICT}."


def test_read_write_once_pod_two_pending_pods_only_one_binds() -> None:
    out = run(TWO, sc("local"), pv("vol", claim="data", phase="Bound"),
              pvc("data", volume="vol", modes=("ReadWriteOncePod",)), using("p1", "data"), using("p2", "data"))
    assert out.bound == {"default/p1": "a"}
    assert out.pending["default/p2"] == f"0/2 nodes are available: 2 {RWOP_CONFLICT}."


def test_read_write_once_claim_may_be_shared() -> None:
    out = run(TWO, sc("local"), pv("vol", claim="data", phase="Bound"), pvc("data", volume="vol"),
              using("running", "data", node_name="a"), using("p", "data"))
    assert "default/p" in out.bound


def test_disk_conflict_gce_pd_unless_both_read_only() -> None:
    def gce(name: str, ro: bool, **kw: Any) -> dict[str, Any]:
        return pod(name, cpu="1", volumes=[{"name": "d", "gcePersistentDisk": {"pdName": "disk", "readOnly": ro}}],
                   **kw)
    out = run(node("a"), gce("running", False, node_name="a"), gce("p", False))
    assert out.pending["default/p"] == f"0/1 nodes are available: 1 {DISK_CONFLICT}."
    out = run(node("a"), gce("running", True, node_name="a"), gce("p", True))
    assert out.bound == {"default/p": "a"}


# -- NodeVolumeLimits (CSI) --------------------------------------------------------------------

DRIVER = "ebs.csi.aws.com"


def _limited(limit: int, *extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [node("a"), csinode("a", ebs_csi_aws_com=limit), sc("gp3", provisioner=DRIVER),
            pv("vol-1", cls="gp3", claim="c1", phase="Bound", csi=DRIVER), pvc("c1", cls="gp3", volume="vol-1"),
            using("running", "c1", node_name="a"), *extra]


def test_csi_limits_fit_when_the_limit_allows_the_new_volume() -> None:
    out = run(_limited(2, pv("vol-2", cls="gp3", claim="c2", phase="Bound", csi=DRIVER),
                       pvc("c2", cls="gp3", volume="vol-2"), using("p", "c2")))
    assert out.bound == {"default/p": "a"}


def test_csi_limits_exceeded() -> None:
    out = run(_limited(1, pv("vol-2", cls="gp3", claim="c2", phase="Bound", csi=DRIVER),
                       pvc("c2", cls="gp3", volume="vol-2"), using("p", "c2")))
    assert out.pending["default/p"] == f"0/1 nodes are available: 1 {MAX_VOLUME_COUNT}."


def test_csi_limits_a_volume_already_attached_counts_once() -> None:
    out = run(_limited(1, using("p", "c1")))
    assert out.bound == {"default/p": "a"}


def test_csi_limits_count_a_pending_claim_under_its_class_provisioner() -> None:
    out = run(_limited(1, pvc("c2", cls="gp3"), using("p", "c2")))
    assert out.pending["default/p"] == f"0/1 nodes are available: 1 {MAX_VOLUME_COUNT}."


def test_csi_limits_of_another_driver_do_not_apply() -> None:
    objs = [node("a"), csinode("a", other_csi=0), sc("gp3", provisioner=DRIVER),
            pv("vol-2", cls="gp3", claim="c2", phase="Bound", csi=DRIVER), pvc("c2", cls="gp3", volume="vol-2"),
            using("p", "c2")]
    assert run(objs).bound == {"default/p": "a"}


def test_csi_limits_count_migrated_in_tree_inline_volumes() -> None:
    inline = [{"name": "ebs", "awsElasticBlockStore": {"volumeID": "vol-inline"}}]
    out = run(_limited(1, pod("p", cpu="1", volumes=inline)))
    assert out.pending["default/p"] == f"0/1 nodes are available: 1 {MAX_VOLUME_COUNT}."


def test_csi_limits_hold_between_pods_placed_in_one_cycle() -> None:
    objs: list[dict[str, Any]] = [node("a"), node("b"), csinode("a", ebs_csi_aws_com=1),
                                  csinode("b", ebs_csi_aws_com=1), sc("gp3", provisioner=DRIVER)]
    for i in range(3):
        objs += [pv(f"v{i}", cls="gp3", claim=f"c{i}", phase="Bound", csi=DRIVER),
                 pvc(f"c{i}", cls="gp3", volume=f"v{i}"), using(f"p{i}", f"c{i}")]
    out = run(objs)
    assert sorted(out.bound.values()) == ["a", "b"]
    assert next(iter(out.pending.values())) == f"0/2 nodes are available: 2 {MAX_VOLUME_COUNT}."


# -- waking, gangs, parsing, explain ------------------------------------------------------------------


def test_a_pod_waiting_for_its_claim_is_woken_when_the_claim_appears() -> None:
    world = World.from_objects([("t", o) for o in [*TWO, sc("local"), pv("pv-b", on="b"), using("p", "data")]])
    state = SchedulerState()
    first = schedule(world.snapshot(frozenset({"koordpy"})), state, 0.0)
    assert first.waiting["default/p"] == '0/2 nodes are available: persistentvolumeclaim "data" not found.'
    again = schedule(world.snapshot(frozenset({"koordpy"})), state, 1.0)
    assert not again.waiting and again.kept  # parked: nothing it waits for changed
    world.storage.claims["default/data"] = PersistentVolumeClaim.from_raw(pvc("data"))
    woken = schedule(world.snapshot(frozenset({"koordpy"})), state, 2.0)
    [bind] = woken.binds
    assert bind.node == "b" and bind.volumes is not None and bind.volumes.static == (("default/data", "pv-b"),)


def test_a_gang_whose_members_claim_local_volumes_goes_where_the_volumes_are() -> None:
    nodes = [node(f"n{i}", cpu="2") for i in range(4)]
    objs: list[dict[str, Any]] = [*nodes, sc("local"), podgroup("g", 2)]
    for i in range(2):
        objs += [pv(f"local-{i}", on=f"n{i + 2}"), pvc(f"data-{i}"),
                 using(f"w{i}", f"data-{i}", labels={"pod-group.scheduling.sigs.k8s.io": "g"})]
    out = run(objs)
    assert out.bound == {"default/w0": "n2", "default/w1": "n3"}


def test_storage_objects_are_parsed_as_the_api_server_would_accept_them() -> None:
    with pytest.raises(ParseError, match="volumeBindingMode"):
        StorageClass.from_raw(sc("x", mode="Later"))
    with pytest.raises(ParseError, match="accessModes"):
        PersistentVolumeClaim.from_raw(pvc("x", modes=("ReadWriteSometimes",)))
    claim = PersistentVolumeClaim.from_raw(pvc("x", cls=None, annotations={
        "volume.beta.kubernetes.io/storage-class": "beta"}))
    assert claim.class_name == "beta" and not claim.bound


def test_explain_counts_volume_reasons() -> None:
    from koordpy.core.explain import explain_pod
    world = World.from_objects([("t", o) for o in [*TWO, sc("local"), pv("pv-c", on="c", claim="data",
                                                                         phase="Bound"),
                                                   pvc("data", volume="pv-c"), using("p", "data")]])
    exp = explain_pod(world.snapshot(frozenset({"koordpy"})), SchedulerState(), 0.0, "default/p")
    assert exp is not None
    assert exp.to_json()["diagnosis"]["filtered"] == [{"reason": NODE_CONFLICT, "nodes": 2}]


def test_csi_limits_hold_between_members_of_one_gang() -> None:
    """Members of one gang placed at once are held to a node's attach limit together: a gang of 3
    with a CSI volume each, on one node whose limit is 2, waits rather than exceeding it."""
    objs: list[dict[str, Any]] = [node("a"), csinode("a", ebs_csi_aws_com=2), sc("gp3", provisioner=DRIVER),
                                  podgroup("g", 3)]
    for i in range(3):
        objs += [pv(f"v{i}", cls="gp3", claim=f"c{i}", phase="Bound", csi=DRIVER),
                 pvc(f"c{i}", cls="gp3", volume=f"v{i}"),
                 using(f"w{i}", f"c{i}", labels={"pod-group.scheduling.sigs.k8s.io": "g"})]
    out = run(objs)
    assert out.bound == {}
    assert any(MAX_VOLUME_COUNT in m for m in out.pending.values())


def test_read_write_once_pod_claim_is_not_shared_inside_a_gang() -> None:
    objs: list[dict[str, Any]] = [*TWO, sc("local"), pv("vol", claim="data", phase="Bound"),
                                  pvc("data", volume="vol", modes=("ReadWriteOncePod",)), podgroup("g", 2)]
    objs += [using(f"w{i}", "data", labels={"pod-group.scheduling.sigs.k8s.io": "g"}) for i in range(2)]
    out = run(objs)
    assert out.bound == {}
    assert any(RWOP_CONFLICT in m for m in out.pending.values())


# -- the live cache ------------------------------------------------------------------------------


def test_cache_keeps_the_storage_kinds_and_reports_an_invalid_claim() -> None:
    from koordpy.api.storage import PersistentVolume
    from koordpy.controller.cache import Cache
    cache = Cache()
    cache.observe("StorageClass", "ADDED", sc("local"))
    cache.observe("PersistentVolume", "ADDED", pv("vol", on="a"))
    cache.observe("CSINode", "ADDED", csinode("a", ebs_csi_aws_com=3))
    cache.observe("PersistentVolumeClaim", "ADDED", pvc("bad", modes=("Sometimes",)))
    cache.observe("PersistentVolumeClaim", "ADDED", pvc("data"))
    snap = cache.snapshot(frozenset({"koordpy"}))
    assert set(snap.storage.claims) == {"default/data"} and set(snap.storage.volumes) == {"vol"}
    assert snap.storage.csinodes["a"].limits == {DRIVER: 3}
    assert "accessModes" in snap.storage.invalid["PersistentVolumeClaim default/bad"]
    # PreBind's write is shown at once and undone if it fails; the watch's object replaces it.
    before = cache.storage.volumes["vol"]
    undo = cache.assume_storage(before.model_copy(update={"claim_ref": None, "phase": "Bound"}))
    assert cache.snapshot(frozenset({"koordpy"})).storage.volumes["vol"].phase == "Bound"
    undo()
    assert cache.storage.volumes["vol"] is before
    cache.observe("PersistentVolume", "DELETED", pv("vol"))
    assert not cache.snapshot(frozenset({"koordpy"})).storage.volumes
    assert isinstance(before, PersistentVolume)


def test_a_pod_naming_an_invalid_claim_says_why() -> None:
    from koordpy.api.objects import Pod
    from koordpy.controller.cache import Cache
    cache = Cache()
    cache.observe("Node", "ADDED", node("a"))
    cache.observe("PersistentVolumeClaim", "ADDED", pvc("bad", modes=("Sometimes",)))
    cache.observe("Pod", "ADDED", using("p", "bad"))
    result = schedule(cache.snapshot(frozenset({"koordpy"})), SchedulerState(), 0.0)
    assert result.waiting["default/p"].startswith('0/1 nodes are available: persistentvolumeclaim "bad" cannot be '
                                                  "read: PersistentVolumeClaim default/bad: spec.accessModes[0]")
    with pytest.raises(ParseError, match="claimName"):
        Pod.from_raw(pod("q", volumes=[{"name": "v", "persistentVolumeClaim": {}}]))


def test_two_members_of_a_gang_never_share_one_static_volume() -> None:
    """Both claims match the one local volume on n0 alone; placed together, the gang would bind one
    member and strand the other: it waits instead, whole."""
    objs: list[dict[str, Any]] = [node("n0"), node("n1"), sc("local"), pv("only", on="n0"), podgroup("g", 2)]
    for i in range(2):
        objs += [pvc(f"data-{i}"), using(f"w{i}", f"data-{i}", labels={"pod-group.scheduling.sigs.k8s.io": "g"})]
    out = run(objs)
    assert out.bound == {} and out.volumes == {}
    assert any(BIND_CONFLICT in m for m in out.pending.values())


def test_a_gang_over_an_attach_limit_on_one_node_is_spread_member_by_member() -> None:
    objs: list[dict[str, Any]] = [node("a"), node("b"), csinode("a", ebs_csi_aws_com=1),
                                  csinode("b", ebs_csi_aws_com=1), sc("gp3", provisioner=DRIVER), podgroup("g", 2)]
    for i in range(2):
        objs += [pv(f"v{i}", cls="gp3", claim=f"c{i}", phase="Bound", csi=DRIVER),
                 pvc(f"c{i}", cls="gp3", volume=f"v{i}"),
                 using(f"w{i}", f"c{i}", labels={"pod-group.scheduling.sigs.k8s.io": "g"})]
    out = run(objs)
    assert sorted(out.bound.values()) == ["a", "b"]


def _group_cycle(*volumes: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """One cycle of a basic Kubernetes PodGroup on node a: w1 and w3 use the claims c1 and c3, w2 fits
    nowhere. kube-scheduler's group cycle passes over w2 and adds w3 alone, w1 placed before it: the
    pods bound and the messages of the others."""

    def claiming(name: str, claim: str) -> dict[str, Any]:
        return member(name, cpu="1", volumes=[{"name": "v", "persistentVolumeClaim": {"claimName": claim}}])

    objs = [node("a"), *volumes, group("train"), claiming("w1", "c1"), member("w2", cpu="64"), claiming("w3", "c3")]
    result = schedule(World.from_objects([("t", o) for o in objs]).snapshot(frozenset({"koordpy"})),
                      SchedulerState(), 0.0)
    return [d.pod for d in result.binds], result.pending


def test_a_member_added_in_the_group_cycle_keeps_the_attach_limit_with_the_members_before_it() -> None:
    # Node a attaches one volume of the driver: w1's, bound first, leaves w3's no room. w3's own filters
    # counted the pods placed before the job, not w1.
    bound = [o for i in (1, 3) for o in (pv(f"v{i}", cls="gp3", claim=f"c{i}", phase="Bound", csi=DRIVER),
                                         pvc(f"c{i}", cls="gp3", volume=f"v{i}"))]
    binds, pending = _group_cycle(csinode("a", ebs_csi_aws_com=1), sc("gp3", provisioner=DRIVER), *bound)
    assert binds == ["default/w1"]
    assert pending["default/w3"] == (f"0/1 nodes are available: {MAX_VOLUME_COUNT} "
                                     "(with the other members of its job placed together).")


def test_a_member_added_in_the_group_cycle_does_not_take_the_static_volume_a_member_before_it_took() -> None:
    # One local volume on a matches both unbound claims: w1 takes it (kube-scheduler's Reserve assumes
    # it), so w3 finds none, and says so in this cycle rather than failing its PreBind.
    binds, pending = _group_cycle(sc("local"), pv("only", on="a"), pvc("c1"), pvc("c3"))
    assert binds == ["default/w1"]
    assert pending["default/w3"] == (f"0/1 nodes are available: {BIND_CONFLICT} "
                                     "(with the other members of its job placed together).")
