"""The differential test's independent checker (tests/integration/checker.py) on hand-made cases, so
that a checker that lets everything through (or nothing) fails here before it judges koordpy.

Most cases are kube-scheduler's filter rules stated as small clusters: which nodes a pod may go to."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import node, pod
from tests.integration.checker import (
    State,
    host_ports,
    order_free_violations,
    pending_with_room,
    pod_requests,
    quantity,
    replay,
)

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
Obj = dict[str, Any]


def bound(name: str, on: str, labels: dict[str, str] | None = None, cpu: str = "1", **spec: Any) -> Obj:
    p = pod(name, cpu=cpu, labels=labels, node_name=on, **spec)
    p["status"] = {"phase": "Running"}
    return p


def zoned(name: str, zone: str, cpu: str = "8", **labels: str) -> Obj:
    return node(name, cpu=cpu, labels={ZONE: zone, **labels})


def allowed(nodes: list[Obj], pods: list[Obj], incoming: Obj, namespaces: dict[str, dict[str, str]] | None = None
            ) -> list[str]:
    state = State(nodes, namespaces or {})
    for p in pods:
        state.add(p, p["spec"]["nodeName"])
    return state.feasible(incoming)


def term(labels: dict[str, str] | None, key: str = HOST, **extra: Any) -> Obj:
    out: Obj = {"topologyKey": key, **extra}
    if labels is not None:
        out["labelSelector"] = {"matchLabels": labels}
    return out


def affine(*terms: Obj, anti: bool = False) -> Obj:
    kind = "podAntiAffinity" if anti else "podAffinity"
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(labels: dict[str, str], key: str = ZONE, skew: int = 1, **extra: Any) -> Obj:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": labels}, **extra}


def with_ports(*entries: tuple[int, str, str]) -> list[Obj]:
    ports = []
    for port, proto, ip in entries:
        p: Obj = {"containerPort": port, "hostPort": port, "protocol": proto}
        if ip:
            p["hostIP"] = ip
        ports.append(p)
    return [{"name": "main", "image": "busybox", "ports": ports, "resources": {"requests": {"cpu": "1"}}}]


# -- quantities and requests --------------------------------------------------------------------

def test_quantities() -> None:
    assert quantity("250m") * 1000 == 250
    assert quantity("4Gi") == 4 * 2**30
    assert quantity("1.5") * 2 == 3
    assert quantity("1e3") == 1000
    assert quantity("2k") == 2000


def test_requests_count_init_containers_and_sidecars() -> None:
    p = pod("p", cpu="1", memory="1Gi")
    p["spec"]["initContainers"] = [
        {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
        {"name": "setup", "resources": {"requests": {"cpu": "3"}}},
    ]
    # The regular init container runs beside the sidecar started before it: 3.5 > 1 + 0.5.
    assert pod_requests(p)["cpu"] == 3500
    p["spec"]["initContainers"][1]["resources"]["requests"]["cpu"] = "100m"
    assert pod_requests(p)["cpu"] == 1500


# -- node filters -------------------------------------------------------------------------------

def test_resource_fit_and_the_pod_count() -> None:
    nodes = [node("a", cpu="2"), node("b", cpu="2")]
    nodes[1]["status"]["allocatable"]["pods"] = "1"
    assert allowed(nodes, [bound("x", "a", cpu="1500m")], pod("p", cpu="1")) == ["b"]
    assert allowed(nodes, [bound("x", "b", cpu="100m")], pod("p", cpu="1")) == ["a"]


def test_node_selector_and_required_node_affinity() -> None:
    nodes = [node("a", labels={"pool": "gpu", "gen": "3"}), node("b", labels={"pool": "cpu", "gen": "5"}),
             node("c")]
    assert allowed(nodes, [], pod("p", cpu="1", nodeSelector={"pool": "gpu"})) == ["a"]
    na = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]}}}
    assert allowed(nodes, [], pod("p", cpu="1", affinity=na)) == ["b", "c"]
    not_in = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "NotIn", "values": ["gpu"]}]}]}}}
    assert allowed(nodes, [], pod("p", cpu="1", affinity=not_in)) == ["b", "c"]  # no label: not in


def test_taints_tolerations_and_cordons() -> None:
    nodes = [node("a"), node("b"), node("c"), node("d")]
    nodes[0]["spec"] = {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]}
    nodes[1]["spec"] = {"taints": [{"key": "soft", "effect": "PreferNoSchedule"}]}
    nodes[2]["spec"] = {"unschedulable": True}
    nodes[3]["spec"] = {"taints": [{"key": "gone", "effect": "NoExecute"}]}
    assert allowed(nodes, [], pod("p", cpu="1")) == ["b"]
    tol = [{"key": "dedicated", "operator": "Equal", "value": "infra", "effect": "NoSchedule"}]
    assert allowed(nodes, [], pod("p", cpu="1", tolerations=tol)) == ["a", "b"]
    wrong = [{"key": "dedicated", "operator": "Equal", "value": "other"}]
    assert allowed(nodes, [], pod("p", cpu="1", tolerations=wrong)) == ["b"]
    assert allowed(nodes, [], pod("p", cpu="1", tolerations=[{"operator": "Exists"}])) == ["a", "b", "c", "d"]


@pytest.mark.parametrize(("have", "want", "fits"), [
    ((8080, "TCP", ""), (8080, "TCP", ""), False),
    ((8080, "TCP", ""), (8080, "UDP", ""), True),
    ((8080, "TCP", "127.0.0.1"), (8080, "TCP", "127.0.0.2"), True),
    ((8080, "TCP", "127.0.0.1"), (8080, "TCP", "0.0.0.0"), False),
    ((8080, "TCP", ""), (8080, "TCP", "127.0.0.1"), False),
    ((8080, "TCP", ""), (8081, "TCP", ""), True),
])
def test_host_ports(have: tuple[int, str, str], want: tuple[int, str, str], fits: bool) -> None:
    existing = bound("x", "a", containers=with_ports(have))
    assert allowed([node("a")], [existing], pod("p", containers=with_ports(want))) == (["a"] if fits else [])


def test_a_sidecars_host_port_counts_and_a_plain_init_containers_does_not() -> None:
    p = pod("p", cpu="1")
    p["spec"]["initContainers"] = [{"name": "s", "restartPolicy": "Always", "ports": [{"hostPort": 9000}]},
                                   {"name": "i", "ports": [{"hostPort": 9001}]}]
    assert host_ports(p) == [("0.0.0.0", "TCP", 9000)]


# -- inter-pod affinity -------------------------------------------------------------------------

def test_affinity_goes_to_the_domain_of_a_matching_pod() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")]
    p = pod("p", cpu="1", affinity=affine(term({"app": "db"}, ZONE)))
    assert allowed(nodes, [bound("db", "b", {"app": "db"})], p) == ["a", "b"]
    assert allowed(nodes, [bound("x", "b", {"app": "web"})], p) == []


def test_affinity_terms_must_all_match_one_pod() -> None:
    nodes = [node("a"), node("b")]
    p = pod("p", cpu="1", affinity=affine(term({"app": "x"}), term({"tier": "y"})))
    pods = [bound("x", "a", {"app": "x"}), bound("y", "a", {"tier": "y"}), bound("xy", "b", {"app": "x", "tier": "y"})]
    assert allowed(nodes, pods, p) == ["b"]


def test_the_first_pod_of_a_self_affine_set() -> None:
    nodes = [zoned("a", "z1"), node("bare")]
    p = pod("p", cpu="1", labels={"app": "db"}, affinity=affine(term({"app": "db"}, ZONE)))
    # Nobody matches: it may go anywhere its terms' keys exist (not to the node without a zone).
    assert allowed(nodes, [], p) == ["a"]
    # A pod that does not match its own terms gets no such pass.
    other = pod("q", cpu="1", labels={"app": "web"}, affinity=affine(term({"app": "db"}, ZONE)))
    assert allowed(nodes, [], other) == []
    # Once a matching pod exists somewhere, it must join it, even if that pod's node has no zone.
    nodes.append(zoned("c", "z2"))
    assert allowed(nodes, [bound("db", "c", {"app": "db"})], p) == ["c"]
    assert allowed(nodes, [bound("db", "bare", {"app": "db"})], p) == ["a", "c"]  # counted only where keyed


def test_anti_affinity_and_its_symmetry() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), node("bare")]
    anti = affine(term({"app": "web"}, ZONE), anti=True)
    assert allowed(nodes, [bound("w", "a", {"app": "web"})], pod("p", cpu="1", affinity=anti)) == ["c", "bare"]
    # A bound pod's anti-affinity keeps a matching newcomer out of its zone.
    holder = bound("h", "a", {"app": "db"}, affinity=anti)
    assert allowed(nodes, [holder], pod("p", cpu="1", labels={"app": "web"})) == ["c", "bare"]
    assert allowed(nodes, [holder], pod("p", cpu="1", labels={"app": "other"})) == ["a", "b", "c", "bare"]


def test_namespaces_and_namespace_selectors() -> None:
    nodes = [node("a"), node("b")]
    other = bound("x", "a", {"app": "web"})
    other["metadata"]["namespace"] = "team-b"
    nss = {"team-b": {"team": "b"}, "default": {}}
    same_ns = pod("p", cpu="1", affinity=affine(term({"app": "web"}), anti=True))
    assert allowed(nodes, [other], same_ns, nss) == ["a", "b"]
    listed = pod("p", cpu="1", affinity=affine(term({"app": "web"}, namespaces=["team-b"]), anti=True))
    assert allowed(nodes, [other], listed, nss) == ["b"]
    selected = pod("p", cpu="1", affinity=affine(term({"app": "web"}, namespaceSelector={"matchLabels": {"team": "b"}}),
                                                 anti=True))
    assert allowed(nodes, [other], selected, nss) == ["b"]
    assert allowed(nodes, [other], selected, {"team-b": {"team": "c"}}) == ["a", "b"]
    everywhere = pod("p", cpu="1", affinity=affine(term({"app": "web"}, namespaceSelector={}), anti=True))
    assert allowed(nodes, [other], everywhere, nss) == ["b"]


def test_match_label_keys() -> None:
    t = term({"app": "train"}, matchLabelKeys=["job"])
    j1 = bound("j1-0", "a", {"app": "train", "job": "j1"})
    same = pod("j1-1", cpu="1", labels={"app": "train", "job": "j1"}, affinity=affine(t, anti=True))
    other = pod("j2-0", cpu="1", labels={"app": "train", "job": "j2"}, affinity=affine(t, anti=True))
    assert allowed([node("a")], [j1], same) == []
    assert allowed([node("a")], [j1], other) == ["a"]
    mismatch = pod("p", cpu="1", labels={"app": "train", "job": "j1"},
                   affinity=affine(term({"app": "train"}, mismatchLabelKeys=["job"]), anti=True))
    assert allowed([node("a")], [j1], mismatch) == ["a"]


# -- topology spread ----------------------------------------------------------------------------

def spread_cluster() -> tuple[list[Obj], list[Obj]]:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d", "z2")]
    return nodes, [bound("x0", "a", {"foo": ""}), bound("x1", "b", {"foo": ""}), bound("x2", "c", {"foo": ""})]


def test_spread_max_skew() -> None:
    nodes, pods = spread_cluster()
    p = pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})])
    assert allowed(nodes, pods, p) == ["c", "d"]
    loose = pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""}, skew=2)])
    assert allowed(nodes, pods, loose) == ["a", "b", "c", "d"]
    # A pod the selector does not match adds nothing to the domain it joins.
    outsider = pod("p", cpu="1", labels={"bar": ""}, topologySpreadConstraints=[spread({"foo": ""})])
    assert allowed(nodes, pods, outsider) == ["a", "b", "c", "d"]


def test_spread_needs_every_key_and_counts_only_keyed_nodes() -> None:
    nodes = [zoned("a", "z1"), node("bare")]
    p = pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})])
    assert allowed(nodes, [bound("x", "bare", {"foo": ""})], p) == ["a"]


def test_spread_min_domains() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z2")]
    pods = [bound("x0", "a", {"foo": ""}), bound("x1", "b", {"foo": ""})]
    p = pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""}, minDomains=3)])
    assert allowed(nodes, pods, p) == []
    p2 = pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""}, minDomains=2)])
    assert allowed(nodes, pods, p2) == ["a", "b"]


def test_spread_node_inclusion_policies() -> None:
    nodes = [zoned("a", "z1", pool="gpu"), zoned("c", "z2", pool="cpu")]
    pods = [bound("x0", "a", {"foo": ""})]
    honor = pod("p", cpu="1", labels={"foo": ""}, nodeSelector={"pool": "gpu"},
                topologySpreadConstraints=[spread({"foo": ""})])
    assert allowed(nodes, pods, honor) == ["a"]
    ignore = pod("p", cpu="1", labels={"foo": ""}, nodeSelector={"pool": "gpu"},
                 topologySpreadConstraints=[spread({"foo": ""}, nodeAffinityPolicy="Ignore")])
    assert allowed(nodes, pods, ignore) == []
    tainted = [zoned("a", "z1"), zoned("c", "z2")]
    tainted[1]["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    by_default = pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})])
    assert allowed(tainted, pods, by_default) == []  # Ignore: z2 counts as an empty domain
    taints_honored = pod("p", cpu="1", labels={"foo": ""},
                         topologySpreadConstraints=[spread({"foo": ""}, nodeTaintsPolicy="Honor")])
    assert allowed(tainted, pods, taints_honored) == ["a"]


def test_spread_counts_only_the_pods_namespace_and_live_pods() -> None:
    nodes = [zoned("a", "z1"), zoned("c", "z2")]
    elsewhere = bound("x0", "a", {"foo": ""})
    elsewhere["metadata"]["namespace"] = "other"
    gone = bound("x1", "a", {"foo": ""})
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    p = pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})])
    assert allowed(nodes, [elsewhere, gone], p) == ["a", "c"]


# -- judging a run ------------------------------------------------------------------------------

def test_replay_blames_the_second_of_two_anti_affine_pods_and_names_the_rule() -> None:
    anti = affine(term({"app": "web"}), anti=True)
    r0 = bound("r0", "a", {"app": "web"}, affinity=anti)
    r1 = bound("r1", "a", {"app": "web"}, affinity=anti)
    pods = {"default/r0": r0, "default/r1": r1}
    problems = replay([node("a"), node("b")], {}, pods, ["default/r0", "default/r1"])
    assert len(problems) == 1
    assert problems[0].startswith("bind #2: default/r1 on a broke InterPodAffinity: anti-affinity term 0")
    r1["spec"]["nodeName"] = "b"
    assert replay([node("a"), node("b")], {}, pods, ["default/r0", "default/r1"]) == []


def test_replay_follows_the_order_for_affinity() -> None:
    # q needs a db pod in its zone: fine after db, a violation before it.
    db = bound("db", "a", {"app": "db"})
    q = bound("q", "a", {"app": "q"}, affinity=affine(term({"app": "db"})))
    pods = {"default/db": db, "default/q": q}
    assert replay([node("a")], {}, pods, ["default/db", "default/q"]) == []
    assert "no pod matching the affinity terms" in replay([node("a")], {}, pods, ["default/q", "default/db"])[0]


def test_pending_with_room_finds_a_node_that_was_free() -> None:
    waiting = pod("w", cpu="4")
    assert pending_with_room([node("a", cpu="8")], {}, [bound("x", "a", cpu="4")], [waiting]) == {"default/w": ["a"]}
    assert pending_with_room([node("a", cpu="8")], {}, [bound("x", "a", cpu="5")], [waiting]) == {}


def test_order_free_violations_see_pairs_whatever_the_order() -> None:
    anti = affine(term({"app": "web"}), anti=True)
    pair = [bound("r0", "a", {"app": "web"}, affinity=anti), bound("r1", "a", {"app": "web"})]
    found = order_free_violations([node("a")], {}, pair)
    assert [f.split(":")[0] for f in found] == ["default/r0 on a", "default/r1 on a"]
    # A missing affinity partner is not one of them: a later pod may have brought it.
    lonely = [bound("q", "a", {}, affinity=affine(term({"app": "db"})))]
    assert order_free_violations([node("a")], {}, lonely) == []
