"""Issue 32, item 1: the shells (``koordpy.controller``, ``koordpy.sim``, ``koordpy.cli``) spell no
dialect in code. Their code lines (comments and docstrings may name anything) hold none of the
words the registries list for the dialects: the kinds they read and the cache's names for them,
their API groups (which their annotations are prefixed with), the dialects' names and their
topology sources, and the stores their objects are filed in. What a shell needs of a dialect it
asks the registries (``koordpy.api.kinds``, ``koordpy.core.dialects``). The few words left are the
generic concepts a user types or reads for a gang of any dialect (``explain podgroup NAME``), each
allowed below with the reason."""

from __future__ import annotations

import argparse
import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

from koordpy.api.kinds import KINDS
from koordpy.core.decisions import GangStatus
from koordpy.core.dialects import DIALECTS, MANIFESTS, STATUSES, kai, koordinator, upstream, volcano
from koordpy.sim.simulator import World, simulate
from tests.builders import SPINE_BLOCK_CNT, node, pod, podgroup
from tests.controller.test_topology_status_writer import hypernode

ROOT = Path(__file__).resolve().parents[1]
SHELLS = ("koordpy/controller", "koordpy/sim", "koordpy/cli")
# The kinds only dialects read (owners, read by KAI for implicit groups, are everyone's), and the
# gang kinds (a CompositePodGroup declares a gang of its children).
_ROLES = {r for d in DIALECTS for r in d.roles} - {"owner"}
DIALECT_KINDS = [k for k in KINDS if k.role in _ROLES or k.gang]
KIND_NAMES = sorted({k.kind for k in DIALECT_KINDS} | {k.label for k in DIALECT_KINDS})
GROUPS = sorted({k.group for k in DIALECT_KINDS})
NAMES = sorted({d.name for d in DIALECTS} | {k.source for k in DIALECT_KINDS if k.source}
               | {g.split(".")[0] for g in GROUPS if g.split(".")[0] not in ("scheduling", "topology")})
STORES = sorted({k.store for k in DIALECT_KINDS})
# The dialects' roles of their kinds, their manifest formats and the text of their tree keys (the
# parts a dialect spells; "nodes" and a name given to a tree are anyone's).
_PLACEHOLDER = "PLACEHOLDER"
_TREE_TEXTS = {koordinator.TREE.text, volcano.TREE.text, kai.tree_key(_PLACEHOLDER).text,
               upstream.tree_key(_PLACEHOLDER).text, upstream.levels_key([_PLACEHOLDER]).text}
CODES = sorted(({k.role for k in DIALECT_KINDS} | {d.manifest_format for d in MANIFESTS}
                | {t.replace(_PLACEHOLDER, "") for t in _TREE_TEXTS}) - {"nodes"})
# The Event reasons told about their objects.
REASONS = sorted({why for d in STATUSES for why in d.invalid_reasons.values()})
# The generic words of a status (a pod has a phase and conditions too; a gang's members are
# scheduled, running, ...): not a dialect's.
_GENERIC_FIELDS = {"phase", "scheduled", "running", "succeeded", "failed", "conditions"}


def _status_fields() -> set[str]:
    """The status fields the dialects write or report: each gang status value's, and what a world
    with each dialect's objects reports (its gang objects' fields, its topology objects' statuses)."""
    values: list[GangStatus] = [koordinator.PodGroupGangStatus("Pending", 0, 0, 0, 0, 1.0),
                                volcano.VolcanoGangStatus("Pending", 0, 0, 0), upstream.GroupStatus(())]
    out = {name for v in values for name in v.wire()}
    objects = [node("n0", labels={"example.com/rack": "r0"}), SPINE_BLOCK_CNT, hypernode("h0", 1, ["n0"]),
               podgroup("g", 1), pod("g-0", group="g")]
    ran = simulate(World.from_objects([("world.yaml", o) for o in objects]))
    out |= {name for shown in ran.groups.values() for name in shown}
    out |= {name for st in ran.statuses for name in (*st.fields, *st.shown)}
    return out - _GENERIC_FIELDS


FIELDS = sorted(_status_fields())


def _word(text: str) -> str:
    # "topology" (a role and a format) is also the plain word: only the whole string is one of those.
    return rf"^{re.escape(text)}$" if text == "topology" else rf"(?<![\w-]){re.escape(text)}(?![\w-])"


_IN_TEXT = re.compile("|".join([
    *(rf"\b{re.escape(k)}\b" for k in KIND_NAMES),
    *(re.escape(g) for g in GROUPS),
    *(rf"(?i:\b{re.escape(n)}\b)" for n in NAMES),
    *(rf"^{re.escape(s)}(\.|$)" for s in STORES),
    *(_word(c) if not c.endswith("/") else rf"(?<![\w-]){re.escape(c)}" for c in CODES),
    *(rf"\b{re.escape(r)}\b" for r in REASONS),
    *(rf"\b{re.escape(f)}\b" for f in FIELDS),
]))
_IN_NAME = re.compile("|".join([*(re.escape(s) for s in STORES if s not in ("topology", "topologies")),
                                # Topology and KAI's Queue are also plain words (a tree, the scheduling queue)
                                *(re.escape(k.lower()) for k in KIND_NAMES if k not in ("Topology", "Queue")),
                                *(re.escape(n) for n in NAMES)]), re.IGNORECASE)

# The help texts the CLI's parser is built with: ``koordpy --help`` and each command's parser are
# made before any command runs, without the core or pydantic (tests/cli/test_main.py: start-up stays
# light), so they cannot ask the registries. They show a user's command lines and list the kinds a
# user finds in their cluster; the choices among them are held to the registries (FORMATS in
# tests/core/test_dialect_manifests.py, the topology sources in test_the_cli_choices_are_the_registries below).
_HELP = "help text the parser is built with at start-up, before the core is loaded"
_EXPLAIN = "`koordpy explain podgroup NAME` names a gang of any dialect: the generic CLI word"
# (file, the stripped text of the one line allowed) -> why the words on it stay. A line of that text
# written a second time in the file, or any other line, is reported.
ALLOWED: dict[tuple[str, str], str] = {
    # The generic concepts, of any dialect.
    ("koordpy/controller/metrics.py", '"koordpy_topology_objects", "Topology objects in the cache by source ("'):
        "the topology objects of every source (the sources and their kinds come from the registry)",
    ("koordpy/sim/simulator.py", '"podgroups": self.groups,'):
        "the simulate JSON's section for the objects that declare gangs, of every dialect",
    ("koordpy/cli/explain.py", 'TARGET_KINDS = ("pod", "podgroup")'): _EXPLAIN,
    ("koordpy/cli/explain.py", 'raise UsageError(f"{kind!r}: expected pod or podgroup before {key}")'): _EXPLAIN,
    ("koordpy/cli/explain.py",
     'raise UsageError(f"expected [pod|podgroup] [NAMESPACE/]NAME, got {\' \'.join(words)!r}")'): _EXPLAIN,
    ("koordpy/cli/explain.py", 'if kind == "podgroup" and len(parts) >= 3 and all(parts):'): _EXPLAIN,
    ("koordpy/cli/explain.py",
     'shape = "NAMESPACE/NAME or NAMESPACE/KIND/NAME" if kind == "podgroup" else "NAMESPACE/NAME"'): _EXPLAIN,
    ("koordpy/cli/explain.py", 'w(f"Topology    {t.source}: required {\'; \'.join(t.required) or \'-\'}; "'):
        "explain's row for a job's topology ask, of any dialect",
    ("koordpy/cli/explain.py", "from koordpy.core.explain import explain_pod, explain_podgroup"): _EXPLAIN,
    ("koordpy/cli/explain.py",
     "exp = explain_podgroup(snapshot, state, now, key)  # AmbiguousGang: a short name several groups share"):
        _EXPLAIN,
    ("koordpy/cli/explain.py", 'what = "pod" if kind == "pod" else "PodGroup (or gang)"'): _EXPLAIN,
    ("koordpy/cli/topology.py",
     'top = sub.add_parser("topology", help="draw the topology trees, or generate topology manifests '
     'from node labels",'):
        "the command's name (`koordpy topology`)",
    # Help texts.
    ("koordpy/cli/explain.py",
     'USAGE = ("koordpy explain [pod|podgroup] [NAMESPACE/][KIND/]NAME [-n NAMESPACE] [-f PATH]... '
     '[--kubeconfig PATH]\\n"'):
        _HELP,
    ("koordpy/cli/explain.py", 'HELP = """\\'): _HELP,
    ("koordpy/cli/explain.py", 'EPILOG = """\\'): _HELP,
    ("koordpy/cli/explain.py",
     'cmd = sub.add_parser("explain", help="why is my job stuck? why a pod or PodGroup waits, or where it went",'):
        _HELP,
    ("koordpy/cli/explain.py",
     'help="NAMESPACE/NAME of a pod, `pod NAMESPACE/NAME` or `podgroup NAMESPACE/NAME`; a bare "'): _HELP,
    ("koordpy/cli/explain.py",
     '"owner\'s pods is `podgroup NAMESPACE/KIND/NAME` as messages name it (or NAMESPACE/NAME "'): _HELP,
    ("koordpy/cli/run.py", 'RUN_HELP = """\\'): _HELP,
    ("koordpy/cli/run.py", 'choices=("koordinator", "volcano", "kueue"),'): _HELP + " (--topology-source's choices)",
    ("koordpy/cli/run.py",
     'help="watch this source of network topology: koordinator (ClusterNetworkTopology), volcano "'): _HELP,
    ("koordpy/cli/run.py", '"(HyperNode), kueue (Kueue/KAI Topology); repeatable (default: all three)")'): _HELP,
    ("koordpy/cli/simulate.py", 'SIMULATE_EPILOG = """\\'): _HELP,
    ("koordpy/cli/topology.py", 'FORMATS = ("hypernode", "cnt", "topology")'): _HELP + " (--format's choices)",
    ("koordpy/cli/topology.py", 'GENERATE_HELP = """\\'): _HELP,
    ("koordpy/cli/topology.py", 'GENERATE_EPILOG = """\\'): _HELP,
    ("koordpy/cli/topology.py", 'SHOW_HELP = """\\'): _HELP,
    ("koordpy/cli/topology.py", 'SHOW_EPILOG = """\\'): _HELP,
    ("koordpy/cli/topology.py", 'description="Topology trees: `show` draws them, `generate` writes manifests.")'):
        _HELP,
    ("koordpy/cli/topology.py",
     'gen = cmds.add_parser("generate", help="HyperNode, ClusterNetworkTopology or Topology manifests '
     'from node labels",'):
        _HELP,
    ("koordpy/cli/topology.py", 'help="node label keys, top level first (like a Kueue Topology)")'): _HELP,
    ("koordpy/cli/topology.py",
     'gen.add_argument("--name", default="default", help="the Topology\'s name (--format topology; '
     'default: default)")'):
        _HELP,
    ("koordpy/cli/topology.py",
     'help="only this tree: cnt, hypernodes, a Topology\'s name or label/KEY (a PodGroup\'s node labels)")'): _HELP,
}


def _docstring_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for item in ast.walk(tree):
        if isinstance(item, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and item.body:
            first = item.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return out


def spelled(path: Path) -> Iterator[tuple[int, str, str]]:
    """(line, token, the line's stripped text) of each code token of ``path`` that spells a dialect
    (a token over several lines: its first line)."""
    source = path.read_text()
    lines = source.splitlines()
    docs = _docstring_lines(ast.parse(source))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.start[0] in docs:
            continue
        found = False
        if tok.type == tokenize.STRING:
            body = tok.string.lstrip("rbfuRBFU")  # its text as written, f-strings' fields included
            quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
            found = bool(_IN_TEXT.search(body[len(quote):-len(quote)]))
        elif tok.type == tokenize.NAME:
            found = bool(_IN_NAME.search(tok.string))
        if found:
            yield tok.start[0], tok.string, lines[tok.start[0] - 1].strip()


def _found() -> list[str]:
    """Each line that spells a dialect and is not allowed (an allowance covers one line of its text
    in its file: the same line written again elsewhere in the file is reported)."""
    return [found for package in SHELLS for path in sorted((ROOT / package).rglob("*.py"))
            for found in _found_in(str(path.relative_to(ROOT)), path)]


def _found_in(rel: str, path: Path) -> list[str]:
    """``_found`` of one file, ``path``, allowed as the file ``rel``."""
    out = []
    seen: dict[str, int] = {}
    for line, token, text in spelled(path):
        if (rel, text) in ALLOWED and seen.setdefault(text, line) == line:
            continue
        out.append(f"{rel}:{line}: {token[:80]}")
    return out


def test_the_scan_knows_the_dialects_words() -> None:
    assert {"PodGroup", "HyperNode", "ClusterNetworkTopology", "Topology"} <= set(KIND_NAMES)
    assert {"scheduling.sigs.k8s.io", "scheduling.volcano.sh", "kai.scheduler", "scheduling.k8s.io",
            "kueue.x-k8s.io"} <= set(GROUPS)
    assert {"koordinator", "volcano", "kai", "kueue"} <= set(NAMES)


def test_the_scan_finds_a_dialect_in_code_and_not_in_comments(tmp_path: Path) -> None:
    code = tmp_path / "shell.py"
    code.write_text('''"""A docstring may name a HyperNode."""
# So may a comment: scheduling.volcano.sh.
def f(world):
    """And a function's docstring: ClusterNetworkTopology."""
    kind = "HyperNode"
    group = f"podgroups.{world}"
    return world.volcano_podgroups, "gang.scheduling.koordinator.sh/name", "the Volcano way"
''')
    assert [line for line, _, _ in spelled(code)] == [5, 6, 7, 7, 7]


def test_the_cli_choices_are_the_registries() -> None:
    """``--topology-source`` is spelled in the CLI (its parser is built at start-up): its choices are
    the registries' sources, in their order."""
    from koordpy.cli import run
    from koordpy.core.dialects import TOPOLOGY_SOURCES

    parser = argparse.ArgumentParser()
    run.add_parser(parser.add_subparsers())
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["run"]
    choices = next(a.choices for a in sub._actions if "--topology-source" in a.option_strings)
    assert list(choices or ()) == list(TOPOLOGY_SOURCES) == list(dict.fromkeys(k.source for k in KINDS if k.source))


def test_the_shells_spell_no_dialect_in_code() -> None:
    assert _found() == []


def test_each_allowed_word_is_still_there() -> None:
    """An allowance for a word the code no longer has is dropped, not kept to hide the next one."""
    for (f, text) in ALLOWED:
        assert any(found == text for _, _, found in spelled(ROOT / f)), (f, text)


def test_the_scan_knows_the_words_of_fields_codes_and_reasons() -> None:
    """The words the review found the scan blind to come from the registries."""
    assert {"detailStatus", "nodeCount", "scheduleStartTime", "minMember"} <= set(FIELDS)
    assert {"hypernode", "cnt", "workload-podgroup", "composite-podgroup", "podgroup", "topology"} <= set(CODES)
    assert "InvalidMembers" in REASONS


def test_an_allowance_covers_its_line_only(tmp_path: Path) -> None:
    """An allowed word written on a new line of the same file is reported, as is the allowed line
    written a second time (a new ``world.stores["podgroups"]`` in the simulator, say)."""
    simulator = (ROOT / "koordpy/sim/simulator.py").read_text()
    assert _found_in("koordpy/sim/simulator.py", ROOT / "koordpy/sim/simulator.py") == []
    for added in ('_GANGS = world.stores["podgroups"]', '_SHOWN = {"podgroups": self.groups,\n}',
                  'NODES = "nodeCount"', 'REASON = "InvalidMembers"', 'FORMAT = "cnt"'):
        copy = tmp_path / "simulator.py"
        copy.write_text(simulator + "\n" + added + "\n")
        assert len(_found_in("koordpy/sim/simulator.py", copy)) == 1, added
