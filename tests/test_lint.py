"""The project's gates: mypy --strict and ruff stay clean, the layering contract (`.importlinter`)
holds, no module imports itself back through others, and the core does no I/O."""

import ast
import subprocess
import sys
from pathlib import Path

import grimp
import networkx as nx

ROOT = Path(__file__).resolve().parent.parent
IO_MODULES = {"kopf", "kubernetes_asyncio", "asyncio", "aiohttp", "socket", "subprocess"}
PURE_PACKAGES = ["koordpy/api", "koordpy/core", "koordpy/kernels", "koordpy/sim"]


def test_ruff_clean() -> None:
    run = subprocess.run([sys.executable, "-m", "ruff", "check", "koordpy", "tests", "benchmarks"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_mypy_strict_clean() -> None:
    run = subprocess.run([sys.executable, "-m", "mypy", "--strict"], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_pure_core_imports_no_io() -> None:
    offenders = []
    for package in PURE_PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module]
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in IO_MODULES]
    assert offenders == []


def test_the_layering_contract_holds() -> None:
    """`.importlinter`: cli above (controller | sim) above core above (kernels | api) above errors;
    the dialects independent of each other; the shells (cli, controller, sim) import no dialect module,
    only the registries; no I/O below the controller; kernels on arrays only.
    Imports inside functions count (grimp reads them), so a lazy import cannot hide a breach."""
    lint = Path(sys.executable).parent / "lint-imports"
    run = subprocess.run([str(lint), "--no-cache", "--config", str(ROOT / ".importlinter")], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_no_import_circles() -> None:
    """No module of koordpy reaches itself through its imports, counting imports inside functions and
    under TYPE_CHECKING: a circle is a sign two modules own one thing, and hiding one behind a
    function-local import is how the four circles this test replaced survived."""
    graph = grimp.build_graph("koordpy", cache_dir=None)
    edges = nx.DiGraph()
    for module in graph.modules:
        edges.add_edges_from((module, other) for other in graph.find_modules_directly_imported_by(module))
    circles = [sorted(c) for c in nx.strongly_connected_components(edges) if len(c) > 1]
    assert circles == []
