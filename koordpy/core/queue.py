"""The scheduling queue, by job: active, unschedulable (parked) and backoff, as kube-scheduler's
``backend/queue``.

Belongs here: the order jobs are tried in, the record of a job that failed (``Parked``: what it
waits for, its wake hint, the messages its pods were left with), whether something that happened
since could let it go on (its own change, room freed where one of its pod shapes fits, any move
for a job of unlike pods or of rules between pods, the end of its NonStrict wait), its backoff
and the flush of jobs parked too long; a cycle's round under ``podsPerCycle`` (``Round``: which
jobs a cycle cut short leaves to the next, and the pods counted towards the cap). Time is passed
in (``now``): the queue reads no clock. Does
not belong here: which jobs exist (``koordpy.core.view`` builds them from the snapshot and tells
the queue when they change), and why a job failed (``koordpy.core.cycle``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.core.cluster import Cluster
from koordpy.core.filters import Filters
from koordpy.core.gang import Job
from koordpy.core.verdicts import Wake
from koordpy.kernels import node_offerslots

# kube-scheduler's queue, by job: a job that failed for want of room and is woken by room freed
# waits out a backoff first (1 s, doubling per failure, at most 10 s), so a job that keeps failing
# cannot take every cycle; one that waits for its own gang ("changed") goes at once when it changes.
# A job parked this long is tried again whatever happened (the unschedulable queue's flush).
BACKOFF_INITIAL = 1.0
BACKOFF_MAX = 10.0
FLUSH_SECONDS = 300.0


@dataclass
class Parked:
    """A job that waits, as it was left: skipped, its messages kept, until what it waits for happens."""

    job: Job
    wake: Wake
    tick: int  # the cluster's tick after the attempt
    pending: dict[str, str]  # pod -> the message it was left with
    shapes: list[tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]]  # request, nodes its filters allow
    # When it is tried again whatever happens: a NonStrict wait it holds reservations for expires, its
    # preemption delay or a victim's minimum runtime ends (``Plan.wake_at``).
    deadline: float | None
    # For a job of several shapes, the cluster's moves after the attempt: placing unlike pods one
    # shape after another is greedy, so room taken elsewhere can change where they go and let it fit.
    moves: int | None = None
    priority: int = 0  # room held by pods of lower priority counts as room: preemption can take it
    since: float = 0.0  # when it was parked
    attempts: int = 1  # failures in a row
    backoff_until: float = 0.0  # woken before this, it waits in the backoff queue
    # wake "victims": the pods a preemption is terminating on the nodes its pods are nominated to
    victims: tuple[str, ...] = ()

    @property
    def backoff(self) -> float:
        return float(min(BACKOFF_INITIAL * 2 ** min(self.attempts - 1, 16), BACKOFF_MAX))


class Queue:
    """The jobs in queue order and the parked ones. The view attaches the cluster arrays and filters
    the parked records refer to (``attach``), and says when the jobs changed (``changed``)."""

    def __init__(self, jobs: Callable[[], Iterable[Job]]) -> None:
        self._jobs = jobs
        self.cluster: Cluster | None = None
        self.filters: Filters | None = None
        self.parked: dict[str, Parked] = {}
        self.backing_off: dict[str, float] = {}  # parked jobs woken this cycle -> when their backoff ends
        self._order: list[Job] | None = None
        # A cycle stopped by podsPerCycle (``Round``): the jobs the round has still to try, by id
        # (those queued where it stopped, when it first stopped: a job that comes after waits for
        # the next round, so arrivals cannot make a round endless), and the pods it has tried.
        self.round: set[str] | None = None
        self.tried: set[str] = set()
        # (parked at tick, now at tick, moves now, request, mask id, priority) -> whether the room freed in
        # between fits. The moves: room the jobs tried before took since is seen, so a parked job is
        # judged by the room left at its turn, whoever asked first.
        self._fits: dict[tuple[int, int, int, bytes, int, int], bool] = {}

    def jobs(self) -> list[Job]:
        """The jobs in queue order; sorted again only when the jobs changed (and then what is parked
        for a job that is gone is forgotten, lest its old tick keep the freed-room log forever)."""
        if self._order is None:
            self._order = sorted(self._jobs(), key=Job.queue_key)
            for gone in self.parked.keys() - {job.id for job in self._order}:
                del self.parked[gone]
        return self._order

    def changed(self) -> None:
        """The jobs changed: sorted again when next asked."""
        self._order = None

    def attach(self, cluster: Cluster, filters: Filters) -> None:
        """New arrays: what is parked is forgotten (its node masks and request vectors belong to the
        old ones), so every job is tried again."""
        self.cluster, self.filters = cluster, filters
        self.parked.clear()

    def unpark(self, woken: Callable[[Parked], bool]) -> None:
        """The parked jobs for which ``woken`` holds are tried again at once (no backoff)."""
        for job_id in [j for j, p in self.parked.items() if woken(p)]:
            del self.parked[job_id]


    def park(self, job: Job, pending: dict[str, str], deadline: float | None, reserved: Mapping[str, str],
             wake: Wake, now: float = 0.0, attempts: int = 1, victims: tuple[str, ...] = ()) -> None:
        """Parks the job that failed at ``now`` with its pods' messages (``pending``): it is skipped
        until ``wake`` happens, or its NonStrict wait ends (``deadline``), or it is flushed. ``victims``
        (wake "victims"): the terminating pods its preemption waits for, as the core found them."""
        cluster, filters = self.cluster, self.filters
        assert cluster is not None and filters is not None
        shapes: dict[tuple[bytes, int], tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]] = {}
        for pod in job.pods:
            if pod.key in reserved:
                continue  # placed already; only the members still to place can use new room
            vec, mask = cluster.request_vector(pod), filters.static(pod).mask
            shapes.setdefault((vec.tobytes(), id(mask)), (vec, mask))
        # A job of unlike pods, or one the rules between pods hold back, may fit after any move (a pod
        # that started, moved or ended), not only where room appeared.
        moves = len(shapes) > 1 or any(filters.rules.applies(p) for p in job.pods)
        parked = self.parked[job.id] = Parked(job, wake, cluster.tick, pending, list(shapes.values()), deadline,
                                              cluster.moves if moves else None, job.priority, now, attempts,
                                              victims=victims)
        parked.backoff_until = now + parked.backoff

    def _victims_done(self, parked: Parked) -> bool:
        """Whether what the parked job waits for happened: every pod it waits for is gone, or one is
        no longer terminating (its eviction failed: the job decides again what to do about it)."""
        cluster = self.cluster
        assert cluster is not None
        idx = cluster.index
        row, live, doomed = idx.row, idx.live, idx.doomed
        waiting = False
        for key in parked.victims:
            i = row.get(key)
            if i is None or not live[i]:
                continue
            if not doomed[i]:
                return True
            waiting = True
        return not waiting

    def still_parked(self, job: Job, now: float) -> Parked | None:
        """The job's parked record while it stays in the unschedulable or backoff queue, else None
        (it is active: tried this cycle). It becomes active when what it waits for happens: its own
        pods or gangs change (at once), room appears where it could fit (after its backoff), its
        NonStrict wait expires (or its preemption delay, or a victim's minimum runtime: ``deadline``), or
        it has waited FLUSH_SECONDS."""
        parked = self.parked.get(job.id)
        if parked is None or parked.job is not job:
            return None
        if parked.deadline is not None and now >= parked.deadline:
            return None
        if now - parked.since >= FLUSH_SECONDS:
            return None
        if parked.wake == "victims" and self._victims_done(parked):
            return None  # what it waited for happened: tried at once, as a job whose pods changed
        if not self._woken(parked):
            return parked
        if now < parked.backoff_until:
            self.backing_off[job.id] = parked.backoff_until
            return parked
        return None

    def _woken(self, parked: Parked) -> bool:
        """Whether room that could let the parked job fit appeared since it was parked."""
        cluster = self.cluster
        assert cluster is not None
        if parked.wake == "changed":
            return False
        if parked.moves is not None and parked.moves != cluster.moves:
            return True
        if cluster.tick == parked.tick:
            return False
        if parked.wake == "any-room":
            return True
        for vec, mask in parked.shapes:
            key = (parked.tick, cluster.tick, cluster.moves, vec.tobytes(), id(mask), parked.priority)
            fits = self._fits.get(key)
            if fits is None:  # parked jobs share ticks and shapes: each is asked once while nothing moves
                nodes = cluster.freed_since(parked.tick)
                free = cluster.allocatable[nodes] - cluster.used[nodes] + cluster.reclaimable(nodes, parked.priority)
                fits = self._fits[key] = bool(np.any(node_offerslots(free, vec, mask[nodes]) > 0))
            if fits:
                return True
        # Room freed so far does not fit it, and room is only taken until freed again (which cannot
        # help a job of one shape).
        parked.tick = cluster.tick
        return False

    def new_cycle(self) -> None:
        self._fits.clear()
        self.backing_off.clear()
        if self.cluster is not None:  # what no parked job can ask about any more is forgotten
            self.cluster.forget_freed(min((p.tick for p in self.parked.values()), default=self.cluster.tick))


class Round:
    """podsPerCycle: once a cycle has placed that many pods, it stops and the next one resumes the
    queue where it stopped, at once: one cycle's work cut in pieces (a round), tried in the same order
    and seeing the same moves as one long cycle would. Made at the start of a cycle over its ``jobs``,
    closed at its end."""

    def __init__(self, queue: Queue, limit: int, jobs: list[Job]) -> None:
        self.queue, self.limit, self.jobs = queue, limit, jobs
        self.placed = 0
        # The round this cycle goes on with (the jobs queued where it first stopped), if any, and the
        # pods it tried already.
        self.going_on, self.tried = queue.round, queue.tried
        queue.round = None
        queue.tried = set()

    def outside(self, job: Job) -> bool:
        """Not queued where the round first stopped (passed in it already, or come since: one long
        cycle would not have seen it; wherever it sorts, lest arrivals keep the round going while what
        it passed waits), or of pods tried in it already (a gang whose binds made its other members a
        job of their own): the next round's."""
        return self.going_on is not None and (job.id not in self.going_on or any(p.key in self.tried for p in job.pods))

    def beyond(self, outside: bool) -> bool:
        """A job of the round beyond the cap: looked at when its turn comes, in a later cycle of the
        round (whether room freed wakes a parked one depends on what the jobs before it take, as it
        does in one long cycle)."""
        return not outside and bool(self.limit) and self.placed >= self.limit

    def stop(self, at: int) -> None:
        """The cycle stops at its ``at``-th job: the round is the jobs from there on (or goes on)."""
        if self.queue.round is None:
            self.queue.round = self.going_on if self.going_on is not None else {j.id for j in self.jobs[at:]}

    def held(self, job: Job, reserved: Mapping[str, str]) -> set[str]:
        """Members reserved before the job is tried: they counted once, when they were reserved."""
        return {k for k in job.keys if k in reserved} if self.limit else set()

    def count(self, job: Job, held: set[str], bound: Mapping[str, str], reserved: Mapping[str, str]) -> None:
        """What the job tried placed counts towards the cap; reservations given back (a NonStrict wait
        timed out) count nothing: no credit for the jobs after (a job is never split: the limit is looked
        at between jobs only, so a gang larger than it still goes whole)."""
        if self.limit:
            self.placed += sum(1 for p in job.pods if p.key not in held and (p.key in bound or p.key in reserved))
            self.tried.update(p.key for p in job.pods)

    def close(self) -> None:
        """The round goes on: what it tried stays tried."""
        if self.queue.round is not None:
            self.queue.tried = self.tried
