"""The gang rule, all of it: which members count, how many more a GangGroup needs, whether it may
bind (permit), whether a gang is satisfied, and how long a GangGroup may wait.

Koordinator's coscheduling is the reference: a gang binds when its members placed now, reserved
while it waits (NonStrict) and already running reach ``minMember``; the match policy says which
count (``only-waiting``: not the running ones; ``waiting-and-running``: both;
``once-satisfied``: both, and once the gang met its minimum it is held to it no more). A GangGroup
binds only when each of its gangs does, and waits at most the shortest ``waiting_seconds`` of its
gangs from its first reservation.

Belongs here: that arithmetic, as pure functions over a gang or a job and the values the
scheduler remembers (``reserved``: pod -> node; ``satisfied``: gang keys), so the cycle, the
view, preemption and explain ask one place. Does not belong here: changing what is remembered
(``koordpy.core.state``'s transitions), the messages built from these answers, and how a dialect
declares its gangs (``koordpy.core.gang``).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from collections.abc import Set as AbstractSet

from koordpy.core.gang import GangGroupId, Job
from koordpy.core.model import Gang
from koordpy.core.verdicts import GangCount


def counted(gang: Gang, reserved: Mapping[str, str], placed: Collection[str] = ()) -> int:
    """The members that count towards the gang's minimum: placed now or reserved, and (unless the
    match policy is ``only-waiting``) the ones bound that still count (``Gang.live``: not a member
    terminating, or on a node gone or failed for it)."""
    cfg = gang.config
    assert cfg is not None
    waiting = sum(1 for k in gang.keys if k in placed or k in reserved)
    return waiting + (0 if cfg.match_policy == "only-waiting" else len(gang.live()))


def done(gang: Gang, satisfied: AbstractSet[str]) -> bool:
    """A ``once-satisfied`` gang that met its minimum once is held to it no more, unless it fell
    below it again (``short``)."""
    cfg = gang.config
    return cfg is not None and cfg.match_policy == "once-satisfied" and gang.key in satisfied and not short(gang)


def short(gang: Gang) -> bool:
    """Whether the gang's live bound members (``Gang.live``) and those that Succeeded (unless its
    minimum left them out, ``Gang.finished_out``) are fewer than its minimum: members were lost (a
    failed node, an eviction, a failure) and the ones missing must be placed together again, all or
    none of them, whatever its match policy and whether it was satisfied once (a gang that lost two
    nodes gets both replacements in one cycle, inside the domain of the members left, or waits for
    both). Members beyond the minimum stay free."""
    cfg = gang.config
    return cfg is not None and len(gang.live()) + (0 if gang.finished_out else gang.succeeded) < cfg.min_member


def replacing(gang: Gang, satisfied: AbstractSet[str]) -> bool:
    """Whether the gang ran and lost members: ``short`` with lost members still seen, or having met
    its minimum before with members still running. Its replacements are placed together in one
    cycle, all or none, and hold nothing while they wait, whatever its mode: a running job is not a
    gang accumulating members, so a NonStrict gang's reservations, and the timeout that would mark
    its replacements never to be scheduled again, are not for them. A gang that never ran is short
    too, and keeps its mode; so does one that ran once and has nothing left running or seen lost
    (made again under the same PodGroup): it starts over."""
    if not short(gang):
        return False
    return bool(gang.lost) or (gang.key in satisfied and bool(gang.live()))


def satisfied_once(gang: Gang, satisfied: AbstractSet[str]) -> bool:
    """A ``once-satisfied`` gang that met its minimum, now or before."""
    cfg = gang.config
    if cfg is None or cfg.match_policy != "once-satisfied":
        return False
    return gang.key in satisfied or len(gang.bound()) >= cfg.min_member


def has_minimum(gang: Gang, satisfied: AbstractSet[str]) -> bool:
    """Whether the gang met its minimum, now or before, whatever its match policy (what a gang that
    names it in its groups, without being named back, waits for)."""
    cfg = gang.config
    return cfg is not None and (gang.key in satisfied or len(gang.bound()) >= cfg.min_member)


def holds_alone(gang: Gang, satisfied: AbstractSet[str]) -> bool:
    """Whether the gang's pending pods schedule as ordinary pods: once satisfied, gang rules end.
    Not for a job with a Volcano or KAI topology: a member added later must still land where the
    topology allows, next to those running (and a later sub-group still binds whole)."""
    if any(ask.keeps_gang for ask in gang.asks):
        return False
    return gang.config is not None and not gang.error and satisfied_once(gang, satisfied) and not short(gang)


def too_few(gang: Gang) -> bool:
    """Whether the gang has fewer live pods than its minimum. Every live member counts here, whatever
    the match policy: it only asks whether the gang has enough pods at all (permit decides which of
    them count towards binding); a member that is lost (``Gang.lost``) is not one of them."""
    cfg = gang.config
    assert cfg is not None
    return len(gang.pods) - len(gang.lost) < cfg.min_member


def gated_short(gang: Gang, gated: int) -> bool:
    """Whether, with ``gated`` of its pods held by scheduling gates, the others cannot reach the minimum."""
    cfg = gang.config
    assert cfg is not None
    return bool(gated) and len(gang.pods) - gated < cfg.min_member


def strict(job: Job, satisfied: AbstractSet[str] = frozenset()) -> bool:
    """Whether some gang of the GangGroup is Strict, or takes its replacements (``replacing``): the
    job binds its minimum whole or nothing, and reserves nothing while it waits (a NonStrict
    GangGroup keeps what fits reserved)."""
    return any(g.config is not None and (g.config.mode == "Strict" or replacing(g, satisfied)) for g in job.gangs)


def skips(job: Job) -> bool:
    """Whether a member of the GangGroup that fits nowhere is skipped while the others are still
    tried (every gang asks for it: kube-scheduler's pod group cycle), rather than the attempt keeping
    the longest rank-order prefix that fits."""
    return bool(job.gangs) and all(g.skips for g in job.gangs)


def waiting(gang: Gang, reserved: Mapping[str, str]) -> int:
    """The members held while the gang waits for the rest (reserved, not bound)."""
    return sum(1 for p in gang.pods if p.key in reserved)


def minimum(gang: Gang) -> tuple[int, int]:
    """The gang's bound members that still count (``Gang.live``: a member lost to a failed node holds
    the gang up no more) and its minimum (what preemption must not break it below)."""
    return len(gang.live()), _minimum(gang)


def met(gang: Gang, reserved: Mapping[str, str], placed: Collection[str] = ()) -> bool:
    """Whether the gang's members placed now, reserved and (per its match policy) bound reach its
    minimum; for a gang of parts (``Gang.parts``), whether enough parts each reach their own."""
    if counted(gang, reserved, placed) < _minimum(gang):
        return False
    if gang.parts is None:
        return True
    need, parts = gang.parts
    bound = {p.key for p in gang.bound()}
    return sum(1 for keys, least in parts
               if sum(1 for k in keys if k in placed or k in reserved or k in bound) >= least) >= need


def permit(job: Job, placed: Collection[str], reserved: Mapping[str, str], satisfied: AbstractSet[str]) -> bool:
    """Whether every gang of the GangGroup reaches its minimum with what is placed now (a lone
    pod: whether it is placed)."""
    if not job.is_gang:
        return all(p.key in placed for p in job.pods)
    return all(done(g, satisfied) or met(g, reserved, placed) for g in job.gangs)


def deficit(job: Job, reserved: Mapping[str, str], satisfied: AbstractSet[str]) -> int:
    """How many more members the GangGroup's gangs need, beyond the bound and reserved ones (at least
    one for a gang of parts whose members add up but whose parts do not)."""
    return sum(max(0, _minimum(g) - counted(g, reserved), 0 if met(g, reserved) else 1)
               for g in job.gangs if not done(g, satisfied))


def counts(job: Job, reserved: Mapping[str, str]) -> tuple[GangCount, ...]:
    """Each gang's counted members over its minimum, as the waiting and timed-out messages show them."""
    return tuple(GangCount(g.key, counted(g, reserved), _minimum(g)) for g in job.gangs)


def _minimum(gang: Gang) -> int:
    cfg = gang.config
    assert cfg is not None
    return cfg.min_member


def wait_limit(group: GangGroupId, gangs: Mapping[str, Gang], cache: dict[GangGroupId, float]) -> float:
    """How long the GangGroup may hold reservations: the shortest waiting time of its gangs (kept in
    ``cache`` while its gangs stand)."""
    limit = cache.get(group)
    if limit is None:
        configs = [gangs[k].config for k in group if k in gangs]
        limit = cache[group] = min((c.waiting_seconds for c in configs if c is not None), default=0.0)
    return limit


def expired(since: float, limit: float, now: float) -> bool:
    """Whether a wait that started at ``since`` ran out by ``now``."""
    return now - since >= limit
