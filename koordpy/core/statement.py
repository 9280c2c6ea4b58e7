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


@dataclass(frozen=True)
class Assumed:
    """Many pods of one request assumed at once (``Statement.assume_many``): one record for the
    batch, undone by one vectorised shift, so a gang of thousands costs no object per pod. It reads
    as the ``Op`` of each pod, in order (``Statement.ops``)."""

    pods: list[str]
    nodes: npt.NDArray[np.int64]
    request: npt.NDArray[np.int64]
    cluster: Cluster

    def undo(self) -> None:
        self.cluster.shift(self.nodes, self.request, -1, pods=self.pods)

    def expanded(self) -> list[Op]:
        return [Op("assume", p, n, self.request, self.cluster)
                for p, n in zip(self.pods, self.nodes.tolist(), strict=True)]


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
        if not pods:
            return
        self.cluster.shift(nodes, request, 1, pods=pods)
        self.txn.record(Assumed(list(pods), nodes, request, self.cluster))

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
        """Every move since the statement began, one ``Op`` per pod (a batch read as its pods)."""
        out: list[Op] = []
        for op in self.txn.since(self._start):
            if isinstance(op, Op):
                out.append(op)
            elif isinstance(op, Assumed):
                out.extend(op.expanded())
        return out

    def _moves(self) -> list[Op | Assumed]:
        return [op for op in self.txn.since(self._start) if isinstance(op, Op | Assumed)]

    @property
    def placed(self) -> dict[str, int]:
        placed: dict[str, int] = {}
        for op in self._moves():
            if isinstance(op, Assumed):
                placed.update(zip(op.pods, op.nodes.tolist(), strict=True))
            elif op.kind == "assume":
                placed[op.pod] = op.node
        return placed

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
        moves = self._moves()
        placed = self.placed
        for op in moves:
            if isinstance(op, Op) and op.kind == "evict" and op.pod not in placed:
                self.cluster.change(op.node, op.request, 1, pods=op.pod)
        for op in moves:
            if isinstance(op, Assumed):
                self.cluster.adopt_many(op.pods, op.nodes, op.request)
            elif op.kind == "assume":
                self.cluster.adopt(op.pod, (op.node, op.request), held=False)
            elif op.kind == "nominate":
                self.cluster.adopt(op.pod, (op.node, op.request), held=True)
        if self._own:
            self.txn.close()  # nobody can roll its own log back past a commit
        self._start = self.txn.savepoint()
        return placed
