"""The special claim of DRA-backed extended resources (koordpy.core.extended): its requests and the pod's
request mappings, named and counted as kube-scheduler v1.37.2 does (cases translated from its
extendeddynamicresources_test.go), and which class backs a resource."""

from __future__ import annotations

from typing import Any

from koordpy.api.dra import DeviceClass
from koordpy.api.objects import Node, Pod
from koordpy.core.extended import asked, backing, left_to_dra, special_of

GPU, INIT = "example.com/gpu", "example.com/gpuinit"


def _container(name: str, requests: dict[str, str], sidecar: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "resources": {"requests": requests}}
    if sidecar:
        body["restartPolicy"] = "Always"
    return body


def _pod(containers: list[dict[str, Any]], inits: list[dict[str, Any]] | None = None) -> Pod:
    return Pod.from_raw({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
                         "spec": {"containers": containers, "initContainers": inits or []}})


def _classes(*pairs: tuple[str, str]) -> dict[str, DeviceClass]:
    return {name: DeviceClass(name, extended_resource_name=resource) for resource, name in pairs}


def _requests(pod: Pod, backed: dict[str, DeviceClass]) -> tuple[list[tuple[str, str, int]], list[tuple[str, ...]]]:
    wanted = asked(pod, backed)
    made = special_of(pod.extended_requests, tuple(r for r, _ in wanted), backed)
    reqs = [(r.name, r.exactly.device_class, r.exactly.count) for r in made.spec.requests if r.exactly is not None]
    return reqs, sorted(made.mappings, key=lambda m: (m[2], m[0]))


def test_one_container_two_resources_one_request_each_in_name_order() -> None:
    backed = backing(_classes((GPU, "class"), (GPU + "1", "class1")))
    pod = _pod([_container("con0", {GPU: "1", GPU + "1": "2"})])
    reqs, maps = _requests(pod, backed)
    assert reqs == [("container-0-request-0", "class", 1), ("container-0-request-1", "class1", 2)]
    assert maps == [("con0", GPU, "container-0-request-0"), ("con0", GPU + "1", "container-0-request-1")]


def test_init_containers_reuse_the_devices_of_those_after_them_and_share_the_largest_request() -> None:
    # kube-scheduler's "three init containers, one sidecar, one regular container" (podInit3).
    backed = backing(_classes((GPU, "class"), (INIT, "classInit")))
    pod = _pod([_container("con0", {GPU: "1"})],
               [_container("init-con0", {INIT: "1"}), _container("sidecar-con1", {INIT: "1"}, sidecar=True),
                _container("init-con2", {INIT: "2"})])
    reqs, maps = _requests(pod, backed)
    assert reqs == [("container-1-request-0", "classInit", 1), ("container-2-request-0", "classInit", 2),
                    ("container-3-request-0", "class", 1)]
    assert maps == [("init-con0", INIT, "container-1-request-0"), ("sidecar-con1", INIT, "container-1-request-0"),
                    ("init-con2", INIT, "container-2-request-0"), ("con0", GPU, "container-3-request-0")]


def test_two_init_containers_map_to_the_larger_ones_request() -> None:
    # "two init containers, one regular container" (podInit2): one request of 2 for both.
    backed = backing(_classes((GPU, "class"), (INIT, "classInit")))
    pod = _pod([_container("con0", {GPU: "1"})], [_container("init-con0", {INIT: "1"}),
                                                   _container("init-con1", {INIT: "2"})])
    reqs, maps = _requests(pod, backed)
    assert reqs == [("container-1-request-0", "classInit", 2), ("container-2-request-0", "class", 1)]
    assert maps == [("init-con0", INIT, "container-1-request-0"), ("init-con1", INIT, "container-1-request-0"),
                    ("con0", GPU, "container-2-request-0")]


def test_the_request_index_counts_every_resource_of_the_container_in_name_order() -> None:
    backed = backing(_classes((GPU, "class")))
    pod = _pod([_container("c", {"cpu": "1", GPU: "2", "memory": "1Gi"})])
    reqs, _ = _requests(pod, backed)
    assert reqs == [("container-0-request-1", "class", 2)]  # cpu, example.com/gpu, memory


def test_the_newer_class_backs_a_name_two_classes_give_and_every_class_its_implicit_name() -> None:
    old = DeviceClass("b-old", extended_resource_name=GPU, creation=100.0)
    new = DeviceClass("z-new", extended_resource_name=GPU, creation=200.0)
    tie = DeviceClass("a-tie", extended_resource_name=GPU, creation=200.0)
    assert backing({c.name: c for c in (old, new)})[GPU].name == "z-new"
    assert backing({c.name: c for c in (old, new, tie)})[GPU].name == "a-tie"  # the lower name on a tie
    assert backing({"b-old": old})["deviceclass.resource.kubernetes.io/b-old"] is old


def test_a_node_that_lists_the_resource_leaves_nothing_to_dra() -> None:
    wanted = ((GPU, 2),)
    assert left_to_dra(wanted, Node(name="a", allocatable={GPU: 4})) == ()
    assert left_to_dra(wanted, Node(name="b", allocatable={GPU: 0})) == (GPU,)
    assert left_to_dra(wanted, Node(name="c", allocatable={})) == (GPU,)
