"""Kubernetes resource quantities and Go durations, as integers the kernels can add."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$")


def parse_quantity_milli(value: object) -> int:
    """A quantity in thousandths of its unit, rounded up as the API server rounds requests.

    Milli-units for every resource keep one integer type across cpu, memory and
    extended resources, so one kernel serves them all.
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int | float):
        text = repr(value) if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value.strip()
    else:
        raise ValueError(f"not a quantity: {value!r}")
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = m.group(1), m.group(2) or ""
    try:
        amount = Decimal(number)
    except InvalidOperation as exc:
        raise ValueError(f"not a quantity: {value!r}") from exc
    if amount < 0:
        raise ValueError(f"negative quantity: {value!r}")
    scaled = amount * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix]) * 1000
    return int(scaled.to_integral_value(rounding="ROUND_CEILING"))


_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_DURATION_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_go_duration(value: object) -> float:
    """Seconds from a Go duration string such as ``90s``, ``1h30m`` or ``1.5h``."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"not a duration: {value!r}")
    text = value.strip()
    if text == "0":
        return 0.0
    pos = 0
    total = 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _DURATION_UNIT[m.group(2)]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"not a Go duration (like 90s, 10m, 1h30m): {value!r}")
    return total
