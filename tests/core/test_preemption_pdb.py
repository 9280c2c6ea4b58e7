"""Issue 33, item 3a: preemption that honours PodDisruptionBudgets, kube-scheduler v1.37.2's rule.

The cases are kube-scheduler's ``TestSelectVictimsOnNode`` / ``TestDryRunPreemption`` PDB cases and
``TestPodGroupEvaluator_SelectVictimsOnDomain``'s, told again on koordpy's data: a lone pod
preemptor (each node a candidate) and a gang preemptor (each rack or spine a candidate)."""

from __future__ import annotations

from typing import Any

from koordpy.api.disruption import STORE
from koordpy.core.cluster import Cluster
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Preempt
from koordpy.core.explain import explain_pod
from koordpy.core.state import SchedulerState
from koordpy.core.txn import Txn
from koordpy.sim.simulator import World
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup, priority_class, run, spine_block_nodes
from tests.core.dialects.test_upstream import RACK, group, member
from tests.core.dialects.test_upstream import run as run_upstream

HIGH, MID, LOW, LOWER = (priority_class("high", 1000), priority_class("mid", 100), priority_class("low", 10),
                         priority_class("lower", 5))
CLASSES = (HIGH, MID, LOW, LOWER)
MUST_SPINE = [{"layer": "SpineLayer", "strategy": "MustGather"}]


def running(name: str, where: str, prio: str = "low", cpu: str = "4", app: str | None = None) -> dict[str, Any]:
    return pod(name, cpu=cpu, node_name=where, priority_class=prio, scheduler="other",
               labels={"app": app} if app else None)


def pdb(name: str, app: str, allowed: int | None = None, disrupted: tuple[str, ...] = (),
        **spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": name, "namespace": "default"},
                           "spec": {"selector": {"matchLabels": {"app": app}}, **spec}}
    if allowed is not None:
        out["status"] = {"disruptionsAllowed": allowed,
                         "disruptedPods": {p: "2026-01-01T00:00:00Z" for p in disrupted}}
    return out


# -- a lone pod preemptor ----------------------------------------------------------------------


def test_prefers_a_victim_within_its_budget_over_a_lower_priority_one_beyond_it() -> None:
    # kube-scheduler "PDB: Prefer non-violating victim with higher priority over violating victim
    # with lower priority": n0 holds both; the low one is protected (budget 0), so the mid one goes.
    objs = [node("n0"), *CLASSES, running("low", "n0", app="db"), running("mid", "n0", prio="mid"),
            pod("p", cpu="4", priority_class="high")]
    out = run(*objs, pdb("db", "db", allowed=0))
    assert out.preempted == ["default/mid"] and out.bound == {"default/p": "n0"}
    assert run(*objs).preempted == ["default/low"]  # without the budget, the lowest priority goes


def test_takes_the_lower_priority_victim_when_every_way_breaks_a_budget_and_says_so() -> None:
    # kube-scheduler "PDB: Prefer lower priority pod for preemption, when preemption without pdb
    # violation is not possible": both protected, the low one goes, one pod beyond its budget.
    out = run(node("n0"), *CLASSES, running("low", "n0", app="db"), running("mid", "n0", prio="mid", app="db"),
              pdb("db", "db", allowed=0), pod("p", cpu="4", priority_class="high"))
    assert out.preempted == ["default/low"]
    message = _preempting_message(out)
    assert "evicts 1 pod(s) of PodDisruptionBudget default/db beyond its budget" in message
    assert "kept" not in message  # mid stays for its priority: both ways break the budget


def test_two_victims_of_one_budget_of_one_both_needed_break_it_once() -> None:
    # kube-scheduler "preemption with violation of same pdb": both go, one is beyond the budget.
    out = run(node("n0"), *CLASSES, running("a", "n0", app="db"), running("b", "n0", app="db"),
              pdb("db", "db", allowed=1), pod("p", cpu="8", priority_class="high"))
    assert sorted(out.preempted) == ["default/a", "default/b"]
    assert "evicts 1 pod(s) of PodDisruptionBudget default/db beyond its budget" in _preempting_message(out)


def test_a_victim_the_budget_lists_as_disrupted_costs_it_nothing() -> None:
    # kube-scheduler "the victim belongs to DisruptedPods": n0's victim (the lowest priority) is
    # covered by a spent budget that already counts its eviction, so it is no violation and goes;
    # listing another pod instead ("the victim doesn't belong to DisruptedPods") protects it.
    def objs(listed: str) -> list[Any]:
        return [node("n0", cpu="4"), node("n1", cpu="4"), *CLASSES,
                running("a", "n0", prio="lower", app="db"), running("b", "n1"),
                pdb("db", "db", allowed=0, disrupted=(listed,)), pod("p", cpu="4", priority_class="high")]
    listed = run(*objs("a"))
    assert listed.preempted == ["default/a"]
    assert "beyond its budget" not in _preempting_message(listed)
    assert run(*objs("other")).preempted == ["default/b"]


def test_a_candidate_without_violations_is_preferred_over_cheaper_ones_with() -> None:
    # kube-scheduler "preemption looks past numCandidates until a non-PDB violating node is found":
    # three nodes whose victims (the lowest priority) are protected, one whose victim is not.
    nodes = [node(f"n{i}", cpu="4") for i in range(4)]
    victims = [running(f"v{i}", f"n{i}", prio="lower", app="db") for i in range(3)]
    out = run(*nodes, *CLASSES, *victims, running("free", "n3", prio="mid"), pdb("db", "db", allowed=0),
              pod("p", cpu="4", priority_class="high"))
    assert out.preempted == ["default/free"] and out.bound == {"default/p": "n3"}


def test_a_budget_without_status_is_counted_from_its_pods_and_spent_by_evictions() -> None:
    # No status: minAvailable 1 over two healthy pods allows one. The first preemptor takes one; the
    # second sees the budget spent and evicts the unprotected (higher priority) pod instead.
    out = run(node("n0", cpu="4"), node("n1", cpu="4"), node("n2", cpu="4"), *CLASSES,
              running("a", "n0", prio="lower", app="db"), running("b", "n1", prio="lower", app="db"),
              running("c", "n2"), pdb("db", "db", minAvailable=1),
              pod("p1", cpu="4", priority_class="high"), pod("p2", cpu="4", priority_class="high"))
    assert sorted(out.preempted) == ["default/a", "default/c"]
    # A percentage: 50% of 2 is 1 available, so one may go as well; 100% allows none.
    full = run(node("n0", cpu="4"), node("n1", cpu="4"), *CLASSES,
               running("a", "n0", prio="lower", app="db"), running("c", "n1"), pdb("db", "db", minAvailable="100%"),
               pod("p1", cpu="4", priority_class="high"))
    assert full.preempted == ["default/c"]


# -- a gang preemptor --------------------------------------------------------------------------


def test_of_two_spines_alike_but_for_a_budget_the_gang_preempts_in_the_other() -> None:
    # Spine a's pods are protected (budget 0), spine b's are not: all else equal (spine a would win
    # by name), the gang goes to b.
    layout = {"spine-a": {"blk-a": [0, 1]}, "spine-b": {"blk-b": [2, 3]}}
    objs: list[Any] = [spine_block_nodes(layout), SPINE_BLOCK_CNT, *CLASSES,
            running("a-0", "node-0", cpu="8", app="db"), running("a-1", "node-1", cpu="8", app="db"),
            running("b-0", "node-2", cpu="8"), running("b-1", "node-3", cpu="8"),
            podgroup("train", 2, gather=MUST_SPINE),
            *[pod(f"train-{i}", cpu="8", group="train", index=i, priority_class="high") for i in range(2)]]
    assert sorted(run(*objs).preempted) == ["default/a-0", "default/a-1"]
    out = run(*objs, pdb("db", "db", allowed=0))
    assert sorted(out.preempted) == ["default/b-0", "default/b-1"]


def test_a_unit_breaks_as_many_budgets_as_its_members_beyond_them() -> None:
    # kube-scheduler "PDB: Unit violation if any member violates" / "PodGroup as victim with 2 PDB
    # violations": racks r0..r3 each hold a whole-evicted group of 2 (low) under a budget of 0, so
    # evicting one breaks the budget twice though the lone high pod needs one node; rack rz one pod
    # (mid) under a budget of 0, once. rz wins on violations, though its victim's priority is higher;
    # it must be priced so (the four unit racks would take every verified try otherwise).
    classes = [priority_class("low", 1000), priority_class("mid", 1500), priority_class("high", 2000)]
    racks = ["r0", "r1", "r2", "r3"]
    objs: list[Any] = [classes, [node(f"{r}-{i}", cpu="4", labels={RACK: r}) for r in [*racks, "rz"] for i in (0, 1)]]
    for r in racks:
        objs += [group(f"low-{r}", min_count=2, priorityClassName="low", disruptionMode={"all": {}}),
                 *[_labelled(member(f"low-{r}-{i}", "3", f"low-{r}", node_name=f"{r}-{i}", priority_class="low"),
                             "db") for i in (0, 1)]]
    objs += [_labelled(pod("solo", "3", node_name="rz-0", priority_class="mid", scheduler="other"), "web"),
             pod("peer", "3", node_name="rz-1", priority_class="high", scheduler="other"),  # never a victim
             group("high", min_count=1, topology=RACK, priorityClassName="high"),
             member("high-0", "3", "high", priority_class="high")]
    before = run_upstream(*objs)
    assert sorted(before.preempted) == ["default/low-r0-0", "default/low-r0-1"]
    out = run_upstream(*objs, pdb("db", "db", allowed=0), pdb("web", "web", allowed=0))
    assert out.preempted == ["default/solo"]
    # Within one budget of one, a unit breaks it by its second member only: a tie, broken by priority.
    one = run_upstream(*objs, pdb("db", "db", allowed=1), pdb("web", "web", allowed=0))
    assert sorted(one.preempted) == ["default/low-r0-0", "default/low-r0-1"]


def test_a_gang_prefers_a_group_within_its_budget_over_a_lower_priority_group_beyond_it() -> None:
    # kube-scheduler "Workload Aware: PDB: Prefer non-violating PodGroup over lower-priority violating
    # PodGroup" (disruptionMode all and single): one rack, group L (low, protected by a budget of 0)
    # and group M (mid); a high group of two needs the room of one of them.
    classes = [priority_class("low", 1000), priority_class("mid", 1500), priority_class("high", 2000)]
    for mode in ("all", "single"):
        objs: list[Any] = [classes, [node(f"ra-{i}", cpu="4", labels={RACK: "ra"}) for i in range(4)]]
        for name, prio, at in (("l", "low", (0, 1)), ("m", "mid", (2, 3))):
            objs += [group(name, min_count=2, priorityClassName=prio, disruptionMode={mode: {}}),
                     *[_labelled(member(f"{name}-{i}", "3", name, node_name=f"ra-{n}", priority_class=prio), name)
                       for i, n in enumerate(at)]]
        objs += [group("high", min_count=2, topology=RACK, priorityClassName="high"),
                 *[member(f"high-{i}", "3", "high", priority_class="high") for i in range(2)]]
        assert sorted(run_upstream(*objs).preempted) == ["default/l-0", "default/l-1"], mode
        out = run_upstream(*objs, pdb("l", "l", allowed=0))
        assert sorted(out.preempted) == ["default/m-0", "default/m-1"], mode


def test_explain_says_which_victims_a_budget_kept_and_which_budget_the_plan_breaks() -> None:
    def explain(*objs: dict[str, Any]) -> Any:
        world = World.from_objects([("test", o) for o in objs])
        exp = explain_pod(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, "default/p")
        assert exp is not None and exp.preemption is not None
        return exp
    base = [node("n0"), *CLASSES, running("low", "n0", app="db"), pod("p", cpu="4", priority_class="high")]
    kept = explain(*base, running("mid", "n0", prio="mid"), pdb("db", "db", allowed=0))
    assert kept.preemption.would_evict == ("default/mid",) and kept.preemption.kept_by_budgets == ("default/low",)
    assert "PodDisruptionBudgets kept default/low running in n0: evicting them would break their budgets" \
        in kept.changes
    assert kept.to_json()["preemption"]["keptByBudgets"] == ["default/low"]
    broken = explain(*base, running("mid", "n0", prio="mid", app="db"), pdb("db", "db", allowed=0))
    assert broken.preemption.would_evict == ("default/low",)
    assert broken.preemption.beyond_budgets == (("default/db", 1),)
    assert broken.to_json()["preemption"]["beyondBudgets"] == {"default/db": 1}
    assert any(c.startswith("the eviction breaks PodDisruptionBudget default/db: 1 pod(s)") for c in broken.changes)


def _labelled(raw: dict[str, Any], app: str) -> dict[str, Any]:
    raw["metadata"].setdefault("labels", {})["app"] = app
    return raw


def _preempting_message(out: Any) -> str:
    """The preemptor's condition message of the attempt that chose victims."""
    return str(next(e.message for e in out.events if "preemption: preempting" in e.message))


# -- adversarial review (issue 33 item 3a, second pass) -------------------------------------------


def _selecting(name: str, labels: dict[str, str], allowed: int, disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
    out = pdb(name, "unused", allowed=allowed, disrupted=disrupted)
    out["spec"]["selector"] = {"matchLabels": labels}
    return out


def _running_labelled(name: str, where: str, prio: str, labels: dict[str, str], cpu: str = "4") -> dict[str, Any]:
    return pod(name, cpu=cpu, node_name=where, priority_class=prio, scheduler="other", labels=labels)


def test_a_pod_in_two_budgets_breaks_the_one_it_is_beyond_though_the_first_allows_it() -> None:
    # One rule for a pod several budgets cover: every one of them is charged, and it is beyond its
    # budgets if it is beyond any (kube-scheduler's matching walks every budget of the pod; the
    # eviction takes one from each, as simulate spends them). "db" (first in key order) allows one,
    # "team" none: the low pod on n0 breaks "team", so the mid pod on n1, under no budget, goes.
    objs = [node("n0", cpu="4"), node("n1", cpu="4"), *CLASSES,
            _running_labelled("a", "n0", "low", {"app": "db", "team": "x"}), _running_labelled("b", "n1", "mid", {}),
            _selecting("db", {"app": "db"}, 1), _selecting("team", {"team": "x"}, 0),
            pod("p", cpu="4", priority_class="high")]
    out = run(*objs)
    assert out.preempted == ["default/b"]


def test_a_pod_listed_as_disrupted_by_another_budget_still_costs_its_own() -> None:
    # disruptedPods frees a pod for the budget that lists it only: "web" (which does not cover it any
    # more) lists the low pod; "db", which covers it, allows none: it is protected, the mid one goes.
    objs = [node("n0", cpu="4"), node("n1", cpu="4"), *CLASSES,
            _running_labelled("a", "n0", "low", {"app": "db"}), _running_labelled("b", "n1", "mid", {}),
            _selecting("db", {"app": "db"}, 0), _selecting("web", {"app": "web"}, 0, disrupted=("a",)),
            pod("p", cpu="4", priority_class="high")]
    assert run(*objs).preempted == ["default/b"]


def test_a_pod_evicted_for_one_job_spends_every_budget_covering_it_for_the_next_jobs_of_the_cycle() -> None:
    # Two preemptors in one cycle. "db" allows five, "team" one; a0 and a1 are covered by both. The
    # first preemptor takes a0 (within both); the second must see "team" spent and take c (mid).
    objs = [node("n0", cpu="4"), node("n1", cpu="4"), node("n2", cpu="4"), *CLASSES,
            _running_labelled("a0", "n0", "lower", {"app": "db", "team": "x"}),
            _running_labelled("a1", "n1", "lower", {"app": "db", "team": "x"}),
            _running_labelled("c", "n2", "mid", {}),
            _selecting("db", {"app": "db"}, 5), _selecting("team", {"team": "x"}, 1),
            pod("p1", cpu="4", priority_class="high"), pod("p2", cpu="4", priority_class="high")]
    world = World.from_objects([("test", o) for o in objs])
    result = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    assert sorted(d.pod for d in result.decisions if isinstance(d, Preempt)) == ["default/a0", "default/c"]


def _cluster(*objs: dict[str, Any]) -> tuple[World, Cluster]:
    world = World.from_objects([("test", o) for o in objs])
    return world, Cluster(world.snapshot(frozenset({"koordpy"})))


def test_a_budget_a_job_spent_is_given_back_when_the_job_is_rolled_back() -> None:
    # A job whose evaluation raises is undone whole (``Cycle._isolated``): the budget its victims
    # took must come back with the rest, or later jobs of the cycle see it spent for nothing.
    _, cluster = _cluster(node("n0"), *CLASSES, running("a", "n0", app="db"), pdb("db", "db", allowed=1))
    txn = Txn(cluster)
    mark = txn.savepoint()
    cluster.doom("default/a")
    assert cluster.budgets.allowed.tolist() == [0]
    txn.rollback(mark)
    assert cluster.budgets.allowed.tolist() == [1]


def test_the_budgets_of_a_pod_several_cover_stand_across_cycles_and_follow_its_labels() -> None:
    both = {"app": "db", "team": "x"}
    budgets = [_selecting("db", {"app": "db"}, 1), _selecting("team", {"team": "x"}, 0)]
    world, cluster = _cluster(node("n0"), *CLASSES, _running_labelled("a", "n0", "low", both), *budgets)
    row = cluster.index.row["default/a"]
    assert cluster.budgets.all_of("default/a", int(cluster.index.pdb[row])) == (0, 1)
    # The next cycle: the statuses move, the selectors do not, so no row is counted again.
    moved = {k: b.model_copy(update={"disruptions_allowed": 3}) for k, b in world.snapshot(
        frozenset({"koordpy"})).of(STORE).items()}
    cluster.set_budgets(moved)
    assert cluster.budgets.allowed.tolist() == [3, 3]
    assert cluster.budgets.all_of("default/a", int(cluster.index.pdb[row])) == (0, 1)
    # Its labels change: one budget covers it now.
    relabelled = next(p for p in world.snapshot(frozenset({"koordpy"})).pods if p.key == "default/a")
    cluster.recount("default/a", relabelled.model_copy(update={"labels": {"team": "x"}}), {})
    assert cluster.budgets.all_of("default/a", int(cluster.index.pdb[row])) == (1,)


def test_a_unit_spread_over_racks_counts_every_member_against_its_budget_in_each_rack() -> None:
    # kube-scheduler classifies a group victim by all its pods, wherever they run. The low group u
    # (disruptionMode all) has u-0 in rack ra and u-1 in rb, under a budget of one: evicting it for
    # ra takes both, one beyond the budget. Rack rc's victim (mid) is under none: the gang goes to rc,
    # though ra's victims are of lower priority (and ra wins without the budget).
    classes = [priority_class("low", 1000), priority_class("mid", 1500), priority_class("high", 2000)]
    objs: list[Any] = [classes, [node(f"{r}-{i}", cpu="4", labels={RACK: r})
                                 for r in ("ra", "rb", "rc") for i in (0, 1)]]
    objs += [group("u", min_count=2, priorityClassName="low", disruptionMode={"all": {}}),
             *[_labelled(member(f"u-{i}", "3", "u", node_name=n, priority_class="low"), "db")
               for i, n in enumerate(("ra-0", "rb-0"))],
             pod("peer", "3", node_name="rb-1", priority_class="high", scheduler="other"),
             pod("solo", "3", node_name="rc-0", priority_class="mid", scheduler="other"),
             group("high", min_count=2, topology=RACK, priorityClassName="high"),
             *[member(f"high-{i}", "3", "high", priority_class="high") for i in range(2)]]
    assert sorted(run_upstream(*objs).preempted) == ["default/u-0", "default/u-1"]
    out = run_upstream(*objs, pdb("db", "db", allowed=1))
    assert out.preempted == ["default/solo"]


def _preempted_already(raw: dict[str, Any]) -> dict[str, Any]:
    """The pod as a scheduler's preemption left it: DisruptionTarget=True, terminating."""
    raw["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    raw.setdefault("status", {})["conditions"] = [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
    return raw


def test_a_status_that_has_not_seen_a_preemption_yet_is_not_spent_twice() -> None:
    # Cycle N preempted a0 under budget "db" (allowed 1 of 2 healthy); in cycle N+1 a0 is terminating
    # but the disruption controller has not counted it yet: the status still says 2 healthy, 1
    # allowed. The room a0 is leaving is not this preemptor's, so it needs another victim: not a1
    # (the budget is spent, a0's eviction took it), c under no budget.
    status = {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1, "expectedPods": 2}
    budget = pdb("db", "db", minAvailable=1)
    objs = [node("n0", cpu="4"), node("n1", cpu="4"), node("n2", cpu="4"), *CLASSES,
            _preempted_already(running("a0", "n0", prio="lower", app="db")),
            running("a1", "n1", prio="lower", app="db"),
            running("c", "n2", prio="mid"), pod("p2", cpu="4", priority_class="high")]
    world = World.from_objects([("test", o) for o in [*objs, {**budget, "status": status}]])
    result = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    assert [d.pod for d in result.decisions if isinstance(d, Preempt)] == ["default/c"]
    # Once the controller has counted it (1 healthy, 0 allowed) nothing more is taken off: still c.
    fresh = {**status, "disruptionsAllowed": 0, "currentHealthy": 1}
    world = World.from_objects([("test", o) for o in [*objs, {**budget, "status": fresh}]])
    result = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    assert [d.pod for d in result.decisions if isinstance(d, Preempt)] == ["default/c"]
    # And a fresh status that allows one more (3 healthy of minAvailable 1, a0 gone from the count)
    # is not cut: a1 goes.
    more = [*objs, running("a2", "n2", prio="mid", cpu="0", app="db"),
            {**budget, "status": {**status, "disruptionsAllowed": 1, "currentHealthy": 2}}]
    world = World.from_objects([("test", o) for o in more])
    result = schedule(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now)
    assert [d.pod for d in result.decisions if isinstance(d, Preempt)] == ["default/a1"]


def test_a_protected_pod_the_preemption_did_not_need_is_not_said_to_be_kept_by_its_budget() -> None:
    # n0 runs low-a (under a budget of 0) and lower-b (under none); the high pod needs the room of
    # one. lower-b goes, the lowest priority, as it would without the budget: low-a was not needed,
    # so no budget kept it and none is named. Same when both are protected: mid stays because it is
    # the more important, not because of its budget.
    objs = [node("n0"), *CLASSES, running("low-a", "n0", app="db"), running("lower-b", "n0", prio="lower"),
            pdb("db", "db", allowed=0), pod("p", cpu="4", priority_class="high")]
    out = run(*objs)
    assert out.preempted == ["default/lower-b"]
    assert "PodDisruptionBudget" not in _preempting_message(out)
    both = run(node("n0"), *CLASSES, running("low", "n0", app="db"), running("mid", "n0", prio="mid", app="db"),
               pdb("db", "db", allowed=0), pod("p", cpu="4", priority_class="high"))
    assert both.preempted == ["default/low"]
    assert "kept" not in _preempting_message(both)
