"""bench_rules' check of the final state (``rule_violations``): each rule it names is caught, and a
state that keeps them all passes. The benchmark prints this count after each round; a check that
never finds anything would make the count meaningless."""

from __future__ import annotations

from benchmarks.bench_rules import (
    INIT_NS,
    MEASURED_NS,
    affine_pod,
    anti_pod,
    named,
    node_body,
    plain,
    rule_violations,
    spread_pod,
)
from tests.integration.checker import Obj

NODES = [node_body(i) for i in range(6)]  # zones moon-1, moon-2, moon-3, moon-1, ...


def pod(body: Obj, name: str, node: str, ns: str = MEASURED_NS) -> Obj:
    p = named(body, name, "r", "koordpy", node)
    p["metadata"]["namespace"] = ns
    return p


def test_anti_affinity_per_host_is_caught_both_ways() -> None:
    ok = [pod(anti_pod(), "a", "rules-node-0"), pod(anti_pod(), "b", "rules-node-1", INIT_NS)]
    assert rule_violations(NODES, ok, {}) == []
    same_host = [*ok, pod(anti_pod(), "c", "rules-node-1")]
    assert len(rule_violations(NODES, same_host, {})) == 2  # c's term matches b, and b's term matches c
    # Symmetry: a green pod without terms next to an anti-affine one is still a violation.
    bare = plain("green")
    lone = [*ok, pod(bare, "d", "rules-node-0")]
    assert [line.split(":")[0] for line in rule_violations(NODES, lone, {})] == [f"{MEASURED_NS}/a on rules-node-0"]


def test_required_affinity_needs_a_match_in_the_zone_except_the_first_pod() -> None:
    first = [pod(affine_pod(), "a", "rules-node-0")]
    assert rule_violations(NODES, first, {}) == []  # the first of a self-affine set goes anywhere
    apart = [*first, pod(affine_pod(), "b", "rules-node-1")]  # moon-2, while a is in moon-1
    assert len(rule_violations(NODES, apart, {})) == 2
    together = [*first, pod(affine_pod(), "b", "rules-node-3")]  # moon-1 too
    assert rule_violations(NODES, together, {}) == []


def test_spread_skew_over_max_skew_is_caught() -> None:
    # maxSkew 5 over 3 zones: 6 pods in moon-1 and none elsewhere is a skew of 6.
    lopsided = [pod(spread_pod(), f"s{i}", "rules-node-0") for i in range(6)]
    problems = rule_violations(NODES, lopsided, {})
    assert len(problems) == 1 and "'moon-1': 6" in problems[0]
    assert rule_violations(NODES, lopsided[:5], {}) == []


def test_a_node_holding_more_than_it_has_is_caught() -> None:
    crowd = [pod(plain(), f"p{i}", "rules-node-2") for i in range(41)]  # 41 x 100m on 4 CPUs
    problems = rule_violations(NODES, crowd, {})
    assert len(problems) == 1 and "cpu" in problems[0]
    assert rule_violations(NODES, crowd[:40], {}) == []
