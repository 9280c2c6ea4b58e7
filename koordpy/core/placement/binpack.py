"""Plain binpacking for a job without topology: the most allocated nodes first, shape by shape.

Does not belong here: topology searches (``gather``, ``levels``, ``tiers``), members placed one by
one under the rules between them (``interplay``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import PODS, Pod
from koordpy.core.filters import constraints_key
from koordpy.core.messages import AFTER_MEMBERS
from koordpy.core.placement.base import PLAIN, Options, PlacerBase
from koordpy.core.podrules import UNRESOLVABLE, rules_key
from koordpy.core.statement import Statement
from koordpy.core.verdicts import (
    Failure,
    NodesFiltered,
    resolvable,
)
from koordpy.kernels import (
    node_offerslots,
)


class Binpack(PlacerBase):
    def binpack(self, pods: list[Pod], stmt: Statement) -> Failure | None:
        """``_binpack`` outside a job's placement (no options)."""
        return self._binpack(pods, stmt, PLAIN)

    def _binpack(self, pods: list[Pod], stmt: Statement, opts: Options) -> Failure | None:
        """Fills the most allocated nodes first, shape by shape, pods in rank order."""
        shapes: dict[tuple[object, ...], list[Pod]] = {}
        presence = self.filters.rules.presence
        for p in pods:
            req = self.cluster.request_vector(p)
            own = id(self.filters.static(p)) if self.uses_devices(p) else None  # its claims filter nodes too
            shapes.setdefault((req.tobytes(), constraints_key(p), rules_key(p, presence), own), []).append(p)
        for members in shapes.values():
            req = self.cluster.request_vector(members[0])
            mask = self._mask(self.filters.static(members[0]).mask if opts.relaxed else self.filters.mask(members[0]))
            slots = node_offerslots(self._free(opts), req, mask)
            most = self._most_allocated(req)
            score = self.filters.rules.score(members[0], np.arange(len(slots), dtype=np.int64))
            # kube-scheduler weighs InterPodAffinity and PodTopologySpread 2 each against 1 for
            # resource fit; binpacking (0..1 here) is that 1, on the same 0..100 scale.
            rank = -most if score is None else -(100.0 * most + 2.0 * score)
            order = np.lexsort((np.arange(len(slots)), rank))
            ordered = slots[order]
            before = np.cumsum(ordered) - ordered
            take = np.clip(len(members) - before, 0, ordered)
            nodes = np.repeat(order, take)
            placed = len(nodes)
            stmt.assume_many([p.key for p in members[:placed]], nodes.astype(np.int64), req)
            if placed < len(members):
                failed = members[placed]
                counts = self.filters.explain_counts(failed, req, only=self.only)
                if opts.cap is not None and self.uses_devices(failed):
                    # Nodes the member passes alone, where only the count of the job's pods their
                    # devices take (the cap) stopped it: without a reason the failure would say
                    # nothing and look unresolvable, though freeing devices may let the job fit.
                    fits = np.all((req == 0) | (self.cluster.free() >= req), axis=1)
                    alone = int(np.count_nonzero(self._mask(self.filters.mask(failed)) & fits))
                    if alone:
                        counts[AFTER_MEMBERS] += alone
                return Failure(failed, NodesFiltered(len(self.cluster.nodes), tuple(counts.items())),
                               code=resolvable(bool(self._mask(self.filters.static(failed, True).mask).any())
                                               and not set(counts) <= UNRESOLVABLE),
                               filtered=tuple(sorted(counts.items())), desired=len(members))
        return None

    def _most_allocated(self, req: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        cols = [j for j, r in enumerate(self.cluster.resources) if req[j] > 0 and r != PODS] or [
            self.cluster.res_index[PODS]]
        alloc = self.cluster.allocatable[:, cols].astype(np.float64)
        used = self.cluster.used[:, cols].astype(np.float64)
        if self.cluster.backed and self.filters.devices is not None:  # DRA's columns count its devices
            self.filters.devices.score_columns(self.cluster.resources, self.cluster.nodes, cols, alloc, used)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(alloc > 0, used / alloc, 1.0)
        return np.asarray(frac.mean(axis=1), dtype=np.float64)
