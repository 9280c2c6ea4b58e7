"""Issue 31 item 3, from its review end to end (``koordpy simulate``'s World)."""

from __future__ import annotations

from typing import Any

from tests.builders import pod, run
from tests.sim.test_dra import DRIVER, claiming, gpu_class, gpu_nodes, gpu_slice, template


def bare_slice(node_name: str, n: int) -> dict[str, Any]:
    """GPUs without the model attribute: a selector on it is a CEL runtime error there."""
    s = gpu_slice(node_name, n=n)
    for d in s["spec"]["devices"]:
        del d["attributes"]["model"]
    return s


def test_a_cel_runtime_error_on_one_node_is_the_pods_error_not_a_bind_elsewhere() -> None:
    """node-b's GPUs lack the attribute the selector reads: kube-scheduler's Filter errors there and
    the attempt ends (FailedScheduling with the CEL error, no bind). Before 4129b4f koordpy said the
    error; with the counts node-a (asked first, counted on arrays) takes the pod."""
    sel = f'device.attributes["{DRIVER}"].model == "h100"'
    out = run(gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a", n=2), bare_slice("node-b", 2),
              template(count=1, selector=sel), claiming(pod("p", cpu="1"), template_name="gpus"))
    assert out.bound == {}, out.bound
    assert "CEL runtime error" in out.pending["default/p"]


def test_pods_of_one_template_are_told_why_in_the_same_words() -> None:
    """Three pods of one template none of which fits: each message names the claim as the pod does
    (``claim gpus``), never another pod's ResourceClaim (passes: no reserve between the pods' asks)."""
    out = run(gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a", n=2), gpu_slice("node-b", n=2),
              template(count=4), *[claiming(pod(f"p-{i}", cpu="1"), template_name="gpus") for i in range(3)])
    said = set(out.pending.values())
    assert len(out.pending) == 3
    for s in said:
        assert "claim gpus, request gpus" in s, s


def test_after_one_pod_binds_the_next_ones_are_told_why_in_their_own_words() -> None:
    """p-0 takes 4 of node-a's 6 GPUs; p-1 and p-2 (same template) fit nowhere after. Their
    FailedScheduling Events must name the claim as they do (``claim gpus``): the counts' kind is cached by the
    claims' key, which pods of one template share, and carries the first pod's claim key."""
    out = run(gpu_nodes("node-a", "node-b"), gpu_class(), gpu_slice("node-a", n=6), gpu_slice("node-b", n=2),
              template(count=4), *[claiming(pod(f"p-{i}", cpu="1"), template_name="gpus") for i in range(3)])
    assert out.bound == {"default/p-0": "node-a"}
    failed = [e.message for e in out.events if e.reason == "FailedScheduling"]
    assert failed
    for s in failed:
        assert "claim default/p-0-gpus" not in s, s
        assert "claim gpus, request gpus" in s, s
