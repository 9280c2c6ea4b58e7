"""Trial changes to the cluster's resource arrays, committed or discarded in reverse.

The idea is Volcano's Statement: a gang (or a preemption dry run) makes its moves on the
shared state, and either keeps them all or unwinds them last-first, so a failed attempt
leaves no trace for the next job in the cycle. The moves are typed: ``assume`` places a
pending pod on a node, ``evict`` takes a counted pod's usage off its node (a victim in a
dry run, or a preemptor's own nomination lifted while it is placed again), ``nominate``
counts a pending pod on the node where room is being made for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.core.cluster import Cluster

OpKind = Literal["assume", "evict", "nominate"]


@dataclass(frozen=True)
class Op:
    kind: OpKind
    pod: str
    node: int
    request: npt.NDArray[np.int64]


@dataclass
class Statement:
    cluster: Cluster
    _ops: list[Op] = field(default_factory=list)

    def assume(self, pod: str, node: int, request: npt.NDArray[np.int64]) -> None:
        self.cluster.change(node, request, 1, pods=pod)
        self._ops.append(Op("assume", pod, node, request))

    def assume_many(self, pods: list[str], nodes: npt.NDArray[np.int64], request: npt.NDArray[np.int64]) -> None:
        """One vectorised update for many pods of the same request (a gang's usual case)."""
        self.cluster.change(nodes, request, 1, pods=pods)
        self._ops.extend(Op("assume", p, int(n), request) for p, n in zip(pods, nodes.tolist(), strict=True))

    def evict(self, pod: str) -> bool:
        """Takes the counted pod's usage off its node for this trial; False if it is not counted."""
        entry = self.cluster.counted.get(pod)
        if entry is None:
            return False
        self.cluster.change(entry[0], entry[1], -1, pods=pod)
        self._ops.append(Op("evict", pod, entry[0], entry[1]))
        return True

    def nominate(self, pod: str, node: int, request: npt.NDArray[np.int64]) -> None:
        self.cluster.change(node, request, 1, pods=pod)
        self._ops.append(Op("nominate", pod, node, request))

    def ops(self) -> list[Op]:
        return list(self._ops)

    @property
    def placed(self) -> dict[str, int]:
        return {op.pod: op.node for op in self._ops if op.kind == "assume"}

    @property
    def evicted(self) -> list[str]:
        return [op.pod for op in self._ops if op.kind == "evict"]

    def savepoint(self) -> int:
        return len(self._ops)

    def rollback(self, savepoint: int) -> None:
        """Undoes, last first, the moves made since ``savepoint``."""
        while len(self._ops) > savepoint:
            op = self._ops.pop()
            self.cluster.change(op.node, op.request, 1 if op.kind == "evict" else -1, pods=op.pod)

    def discard(self) -> None:
        self.rollback(0)

    def commit(self) -> dict[str, int]:
        """Keeps the placements: each placed pod is now counted where it was placed. An evicted pod
        that was not placed again keeps its old count (a trial eviction is never a deletion: that is
        the shell's to do, and the pod stays counted until it is gone)."""
        placed = self.placed
        for op in self._ops:
            if op.kind == "evict" and op.pod not in placed:
                self.cluster.change(op.node, op.request, 1, pods=op.pod)
        for op in self._ops:
            if op.kind == "assume":
                self.cluster.adopt(op.pod, (op.node, op.request), held=False)
            elif op.kind == "nominate":
                self.cluster.adopt(op.pod, (op.node, op.request), held=True)
        self._ops.clear()
        return placed
