"""``koordpy topology generate`` and ``show`` as a user runs them: manifests koordpy itself accepts,
stable names, the drawn trees with free capacity, HyperNode problems, the HTML page, bad input."""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy.api.kueue import Topology
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.api.volcano import HyperNode
from koordpy.cli.main import main
from koordpy.core.cluster import Cluster
from koordpy.sim.simulator import World
from tests.builders import SEED_12, SPINE_BLOCK_CNT, node, pod, spine_block_nodes

ROOT = Path(__file__).resolve().parents[2]
ZONE, RACK = "topology.kubernetes.io/zone", "example.com/rack"


def write(tmp_path: Path, name: str, objects: list[dict[str, Any]]) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def racks() -> list[dict[str, Any]]:
    """Rack r1 in two zones, r2 in one; R2 in zone-a clashes with r2 once lower-cased."""
    return [node("n1", labels={ZONE: "Zone_A", RACK: "r1"}), node("n2", labels={ZONE: "Zone_A", RACK: "r2"}),
            node("n3", labels={ZONE: "zone-b", RACK: "r1"}), node("n4", labels={ZONE: "zone-b", RACK: "r1"}),
            node("n5", labels={ZONE: "Zone_A", RACK: "R2"})]


def generated(capsys: pytest.CaptureFixture[str], path: str, *extra: str) -> list[dict[str, Any]]:
    code, out, err = cli(capsys, "topology", "generate", "--levels", f"{ZONE},{RACK}", "-f", path, *extra)
    assert code == 0, err
    return [d for d in yaml.safe_load_all(out) if d]


# -- generate ----------------------------------------------------------------------------


def test_generate_hypernodes_tiers_members_and_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = generated(capsys, write(tmp_path, "nodes.yaml", [*racks(), pod("p")]))
    hns = {d["metadata"]["name"]: HyperNode.from_raw(d) for d in docs}
    assert all(d["apiVersion"] == "topology.volcano.sh/v1alpha1" for d in docs)
    # r1 sits in two zones, so it takes its zone's name; r2 and R2 clash once lower-cased.
    assert {n: (h.tier, h.tier_name) for n, h in hns.items()} == {
        "zone-a": (2, "zone"), "zone-b": (2, "zone"),
        "zone-a-r1": (1, "rack"), "zone-b-r1": (1, "rack"), "r2": (1, "rack"), "r2-2": (1, "rack")}
    members = {n: [(m.type, m.selector.exact) for m in h.members] for n, h in hns.items()}
    assert members["zone-b-r1"] == [("Node", "n3"), ("Node", "n4")]
    assert members["zone-b"] == [("HyperNode", "zone-b-r1")]
    assert sorted(members["zone-a"]) == [("HyperNode", "r2"), ("HyperNode", "r2-2"), ("HyperNode", "zone-a-r1")]
    # R2 sorts before r2, so it keeps the plain name and r2 gets the suffix.
    assert members["r2"] == [("Node", "n5")] and members["r2-2"] == [("Node", "n2")]


def test_generated_hypernodes_build_a_clean_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = racks()
    docs = generated(capsys, write(tmp_path, "nodes.yaml", nodes))
    world = World.from_objects([(f"doc {i}", d) for i, d in enumerate([*nodes, *docs])])
    hn = Cluster(world.snapshot(frozenset({"koordpy"}))).trees.hypernode_tree()
    assert hn.problems == {}
    assert {d["metadata"]["name"]: hn.node_count(d["metadata"]["name"]) for d in docs} == {
        "zone-a": 3, "zone-b": 2, "zone-a-r1": 1, "zone-b-r1": 2, "r2": 1, "r2-2": 1}


def test_generate_names_are_stable_across_runs_and_input_order(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    nodes = racks()
    first = cli(capsys, "topology", "generate", "--levels", f"{ZONE},{RACK}", "-f",
                write(tmp_path, "a.yaml", nodes))
    shuffled = list(nodes)
    random.Random(7).shuffle(shuffled)
    assert shuffled != nodes
    again = cli(capsys, "topology", "generate", "--levels", f"{ZONE},{RACK}", "-f",
                write(tmp_path, "b.yaml", shuffled))
    assert first == again and first[0] == 0


def test_generate_names_are_valid_and_unique(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [node("a", labels={ZONE: "Z.1", RACK: "rack_1"}), node("b", labels={ZONE: "z-1", RACK: "RACK-1"}),
             node("c", labels={ZONE: "z-1", RACK: "rack-1"}), node("d", labels={ZONE: "z-1-2", RACK: "z-1"}),
             node("e", labels={ZONE: "__", RACK: "x" * 80})]
    docs = generated(capsys, write(tmp_path, "nodes.yaml", nodes))
    names = [d["metadata"]["name"] for d in docs]
    assert len(names) == len(set(names))
    for d in docs:
        HyperNode.from_raw(d)  # a name the API server would refuse fails here
        assert len(d["metadata"]["name"]) <= 63
    assert "tier2" in names  # "__" leaves nothing of a name: the tier stands in


def test_generate_leaves_out_nodes_missing_a_label(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = [node("n1", labels={ZONE: "a", RACK: "r1"}), node("no-zone", labels={RACK: "r9"}),
             node("no-rack", labels={ZONE: "a"})]
    code, out, err = cli(capsys, "topology", "generate", "--levels", f"{ZONE},{RACK}", "-f",
                         write(tmp_path, "nodes.yaml", nodes))
    assert code == 0
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(out) if d}
    assert set(docs) == {"a", "r1", "r9"}
    assert docs["a"]["spec"]["members"] == [{"type": "HyperNode", "selector": {"exactMatch": {"name": "r1"}}}]
    assert "no-rack" not in out  # without its rack it is in no tier at all
    assert "warning" in err and "no-zone" in err and "no-rack" in err
    assert "left out of tier 2 (zone) and above" in err


def test_generate_cluster_network_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    keys = "network.topology.nvidia.com/spine,network.topology.nvidia.com/block"
    path = write(tmp_path, "nodes.yaml", spine_block_nodes(SEED_12))
    code, out, err = cli(capsys, "topology", "generate", "--levels", keys, "-f", path, "--format", "cnt")
    assert code == 0, err
    (doc,) = [d for d in yaml.safe_load_all(out) if d]
    parsed = ClusterNetworkTopology.from_raw(doc)
    assert [(la.layer, la.parent, la.label_keys) for la in parsed.layers] == [
        ("SpineLayer", "", ("network.topology.nvidia.com/spine",)),
        ("BlockLayer", "SpineLayer", ("network.topology.nvidia.com/block",)),
        ("NodeTopologyLayer", "BlockLayer", ())]
    # The same as the hand-written seed topology: same tree over the seed's nodes.
    assert doc["spec"] == {**SPINE_BLOCK_CNT["spec"], "networkTopologySpec": [
        {**la, "parentTopologyLayer": la.get("parentTopologyLayer", "ClusterTopologyLayer")}
        for la in SPINE_BLOCK_CNT["spec"]["networkTopologySpec"]]}


def test_generate_kueue_topology(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "nodes.yaml", racks())
    docs = generated(capsys, path, "--format", "topology", "--name", "racks")
    (topo,) = [Topology.from_raw(d) for d in docs]
    assert (topo.name, topo.api_version, topo.levels) == (
        "racks", "kueue.x-k8s.io/v1beta1", (ZONE, RACK, "kubernetes.io/hostname"))
    code, out, _ = cli(capsys, "topology", "generate", "--levels", f"{RACK},kubernetes.io/hostname", "-f", path,
                       "--format", "topology")
    assert code == 0
    (doc,) = [d for d in yaml.safe_load_all(out) if d]
    assert doc["metadata"]["name"] == "default"
    assert [lv["nodeLabel"] for lv in doc["spec"]["levels"]] == [RACK, "kubernetes.io/hostname"]


def test_generate_topology_warns_about_nodes_without_the_hostname_label(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 17 item 6: a node without kubernetes.io/hostname is outside the Topology, so say so.
    nodes = racks()
    del nodes[0]["metadata"]["labels"]["kubernetes.io/hostname"]
    code, _, err = cli(capsys, "topology", "generate", "--levels", f"{ZONE},{RACK}", "-f",
                       write(tmp_path, "nodes.yaml", nodes), "--format", "topology")
    assert code == 0
    assert "no label kubernetes.io/hostname (n1)" in err and "outside this topology" in err


def test_generated_manifests_are_accepted_by_simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = write(tmp_path, "nodes.yaml", racks())
    for fmt in ("hypernode", "cnt", "topology"):
        docs = generated(capsys, nodes, "--format", fmt)
        manifests = write(tmp_path, f"{fmt}.yaml", docs)
        code, out, err = cli(capsys, "simulate", "-f", nodes, "-f", manifests)
        assert code == 0, (fmt, err)
        assert "0 bound, 0 pending" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--levels", ""], "expected label keys"),
    (["--levels", f"{ZONE},,{RACK}"], "expected label keys"),
    (["--levels", f"{ZONE},{ZONE}"], "given 2 times"),
    (["--levels", "bad key!"], "--levels"),
    (["--levels", f"kubernetes.io/hostname,{RACK}", "--format", "topology"], "only be the last"),
    (["--levels", RACK, "--format", "topology", "--name", "Not_A_Name"], "--name"),
])
def test_generate_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                message: str) -> None:
    code, out, err = cli(capsys, "topology", "generate", "-f", write(tmp_path, "n.yaml", racks()), *args)
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_generate_without_nodes_and_unknown_format(tmp_path: Path) -> None:
    only_pods = write(tmp_path, "pods.yaml", [pod("p")])
    for args, message in ((["-f", only_pods], "no Node objects"),
                          (["-f", write(tmp_path, "n.yaml", racks()), "--format", "yaml"], "invalid choice")):
        run = subprocess.run([sys.executable, "-m", "koordpy", "topology", "generate", "--levels", RACK, *args],
                             capture_output=True, text=True, cwd=ROOT, check=False)
        assert run.returncode == 2 and run.stdout == ""
        assert message in run.stderr and "Traceback" not in run.stderr


def test_generate_reports_a_bad_node_by_object_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = node("n1")
    bad["metadata"]["labels"] = ["not", "a", "map"]
    code, _, err = cli(capsys, "topology", "generate", "--levels", RACK, "-f", write(tmp_path, "n.yaml", [bad]))
    assert code == 2 and "n1" in err and "metadata.labels" in err and "Traceback" not in err


# -- show ----------------------------------------------------------------------------------

GPU = "nvidia.com/gpu"


def cnt_cluster() -> list[dict[str, Any]]:
    nodes = spine_block_nodes(SEED_12)
    for n in nodes:
        n["status"]["allocatable"][GPU] = "8" if n["metadata"]["name"] in ("node-0", "node-1") else "0"
    job = [pod(f"train-{i}", cpu="6", group="train", node_name=f"node-{i}") for i in range(2)]
    for p in job:
        p["spec"]["containers"][0]["resources"]["requests"][GPU] = "8"
        p["spec"]["containers"][0]["resources"]["limits"] = {GPU: "8"}
    return [*nodes, SPINE_BLOCK_CNT, *job, pod("lone", cpu="2", node_name="node-9")]


def test_show_draws_the_cnt_tree_with_free_capacity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, "topology", "show", "-f", write(tmp_path, "c.yaml", cnt_cluster()))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "cnt: ClusterNetworkTopology default"
    assert lines[1].startswith("ClusterTopologyLayer  12 nodes  cpu 82/96 free")
    assert lines[2] == ("├── spine-0 (SpineLayer)  5 nodes  cpu 28/40 free  memory 158Gi/160Gi free  "
                        "nvidia.com/gpu 0/16 free")
    assert lines[3].startswith("│   ├── block-0 (BlockLayer)  3 nodes  cpu 12/24 free")
    assert lines[4].startswith("│   └── block-1 (BlockLayer)  2 nodes  cpu 16/16 free")
    assert lines[-2].startswith("└── spine-2 (SpineLayer)  3 nodes  cpu 22/24 free")
    assert lines[-1].startswith("    └── block-4 (BlockLayer)  3 nodes  cpu 22/24 free")
    assert "node-0" not in out and "problems" not in out
    code, out, _ = cli(capsys, "topology", "show", "-f", write(tmp_path, "c.yaml", cnt_cluster()), "--nodes")
    assert "│   │   ├── node-0  cpu 2/8 free  memory 31Gi/32Gi free  nvidia.com/gpu 0/8 free  default/train x1" in out
    assert "        └── node-11  cpu 8/8 free" in out
    assert "default/lone x1" in out


def hypernode(name: str, tier: int, nodes: list[str] = (), members: list[str] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    ms = [{"type": "Node", "selector": {"exactMatch": {"name": n}}} for n in nodes]
    ms += [{"type": "HyperNode", "selector": {"exactMatch": {"name": m}}} for m in members]
    return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
            "spec": {"tier": tier, "tierName": f"t{tier}", "members": ms}}


def test_show_hypernodes_with_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    objects = [*(node(f"n{i}", cpu="4") for i in range(5)),
               hypernode("leaf-a", 1, nodes=["n0", "n1"]), hypernode("leaf-b", 1, nodes=["n1", "n2", "n3"]),
               hypernode("top", 2, members=["leaf-a", "leaf-b"])]
    code, out, err = cli(capsys, "topology", "show", "-f", write(tmp_path, "h.yaml", objects))
    assert code == 0, err
    assert out.startswith("hypernodes: Volcano HyperNodes (3)\n")
    assert "<cluster-top-hypernode> (tier 3)  5 nodes (1 in no domain)  cpu 20/20 free" in out
    assert "└── top (tier 2, t2)  4 nodes  cpu 16/16 free" in out
    assert "    ├── leaf-a (tier 1, t1)" in out and "    └── leaf-b (tier 1, t1)" in out
    problems = out[out.index("problems:"):]
    assert "leaf-a: node n1 is claimed by HyperNodes leaf-a, leaf-b of tier 1" in problems
    assert "leaf-b: node n1 is claimed by HyperNodes leaf-a, leaf-b of tier 1" in problems
    assert "cnt:" not in out  # no ClusterNetworkTopology, no cnt tree


def two_topologies() -> list[dict[str, Any]]:
    nodes = [node(f"g{i}", cpu="16", labels={ZONE: f"z{i % 2}", RACK: f"r{i % 3}"}) for i in range(6)]
    topo = [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "Topology", "metadata": {"name": "racks"},
             "spec": {"levels": [{"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}},
            {"apiVersion": "kai.scheduler/v1alpha1", "kind": "Topology", "metadata": {"name": "zones"},
             "spec": {"levels": [{"nodeLabel": ZONE}, {"nodeLabel": RACK}]}}]
    return [*nodes, *topo, pod("w", cpu="4", node_name="g0")]


def test_show_two_topologies_and_pick_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "t.yaml", two_topologies())
    code, out, err = cli(capsys, "topology", "show", "-f", path)
    assert code == 0, err
    first, second = out.split("\n\n")
    assert first.splitlines()[0] == "topology/racks: Topology racks (kueue.x-k8s.io/v1beta1)"
    assert "├── r0 (example.com/rack)  2 nodes  cpu 28/32 free" in first
    assert "└── r2 (example.com/rack)  2 nodes  cpu 32/32 free" in first
    assert second.splitlines()[0] == "topology/zones: Topology zones (kai.scheduler/v1alpha1)"
    assert "├── z0 (topology.kubernetes.io/zone)  3 nodes  cpu 44/48 free" in second
    assert "│   ├── r0 (example.com/rack)  1 node  cpu 12/16 free" in second
    code, out, _ = cli(capsys, "topology", "show", "-f", path, "--tree", "zones")
    assert code == 0 and out.startswith("topology/zones") and "topology/racks" not in out
    code, out, err = cli(capsys, "topology", "show", "-f", path, "--tree", "cnt")
    assert code == 2 and out == "" and "topology/racks, topology/zones" in err


def test_show_draws_the_trees_with_the_titles_their_dialects_give(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The command knows no dialect (issue 32 item 1): what it draws, under which title, with which
    problems and by which short name ``--tree`` takes it, is each dialect's ``shown_trees``."""
    from koordpy.core.dialects import kai
    from koordpy.core.tree import ShownTree

    def shown(self: object, trees: Any) -> list[ShownTree]:
        return [ShownTree(kai.tree_key("zones"), "the zones, as the dialect says", short="z",
                          problems={"z0": ["a problem of the dialect's"]})]

    monkeypatch.setattr(type(kai.DIALECT), "shown_trees", shown)
    path = write(tmp_path, "t.yaml", two_topologies())
    code, out, err = cli(capsys, "topology", "show", "-f", path)
    assert code == 0, err
    assert out.splitlines()[0] == "topology/zones: the zones, as the dialect says"
    assert "topology/racks" not in out and "  z0: a problem of the dialect's" in out
    code, out, _ = cli(capsys, "topology", "show", "-f", path, "--tree", "z")
    assert code == 0 and out.startswith("topology/zones: the zones")


def test_show_html_is_one_self_contained_page(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The parser takes any label value, so a domain name can hold what HTML must escape.
    objects = [*cnt_cluster()[:-1], node("odd", labels={RACK: "r<&>"}),
               hypernode("hn-1", 1, nodes=["node-0", "node-1"]), hypernode("hn-2", 2, members=["hn-1"]),
               *two_topologies()[-3:-1]]
    page = tmp_path / "out" / "topology.html"
    page.parent.mkdir()
    code, out, err = cli(capsys, "topology", "show", "-f", write(tmp_path, "all.yaml", objects), "--html", str(page))
    assert code == 0, err
    assert out == ""
    text = page.read_text()
    assert text.count("<svg") == 4  # cnt, hypernodes, two Topologies
    assert "http" not in text and "<script" not in text
    names = ["spine-0", "spine-1", "spine-2", *(f"block-{i}" for i in range(5)), "hn-1", "hn-2", "racks", "zones"]
    assert all(n in text for n in names)
    assert "default/train" in text and "r&lt;&amp;&gt;" in text and "r<&>" not in text
    code, _, err = cli(capsys, "topology", "show", "-f", write(tmp_path, "all.yaml", objects),
                       "--html", str(tmp_path / "missing" / "x.html"))
    assert code == 2 and "cannot write" in err


def test_show_bad_input_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = hypernode("x", 1, nodes=["n0"])
    bad["spec"]["members"] = [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n(?=0)"}}}]  # not RE2
    code, out, err = cli(capsys, "topology", "show", "-f", write(tmp_path, "b.yaml", [node("n0"), bad]))
    assert code == 2 and out == "" and "HyperNode x" in err and "spec.members[0].selector.regexMatch.pattern" in err
    code, _, err = cli(capsys, "topology", "show", "-f", str(tmp_path / "b.yaml"), "--kubeconfig", "k")
    assert code == 2 and "not both" in err
    code, _, err = cli(capsys, "topology", "show", "--kubeconfig", str(tmp_path / "nope"))
    assert code == 2 and "no such file" in err


def test_live_listing_stamps_kinds_and_skips_missing_crds(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """Without a cluster: the LIST calls are faked, the rest (kinds, 404s, World) is the real path."""
    from kubernetes_asyncio.client.exceptions import ApiException

    import koordpy.controller.listing as listing

    class FakeApi:
        async def close(self) -> None:
            pass

    async def fake_client(kubeconfig: str | None, qps_unlimited: bool = True) -> FakeApi:
        return FakeApi()

    served = {"nodes": [{k: v for k, v in n.items() if k not in ("apiVersion", "kind")}
                        for n in spine_block_nodes(SEED_12)],
              "clusternetworktopologies": [{"metadata": SPINE_BLOCK_CNT["metadata"], "spec": SPINE_BLOCK_CNT["spec"]}]}

    async def fake_list(api: object, group: str, version: str, plural: str) -> tuple[list[dict[str, Any]], int]:
        if group not in ("", "scheduling.k8s.io", "scheduling.koordinator.sh"):
            raise ApiException(status=404)
        return served.get(plural, []), 1

    monkeypatch.setattr(listing, "api_client", fake_client)
    monkeypatch.setattr(listing, "list_objects", fake_list)
    code, out, err = cli(capsys, "topology", "show")
    assert code == 0, err
    assert out.splitlines()[1].startswith("ClusterTopologyLayer  12 nodes  cpu 96/96 free")
    assert "└── spine-2 (SpineLayer)  3 nodes" in out


def test_show_lists_the_node_label_trees_workload_podgroups_use(capsys: pytest.CaptureFixture[str]) -> None:
    example = str(Path(__file__).resolve().parents[2] / "examples" / "workload-api")
    code, out, err = cli(capsys, "topology", "show", "-f", example)
    assert code == 0, err
    assert ("label/example.com/block>topology.kubernetes.io/rack: node labels, for PodGroup default/tune "
            "(scheduling.k8s.io)\n") in out
    assert "└── b1 (example.com/block)  8 nodes" in out
    assert "    ├── r1 (topology.kubernetes.io/rack)  2 nodes" in out
    assert "label/topology.kubernetes.io/rack: node labels, for PodGroup default/train (scheduling.k8s.io)\n" in out
    # A CompositePodGroup's tree (its key above its children's), listed once, not its children's keys.
    assert ("labels/topology.kubernetes.io/rack,kubernetes.io/hostname: node labels, for CompositePodGroup "
            "default/serve-replicas (scheduling.k8s.io)\n") in out
    assert "label/kubernetes.io/hostname" not in out
    code, out, err = cli(capsys, "topology", "show", "-f", example, "--tree",
                         "label/example.com/block>topology.kubernetes.io/rack")
    assert code == 0, err
    assert out.count("node labels, for PodGroup") == 1


def test_show_draws_no_room_for_a_resource_dra_serves(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Issue 30: where no node lists nvidia.com/gpu and a DeviceClass backs it, its devices hold it; the
    # fit's unbounded room for it is not drawn as capacity.
    objects = [o for o in cnt_cluster() if o["kind"] != "Node"]
    objects += [node(f"node-{i}", labels={"network.topology.nvidia.com/spine": f"spine-{i // 5}",
                                          "network.topology.nvidia.com/block": f"block-{i // 3}"}) for i in range(12)]
    objects.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                    "spec": {"extendedResourceName": GPU}})
    code, out, err = cli(capsys, "topology", "show", "-f", write(tmp_path, "c.yaml", objects))
    assert code == 0, err
    assert GPU not in out and "1099511627776" not in out, out
