"""Rules between pods: inter-pod affinity and anti-affinity, topology spread and host ports.

Belongs here: where other pods are as these rules see them (``Presence``: running, nominated and
reserved pods, and the moves of the statement being tried, fed in by ``Cluster.change``), which
nodes the rules leave a pod and why not in kube-scheduler's words (``PodRules.check``), how the
members of one job constrain each other (``PodRules.interplay``), and the preferred terms' score.
Does not belong here: rules that look at the node alone (``koordpy.core.filters``), the search
for a placement (``koordpy.core.placement``).

Everything is kept as per-node counts in numpy arrays: a ``Tracker`` counts, per node, the pods
that match one selector (in some namespaces); a rule turns those counts into counts per topology
domain with one ``bincount`` over the domain id of every node. Trackers are made when a pod first
asks and then follow every move, so a cycle of many like pods pays the scan of existing pods once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from koordpy.api.objects import HostPort, Node, Pod, PodAffinityTerm, PodSelector, SpreadConstraint

# kube-scheduler's words (InterPodAffinity, PodTopologySpread, NodePorts), worded in koordpy.core.messages.
from koordpy.core.messages import AFFINITY_RULES as AFFINITY_RULES
from koordpy.core.messages import ANTI_AFFINITY_RULES as ANTI_AFFINITY_RULES
from koordpy.core.messages import EXISTING_ANTI_AFFINITY as EXISTING_ANTI_AFFINITY
from koordpy.core.messages import PORTS as PORTS
from koordpy.core.messages import SPREAD as SPREAD
from koordpy.core.messages import SPREAD_LABEL as SPREAD_LABEL

RULE_REASONS = frozenset({AFFINITY_RULES, ANTI_AFFINITY_RULES, EXISTING_ANTI_AFFINITY, SPREAD, SPREAD_LABEL, PORTS})
# Reasons preemption cannot help with: removing pods never adds a match or a label.
UNRESOLVABLE = frozenset({AFFINITY_RULES, SPREAD_LABEL})

MAX_TRACKERS = 512  # trackers of selectors nobody asks about any more are dropped past this


@dataclass(frozen=True)
class Match:
    """Which pods a tracker counts: those in ``namespaces`` (None: any) whose labels match every
    selector of ``selectors`` (one per affinity term: a pod counts for required affinity only if
    it matches all of the incoming pod's terms); ``live``: terminating pods do not count (spread)."""

    namespaces: frozenset[str] | None
    selectors: tuple[PodSelector, ...]
    live: bool = False

    def __call__(self, pod: Pod) -> bool:
        if self.namespaces is not None and pod.namespace not in self.namespaces:
            return False
        if self.live and pod.deleting:
            return False
        return all(s.matches(pod.labels) for s in self.selectors)

    def guard(self) -> tuple[str, tuple[str, ...]] | None:
        """A label every matching pod has, with the values it may take (an ``In`` requirement), by
        which moves find the trackers they may touch without asking every one; None: no such label."""
        for sel in self.selectors:
            if sel.nothing:
                return ("", ())  # matches no pod: no move ever touches it
            for r in sel.requirements:
                if r.operator == "In":
                    return (r.key, r.values)
        return None


@dataclass
class Tracker:
    match: Match
    per_node: npt.NDArray[np.int64]


@dataclass
class Check:
    """One pod's rule filter: the nodes left, and per node the first rule that removed it."""

    mask: npt.NDArray[np.bool_]
    reasons: dict[str, npt.NDArray[np.bool_]] = field(default_factory=dict)  # reason -> nodes it removed

    def counts(self, among: npt.NDArray[np.bool_]) -> Counter[str]:
        return Counter({why: int(np.count_nonzero(m & among)) for why, m in self.reasons.items()
                        if np.any(m & among)})


@dataclass(frozen=True)
class Interplay:
    """How a job's members constrain each other: ``cap_on``, the nodes where every pair repels (an
    offerslot cap of one there is exact; None: no cap); ``sequential``, some rule between members
    only placing them one by one keeps; why the cap, for messages: ``cap_ports``, they share host
    ports, else ``cap_keys``, the topology keys of their anti-affinity."""

    cap_on: npt.NDArray[np.bool_] | None = None
    sequential: bool = False
    cap_ports: bool = False
    cap_keys: tuple[str, ...] = ()


class Presence:
    """Where pods are, one count per (pod, node), for the rules. ``Cluster`` calls ``move`` on every
    change of what it counts (and each Statement move), so a rollback or journal undo keeps it right."""

    def __init__(self, nodes: list[Node], objects: dict[str, Pod]) -> None:
        self.nodes = nodes
        self.n = len(nodes)
        self.objects = objects  # every pod the cluster knows, by key (the Cluster's own dict)
        self.namespaces: dict[str, dict[str, str]] = {}
        self._trackers: dict[Match, Tracker] = {}
        # Trackers by a (label, value) every pod they count has; the rest are asked on every move.
        self._guarded: dict[tuple[str, str], list[Tracker]] = {}
        self._unguarded: list[Tracker] = []
        # The pending pods counted where they are nominated or reserved (set by the Cluster): kube-
        # scheduler's filters must pass with and without them, so they never satisfy an affinity.
        self.held: Callable[[], Iterable[tuple[str, int]]] = tuple
        # Pods with required anti-affinity, grouped by (namespace, terms): per-node counts.
        self._holders: dict[tuple[str, tuple[PodAffinityTerm, ...]], npt.NDArray[np.int64]] = {}
        self._ports: dict[HostPort, npt.NDArray[np.int64]] = {}
        self._at: dict[str, dict[int, int]] = {}  # pod -> node -> count (only counts above zero)
        self.holding = 0  # how many present pods have required anti-affinity
        self.label_keys: frozenset[str] = frozenset()  # the pod label keys those pods' terms read
        self._repelled: dict[tuple[object, ...], bool] = {}
        self._domains: dict[str, tuple[npt.NDArray[np.int64], int, bool]] = {}

    # -- following the cluster ----------------------------------------------------------------

    def move(self, key: str, nodes: int | npt.NDArray[np.int64], sign: int) -> None:
        pod = self.objects.get(key)
        if pod is None:
            return
        for node in ([nodes] if isinstance(nodes, int) else nodes.tolist()):
            self._add(key, pod, int(node), sign)

    def move_many(self, keys: list[str], nodes: npt.NDArray[np.int64], sign: int) -> None:
        objects = self.objects
        # With no tracker to update, a pod without anti-affinity or host ports is only where it is.
        untracked = not self._unguarded and not self._guarded
        for key, node in zip(keys, nodes.tolist(), strict=True):
            pod = objects.get(key)
            if pod is None:
                continue
            if untracked and not pod.pod_anti_affinity and not pod.host_ports:
                self._count(key, node, sign)
            else:
                self._add(key, pod, node, sign)

    def replace(self, key: str, old: Pod, new: Pod) -> bool:
        """The pod's object changed: what the rules read of it may have too. True when that changed
        for a pod that is counted somewhere (a move as far as the rules are concerned)."""
        if _rule_view(old) == _rule_view(new):
            return False
        where = list(self._at.get(key, {}).items())
        for node, n in where:
            for _ in range(n):
                self._add(key, old, node, -1)
        self.objects[key] = new
        for node, n in where:
            for _ in range(n):
                self._add(key, new, node, 1)
        return bool(where)

    def _count(self, key: str, node: int, sign: int) -> None:
        """Where the pod is: its count on the node, the entry gone at zero."""
        at = self._at.get(key)
        if at is None:
            if sign > 0:
                self._at[key] = {node: sign}
            return
        left = at.get(node, 0) + sign
        if left > 0:
            at[node] = left
        else:
            at.pop(node, None)
            if not at:
                del self._at[key]

    def _add(self, key: str, pod: Pod, node: int, sign: int) -> None:
        self._count(key, node, sign)
        for t in self._unguarded:
            if t.match(pod):
                t.per_node[node] += sign
        if self._guarded:
            for label in pod.labels.items():
                for t in self._guarded.get(label, ()):
                    if t.match(pod):
                        t.per_node[node] += sign
        if pod.pod_anti_affinity:
            self.holding += sign
            hk = (pod.namespace, pod.pod_anti_affinity)
            counts = self._holders.get(hk)
            if counts is None:
                counts = self._holders[hk] = np.zeros(self.n, dtype=np.int64)
                self._repelled.clear()
                for term in pod.pod_anti_affinity:
                    self.label_keys |= term.selector.keys
            counts[node] += sign
        for port in pod.host_ports:
            counts = self._ports.get(port)
            if counts is None:
                counts = self._ports[port] = np.zeros(self.n, dtype=np.int64)
            counts[node] += sign

    def set_namespaces(self, namespaces: dict[str, dict[str, str]]) -> None:
        """A namespace's labels changed: trackers resolved through namespace selectors are stale."""
        if namespaces != self.namespaces:
            self.namespaces = namespaces
            self._forget_trackers()
            self._repelled.clear()

    # -- what the rules read --------------------------------------------------------------------

    def tracker(self, match: Match) -> npt.NDArray[np.int64]:
        t = self._trackers.get(match)
        if t is None:
            if len(self._trackers) >= MAX_TRACKERS:
                self._forget_trackers()
            per_node = np.zeros(self.n, dtype=np.int64)
            for key, at in self._at.items():
                pod = self.objects.get(key)
                if pod is not None and match(pod):
                    for node, n in at.items():
                        per_node[node] += n
            t = self._trackers[match] = Tracker(match, per_node)
            guard = match.guard()
            if guard is None:
                self._unguarded.append(t)
            else:
                for value in guard[1]:
                    self._guarded.setdefault((guard[0], value), []).append(t)
        return t.per_node

    def _forget_trackers(self) -> None:
        self._trackers.clear()
        self._guarded.clear()
        self._unguarded.clear()

    def held_counts(self, match: Match) -> npt.NDArray[np.int64] | None:
        """Per node, the held (nominated or reserved) pods ``match`` counts; None when there are none."""
        out = None
        for key, node in self.held():
            pod = self.objects.get(key)
            # Only where it is present now: a job's own nominations are lifted while it is placed.
            at = self._at.get(key)
            if pod is not None and at is not None and at.get(node, 0) > 0 and match(pod):
                if out is None:
                    out = np.zeros(self.n, dtype=np.int64)
                out[node] += 1
        return out

    def domains(self, key: str) -> tuple[npt.NDArray[np.int64], int, bool]:
        """Per node, the id of its value of label ``key`` (-1: no such label); how many values; and
        whether every labelled node has a value of its own (a per-node key such as the hostname)."""
        got = self._domains.get(key)
        if got is None:
            ids: dict[str, int] = {}
            dom = np.full(self.n, -1, dtype=np.int64)
            for i, node in enumerate(self.nodes):
                value = node.labels.get(key)
                if value is not None:
                    dom[i] = ids.setdefault(value, len(ids))
            got = self._domains[key] = (dom, len(ids), len(ids) == int(np.count_nonzero(dom >= 0)))
        return got

    def namespaces_of(self, term: PodAffinityTerm) -> frozenset[str] | None:
        """The namespaces a term selects: None for every namespace (an empty namespaceSelector)."""
        sel = term.namespace_selector
        if sel is not None and not sel.requirements and not sel.nothing:
            return None
        names = set(term.namespaces)
        if sel is not None:
            names.update(ns for ns, labels in self.namespaces.items() if sel.matches(labels))
        return frozenset(names)

    def term_matches(self, term: PodAffinityTerm, pod: Pod) -> bool:
        return term.matches(pod, self.namespaces)

    def repelled(self, pod: Pod) -> bool:
        """Whether the anti-affinity of some pod present (or once present) could match ``pod``."""
        if self.holding <= 0:
            return False
        key = (pod.namespace, tuple(sorted((k, v) for k, v in pod.labels.items() if k in self.label_keys)))
        got = self._repelled.get(key)
        if got is None:
            got = self._repelled[key] = any(self.term_matches(t, pod) for (_, terms) in self._holders
                                            for t in terms)
        return got

    def holders(self) -> list[tuple[tuple[str, tuple[PodAffinityTerm, ...]], npt.NDArray[np.int64]]]:
        return list(self._holders.items())

    def ports(self, port: HostPort) -> npt.NDArray[np.int64]:
        """Per node, how many present pods hold a port that ``port`` conflicts with."""
        out = np.zeros(self.n, dtype=np.int64)
        for other, counts in self._ports.items():
            if port.conflicts(other):
                out += counts
        return out


def _rule_view(pod: Pod) -> tuple[object, ...]:
    return (pod.namespace, pod.labels, pod.deleting, pod.pod_anti_affinity, pod.host_ports)


class PodRules:
    """The rules of ``Presence`` as filters and scores for one pod at a time."""

    def __init__(self, presence: Presence) -> None:
        self.presence = presence
        self._node_affinity: dict[tuple[object, ...], npt.NDArray[np.bool_]] = {}
        self._taints: dict[tuple[object, ...], npt.NDArray[np.bool_]] = {}

    def applies(self, pod: Pod) -> bool:
        """Whether the rules could remove any node for ``pod`` (else its mask is all nodes)."""
        return pod.has_pod_rules or self.presence.repelled(pod)

    def check(self, pod: Pod) -> Check:
        """Nodes the rules allow ``pod`` on given where pods are now, in kube-scheduler's filter
        order: NodePorts, PodTopologySpread, then InterPodAffinity (affinity, the pod's own
        anti-affinity, then the anti-affinity of the pods already there)."""
        p = self.presence
        mask = np.ones(p.n, dtype=np.bool_)
        out = Check(mask)

        def remove(bad: npt.NDArray[np.bool_], why: str) -> None:
            hit = bad & mask
            if np.any(hit):
                out.reasons[why] = out.reasons.get(why, np.zeros(p.n, dtype=np.bool_)) | hit
                mask[hit] = False

        for port in pod.host_ports:
            remove(p.ports(port) > 0, PORTS)
        hard = [c for c in pod.spread if c.hard]
        if hard:
            self._spread(pod, hard, remove)
        if pod.pod_affinity:
            remove(~self._affinity(pod), AFFINITY_RULES)
        for term in pod.pod_anti_affinity:
            dom, ndom, _ = p.domains(term.topology_key)
            per_node = p.tracker(Match(p.namespaces_of(term), (term.selector,)))
            remove(self._in_domains(dom, ndom, per_node), ANTI_AFFINITY_RULES)
        for (_, terms), counts in p.holders():
            where = counts > 0
            if not np.any(where):
                continue
            for term in terms:
                if not p.term_matches(term, pod):
                    continue
                dom, ndom, _ = p.domains(term.topology_key)
                remove(self._in_domains(dom, ndom, counts), EXISTING_ANTI_AFFINITY)
        return out

    @staticmethod
    def _in_domains(dom: npt.NDArray[np.int64], ndom: int, per_node: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
        """Nodes in a domain (same label value) where ``per_node`` counts any pod."""
        has = dom >= 0
        counts = np.bincount(dom[has], weights=per_node[has], minlength=ndom)
        out = np.zeros(len(dom), dtype=np.bool_)
        out[has] = counts[dom[has]] > 0
        return out

    def _affinity(self, pod: Pod) -> npt.NDArray[np.bool_]:
        """Required pod affinity: every term's domain on the node holds a pod that matches all the
        terms; or, when no such pod runs anywhere and the pod matches its own terms (the first of a
        set of pods affine to each other), any node with every term's label."""
        p = self.presence
        terms = pod.pod_affinity
        named = [n for n in (p.namespaces_of(t) for t in terms) if n is not None]
        common = frozenset.intersection(*named) if named else None  # "any" narrows nothing
        match = Match(common, tuple(t.selector for t in terms))
        per_node = p.tracker(match)
        held = p.held_counts(match)
        if held is not None:  # a pod only nominated there is not there yet
            per_node = per_node - held
        ok = np.ones(p.n, dtype=np.bool_)
        labelled = np.ones(p.n, dtype=np.bool_)
        anywhere = False
        for t in terms:
            dom, ndom, _ = p.domains(t.topology_key)
            has = dom >= 0
            labelled &= has
            counts = np.bincount(dom[has], weights=per_node[has], minlength=ndom)
            anywhere = anywhere or bool(np.any(counts > 0))
            here = np.zeros(p.n, dtype=np.bool_)
            here[has] = counts[dom[has]] > 0
            ok &= here
        if not anywhere and all(p.term_matches(t, pod) for t in terms):
            return labelled
        return ok

    def _eligible(self, pod: Pod, c: SpreadConstraint) -> npt.NDArray[np.bool_]:
        """The nodes whose pods a spread constraint counts: node affinity and taints as its policies say."""
        out = np.ones(self.presence.n, dtype=np.bool_)
        if c.honor_node_affinity:
            key = (tuple(sorted(pod.node_selector.items())), pod.affinity_terms)
            m = self._node_affinity.get(key)
            if m is None:
                m = self._node_affinity[key] = np.array([pod.selects_node(n) for n in self.presence.nodes],
                                                        dtype=np.bool_)
            out &= m
        if c.honor_node_taints:
            tkey = (pod.tolerations,)
            m = self._taints.get(tkey)
            if m is None:
                m = self._taints[tkey] = np.array([pod.untolerated_taint(n) is None for n in self.presence.nodes],
                                                  dtype=np.bool_)
            out &= m
        return out

    def _spread(self, pod: Pod, hard: list[SpreadConstraint],
                remove: Callable[[npt.NDArray[np.bool_], str], None]) -> None:
        p = self.presence
        doms = [p.domains(c.topology_key) for c in hard]
        labelled = np.ones(p.n, dtype=np.bool_)
        for dom, _, _ in doms:
            labelled &= dom >= 0
        remove(~labelled, SPREAD_LABEL)
        for c, (dom, _, _) in zip(hard, doms, strict=True):
            self_match = 1 if c.selector.matches(pod.labels) else 0
            has = dom >= 0
            # With the held (nominated, reserved) pods and without them: kube-scheduler's filters must
            # pass both ways.
            for held in (False, True) if any(True for _ in p.held()) else (False,):
                counts, present = self.spread_counts(pod, c, labelled, without_held=held)
                if not np.any(present):
                    continue  # no domain to compare with: nothing is skewed
                least = 0 if c.min_domains is not None and int(np.count_nonzero(present)) < c.min_domains \
                    else int(counts[present].min())
                skew = np.zeros(p.n, dtype=np.int64)
                skew[has] = counts[dom[has]] + self_match - least
                remove(has & (skew > c.max_skew), SPREAD)

    def spread_counts(self, pod: Pod, c: SpreadConstraint, labelled: npt.NDArray[np.bool_],
                      without_held: bool = False) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """Per domain of the constraint's key: the matching pods on eligible nodes, and whether an
        eligible node is in it (only such domains count toward the minimum). An empty selector
        counts no pod, as upstream. ``without_held``: the nominated and reserved pods left out."""
        p = self.presence
        dom, ndom, _ = p.domains(c.topology_key)
        eligible = self._eligible(pod, c) & labelled
        if not c.selector.requirements:
            per_node = np.zeros(p.n, dtype=np.int64)
        else:
            match = Match(frozenset({pod.namespace}), (c.selector,), live=True)
            per_node = p.tracker(match)
            held = p.held_counts(match) if without_held else None
            if held is not None:
                per_node = per_node - held
        counts = np.bincount(dom[eligible], weights=per_node[eligible], minlength=ndom).astype(np.int64)
        present = np.bincount(dom[eligible], minlength=ndom) > 0
        return counts, present

    # -- members of one job ---------------------------------------------------------------------

    def interplay(self, pods: list[Pod]) -> Interplay:
        """How the members of one job constrain each other as they are placed: not at all (the
        rules' masks against the pods already there are exact), at most one member per node (every
        pair of members repels on a per-node key or a shared host port: an offerslot cap of one on
        the nodes where that holds is exact), or in ways only placing them one by one can keep
        (affinity or spread between members, anti-affinity over wider domains), with or without
        the cap. Members are compared by kind: only the labels some member's rule reads tell kinds
        apart, so a gang whose members differ by an index label is one kind."""
        if not any(p.pod_affinity or p.pod_anti_affinity or p.host_ports or p.spread for p in pods) \
                or not any(p.has_pod_rules for p in pods):  # the first asks no property of most pods
            return Interplay()
        read: set[str] = set()
        # Kinds keyed by the rules' identity: a gang's pods share one tuple of each (parsing keeps
        # them once), and equal rules held apart only make two kinds that answer alike.
        for p in {(id(q.pod_affinity), id(q.pod_anti_affinity), id(q.spread)): q for q in pods}.values():
            for t in (*p.pod_affinity, *p.pod_anti_affinity):
                read |= t.selector.keys
            for c in p.spread:
                read |= c.selector.keys
        kinds = list({(p.namespace, tuple(sorted((k, v) for k, v in p.labels.items() if k in read)),
                       id(p.pod_affinity), id(p.pod_anti_affinity), id(p.spread), id(p.host_ports)): p
                      for p in pods}.values())
        pres = self.presence
        every_pair_per_node = True
        any_pair = False
        sequential = False
        keys: set[str] = set()
        ports = False
        # Per pair that repels on a node: the nodes where it does (a shared host port: all of them;
        # else those carrying one of the keys its anti-affinity names).
        repels: list[npt.NDArray[np.bool_]] = []
        for i, a in enumerate(kinds):
            for b in kinds[i:]:
                node_level = False
                pair_keys: set[str] = set()
                pair_ports = False
                for x, y in ((a, b), (b, a)):
                    for t in x.pod_anti_affinity:
                        if pres.term_matches(t, y):
                            node_level = True
                            pair_keys.add(t.topology_key)
                            sequential = sequential or not pres.domains(t.topology_key)[2]
                    sequential = sequential or any(pres.term_matches(t, y) for t in x.pod_affinity)
                    sequential = sequential or any(
                        c.hard and x.namespace == y.namespace and c.selector.matches(y.labels) for c in x.spread)
                    if any(hp.conflicts(hq) for hp in x.host_ports for hq in y.host_ports):
                        node_level = pair_ports = True
                any_pair = any_pair or node_level
                every_pair_per_node = every_pair_per_node and node_level
                keys |= pair_keys
                ports = ports or pair_ports
                if node_level:
                    on = np.ones(pres.n, dtype=np.bool_)
                    if not pair_ports:
                        on[:] = False
                        for key in pair_keys:
                            on |= pres.domains(key)[0] >= 0
                    repels.append(on)
        cap_on = None
        if any_pair and every_pair_per_node:
            # A cap of one is exact where every pair repels; where only some do, the members must be
            # placed one by one (two that do not repel there may share the node, two that do may not).
            every = np.logical_and.reduce(repels)
            some = np.logical_or.reduce(repels)
            cap_on = every
            sequential = sequential or bool(np.any(some & ~every))
        return Interplay(cap_on=cap_on, sequential=sequential or (any_pair and not every_pair_per_node),
                         cap_ports=ports, cap_keys=tuple(sorted(keys)))

    # -- preferred terms and ScheduleAnyway spread: a score -------------------------------------

    def score(self, pod: Pod, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.float64] | None:
        """kube-scheduler's InterPodAffinity and PodTopologySpread scores for ``nodes``, each scaled
        to 0..100 and summed (None: the pod states no preference). Higher is better."""
        p = self.presence
        total: npt.NDArray[np.float64] | None = None
        if pod.preferred_affinity or pod.preferred_anti_affinity:
            raw = np.zeros(len(nodes), dtype=np.float64)
            for sign, terms in ((1, pod.preferred_affinity), (-1, pod.preferred_anti_affinity)):
                for t in terms:
                    dom, ndom, _ = p.domains(t.topology_key)
                    per_node = p.tracker(Match(p.namespaces_of(t), (t.selector,)))
                    has = dom >= 0
                    counts = np.bincount(dom[has], weights=per_node[has], minlength=ndom)
                    d = dom[nodes]
                    raw += sign * t.weight * np.where(d >= 0, counts[np.maximum(d, 0)], 0.0)
            total = _scaled(raw)
        soft = [c for c in pod.spread if not c.hard]
        if soft:
            raw = np.zeros(len(nodes), dtype=np.float64)
            for c in soft:
                dom, _, _ = p.domains(c.topology_key)
                counts, _ = self.spread_counts(pod, c, dom >= 0)
                d = dom[nodes]
                raw += np.where(d >= 0, counts[np.maximum(d, 0)], 0.0)
            part = 100.0 - _scaled(raw)  # fewer matching pods in the domain is better
            total = part if total is None else total + part
        return total


def _scaled(raw: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    lo, hi = (float(raw.min()), float(raw.max())) if len(raw) else (0.0, 0.0)
    if hi == lo:
        return np.zeros_like(raw)
    return (raw - lo) * 100.0 / (hi - lo)


def rules_key(pod: Pod, presence: Presence) -> tuple[object, ...]:
    """Pods with equal keys get the same rule mask at the same moment. Of the labels only those some
    rule reads count (the pod's own selectors, for its first-pod and self-match rules, and those of
    the anti-affinity of pods present), so members that differ by an index label stay one kind."""
    keys = set(presence.label_keys)
    for t in (*pod.pod_affinity, *pod.pod_anti_affinity):
        keys |= t.selector.keys
    for c in pod.spread:
        keys |= c.selector.keys
    labels = tuple(sorted((k, v) for k, v in pod.labels.items() if k in keys))
    nodes = (tuple(sorted(pod.node_selector.items())), pod.affinity_terms, pod.tolerations) if pod.spread else None
    return (pod.namespace, labels, pod.pod_affinity, pod.pod_anti_affinity, pod.spread, pod.host_ports, nodes)
