"""``koordpy topology``: ``generate`` writes topology manifests from node labels, ``show`` draws the
trees koordpy builds (as text, or as one self-contained HTML page).

Belongs here: the commands' flags and input (the node labels, the level keys), picking the dialect
that writes the asked ``--format`` (each dialect writes its own topology objects,
``Dialect.manifests``), and drawing the trees. Reads its input through ``koordpy.cli.manifests``.
The heavy parts (the API models and pydantic, numpy, the core's cluster and dialects, the
simulator, the controller) are imported inside the functions that need them, so that ``simulate``
and ``run`` do not pay for them at start-up.
"""

from __future__ import annotations

import argparse
import html
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

import yaml

from koordpy.cli.manifests import UsageError, load_documents
from koordpy.core.topology_manifests import Generated, Unusable, natural
from koordpy.errors import BadInput
from koordpy.sim.errors import InputError

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from koordpy.api.objects import Node
    from koordpy.core.cluster import Cluster
    from koordpy.core.snapshot import Snapshot
    from koordpy.core.tree import ShownTree, TopologyTree

# Each is one dialect's ``manifest_format`` (tests/cli/test_topology.py holds them to the registry),
# listed here in the order the help shows so that start-up need not load the dialects.
FORMATS = ("hypernode", "cnt", "topology")
DEFAULT_FORMAT = FORMATS[0]  # the registry's default too (``koordpy.core.dialects.manifest_formats``)


GENERATE_PROG = "koordpy topology generate"
SHOW_PROG = "koordpy topology show"


class TopologyUsageError(UsageError):
    """Input that cannot give any topology (exit 2, one line)."""


class CannotWrite(BadInput):
    """``--html FILE`` cannot be written (exit 2); the path is printed as given."""

    fold = False


# -- generate ----------------------------------------------------------------------------


def parse_levels(text: str) -> list[str]:
    """``--levels``: label keys, top level first, each a valid label key and given once."""
    from koordpy.api.selectors import qualified_name_problem  # koordpy.api loads pydantic: paid where used

    keys = [k.strip() for k in text.split(",")]
    if not text.strip() or any(not k for k in keys):
        raise TopologyUsageError(f"--levels {text!r}: expected label keys separated by commas, "
                                 "top level first (e.g. topology.kubernetes.io/zone,example.com/rack)")
    for k in keys:
        problem = qualified_name_problem(k)
        if problem:
            raise TopologyUsageError(f"--levels: {problem}")
        if keys.count(k) > 1:
            raise TopologyUsageError(f"--levels: {k!r} is given {keys.count(k)} times")
    return keys


def nodes_from_documents(docs: Sequence[tuple[str, dict[str, Any]]]) -> list[Node]:
    """The Node objects among ``docs`` (other kinds are skipped), each parsed as the scheduler would."""
    # koordpy.api loads pydantic: paid where used, not at start-up.
    from koordpy.api.errors import ParseError
    from koordpy.api.objects import Node

    nodes: list[Node] = []
    seen: dict[str, str] = {}
    for source, raw in docs:
        if raw.get("kind") != "Node" or raw.get("apiVersion") != "v1":
            continue
        try:
            node = Node.from_raw(raw)
        except ParseError as exc:
            raise InputError(source, exc) from exc
        if node.name in seen:
            raise InputError(source, f"Node {node.name} is defined twice, first in {seen[node.name]}")
        seen[node.name] = source
        nodes.append(node)
    if not nodes:
        raise TopologyUsageError("no Node objects in the given files (topology generate reads node labels)")
    return nodes


def generate(nodes: Sequence[Node], keys: Sequence[str], fmt: str, name: str = "default") -> Generated:
    """The manifests of the dialect whose ``manifest_format`` is ``fmt``."""
    from koordpy.core.dialects import MANIFESTS  # the core: paid by generate only, not at start-up

    if not keys:
        raise TopologyUsageError("--levels: at least one label key is needed")
    dialect = next((d for d in MANIFESTS if d.manifest_format == fmt), None)
    if dialect is None:
        raise TopologyUsageError(f"unknown --format {fmt!r}; expected one of {', '.join(FORMATS)}")
    try:
        return dialect.manifests(nodes, keys, name)
    except Unusable as exc:  # the flag that gave what the dialect cannot use
        raise TopologyUsageError(f"--{exc.argument}: {exc}") from exc


def dump_documents(docs: Sequence[Mapping[str, Any]], out: TextIO) -> None:
    yaml.safe_dump_all(list(docs), out, sort_keys=False, default_flow_style=False, explicit_start=True)


def cmd_generate(args: argparse.Namespace) -> int:
    prog = GENERATE_PROG
    keys = parse_levels(args.levels)
    loaded = load_documents(args.file)
    nodes = nodes_from_documents(loaded.docs)
    result = generate(nodes, keys, args.format, args.name)
    for line in loaded.notes:
        print(f"{prog}: note: {line}", file=sys.stderr)
    for line in result.warnings:
        print(f"{prog}: warning: {line}", file=sys.stderr)
    dump_documents(result.documents, sys.stdout)
    return 0


# -- show --------------------------------------------------------------------------------


@dataclass
class TreeView:
    """One tree with what ``show`` prints per domain, every array in the tree's preorder."""

    key: str
    title: str
    tree: TopologyTree
    nodes: npt.NDArray[np.int64]  # nodes in the subtree
    free: npt.NDArray[np.int64]  # [domain, resource] free capacity of the subtree
    allocatable: npt.NDArray[np.int64]
    used: npt.NDArray[np.int64]
    problems: dict[str, list[str]] = field(default_factory=dict)
    ranked: bool = False  # each domain shown with its rank beside its layer (``ShownTree.ranked``)
    loose_said: bool = True  # the root says when it holds its nodes directly (``ShownTree.loose_said``)

    def occupancy(self, d: int) -> float:
        """Used over allocatable of the subtree's dominant resource (0 when it has nothing)."""
        alloc, used = self.allocatable[d], self.used[d]
        shares = [u / a for u, a in zip(used.tolist(), alloc.tolist(), strict=True) if a > 0]
        return max(shares, default=0.0)


@dataclass
class Shown:
    cluster: Cluster
    snapshot: Snapshot
    trees: list[TreeView]
    columns: list[int]  # resource indexes printed
    jobs: dict[int, dict[str, int]]  # node index -> job -> bound pods


def _subtree_sums(tree: TopologyTree, per_node: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Per domain, the sum of ``per_node`` rows over its subtree (preorder ranges are contiguous)."""
    import numpy as np  # paid by show only

    leaf = tree.domain_node >= 0
    rows = np.zeros((len(tree.order), per_node.shape[1]), dtype=np.int64)
    rows[leaf] = per_node[tree.domain_node[leaf]]
    cs = np.vstack([np.zeros((1, per_node.shape[1]), dtype=np.int64), np.cumsum(rows, axis=0)])
    return np.asarray(cs[tree.end] - cs[np.arange(len(tree.order))], dtype=np.int64)


def tree_view(cluster: Cluster, shown: ShownTree) -> TreeView:
    import numpy as np  # paid by show only

    tree = cluster.trees[shown.key]
    ones = np.ones((len(cluster.nodes), 1), dtype=np.int64)
    return TreeView(shown.key.text, shown.title, tree, _subtree_sums(tree, ones)[:, 0],
                    _subtree_sums(tree, cluster.free()), _subtree_sums(tree, cluster.allocatable),
                    _subtree_sums(tree, cluster.used), {k: list(v) for k, v in shown.problems.items()},
                    shown.ranked, shown.loose_said)


def build_views(snapshot: Snapshot, only: str | None = None) -> Shown:
    """The trees the snapshot's objects define, each dialect's in the registry's order, with the
    titles their dialects give them, or just ``only``."""
    # The core: paid by show only, not at start-up.
    from koordpy.api.objects import PODS
    from koordpy.core.cluster import UNBOUNDED, Cluster
    from koordpy.core.dialects import gang_member, shown_trees

    cluster = Cluster(snapshot)
    wanted = shown_trees(cluster.trees)
    if only is not None:
        keys = [w.key.text for w in wanted]
        picked = ([w for w in wanted if w.key.text == only] or [w for w in wanted if w.short and w.short == only])[:1]
        if not picked:
            raise TopologyUsageError(f"--tree {only!r}: no such tree; the input has "
                                     f"{', '.join(keys) if keys else 'no topology objects'}")
        wanted = picked
    total = cluster.allocatable.sum(axis=0)
    # A resource DRA serves on some node (``UNBOUNDED`` there) has no room to draw: its devices hold it.
    served = [bool((cluster.allocatable[:, i] >= UNBOUNDED).any()) for i in range(len(cluster.resources))]
    columns = [i for i, r in enumerate(cluster.resources) if r != PODS and total[i] > 0 and not served[i]]
    jobs: dict[int, dict[str, int]] = {}
    for pod in snapshot.pods:
        n = cluster.node_index.get(pod.node_name or "")
        if n is None or pod.terminal:
            continue
        job = gang_member(pod, snapshot) or f"{pod.namespace}/{pod.name}"
        per = jobs.setdefault(n, {})
        per[job] = per.get(job, 0) + 1
    return Shown(cluster, snapshot, [tree_view(cluster, w) for w in wanted], columns, jobs)


def _layer_text(view: TreeView, d: int) -> str:
    dom = view.tree.domain(d)
    if view.ranked:
        tier = int(view.tree.rank[d])
        return f"tier {tier}, {dom.layer}" if d and dom.layer != f"tier{tier}" else f"tier {tier}"
    return dom.layer


def _capacity_text(shown: Shown, free: npt.NDArray[np.int64], alloc: npt.NDArray[np.int64]) -> str:
    from koordpy.api.quantity import format_quantity  # pydantic: paid by show only

    parts = []
    for i in shown.columns:
        r = shown.cluster.resources[i]
        parts.append(f"{r} {format_quantity(r, int(free[i]))}/{format_quantity(r, int(alloc[i]))} free")
    return "  ".join(parts)


def _shown_domains(tree: TopologyTree, with_nodes: bool) -> list[int]:
    return [d for d in range(len(tree.order)) if with_nodes or tree.domain_node[d] < 0]


def _topology_kinds() -> str:
    """The kinds of the topology objects (those a topology source brings), as messages list them."""
    from koordpy.api.kinds import KINDS  # pydantic: paid by show only

    names = list(dict.fromkeys(k.kind for k in KINDS if k.source))
    return f"{', '.join(names[:-1])} or {names[-1]}" if len(names) > 1 else names[0]


def render_text(shown: Shown, out: TextIO, with_nodes: bool = False) -> None:
    if not shown.trees:
        out.write(f"no {_topology_kinds()} objects, nor PodGroups with a topology, in the input\n")
    for t, view in enumerate(shown.trees):
        if t:
            out.write("\n")
        tree = view.tree
        out.write(f"{view.key}: {view.title}\n")
        shown_ds = _shown_domains(tree, with_nodes)
        last_child: dict[int, int] = {}
        for d in shown_ds[1:]:
            last_child[int(tree.parent[d])] = d
        prefix: dict[int, str] = {0: ""}
        for d in shown_ds:
            line = _domain_line(shown, view, d)
            if d == 0:
                out.write(line + "\n")
                continue
            p = int(tree.parent[d])
            last = last_child[p] == d
            out.write(f"{prefix[p]}{'└── ' if last else '├── '}{line}\n")
            prefix[d] = prefix[p] + ("    " if last else "│   ")
        if view.problems:
            out.write("problems:\n")
            for name in sorted(view.problems, key=natural):
                for message in view.problems[name]:
                    out.write(f"  {name}: {message}\n")


def _domain_line(shown: Shown, view: TreeView, d: int) -> str:
    tree = view.tree
    n = int(tree.domain_node[d])
    capacity = _capacity_text(shown, view.free[d], view.allocatable[d])
    if n >= 0:
        jobs = shown.jobs.get(n, {})
        running = ("  " + ", ".join(f"{j} x{c}" for j, c in sorted(jobs.items()))) if jobs else ""
        return f"{tree.name(d)}  {capacity}{running}"
    count = int(view.nodes[d])
    text = f"{tree.name(d) or tree.domain(d).layer} ({_layer_text(view, d)})"
    if d == 0:
        text = f"{tree.domain(d).layer} ({_layer_text(view, d)})" if view.ranked else tree.domain(d).layer
    loose = ""
    if d == 0:
        direct = int(((tree.parent == 0) & (tree.domain_node >= 0)).sum())
        if direct and direct < count:
            loose = f" ({direct} in no domain)"
        elif direct and view.loose_said:
            loose = " (none in a domain)"
    return f"{text}  {count} node{'' if count == 1 else 's'}{loose}  {capacity}".rstrip()


# -- HTML --------------------------------------------------------------------------------

_WIDTH = 1100
_ROW = 34
_MAX_DRAWN_NODES = 600  # beyond this a node is under a pixel wide: the domains carry the picture
_MAX_JOBS = 12
_CSS = """
body{font:14px system-ui,sans-serif;margin:24px;color:#222}
h1{font-size:20px}h2{font-size:17px;margin-top:32px}
svg{max-width:100%;height:auto}svg text{font-size:11px;pointer-events:none}
rect.d{stroke:#fff;stroke-width:1}
table{border-collapse:collapse;margin-top:10px}td,th{padding:3px 10px;border-bottom:1px solid #ddd;text-align:left;
vertical-align:top}th{background:#f3f3f3}.sw{display:inline-block;width:22px;height:12px;margin-right:4px;
vertical-align:middle}.legend span.item{margin-right:14px}.problems{color:#a40000}
"""


def _colour(share: float) -> str:
    """Green when empty through yellow to red when full."""
    s = min(max(share, 0.0), 1.0)
    return f"hsl({round(120 * (1 - s))},70%,{round(78 - 18 * s)}%)"


def _jobs_under(shown: Shown, tree: TopologyTree, d: int) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in tree.subtree_nodes(d).tolist():
        for job, count in shown.jobs.get(int(n), {}).items():
            out[job] = out.get(job, 0) + count
    return out


def _jobs_text(jobs: Mapping[str, int]) -> str:
    items = [f"{j} \u00d7{c}" for j, c in sorted(jobs.items(), key=lambda kv: (-kv[1], kv[0]))]
    more = len(items) - _MAX_JOBS
    return ", ".join(items[:_MAX_JOBS]) + (f" and {more} more" if more > 0 else "")


def _svg(shown: Shown, view: TreeView) -> str:
    tree = view.tree
    draw_nodes = int(view.nodes[0]) <= _MAX_DRAWN_NODES
    total = max(int(view.nodes[0]), 1)
    unit = _WIDTH / total
    leaf = tree.domain_node >= 0
    # x: nodes before d in preorder; a domain spans its subtree's nodes (an empty one gets a sliver).
    before = [0] * (len(tree.order) + 1)
    for d in range(len(tree.order)):
        before[d + 1] = before[d] + int(leaf[d])
    depths = [int(x) for x in tree.depth.tolist()]
    rows = max((depths[d] for d in range(len(tree.order)) if draw_nodes or not leaf[d]), default=0) + 1
    parts = [f'<svg width="{_WIDTH}" height="{rows * _ROW}" '
             f'viewBox="0 0 {_WIDTH} {rows * _ROW}" role="img">']
    for d in range(len(tree.order)):
        if leaf[d] and not draw_nodes:
            continue
        x = before[d] * unit
        w = max(int(view.nodes[d]) * unit, 3.0)
        y = depths[d] * _ROW
        name = tree.name(d) or tree.domain(d).layer
        share = view.occupancy(d)
        tip = [f"{name} ({_layer_text(view, d)})" if not leaf[d] else f"node {name}",
               f"{int(view.nodes[d])} node{'' if int(view.nodes[d]) == 1 else 's'}, "
               f"{round(share * 100)}% used (dominant resource)",
               _capacity_text(shown, view.free[d], view.allocatable[d])]
        jobs = _jobs_under(shown, tree, d)
        if jobs:
            tip.append("jobs: " + _jobs_text(jobs))
        if name in view.problems and not leaf[d]:
            tip.extend(view.problems[name])
        parts.append(f'<g><title>{html.escape(chr(10).join(t for t in tip if t))}</title>'
                     f'<rect class="d" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{_ROW - 2}" '
                     f'fill="{_colour(share)}"/>')
        if w >= 7 * min(len(name), 4) + 6:
            fit = max(int((w - 6) // 7), 1)
            label = name if len(name) <= fit else name[: max(fit - 1, 1)] + "\u2026"
            parts.append(f'<text x="{x + 4:.1f}" y="{y + 20}">{html.escape(label)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def _table(shown: Shown, view: TreeView) -> str:
    tree = view.tree
    head = "<tr><th>domain</th><th>level</th><th>nodes</th><th>used</th><th>free / allocatable</th><th>jobs</th></tr>"
    rows = [head]
    for d in range(len(tree.order)):
        if tree.domain_node[d] >= 0:
            continue
        name = tree.name(d) or tree.domain(d).layer
        indent = "\u2003" * int(tree.depth[d])
        share = view.occupancy(d)
        rows.append(
            f'<tr><td>{indent}<span class="sw" style="background:{_colour(share)}"></span>{html.escape(name)}</td>'
            f"<td>{html.escape(_layer_text(view, d))}</td><td>{int(view.nodes[d])}</td><td>{round(share * 100)}%</td>"
            f"<td>{html.escape(_capacity_text(shown, view.free[d], view.allocatable[d]))}</td>"
            f"<td>{html.escape(_jobs_text(_jobs_under(shown, tree, d)))}</td></tr>")
    return "<table>" + "".join(rows) + "</table>"


def _node_table(shown: Shown) -> str:
    rows = ["<tr><th>node</th><th>jobs (bound pods)</th></tr>"]
    for n, node in enumerate(shown.cluster.nodes):
        jobs = shown.jobs.get(n)
        if jobs:
            rows.append(f"<tr><td>{html.escape(node.name)}</td><td>{html.escape(_jobs_text(jobs))}</td></tr>")
    return "<table>" + "".join(rows) + "</table>" if len(rows) > 1 else "<p>No pod is bound to a node.</p>"


def render_html(shown: Shown) -> str:
    legend = "".join(f'<span class="item"><span class="sw" style="background:{_colour(s / 4)}"></span>'
                     f"{25 * s}%</span>" for s in range(5))
    body = [f"<h1>koordpy topology: {len(shown.cluster.nodes)} nodes, {len(shown.trees)} "
            f"tree{'' if len(shown.trees) == 1 else 's'}</h1>",
            f'<p class="legend">Colour: share used of each domain\'s dominant resource (requests of bound pods '
            f"over allocatable). {legend}</p>"]
    if not shown.trees:
        body.append(f"<p>No {_topology_kinds()} objects in the input.</p>")
    for view in shown.trees:
        body.append(f"<h2>{html.escape(view.key)}: {html.escape(view.title)}</h2>")
        body.append(_svg(shown, view))
        if view.problems:
            items = "".join(f"<li>{html.escape(name)}: {html.escape(m)}</li>"
                            for name in sorted(view.problems, key=natural) for m in view.problems[name])
            body.append(f'<div class="problems"><b>Problems</b><ul>{items}</ul></div>')
        body.append(_table(shown, view))
    body.append("<h2>Jobs by node</h2>" + _node_table(shown))
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>koordpy topology</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


# -- the command -------------------------------------------------------------------------


def _live_documents(kubeconfig: str | None) -> list[tuple[str, dict[str, Any]]]:
    from koordpy.controller.listing import read_cluster  # the API client: only a live read pays for it

    try:
        return read_cluster(kubeconfig)
    except Exception as exc:  # no config, no API server, no permission: one line, not a traceback
        raise TopologyUsageError(f"cannot list the cluster: {type(exc).__name__}: {exc}") from exc


def cmd_show(args: argparse.Namespace) -> int:
    prog = SHOW_PROG
    notes: list[str] = []
    if args.file and args.kubeconfig:
        raise UsageError("give -f files or --kubeconfig, not both")
    if args.file:
        loaded = load_documents(args.file)
        docs, notes = loaded.docs, loaded.notes
    else:
        if args.kubeconfig and not os.path.exists(args.kubeconfig):
            raise TopologyUsageError(f"--kubeconfig {args.kubeconfig}: no such file")
        docs = _live_documents(args.kubeconfig)
    from koordpy.sim.simulator import World  # the core and numba: paid by show only

    world = World.from_objects(docs)
    shown = build_views(world.snapshot(frozenset({"koordpy"})), args.tree)
    for line in notes:
        print(f"{prog}: note: {line}", file=sys.stderr)
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(render_html(shown))
        except OSError as exc:
            raise CannotWrite(f"{args.html}: cannot write: {exc.strerror or exc}") from exc
        print(f"{prog}: wrote {args.html}", file=sys.stderr)
    else:
        render_text(shown, sys.stdout, args.nodes)
    return 0


GENERATE_HELP = """\
Writes topology manifests from the labels of the Node objects in the given files:
Volcano HyperNodes (default; tier 1 from the lowest key), a Koordinator
ClusterNetworkTopology, or a Kueue/KAI Topology. Names are derived from the label
values and are the same on every run.
"""

GENERATE_EPILOG = """\
examples:
  kubectl get nodes -o yaml > nodes.yaml
  koordpy topology generate --levels example.com/spine,example.com/rack -f nodes.yaml > hypernodes.yaml
  koordpy topology generate --levels example.com/spine,example.com/rack -f nodes.yaml --format cnt
  koordpy topology generate --levels example.com/rack -f nodes.yaml --format topology --name racks

exit status: 0 written (nodes missing a label are reported on stderr); 2 invalid input.
"""

SHOW_HELP = """\
Draws each topology tree koordpy builds from the objects (the ClusterNetworkTopology,
the HyperNodes, every Kueue/KAI Topology) with node counts and free capacity per domain,
and the HyperNode problems it found. --html writes one self-contained page instead.
"""

SHOW_EPILOG = """\
examples:
  koordpy topology show -f examples/spine-block
  koordpy topology show -f cluster.yaml --nodes --tree hypernodes
  koordpy topology show --kubeconfig ~/.kube/config --html topology.html
"""


def add_parser(sub: Any) -> None:
    """``koordpy topology ...`` under the main parser's subcommands."""
    raw = argparse.RawDescriptionHelpFormatter
    top = sub.add_parser("topology", help="draw the topology trees, or generate topology manifests from node labels",
                         description="Topology trees: `show` draws them, `generate` writes manifests.")
    cmds = top.add_subparsers(dest="topology_command", required=True, metavar="COMMAND", title="commands")
    gen = cmds.add_parser("generate", help="HyperNode, ClusterNetworkTopology or Topology manifests from node labels",
                          description=GENERATE_HELP, epilog=GENERATE_EPILOG, formatter_class=raw)
    gen.add_argument("--levels", required=True, metavar="KEY1,KEY2,...",
                     help="node label keys, top level first (like a Kueue Topology)")
    gen.add_argument("-f", "--file", action="append", required=True, metavar="PATH",
                     help="files, folders or - holding Node objects (other kinds are skipped); repeatable")
    gen.add_argument("--format", choices=FORMATS, default=DEFAULT_FORMAT,
                     help=f"what to write (default: {DEFAULT_FORMAT})")
    gen.add_argument("--name", default="default", help="the Topology's name (--format topology; default: default)")
    gen.set_defaults(func=cmd_generate, prog=GENERATE_PROG)
    show = cmds.add_parser("show", help="draw each topology tree with node counts and free capacity",
                           description=SHOW_HELP, epilog=SHOW_EPILOG, formatter_class=raw)
    show.add_argument("-f", "--file", action="append", metavar="PATH",
                      help="manifests as for `simulate`; without -f the cluster is read (--kubeconfig, "
                           "$KUBECONFIG, else in-cluster)")
    show.add_argument("--kubeconfig", metavar="PATH", help="read the live cluster with this kubeconfig")
    show.add_argument("--html", metavar="FILE", help="write one self-contained HTML page instead of text")
    show.add_argument("--tree", metavar="NAME",
                      help="only this tree: cnt, hypernodes, a Topology's name or label/KEY (a PodGroup's node labels)")
    show.add_argument("--nodes", action="store_true", help="list each node under its domain")
    show.set_defaults(func=cmd_show, prog=SHOW_PROG)
