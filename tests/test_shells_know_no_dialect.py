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
from koordpy.core.dialects import DIALECTS

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

_IN_TEXT = re.compile("|".join([
    *(rf"\b{re.escape(k)}\b" for k in KIND_NAMES),
    *(re.escape(g) for g in GROUPS),
    *(rf"(?i:\b{re.escape(n)}\b)" for n in NAMES),
    *(rf"^{re.escape(s)}(\.|$)" for s in STORES),
]))
_IN_NAME = re.compile("|".join([*(re.escape(s) for s in STORES if s not in ("topology", "topologies")),
                                *(re.escape(k.lower()) for k in KIND_NAMES if k != "Topology"),
                                *(re.escape(n) for n in NAMES)]), re.IGNORECASE)

# The help texts the CLI's parser is built with: ``koordpy --help`` and each command's parser are
# made before any command runs, without the core or pydantic (tests/cli/test_main.py: start-up stays
# light), so they cannot ask the registries. They show a user's command lines and list the kinds a
# user finds in their cluster; the choices among them are held to the registries (FORMATS in
# tests/cli/test_topology.py, the topology sources in test_the_cli_choices_are_the_registries below).
_HELP = "help text the parser is built with at start-up, before the core is loaded"
# (file, part of the token's text) -> why the word stays.
ALLOWED: dict[tuple[str, str], str] = {
    # The generic concepts, of any dialect.
    ("koordpy/controller/metrics.py", "Topology objects in the cache by source"):
        "the topology objects of every source (the sources and their kinds come from the registry)",
    ("koordpy/sim/simulator.py", '"podgroups"'):
        "the simulate JSON's section for the objects that declare gangs, of every dialect",
    ("koordpy/cli/explain.py", "Topology    {t.source}"): "explain's row for a job's topology ask, of any dialect",
    ("koordpy/cli/explain.py", "explain_podgroup"): "`koordpy explain podgroup NAME` names a gang of any dialect",
    ("koordpy/cli/explain.py", "PodGroup (or gang)"): "`koordpy explain podgroup NAME` names a gang of any dialect",
    ("koordpy/cli/topology.py", '"topology"'): "the command's name (`koordpy topology`), and a --format choice",
    # Help texts.
    ("koordpy/cli/explain.py", "Why is my job stuck? Explains why a pod or a PodGroup waits"): _HELP,
    ("koordpy/cli/explain.py", "koordpy explain podgroup default/train"): _HELP,
    ("koordpy/cli/explain.py", "why a pod or PodGroup waits, or where it went"): _HELP,
    ("koordpy/cli/run.py", "Runs as a scheduler in a cluster"): _HELP,
    ("koordpy/cli/run.py", '"koordinator"'): _HELP + " (--topology-source's choices)",
    ("koordpy/cli/run.py", '"volcano"'): _HELP + " (--topology-source's choices)",
    ("koordpy/cli/run.py", '"kueue"'): _HELP + " (--topology-source's choices)",
    ("koordpy/cli/run.py", "watch this source of network topology"): _HELP,
    ("koordpy/cli/run.py", "(HyperNode), kueue (Kueue/KAI Topology)"): _HELP,
    ("koordpy/cli/simulate.py", "# what if: replay a live cluster"): _HELP,
    ("koordpy/cli/topology.py", "Writes topology manifests from the labels"): _HELP,
    ("koordpy/cli/topology.py", "Draws each topology tree koordpy builds"): _HELP,
    ("koordpy/cli/topology.py", "Topology trees: `show` draws them"): _HELP,
    ("koordpy/cli/topology.py", "HyperNode, ClusterNetworkTopology or Topology manifests"): _HELP,
    ("koordpy/cli/topology.py", "like a Kueue Topology"): _HELP,
    ("koordpy/cli/topology.py", "the Topology's name (--format topology"): _HELP,
    ("koordpy/cli/topology.py", "only this tree: cnt, hypernodes"): _HELP,
}


def _docstring_lines(tree: ast.AST) -> set[int]:
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                out.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return out


def spelled(path: Path) -> Iterator[tuple[int, str]]:
    """(line, token) of each code token of ``path`` that spells a dialect."""
    source = path.read_text()
    docs = _docstring_lines(ast.parse(source))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.start[0] in docs:
            continue
        if tok.type == tokenize.STRING:
            body = tok.string.lstrip("rbfuRBFU")  # its text as written, f-strings' fields included
            quote = body[:3] if body[:3] in ('"""', "'''") else body[:1]
            if _IN_TEXT.search(body[len(quote):-len(quote)]):
                yield tok.start[0], tok.string
        elif tok.type == tokenize.NAME and _IN_NAME.search(tok.string):
            yield tok.start[0], tok.string


def _found() -> list[str]:
    out = []
    for package in SHELLS:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            for line, token in spelled(path):
                if not any(rel == f and part in token for (f, part) in ALLOWED):
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
    assert [line for line, _ in spelled(code)] == [5, 6, 7, 7, 7]


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
    for (f, part) in ALLOWED:
        assert any(part in token for _, token in spelled(ROOT / f)), (f, part)
