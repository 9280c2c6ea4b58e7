"""What koordpy's parsed objects share beyond their fields.

Belongs here: ``NamespacedKey``, the ``namespace/name`` key a namespaced object is filed and named
by. It is a mixin of behaviour only, not a pydantic base: each model declares its own fields (the
``namespace`` and ``name`` first) so that the model reads whole in its own module. Not here:
parsing (each model's ``from_raw``) or anything of one kind.
"""

from __future__ import annotations

from typing import Protocol


class _Named(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...


class NamespacedKey:
    """``key``: ``namespace/name``, for a model with ``namespace`` and ``name`` fields."""

    __slots__ = ()

    @property
    def key(self: _Named) -> str:
        return f"{self.namespace}/{self.name}"
