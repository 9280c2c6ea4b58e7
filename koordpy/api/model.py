"""What koordpy's parsed objects share beyond their fields.

Belongs here: ``NamespacedKey``, the ``namespace/name`` key a namespaced object is filed and named
by; ``Record``, the base of the frozen slotted dataclasses the cache holds by the thousand (pods,
nodes and their parts) in place of pydantic models; and ``Shared``, which keeps equal values parsed
from different objects once. They are mixins of behaviour only: each model declares its own fields
(the ``namespace`` and ``name`` first) so that the model reads whole in its own module. Not here:
parsing (each model's ``from_raw``) or anything of one kind.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Generic, Protocol, Self, TypeVar, cast

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

V = TypeVar("V")
T = TypeVar("T")
SHARED_LIMIT = 4096  # distinct values a Shared table holds before it starts afresh
# Characters of map keys and values a Shared table holds before it starts afresh: a table keeps the
# values of objects long deleted, and a pod's annotations alone may be 256 KiB (a last-applied
# configuration, a workflow template); 4,096 such maps would keep a GiB alive.
SHARED_CHARS = 1 << 22
INTERN_LIMIT = 256  # longer map values are kept as read: seldom repeated, and costly to hash


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


class Record:
    """The base of a frozen slotted dataclass model: what its callers used of pydantic's models.

    A dataclass compares, hashes and prints (``repr``) by its fields in order, as pydantic's frozen
    models did; ``model_copy(update=...)`` is ``dataclasses.replace``, unchecked as pydantic's was."""

    __slots__ = ()

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        return cast(Self, replace(cast("DataclassInstance", self), **(update or {})))


class Shared(Generic[V]):
    """Equal values read from different objects, kept once: the first one read is handed out for
    every later equal one. Only for values nobody changes (the models are frozen, and their maps are
    never written to). A gang's pods carry the same labels, requests, tolerations and owners; as
    parsed, each pod would hold its own copy of each (and its own copy of every string in them,
    each watch event being decoded on its own). Bounded: after ``SHARED_LIMIT`` distinct values the
    table starts afresh, so values nobody shares cost at most that much; maps also after
    ``SHARED_CHARS`` characters, so that large ones nobody shares cost little too."""

    __slots__ = ("_chars", "_memo")

    def __init__(self) -> None:
        self._memo: dict[Hashable, V] = {}
        self._chars = 0  # characters of the maps held (``map``)

    def get(self, value: V, key: Hashable | None = None, chars: int = 0) -> V:
        """The value held for ``value`` (looked up by ``key`` when ``value`` is not hashable).
        ``chars``: what holding it costs, in characters (``map``'s keys and values)."""
        at = value if key is None else key
        found = self._memo.get(at)
        if found is not None:
            return found
        if chars > SHARED_CHARS:
            return value  # larger than a whole table: handed back, not held
        if len(self._memo) >= SHARED_LIMIT or self._chars + chars > SHARED_CHARS:
            self._memo.clear()
            self._chars = 0
        self._memo[at] = value
        self._chars += chars
        return value

    def map(self: Shared[dict[str, T]], value: dict[str, T]) -> dict[str, T]:
        """The map held for ``value`` (equal items in the same order), its strings interned."""
        found = self._memo.get(tuple(value.items()))
        if found is not None:
            return found
        held = {sys.intern(k): cast(T, sys.intern(v)) if isinstance(v, str) and len(v) <= INTERN_LIMIT else v
                for k, v in value.items()}
        chars = sum(len(k) + (len(v) if isinstance(v, str) else 0) for k, v in held.items())
        return self.get(held, tuple(held.items()), chars)
