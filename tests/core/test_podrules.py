"""Rules between pods: inter-pod affinity and anti-affinity, topology spread constraints and host
ports, for lone pods and between the members of one gang.

The lone-pod cases are translated from kube-scheduler's own filter tests (interpodaffinity,
podtopologyspread and nodeports filtering tests): the same cluster, the same incoming pod, the same
nodes allowed, in our test data.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.core.cycle import schedule
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, run, spine_block_nodes

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def term(labels: dict[str, str] | None = None, key: str = HOST, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"topologyKey": key, **extra}
    if labels is not None:
        out["labelSelector"] = {"matchLabels": labels}
    return out


def affine(*terms: dict[str, Any], anti: bool = False) -> dict[str, Any]:
    kind = "podAntiAffinity" if anti else "podAffinity"
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def spread(labels: dict[str, str], key: str = ZONE, skew: int = 1, hard: bool = True,
           **extra: Any) -> dict[str, Any]:
    return {"maxSkew": skew, "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
            "labelSelector": {"matchLabels": labels}, **extra}


def running(name: str, on: str, labels: dict[str, str], cpu: str = "1", **extra: Any) -> dict[str, Any]:
    p = pod(name, cpu=cpu, labels=labels, node_name=on, **extra)
    p["status"] = {"phase": "Running"}
    return p


def zoned(name: str, zone: str, cpu: str = "8", **labels: str) -> dict[str, Any]:
    return node(name, cpu=cpu, labels={ZONE: zone, **labels})


def ports(*entries: tuple[int, str, str]) -> list[dict[str, Any]]:
    out = []
    for port, proto, ip in entries:
        p: dict[str, Any] = {"containerPort": port, "hostPort": port, "protocol": proto}
        if ip:
            p["hostIP"] = ip
        out.append(p)
    return [{"name": "main", "image": "busybox", "ports": out, "resources": {"requests": {"cpu": "1"}}}]


# -- inter-pod affinity (kube-scheduler: interpodaffinity filtering tests) ----------------------

def test_affinity_to_a_running_pod_allows_only_nodes_of_its_domain() -> None:
    # "satisfies with requiredDuringSchedulingIgnoredDuringExecution in PodAffinity using In operator
    # that matches the existing pod": the incoming pod goes to the region of the matching pod.
    nodes = [node("a", labels={"region": "r1"}), node("b", labels={"region": "r1"}), node("c", labels={"region": "r2"})]
    out = run(*nodes, running("scan", "c", {"service": "securityscan"}), running("filler", "a", {}, cpu="6"),
              pod("p", cpu="1", affinity=affine(term({"service": "securityscan"}, "region"))))
    assert out.bound["default/p"] == "c"  # not a, the most allocated


def test_affinity_nobody_matches_waits_in_kube_schedulers_words() -> None:
    out = run(node("a"), node("b"), running("other", "a", {"service": "other"}),
              pod("p", cpu="1", affinity=affine(term({"service": "securityscan"}))))
    assert "default/p" not in out.bound
    assert out.pending["default/p"] == "0/2 nodes are available: 2 node(s) didn't match pod affinity rules."


def test_the_first_pod_of_a_self_affine_set_may_go_anywhere() -> None:
    # "verify that PodAffinity works correctly when the pod matches its own affinity term".
    out = run(node("a"), node("b"), pod("p", cpu="1", labels={"app": "db"}, affinity=affine(term({"app": "db"}))))
    assert "default/p" in out.bound


def test_the_first_pod_rule_needs_the_topology_label() -> None:
    n = node("a")
    del n["metadata"]["labels"][HOST]
    out = run(n, pod("p", cpu="1", labels={"app": "db"}, affinity=affine(term({"app": "db"}))))
    assert "affinity rules" in out.pending["default/p"]


def test_affinity_with_not_in_and_exists_operators() -> None:
    sel = {"matchExpressions": [{"key": "service", "operator": "NotIn", "values": ["securityscan"]},
                                {"key": "tier", "operator": "Exists"}]}
    out = run(node("a"), node("b"), running("x", "a", {"service": "securityscan", "tier": "1"}),
              running("y", "b", {"service": "web", "tier": "1"}),
              pod("p", cpu="1", affinity=affine({"topologyKey": HOST, "labelSelector": sel})))
    assert out.bound["default/p"] == "b"


def test_affinity_terms_must_all_match_one_pod() -> None:
    # Two terms: a pod counts only if it matches both (kube-scheduler's podMatchesAllAffinityTerms).
    out = run(node("a"), node("b"), running("x", "a", {"app": "x"}), running("y", "a", {"tier": "y"}),
              running("xy", "b", {"app": "x", "tier": "y"}),
              pod("p", cpu="1", affinity=affine(term({"app": "x"}), term({"tier": "y"}))))
    assert out.bound["default/p"] == "b"


def test_anti_affinity_keeps_the_pod_off_the_node_of_a_matching_pod() -> None:
    out = run(node("a"), node("b"), running("x", "a", {"app": "web"}),
              pod("p", cpu="1", affinity=affine(term({"app": "web"}), anti=True)))
    assert out.bound["default/p"] == "b"


def test_anti_affinity_over_a_wider_key_excludes_the_whole_domain() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2")]
    out = run(*nodes, running("x", "a", {"app": "web"}),
              pod("p", cpu="1", affinity=affine(term({"app": "web"}, ZONE), anti=True)))
    assert out.bound["default/p"] == "c"


def test_anti_affinity_allows_nodes_without_the_topology_label() -> None:
    nodes = [zoned("a", "z1"), node("b")]
    out = run(*nodes, running("x", "a", {"app": "web"}), running("y", "b", {"app": "web"}),
              pod("p", cpu="1", affinity=affine(term({"app": "web"}, ZONE), anti=True)))
    assert out.bound["default/p"] == "b"


def test_an_existing_pods_anti_affinity_repels_the_incoming_pod() -> None:
    # The symmetry rule: the running pod's anti-affinity matches the incoming pod's labels.
    holder = running("x", "a", {"app": "db"}, affinity=affine(term({"app": "web"}), anti=True))
    out = run(node("a"), holder, pod("p", cpu="1", labels={"app": "web"}))
    assert out.pending["default/p"] == "0/1 nodes are available: 1 node(s) didn't satisfy existing pods " \
                                       "anti-affinity rules."


def test_anti_affinity_looks_only_in_the_terms_namespaces() -> None:
    other = running("x", "a", {"app": "web"})
    other["metadata"]["namespace"] = "other"
    out = run(node("a"), other, pod("p", cpu="1", affinity=affine(term({"app": "web"}), anti=True)))
    assert out.bound["default/p"] == "a"
    listed = run(node("a"), other, pod("p", cpu="1", affinity=affine(
        term({"app": "web"}, namespaces=["other"]), anti=True)))
    assert "anti-affinity rules" in listed.pending["default/p"]


def test_a_namespace_selector_reads_the_namespaces_labels() -> None:
    other = running("x", "a", {"app": "web"})
    other["metadata"]["namespace"] = "team-b"
    incoming = pod("p", cpu="1", affinity=affine(term({"app": "web"}, namespaceSelector={
        "matchLabels": {"team": "b"}}), anti=True))
    world = World.from_objects([("t", o) for o in (node("a"), node("b"), other, incoming)])
    snap = world.snapshot(frozenset({"koordpy"}))
    snap.namespaces = {"team-b": {"team": "b"}, "default": {}}
    result = schedule(snap, SchedulerState(), world.now)
    assert [(b.pod, b.node) for b in result.binds] == [("default/p", "b")]
    snap = world.snapshot(frozenset({"koordpy"}))
    snap.namespaces = {"team-b": {"team": "c"}}
    result = schedule(snap, SchedulerState(), world.now)
    assert [(b.pod, b.node) for b in result.binds] == [("default/p", "a")]


def test_an_empty_namespace_selector_means_every_namespace() -> None:
    other = running("x", "a", {"app": "web"})
    other["metadata"]["namespace"] = "elsewhere"
    out = run(node("a"), node("b"), other, pod("p", cpu="1", affinity=affine(
        term({"app": "web"}, namespaceSelector={}), anti=True)))
    assert out.bound["default/p"] == "b"


def test_match_label_keys_keep_apart_only_pods_of_the_same_value() -> None:
    # Anti-affinity per job: the pods of job j2 ignore j1's pod.
    t = term({"app": "train"}, matchLabelKeys=["job"])
    out = run(node("a"), running("j1-0", "a", {"app": "train", "job": "j1"}),
              pod("j2-0", cpu="1", labels={"app": "train", "job": "j2"}, affinity=affine(t, anti=True)))
    assert out.bound["default/j2-0"] == "a"
    same = run(node("a"), running("j1-0", "a", {"app": "train", "job": "j1"}),
               pod("j1-1", cpu="1", labels={"app": "train", "job": "j1"}, affinity=affine(t, anti=True)))
    assert "anti-affinity" in same.pending["default/j1-1"]


def test_mismatch_label_keys_keep_apart_pods_of_other_values() -> None:
    t = term({"app": "train"}, mismatchLabelKeys=["tenant"])
    out = run(node("a"), node("b"), running("x", "a", {"app": "train", "tenant": "t1"}),
              pod("p", cpu="1", labels={"app": "train", "tenant": "t2"}, affinity=affine(t, anti=True)))
    assert out.bound["default/p"] == "b"


def test_two_lone_pods_with_mutual_anti_affinity_never_share_a_node() -> None:
    # The first thing a user tries: two replicas, one per node, one node.
    pods = [pod(f"r{i}", cpu="1", labels={"app": "web"}, affinity=affine(term({"app": "web"}), anti=True))
            for i in range(2)]
    out = run(node("a"), *pods)
    assert len(out.bound) == 1
    waiting = next(k for k in ("default/r0", "default/r1") if k not in out.bound)
    assert out.pending[waiting] == "0/1 nodes are available: 1 node(s) didn't match pod anti-affinity rules."


def test_a_pod_leaving_wakes_a_pod_its_anti_affinity_held_back() -> None:
    names = frozenset({"koordpy"})
    blocker = running("x", "a", {"app": "web"})
    incoming = pod("p", cpu="1", affinity=affine(term({"app": "web"}), anti=True))
    state = SchedulerState()
    world = World.from_objects([("t", o) for o in (node("a"), blocker, incoming)])
    assert schedule(world.snapshot(names), state, 0.0).binds == []
    world = World.from_objects([("t", o) for o in (node("a"), incoming)])
    later = schedule(world.snapshot(names), state, 1.0)
    assert [(b.pod, b.node) for b in later.binds] == [("default/p", "a")]


# -- topology spread (kube-scheduler: podtopologyspread filtering tests) -------------------------

def spread_cluster() -> list[dict[str, Any]]:
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d", "z2")]
    pods = [running("x0", "a", {"foo": ""}), running("x1", "b", {"foo": ""}), running("x2", "c", {"foo": ""})]
    return [*nodes, *pods]


def test_spread_sends_the_pod_to_the_emptier_zone() -> None:
    out = run(*spread_cluster(), pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})]))
    assert out.bound["default/p"] in ("c", "d")


def test_spread_refuses_a_zone_past_max_skew_in_kube_schedulers_words() -> None:
    cluster = spread_cluster()
    cluster[2]["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    cluster[3]["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    out = run(*cluster, pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})]))
    assert out.pending["default/p"] == ("0/4 nodes are available: 2 node(s) didn't match pod topology spread "
                                        "constraints, 2 node(s) had untolerated taint {k: }.")


def test_spread_with_a_larger_max_skew_allows_the_fuller_zone() -> None:
    cluster = spread_cluster()
    for n in cluster[2:4]:
        n["spec"] = {"unschedulable": True}
    out = run(*cluster, pod("p", cpu="1", labels={"foo": ""},
                            topologySpreadConstraints=[spread({"foo": ""}, skew=2)]))
    assert out.bound["default/p"] in ("a", "b")


def test_spread_needs_the_topology_label_on_the_node() -> None:
    out = run(node("bare"), pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})]))
    assert out.pending["default/p"] == ("0/1 nodes are available: 1 node(s) didn't match pod topology spread "
                                        "constraints (missing required label).")


def test_min_domains_counts_missing_domains_as_empty() -> None:
    # Two zones with one matching pod each; minDomains 3 makes the global minimum 0: skew 2 everywhere.
    nodes = [zoned("a", "z1"), zoned("b", "z2")]
    out = run(*nodes, running("x0", "a", {"foo": ""}), running("x1", "b", {"foo": ""}),
              pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""}, minDomains=3)]))
    assert "topology spread" in out.pending["default/p"]
    without = run(*nodes, running("x0", "a", {"foo": ""}), running("x1", "b", {"foo": ""}),
                  pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})]))
    assert "default/p" in without.bound


def test_node_affinity_policy_decides_which_nodes_are_counted() -> None:
    # z2's only node is excluded by the pod's nodeSelector: with Honor (the default) z2 is not a
    # domain, so z1 (1 pod) is the minimum and the pod may go there; with Ignore z2 counts as 0.
    nodes = [zoned("a", "z1", pool="gpu"), zoned("c", "z2", pool="cpu")]
    base = [*nodes, running("x0", "a", {"foo": ""})]
    honor = run(*base, pod("p", cpu="1", labels={"foo": ""}, nodeSelector={"pool": "gpu"},
                           topologySpreadConstraints=[spread({"foo": ""})]))
    assert honor.bound["default/p"] == "a"
    ignore = run(*base, pod("p", cpu="1", labels={"foo": ""}, nodeSelector={"pool": "gpu"},
                            topologySpreadConstraints=[spread({"foo": ""}, nodeAffinityPolicy="Ignore")]))
    assert "topology spread" in ignore.pending["default/p"]


def test_node_taints_policy_honor_leaves_tainted_nodes_uncounted() -> None:
    tainted = zoned("c", "z2")
    tainted["spec"] = {"taints": [{"key": "k", "effect": "NoSchedule"}]}
    base = [zoned("a", "z1"), tainted, running("x0", "a", {"foo": ""})]
    honor = run(*base, pod("p", cpu="1", labels={"foo": ""},
                           topologySpreadConstraints=[spread({"foo": ""}, nodeTaintsPolicy="Honor")]))
    assert honor.bound["default/p"] == "a"
    ignore = run(*base, pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""})]))
    assert "default/p" not in ignore.bound


def test_terminating_pods_do_not_count_for_spread() -> None:
    gone = running("x1", "a", {"foo": ""})
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    nodes = [zoned("a", "z1"), zoned("c", "z2")]
    out = run(*nodes, running("x0", "a", {"foo": ""}), gone, running("y", "c", {"bar": ""}),
              pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""}, skew=1)]))
    # z1 holds one live matching pod, z2 none: z1 would be skew 2, so the pod goes to z2.
    assert out.bound["default/p"] == "c"


def test_schedule_anyway_is_a_preference_not_a_filter() -> None:
    nodes = [zoned("a", "z1"), zoned("c", "z2")]
    out = run(*nodes, running("x0", "a", {"foo": ""}), running("x1", "a", {"foo": ""}),
              pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""}, hard=False)]))
    assert out.bound["default/p"] == "c"
    full = [zoned("a", "z1"), zoned("c", "z2", cpu="1")]
    packed = run(*full, running("x0", "a", {"foo": ""}), running("x1", "a", {"foo": ""}), running("y", "c", {}),
                 pod("p", cpu="1", labels={"foo": ""}, topologySpreadConstraints=[spread({"foo": ""}, hard=False)]))
    assert packed.bound["default/p"] == "a"


def test_preferred_affinity_draws_the_pod_to_the_domain_of_its_peers() -> None:
    pref = {"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 100, "podAffinityTerm": term({"app": "cache"}, ZONE)}]}}
    nodes = [zoned("a", "z1"), zoned("c", "z2")]
    out = run(*nodes, running("cache", "c", {"app": "cache"}), running("filler", "a", {}, cpu="6"),
              pod("p", cpu="1", affinity=pref))
    assert out.bound["default/p"] == "c"  # not the most allocated node a: the preference wins


# -- host ports (kube-scheduler: nodeports tests) ------------------------------------------------

@pytest.mark.parametrize(("have", "want", "fits"), [
    ((8080, "TCP", ""), (8080, "TCP", ""), False),
    ((8080, "TCP", ""), (8080, "UDP", ""), True),
    ((8080, "TCP", "127.0.0.1"), (8080, "TCP", "127.0.0.2"), True),
    ((8080, "TCP", "127.0.0.1"), (8080, "TCP", "0.0.0.0"), False),
    ((8080, "TCP", ""), (8080, "TCP", "127.0.0.1"), False),
    ((8080, "TCP", ""), (8081, "TCP", ""), True),
])
def test_host_ports(have: tuple[int, str, str], want: tuple[int, str, str], fits: bool) -> None:
    existing = running("x", "a", {}, containers=ports(have))
    out = run(node("a"), existing, pod("p", containers=ports(want)))
    if fits:
        assert out.bound["default/p"] == "a"
    else:
        assert out.pending["default/p"] == ("0/1 nodes are available: 1 node(s) didn't have free ports for the "
                                            "requested pod ports.")


def test_a_sidecars_host_port_counts() -> None:
    sidecar = {"name": "proxy", "image": "busybox", "restartPolicy": "Always",
               "ports": [{"containerPort": 9000, "hostPort": 9000}]}
    existing = running("x", "a", {}, initContainers=[sidecar])
    out = run(node("a"), node("b"), existing, pod("p", cpu="1", containers=ports((9000, "TCP", ""))))
    assert out.bound["default/p"] == "b"


def test_host_network_makes_container_ports_host_ports() -> None:
    hn = [{"name": "main", "image": "busybox", "ports": [{"containerPort": 53, "protocol": "UDP"}]}]
    existing = running("x", "a", {}, containers=hn, hostNetwork=True)
    out = run(node("a"), node("b"), existing, pod("p", cpu="1", containers=ports((53, "UDP", ""))))
    assert out.bound["default/p"] == "b"


# -- inside gangs --------------------------------------------------------------------------------

def gang(n: int, **spec: Any) -> list[dict[str, Any]]:
    return [pod(f"w-{i}", cpu="1", group="g", labels={"app": "train"}, **spec) for i in range(n)]


def test_a_gang_with_self_anti_affinity_per_host_takes_one_node_per_member() -> None:
    anti = affine(term({"app": "train"}), anti=True)
    out = run(*[node(f"n{i}") for i in range(4)], podgroup("g", 4), *gang(4, affinity=anti))
    assert sorted(out.bound.values()) == ["n0", "n1", "n2", "n3"]


def test_a_gang_with_self_anti_affinity_binds_nowhere_with_too_few_nodes() -> None:
    anti = affine(term({"app": "train"}), anti=True)
    out = run(*[node(f"n{i}") for i in range(3)], podgroup("g", 4), *gang(4, affinity=anti))
    assert out.bound == {}
    assert any("anti-affinity" in m or "desiredOfferSlot" in m or "0/3 nodes" in m for m in out.pending.values())


def test_a_gang_with_anti_affinity_per_zone_needs_a_zone_per_member() -> None:
    anti = affine(term({"app": "train"}, ZONE), anti=True)
    nodes = [zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d", "z3")]
    out = run(*nodes, podgroup("g", 3), *gang(3, affinity=anti))
    assert len({n[0] for n in out.bound.values()}) == 3 and {"a", "b"} & set(out.bound.values()) != {"a", "b"}
    short = run(*nodes, podgroup("g", 4), *gang(4, affinity=anti))
    assert short.bound == {}
    assert "anti-affinity" in short.pending["default/w-3"] or "anti-affinity" in str(short.pending)


def test_a_gang_spread_over_zones_keeps_max_skew_at_every_prefix() -> None:
    nodes = [zoned("a", "z1"), zoned("b", "z2")]
    out = run(*nodes, podgroup("g", 4), *gang(4, topologySpreadConstraints=[spread({"app": "train"})]))
    assert len(out.bound) == 4
    zones = {"a": "z1", "b": "z2"}
    counts = {"z1": 0, "z2": 0}
    for i in range(4):  # rank order is the order a Strict gang's members are placed (and may bind)
        counts[zones[out.bound[f"default/w-{i}"]]] += 1
        assert abs(counts["z1"] - counts["z2"]) <= 1


def test_a_gang_spread_that_cannot_hold_waits_whole() -> None:
    # One zone has room for 1; maxSkew 1 lets the other take 2 at most: a gang of 4 does not fit.
    nodes = [zoned("a", "z1", cpu="1"), zoned("b", "z2")]
    out = run(*nodes, podgroup("g", 4), *gang(4, topologySpreadConstraints=[spread({"app": "train"})]))
    assert out.bound == {}
    assert any("topology spread" in m for m in out.pending.values())


def test_a_self_affine_gang_lands_in_one_zone_with_room() -> None:
    aff = affine(term({"app": "train"}, ZONE))
    nodes = [zoned("a", "z1", cpu="2"), zoned("b", "z2"), zoned("c", "z2")]
    out = run(*nodes, podgroup("g", 4), *gang(4, affinity=aff))
    assert set(out.bound.values()) <= {"b", "c"} and len(out.bound) == 4


def test_a_gang_member_with_host_ports_takes_one_node_each() -> None:
    out = run(*[node(f"n{i}") for i in range(2)], podgroup("g", 2), *gang(2, containers=ports((7000, "TCP", ""))))
    assert sorted(out.bound.values()) == ["n0", "n1"]
    short = run(node("n0"), podgroup("g", 2), *gang(2, containers=ports((7000, "TCP", ""))))
    assert short.bound == {}


def test_a_gangs_anti_affinity_respects_pods_already_running() -> None:
    anti = affine(term({"app": "train"}), anti=True)
    out = run(*[node(f"n{i}") for i in range(3)], running("old", "n0", {"app": "train"}), podgroup("g", 2),
              *gang(2, affinity=anti))
    assert sorted(out.bound.values()) == ["n1", "n2"]


def blocks_in_zones() -> list[dict[str, Any]]:
    # Two blocks of one spine, each block one zone: gathering and spreading pull apart.
    nodes = spine_block_nodes({"s0": {"b0": [0, 1], "b1": [2, 3]}})
    for n in nodes:
        n["metadata"]["labels"][ZONE] = "z1" if n["metadata"]["name"] in ("node-0", "node-1") else "z2"
    return [SPINE_BLOCK_CNT, *nodes]


def test_a_gathered_gang_widens_to_the_domain_its_spread_needs() -> None:
    prefer = [{"layer": "BlockLayer", "strategy": "PreferGather"}]
    out = run(*blocks_in_zones(), podgroup("g", 2, gather=prefer),
              *gang(2, topologySpreadConstraints=[spread({"app": "train"})]))
    assert len(out.bound) == 2
    assert len({"z1" if n in ("node-0", "node-1") else "z2" for n in out.bound.values()}) == 2


def test_must_gather_and_spread_that_cannot_hold_together_wait_naming_both() -> None:
    must = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    out = run(*blocks_in_zones(), podgroup("g", 2, gather=must),
              *gang(2, topologySpreadConstraints=[spread({"app": "train"})]))
    assert out.bound == {}
    message = next(m for m in out.pending.values() if "topology spread" in m)
    assert "didn't match pod topology spread constraints inside b" in message
    assert "the widest domain the job's topology requirement allows" in message


# -- preemption ---------------------------------------------------------------------------------

def test_preemption_evicts_the_pod_whose_presence_the_preemptor_repels() -> None:
    anti = affine(term({"app": "web"}), anti=True)
    low = running("low", "a", {"app": "web"}, priority_class="low")
    out = run(priority_class("low", 1), priority_class("high", 100), node("a"), low,
              pod("p", cpu="1", priority_class="high", affinity=anti))
    assert "default/low" in out.preempted


def test_preemption_does_not_evict_for_a_missing_affinity_match() -> None:
    # Removing pods never adds the match an affinity term wants: no victim is chosen.
    low = running("low", "a", {"app": "other"}, cpu="8", priority_class="low")
    out = run(priority_class("low", 1), priority_class("high", 100), node("a"), low,
              pod("p", cpu="1", priority_class="high", affinity=affine(term({"app": "cache"}))))
    assert out.preempted == [] or "default/low" not in out.preempted


def test_preemption_keeps_the_victim_the_preemptors_affinity_needs() -> None:
    # Room on a needs one low pod gone; the cache pod, of the lowest priority and so the first victim
    # by priority alone, is the one the preemptor's affinity wants beside it.
    nodes = [zoned("a", "z1", cpu="2"), zoned("b", "z2", cpu="2")]
    cache = running("cache", "a", {"app": "cache"}, priority_class="lowest")
    filler = running("filler", "a", {}, priority_class="low")
    busy = running("busy", "b", {}, cpu="2", priority_class="high")
    out = run(priority_class("lowest", 1), priority_class("low", 5), priority_class("high", 100), *nodes, cache,
              filler, busy,
              pod("p", cpu="1", priority_class="high", affinity=affine(term({"app": "cache"}, ZONE))))
    assert out.preempted == ["default/filler"]
    assert out.bound.get("default/p") == "a"


def test_explain_lists_the_rules_in_its_filter_table() -> None:
    from koordpy.core.explain import explain_pod

    world = World.from_objects([("t", o) for o in (
        node("a"), node("b"), running("x", "a", {"app": "web"}), running("y", "b", {"app": "web"}),
        pod("p", cpu="1", affinity=affine(term({"app": "web"}), anti=True)))])
    got = explain_pod(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, "default/p")
    assert got is not None and got.diagnosis is not None
    assert dict(got.diagnosis.filtered) == {"node(s) didn't match pod anti-affinity rules": 2}


def test_a_self_affine_gangs_own_lifted_nominations_do_not_count_against_it() -> None:
    # Members nominated on a (room made for them) are placed again with their nominations lifted;
    # the nominated pods must not be subtracted from the affinity counts a second time.
    from koordpy.core.cycle import Cycle
    from koordpy.core.statement import Statement

    aff = affine(term({"app": "train"}, ZONE))
    members = gang(2, affinity=aff)
    for m in members:
        m["status"] = {"nominatedNodeName": "a"}
    world = World.from_objects([("t", o) for o in (zoned("a", "z1"), zoned("b", "z2"), podgroup("g", 2), *members,
                                                   running("r", "a", {"app": "train"}))])
    cycle = Cycle(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    pods = [cycle.view.by_key[f"default/w-{i}"] for i in range(2)]
    stmt = Statement(cycle.cluster)
    stmt.evict(pods[0].key)  # w-0's nomination lifted, w-1's still held on a
    check = cycle.filters.rules.check(pods[0])
    assert check.mask.tolist() == [True, False]  # r runs in z1: only z1, counted once
    stmt.discard()
