"""The Placer's mode of one call (the per-node cap, the relaxed proposal) is a per-call ``Options``
value passed down its searches, not state on the Placer a caller or a nested search could leave
set: a Placer carries only what outlives a call."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from koordpy.api import Node, Pod
from koordpy.core.cluster import Cluster
from koordpy.core.filters import Filters
from koordpy.core.placement import Placer
from koordpy.core.placement.base import PLAIN, Options
from koordpy.core.snapshot import Snapshot
from koordpy.core.statement import Statement
from tests.builders import node, pod


def _placer() -> Placer:
    nodes = [Node.from_raw(node(f"n{i}", cpu="4")) for i in range(3)]
    return Placer(Filters(Cluster(Snapshot(nodes=nodes, pods=[]))))


def test_the_placer_keeps_no_mode_of_a_call() -> None:
    placer = _placer()
    assert set(vars(placer)) == {"filters", "cluster", "only", "diagnose"}


def test_options_are_frozen_and_plain_by_default() -> None:
    assert PLAIN.cap is None and not PLAIN.relaxed
    with pytest.raises(dataclasses.FrozenInstanceError):
        PLAIN.relaxed = True  # type: ignore[misc]


def test_a_cap_passed_to_one_call_limits_that_call_only() -> None:
    placer = _placer()
    pods = [Pod.from_raw(pod(f"p{i}", "1")) for i in range(3)]
    capped = Statement(placer.cluster)
    one = np.ones(len(placer.cluster.nodes), dtype=np.int64)
    assert placer._binpack(pods, capped, Options(cap=one)) is None
    assert sorted(capped.placed.values()) == [0, 1, 2]  # one a node, as the cap says
    capped.discard()
    plain = Statement(placer.cluster)
    assert placer.binpack(pods, plain) is None
    assert len(set(plain.placed.values())) == 1  # binpacked onto one node: nothing of the cap stayed


@pytest.mark.parametrize("public, private", [("place", "_place"), ("binpack", "_binpack"),
                                             ("feasible", "_feasible")])
def test_a_search_inside_a_job_cannot_forget_its_options(public: str, private: str) -> None:
    # Callers outside a job's placement use the public entry, which takes no options; the searches
    # inside one call the private entry, whose options have no default to fall back on.
    public_opts = inspect.signature(getattr(Placer, public)).parameters.get("opts")
    opts = inspect.signature(getattr(Placer, private)).parameters["opts"]
    assert public_opts is None and opts.default is inspect.Parameter.empty
