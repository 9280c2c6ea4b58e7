"""Review of issue 19's re-cut: its finding, as a test that failed before the fix.

test_resync_of_one_topology_kind_keeps_the_other: PRE-EXISTING (failed on 9ee94f8 too, so not a
regression of the re-cut), but in the area the re-cut took over (the registry as the shells'
dispatch, item 2). Kueue's Topology and KAI's Topology are two resources the registry lists and
watches separately (``watched()``), yet the cache files both under one name, ``Kind.label`` ==
"Topology", and ``drop_unlisted`` picks what to drop by that name. So the LIST of KAI Topologies
that follows the LIST of Kueue Topologies (``sync`` and every periodic resync, in ``resources()``
order) drops every Kueue Topology listed before it: on a cluster that serves both CRDs, jobs that
name a Kueue Topology then wait with "Topology ... not found" until that Topology is next modified.
Fixed: the listing and the watches pass the registry's entry (``resources()`` holds ``Kind``s), the
cache remembers which resource filed each object (``Cache.listed_by``) and a LIST drops only its own.
"""

from __future__ import annotations

from typing import Any

from koordpy.api.kinds import watched
from koordpy.controller.cache import Cache


def _topology(api_version: str, name: str, rv: int) -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "Topology",
            "metadata": {"name": name, "resourceVersion": str(rv)},
            "spec": {"levels": [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}


def test_resync_of_one_topology_kind_keeps_the_other() -> None:
    kinds = [k for k in watched() if k.plural == "topologies"]
    assert [k.group for k in kinds] == ["kueue.x-k8s.io", "kai.scheduler"]  # listed in this order by sync
    kueue, kai = kinds
    cache = Cache()
    # As ``sync`` does, one resource after the other; resourceVersions are the API server's, so a
    # later LIST's version is above every object an earlier LIST brought.
    cache.reconcile(kueue, [_topology("kueue.x-k8s.io/v1beta1", "kueue-net", 10)], 11)
    dropped = cache.reconcile(kai, [_topology("kai.scheduler/v1alpha1", "kai-net", 12)], 13)
    assert dropped == 0, "a LIST of KAI Topologies dropped a Kueue Topology it never listed"
    assert sorted(cache.topologies) == ["kai-net", "kueue-net"]


def test_a_watched_topology_survives_the_other_kinds_resync() -> None:
    kueue, kai = [k for k in watched() if k.plural == "topologies"]
    cache = Cache()
    cache.observe(kai, "ADDED", _topology("kai.scheduler/v1alpha1", "kai-net", 5))
    assert cache.reconcile(kueue, [], 9) == 0
    assert sorted(cache.topologies) == ["kai-net"]
    assert cache.reconcile(kai, [], 11) == 1  # its own LIST no longer has it: gone
    assert cache.topologies == {}
