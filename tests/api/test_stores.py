"""koordpy.api.stores: the live cache and the simulator's World read their stores by the same names."""

from __future__ import annotations

import pytest

from koordpy.api.kinds import KINDS, new_stores
from koordpy.api.stores import Store, Stores
from koordpy.controller.cache import Cache
from koordpy.sim.simulator import World
from tests.builders import node


def test_a_store_name_the_registry_does_not_have_is_refused_when_the_class_is_made() -> None:
    # Python before 3.12 wraps an error of __set_name__ in a RuntimeError.
    with pytest.raises((TypeError, RuntimeError)) as caught:
        class Shell(Stores):
            nodez = Store[object]()
    error = caught.value.__cause__ or caught.value
    assert str(error) == "Shell.nodez: the kind registry has no store 'nodez'"


@pytest.mark.parametrize("shell", [Cache, World])
def test_both_shells_read_each_named_store_and_the_storage_over_their_own_stores(shell: type[Stores]) -> None:
    s = shell()
    named = {name for name, attr in vars(Stores).items() if isinstance(attr, Store)}
    assert named <= set(new_stores())
    for name in named:
        assert getattr(s, name) is s.stores[name]
    assert s.storage.claims is s.stores["storage.claims"]
    assert s.storage.csinodes is s.stores["storage.csinodes"]
    assert shell().nodes is not s.nodes  # each shell its own stores
    s.stores["nodes"]["n1"] = node("n1")
    assert list(s.nodes) == ["n1"]


@pytest.mark.parametrize("shell", [Cache, World])
def test_topology_is_the_one_cluster_network_topology_the_registry_reads(shell: type[Stores]) -> None:
    only = next(k.only for k in KINDS if k.store == "topology")
    s = shell()
    assert s.topology is None
    s.stores["topology"]["other"] = object()
    assert s.topology is None
    marker = object()
    s.stores["topology"][only] = marker
    assert s.topology is marker
