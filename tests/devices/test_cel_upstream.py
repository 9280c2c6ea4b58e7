"""koordpy.devices.cel against kube-scheduler v1.37.2's own DRA CEL (e2e/celref, built from
k8s.io/dynamic-resource-allocation v0.37.2 by its build.sh, once): the same expressions on the same
devices must compile or not, fail or not, and match or not alike; where neither fails, no error was
absorbed on the way (cel-go counts a failed call by its error's size) and the order of a map's keys
cannot matter, the runtime cost (what the limit is checked against) must be the same.

The expressions: upstream's cases and ours (test_cel.py), quantities spelled every way apimachinery's
scanner reads, and random selectors (tests/devices/celgen.py) with a fixed seed.
"""

from __future__ import annotations

import json
import re
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from koordpy.api.dra import AttrValue, Capacity, Quantity, SemVer
from koordpy.devices.cel import CelCompileError, CelRuntimeError, compile_selector
from koordpy.devices.cellib import parse_quantity
from tests.devices import celgen
from tests.devices.test_cel import CEL_GO_COSTS, UPSTREAM

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "e2e" / "celref" / "build.sh"
Case = tuple[str, str, dict[str, AttrValue], dict[str, str], bool]  # expression, driver, attrs, capacity, multi


@cache
def celref() -> str:
    """The reference binary; building it (once, cached by build.sh) is part of the test."""
    run = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=1800, check=False)
    assert run.returncode == 0, f"e2e/celref/build.sh failed:\n{run.stderr[-3000:]}"
    binary = run.stdout.strip().splitlines()[-1]
    assert Path(binary).is_file(), binary
    return binary


def _wire(value: AttrValue) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, SemVer):
        return {"version": value.text}
    if not value:
        return {"strings": []}
    first = value[0]
    if isinstance(first, bool):
        return {"bools": list(value)}
    if isinstance(first, int):
        return {"ints": list(value)}
    if isinstance(first, str):
        return {"strings": list(value)}
    return {"versions": [v.text for v in value if isinstance(v, SemVer)]}


def upstream(cases: list[Case]) -> list[dict[str, Any]]:
    lines = "".join(json.dumps({"expression": e, "driver": d, "attributes": {k: _wire(v) for k, v in a.items()},
                                "capacity": c, "multi": m}) + "\n" for e, d, a, c, m in cases)
    run = subprocess.run([celref()], input=lines, capture_output=True, text=True, timeout=600, check=True)
    answers = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(answers) == len(cases)
    return answers


def ours(case: Case) -> dict[str, Any]:
    expression, driver, attributes, capacity, multi = case
    caps = {k: Capacity(Quantity(parse_quantity(v), v)) for k, v in capacity.items()}
    try:
        selector = compile_selector(expression)
    except CelCompileError as e:
        return {"compile_error": e.message}
    run = selector.evaluate(driver, attributes, caps, multi)
    out: dict[str, Any] = {"cost": run.cost, "absorbed": run.absorbed}
    if run.error is not None:
        out["error"] = run.error
    else:
        out["match"] = run.matched
    try:
        matched = selector.matches(driver, attributes, caps, multi)
    except CelRuntimeError as e:
        assert run.error is not None and e.detail == run.error
    else:
        assert matched is run.matched
    return out


# A macro over a map (the device's domains or a domain's names) stops at an element whose place in
# Go's map order is random, so its cost may differ run to run upstream itself.
_MAP_ORDER = re.compile(r"device\.(attributes|capacity)(\[[^\]]*\])?\.(all|exists|exists_one|map|filter)\(")


def differences(cases: list[Case]) -> list[str]:
    found = []
    for case, theirs in zip(cases, upstream(cases), strict=True):
        mine = ours(case)
        verdict = ("compile error" if theirs.get("compile_error") else "error" if theirs.get("error")
                   else theirs["match"])
        our_verdict = ("compile error" if "compile_error" in mine else "error" if "error" in mine
                       else mine["match"])
        if verdict != our_verdict:
            found.append(f"{case[0]}\n  upstream: {theirs}\n  koordpy:  {mine}")
        elif (verdict in (True, False) and not _MAP_ORDER.search(case[0]) and not mine["absorbed"]
              and theirs["cost"] != mine["cost"]):
            found.append(f"{case[0]}\n  upstream cost {theirs['cost']}, koordpy {mine['cost']}")
    return found


def test_upstreams_cases_and_ours_agree_with_upstream() -> None:
    cases: list[Case] = [(c.expression, c.driver, c.attributes, {k: v.value.text for k, v in c.capacity.items()},
                          c.allow_multiple) for c in UPSTREAM.values()]
    cases += [(e, "d", {"a": 1, "b": 2}, {}, False) for e in CEL_GO_COSTS]
    assert differences(cases) == []


QUANTITIES = ["0", "00", "1", "-1", "+1", "1000m", "1.5", "1.50", "0.5k", "1.5Gi", "80Gi", "7Ei", "8Ei",
              "99999999999999999999Ei", "50000000G", "9999999999999999999999999999999999999G", "1234567890123456789",
              "1e3", "1E-3", "1e-9", "1e-10", "0.0000000001", "12E", "1e4294967296", "5e-4294967296", "Mi", ".", "+",
              "-.", "e3", "1E", "1e+3", "1.", "00.5", "1e", "1K", "1mi", "1Mi2", "1k3", "-1.5Gi", "123.456e2"]


@pytest.mark.parametrize("text", QUANTITIES)
def test_quantities_agree_with_apimachinery(text: str) -> None:
    expressions = [f'isQuantity("{text}")', f'quantity("{text}").isInteger()',
                   f'quantity("{text}").compareTo(quantity("1")) == 0', f'quantity("{text}") == quantity("1n")',
                   f'quantity("{text}").add(quantity("1k")).isInteger()', f'quantity("{text}").sub(1).isInteger()',
                   f'quantity("{text}").asApproximateFloat() > 1e9']
    cases: list[Case] = [(e, "d", {}, {}, False) for e in expressions]
    if not text or any(ch.isspace() for ch in text):
        return
    try:
        parse_quantity(text)
    except ValueError:
        pass
    else:  # a capacity the slice spells this way
        cases.append(('device.capacity["d"].c.isInteger()', "d", {}, {"c": text}, False))
    assert differences(cases) == []


def test_random_selectors_agree_with_upstream() -> None:
    generator = celgen.Generator(seed=30)
    cases: list[Case] = [(generator.selector(), celgen.DRIVER, celgen.ATTRIBUTES, celgen.CAPACITY, i % 2 == 0)
                         for i in range(600)]
    assert differences(cases) == []
