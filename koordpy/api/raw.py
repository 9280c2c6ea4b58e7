"""Small helpers that read fields out of raw dicts and raise ParseError on the wrong shape."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from koordpy.api.errors import ParseError


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

    def str_map(self, value: Any, field: str) -> dict[str, str]:
        out: dict[str, str] = {}
        for k, v in self.mapping(value, field).items():
            if isinstance(v, bool) or not isinstance(v, str | int | float):
                raise self.fail(f"{field}.{k}", f"expected a string, got {v!r}")
            out[str(k)] = v if isinstance(v, str) else str(v)
        return out

    def integer(self, value: Any, field: str, *, default: int | None = None) -> int | None:
        if value is None:
            return default
        if isinstance(value, bool):
            raise self.fail(field, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise self.fail(field, f"expected an integer, got {value!r}")

    def timestamp(self, value: Any, field: str) -> float | None:
        if value is None or value == "":
            return None
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)  # seconds since the epoch, as the core keeps times
        if not isinstance(value, str):
            raise self.fail(field, f"expected an RFC 3339 time, got {value!r}")
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError as exc:
            raise self.fail(field, f"expected an RFC 3339 time, got {value!r}") from exc
