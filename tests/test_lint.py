"""The project's gates: mypy --strict and ruff stay clean, and the core does no I/O."""

import ast
import subprocess
import sys
from pathlib import Path

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
