"""CEL selectors: koordpy's compiler (``koordpy.devices.cel``) against the CEL packages for Python, on
what kube-scheduler's allocator does with a selector (issue 30); prints figures, asserts nothing.

    .venv/bin/python -m benchmarks.bench_cel [--candidates DIR] [--repeat 3]

Figures, best of ``--repeat``, in CPU microseconds (process time): compiling a selector (the parse and check, no cache),
and one evaluation on one device, for the typical selector
``device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h100"`` and a
quantity comparison ``device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))``.
Each package gets the device as the plain nested maps it takes (built once, outside the figure);
koordpy's takes the device's record as ``api.dra.Device`` holds it (the evaluation includes its views).

``--candidates DIR``: a folder with one ``pip install --target DIR/<package> <package>`` per package
(``cel-python``, ``cel-expr-python``, ``common-expression-language``); they are not dependencies of
koordpy, and a missing one is reported and skipped. Besides the times, each line says whether the
package checks the result type when compiling (``1`` must not compile), can hold a Kubernetes quantity
(a type of its own with methods), and what a missing key says.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

from koordpy.api.dra import AttrValue, Capacity, Quantity
from koordpy.devices import cel as koordpy_cel

TYPICAL = 'device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "h100"'
QUANTITY = 'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))'
MISSING = 'device.attributes["gpu.example.com"].vendor == "x"'
DRIVER = "gpu.example.com"
ATTRIBUTES: dict[str, AttrValue] = {"model": "h100", "index": 3, "uuid": "GPU-0a1b2c"}
CAPACITY = {"memory": Capacity(Quantity(Fraction(80 * 2**30), "80Gi"))}
PLAIN = {"driver": DRIVER, "attributes": {DRIVER: {"model": "h100", "index": 3, "uuid": "GPU-0a1b2c"}},
         "capacity": {DRIVER: {}}, "allowMultipleAllocations": False}


def best(fn: Callable[[], object], loops: int, repeat: int) -> float:
    """CPU microseconds per call (process time: the machine may be shared), the best of ``repeat`` runs
    of ``loops`` calls."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        for _ in range(loops):
            fn()
        times.append((time.process_time() - start) / loops * 1e6)
    return min(times)


class _Q:
    """A quantity for the packages that take a Python object through a custom function."""

    def __init__(self, value: Fraction) -> None:
        self.value = value


def _koordpy(repeat: int) -> dict[str, str]:
    raw_compile = koordpy_cel.compile_uncached
    typical, quantity = raw_compile(TYPICAL), raw_compile(QUANTITY)
    out = {
        "compile": f"{best(lambda: raw_compile(TYPICAL), 2000, repeat):.1f}",
        "eval": f"{best(lambda: typical.matches(DRIVER, ATTRIBUTES, CAPACITY), 20000, repeat):.2f}",
        "quantity compile": f"{best(lambda: raw_compile(QUANTITY), 2000, repeat):.1f}",
        "quantity eval": f"{best(lambda: quantity.matches(DRIVER, ATTRIBUTES, CAPACITY), 20000, repeat):.2f}",
    }
    try:
        raw_compile("1")
        out["checks result"] = "no"
    except koordpy_cel.CelCompileError:
        out["checks result"] = "yes"
    try:
        raw_compile(MISSING).matches(DRIVER, ATTRIBUTES, CAPACITY)
    except koordpy_cel.CelRuntimeError as e:
        out["missing key"] = e.detail
    out["quantity type"] = "yes"
    out["cost limit"] = "yes (cel-go's runtime cost)"
    return out


def _celpy(repeat: int) -> dict[str, str]:
    celpy: Any = importlib.import_module("celpy")
    celtypes: Any = importlib.import_module("celpy.celtypes")
    env = celpy.Environment()
    functions = {"quantity": lambda s: _Q(Fraction(40 * 2**30)),
                 "isGreaterThan": lambda a, b: celtypes.BoolType(a.value > b.value)}

    def build(expression: str) -> Any:
        return env.program(env.compile(expression), functions=functions)

    device = celpy.json_to_cel(PLAIN)
    with_capacity = celpy.json_to_cel({**PLAIN, "capacity": {DRIVER: {}}})
    with_capacity[celtypes.StringType("capacity")][celtypes.StringType(DRIVER)][celtypes.StringType("memory")] = \
        _Q(Fraction(80 * 2**30))
    typical, quantity = build(TYPICAL), build(QUANTITY)
    out = {
        "compile": f"{best(lambda: build(TYPICAL), 200, repeat):.1f}",
        "eval": f"{best(lambda: typical.evaluate({'device': device}), 2000, repeat):.2f}",
        "quantity compile": f"{best(lambda: build(QUANTITY), 200, repeat):.1f}",
        "quantity eval": f"{best(lambda: quantity.evaluate({'device': with_capacity}), 2000, repeat):.2f}",
        "quantity type": "as an opaque Python object through custom functions",
        "cost limit": "no",
    }
    try:
        build("1")
        out["checks result"] = "no"
    except Exception:
        out["checks result"] = "yes"
    try:
        build(MISSING).evaluate({"device": device})
    except Exception as e:
        out["missing key"] = str(e)
    return out


def _cel_expr_python(repeat: int) -> dict[str, str]:
    module: Any = importlib.import_module("cel_expr_python.cel")
    t = module.Type
    env = module.NewEnv(variables={"device": t.Map(t.STRING, t.DYN)})
    typical = env.compile(TYPICAL)
    out = {
        "compile": f"{best(lambda: env.compile(TYPICAL), 2000, repeat):.1f}",
        "eval": f"{best(lambda: typical.eval(data={'device': PLAIN}).value(), 20000, repeat):.2f}",
        "quantity compile": "-", "quantity eval": "-",
        "cost limit": "no (an iteration budget only)",
    }
    try:
        quantity_type = t.AbstractType("kubernetes.Quantity")
        env2 = module.NewEnv(variables={"device": t.Map(t.STRING, t.DYN)}, functions=[
            module.FunctionDecl("quantity", [module.Overload("quantity_string", quantity_type, [t.STRING],
                                                             impl=lambda s: _Q(Fraction(1)))])])
        env2.compile('quantity("1") == quantity("1")').eval()
        out["quantity type"] = "yes"
    except Exception as e:
        out["quantity type"] = f"no ({str(e).splitlines()[0]})"
    # The result's type is the caller's to check (Expression.return_type()).
    out["checks result"] = "via return_type()" if str(env.compile("1").return_type()) else "no"
    try:
        out["missing key"] = str(env.compile(MISSING).eval(data={"device": PLAIN}).value())
    except Exception as e:
        out["missing key"] = str(e)
    return out


def _common_expression_language(repeat: int) -> dict[str, str]:
    module: Any = importlib.import_module("cel")
    typical = module.compile(TYPICAL)
    context = {"device": PLAIN}
    out = {
        "compile": f"{best(lambda: module.compile(TYPICAL), 2000, repeat):.1f}",
        "eval": f"{best(lambda: typical.execute(context), 20000, repeat):.2f}",
        "quantity compile": "-", "quantity eval": "-",
        "cost limit": "no",
    }
    try:
        ctx = module.Context()
        ctx.add_function("quantity", lambda s: _Q(Fraction(1)))
        module.compile('quantity("1") == quantity("1")').execute(ctx)
        out["quantity type"] = "yes"
    except Exception as e:
        out["quantity type"] = f"no ({str(e).splitlines()[0][:80]})"
    try:
        module.compile("1")
        out["checks result"] = "no"
    except Exception:
        out["checks result"] = "yes"
    try:
        module.compile(MISSING).execute(context)
    except Exception as e:
        out["missing key"] = f"{type(e).__name__}: {e}"
    return out


CANDIDATES: dict[str, Callable[[int], dict[str, str]]] = {
    "cel-python": _celpy, "cel-expr-python": _cel_expr_python,
    "common-expression-language": _common_expression_language,
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=Path, help="a folder with one pip --target folder per package")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    rows = {"koordpy.devices.cel": _koordpy(args.repeat)}
    for name, run in CANDIDATES.items():
        folder = args.candidates / name if args.candidates else None
        if folder is None or not folder.is_dir():
            rows[name] = {"skipped": f"not installed (pip install --target DIR/{name} {name})"}
            continue
        sys.path.append(str(folder))  # last: a package's own copies never shadow koordpy's dependencies
        try:
            rows[name] = run(args.repeat)
        except Exception as e:
            rows[name] = {"failed": f"{type(e).__name__}: {e}"}
        finally:
            sys.path.remove(str(folder))
    print("CPU microseconds per call, best of", args.repeat)
    for name, row in rows.items():
        print(f"\n{name}")
        for key, value in row.items():
            print(f"  {key:>16}: {value}")


if __name__ == "__main__":
    main()
