"""A dialect writes only what it does (issue 19, item 1): ``DialectBase`` gives the neutral answer to
every question of the ``Dialect`` protocol, the dialects derive from it and do not say "None" again,
and the registry asks them in turn through one helper (``dialects.first``)."""

from __future__ import annotations

import ast
import inspect
import textwrap

from koordpy.core import dialects
from koordpy.core.dialects import DIALECTS, first
from koordpy.core.dialects.base import Dialect, DialectBase

NEUTRAL = ("None", "False", "()", "iter(())", "{}")


def _members(cls: type) -> set[str]:
    return {n for n in vars(cls) if not n.startswith("_")} | set(getattr(cls, "__annotations__", {}))


def test_the_base_answers_every_question_of_the_protocol() -> None:
    """A question added to the protocol gets its neutral answer here, so no dialect must repeat it."""
    asked = _members(Dialect)
    answered = {n for n in _members(DialectBase) if hasattr(DialectBase, n)}
    assert asked - answered == {"name", "roles"}  # each dialect names itself and its kinds
    assert all(isinstance(d, DialectBase) for d in DIALECTS)


def test_no_dialect_repeats_a_neutral_answer() -> None:
    repeated = []
    for dialect in DIALECTS:
        cls = type(dialect)
        for name, value in vars(cls).items():
            if not hasattr(DialectBase, name):
                continue
            if callable(value):
                fn = ast.parse(textwrap.dedent(inspect.getsource(value))).body[0]
                assert isinstance(fn, ast.FunctionDef)
                body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
                        and ast.unparse(body[0].value) in NEUTRAL):
                    repeated.append(f"{cls.__name__}.{name}")
            elif value == getattr(DialectBase, name) and name != "manifest_format":
                repeated.append(f"{cls.__name__}.{name}")
    assert repeated == []


class _Says:
    def __init__(self, answer: str | None) -> None:
        self.answer = answer


def test_first_takes_the_first_answer_in_order() -> None:
    said = [_Says(None), _Says("b"), _Says("c")]
    assert first(lambda d: d.answer, said) == "b"  # type: ignore[attr-defined, arg-type]
    assert first(lambda d: d.answer, said[:1]) is None  # type: ignore[attr-defined, arg-type]
    # The registry's own order: a Volcano PodGroup is told before a scheduler-plugins one of one name.
    assert [d.name for d in dialects._EVENT_ORDER][:2] == ["volcano", "koordinator"]
