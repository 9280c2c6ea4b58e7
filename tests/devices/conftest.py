"""Until ``koordpy.devices.cel`` (helper B's) is merged, a stand-in that knows the few expressions
these tests use, so the allocator's tests run against the interface in the plan."""

from __future__ import annotations

import re
import sys
import types
from collections.abc import Mapping
from typing import Any

try:
    import koordpy.devices.cel  # noqa: F401
except ImportError:  # pragma: no cover - only before the merge
    mod = types.ModuleType("koordpy.devices.cel")

    class CelError(Exception):
        def __init__(self, message: str) -> None:
            super().__init__(message)
            self.message = message

    class CelCompileError(CelError):
        pass

    class CelRuntimeError(CelError):
        pass

    class Selector:
        def __init__(self, expression: str) -> None:
            self.expression = expression

        def matches(self, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any],
                    allow_multiple_allocations: bool = False) -> bool:
            expr = self.expression.strip()
            if expr == "true":
                return True
            if expr == "false":
                return False
            if expr == "runtime-error":
                raise CelRuntimeError("no such key: missing")
            results = []
            for part in expr.split("&&"):
                part = part.strip()
                m = re.fullmatch(r'device\.driver == "([^"]*)"', part)
                if m:
                    results.append(driver == m.group(1))
                    continue
                m = re.fullmatch(r'device\.allowMultipleAllocations == (true|false)', part)
                if m:
                    results.append(allow_multiple_allocations == (m.group(1) == "true"))
                    continue
                m = re.fullmatch(r'device\.attributes\["([^"]*)"\]\.(\w+) == (.*)', part)
                if m:
                    dom, name, want = m.groups()
                    q = f"{dom}/{name}"
                    have = attributes.get(q, attributes.get(name) if dom == driver else None)
                    if have is None:
                        raise CelRuntimeError(f"no such key: {name}")
                    import json
                    results.append(have == json.loads(want))
                    continue
                raise CelCompileError(f"unsupported expression {part!r}")
            return all(results)

    _cache: dict[str, Selector] = {}

    def compile_selector(expression: str) -> Selector:
        got = _cache.get(expression)
        if got is None:
            got = _cache[expression] = Selector(expression)
        return got

    mod.CelError = CelError  # type: ignore[attr-defined]
    mod.CelCompileError = CelCompileError  # type: ignore[attr-defined]
    mod.CelRuntimeError = CelRuntimeError  # type: ignore[attr-defined]
    mod.Selector = Selector  # type: ignore[attr-defined]
    mod.compile_selector = compile_selector  # type: ignore[attr-defined]
    sys.modules["koordpy.devices.cel"] = mod
