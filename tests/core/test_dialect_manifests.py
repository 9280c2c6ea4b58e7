"""Manifest generation is behind the Dialect protocol (issue 19, item 1): each dialect writes its own
topology objects from node labels (``Dialect.manifests``, chosen by its ``manifest_format``), the
shared pure parts live in ``koordpy.core.topology_manifests``, and ``koordpy topology generate``
picks the dialect through the registry, holding no format's code of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordpy.api.objects import Node
from koordpy.cli import topology as cli_topology
from koordpy.core import dialects
from koordpy.core.dialects import BY_NAME, DIALECTS, MANIFESTS, kai, koordinator, upstream, volcano
from koordpy.core.dialects.base import Manifests
from koordpy.core.topology_manifests import Generated, Unusable, short_names
from tests.builders import node

RACK = "example.com/rack"


def nodes() -> list[Node]:
    return [Node.from_raw(node("n1", labels={RACK: "r1"})), Node.from_raw(node("n2"))]


def test_each_format_is_one_dialects_and_the_cli_offers_exactly_those() -> None:
    formats = {d.name: d.manifest_format for d in MANIFESTS}
    assert formats == {"koordinator": "cnt", "volcano": "hypernode", "kai": "topology"}
    assert [d.name for d in DIALECTS if d not in MANIFESTS] == ["upstream", "jobset"]
    # The CLI's parser is built before the core loads: its literals are held to the registry here,
    # the order (the help's) and the default (the first) with them.
    assert cli_topology.FORMATS == dialects.manifest_formats() == ("hypernode", "cnt", "topology")
    assert dialects.manifest_formats()[0] == cli_topology.DEFAULT_FORMAT


def test_each_dialect_writes_its_own_kind() -> None:
    kinds = {d.name: [doc["kind"] for doc in d.manifests(nodes(), [RACK], "racks").documents]
             for d in MANIFESTS}
    assert kinds == {"koordinator": ["ClusterNetworkTopology"], "volcano": ["HyperNode"], "kai": ["Topology"]}
    # Kubernetes' own PodGroup API has no topology object: the upstream dialect has no manifests.
    assert not isinstance(upstream.DIALECT, Manifests)


def test_generate_picks_the_dialect_by_its_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command asks the registry: a dialect's generator, replaced, is what the command returns."""
    marker = Generated([{"kind": "Marker"}], ["from the dialect"])
    seen: list[tuple[Any, ...]] = []

    def manifests(self: object, ns: list[Node], keys: list[str], name: str) -> Generated:
        seen.append((type(self).__name__, [n.name for n in ns], keys, name))
        return marker

    monkeypatch.setattr(type(BY_NAME["volcano"]), "manifests", manifests)
    assert cli_topology.generate(nodes(), [RACK], "hypernode", "x") is marker
    assert seen == [("Volcano", ["n1", "n2"], [RACK], "x")]


def test_what_a_dialect_cannot_use_names_the_flag_on_the_command_line() -> None:
    with pytest.raises(Unusable) as caught:
        kai.DIALECT.manifests(nodes(), [kai.HOSTNAME, RACK], "t")
    assert caught.value.argument == "levels"
    with pytest.raises(cli_topology.TopologyUsageError, match=r"^--name: 'Bad_Name' is not an RFC 1123"):
        cli_topology.generate(nodes(), [RACK], "topology", "Bad_Name")


def test_the_command_holds_no_formats_objects() -> None:
    source = Path(cli_topology.__file__).read_text()
    for api_version in ("topology.volcano.sh/", "scheduling.koordinator.sh/", "kueue.x-k8s.io/"):
        assert api_version not in source
    # The helpers the generators share are the core's, not the command's.
    assert short_names(["a.io/rack", "b.io/rack", "zone"]) == ["a-io-rack", "b-io-rack", "zone"]
    assert {f.__module__ for f in (koordinator.cluster_network_topology, volcano.hypernode_manifests,
                                   kai.topology_manifest)} == {koordinator.__name__, volcano.__name__, kai.__name__}
