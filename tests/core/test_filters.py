"""The filters every production scheduler has, with kube-scheduler's reasons."""

from typing import Any

from tests.builders import node, pod, run


def test_resources_cpu_memory_and_extended() -> None:
    gpu = node("gpu", extra={"nvidia.com/gpu": "8"})
    out = run(node("cpu-only"), gpu, _gpu_pod("train", "4"),
              _gpu_pod("too-many", "16"))
    assert out.bound == {"default/train": "gpu"}
    assert out.pending["default/too-many"] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."


def _gpu_pod(name: str, gpus: str) -> dict[str, Any]:
    p = pod(name, cpu="1")
    p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = gpus
    return p


def test_pods_count_is_a_resource() -> None:
    small = node("n")
    small["status"]["allocatable"]["pods"] = "1"
    out = run(small, pod("a", cpu="1"), pod("b", cpu="1"))
    assert len(out.bound) == 1 and "1 Too many pods" in next(iter(out.pending.values()))


def test_node_selector_and_required_affinity() -> None:
    nodes = [node("a", labels={"zone": "x", "tier": "5"}), node("b", labels={"zone": "y", "tier": "1"})]
    sel = pod("sel", cpu="1", nodeSelector={"zone": "y"})
    aff = pod("aff", cpu="1", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "tier", "operator": "Gt", "values": ["3"]}]}]}}})
    field = pod("field", cpu="1", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}})
    nowhere = pod("nowhere", cpu="1", nodeSelector={"zone": "z"})
    out = run(nodes, sel, aff, field, nowhere)
    assert out.bound == {"default/sel": "b", "default/aff": "a", "default/field": "b"}
    assert out.pending["default/nowhere"] == (
        "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector.")


def test_taints_tolerations_unschedulable_and_not_ready() -> None:
    tainted = node("tainted")
    tainted["spec"] = {"taints": [{"key": "gpu", "value": "h100", "effect": "NoSchedule"}]}
    cordoned = node("cordoned")
    cordoned["spec"] = {"unschedulable": True}
    down = node("down")
    down["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    tolerant = pod("tolerant", cpu="1", tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
    plain = pod("plain", cpu="1")
    out = run(tainted, cordoned, down, tolerant, plain)
    assert out.bound == {"default/tolerant": "tainted"}
    assert out.pending["default/plain"] == (
        "0/3 nodes are available: 1 node(s) had untolerated taint {gpu: h100}, 1 node(s) were not ready, "
        "1 node(s) were unschedulable.")


def test_every_bound_pod_counts_whatever_its_scheduler_and_finished_pods_do_not() -> None:
    other = pod("other", cpu="6", node_name="n", scheduler="default-scheduler")
    done = pod("done", cpu="8", node_name="n")
    done["status"] = {"phase": "Succeeded"}
    out = run(node("n"), other, done, pod("fits", cpu="2"), pod("does-not", cpu="1"))
    assert out.bound == {"default/fits": "n"} and "1 Insufficient cpu" in out.pending["default/does-not"]


def test_pods_of_other_schedulers_are_not_claimed() -> None:
    out = run(node("n"), pod("theirs", cpu="1", scheduler="default-scheduler"))
    assert out.bound == {} and out.pending == {}


def test_single_pods_binpack_onto_the_fullest_node() -> None:
    out = run(node("a"), node("b"), pod("busy", cpu="4", node_name="b"), pod("new", cpu="2"))
    assert out.bound == {"default/new": "b"}
