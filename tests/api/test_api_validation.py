"""The API layer refuses what the API server refuses, and computes requests as kube-scheduler v1.37."""

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from koordpy.api import ClusterNetworkTopology, Node, ParseError, Pod, PodGroup, PriorityClass
from koordpy.api.podgroup import gang_config_from_pod, gang_config_from_podgroup
from koordpy.sim.simulator import InputError
from tests.builders import SEED_12, SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, run, spine_block_nodes

GANG = "gang.scheduling.koordinator.sh/"
PREFER_BLOCK_SPINE = [{"layer": "BlockLayer", "strategy": "PreferGather"},
                      {"layer": "SpineLayer", "strategy": "PreferGather"}]


def container(name: str, cpu: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox", "resources": {"requests": {"cpu": cpu}}, **extra}


def requests_of(raw: dict[str, Any]) -> dict[str, int]:
    return Pod.from_raw(raw).requests


# -- requests ---------------------------------------------------------------------------------


def test_a_sidecar_adds_to_the_app_containers() -> None:
    raw = pod("p", cpu="4")
    raw["spec"]["initContainers"] = [container("proxy", "4", restartPolicy="Always")]
    assert requests_of(raw)["cpu"] == 8000


def test_a_sidecar_runs_beside_the_init_containers_after_it() -> None:
    raw = pod("p", cpu="1")
    raw["spec"]["initContainers"] = [container("proxy", "2", restartPolicy="Always"), container("migrate", "4")]
    assert requests_of(raw)["cpu"] == 6000  # migrate 4 + proxy 2 > app 1 + proxy 2


def test_an_init_container_before_the_sidecar_runs_alone() -> None:
    raw = pod("p", cpu="1")
    raw["spec"]["initContainers"] = [container("migrate", "5"), container("proxy", "2", restartPolicy="Always")]
    assert requests_of(raw)["cpu"] == 5000  # migrate alone (5) > app 1 + proxy 2


def test_regular_init_containers_take_the_max() -> None:
    raw = pod("p", cpu="1")
    raw["spec"]["initContainers"] = [container("a", "3"), container("b", "2")]
    assert requests_of(raw)["cpu"] == 3000


def test_init_container_restart_policy_other_than_always_is_refused() -> None:
    raw = pod("p")
    raw["spec"]["initContainers"] = [container("a", "1", restartPolicy="OnFailure")]
    with pytest.raises(ParseError) as err:
        Pod.from_raw(raw)
    assert err.value.field == "spec.initContainers[0].restartPolicy"


def test_pod_level_requests_replace_the_containers_sum() -> None:
    raw = pod("p", cpu="4", memory="1Gi")
    raw["spec"]["resources"] = {"requests": {"cpu": "2"}}
    raw["spec"]["overhead"] = {"cpu": "250m"}
    req = requests_of(raw)
    assert req["cpu"] == 2250 and req["memory"] == 2**30  # memory still from the containers


def test_pod_level_limits_default_the_request_only_where_containers_ask_nothing() -> None:
    raw = pod("p", cpu="4", memory="1Gi")
    raw["spec"]["containers"][0]["resources"]["requests"].pop("memory")
    raw["spec"]["resources"] = {"limits": {"cpu": "8", "memory": "4Gi"}}
    req = requests_of(raw)
    assert req["cpu"] == 4000  # the containers' own cpu request stands
    assert req["memory"] == 4 * 2**30  # no container asks for memory: the pod-level limit is the request


def test_pod_level_resources_only_for_cpu_memory_and_hugepages() -> None:
    raw = pod("p")
    raw["spec"]["resources"] = {"requests": {"nvidia.com/gpu": "1"}}
    with pytest.raises(ParseError) as err:
        Pod.from_raw(raw)
    assert err.value.field == "spec.resources.requests.nvidia.com/gpu"


def test_pods_request_one_and_nodes_default_to_110() -> None:
    assert requests_of(pod("p"))["pods"] == 1
    raw = node("n")
    del raw["status"]["allocatable"]["pods"]
    assert Node.from_raw(raw).allocatable["pods"] == 110


def test_a_petabyte_node_schedules() -> None:
    out = run(node("big", memory="10P"), pod("p", memory="1Ti"))
    assert out.bound == {"default/p": "big"}


def test_extended_resources_must_be_whole() -> None:
    raw = pod("p")
    raw["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "0.5"}
    with pytest.raises(ParseError) as err:
        Pod.from_raw(raw)
    assert err.value.field == "spec.containers[0].resources.limits.nvidia.com/gpu"
    assert "whole number" in err.value.message


def test_an_overflowing_allocatable_names_the_field() -> None:
    with pytest.raises(ParseError) as err:
        Node.from_raw(node("n", memory="1e999990"))
    assert (err.value.obj, err.value.field) == ("Node n", "status.allocatable.memory")
    assert "int64" in err.value.message


def test_min_resources_message_speaks_quantities() -> None:
    pg = podgroup("g", 1)
    pg["spec"]["minResources"] = {"memory": "64Gi", "cpu": "500m"}
    out = run(node("n"), pg, pod("p", group="g"))
    assert out.pending["default/p"].endswith("memory wants 64Gi, the cluster has 32Gi free")


# -- types ------------------------------------------------------------------------------------


def fails(parse: Any, raw: dict[str, Any]) -> ParseError:
    with pytest.raises(ParseError) as err:
        parse(raw)
    return err.value


def test_unschedulable_must_be_a_bool() -> None:
    raw = node("n")
    raw["spec"] = {"unschedulable": "false"}
    assert fails(Node.from_raw, raw).field == "spec.unschedulable"
    raw["spec"] = {"unschedulable": False}
    assert not Node.from_raw(raw).unschedulable


def test_global_default_must_be_a_bool() -> None:
    raw = priority_class("high", 10)
    raw["globalDefault"] = "true"
    assert fails(PriorityClass.from_raw, raw).field == "globalDefault"
    raw["globalDefault"] = True
    assert PriorityClass.from_raw(raw).global_default


@pytest.mark.parametrize("value", ["1000", True, 1000.0, 2**31, -(2**31) - 1])
def test_priority_class_value_is_an_int32(value: object) -> None:
    raw = priority_class("high", 0)
    raw["value"] = value
    assert fails(PriorityClass.from_raw, raw).field == "value"


def test_priority_class_value_bounds_are_accepted() -> None:
    assert PriorityClass.from_raw(priority_class("top", 2**31 - 1)).value == 2**31 - 1


@pytest.mark.parametrize("value", ["5", True, 2**31])
def test_pod_priority_is_an_int32(value: object) -> None:
    assert fails(Pod.from_raw, pod("p", priority=value)).field == "spec.priority"


@pytest.mark.parametrize(("spec", "field"), [
    ({"minMember": "3"}, "spec.minMember"), ({"minMember": True}, "spec.minMember"),
    ({"minMember": 2**31}, "spec.minMember"), ({"minMember": 2, "scheduleTimeoutSeconds": "60"},
                                               "spec.scheduleTimeoutSeconds"),
    ({"minMember": 2, "scheduleTimeoutSeconds": 2**31}, "spec.scheduleTimeoutSeconds"),
])
def test_podgroup_integers_are_int32(spec: dict[str, Any], field: str) -> None:
    raw = podgroup("g", 1)
    raw["spec"] = spec
    assert fails(PodGroup.from_raw, raw).field == field


@pytest.mark.parametrize(("value", "shown"), [(3, '"3"'), (True, '"true"'), (1.5, '"1.5"')])
def test_unquoted_annotation_values_say_how_to_quote(value: object, shown: str) -> None:
    raw = pod("p", annotations={GANG + "min-available": value})  # type: ignore[dict-item]
    err = fails(Pod.from_raw, raw)
    assert err.field == "metadata.annotations[gang.scheduling.koordinator.sh/min-available]"
    assert err.message == f"must be a string; quote it: {shown}"
    assert str(err) == ('Pod default/p: metadata.annotations[gang.scheduling.koordinator.sh/min-available]: '
                        f"must be a string; quote it: {shown}")


def test_label_values_must_be_strings() -> None:
    err = fails(Node.from_raw, node("n", labels={"rack": 7}))  # type: ignore[dict-item]
    assert err.field == "metadata.labels[rack]" and "must be a string" in err.message
    assert fails(Pod.from_raw, pod("p", labels={"a": {"b": "c"}})).field == "metadata.labels[a]"  # type: ignore[dict-item]


def test_node_affinity_values_must_be_strings() -> None:
    raw = pod("p", affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "gen", "operator": "Gt", "values": [3]}]}]}}})
    assert fails(Pod.from_raw, raw).field == (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchExpressions[0].values[0]")


def test_a_null_label_value_is_empty_as_the_api_server_decodes_it() -> None:
    assert Pod.from_raw(pod("p", labels={"a": None})).labels["a"] == ""  # type: ignore[dict-item]


@pytest.mark.parametrize("key", ["min-available", "total-number"])
@pytest.mark.parametrize("value", ["2147483648", "-2147483649", "1_000", " 3", "3.0", "9" * 40])
def test_gang_annotation_integers(key: str, value: str) -> None:
    ann = {GANG + "name": "g", GANG + "min-available": "1", GANG + key: value}
    with pytest.raises(ParseError) as err:
        gang_config_from_pod("Pod default/p", "default", ann, None)
    assert err.value.field == f"metadata.annotations[{GANG}{key}]"


def test_gang_annotation_integer_bound_is_accepted() -> None:
    ann = {GANG + "name": "g", GANG + "min-available": "2147483647"}
    cfg = gang_config_from_pod("Pod default/p", "default", ann, None)
    assert cfg is not None and cfg.min_member == 2**31 - 1


def test_pod_count_multiple_must_fit_int32() -> None:
    raw = podgroup("g", 2, gather=[{"layer": "BlockLayer", "strategy": "MustGather",
                                    "podCountMultiple": 100000000000000000000}])
    err = fails(PodGroup.from_raw, raw)
    assert err.field == f"metadata.annotations[{GANG}network-topology-spec]"
    assert "podCountMultiple" in err.message and "int32" in err.message


# -- timestamps -------------------------------------------------------------------------------


@pytest.mark.parametrize("stamp", ["2026-01-01T00:00:00", "2026-01-01 00:00:00", datetime(2026, 1, 1),
                                   "2026-01-01"])
def test_a_time_without_zone_is_refused(stamp: object) -> None:
    raw = pod("p")
    raw["metadata"]["creationTimestamp"] = stamp
    err = fails(Pod.from_raw, raw)
    assert err.field == "metadata.creationTimestamp" and "time zone" in err.message


@pytest.mark.parametrize("stamp", ["2026-01-01T00:00:00Z", "2026-01-01T02:00:00+02:00", "2026-01-01t00:00:00z",
                                   datetime(2026, 1, 1, tzinfo=UTC),
                                   datetime(2025, 12, 31, 19, 0, tzinfo=timezone(timedelta(hours=-5)))])
def test_zoned_times_are_read_in_their_zone(stamp: object) -> None:
    raw = pod("p")
    raw["metadata"]["creationTimestamp"] = stamp
    assert Pod.from_raw(raw).creation == datetime(2026, 1, 1, tzinfo=UTC).timestamp()


def test_a_podgroup_status_time_without_zone_is_refused() -> None:
    raw = podgroup("g", 1)
    raw["status"] = {"phase": "Scheduling", "scheduleStartTime": "2026-01-01T00:00:00"}
    assert fails(PodGroup.from_raw, raw).field == "status.scheduleStartTime"


# -- names ------------------------------------------------------------------------------------


def renamed(raw: dict[str, Any], name: str) -> dict[str, Any]:
    raw["metadata"]["name"] = name
    return raw


@pytest.mark.parametrize("name", ["Node-1", "node_1", "-node", "node.", "a" * 254, "node..1"])
def test_object_names_are_rfc1123_subdomains(name: str) -> None:
    for parse, raw in ((Node.from_raw, node("x")), (Pod.from_raw, pod("x")), (PodGroup.from_raw, podgroup("x", 1)),
                       (PriorityClass.from_raw, priority_class("x", 1)),
                       (ClusterNetworkTopology.from_raw, json.loads(json.dumps(SPINE_BLOCK_CNT)))):
        assert fails(parse, renamed(raw, name)).field == "metadata.name"


def test_long_and_dotted_names_are_accepted() -> None:
    assert Node.from_raw(node("a" * 253)).name == "a" * 253
    assert Pod.from_raw(pod("web-0.example.com")).name == "web-0.example.com"


@pytest.mark.parametrize("namespace", ["team.a", "Team", "a" * 64, "team_a"])
def test_namespaces_are_rfc1123_labels(namespace: str) -> None:
    for parse, raw in ((Pod.from_raw, pod("p")), (PodGroup.from_raw, podgroup("g", 1))):
        raw["metadata"]["namespace"] = namespace
        assert fails(parse, raw).field == "metadata.namespace"


# -- waiting time -----------------------------------------------------------------------------


@pytest.mark.parametrize("timeout", [0, -5])
def test_non_positive_schedule_timeout_is_the_default(timeout: int) -> None:
    assert gang_config_from_podgroup(PodGroup.from_raw(podgroup("g", 1, timeout=timeout))).waiting_seconds == 600


@pytest.mark.parametrize("wait", ["0s", "0", "-5s", "-1h"])
def test_non_positive_waiting_time_annotation_is_the_default(wait: str) -> None:
    ann = {GANG + "name": "g", GANG + "min-available": "2", GANG + "waiting-time": wait}
    cfg = gang_config_from_pod("Pod default/p", "default", ann, None)
    assert cfg is not None and cfg.waiting_seconds == 600
    pg = PodGroup.from_raw(podgroup("g", 1, timeout=30, annotations={GANG + "waiting-time": wait}))
    assert gang_config_from_podgroup(pg).waiting_seconds == 600


def test_a_positive_waiting_time_is_kept() -> None:
    assert gang_config_from_podgroup(PodGroup.from_raw(podgroup("g", 1, timeout=45))).waiting_seconds == 45
    ann = {GANG + "name": "g", GANG + "min-available": "2", GANG + "waiting-time": "90s"}
    cfg = gang_config_from_pod("Pod default/p", "default", ann, None)
    assert cfg is not None and cfg.waiting_seconds == 90


# -- annotation gangs keep their topology -----------------------------------------------------


def annotation_gang(n: int, spec: str | None) -> list[dict[str, Any]]:
    ann = {GANG + "name": "job", GANG + "min-available": str(n)}
    if spec is not None:
        ann[GANG + "network-topology-spec"] = spec
    return [pod(f"training-pod-{i}", index=i, annotations=ann) for i in range(n)]


def test_annotation_gang_prefer_gather_lands_like_the_podgroup() -> None:
    spec = json.dumps({"gatherStrategy": PREFER_BLOCK_SPINE})
    out = run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT, annotation_gang(4, spec))
    assert out.bound == {f"default/training-pod-{i}": f"node-{5 + i}" for i in range(4)}
    # Without the spec the same gang is placed elsewhere, so the spec is what moved it.
    plain = run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT, annotation_gang(4, None))
    assert len(plain.bound) == 4 and plain.bound != out.bound


def test_annotation_gang_topology_config() -> None:
    spec = json.dumps({"gatherStrategy": [{"layer": "SpineLayer", "strategy": "MustGather", "podCountMultiple": 2}]})
    ann = {GANG + "name": "job", GANG + "min-available": "4", GANG + "network-topology-spec": spec}
    cfg = gang_config_from_pod("Pod default/p", "default", ann, None)
    assert cfg is not None and cfg.topology is not None
    assert (cfg.topology.gather[0].layer, cfg.topology.gather[0].pod_count_multiple) == ("SpineLayer", 2)


@pytest.mark.parametrize("spec", ["{not json", '{"gatherStrategy": [{"layer": "BlockLayer", "strategy": "Gather"}]}',
                                  '{"gatherStrategy": [{"layer": "B", "strategy": "MustGather", '
                                  '"podCountMultiple": 100000000000000000000}]}'])
def test_a_malformed_spec_on_an_annotation_gang_is_the_podgroup_error(spec: str) -> None:
    field = f"metadata.annotations[{GANG}network-topology-spec]"
    with pytest.raises(ParseError) as on_pg:
        PodGroup.from_raw(podgroup("job", 1, annotations={GANG + "network-topology-spec": spec}))
    ann = {GANG + "name": "job", GANG + "min-available": "1", GANG + "network-topology-spec": spec}
    with pytest.raises(ParseError) as on_pod:
        gang_config_from_pod("Pod default/p", "default", ann, None)
    assert on_pod.value.field == on_pg.value.field == field
    assert on_pod.value.message == on_pg.value.message
    with pytest.raises(InputError, match="network-topology-spec"):
        run(spine_block_nodes(SEED_12), SPINE_BLOCK_CNT, annotation_gang(2, spec))


def test_an_empty_spec_declares_no_topology() -> None:
    ann = {GANG + "name": "job", GANG + "min-available": "1", GANG + "network-topology-spec": ""}
    cfg = gang_config_from_pod("Pod default/p", "default", ann, None)
    assert cfg is not None and cfg.topology is None
