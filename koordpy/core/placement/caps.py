"""The per-node cap of a job (members that repel each other, the pods a node's devices take) and
the job's distinct pods (one per set of node constraints, rules between pods and claims), on which
the caps, the feasibility masks and the closest domain's reasons are counted.

Does not belong here: how the cap is applied to offerslots (``base.PlacerBase._free``), when a
job is placed again on a wider cap (``interplay``).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.core.filters import constraints_key
from koordpy.core.placement.base import PlacerBase
from koordpy.core.podrules import rules_key


class Caps(PlacerBase):
    def _caps(self, pods: list[Pod], cap_on: npt.NDArray[np.bool_] | None,
              together: bool = False) -> npt.NDArray[np.int64] | None:
        """The per-node cap of a job: one member where they repel each other; the pods the node's
        devices take, when they claim devices (a gang of 8-GPU claims gathers as one of 8-GPU requests),
        pod after pod or (``together``) with their devices searched as a whole."""
        cap = None if cap_on is None else np.where(cap_on, 1, np.iinfo(np.int64).max).astype(np.int64)
        devices = self.filters.devices
        if devices is not None and len(pods) > 1 and any(map(devices.uses, pods)):  # one pod: its mask says
            mask = self._mask(np.logical_or.reduce([self.filters.static(p).mask for p in self._distinct(pods)]))
            counted = devices.capacity(pods, self.cluster.nodes, mask, len(pods), together)
            if counted is not None:
                cap = counted if cap is None else np.minimum(cap, counted)
        return cap

    # A pod without node constraints or rules between pods, where no present pod repels any: its
    # key in ``_distinct``, as ``constraints_key`` and the rules would make it.
    _PLAIN = (((), (), (), ()), None)

    def _distinct(self, pods: list[Pod]) -> list[Pod]:
        """One pod per set of node constraints and rules between pods (each member's rules count):
        the last of each, in the order the sets first appear."""
        rules = self.filters.rules
        presence = rules.presence
        repelling = presence.holding > 0
        plain = self._PLAIN
        out: dict[tuple[object, ...], Pod] = {}
        claims = self.filters.devices
        for p in pods:
            devices = claims is not None and claims.uses(p)  # its claims filter nodes too
            if repelling or devices or (p.node_selector or p.affinity_terms or p.tolerations or p.required_features
                                        or p.pod_affinity or p.pod_anti_affinity or p.host_ports or p.spread):
                key = (constraints_key(p), rules_key(p, presence) if rules.applies(p) else None)
                if devices:
                    # Pods whose claims have equal keys pass DynamicResources' filter on the same
                    # nodes; their volumes' filters are their own.
                    assert claims is not None
                    out[(*key, id(self.filters.static(p)) if p.volumes else claims.key(p))] = p
                else:
                    out[key] = p
            else:
                out[plain] = p
        return list(out.values())
