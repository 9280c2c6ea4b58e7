"""The simulator's input error, importable without the simulator (the CLI raises it while reading files)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from koordpy.errors import BadInput

if TYPE_CHECKING:
    from koordpy.api.errors import ParseError


class InputError(BadInput, ValueError):
    """Bad input: names the source, the object and the field."""

    def __init__(self, source: str, error: ParseError | str) -> None:
        self.source = source
        super().__init__(f"{source}: {error}")
