"""Topology manifests written from node labels (``koordpy topology generate``): what every
dialect's generator shares.

Each dialect that has a topology object writes its own (``Dialect.manifests``: Koordinator's
ClusterNetworkTopology, Volcano's HyperNodes, the Kueue / KAI Topology); the command line picks the
dialect by its ``manifest_format``. Belongs here: the result (``Generated``), the error a generator
raises for label keys or a name it cannot use (``Unusable``), and the pure helpers the generators
share (short names from label keys, names made valid, warnings about nodes missing a label).
Does not belong here: any one format (its dialect's module), reading files or flags (the
command line, ``koordpy.cli.topology``). Light on purpose: the command line imports it at start-up.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from koordpy.core.naming import natural_key
from koordpy.errors import BadInput

if TYPE_CHECKING:  # the API models load pydantic, which the command line pays for only where used
    from koordpy.api.objects import Node

_INVALID = re.compile(r"[^a-z0-9-]+")


@dataclass
class Generated:
    """The objects a generator wrote, in order, and what the user should know about the input."""

    documents: list[dict[str, Any]]
    warnings: list[str] = field(default_factory=list)


class Unusable(BadInput):
    """Label keys (``levels``) or a name (``name``) a manifest cannot be made from; ``argument``
    says which, so that the command line names its own flag."""

    def __init__(self, argument: Literal["levels", "name"], problem: str) -> None:
        super().__init__(problem)
        self.argument = argument


def short_names(keys: Sequence[str]) -> list[str]:
    """Each key's last segment (``rack`` for ``example.com/rack``), or the whole key made a name
    where two keys share a last segment, so tiers and layers stay distinguishable."""
    last = [k.rpartition("/")[2] for k in keys]
    return [s if last.count(s) == 1 else sanitise(k) for s, k in zip(last, keys, strict=True)]


def sanitise(text: str) -> str:
    """``text`` lower-cased, each run of what a name cannot hold made one ``-``."""
    return _INVALID.sub("-", text.lower()).strip("-")


def natural(name: str) -> tuple[object, ...]:
    return tuple(natural_key(name))


def missing_warnings(nodes: Sequence[Node], keys: Sequence[str], consequence: Callable[[str], str]) -> list[str]:
    """One warning per label key some nodes lack, naming the first few and what it means for them."""
    out = []
    for k in keys:
        missing = sorted((n.name for n in nodes if not n.labels.get(k)), key=natural)
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
            out.append(f"{len(missing)} node(s) have no label {k} ({shown}): {consequence(k)}")
    return out
