"""The gang rule in one place (koordpy.core.gangrule): which members count for each match policy,
permit, the deficit, the counts messages show, the wait limit; and a GangGroup's id as a value."""

from __future__ import annotations

from typing import Any

from koordpy.api import Pod
from koordpy.api.podgroup import GangConfig
from koordpy.core import gangrule
from koordpy.core.gang import GangGroupId, Job, group_of
from koordpy.core.model import Gang
from koordpy.core.verdicts import GangCount
from tests.builders import pod


def _gang(key: str, min_member: int, bound: int, pending: int, **cfg: Any) -> Gang:
    name = key.split("/")[1]
    pods = [Pod.from_raw(pod(f"{name}-b{i}", node_name="n0")) for i in range(bound)]
    pods += [Pod.from_raw(pod(f"{name}-p{i}")) for i in range(pending)]
    return Gang(key, GangConfig(key=key, min_member=min_member, total_number=min_member, **cfg), pods, 0.0)


def _job(*gangs: Gang) -> Job:
    return Job(str(GangGroupId.of(*(g.key for g in gangs))), list(gangs),
               [p for g in gangs for p in g.pods if not p.node_name], 0, 0.0)


def test_running_members_count_unless_the_policy_is_only_waiting() -> None:
    for policy, counted in (("waiting-and-running", 3), ("once-satisfied", 3), ("only-waiting", 1)):
        g = _gang("default/g", 4, 2, 2, match_policy=policy)
        assert gangrule.counted(g, {"default/g-p0": "n1"}) == counted
        job = _job(g)
        assert gangrule.deficit(job, {"default/g-p0": "n1"}, set()) == 4 - counted
        assert gangrule.permit(job, {"default/g-p1": 0}, {"default/g-p0": "n1"}, set()) == (counted + 1 >= 4)
        assert gangrule.counts(job, {"default/g-p0": "n1"}) == (GangCount("default/g", counted, 4),)


def test_a_once_satisfied_gang_is_held_to_its_minimum_no_more() -> None:
    # Four members run (three of them, less than the minimum, are not enough to be satisfied without
    # the scheduler's memory); the two pending beyond the minimum go as they fit.
    g = _gang("default/g", 4, 4, 2)
    job = _job(g)
    assert gangrule.permit(job, {}, {}, {"default/g"}) and gangrule.deficit(job, {}, {"default/g"}) == 0
    assert gangrule.holds_alone(g, {"default/g"}) and gangrule.holds_alone(g, set())
    fresh = _gang("default/f", 4, 3, 2)
    assert not gangrule.permit(_job(fresh), {}, {}, set()) and gangrule.deficit(_job(fresh), {}, set()) == 1
    other = _gang("default/o", 4, 0, 4, match_policy="only-waiting")
    assert not gangrule.permit(_job(other), {}, {}, {"default/o"})  # satisfied before, needs it again
    assert gangrule.has_minimum(other, {"default/o"}) and not gangrule.satisfied_once(other, {"default/o"})


def test_a_ganggroup_binds_only_when_every_gang_does_and_waits_the_shortest_limit() -> None:
    a = _gang("default/a", 1, 0, 1, waiting_seconds=30.0)
    b = _gang("default/b", 2, 0, 2, waiting_seconds=10.0)
    job = _job(a, b)
    assert not gangrule.permit(job, {"default/a-p0": 0, "default/b-p0": 0}, {}, set())
    assert gangrule.permit(job, {"default/a-p0": 0, "default/b-p0": 0, "default/b-p1": 1}, {}, set())
    cache: dict[GangGroupId, float] = {}
    assert gangrule.wait_limit(job.group, {"default/a": a, "default/b": b}, cache) == 10.0
    assert cache == {GangGroupId.of("default/a", "default/b"): 10.0}
    assert gangrule.expired(5.0, 10.0, 15.0) and not gangrule.expired(5.0, 10.0, 14.9)


def test_a_ganggroup_id_is_a_tuple_shown_as_its_keys_joined_by_commas() -> None:
    a = _gang("ns-b/b", 1, 0, 1, groups=("ns-a/a", "ns-b/b"))
    b = _gang("ns-a/a", 1, 0, 1, groups=("ns-a/a", "ns-b/b"))
    groups = group_of({"ns-b/b": a, "ns-a/a": b})
    gid = groups["ns-b/b"]
    assert gid == ("ns-a/a", "ns-b/b") and groups["ns-a/a"] is not None and "ns-a/a" in gid
    assert str(gid) == f"{gid}" == "ns-a/a,ns-b/b"
    assert _job(a, b).group == gid and _job(a, b).id == str(gid)


def test_a_gang_that_lost_members_needs_its_replacements_together_whatever_satisfied_says() -> None:
    # Four members ran (once-satisfied, satisfied); two are lost (their node failed): the two pending
    # replacements are a gang's again, both or neither, and the lost ones count towards nothing.
    g = _gang("default/g", 4, 4, 2)
    g.lost = frozenset({"default/g-b0", "default/g-b1"})
    job = _job(g)
    assert gangrule.short(g) and not gangrule.done(g, {"default/g"})
    assert not gangrule.holds_alone(g, {"default/g"})
    assert gangrule.counted(g, {}) == 2 and gangrule.deficit(job, {}, {"default/g"}) == 2
    assert not gangrule.permit(job, {"default/g-p0": 0}, {}, {"default/g"})
    assert gangrule.permit(job, {"default/g-p0": 0, "default/g-p1": 1}, {}, {"default/g"})
    assert not gangrule.too_few(g) and gangrule.too_few(_gang("default/h", 4, 3, 0))
    # Members that Succeeded met their part: a gang finishing is not short of them.
    g.succeeded = 2
    assert not gangrule.short(g) and gangrule.holds_alone(g, {"default/g"})
