"""One transaction per job: an undo log of typed operations, undone last-first.

Belongs here: the log itself (``Txn``: record, savepoint, rollback, discard, close) and the
contract of what it holds (``Op``: anything that can undo itself) and of what records into it
(``Journaled``: an object with a ``txn`` slot). The cluster's moves (``koordpy.core.cluster``:
a usage change, a pod adopted where it is counted, a pod's metadata), a Statement's trial moves
(``koordpy.core.statement``), the scheduler state's transitions (``koordpy.core.state``), what
Reserve assumes of volumes and devices (``koordpy.core.volumes``, ``koordpy.core.claims``) and what
a job adds to the cycle's result (``koordpy.core.decisions.CycleResult``) all record into the same
open ``Txn``, so one rollback undoes a job whole: isolating a job whose
evaluation raised, a dry run (``koordpy.core.cycle.dry_run``: every change discarded) and
preemption's what-ifs are the same three calls. Does not belong here: what the operations are
(their modules define them beside the data they change), and any rule about when to roll back.

It sits below everything that records into it on purpose, so it imports none of them.
"""

from __future__ import annotations

from typing import Protocol


class Op(Protocol):
    """A change already made, holding what undoes it."""

    def undo(self) -> None: ...


class Journaled(Protocol):
    """What records into a transaction while one is open (``txn`` is None otherwise)."""

    txn: Txn | None


class Txn:
    """The changes made since it was opened, oldest first. ``savepoint`` marks a position;
    ``rollback`` undoes, last first, what was recorded after it; ``discard`` undoes everything and
    closes; ``close`` keeps everything and stops recording (the log is dropped)."""

    def __init__(self, *holders: Journaled) -> None:
        self._ops: list[Op] = []
        self._holders: list[Journaled] = []
        for holder in holders:
            self.attach(holder)

    def attach(self, holder: Journaled) -> None:
        """From now on ``holder`` records its changes here."""
        assert holder.txn is None, "a transaction is already open on it"
        holder.txn = self
        self._holders.append(holder)

    def record(self, op: Op) -> None:
        self._ops.append(op)

    def savepoint(self) -> int:
        return len(self._ops)

    def since(self, savepoint: int) -> list[Op]:
        """What was recorded after ``savepoint``, oldest first."""
        return self._ops[savepoint:]

    def rollback(self, savepoint: int) -> None:
        """Undoes, last first, what was recorded after ``savepoint``."""
        ops = self._ops
        while len(ops) > savepoint:
            ops.pop().undo()

    def discard(self) -> None:
        """Undoes everything and closes."""
        self.rollback(0)
        self.close()

    def close(self) -> None:
        """Keeps every change: the holders stop recording and the log is dropped."""
        for holder in self._holders:
            holder.txn = None
        self._holders.clear()
        self._ops.clear()
