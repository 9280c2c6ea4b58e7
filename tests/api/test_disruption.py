"""PodDisruptionBudget (policy/v1): its parsing, which pods preemption counts against it, and the
disruption controller's count simulate plays for a budget given without a status."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api import ParseError, Pod
from koordpy.api.disruption import PodDisruptionBudget
from koordpy.api.kinds import kind_for
from tests.builders import pod


def raw(spec: dict[str, Any], status: dict[str, Any] | None = None, ns: str = "ml") -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": "db", "namespace": ns}, "spec": spec}
    if status is not None:
        out["status"] = status
    return out


def _pod(name: str, labels: dict[str, str] | None, ns: str = "ml", node: str | None = "n0", **meta: Any) -> Pod:
    r = pod(name, labels=labels, node_name=node)
    r["metadata"].update(namespace=ns, **meta)
    return Pod.from_raw(r)


def test_parses_spec_and_status() -> None:
    b = PodDisruptionBudget.from_raw(raw({"maxUnavailable": "25%", "selector": {"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["db"]}]}},
        {"disruptionsAllowed": 2, "disruptedPods": {"db-0": "2026-01-01T00:00:00Z"}}))
    assert b.key == "ml/db" and b.max_unavailable == "25%" and b.min_available is None
    assert b.disruptions_allowed == 2 and b.disrupted_pods == frozenset({"db-0"})
    assert PodDisruptionBudget.from_raw(raw({"minAvailable": 1})).disruptions_allowed is None  # no status
    assert kind_for("policy/v1", "PodDisruptionBudget") is not None


@pytest.mark.parametrize(("spec", "status", "field"), [
    ({"selector": {"matchLabels": {"app": "-bad-"}}}, None, "spec.selector.matchLabels[app]"),
    ({"selector": {"matchExpressions": [{"key": "app", "operator": "Near"}]}}, None,
     "spec.selector.matchExpressions[0].operator"),
    ({"minAvailable": "half"}, None, "spec.minAvailable"),
    ({"minAvailable": "120%"}, None, "spec.minAvailable"),
    ({"maxUnavailable": -1}, None, "spec.maxUnavailable"),
    ({"minAvailable": 1, "maxUnavailable": 1}, None, "spec"),
    ({"minAvailable": 1}, {"disruptionsAllowed": -1}, "status.disruptionsAllowed"),
    ({"minAvailable": 1}, {"disruptedPods": ["a"]}, "status.disruptedPods"),
])
def test_bad_input_names_the_field(spec: dict[str, Any], status: dict[str, Any] | None, field: str) -> None:
    with pytest.raises(ParseError) as err:
        PodDisruptionBudget.from_raw(raw(spec, status))
    assert err.value.field == field and "PodDisruptionBudget ml/db" in str(err.value)


def test_covers_as_kube_scheduler_preemption_matches() -> None:
    b = PodDisruptionBudget.from_raw(raw({"selector": {"matchLabels": {"app": "db"}}}))
    assert b.covers(_pod("a", {"app": "db"}))
    assert not b.covers(_pod("a", {"app": "db"}, ns="other"))  # another namespace
    assert not b.covers(_pod("a", {"app": "web"}))
    # A pod without labels, and an empty or absent selector, count nowhere (even a selector that
    # matches a missing label).
    absent = PodDisruptionBudget.from_raw(raw({"selector": {"matchExpressions": [
        {"key": "app", "operator": "DoesNotExist"}]}}))
    assert not absent.covers(_pod("a", None))
    assert not PodDisruptionBudget.from_raw(raw({"selector": {}})).covers(_pod("a", {"app": "db"}))
    assert not PodDisruptionBudget.from_raw(raw({})).covers(_pod("a", {"app": "db"}))


def test_allowed_counts_healthy_pods_over_the_desired() -> None:
    pods = [_pod("a", {"app": "db"}), _pod("b", {"app": "db"}), _pod("c", {"app": "db"}, node=None),
            _pod("d", {"app": "db"}, deletionTimestamp="2026-01-01T00:00:00Z"), _pod("e", {"app": "web"})]
    # Four expected (a, b, c pending, d terminating); two healthy (a, b).
    sel = {"selector": {"matchLabels": {"app": "db"}}}
    assert PodDisruptionBudget.from_raw(raw({**sel, "minAvailable": 1})).allowed(pods) == 1
    assert PodDisruptionBudget.from_raw(raw({**sel, "minAvailable": 3})).allowed(pods) == 0
    assert PodDisruptionBudget.from_raw(raw({**sel, "minAvailable": "25%"})).allowed(pods) == 1  # 1 of 4
    assert PodDisruptionBudget.from_raw(raw({**sel, "maxUnavailable": 3})).allowed(pods) == 1  # 4 - 3 = 1 desired
    assert PodDisruptionBudget.from_raw(raw({**sel, "maxUnavailable": "50%"})).allowed(pods) == 0
    assert PodDisruptionBudget.from_raw(raw(sel)).allowed(pods) == 2  # neither: every healthy pod may go


def test_a_percentage_the_api_server_admits_is_read() -> None:
    # policy/v1 validation takes any digits before the '%' (leading zeros too), and a budget that does
    # not parse protects nothing live: such a budget must be read, not reported and left out.
    b = PodDisruptionBudget.from_raw(raw({"minAvailable": "050%", "selector": {"matchLabels": {"app": "db"}}}))
    pods = [_pod(f"db-{i}", {"app": "db"}) for i in range(4)]
    assert b.min_available == "050%" and b.allowed(pods) == 2
