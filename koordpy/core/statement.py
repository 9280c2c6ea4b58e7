"""Trial changes to the cluster's resource arrays, committed or discarded in reverse.

The idea is Volcano's Statement: a gang (or a preemption dry run) makes its moves on the
shared state, and either keeps them all or unwinds them last-first, so a failed attempt
leaves no trace for the next job in the cycle. The moves are typed: ``assume`` places a
pending pod on a node, ``evict`` takes a counted pod's usage off its node (a victim in a
dry run, or a preemptor's own nomination lifted while it is placed again), ``nominate``
counts a pending pod on the node where room is being made for it.

A Statement is a scope on the job's transaction (``koordpy.core.txn``): its moves are recorded in
the cluster's open ``Txn`` beside the cluster's kept changes and the scheduler state's
transitions, so its savepoints are the transaction's and a job rolled back whole takes its moves
with it. Without an open transaction (a benchmark, a test) it keeps a log of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from koordpy.core.cluster import Cluster
from koordpy.core.txn import Txn

OpKind = Literal["assume", "evict", "nominate"]


@dataclass(frozen=True)
class Op:
    """One trial move; undone by the opposite change (never room freed: nobody else saw it taken)."""

    kind: OpKind
    pod: str
    node: int
    request: npt.NDArray[np.int64]
    cluster: Cluster

    def undo(self) -> None:
        self.cluster.shift(self.node, self.request, 1 if self.kind == "evict" else -1, pods=self.pod)


class Statement:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._own = cluster.txn is None  # no job's transaction is open: a log of its own
        self.txn = cluster.txn if cluster.txn is not None else Txn()
        self._start = self.txn.savepoint()

    def _move(self, kind: OpKind, pod: str, node: int, request: npt.NDArray[np.int64], sign: int) -> None:
        self.cluster.shift(node, request, sign, pods=pod)
        self.txn.record(Op(kind, pod, node, request, self.cluster))

    def assume(self, pod: str, node: int, request: npt.NDArray[np.int64]) -> None:
        self._move("assume", pod, node, request, 1)

    def assume_many(self, pods: list[str], nodes: npt.NDArray[np.int64], request: npt.NDArray[np.int64]) -> None:
        """One vectorised update for many pods of the same request (a gang's usual case)."""
        self.cluster.shift(nodes, request, 1, pods=pods)
        for p, n in zip(pods, nodes.tolist(), strict=True):
            self.txn.record(Op("assume", p, int(n), request, self.cluster))

    def evict(self, pod: str) -> bool:
        """Takes the counted pod's usage off its node for this trial; False if it is not counted."""
        entry = self.cluster.counted.get(pod)
        if entry is None:
            return False
        self._move("evict", pod, entry[0], entry[1], -1)
        return True

    def nominate(self, pod: str, node: int, request: npt.NDArray[np.int64]) -> None:
        self._move("nominate", pod, node, request, 1)

    def ops(self) -> list[Op]:
        return [op for op in self.txn.since(self._start) if isinstance(op, Op)]

    @property
    def placed(self) -> dict[str, int]:
        return {op.pod: op.node for op in self.ops() if op.kind == "assume"}

    @property
    def evicted(self) -> list[str]:
        return [op.pod for op in self.ops() if op.kind == "evict"]

    def savepoint(self) -> int:
        return self.txn.savepoint()

    def rollback(self, savepoint: int) -> None:
        """Undoes, last first, the moves made since ``savepoint``."""
        self.txn.rollback(max(savepoint, self._start))

    def discard(self) -> None:
        self.rollback(self._start)

    def commit(self) -> dict[str, int]:
        """Keeps the placements: each placed pod is now counted where it was placed. An evicted pod
        that was not placed again keeps its old count (a trial eviction is never a deletion: that is
        the shell's to do, and the pod stays counted until it is gone). The moves stay in the
        transaction, so a job rolled back whole still undoes them."""
        ops = self.ops()
        placed = {op.pod: op.node for op in ops if op.kind == "assume"}
        for op in ops:
            if op.kind == "evict" and op.pod not in placed:
                self.cluster.change(op.node, op.request, 1, pods=op.pod)
        for op in ops:
            if op.kind == "assume":
                self.cluster.adopt(op.pod, (op.node, op.request), held=False)
            elif op.kind == "nominate":
                self.cluster.adopt(op.pod, (op.node, op.request), held=True)
        if self._own:
            self.txn.close()  # nobody can roll its own log back past a commit
        self._start = self.txn.savepoint()
        return placed
