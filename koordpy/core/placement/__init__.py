"""Where a job's pods go: a topology style's search (gather, levels, tiers, exclusive) or plain binpacking,
under the rules between its members.

A job is the pending pods one attempt must place together (a GangGroup's, or one pod).
Placement makes its moves on a ``Statement`` and reports the first pod it could not
place with the reason; the caller decides whether to commit or discard. One module per concern:
``base`` (the Placer's state, masks and shapes), ``caps`` (per-node caps, distinct pods),
``search`` (near running members, ties, multiples), ``binpack``, ``gather``, ``levels``,
``tiers`` (Volcano, soft mode included), ``exclusive`` (JobSet's Jobs, each alone in a domain),
``styles`` (which style), ``interplay`` (the job's entry: the rules between members, topology
spread inside a gang), ``explain`` (the closest domain).
"""

from koordpy.core.members import rank_order as rank_order  # where callers have long found it
from koordpy.core.placement.interplay import Placer as Placer
from koordpy.core.placement.search import MAX_LISTED_DOMAINS as MAX_LISTED_DOMAINS

__all__ = ["MAX_LISTED_DOMAINS", "Placer", "rank_order"]
