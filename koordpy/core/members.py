"""What the cycle reads of many pods at once, parsed once per distinct text rather than once per pod.

Belongs here: per-pod values a gang's members mostly share or that the cycle asks in more than one
place, computed for a list of pods in one pass (the network-topology index), and the rank order a
gang's members are placed in (``rank_order``). Each gives exactly
what asking pod by pod gives (``tests/core/test_members.py`` holds them to it), errors included.
Does not belong here: what the values mean to placement (``koordpy.core.placement``) or to the
gang rules (``koordpy.core.gangrule``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from koordpy.api.objects import Pod
from koordpy.api.podgroup import ANN_TOPOLOGY_INDEX, topology_index
from koordpy.api.workload import completion_index
from koordpy.core.naming import natural_key

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


def rank_order(pods: list[Pod], indexes: list[int | None] | None = None) -> list[Pod]:
    """Pods by network-topology index (numeric), then those without one, by name. Among the members
    of a Workload PodGroup (``spec.schedulingGroup``), the Job completion index comes before the name:
    an Indexed Job's pods are placed in index order (only theirs, so other gangs keep their order).
    ``indexes``: the pods' topology indexes (``topology_indexes``), when the caller has them."""
    indexes = topology_indexes(pods) if indexes is None else indexes
    if None not in indexes and len(set(indexes)) == len(pods):
        # Every pod has an index of its own (a gang's usual case): the index alone decides the order.
        ranks = cast(list[int], indexes)
        return [pods[i] for i in sorted(range(len(pods)), key=ranks.__getitem__)]

    def key(i: int) -> tuple[bool, int, bool, int, tuple[object, ...], str]:
        p, idx = pods[i], indexes[i]
        done = completion_index(p.annotations, p.labels) if p.scheduling_group else None
        return (idx is None, idx or 0, done is None, done or 0, natural_key(p.name), p.namespace)

    return [pods[i] for i in sorted(range(len(pods)), key=key)]
