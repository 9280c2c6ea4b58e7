"""Every reserve has its unreserve (issue 32, item 3): what a job reserves or adds (the volumes PreBind
will write, the cycle's result) is recorded in its transaction and undone when the job is rolled back."""

from __future__ import annotations

from typing import Any

import pytest

from koordpy.api import Node, Pod
from koordpy.api.storage import ANN_SELECTED_NODE
from koordpy.core import cycle as cycle_module
from koordpy.core.cycle import schedule
from koordpy.core.decisions import Bind, CycleResult, Event, GangStatusUpdate, SetPodScheduledFalse
from koordpy.core.snapshot import Snapshot
from koordpy.core.state import SchedulerState
from koordpy.core.txn import Txn
from koordpy.core.volumes import BIND_CONFLICT, VolumeRules
from koordpy.sim.simulator import World
from tests.builders import node, pod, podgroup
from tests.core.test_volumes import pv, pvc, sc, using

GROUP = "pod-group.scheduling.sigs.k8s.io"


def snapshot(*objects: dict[str, Any]) -> Snapshot:
    return World.from_objects([("test", o) for o in objects]).snapshot(frozenset({"koordpy"}))


def explode_after_bind(monkeypatch: pytest.MonkeyPatch, job_id: str, only: int | None = None) -> None:
    """Job ``job_id`` raises once Bind ran for it (its volumes pre-bound), after binding only its first
    ``only`` placed members when given."""
    real = cycle_module.Cycle.bind

    def bind(self: cycle_module.Cycle, placed: dict[str, int]) -> None:
        mine = any(j.id == job_id for j in self.view.queue.jobs() if set(j.keys) & placed.keys())
        real(self, dict(list(placed.items())[:only]) if mine and only is not None else placed)
        if mine:
            raise RuntimeError("boom after PreBind")

    monkeypatch.setattr(cycle_module.Cycle, "bind", bind)


# -- the volume pre-bind steps ---------------------------------------------------------------------


def test_prebind_is_undone_with_the_transaction() -> None:
    """A static PV's claimRef and a claim's selected node, assumed by PreBind, are put back as they were
    by a rollback; ``assumed`` counts the assumptions kept, and the cached answers expire both ways."""
    snap = snapshot(node("a"), sc("local"), sc("fast", provisioner="csi.example.com"), pv("only", on="a"),
                    pvc("data"), pvc("fresh", cls="fast"), pvc("other"), using("p", "data", "fresh"),
                    using("q", "other"))
    rules = VolumeRules(snap.storage)
    pvs, claims, version = dict(rules.pvs), dict(rules.claims), rules.version
    a = Node.from_raw(node("a"))
    txn = Txn()
    binding = rules.prebind(Pod.from_raw(using("p", "data", "fresh")), a, txn)
    assert binding is not None and binding.static == (("default/data", "only"),)
    assert binding.provision == ("default/fresh",)
    assert rules.pvs["only"].claim_ref is not None
    assert rules.claims["default/fresh"].annotations[ANN_SELECTED_NODE] == "a"
    assert rules.assumed and rules.version != version
    assumed = rules.version
    txn.rollback(0)
    assert rules.pvs == pvs and rules.claims == claims
    assert all(rules.pvs[k] is v for k, v in pvs.items()) and all(rules.claims[k] is v for k, v in claims.items())
    assert not rules.assumed and rules.version not in (version, assumed)
    # The PV is free again for the next pod: it takes it, and that is kept.
    kept = rules.prebind(Pod.from_raw(using("q", "other")), a, txn)
    assert kept is not None and kept.static == (("default/other", "only"),)
    mark = txn.savepoint()
    with pytest.raises(LookupError):
        rules.prebind(Pod.from_raw(using("p", "data")), a, txn)
    txn.rollback(mark)  # nothing was assumed by the one that failed: the kept one stands
    assert rules.assumed and rules.pvs["only"].claim_ref is not None


def test_a_job_that_raises_after_its_volumes_were_prebound_leaves_them_as_they_were(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A gang whose members' static PVs were pre-bound raises: the PVs and claims are the snapshot's,
    nothing stays assumed (so the next cycle does not build the rules again), and the cycle's result
    holds nothing of the job but its error."""
    explode_after_bind(monkeypatch, "default/g")
    snap = snapshot(node("n0"), node("n1"), sc("local"), pv("v0", on="n0"), pv("v1", on="n1"), podgroup("g", 2),
                    pvc("d0"), pvc("d1"), using("w0", "d0", cpu="8", labels={GROUP: "g"}),
                    using("w1", "d1", cpu="8", labels={GROUP: "g"}))
    state = SchedulerState()
    result = schedule(snap, state, 0.0)
    rules = state.standing_view().volumes
    assert rules is not None
    assert {k: v.claim_ref for k, v in rules.pvs.items()} == {"v0": None, "v1": None}
    assert rules.pvs == snap.storage.volumes and rules.claims == snap.storage.claims
    assert not rules.assumed
    assert set(result.job_errors) == {"default/g"}
    assert result.bound == {} and result.binds == [] and result.gangs_placed == []
    said = [d for d in result.decisions if not isinstance(d, GangStatusUpdate)]
    assert [(type(d), getattr(d, "pod", getattr(d, "obj", ""))) for d in said] == [
        (SetPodScheduledFalse, "default/w0"), (Event, "default/w0"), (SetPodScheduledFalse, "default/w1"),
        (Event, "default/w1")]
    assert all(isinstance(d, SetPodScheduledFalse | Event) and "boom after PreBind" in d.message for d in said)
    schedule(snap, state, 1.0)
    assert state.standing_view().volumes is rules  # nothing assumed was kept: not built again


def test_a_gang_that_raises_after_binding_a_member_leaves_its_pv_for_the_next_job(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Gang ``a`` binds one member (its claim takes the one static PV on n0), then raises and is rolled
    back: pod ``b``, tried next in the same cycle, takes that PV. (A Strict gang that waits never
    pre-binds: Bind comes after Permit; a job that raises after Bind is the case that can.)"""
    explode_after_bind(monkeypatch, "default/a", only=1)
    snap = snapshot(node("n0"), node("n1"), sc("local"), pv("only", on="n0"), podgroup("a", 2), pvc("da"), pvc("db"),
                    using("a0", "da", cpu="1", labels={GROUP: "a"}),
                    pod("a1", cpu="1", group="a"), using("b", "db", cpu="1"))
    result = schedule(snap, SchedulerState(), 0.0)
    assert set(result.job_errors) == {"default/a"}
    binds = {d.pod: d for d in result.binds}
    assert set(binds) == {"default/b"}
    volumes = binds["default/b"].volumes
    assert volumes is not None and volumes.static == (("default/db", "only"),)
    assert not any(BIND_CONFLICT in m for m in result.waiting.values())


# -- the cycle's result ----------------------------------------------------------------------------


def test_the_results_additions_are_undone_last_first() -> None:
    result = CycleResult()
    result.decide(Bind("default/before", "n0"))
    result.wait("default/w", "earlier")
    result.bind(["default/before"], ["n0"])
    txn = Txn(result)
    result.decide(Bind("default/p", "n1"), Bind("default/q", "n1"))
    result.wait("default/w", "later")
    result.wait("default/x", "new")
    result.bind(["default/p", "default/before"], ["n1", "n2"])
    result.gang_placed("default/g")
    result.gang_timed_out("default/h")
    result.preemption_attempt()
    txn.discard()
    assert result.decisions == [Bind("default/before", "n0")]
    assert result.waiting == {"default/w": "earlier"} and result.bound == {"default/before": "n0"}
    assert result.gangs_placed == [] and result.gangs_timed_out == [] and result.preemption_attempts == 0
    assert result.txn is None
    result.decide(Bind("default/after", "n0"))  # no transaction open: kept, recorded nowhere
    assert len(result.decisions) == 2


# -- a pod dropped in the middle of Bind: the Reserve steps it made go back (kube-scheduler runs
# -- every plugin's Unreserve when one Reserve step fails), not only when the whole job rolls back.

KOORD_GROUP = {"pod-group.scheduling.sigs.k8s.io": "g"}


class _RefusingDevices:
    """A device rule whose Reserve refuses ``refused`` at Bind (a held member's devices gone)."""

    def __init__(self, refused: str) -> None:
        self.refused = refused
        self.bindings: dict[str, Any] = {}

    def uses(self, pod: Pod) -> bool:
        return pod.key == self.refused

    def reserve(self, pod: Pod, node: Any, txn: Txn) -> str | None:
        return "devices gone" if pod.key == self.refused else None

    def unreserve(self, pod: Pod, txn: Txn) -> None:
        raise AssertionError("nothing was reserved")

    def leftover(self, pod: Pod) -> None:
        return None


def test_volumes_prebound_for_a_pod_whose_devices_fail_go_back_for_the_next_pod() -> None:
    """Pod a's volumes are assumed, then its devices' Reserve fails: a is not bound and its PV is free
    again, so b, placed after it on the same node, binds with it."""
    snap = snapshot(node("n0"), sc("local"), pv("only", on="n0"), pvc("da"), pvc("db"),
                    using("a", "da"), using("b", "db"))
    c = cycle_module.Cycle(snap, SchedulerState(), 0.0)
    c.filters.devices = _RefusingDevices("default/a")  # type: ignore[assignment]
    txn = Txn(c.cluster, c.state, c.result)
    c.bind({"default/a": 0, "default/b": 0})
    rules = c.filters.volumes
    assert rules is not None
    assert "default/a" not in c.result.bound and c.result.bound.get("default/b") == "n0"
    ref = rules.pvs["only"].claim_ref
    assert ref is not None and ref.name == "db"
    txn.close()


def _gpu_world(names: tuple[str, ...], *extra: dict[str, Any], tainted: str | None = None,
               first_claims: tuple[str, ...] = ("d0",), priority: str = "mid") -> World:
    from tests.builders import priority_class
    from tests.sim.test_dra import claiming, gpu_class, gpu_nodes, gpu_slice, template

    gang = podgroup("g", 3, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"})
    members = [claiming(using(f"g-{i}", *(first_claims if i == 0 else ()), cpu="40", labels=KOORD_GROUP,
                              priority_class=priority), template_name="gpus") for i in range(3)]
    objs = [*gpu_nodes(*names), gpu_class(), template(), *[gpu_slice(n, taint=n == tainted) for n in names],
            gang, *members, sc("local"), pv("v0", on="n0"), pvc("d0"),
            priority_class("low", 1), priority_class("mid", 1000), priority_class("top", 2000), *extra]
    return World.from_objects([("t", o) for o in objs])


def test_a_held_member_whose_devices_are_gone_leaves_its_pv_to_a_later_pod() -> None:
    """A NonStrict gang holds g-0 (a PV on n0 and GPUs) while it waits; next cycle n0's GPUs are
    tainted, so g-0's devices fail at Bind after its volumes were assumed: the PV goes back, and x,
    tried after it in the same cycle, binds with it."""
    state = SchedulerState()
    one = _gpu_world(("n0", "n1"))
    schedule(one.snapshot(frozenset({"koordpy"})), state, one.now)
    assert state.reserved  # g-0 and g-1 held on n0 and n1
    two = _gpu_world(("n0", "n1", "n2"), pvc("dx"), using("x", "dx", cpu="1", priority_class="low"),
                     tainted="n0")
    second = schedule(two.snapshot(frozenset({"koordpy"})), state, two.now + 1)
    assert "default/g-0" not in second.bound
    assert second.bound.get("default/x") == "n0"


def test_a_held_member_refused_at_prebind_gives_back_its_devices() -> None:
    """x, above the gang, takes the PV the held g-0 counted on; g-0's PreBind fails, and the GPUs
    placement reserved for it on n0 go back (DynamicResources' Unreserve): y, below the gang, gets them."""
    from tests.sim.test_dra import claiming

    state = SchedulerState()
    one = _gpu_world(("n0", "n1"))
    schedule(one.snapshot(frozenset({"koordpy"})), state, one.now)
    two = _gpu_world(("n0", "n1", "n2"), pvc("dx"), using("x", "dx", cpu="1", priority_class="top"),
                     claiming(using("y", cpu="1", priority_class="low"), template_name="gpus"))
    second = schedule(two.snapshot(frozenset({"koordpy"})), state, two.now + 1)
    assert "default/g-0" not in second.bound and second.bound.get("default/x") == "n0"
    assert second.bound.get("default/y") == "n0"
