"""The one error type of the API layer: it names the object and the field at fault."""

from __future__ import annotations

from koordpy.errors import BadInput


class ParseError(BadInput, ValueError):
    """A raw object that cannot be turned into a model.

    ``obj`` is ``Kind namespace/name`` (or ``Kind name`` for cluster-scoped kinds) and
    ``field`` a dotted path, so that the message points where the user has to look.
    """

    def __init__(self, obj: str, field: str, message: str) -> None:
        self.obj = obj
        self.field = field
        self.message = message
        super().__init__(f"{obj}: {field}: {message}")


def object_ref(raw: dict[str, object], kind: str | None = None) -> str:
    """``Kind ns/name`` for messages, tolerant of the very malformation being reported."""
    meta = raw.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name") or "<unnamed>"
    ns = meta.get("namespace")
    k = kind or str(raw.get("kind") or "<unknown kind>")
    return f"{k} {ns}/{name}" if ns else f"{k} {name}"
