"""Pod-spec fields kube-scheduler acts on that koordpy does not honour yet are refused, never dropped:
the pod stays pending with a condition and a FailedScheduling Event naming the field, and a gang
holding such a pod waits as a whole (koordpy.core.refusals; docs/reference.md lists every field)."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api.errors import ParseError
from koordpy.api.objects import Pod
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Event, SetPodScheduledFalse
from koordpy.core.dialects.upstream import SCHEDULING_GROUP
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup, run

NAMES = frozenset({"koordpy"})


def claiming(p: dict[str, Any], *names: str) -> dict[str, Any]:
    p["spec"]["resourceClaims"] = [{"name": n, "resourceClaimTemplateName": f"{n}-template"} for n in names or ("gpu",)]
    return p


def grouped(p: dict[str, Any], group: str = "workers") -> dict[str, Any]:
    p["spec"]["schedulingGroup"] = {"podGroupName": group}
    return p


# -- ResourceClaims (kube-scheduler's DynamicResources): allocated now (tests/sim/test_dra.py); a pod
# whose claim was never made waits in kube-scheduler's words -------------------------------------------

NOT_CREATED = '0/1 nodes are available: pod "default/dra": ResourceClaim not created yet.'


def test_a_pod_whose_template_claim_is_never_made_is_not_bound_and_says_why() -> None:
    out = run(node("n0"), claiming(pod("dra", cpu="1"), "gpu", "nic"), pod("plain", cpu="1"))
    assert out.bound == {"default/plain": "n0"}
    assert out.pending["default/dra"] == NOT_CREATED


def test_a_refused_pod_gets_a_condition_and_a_failed_scheduling_event_once() -> None:
    world = World.from_objects([("t", o) for o in (node("n0"), claiming(pod("dra", cpu="1")))])
    state = SchedulerState()
    first = schedule(world.snapshot(NAMES), state, world.now)
    conditions = [d for d in first.decisions if isinstance(d, SetPodScheduledFalse)]
    events = [d for d in first.decisions if isinstance(d, Event)]
    assert [c.pod for c in conditions] == ["default/dra"] and conditions[0].message == NOT_CREATED
    assert [(e.obj, e.type, e.reason) for e in events] == [("default/dra", "Warning", "FailedScheduling")]
    assert events[0].message == conditions[0].message
    assert first.binds == []
    # Once written, the same message is not written again; the pod stays parked.
    world.apply(first)
    second = schedule(world.snapshot(NAMES), state, world.now + 1)
    assert second.decisions == [] and second.binds == []


def test_a_gang_holding_a_pod_whose_claim_is_never_made_waits_as_a_whole() -> None:
    pods = [pod(f"g-{i}", cpu="1", group="g") for i in range(3)] + [claiming(pod("g-3", cpu="1", group="g"))]
    out = run(node("n0"), podgroup("g", 4), *pods)
    assert out.bound == {}
    assert out.pending["default/g-3"] == '0/1 nodes are available: pod "default/g-3": ResourceClaim not created yet.'
    assert out.pending["default/g-0"].startswith('GangGroup "default/g" gets rejected due to member Pod "default/g-3"')


def test_claims_are_parsed_and_a_nameless_claim_is_refused_naming_the_field() -> None:
    assert Pod.from_raw(claiming(pod("p"), "a", "b")).resource_claims == ("a", "b")
    bad = pod("p")
    bad["spec"]["resourceClaims"] = [{"resourceClaimName": "x"}]
    with pytest.raises(ParseError, match=r"spec.resourceClaims\[0\].name.*required"):
        Pod.from_raw(bad)


def test_a_running_pod_with_claims_counts_on_its_node_as_any_other() -> None:
    # Bound by someone else (kube-scheduler allocated its claims): its requests hold room.
    out = run(node("n0", cpu="2"), claiming(pod("bound", cpu="2", node_name="n0")), pod("new", cpu="1"))
    assert out.bound == {}
    assert "Insufficient cpu" in out.pending["default/new"]


# -- Workload PodGroups (kube-scheduler's GangScheduling, spec.schedulingGroup) -------------------

def test_a_pod_in_a_workload_podgroup_whose_parent_is_missing_waits_for_it_not_scheduled_alone() -> None:
    # A child group's pods are the parent CompositePodGroup's gang: without it they wait, naming it.
    out = run(node("n0"), workload_podgroup("workers", {"gang": {"minCount": 1}}, parentCompositePodGroupName="p",
                                            workloadRef={"workloadName": "w", "templateName": "t"}),
              grouped(pod("w-0", cpu="1")), pod("plain", cpu="1"))
    assert out.bound == {"default/plain": "n0"}
    assert out.pending["default/w-0"].startswith("waiting for CompositePodGroup default/p (scheduling.k8s.io/v1alpha3)")


def test_a_scheduling_group_named_by_another_field_is_refused_too() -> None:
    p = pod("w-0", cpu="1")
    p["spec"]["schedulingGroup"] = {"compositePodGroupName": "x"}
    assert Pod.from_raw(p).scheduling_group == "compositePodGroupName"
    assert SCHEDULING_GROUP in run(node("n0"), p).pending["default/w-0"]


# -- honoured, with a test here because the audit (docs/reference.md) names them ----------------

def _featured(p: dict[str, Any], how: str) -> dict[str, Any]:
    c = p["spec"]["containers"][0]
    if how == "restart-all":
        c["restartPolicyRules"] = [{"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}]
    elif how == "userns-host-network":
        p["spec"].update(hostNetwork=True, hostUsers=False)
    elif how == "bind-mount-options":
        c["volumeMounts"] = [{"name": "data", "mountPath": "/data", "bindMountOptions": ["nosuid"]}]
    return p


def _declaring(n: dict[str, Any], *features: str) -> dict[str, Any]:
    n["status"]["declaredFeatures"] = list(features)
    return n


@pytest.mark.parametrize(("how", "feature"), [("restart-all", "RestartAllContainersOnContainerExits"),
                                              ("userns-host-network", "UserNamespacesHostNetworkSupport"),
                                              ("bind-mount-options", "VolumeBindMountOptions")])
def test_node_declared_features_a_pod_needs_filter_nodes(how: str, feature: str) -> None:
    # kube-scheduler v1.37's NodeDeclaredFeatures (GA, on by default): a pod whose spec needs a node
    # feature goes only where status.declaredFeatures lists it.
    assert Pod.from_raw(_featured(pod("p"), how)).required_features == (feature,)
    out = run(node("old", cpu="64"), _declaring(node("new", cpu="1"), feature, "Other"),
              _featured(pod("needs", cpu="1"), how), pod("plain", cpu="1"))
    assert out.bound["default/needs"] == "new"
    out = run(node("old"), _featured(pod("needs", cpu="1"), how))
    assert out.pending["default/needs"] == "0/1 nodes are available: 1 node(s) didn't match Pod's required features."


def test_a_pod_needing_no_feature_needs_none() -> None:
    p = pod("p")
    p["spec"]["hostNetwork"] = True  # host network alone, user namespaces not asked for
    p["spec"]["containers"][0]["restartPolicyRules"] = [{"action": "Restart", "exitCodes": {"operator": "In",
                                                                                            "values": [1]}}]
    assert Pod.from_raw(p).required_features == ()


def test_a_pod_already_given_a_node_name_is_not_ours_to_place_and_counts_there() -> None:
    # kube-scheduler never queues a pod whose spec.nodeName is set, whatever its schedulerName: the
    # kubelet admits or rejects it. koordpy leaves it alone too and counts its requests on that node.
    world = World.from_objects([("t", o) for o in (node("n0", cpu="2"), pod("preset", cpu="2", node_name="n0"),
                                                   pod("new", cpu="1"))])
    result = schedule(world.snapshot(NAMES), SchedulerState(), world.now)
    assert not [d for d in result.decisions if getattr(d, "pod", None) == "default/preset"
                or getattr(d, "obj", None) == "default/preset"]
    assert "Insufficient cpu" in result.waiting["default/new"]


def test_a_toleration_operator_koordpy_does_not_know_makes_the_pod_invalid_not_tolerant() -> None:
    # Lt / Gt (TaintTolerationComparisonOperators, alpha in v1.37): refused with the field named,
    # never read as Equal.
    p = pod("p")
    p["spec"]["tolerations"] = [{"key": "tier", "operator": "Gt", "value": "3", "effect": "NoSchedule"}]
    with pytest.raises(ParseError, match=r"spec.tolerations\[0\].operator.*unknown operator 'Gt'"):
        Pod.from_raw(p)


def test_koordpy_simulate_reads_namespaces_and_reports_a_refused_pod(tmp_path: Any) -> None:
    # The command a user runs, end to end: exit 0, the refused pod pending with its reason and
    # FailedScheduling Event, and the Namespace read, not listed as "not acted on".
    import json
    import subprocess
    import sys

    import yaml

    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "a"}}}
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([ns, node("n0"), claiming(pod("dra", cpu="1")), pod("plain", cpu="1")]))
    done = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", str(path), "-o", "json"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["bound"] == {"default/plain": "n0"}
    assert out["pending"]["default/dra"] == NOT_CREATED
    assert [e["reason"] for e in out["events"] if e["object"] == "default/dra"] == ["FailedScheduling"]
    assert "not acted on" not in done.stderr


def workload_podgroup(name: str, policy: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"schedulingPolicy": policy, **spec}}


def test_pods_of_a_basic_podgroup_are_lone_pods_as_for_kube_scheduler() -> None:
    # What the Job controller makes for a plain Job (WorkloadWithJob): a basic PodGroup, no gang.
    out = run(node("n0"), workload_podgroup("workers", {"basic": {}}), grouped(pod("w-0", cpu="1")),
              grouped(pod("w-1", cpu="1")))
    assert out.bound == {"default/w-0": "n0", "default/w-1": "n0"}


def test_pods_of_a_gang_podgroup_are_scheduled_as_a_gang() -> None:
    # Issue 20: the gang policy is koordpy's to apply (tests/core/dialects/test_upstream.py has its rules).
    out = run(node("n0"), workload_podgroup("workers", {"gang": {"minCount": 2}}), grouped(pod("w-0", cpu="1")),
              grouped(pod("w-1", cpu="1")))
    assert out.bound == {"default/w-0": "n0", "default/w-1": "n0"}


def test_a_pod_whose_podgroup_does_not_exist_waits_for_it() -> None:
    out = run(node("n0"), grouped(pod("w-0", cpu="1")))
    assert out.pending["default/w-0"] == ("waiting for PodGroup default/workers (scheduling.k8s.io), which pod "
                                          "default/w-0 names in spec.schedulingGroup, to exist")
