"""Small helpers that read fields out of raw dicts and raise ParseError on the wrong shape.

Types are held to what the API server enforces, so a file the simulator accepts is one
``kubectl apply`` would accept too: a bool field takes only a bool, an integer field only an
integer that fits its Go type, a label or annotation value only a string.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from koordpy.api.errors import ParseError, object_ref
from koordpy.api.quantity import INT32_MAX, INT32_MIN, INT64_MAX, parse_quantity

_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")
_LABEL = re.compile(_DNS_LABEL)
_DECIMAL_INT = re.compile(r"[+-]?[0-9]+")
_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?(?:[Zz]|[+-][0-9]{2}:[0-9]{2})"
)
_INT_RANGE = {32: (INT32_MIN, INT32_MAX), 64: (-INT64_MAX - 1, INT64_MAX)}


def rfc3339(seconds: float) -> str:
    """A time as the API writes it (RFC 3339, UTC, whole seconds)."""
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _rfc1123_problem(value: str, limit: int, pattern: re.Pattern[str], spelled: str) -> str | None:
    """Why ``value`` is not the RFC 1123 name ``spelled`` (what it is, and its characters), or None."""
    if len(value) > limit:
        return f"must be no more than {limit} characters, got {len(value)}"
    if not pattern.fullmatch(value):
        return f"{value!r} is not an RFC 1123 {spelled}, starting and ending with a letter or digit"
    return None


def subdomain_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 DNS subdomain (most object names), or None."""
    return _rfc1123_problem(value, 253, _SUBDOMAIN, "subdomain: lowercase letters, digits, '-' and '.'")


def label_problem(value: str) -> str | None:
    """Why ``value`` is not an RFC 1123 DNS label (namespace names), or None."""
    return _rfc1123_problem(value, 63, _LABEL, "label: lowercase letters, digits and '-'")


def yaml_scalar(value: Any) -> str:
    """How YAML spells a scalar, for telling the user what to quote."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def int_text(text: str, bits: int = 32) -> int:
    """A decimal integer as Go's ``strconv`` reads it (no spaces, no ``_``), within ``bits`` bits."""
    if not _DECIMAL_INT.fullmatch(text):
        raise ValueError(f"must be a whole number, got {text!r}")
    low, high = _INT_RANGE[bits]
    value = int(text) if len(text) <= 30 else high + 1  # no need to convert a number that long
    if not low <= value <= high:
        raise ValueError(f"{text} is out of range for int{bits} ({low}..{high})")
    return value


class Reader:
    """Reads one raw object; every failure names ``self.obj`` and the field path."""

    def __init__(self, obj: str) -> None:
        self.obj = obj

    def fail(self, field: str, message: str) -> ParseError:
        return ParseError(self.obj, field, message)

    def mapping(self, value: Any, field: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(field, f"expected a mapping, got {type(value).__name__}")
        return value

    def seq(self, value: Any, field: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(field, f"expected a list, got {type(value).__name__}")
        return value

    def string(self, value: Any, field: str, *, required: bool = False) -> str:
        if value is None or value == "":
            if required:
                raise self.fail(field, "is required")
            return ""
        if not isinstance(value, str):
            raise self.fail(field, f"expected a string, got {value!r}")
        return value

    def name(self, value: Any, field: str = "metadata.name") -> str:
        """A required object name, an RFC 1123 subdomain as the API server requires."""
        text = self.string(value, field, required=True)
        problem = subdomain_problem(text)
        if problem:
            raise self.fail(field, problem)
        return text

    def namespace(self, value: Any, field: str = "metadata.namespace") -> str:
        """A namespace, ``default`` when absent, an RFC 1123 label as the API server requires."""
        text = self.string(value, field) or "default"
        problem = label_problem(text)
        if problem:
            raise self.fail(field, problem)
        return text

    def str_map(self, value: Any, field: str) -> dict[str, str]:
        """A map of strings, such as labels or annotations; other values are refused, not coerced.

        The API server refuses ``min-available: 3`` in annotations too, and several guides write
        it unquoted, so a scalar's message says how to quote it. A null value is the empty
        string, as it is when the API server decodes it.
        """
        out: dict[str, str] = {}
        for k, v in self.mapping(value, field).items():
            if v is None:
                v = ""
            if not isinstance(v, str):
                hint = f'; quote it: "{yaml_scalar(v)}"' if isinstance(v, bool | int | float) else ""
                raise self.fail(f"{field}[{k}]", f"must be a string{hint}")
            out[str(k)] = v
        return out

    def boolean(self, value: Any, field: str, *, default: bool = False) -> bool:
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(field, f"must be true or false, got {value!r}")
        return value

    def integer(self, value: Any, field: str, *, default: int | None = None, bits: int = 32,
                minimum: int | None = None) -> int | None:
        """An integer field of a Go type of ``bits`` bits; strings, bools and floats are refused, and
        so is a number (``default`` too, when it stands in) below ``minimum``."""
        if value is None:
            found = default
        elif isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"expected an integer, got {value!r}")
        else:
            low, high = _INT_RANGE[bits]
            if not low <= value <= high:
                raise self.fail(field, f"{value} is out of range for int{bits} ({low}..{high})")
            found = value
        if found is not None and minimum is not None and found < minimum:
            raise self.fail(field, f"must be at least {minimum}, got {found}" if minimum else
                            f"must not be negative, got {found}")
        return found

    def quantity(self, resource: str, value: Any, field: str) -> int:
        try:
            if isinstance(value, str):  # a cluster repeats a handful of quantities thousands of times
                return _cached_quantity(resource, value)
            return parse_quantity(resource, value)
        except ValueError as exc:
            raise self.fail(field, str(exc)) from exc

    def resources(self, value: Any, field: str) -> dict[str, int]:
        """A resource list (``cpu: 500m``...): each quantity in the units of ``Node.allocatable``."""
        return {str(name): self.quantity(str(name), q, f"{field}.{name}")
                for name, q in self.mapping(value, field).items()}

    def timestamp(self, value: Any, field: str) -> float | None:
        """Seconds since the epoch from an RFC 3339 time, which must carry its time zone.

        A time without one would be read in the machine's local zone, so the same file would
        schedule differently on two machines. PyYAML turns an unquoted time into a datetime,
        naive when it has no offset; that one is refused like the string.
        """
        if value is None or value == "":
            return None
        if isinstance(value, datetime):
            if value.tzinfo is None or value.utcoffset() is None:
                raise self.fail(field, f"time {value.isoformat()!r} has no time zone; add Z or an offset like +00:00")
            return value.timestamp()
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)  # seconds since the epoch, as the core keeps times
        if not isinstance(value, str):
            raise self.fail(field, f"expected an RFC 3339 time, got {value!r}")
        if not _RFC3339.fullmatch(value):
            if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}(?:[Tt ][0-9:.]+)?", value):
                raise self.fail(field, f"time {value!r} has no time zone; add Z or an offset like +00:00")
            raise self.fail(field, f"expected an RFC 3339 time like 2026-01-01T00:00:00Z, got {value!r}")
        try:
            return datetime.fromisoformat(value.upper().replace("Z", "+00:00")).timestamp()
        except ValueError as exc:
            raise self.fail(field, f"expected an RFC 3339 time, got {value!r}: {exc}") from exc


@lru_cache(maxsize=4096)
def _cached_quantity(resource: str, value: str) -> int:
    return parse_quantity(resource, value)


def read_object(raw: dict[str, Any], kind: str, *sections: str) -> tuple[Reader, dict[str, Any], list[dict[str, Any]]]:
    """The start every parser makes: a Reader naming the object (``Kind ns/name``), its metadata, and
    each of the top-level ``sections`` asked for ("spec", "status"), each a mapping ({} when absent)."""
    r = Reader(object_ref(raw, kind))
    return r, r.mapping(raw.get("metadata"), "metadata"), [r.mapping(raw.get(s), s) for s in sections]
