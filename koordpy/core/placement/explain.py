"""What the closest domain lacked when a job fits nowhere (``Failure.closest``), counted only
for a dry run that diagnoses (``koordpy explain``).

Does not belong here: the failures themselves (each style builds its own), their words
(``koordpy.core.messages``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.core.naming import natural_key
from koordpy.core.placement.caps import Caps
from koordpy.core.tree import TopologyTree
from koordpy.core.verdicts import (
    Closest,
)


class Explain(Caps):
    def _closest(self, pods: list[Pod], tree: TopologyTree, sums: npt.NDArray[np.int64], listed: list[int],
                 name: Callable[[int], str]) -> Closest | None:
        """What the domain of ``listed`` with the most offerslots lacked (the first by name among
        equals, as ``koordpy explain`` lists them): per reason, the nodes of it that the job's pods
        cannot use at all, the most any one shape of them is refused by. None unless ``diagnose``."""
        if not self.diagnose or not listed:
            return None
        d = min(listed, key=lambda d: (-int(sums[d]), natural_key(name(d))))
        nodes = tree.subtree_nodes(d)
        only = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
        only[nodes] = True
        lacks: Counter[str] = Counter()
        for pod in self._distinct(pods):
            for why, n in self.filters.explain_counts(pod, self.cluster.request_vector(pod), self._mask(only)).items():
                lacks[why] = max(lacks[why], n)
        return Closest(name(d), int(sums[d]), len(nodes), tuple(sorted(lacks.items(), key=lambda wn: (-wn[1], wn[0]))))
