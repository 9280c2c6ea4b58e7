"""PodDisruptionBudgets (``policy/v1``): what preemption reads of them, and simulate's reading of
a budget given without a status.

Belongs here: the ``PodDisruptionBudget`` model, read from its raw dict, which pods a budget
covers as kube-scheduler's preemption matches them, and the disruption controller's count of
``disruptionsAllowed`` for a budget whose status the input leaves out (``allowed``). Does not
belong here: which victims break a budget (``koordpy.core.preemption``), where budgets are counted
(``koordpy.core.cluster``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ConfigDict

from koordpy.api.objects import Pod
from koordpy.api.raw import Reader, read_object
from koordpy.api.selectors import LabelSelector

STORE = "disruption_budgets"  # the kind registry's store, and the core's ``Snapshot.of`` name for it
_PERCENT = re.compile(r"[0-9]+%")  # as policy/v1 validation admits it (leading zeros too)


class PodDisruptionBudget(BaseModel):
    """One budget: the pods of its namespace its selector picks may be disrupted
    ``disruptions_allowed`` at a time, less those already listed in ``disrupted_pods`` (names of
    pods an eviction was granted for and the API server counts already). ``disruptions_allowed``
    is None when the object has no status (a manifest written by hand): ``allowed`` counts it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str
    name: str
    selector: LabelSelector | None  # None: no spec.selector, which covers no pod
    min_available: int | str | None = None  # an integer, or "N%"
    max_unavailable: int | str | None = None
    disruptions_allowed: int | None = None
    disrupted_pods: frozenset[str] = frozenset()
    # status.currentHealthy: the covered pods the disruption controller last counted healthy (None:
    # not given). Preemption compares it with the pods it sees to tell a status that has not yet
    # counted a pod a preemption is terminating (``koordpy.core.cluster.Budgets``).
    current_healthy: int | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def covers(self, pod: Pod) -> bool:
        """Whether preemption counts ``pod`` against this budget: kube-scheduler's rule (same
        namespace, a selector with terms that matches the pod's labels; a pod without labels and an
        empty selector count nowhere)."""
        return (pod.namespace == self.namespace and bool(pod.labels) and self.selector is not None
                and not self.selector.empty and self.selector.matches(pod.labels))

    def allowed(self, pods: Iterable[Pod]) -> int:
        """``status.disruptionsAllowed`` as the disruption controller would count it over ``pods``
        (every pod the input holds), minimal: the covered pods not finished are the expected count
        (no owner's scale is read); the healthy ones are those bound and not terminating (simulate
        knows no readiness). minAvailable (an integer, or a percentage of the expected rounded up) or
        maxUnavailable (the expected less it, a percentage rounded up) is the desired healthy count;
        with neither (policy/v1 defaults neither) it is 0. The budget allows the healthy above it."""
        covered = [p for p in pods if self.covers(p) and not p.terminal]
        expected = len(covered)
        healthy = sum(1 for p in covered if p.node_name and not p.deleting)
        if self.min_available is not None:
            desired = _scaled(self.min_available, expected)
        elif self.max_unavailable is not None:
            desired = max(0, expected - _scaled(self.max_unavailable, expected))
        else:
            desired = 0
        return max(0, healthy - desired)

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> PodDisruptionBudget:
        r, meta, (spec, status) = read_object(raw, "PodDisruptionBudget", "spec", "status")
        selector = None if spec.get("selector") is None else LabelSelector.from_raw(r, spec["selector"],
                                                                                  "spec.selector")
        least = _int_or_percent(r, spec.get("minAvailable"), "spec.minAvailable")
        most = _int_or_percent(r, spec.get("maxUnavailable"), "spec.maxUnavailable")
        if least is not None and most is not None:
            raise r.fail("spec", "minAvailable and maxUnavailable cannot both be set")
        allowed = r.integer(status.get("disruptionsAllowed"), "status.disruptionsAllowed", minimum=0)
        disrupted = r.mapping(status.get("disruptedPods"), "status.disruptedPods")
        healthy = r.integer(status.get("currentHealthy"), "status.currentHealthy", minimum=0)
        return cls(namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")), selector=selector,
                   min_available=least, max_unavailable=most,
                   disruptions_allowed=allowed if "disruptionsAllowed" in status else None,
                   disrupted_pods=frozenset(str(k) for k in disrupted),
                   current_healthy=healthy if "currentHealthy" in status else None)


def _int_or_percent(r: Reader, value: Any, field: str) -> int | str | None:
    """An IntOrString of a budget: a whole number not below 0, or ``N%``."""
    if isinstance(value, str):
        if not _PERCENT.fullmatch(value):
            raise r.fail(field, f"must be a whole number or a percentage such as '50%', got {value!r}")
        if int(value[:-1]) > 100:
            raise r.fail(field, f"must not be above 100%, got {value!r}")
        return value
    return r.integer(value, field, minimum=0)


def _scaled(value: int | str, total: int) -> int:
    """An integer as it is; a percentage of ``total``, rounded up (as the disruption controller does)."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * total / 100)
