"""Kubernetes resource quantities and Go durations, as integers the kernels can add.

Units follow what kube-scheduler compares: cpu in milli-cpus, every other resource in whole
base units (bytes for memory, ephemeral-storage and hugepages; a count for ``pods`` and for
extended resources). Milli-units everywhere would overflow int64 for a node with petabytes of
memory, while whole bytes leave room for ``8Ei``.

Parsing is exact integer arithmetic (no floats, no ``decimal``), so every failure is a
ValueError with the reason, and a hostile value such as ``1e999999`` costs microseconds.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

INT64_MAX = 2**63 - 1
INT32_MAX = 2**31 - 1
INT32_MIN = -(2**31)
# Far longer than any quantity a person writes; it bounds the integer work per value.
MAX_QUANTITY_LENGTH = 100

_BINARY_EXP = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
# <sign><number><suffix>, where the suffix is one binary SI suffix, one decimal SI suffix or
# one decimal exponent (never two of them, so ``1e3Ki`` is no quantity). The degenerate
# numbers "." and a lone sign, which apimachinery's scanner happens to read as 0, are refused.
_QUANTITY = re.compile(
    r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])|[eE]([+-]?[0-9]+))?"
)
_BYTE_RESOURCES = ("memory", "ephemeral-storage")


def is_extended_resource(resource: str) -> bool:
    """A resource with a domain prefix outside kubernetes.io, such as ``nvidia.com/gpu``."""
    return "/" in resource and "kubernetes.io/" not in resource and not resource.startswith("requests.")


def is_integer_resource(resource: str) -> bool:
    """Resources the API server requires to be whole numbers."""
    return resource == "pods" or is_extended_resource(resource)


def _is_byte_resource(resource: str) -> bool:
    return resource in _BYTE_RESOURCES or resource.startswith("hugepages-")


def _unit(resource: str) -> str:
    return "milli-cpus" if resource == "cpu" else "bytes" if _is_byte_resource(resource) else "units"


def _scan(value: object) -> tuple[str, int, int, str | None, str | None]:
    """A float or string quantity (a bool or int is the caller's) read as the grammar reads it: its
    sign, its digits as one integer, how many of them follow the point, its suffix and its exponent.

    Raises ValueError when ``value`` is no quantity.
    """
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a quantity: {value!r}")
        text = repr(value)
    elif isinstance(value, str):
        text = value
    else:
        raise ValueError(f"not a quantity: {value!r}")
    if len(text) > MAX_QUANTITY_LENGTH:
        raise ValueError(f"not a quantity: longer than {MAX_QUANTITY_LENGTH} characters")
    m = _QUANTITY.fullmatch(text)
    if not m:
        raise ValueError(f"not a quantity: {value!r} (like 500m, 2, 1.5, 8Gi or 1e3)")
    sign, number, suffix, exponent = m.groups()
    whole, _, fraction = number.partition(".")
    return sign, int(whole + fraction or "0"), len(fraction), suffix, exponent


def parse_quantity(resource: str, value: object) -> int:
    """``value`` (a quantity string, or a YAML int or float) in ``resource``'s unit, rounded up.

    Raises ValueError saying why: not a quantity, negative, not whole for a resource that must
    be, or too large for int64 in the unit.
    """
    scale = 3 if resource == "cpu" else 0
    factor = 1000 if resource == "cpu" else 1
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"must not be negative, got {value}")
        if value.bit_length() > 64 or value * factor > INT64_MAX:
            shown = value if value.bit_length() <= 64 else f"a {value.bit_length()}-bit integer"
            raise ValueError(f"too large: {shown} does not fit in int64 {_unit(resource)}")
        return value * factor
    sign, mantissa, decimals, suffix, exponent = _scan(value)
    power2 = 0
    if exponent is not None:
        power10 = int(exponent)
        if not INT32_MIN <= power10 <= INT32_MAX:
            raise ValueError(f"not a quantity: exponent out of range in {value!r}")
    elif suffix in _BINARY_EXP:
        power10, power2 = 0, _BINARY_EXP[suffix]
    else:
        power10 = _DECIMAL_EXP[suffix or ""]
    if mantissa == 0:
        return 0
    if sign == "-":
        raise ValueError(f"must not be negative, got {value!r}")
    # value in the unit = mantissa * 10**shift * 2**power2, with mantissa >= 1.
    shift = power10 - decimals + scale
    too_large = ValueError(f"too large: {value!r} does not fit in int64 {_unit(resource)}")
    if shift > 40:  # at least 10**41 > INT64_MAX; decided before any big power is built
        raise too_large
    if shift >= 0:
        amount, whole_number = mantissa * int(pow(10, shift)) << power2, True
    elif -shift > len(str(mantissa)) + 20:  # below one unit: rounds up to one, as the API server does
        amount, whole_number = 1, False
    else:
        numerator, denominator = mantissa << power2, int(pow(10, -shift))
        amount, whole_number = -(-numerator // denominator), numerator % denominator == 0
    if is_integer_resource(resource) and not whole_number:
        raise ValueError(f"must be a whole number, got {value!r}")
    if amount > INT64_MAX:
        raise too_large
    return amount


_NANO = Fraction(1, 10**9)


def exact_quantity(value: object) -> Fraction:
    """``value`` (a quantity string, or a YAML int or float) as the exact number apimachinery keeps.

    DRA's capacities, counters and capacity requests are compared and added exactly (``100m`` of a
    capacity is a tenth, not one milli-unit rounded up to a whole one). As ``resource.Quantity`` does,
    a value is rounded away from zero to a multiple of 1n and its magnitude capped at 2^63-1; a
    negative value is kept (the API server keeps it; callers refuse it where the API server does).
    """
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(max(-INT64_MAX, min(INT64_MAX, value)))
    sign, mantissa, decimals, suffix, exponent = _scan(value)
    if mantissa == 0:
        return Fraction(0)
    power2 = 0
    if exponent is not None:
        # A longer exponent is past either bound below; no need to convert it.
        power10 = int(exponent) if len(exponent) < 12 else (-1 if exponent.startswith("-") else 1) * 10**12
    elif suffix in _BINARY_EXP:
        power10, power2 = 0, _BINARY_EXP[suffix]
    else:
        power10 = _DECIMAL_EXP[suffix or ""]
    shift = power10 - decimals
    negative = sign == "-"
    # Decided before any big power is built: at least 10**41 is past the cap, and a value under
    # 10**-(digits+20) rounds up to 1n.
    if shift > 40:
        amount = Fraction(INT64_MAX)
    elif -shift > len(str(mantissa)) + 20:
        amount = _NANO
    else:
        amount = Fraction(mantissa << power2) * Fraction(10) ** shift
        amount = min(Fraction(math.ceil(amount / _NANO)) * _NANO, Fraction(INT64_MAX))
    return -amount if negative else amount


def format_quantity(resource: str, value: int) -> str:
    """A value in ``resource``'s unit (see ``parse_quantity``) as a quantity for messages."""
    if resource == "cpu":
        return str(value // 1000) if value % 1000 == 0 else f"{value}m"
    spellings = [str(value)]
    if _is_byte_resource(resource) and value:
        # The shortest exact spelling: 32Gi rather than 34359738368, 10P rather than 9765625000000Ki.
        spellings += [f"{value >> power}{suffix}" for suffix, power in _BINARY_EXP.items() if value % (1 << power) == 0]
        spellings += [f"{value // 10**power}{suffix}" for suffix, power in _DECIMAL_EXP.items()
                      if power > 0 and value % 10**power == 0]
    return min(spellings, key=len)


_DURATION = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|µs|μs|ms|s|m|h))+")
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?(ns|us|µs|μs|ms|s|m|h)")
_DURATION_NS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
                "h": 3600 * 10**9}


def parse_go_duration(value: object) -> float:
    """Seconds from a Go duration string such as ``90s``, ``1h30m``, ``1.5h`` or ``-5s``.

    The grammar and the int64-nanosecond range are Go's ``time.ParseDuration``; a bare number
    other than ``0`` has no unit and is refused, as Go refuses it.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"not a duration: {value!r}")
    if value in ("0", "+0", "-0"):
        return 0.0
    if len(value) > MAX_QUANTITY_LENGTH or not _DURATION.fullmatch(value):
        raise ValueError(f"not a Go duration (like 90s, 10m, 1h30m): {value!r}")
    total = 0
    for m in _DURATION_PART.finditer(value):
        whole, fraction, unit = m.group(1), m.group(2) or "", m.group(3)
        ns = _DURATION_NS[unit]
        total += int(whole or "0") * ns + int(fraction or "0") * ns // 10 ** len(fraction)
        if total > INT64_MAX:
            raise ValueError(f"duration out of range: {value!r}")
    return (-total if value.startswith("-") else total) / 1e9
