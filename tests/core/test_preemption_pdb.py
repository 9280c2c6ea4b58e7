"""Issue 33, item 3a: preemption that honours PodDisruptionBudgets, kube-scheduler v1.37.2's rule.

The cases are kube-scheduler's ``TestSelectVictimsOnNode`` / ``TestDryRunPreemption`` PDB cases and
``TestPodGroupEvaluator_SelectVictimsOnDomain``'s, told again on koordpy's data: a lone pod
preemptor (each node a candidate) and a gang preemptor (each rack or spine a candidate)."""

from __future__ import annotations

from typing import Any

from koordpy.core.explain import explain_pod
from koordpy.core.state import SchedulerState
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
    assert "PodDisruptionBudgets kept default/mid running" in message


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
