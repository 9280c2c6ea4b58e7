"""``koordpy.errors``: one root every deliberate error derives from, carrying its exit status."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import koordpy.errors
from koordpy.api.errors import ParseError
from koordpy.core.explain import AmbiguousGang
from koordpy.errors import EXIT_INPUT, BadInput, KoordpyError
from koordpy.settings import SettingsError
from koordpy.sim.errors import InputError


def test_the_error_root_imports_nothing_from_koordpy() -> None:
    # It sits below koordpy.api: anything it imported from koordpy would be a circle waiting to happen.
    tree = ast.parse(Path(koordpy.errors.__file__).read_text())
    modules = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    modules += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert [m for m in modules if m.split(".")[0] == "koordpy"] == []


@pytest.mark.parametrize(("error", "old_base"), [
    (ParseError("Pod default/p", "spec", "bad"), ValueError),
    (InputError("f.yaml", "bad"), ValueError),
    (SettingsError("c.yaml: logging: bad"), ValueError),
    (AmbiguousGang("default/t", ["default/Job/t", "default/Pod/t"]), LookupError),
])
def test_every_input_error_derives_from_the_root_and_exits_2(error: Exception, old_base: type) -> None:
    assert isinstance(error, old_base)  # callers that catch the standard class still do
    assert isinstance(error, BadInput) and error.exit_code == EXIT_INPUT == 2


def test_the_root_exits_1_and_reports_one_line() -> None:
    error = KoordpyError("first line\n  second   line")
    assert error.exit_code == 1
    assert error.report() == "error: first line second line"


def test_a_settings_error_reports_as_it_always_read() -> None:
    # `koordpy run: FILE: KEY: why`, without "error:", and the message as given.
    assert SettingsError("c.yaml: server.bindAddress: 'a  b' is not host:port").report() == (
        "c.yaml: server.bindAddress: 'a  b' is not host:port")


def test_an_error_that_is_not_folded_reports_its_message_as_given() -> None:
    class Named(KoordpyError):
        fold = False

    assert Named("no pod default/a  b").report() == "error: no pod default/a  b"
