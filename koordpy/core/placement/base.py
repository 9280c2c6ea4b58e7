"""What every placement style stands on: the ``Placer``'s state (its filters and cluster, the
nodes a caller confines it to, whether failures diagnose), the per-call ``Options`` one placement of
a job passes down its searches (the per-node cap, whether the rules between pods are left to a
member-by-member placement), and the masks and shapes of a job's pods.

Does not belong here: a style's search (``gather``, ``levels``, ``tiers``, ``binpack``), the
rules between a job's members (``interplay``), device caps (``caps``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import PODS, Pod
from koordpy.core.filters import Filters
from koordpy.core.podrules import RULE_REASONS, UNRESOLVABLE, rules_key
from koordpy.core.tree import TopologyTree


@dataclass(frozen=True, eq=False)
class Options:
    """How one placement call of a job sees the cluster, passed down its searches (never stored)."""

    # At most this many of the job's pods per node (one where members repel each other there; what
    # their devices allow, ``DeviceRules.capacity``), else None.
    cap: npt.NDArray[np.int64] | None = None
    # A proposal for members placed one by one: the rules between pods are left to that placement.
    relaxed: bool = False


PLAIN = Options()  # a call outside a job's placement: no cap, every rule


class PlacerBase:
    def __init__(self, filters: Filters) -> None:
        self.filters = filters
        self.cluster = filters.cluster
        # Nodes a call is confined to, else None: set around it and restored by whoever narrows it (a
        # preemption dry run's candidate, a domain of the upstream group cycle, Reserve's members placed
        # one by one, the job's proposal inside a next candidate domain).
        self.only: npt.NDArray[np.bool_] | None = None
        # Whether a failure says what the closest domain lacked (``Failure.closest``): a dry run for
        # ``koordpy explain`` asks; the cycle does not pay for counting reasons per domain.
        self.diagnose = False

    def uses_devices(self, pod: Pod) -> bool:
        return self.filters.devices is not None and self.filters.devices.uses(pod)

    def _mask(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        return mask if self.only is None else mask & self.only

    def _free(self, opts: Options) -> npt.NDArray[np.int64]:
        """Free room per node as the job's offerslots see it: with a per-node cap, the pods column
        says no more than the cap, so every offerslot (the kernels' too) is at most the cap."""
        free = self.cluster.free()
        if opts.cap is not None:
            col = self.cluster.res_index[PODS]
            free[:, col] = np.minimum(free[:, col], opts.cap)
        return free

    def feasible(self, pods: list[Pod], tree: TopologyTree, rules: bool = True) -> npt.NDArray[np.bool_]:
        """``_feasible`` outside a job's placement (no options)."""
        return self._feasible(pods, tree, PLAIN, rules)

    def _feasible(self, pods: list[Pod], tree: TopologyTree, opts: Options,
                  rules: bool = True) -> npt.NDArray[np.bool_]:
        """Nodes every one of ``pods`` may use and that the tree's topology holds (``rules``: the
        rules between pods too, given where pods are now; preemption prices candidates without
        them, as removing pods may lift them)."""
        masks = {id(m): m for m in (self.filters.static(p, loose=not rules).mask for p in pods)}
        mask = self._mask(~tree.outside)
        for m in masks.values():
            mask = mask & m
        ruled = {rules_key(p, self.filters.rules.presence): p for p in pods
                 if rules and not opts.relaxed and self.filters.rules.applies(p)}
        for p in ruled.values():
            check = self.filters.check(p)
            if check is not None:
                mask = mask & check.mask
        return np.asarray(mask, dtype=np.bool_)

    def _resolvable(self, pods: list[Pod], tree: TopologyTree, filtered: Counter[str] | None) -> bool:
        """Whether removing pods could let the job fit: some node passes the node-only filters, and
        the rules between pods that removed nodes are not only those no removal lifts (a missing
        affinity match, a missing label)."""
        kinds = {id(self.filters.static(p)): p for p in pods}.values()
        if not any(bool(self.feasible([p], tree, rules=False).any()) for p in kinds):
            return False
        ruled = set(filtered or ()) & {*UNRESOLVABLE, *RULE_REASONS}
        return not ruled or not ruled <= UNRESOLVABLE

    def _shapes(self, pods: list[Pod]) -> dict[bytes, tuple[npt.NDArray[np.int64], list[int]]]:
        """Pods grouped by request vector: (vector, positions in ``pods``)."""
        return self.cluster.shapes(pods)

    def kinds(self, pods: list[Pod]) -> list[list[Pod]]:
        """Pods by request and by the nodes their filters allow: the kinds of pod of a job."""
        out: dict[tuple[bytes, int, object], list[Pod]] = {}
        for p in pods:
            key = (self.cluster.request_vector(p).tobytes(), id(self.filters.static(p)),
                   rules_key(p, self.filters.rules.presence) if self.filters.rules.applies(p) else None)
            out.setdefault(key, []).append(p)
        return list(out.values())
