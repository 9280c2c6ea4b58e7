"""``koordpy.cli`` as a package: the one place errors become exit statuses, imports without circles."""

from __future__ import annotations

import ast
from pathlib import Path
from types import ModuleType

import pytest

import koordpy
from koordpy.cli import explain, run, simulate, topology
from koordpy.cli.main import main
from koordpy.cli.manifests import UsageError
from koordpy.errors import KoordpyError

PACKAGE = Path(koordpy.__file__).resolve().parent
CLI = PACKAGE / "cli"


class _Odd(KoordpyError):
    exit_code = 5


@pytest.mark.parametrize(("argv", "module", "command", "prog"), [
    (["simulate", "-f", "x.yaml"], simulate, "cmd_simulate", "koordpy simulate"),
    (["run"], run, "cmd_run", "koordpy run"),
    (["explain", "default/p", "-f", "x.yaml"], explain, "cmd_explain", "koordpy explain"),
    (["topology", "generate", "--levels", "a", "-f", "x.yaml"], topology, "cmd_generate",
     "koordpy topology generate"),
    (["topology", "show", "-f", "x.yaml"], topology, "cmd_show", "koordpy topology show"),
])
def test_main_maps_any_koordpy_error_to_its_line_and_exit_status(
        argv: list[str], module: ModuleType, command: str, prog: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    # The commands raise; main alone prints `PROG: error: ...` and returns the error's own status.
    def fails(_: object) -> int:
        raise _Odd("two\n  lines")

    monkeypatch.setattr(module, command, fails)
    assert main(argv) == 5
    assert capsys.readouterr().err == f"{prog}: error: two lines\n"


@pytest.mark.parametrize(("error", "code", "folded"), [
    (UsageError("x"), 2, True),
    (topology.TopologyUsageError("x"), 2, True),
    (topology.CannotWrite("x"), 2, False),
    (explain.NotFound("x"), 1, False),
    (simulate.RoundLimit("x"), 3, True),
])
def test_the_cli_errors_carry_their_exit_status(error: KoordpyError, code: int, folded: bool) -> None:
    assert error.exit_code == code and error.fold is folded


def _sources(root: Path) -> list[Path]:
    return sorted(root.rglob("*.py"))


def test_no_command_prints_its_own_error_line() -> None:
    offenders = [f"{p.relative_to(PACKAGE)}:{n}" for p in _sources(CLI)
                 for n, line in enumerate(p.read_text().splitlines(), 1) if ": error: " in line]
    assert offenders == []


def _local_imports(path: Path) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []
    for fn in ast.walk(ast.parse(path.read_text())):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            found += [n for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom)]
    return found


def _imports_cli(node: ast.Import | ast.ImportFrom) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == "koordpy.cli" or a.name.startswith("koordpy.cli.") for a in node.names)
    module = node.module or ""
    return (module == "koordpy.cli" or module.startswith("koordpy.cli.")
            or (module == "koordpy" and any(a.name == "cli" or a.name.endswith("_cli") for a in node.names)))


def test_no_function_imports_the_cli_to_dodge_a_circle() -> None:
    # The commands share koordpy.cli.manifests, which sits below them: they import it at the top.
    offenders = [f"{p.relative_to(PACKAGE)}:{n.lineno}" for p in _sources(PACKAGE)
                 for n in _local_imports(p) if _imports_cli(n)]
    assert offenders == []


def test_every_import_left_inside_a_cli_function_says_why() -> None:
    # Those that remain keep start-up light (the core, numba, pydantic, kopf are paid by the commands
    # that use them); each says so on its line or on a comment above its group of imports.
    offenders = []
    for path in _sources(CLI):
        lines = path.read_text().splitlines()
        for node in _local_imports(path):
            said = any("#" in lines[i - 1] for i in range(node.lineno, (node.end_lineno or node.lineno) + 1))
            above = node.lineno - 2
            while not said and above >= 0 and lines[above].strip().startswith(("from ", "import ")):
                said = "#" in lines[above]
                above -= 1
            said = said or (above >= 0 and lines[above].strip().startswith("#"))
            if not said:
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []
