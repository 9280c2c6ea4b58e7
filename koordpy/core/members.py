"""What the cycle reads of many pods at once, parsed once per distinct text rather than once per pod.

Belongs here: per-pod values a gang's members mostly share or that the cycle asks in more than one
place, computed for a list of pods in one pass (the network-topology index). Each gives exactly
what asking pod by pod gives (``tests/core/test_members.py`` holds them to it), errors included.
Does not belong here: what the values mean to placement (``koordpy.core.placement``) or to the
gang rules (``koordpy.core.gangrule``).
"""

from __future__ import annotations

from collections.abc import Sequence

from koordpy.api.objects import Pod
from koordpy.api.podgroup import ANN_TOPOLOGY_INDEX, topology_index

# An index's text -> its value, for texts that parsed: the i-th members of every gang share the text.
_INDEXES: dict[str, int] = {}
MAX_INDEXES = 1 << 16


def topology_indexes(pods: Sequence[Pod]) -> list[int | None]:
    """Each pod's network-topology index (``topology_index``; None: it has none), in order. Raises
    the ParseError ``topology_index`` raises for the first pod whose index is wrong."""
    out: list[int | None] = []
    known = _INDEXES
    for pod in pods:
        text = pod.annotations.get(ANN_TOPOLOGY_INDEX)
        if text is None:
            out.append(None)
            continue
        value = known.get(text)
        if value is None:
            value = topology_index(f"Pod {pod.key}", pod.annotations)
            assert value is not None
            if len(known) >= MAX_INDEXES:
                known.clear()
            known[text] = value
        out.append(value)
    return out
