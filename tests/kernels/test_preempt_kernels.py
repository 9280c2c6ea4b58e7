"""The preemption kernels agree with their plain-Python twins on random victims and candidates,
and the reprieve is sound: what it keeps still leaves every candidate the job's offerslots."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from koordpy.kernels import node_offerslots
from koordpy.kernels.preempt import (
    NO_VICTIM,
    candidate_costs,
    candidate_costs_py,
    order_candidates,
    order_candidates_py,
    reclaimable_free,
    reclaimable_free_py,
    reprieve,
    reprieve_py,
)

R = 2


@st.composite
def victims_case(draw: st.DrawFn) -> dict[str, np.ndarray]:
    n = draw(st.integers(1, 8))
    free = np.array(draw(st.lists(st.lists(st.integers(-3, 8), min_size=R, max_size=R), min_size=n, max_size=n)),
                    dtype=np.int64)
    v = draw(st.integers(0, 14))
    v_node = np.array(draw(st.lists(st.integers(0, n - 1), min_size=v, max_size=v)), dtype=np.int64)
    v_req = np.array(draw(st.lists(st.lists(st.integers(0, 5), min_size=R, max_size=R), min_size=v, max_size=v)),
                     dtype=np.int64).reshape(v, R)
    vec = np.array(draw(st.lists(st.integers(0, 4), min_size=R, max_size=R)), dtype=np.int64)
    feasible = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=np.bool_)
    n_cand = draw(st.integers(1, 3))
    of_node = np.array(draw(st.lists(st.integers(-1, n_cand - 1), min_size=n, max_size=n)), dtype=np.int64)
    blocks = np.array(draw(st.lists(st.booleans(), min_size=v, max_size=v)), dtype=np.bool_)
    cap = np.array(draw(st.lists(st.sampled_from([0, 1, 2, 1 << 40]), min_size=n, max_size=n)), dtype=np.int64)
    return {"free": free, "v_node": v_node, "v_req": v_req, "vec": vec, "feasible": feasible, "of_node": of_node,
            "n_cand": np.array(n_cand), "desired": np.array(draw(st.integers(1, 6))), "blocks": blocks, "cap": cap}


def _totals(slots: np.ndarray, of_node: np.ndarray, n_cand: int) -> np.ndarray:
    return np.array([int(slots[of_node == c].sum()) for c in range(n_cand)], dtype=np.int64)


def _slots(room: np.ndarray, vec: np.ndarray, feasible: np.ndarray, cap: np.ndarray,
           blocked: np.ndarray | None = None) -> np.ndarray:
    """Offerslots as the reprieve counts them: capped, none on a node a blocking victim is back on."""
    out = np.minimum(node_offerslots(room, vec, feasible), cap)
    return out if blocked is None else np.where(blocked, 0, out)


@settings(max_examples=300, deadline=None)
@given(victims_case())
def test_reclaim_and_reprieve_parity_and_soundness(case: dict[str, np.ndarray]) -> None:
    free, v_node, v_req, vec = case["free"], case["v_node"], case["v_req"], case["vec"]
    feasible, of_node, n_cand, desired = case["feasible"], case["of_node"], int(case["n_cand"]), int(case["desired"])
    blocks, cap = case["blocks"], case["cap"]
    reclaim = reclaimable_free(free, v_node, v_req)
    assert np.array_equal(reclaim, reclaimable_free_py(free, v_node, v_req))
    totals = _totals(_slots(reclaim, vec, feasible, cap), of_node, n_cand)
    before = (reclaim.copy(), totals.copy())
    out = reprieve(reclaim, vec, feasible, desired, of_node, totals, v_node, v_req, blocks, cap)
    assert np.array_equal(out, reprieve_py(reclaim, vec, feasible, desired, of_node, totals, v_node, v_req, blocks,
                                           cap))
    assert np.array_equal(reclaim, before[0]) and np.array_equal(totals, before[1])  # inputs untouched
    # Sound: with the kept victims back, every candidate that could take the job still can.
    kept = ~out
    room = reclaimable_free(free, v_node[out], v_req[out])
    blocked = np.zeros(len(free), dtype=np.bool_)
    blocked[v_node[kept & blocks]] = True
    after = _totals(_slots(room, vec, feasible, cap, blocked), of_node, n_cand)
    for c in range(n_cand):
        if totals[c] >= desired:
            assert after[c] >= desired
    # Only victims inside a candidate that can take the job are ever evicted.
    inside = np.array([of_node[n] >= 0 and totals[of_node[n]] >= desired for n in v_node], dtype=np.bool_)
    assert not np.any(out & ~inside)
    assert kept.shape == out.shape


@st.composite
def costs_case(draw: st.DrawFn) -> dict[str, np.ndarray]:
    v = draw(st.integers(0, 16))
    n_cand = draw(st.integers(1, 4))
    n_gang = draw(st.integers(1, 4))
    cand = draw(st.lists(st.integers(0, n_cand - 1), min_size=v, max_size=v))
    gang = draw(st.lists(st.integers(-1, n_gang - 1), min_size=v, max_size=v))
    # A gang belongs to one job (its GangGroup); a pod of no gang is a job of its own.
    group = draw(st.lists(st.integers(0, 1), min_size=n_gang, max_size=n_gang))
    job = [100 + i if g < 0 else group[g] for i, g in enumerate(gang)]
    arrays = {
        "evicted": np.array(draw(st.lists(st.booleans(), min_size=v, max_size=v)), dtype=np.bool_),
        "cand": np.array(cand, dtype=np.int64), "gang": np.array(gang, dtype=np.int64),
        "job": np.array(job, dtype=np.int64),
        "prio": np.array(draw(st.lists(st.integers(-5, 5), min_size=v, max_size=v)), dtype=np.int64),
        "counts": np.array(draw(st.lists(st.booleans(), min_size=v, max_size=v)), dtype=np.bool_),
        "weight": np.array(draw(st.lists(st.integers(0, 4), min_size=v, max_size=v)), dtype=np.int64),
        "bound": np.array(draw(st.lists(st.integers(1, 6), min_size=n_gang, max_size=n_gang)), dtype=np.int64),
        "min": np.array(draw(st.lists(st.integers(1, 6), min_size=n_gang, max_size=n_gang)), dtype=np.int64),
        "n_cand": np.array(n_cand),
    }
    by = np.lexsort((arrays["gang"], arrays["job"], arrays["cand"]))
    for k in ("evicted", "cand", "gang", "job", "prio", "counts", "weight"):
        arrays[k] = arrays[k][by]
    return arrays


@settings(max_examples=300, deadline=None)
@given(costs_case())
def test_candidate_costs_parity(a: dict[str, np.ndarray]) -> None:
    args = (a["evicted"], a["cand"], a["prio"], a["job"], a["gang"], a["counts"], a["weight"], a["bound"], a["min"],
            int(a["n_cand"]))
    for got, want in zip(candidate_costs(*args), candidate_costs_py(*args), strict=True):
        assert np.array_equal(got, want)


def test_candidate_costs_price_a_broken_gang_at_all_its_bound_members() -> None:
    # Two victims of gang 0 (6 bound, minMember 5) leave 4: all 6 are disrupted; gang 1 loses 1 of 3
    # with minMember 1: 1 pod. One job each.
    evicted = np.array([True, True, True])
    top, jobs, pods = candidate_costs(evicted, np.array([0, 0, 0]), np.array([3, 7, 2]), np.array([0, 0, 1]),
                                      np.array([0, 0, 1]), np.ones(3, dtype=np.bool_), np.ones(3, dtype=np.int64),
                                      np.array([6, 3]), np.array([5, 1]), 1)
    assert (int(top[0]), int(jobs[0]), int(pods[0])) == (7, 2, 7)


def test_candidate_costs_price_a_unit_at_its_weight() -> None:
    # One victim of a 3-pod unit inside gang 0 (8 bound, minimum 2): weight 3, the unit's other victim
    # 0; a lone pod weighs 1. The gang keeps 5 of 8, above its minimum: 3 pods, plus the lone one.
    top, jobs, pods = candidate_costs(np.ones(3, dtype=np.bool_), np.zeros(3, dtype=np.int64), np.array([1, 1, 1]),
                                      np.array([0, 0, 1]), np.array([0, 0, -1]), np.ones(3, dtype=np.bool_),
                                      np.array([3, 0, 1]), np.array([8]), np.array([2]), 1)
    assert (int(top[0]), int(jobs[0]), int(pods[0])) == (1, 2, 4)


def test_reprieve_keeps_a_blocking_victim_out_where_its_node_is_needed() -> None:
    # One candidate of two nodes with room for 4 pods each; a job of 5. The victim on node 0 blocks it
    # (a host port the job needs): back, node 0 offers nothing and 4 < 5, so it stays a victim. The
    # same victim on a node the job does not need (a job of 4) goes back.
    free = np.full((2, 1), 4, dtype=np.int64)
    args = (np.ones(1, dtype=np.int64), np.ones(2, dtype=np.bool_))
    for desired, want in ((5, True), (4, False)):
        out = reprieve(free, *args, desired, np.zeros(2, dtype=np.int64), np.array([8]), np.zeros(1, dtype=np.int64),
                       np.zeros((1, 1), dtype=np.int64), np.ones(1, dtype=np.bool_), np.full(2, 1 << 40))
        assert bool(out[0]) is want
    # A cap of one pod per node: 2 offerslots for a job of 2, none to spare.
    out = reprieve(free, *args, 2, np.zeros(2, dtype=np.int64), np.array([2]), np.zeros(1, dtype=np.int64),
                   np.zeros((1, 1), dtype=np.int64), np.ones(1, dtype=np.bool_), np.ones(2, dtype=np.int64))
    assert bool(out[0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([NO_VICTIM, 1, 5]), st.integers(0, 3), st.integers(0, 5),
                          st.integers(0, 9), st.integers(0, 50), st.integers(0, 2)), min_size=1, max_size=12),
       st.integers(1, 14))
def test_order_candidates_parity(rows: list[tuple[int, int, int, int, int, int]], k: int) -> None:
    cols = [np.array(c, dtype=np.int64) for c in zip(*rows, strict=True)]
    # No victims means no disrupted job either, and no budget broken.
    cols[1] = np.where(cols[0] == NO_VICTIM, 0, np.maximum(cols[1], 1))
    cols[5] = np.where(cols[0] == NO_VICTIM, 0, cols[5])
    top, jobs, pods, binpack, names, broken = cols
    got = order_candidates(broken, top, jobs, pods, binpack, names, k)
    assert np.array_equal(got, order_candidates_py(broken, top, jobs, pods, binpack, names, k))
    assert len(got) == min(k, len(rows))


def test_order_candidates_fewest_broken_budgets_first() -> None:
    # Candidate 0 evicts lower-priority pods but breaks a PodDisruptionBudget; candidate 1 breaks none:
    # kube-scheduler's first rule picks 1, whatever else it costs.
    top, jobs, pods = np.array([1, 5]), np.array([1, 2]), np.array([1, 3])
    same = np.zeros(2, dtype=np.int64)
    for order in (order_candidates, order_candidates_py):
        assert order(np.array([1, 0]), top, jobs, pods, same, np.arange(2), 2).tolist() == [1, 0]
