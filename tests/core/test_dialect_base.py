"""A dialect writes only what it does (issue 19 item 1, issue 32 item 1): the ``Dialect`` protocol is
cut by capability (``Gangs``, ``Statuses``, ``Admission``, ``Explains``, ``Topologies``,
``Manifests``), each capability's base gives the neutral answer to its optional questions, the
dialects derive from the bases of what they do and do not say "None" again, each capability has its
registry of the dialects that have it, and the registries are asked in turn through one helper
(``dialects.first``)."""

from __future__ import annotations

import ast
import inspect
import textwrap

from koordpy.core import dialects
from koordpy.core.dialects import DIALECTS, first
from koordpy.core.dialects import base as b

NEUTRAL = ("None", "False", "()", "iter(())", "{}")
# Each capability, its registry and its base.
CAPABILITIES = [(b.Gangs, dialects.GANGS, b.GangsBase), (b.Runtimes, dialects.RUNTIMES, b.RuntimesBase),
                (b.Statuses, dialects.STATUSES, b.StatusesBase),
                (b.Staleness, dialects.STALENESS, b.StalenessBase),
                (b.Admission, dialects.ADMISSION, b.AdmissionBase), (b.Explains, dialects.EXPLAINS, b.ExplainsBase),
                (b.Topologies, dialects.TOPOLOGIES, b.TopologiesBase),
                (b.Manifests, dialects.MANIFESTS, b.ManifestsBase), (b.Finishing, dialects.FINISHING, None)]


def _members(cls: type) -> set[str]:
    return {n for n in vars(cls) if not n.startswith("_")} | set(getattr(cls, "__annotations__", {}))


def test_each_capability_is_a_small_protocol_of_its_own() -> None:
    """No question is asked by two capabilities, and together they ask what the one protocol did."""
    own = [_members(p) for p, _, _ in CAPABILITIES]
    assert all(len(m) <= 8 for m in own)
    assert sum(len(m) for m in own) == len(set().union(*own))
    assert _members(b.Dialect) == {"name", "roles", "compare_key"}


def test_each_registry_lists_the_dialects_with_the_capability_in_order() -> None:
    for protocol, registry, _ in CAPABILITIES:
        assert registry == tuple(d for d in DIALECTS if isinstance(d, protocol)), protocol
    assert {d.name for d in dialects.GANGS} == {d.name for d in DIALECTS}
    assert [d.name for d in dialects.ADMISSION] == ["koordinator", "upstream"]
    assert [d.name for d in dialects.DECLARING] == ["koordinator"]  # its gang and topology annotations
    assert [d.name for d in dialects.MANIFESTS] == ["koordinator", "volcano", "kai"]
    assert [d.name for d in dialects.RUNTIMES] == ["koordinator", "volcano", "kai", "upstream"]


def test_a_base_answers_only_its_own_capability() -> None:
    for protocol, _, base in CAPABILITIES:
        if base is None:
            continue
        answered = {n for n in _members(base) if hasattr(base, n)}
        others = set().union(*(_members(p) for p, _, _ in CAPABILITIES if p is not protocol))
        assert answered <= _members(protocol), (base, answered - _members(protocol))
        assert not answered & others
    assert all(isinstance(d, b.DialectBase) for d in DIALECTS)


def test_no_dialect_repeats_a_neutral_answer() -> None:
    repeated = []
    for dialect in DIALECTS:
        cls = type(dialect)
        for name, value in vars(cls).items():
            base = next((bs for _, _, bs in CAPABILITIES if bs is not None and hasattr(bs, name)), None)
            if base is None:
                continue
            if callable(value):
                fn = ast.parse(textwrap.dedent(inspect.getsource(value))).body[0]
                assert isinstance(fn, ast.FunctionDef)
                body = [s for s in fn.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
                if (len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
                        and ast.unparse(body[0].value) in NEUTRAL):
                    repeated.append(f"{cls.__name__}.{name}")
            elif value == getattr(base, name):
                repeated.append(f"{cls.__name__}.{name}")
    assert repeated == []


class _Says:
    def __init__(self, answer: str | None) -> None:
        self.answer = answer


def test_first_takes_the_first_answer_in_order() -> None:
    said = [_Says(None), _Says("b"), _Says("c")]
    assert first(lambda d: d.answer, said) == "b"  # type: ignore[type-var]
    assert first(lambda d: d.answer, said[:1]) is None  # type: ignore[type-var]
    # The registry's own order: a Volcano PodGroup is told before a scheduler-plugins one of one name.
    assert [d.name for d in dialects._EVENT_ORDER] == ["volcano", "koordinator", "kai", "upstream"]
