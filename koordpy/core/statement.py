"""Trial changes to the cluster's resource arrays, committed or discarded in reverse.

The idea is Volcano's Statement: a gang (or a preemption dry run) makes its moves on the
shared state, and either keeps them all or unwinds them last-first, so a failed attempt
leaves no trace for the next job in the cycle.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from koordpy.core.snapshot import Cluster


@dataclass
class Statement:
    cluster: Cluster
    _ops: list[tuple[str, int, npt.NDArray[np.int64]]] = field(default_factory=list)

    def assume(self, pod: str, node: int, request: npt.NDArray[np.int64]) -> None:
        self.cluster.change(node, request, 1)
        self._ops.append((pod, node, request))

    def assume_many(self, pods: list[str], nodes: npt.NDArray[np.int64], request: npt.NDArray[np.int64]) -> None:
        """One vectorised update for many pods of the same request (a gang's usual case)."""
        self.cluster.change(nodes, request, 1)
        self._ops.extend((p, int(n), request) for p, n in zip(pods, nodes.tolist(), strict=True))

    @property
    def placed(self) -> dict[str, int]:
        return {pod: node for pod, node, _ in self._ops}

    def savepoint(self) -> int:
        return len(self._ops)

    def rollback(self, savepoint: int) -> None:
        """Undoes, last first, the moves made since ``savepoint``."""
        while len(self._ops) > savepoint:
            _, node, request = self._ops.pop()
            self.cluster.change(node, request, -1)

    def discard(self) -> None:
        self.rollback(0)

    def commit(self) -> dict[str, int]:
        """Keeps the moves: each pod is now counted where it was placed."""
        for pod, node, request in self._ops:
            self.cluster.adopt(pod, (node, request))
        placed = self.placed
        self._ops.clear()
        return placed
