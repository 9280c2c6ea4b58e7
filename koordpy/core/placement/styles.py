"""Which style places a job's pods together: its ``Requirement``'s style (tiers for sub-groups, save
JobSet's exclusive style), the search scope computed once for it, the notes a failure carries.
"""

from __future__ import annotations

from dataclasses import replace

from koordpy.api.objects import Pod
from koordpy.core.placement.base import PLAIN, Options
from koordpy.core.placement.binpack import Binpack
from koordpy.core.placement.exclusive import Exclusive
from koordpy.core.placement.gather import Gather
from koordpy.core.placement.levels import Levels
from koordpy.core.placement.tiers import Tiers
from koordpy.core.requirement import Requirement, SearchScope
from koordpy.core.statement import Statement
from koordpy.core.verdicts import (
    Code,
    Failure,
    Text,
    WithNotes,
)


class Styles(Gather, Levels, Tiers, Exclusive, Binpack):
    def place(self, pods: list[Pod], req: Requirement, stmt: Statement) -> Failure | None:
        """``_place`` outside a job's placement (no options)."""
        return self._place(pods, req, stmt, PLAIN)

    def _place(self, pods: list[Pod], req: Requirement, stmt: Statement, opts: Options) -> Failure | None:
        """Places ``pods`` together as ``req`` asks; the failure names the pod that carries the reason."""
        if req.failure is not None:
            return Failure(pods[0], Text(req.failure), code=Code.UNRESOLVABLE)
        tree = self.cluster.trees[req.tree]
        search = SearchScope.of(req, tree)
        if req.style == "exclusive":
            failure = self.exclusive(pods, req, stmt, opts)
        elif req.subgroups or req.style == "tiers":
            failure = self.tiers(pods, req, search, stmt, opts)
        elif req.style == "levels":
            failure = self.levels(pods, req, search, stmt, opts)
        else:
            failure = self._gather(pods, tree, req, self._multiples(tree, req), search, stmt, opts)
        if failure is not None and req.notes:
            return replace(failure, why=WithNotes(failure.why, req.notes))
        return failure
