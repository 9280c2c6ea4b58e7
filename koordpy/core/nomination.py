"""Nominated room: where preemption made room for a job (its pods nominated there) and the room of
lower-priority pods it takes back, as the cycle carries a plan out and as a job nominated before is
placed again on its nominated nodes.

Does not belong here: choosing victims and nodes (``koordpy.core.preemption``), when a plan is
followed (``koordpy.core.cycle``), how a nomination is written (the shells apply ``Nominate``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koordpy.api.objects import Pod
from koordpy.core.cluster import Cluster
from koordpy.core.decisions import CycleResult, Nominate, Preempt
from koordpy.core.filters import Filters
from koordpy.core.gang import Job
from koordpy.core.messages import render
from koordpy.core.preemption import Plan
from koordpy.core.reserve import Reserve
from koordpy.core.state import SchedulerState
from koordpy.core.statement import Statement
from koordpy.core.verdicts import Failure, PreemptedBy
from koordpy.core.view import View


@dataclass(eq=False)
class Nominations:
    """The cycle's nominated room: its decisions go to the cycle's ``result``."""

    cluster: Cluster
    state: SchedulerState
    view: View
    filters: Filters
    reserve: Reserve
    result: CycleResult

    def place_on_nominated(self, pods: list[Pod], stmt: Statement) -> bool:
        """Places every pod on its nominated node when all of them have one and fit there: where a
        preemption made room for the job, inside the domain it chose. Else places nothing."""
        if not all(p.nominated_node_name in self.cluster.node_index for p in pods):
            return False
        mark = stmt.savepoint()
        for pod in pods:
            node = self.cluster.node_index[pod.nominated_node_name]
            vec = self.cluster.request_vector(pod)
            free = self.cluster.allocatable[node] - self.cluster.used[node]
            if not (self.filters.mask(pod)[node] and bool(np.all((vec == 0) | (free >= vec)))):
                stmt.rollback(mark)
                return False
            stmt.assume(pod.key, node, vec)
        if self.reserve.devices(pods, stmt) is not None:  # their devices too, as placement reserves them
            stmt.rollback(mark)
            return False
        return True

    def carry_out(self, job: Job, plan: Plan, failure: Failure | None) -> None:
        """The plan as decisions: victims evicted, the room of lower-priority nominations taken
        back, the job's pods nominated; the cluster counts it all so that later jobs of this cycle
        see the room as the job's."""
        trigger = failure.pod.key if failure is not None else job.pods[0].key
        message = render(PreemptedBy(job.id, trigger))
        for key in plan.victims:
            self.result.decide(Preempt(key, message, job.id, trigger))
            self.cluster.doom(key)
        self.release(plan.released)
        by_key = {p.key: p for p in job.pods}
        for key, node in plan.nominated.items():
            pod = by_key[key]
            name = self.cluster.nodes[node].name
            if pod.nominated_node_name != name:
                self.result.decide(Nominate(key, name))
            self.cluster.count(key, (node, self.cluster.request_vector(pod)), held=True)

    def release(self, keys: tuple[str, ...]) -> None:
        """Pending pods of lower priority lose the room nominated or reserved for them."""
        for key in keys:
            self.state.release(key)
            if self.cluster.is_held(key):
                self.cluster.count(key, None)
            pod = self.view.by_key.get(key)
            if pod is not None and pod.nominated_node_name:
                self.result.decide(Nominate(key, ""))

    def drop(self, job: Job) -> None:
        """Nominations of a job that preemption can no longer help are stale: they would hold room
        for nothing."""
        for pod in job.pods:
            if pod.nominated_node_name:
                self.result.decide(Nominate(pod.key, ""))
                if self.cluster.is_held(pod.key) and pod.key not in self.state.reserved:
                    self.cluster.count(pod.key, None)
