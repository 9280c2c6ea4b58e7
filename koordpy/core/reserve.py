"""kube-scheduler's Reserve and Bind for a job that was placed: what holds only for its members together.

Belongs here: after placement puts a job's members on nodes (each passed the filters alone, against
the pods placed before the job), the rules that count the members together (the volume rules that
count other pods and the static volumes their claims take, ``VolumeRules.together``; a binpacked job
that breaks one placed again one member at a time), the devices each member's claims get on its node
in rank order (``DeviceRules.reserve``, undone with the job's transaction, so that a job rolled back
or a gang that waits holds no device), and then the ``Bind`` decisions with their PreBind writes
(volumes, devices) and ``Scheduled`` Events, added to the cycle's result with the volumes assumed
(``VolumeRules.prebind``) in the same transaction. Does not belong here: where members go
(``koordpy.core.placement``), the rules themselves (``volumes``, ``claims``), the cycle's order and
the gang rule (``cycle``, ``gangrule``), carrying the writes out (the shells).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import Pod
from koordpy.api.owners import Owner
from koordpy.core.decisions import Bind, CycleResult, Decision, Event, EventReason, bind_of, event_of, scheduled
from koordpy.core.filters import Filters
from koordpy.core.messages import assigned, assigned_many, render
from koordpy.core.owners import OWNER_GRACE_SECONDS, missing_owner
from koordpy.core.placement import Placer
from koordpy.core.statement import Statement
from koordpy.core.txn import Txn
from koordpy.core.verdicts import (
    BoundWithoutOwner,
    Code,
    DevicesTogether,
    Failure,
    PreBindConflict,
    VolumesTogether,
)


class Reserve:
    """The Reserve step of one cycle, over its filters (the volume and device rules) and placer."""

    def __init__(self, filters: Filters, placer: Placer) -> None:
        self.filters = filters
        self.placer = placer
        self.cluster = filters.cluster

    def together(self, pods: list[Pod], topology: bool, stmt: Statement, mark: int,
                 regroup: bool = True) -> Failure | None:
        """Holds the members ``stmt`` placed (since ``mark``) to the rules that count them together:
        volumes (a binpacked job, ``topology`` False, is placed again one by one when they break one),
        then devices (placed again member by member when they break them, inside the nodes used when
        ``topology``; not when ``regroup`` is False: sub-groups and multiples are placed whole). On a
        failure everything since ``mark`` is rolled back."""
        rules = self.filters.volumes
        if rules is not None and sum(1 for p in pods if p.volumes) > 1:
            # Each member's volume filters counted the pods placed before the job, not its fellow
            # members: the ones that count other pods, and the static volumes their claims take, are
            # checked for the members together. A job that breaks one waits (conservative: no other
            # arrangement is searched), so a Strict gang is never bound in part.
            broken = self.apart(pods, stmt)
            if broken is not None:
                stmt.rollback(mark)
                if topology or self._one_by_one(pods, stmt) is not None:
                    stmt.rollback(mark)
                    pod, why = broken
                    return Failure(pod, VolumesTogether(len(self.cluster.nodes), why), code=Code.UNRESOLVABLE)
        failure = self.devices(pods, stmt)
        if failure is not None:
            placed = stmt.placed
            used = np.zeros(len(self.cluster.nodes), dtype=np.bool_)
            used[[placed[p.key] for p in pods if p.key in placed]] = True
            stmt.rollback(mark)
            if regroup and len(pods) > 1 and not any(p.volumes for p in pods) and (
                    self._member_by_member(pods, used if topology else None, stmt) is None):
                return None
            stmt.rollback(mark)
        return failure

    def devices(self, pods: list[Pod], stmt: Statement) -> Failure | None:
        """kube-scheduler's Reserve for claims: each placed member's claims allocated on its node, in
        rank order, each seeing the devices the members before it took (as kube-scheduler allocates a
        gang member by member); where one cannot have them, the gang's devices searched as a whole on
        the same nodes (``DeviceRules.reserve_together``), which fails the job only if it finds nothing."""
        rules = self.filters.devices
        if rules is None or not any(map(rules.uses, pods)):
            return None
        placed, nodes = stmt.placed, self.cluster.nodes
        members = [(pod, nodes[placed[pod.key]]) for pod in pods if pod.key in placed and rules.uses(pod)]
        start = stmt.txn.savepoint()
        for pod, node in members:
            why = rules.reserve(pod, node, stmt.txn)
            if why is not None:
                if len(members) < 2:
                    return Failure(pod, DevicesTogether(len(nodes), node.name, why))
                # Before this placement is given up: the members' devices searched as a whole, where
                # another choice of an earlier member's devices may leave this one room.
                stmt.txn.rollback(start)
                done, stopped = rules.reserve_together(members, stmt.txn)
                if done:
                    return None
                return Failure(pod, DevicesTogether(len(nodes), node.name, why, stopped))
        return None

    def _member_by_member(self, pods: list[Pod], used: npt.NDArray[np.bool_] | None, stmt: Statement) -> Failure | None:
        """The members placed again one at a time, each after the members before it took their devices
        (kube-scheduler's order for a gang: a claim they share is pinned where the first allocated it, a
        node whose devices the first took is not offered to the next), confined to the nodes the job's
        own placement used when it asked for a topology (``used``), so it stays inside the domain chosen."""
        rules = self.filters.devices
        assert rules is not None
        nodes, saved = self.cluster.nodes, self.placer.only
        self.placer.only = saved if used is None else used if saved is None else used & saved
        try:
            for pod in pods:
                failure = self.placer.binpack([pod], stmt)
                if failure is not None:
                    return failure
                at = stmt.placed[pod.key]
                why = rules.reserve(pod, nodes[at], stmt.txn) if pod.claims else None
                if why is not None:
                    return Failure(pod, DevicesTogether(len(nodes), nodes[at].name, why))
        finally:
            self.placer.only = saved
        return None

    def held(self, pods: list[Pod], reserved: Mapping[str, str], stmt: Statement) -> None:
        """The members a NonStrict gang holds room for take their devices on their nodes, on ``stmt``
        (they waited holding room, not devices: a job that waits again gives them back); what one
        cannot have any more is said when it is bound."""
        rules, index = self.filters.devices, self.cluster.node_index
        if rules is None:
            return
        for pod in pods:
            node = reserved.get(pod.key)
            if node is not None and rules.uses(pod) and node in index and pod.key not in rules.bindings:
                rules.reserve(pod, self.cluster.nodes[index[node]], stmt.txn)

    def apart(self, pods: list[Pod], stmt: Statement) -> tuple[Pod, str] | None:
        """The volume rule ``pods``, as ``stmt`` places them, break together (the member and why), else
        None."""
        rules = self.filters.volumes
        if rules is None:
            return None
        by_key = {p.key: p for p in pods}
        placing: dict[int, list[Pod]] = {}
        for key, node in stmt.placed.items():
            if key in by_key and by_key[key].volumes:
                placing.setdefault(node, []).append(by_key[key])
        return rules.together(placing, self.cluster.nodes, self.filters.placed())

    def joins(self, pod: Pod, pods: list[Pod], stmt: Statement) -> Failure | None:
        """Why ``pod``, just placed on ``stmt`` after the members of ``pods`` placed before it (a
        member added in kube-scheduler's group cycle), breaks a volume rule with them, else None: its
        volume filters counted the pods placed before the job, not the members placed before it, so
        the rules that count other pods are checked with them, as for a job."""
        if not pod.volumes:
            return None
        broken = self.apart([p for p in pods if p.key in stmt.placed], stmt)
        if broken is None:
            return None
        return Failure(pod, VolumesTogether(len(self.cluster.nodes), broken[1]), code=Code.UNRESOLVABLE)

    def _one_by_one(self, pods: list[Pod], stmt: Statement) -> Failure | None:
        """Binpacks a job without a topology request one member at a time, each confined to the nodes
        where its volumes still pass together with the members placed before it (kube-scheduler's
        order for a gang: pod by pod)."""
        rules = self.filters.volumes
        assert rules is not None
        before = self.filters.placed()
        placing: dict[int, list[Pod]] = {}
        saved = self.placer.only
        try:
            for pod in pods:
                ok = self.filters.static(pod).mask.copy()
                if pod.volumes:
                    for i in np.flatnonzero(ok).tolist():
                        trial = {**placing, i: [*placing.get(i, []), pod]}
                        ok[i] = rules.together(trial, self.cluster.nodes, before) is None
                self.placer.only = ok if saved is None else ok & saved
                failure = self.placer.binpack([pod], stmt)
                if failure is not None:
                    return failure
                if pod.volumes:
                    placing.setdefault(stmt.placed[pod.key], []).append(pod)
        finally:
            self.placer.only = saved
        return None

    def bind(self, placed: dict[str, int], by_key: Mapping[str, Pod], owners: dict[str, Owner],
             result: CycleResult, say: Callable[[Pod, str], None]) -> None:
        """The Bind decisions for what the job placed, in order: a Bind (with its PreBind writes) and
        its Scheduled Event per pod (a gang's thousands in one pass, the cluster told of them at once),
        added to ``result`` in the job's transaction; the volumes PreBind will write are assumed in it
        too (``VolumeRules.prebind``), so a job rolled back leaves them as they were."""
        rules, devices = self.filters.volumes, self.filters.devices
        nodes = self.cluster.nodes

        def special(obj: Pod | None) -> bool:
            return obj is not None and bool((obj.volumes and rules is not None) or obj.owner_references
                                            or (devices is not None and devices.uses(obj)))

        if not any(special(by_key.get(k)) for k in placed):
            # Every pod is plain (a gang's usual case): its decisions in one pass, the same as below.
            plain = list(placed)
            on = [nodes[i].name for i in placed.values()]
            result.bind(plain, on)
            result.decide(*scheduled(plain, on, assigned_many(plain, on)))
            self.cluster.bound_many(plain)
            return
        binding: list[str] = []  # every pod bound, for the cluster
        # Binds and decisions not added to ``result`` yet: added in order, before a pod says why it is
        # not bound, as a batch (one undo each) rather than one by one.
        keys: list[str] = []
        names: list[str] = []
        decided: list[Decision] = []

        def flush() -> None:
            if keys:
                result.bind(keys[:], names[:])
            if decided:
                result.decide(*decided)
            keys.clear()
            names.clear()
            decided.clear()

        for pod, node_idx in placed.items():
            node = nodes[node_idx].name
            obj = by_key.get(pod)
            if obj is None or not special(obj):
                binding.append(pod)
                keys.append(pod)
                names.append(node)
                decided.append(bind_of(pod, node))
                decided.append(event_of("Pod", pod, "Normal", EventReason.SCHEDULED, assigned(pod, node)))
                continue
            txn = self.cluster.txn or Txn()
            volumes = None
            if rules is not None and obj.volumes:
                try:  # VolumeBinding's Reserve: the PVs and nodes its claims get, taken for later pods
                    volumes = rules.prebind(obj, nodes[node_idx], txn)
                except LookupError as exc:
                    # Only a member of a job placed together can meet this: a member before it took the
                    # PV its claim matched on that node. It is not bound, and tries again.
                    self.cluster.count(pod, None)
                    flush()
                    say(obj, render(PreBindConflict(len(nodes), str(exc))))
                    continue
            # DynamicResources' Reserve was made with the placement (``devices``); a member a NonStrict
            # gang held in reserve (no device while it waited) gets its devices now, or tries again.
            uses = devices is not None and devices.uses(obj)
            claims = devices.bindings.get(pod) if devices is not None and uses else None
            if devices is not None and uses and claims is None:
                why = devices.reserve(obj, nodes[node_idx], txn)
                if why is not None:
                    self.cluster.count(pod, None)
                    flush()
                    say(obj, render(DevicesTogether(len(nodes), node, why)))
                    continue
                claims = devices.bindings.get(pod)
            binding.append(pod)
            keys.append(pod)
            names.append(node)
            decided.append(Bind(pod, node, volumes, claims))
            decided.append(Event("Pod", pod, "Normal", EventReason.SCHEDULED, assigned(pod, node)))
            ref = missing_owner(obj, owners)
            if ref is not None:  # its grace ran out: placed as today, but not silently
                decided.append(Event("Pod", pod, "Warning", EventReason.OWNER_NOT_FOUND,
                                     render(BoundWithoutOwner(ref.kind, obj.namespace, ref.name,
                                                              OWNER_GRACE_SECONDS))))
        flush()
        self.cluster.bound_many(binding)
