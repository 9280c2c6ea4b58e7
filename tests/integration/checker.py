"""An independent filter checker: which nodes would kube-scheduler's Filter plugins let a pod onto?

Written from kube-scheduler's rules (the NodeUnschedulable, NodeAffinity, TaintToleration,
NodeResourcesFit, NodePorts, InterPodAffinity and PodTopologySpread filters of v1.34-v1.37), over
plain dicts as the API server returns nodes, pods and namespaces. It imports nothing from koordpy
on purpose: the differential test (test_differential.py) holds koordpy's binds against it, so it
must not share koordpy's mistakes. It favours being obviously right over being fast (a few hundred
pods on a few dozen nodes).

What it covers, rule by rule (the names are the ones failures are reported under):

- ``NodeUnschedulable``: a cordoned node (``spec.unschedulable``) unless the pod tolerates
  ``node.kubernetes.io/unschedulable:NoSchedule``.
- ``NodeAffinity``: ``nodeSelector`` (every pair) and the required node affinity (any term; within a
  term every expression and field; In, NotIn, Exists, DoesNotExist, Gt, Lt; ``metadata.name`` fields).
- ``TaintToleration``: every NoSchedule/NoExecute taint tolerated (PreferNoSchedule is a score).
- ``NodeResourcesFit``: the pod count, and each resource the pod requests (init containers, sidecars
  and overhead counted as kube-scheduler counts them) against allocatable minus what the node's pods request.
- ``NodePorts``: host ports of containers and sidecar init containers; ``0.0.0.0`` (or no IP)
  conflicts with every IP of the same protocol and port.
- ``InterPodAffinity``: the pod's required affinity (one pod matching all terms in the node's domain
  of each term; the node has every term's key; the first pod of a self-affine set may go where the
  keys exist when no pod anywhere matches), its required anti-affinity, and the anti-affinity of
  pods already bound (symmetry); ``namespaces``/``namespaceSelector``; ``matchLabelKeys`` and
  ``mismatchLabelKeys`` (merged into the selector as the API server does; merging twice changes
  nothing, so pods read back from the API are fine too).
- ``PodTopologySpread``: ``DoNotSchedule`` constraints with ``maxSkew``, ``minDomains``,
  ``nodeAffinityPolicy`` (Honor by default), ``nodeTaintsPolicy`` (Ignore by default) and
  ``matchLabelKeys``; nodes lacking any constraint's key are neither counted nor allowed.

Left out (the differential workload uses none of them): volumes, DRA claims, scheduling gates,
pod-level resources, Lt/Gt tolerations (an alpha gate), ``nodeName``, images and preemption.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

Obj = dict[str, Any]

UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"

# -- quantities ---------------------------------------------------------------------------------

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
            "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
            "P": Fraction(10**15), "E": Fraction(10**18)}


def quantity(text: str | int | float) -> Fraction:
    """A Kubernetes quantity ("250m", "1.5", "4Gi", "1e3") as an exact number."""
    s = str(text).strip()
    for suffix, mult in _BINARY.items():
        if s.endswith(suffix):
            return Fraction(s[: -len(suffix)]) * mult
    if "e" in s.lower() and not s.lower().endswith("e"):
        mantissa, _, exp = s.lower().partition("e")
        return Fraction(mantissa) * Fraction(10) ** int(exp)
    for suffix in sorted(_DECIMAL, key=len, reverse=True):
        if suffix and s.endswith(suffix):
            return Fraction(s[: -len(suffix)]) * _DECIMAL[suffix]
    return Fraction(s)


def amount(resource: str, text: str | int | float) -> int:
    """Whole units kube-scheduler compares: milli-cpus for cpu, the integer value (rounded up) else."""
    q = quantity(text)
    return math.ceil(q * 1000) if resource == "cpu" else math.ceil(q)


def pod_requests(pod: Obj) -> dict[str, int]:
    """What the pod asks of a node: the containers' sum, raised to any init container's need (a
    regular init container runs beside the sidecars started before it), sidecars added to both,
    plus the overhead."""
    spec = pod.get("spec") or {}

    def reqs(c: Obj) -> dict[str, int]:
        raw = ((c.get("resources") or {}).get("requests")) or {}
        return {k: amount(k, v) for k, v in raw.items()}

    def add(into: dict[str, int], more: Mapping[str, int]) -> None:
        for k, v in more.items():
            into[k] = into.get(k, 0) + v

    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        add(total, reqs(c))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        mine = reqs(c)
        if c.get("restartPolicy") == "Always":
            add(total, mine)
            add(sidecars, mine)
            need = dict(sidecars)
        else:
            need = dict(mine)
            add(need, sidecars)
        for k, v in need.items():
            init_peak[k] = max(init_peak.get(k, 0), v)
    for k, v in init_peak.items():
        total[k] = max(total.get(k, 0), v)
    add(total, {k: amount(k, v) for k, v in (spec.get("overhead") or {}).items()})
    return total


# -- selectors ----------------------------------------------------------------------------------

Requirement = tuple[str, str, tuple[str, ...]]  # key, operator, values


@dataclass(frozen=True)
class Selector:
    """A label selector; ``None`` requirements is the nil selector, which matches nothing."""

    requirements: tuple[Requirement, ...] | None

    @staticmethod
    def of(raw: Obj | None) -> Selector:
        if raw is None:
            return Selector(None)
        reqs: list[Requirement] = [(k, "In", (v,)) for k, v in sorted((raw.get("matchLabels") or {}).items())]
        for e in raw.get("matchExpressions") or []:
            reqs.append((e["key"], e["operator"], tuple(e.get("values") or ())))
        return Selector(tuple(reqs))

    def with_keys(self, labels: Mapping[str, str], match: Iterable[str], mismatch: Iterable[str] = ()) -> Selector:
        """matchLabelKeys / mismatchLabelKeys: ``key In (value)`` / ``key NotIn (value)`` for each key
        the pod carries; nothing for a nil selector (the API server leaves those alone)."""
        if self.requirements is None:
            return self
        extra = [(k, "In", (labels[k],)) for k in match if k in labels]
        extra += [(k, "NotIn", (labels[k],)) for k in mismatch if k in labels]
        return Selector(self.requirements + tuple(extra))

    @property
    def empty(self) -> bool:
        """Selects everything (``{}``)."""
        return self.requirements == ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.requirements is None:
            return False
        return all(_requirement(labels, key, op, values) for key, op, values in self.requirements)


def _requirement(labels: Mapping[str, str], key: str, op: str, values: tuple[str, ...]) -> bool:
    if op == "In":
        return key in labels and labels[key] in values
    if op == "NotIn":
        return key not in labels or labels[key] not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt"):  # node selector terms only: the label and the value as integers
        try:
            have, want = int(labels[key]), int(values[0])
        except (KeyError, ValueError, IndexError):
            return False
        return have > want if op == "Gt" else have < want
    raise ValueError(f"unknown selector operator {op!r}")


# -- node-only filters --------------------------------------------------------------------------

def labels_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def name_of(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def key_of(pod: Obj) -> str:
    return f"{pod['metadata'].get('namespace', 'default')}/{pod['metadata']['name']}"


def namespace_of(pod: Obj) -> str:
    return str(pod["metadata"].get("namespace", "default"))


def node_affinity_matches(pod: Obj, node: Obj) -> bool:
    """nodeSelector and the required node affinity together (what nodeAffinityPolicy Honor means too)."""
    spec = pod.get("spec") or {}
    labels = labels_of(node)
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    return required is None or node_selector_matches(required, node)


def node_selector_matches(selector: Obj, node: Obj) -> bool:
    """A core/v1 NodeSelector (any of its terms; within a term every expression and field, the
    only field being ``metadata.name``): a pod's required node affinity, a ResourceSlice's or an
    allocation's node selector."""
    labels = labels_of(node)
    fields = {"metadata.name": name_of(node)}
    for term in selector.get("nodeSelectorTerms") or []:
        exprs = term.get("matchExpressions") or []
        flds = term.get("matchFields") or []
        if not exprs and not flds:
            continue  # an empty term matches no node
        if all(_requirement(labels, e["key"], e["operator"], tuple(e.get("values") or ())) for e in exprs) and \
                all(_requirement(fields, f["key"], f["operator"], tuple(f.get("values") or ())) for f in flds):
            return True
    return False


def tolerates(tolerations: list[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("key") and t["key"] != taint.get("key"):
            continue
        op = t.get("operator") or "Equal"
        if op == "Exists" or (op == "Equal" and (t.get("value") or "") == (taint.get("value") or "")):
            return True
    return False


def untolerated_taint(pod: Obj, node: Obj) -> Obj | None:
    """The first NoSchedule/NoExecute taint of the node the pod does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    taints: list[Obj] = (node.get("spec") or {}).get("taints") or []
    for taint in taints:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return taint
    return None


def host_ports(pod: Obj) -> list[tuple[str, str, int]]:
    """(ip, protocol, port) of every host port: containers, and init containers that run as sidecars."""
    spec = pod.get("spec") or {}
    containers = [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    containers += spec.get("containers") or []
    out = []
    for c in containers:
        for p in c.get("ports") or []:
            if int(p.get("hostPort") or 0) > 0:
                out.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", int(p["hostPort"])))
    return out


def ports_conflict(want: tuple[str, str, int], have: tuple[str, str, int]) -> bool:
    if want[1:] != have[1:]:
        return False
    return want[0] == have[0] or "0.0.0.0" in (want[0], have[0])


# -- pod terms ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Term:
    """A required (anti-)affinity term of ``owner``, ready to match other pods."""

    owner: str  # the pod whose term it is (for messages)
    index: int
    key: str
    selector: Selector
    namespaces: frozenset[str]
    namespace_selector: Selector | None  # None: no namespaceSelector given

    def matches(self, pod: Obj, namespace_labels: Mapping[str, Mapping[str, str]]) -> bool:
        ns = namespace_of(pod)
        in_scope = ns in self.namespaces or (
            self.namespace_selector is not None and self.namespace_selector.matches(namespace_labels.get(ns, {})))
        return in_scope and self.selector.matches(labels_of(pod))


def pod_terms(pod: Obj, kind: str) -> list[Term]:
    """The pod's required terms of ``kind`` (podAffinity or podAntiAffinity)."""
    raw = (((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}) \
        .get("requiredDuringSchedulingIgnoredDuringExecution") or []
    labels = labels_of(pod)
    out = []
    for i, t in enumerate(raw):
        sel = Selector.of(t.get("labelSelector")).with_keys(labels, t.get("matchLabelKeys") or (),
                                                           t.get("mismatchLabelKeys") or ())
        names = t.get("namespaces") or []
        ns_sel = t.get("namespaceSelector")
        # Neither namespaces nor a namespaceSelector: the pod's own namespace.
        namespaces = frozenset(names) if (names or ns_sel is not None) else frozenset({namespace_of(pod)})
        out.append(Term(key_of(pod), i, t["topologyKey"], sel, namespaces,
                        Selector.of(ns_sel) if ns_sel is not None else None))
    return out


@dataclass(frozen=True)
class Spread:
    index: int
    key: str
    max_skew: int
    selector: Selector
    min_domains: int
    honor_affinity: bool
    honor_taints: bool


def hard_spreads(pod: Obj) -> list[Spread]:
    labels = labels_of(pod)
    out = []
    for i, c in enumerate((pod.get("spec") or {}).get("topologySpreadConstraints") or []):
        if c.get("whenUnsatisfiable") != "DoNotSchedule":
            continue
        sel = Selector.of(c.get("labelSelector")).with_keys(labels, c.get("matchLabelKeys") or ())
        out.append(Spread(i, c["topologyKey"], int(c["maxSkew"]), sel, int(c.get("minDomains") or 1),
                          (c.get("nodeAffinityPolicy") or "Honor") == "Honor",
                          (c.get("nodeTaintsPolicy") or "Ignore") == "Honor"))
    return out


# -- the cluster --------------------------------------------------------------------------------

@dataclass
class State:
    """Nodes, namespace labels and the pods bound so far (in the order they were added)."""

    nodes: list[Obj]
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    on: dict[str, list[Obj]] = field(default_factory=dict)  # node name -> its pods
    where: dict[str, str] = field(default_factory=dict)  # pod key -> node name

    def __post_init__(self) -> None:
        for n in self.nodes:
            self.on.setdefault(name_of(n), [])

    def add(self, pod: Obj, node: str) -> None:
        key = key_of(pod)
        if key in self.where:
            raise ValueError(f"pod {key} is bound twice")
        self.where[key] = node
        self.on.setdefault(node, []).append(pod)

    def node(self, name: str) -> Obj:
        for n in self.nodes:
            if name_of(n) == name:
                return n
        raise KeyError(f"no node {name}")

    def bound(self) -> Iterable[tuple[Obj, Obj]]:
        """(pod, node) for every pod bound to a node the cluster has, terminal pods left out
        (they hold nothing)."""
        for n in self.nodes:
            for p in self.on.get(name_of(n), []):
                if ((p.get("status") or {}).get("phase")) not in ("Succeeded", "Failed"):
                    yield p, n

    def check(self, pod: Obj) -> dict[str, list[str]]:
        """For every node, the rules the pod breaks there ([] where it may go)."""
        return _Check(self, pod).run()

    def feasible(self, pod: Obj) -> list[str]:
        return [n for n, why in self.check(pod).items() if not why]


class _Check:
    """One pod against the state: what kube-scheduler's PreFilter would count once, then each node."""

    def __init__(self, state: State, pod: Obj) -> None:
        self.state = state
        self.pod = pod
        self.ns = namespace_of(pod)
        self.labels = labels_of(pod)
        nsl = state.namespaces
        self.affinity = pod_terms(pod, "podAffinity")
        self.anti = pod_terms(pod, "podAntiAffinity")
        self.spreads = hard_spreads(pod)
        # (key, value) -> pods there that match all the pod's affinity terms
        self.affine_pairs: dict[tuple[str, str], list[str]] = {}
        # (key, value) -> "pod p (term i)" matching one of the pod's anti-affinity terms
        self.anti_pairs: dict[tuple[str, str], list[str]] = {}
        # (key, value) -> "pod e's term i": bound pods whose anti-affinity the pod matches
        self.repelled: dict[tuple[str, str], list[str]] = {}
        for other, node in state.bound():
            nl = labels_of(node)
            okey = key_of(other)
            if self.affinity and all(t.matches(other, nsl) for t in self.affinity):
                for t in self.affinity:
                    if t.key in nl:
                        self.affine_pairs.setdefault((t.key, nl[t.key]), []).append(okey)
            for t in self.anti:
                if t.key in nl and t.matches(other, nsl):
                    self.anti_pairs.setdefault((t.key, nl[t.key]), []).append(f"{okey} (term {t.index})")
            for t in pod_terms(other, "podAntiAffinity"):
                if t.key in nl and t.matches(pod, nsl):
                    self.repelled.setdefault((t.key, nl[t.key]), []).append(f"{okey}'s term {t.index}")
        self.self_affine = bool(self.affinity) and all(t.matches(pod, nsl) for t in self.affinity)
        # Topology spread: per constraint, domain value -> matching pods on the counted nodes.
        self.domains: list[dict[str, int]] = [{} for _ in self.spreads]
        keys = [c.key for c in self.spreads]
        for n in state.nodes:
            nl = labels_of(n)
            if not all(k in nl for k in keys):
                continue
            for i, c in enumerate(self.spreads):
                if c.honor_affinity and not node_affinity_matches(pod, n):
                    continue
                if c.honor_taints and untolerated_taint(pod, n) is not None:
                    continue
                count = 0
                if not c.selector.empty:  # kube-scheduler counts nothing for an empty selector
                    for p in state.on.get(name_of(n), []):
                        if namespace_of(p) == self.ns and not p["metadata"].get("deletionTimestamp") \
                                and c.selector.matches(labels_of(p)) \
                                and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
                            count += 1
                self.domains[i][nl[c.key]] = self.domains[i].get(nl[c.key], 0) + count
        self.requests = pod_requests(pod)
        self.ports = host_ports(pod)

    def run(self) -> dict[str, list[str]]:
        return {name_of(n): self.node(n) for n in self.state.nodes}

    def node(self, node: Obj) -> list[str]:
        why: list[str] = []
        spec = node.get("spec") or {}
        nl = labels_of(node)
        name = name_of(node)
        pod_spec = self.pod.get("spec") or {}
        if spec.get("unschedulable") and not tolerates(pod_spec.get("tolerations") or [],
                                                       {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}):
            why.append("NodeUnschedulable: the node is cordoned")
        if not node_affinity_matches(self.pod, node):
            why.append("NodeAffinity: nodeSelector or required node affinity does not match")
        taint = untolerated_taint(self.pod, node)
        if taint is not None:
            why.append(f"TaintToleration: untolerated taint {taint.get('key')}={taint.get('value', '')}:"
                       f"{taint.get('effect')}")
        why += self._fit(node)
        here = [p for p in self.state.on.get(name, [])
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        for want in self.ports:
            for p in here:
                if any(ports_conflict(want, have) for have in host_ports(p)):
                    why.append(f"NodePorts: host port {want[2]}/{want[1]} on {want[0]} taken by {key_of(p)}")
        why += self._affinity(nl)
        why += self._spread(nl)
        return why

    def _fit(self, node: Obj) -> list[str]:
        alloc_raw = (node.get("status") or {}).get("allocatable") or {}
        alloc = {k: amount(k, v) for k, v in alloc_raw.items()}
        here = [p for p in self.state.on.get(name_of(node), [])
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        why = []
        if len(here) + 1 > alloc.get("pods", 0):
            why.append(f"NodeResourcesFit: too many pods ({len(here)} of {alloc.get('pods', 0)})")
        used: dict[str, int] = {}
        for p in here:
            for k, v in pod_requests(p).items():
                used[k] = used.get(k, 0) + v
        for k, v in self.requests.items():
            if k == "pods" or v <= 0:
                continue
            free = alloc.get(k, 0) - used.get(k, 0)
            if v > free:
                why.append(f"NodeResourcesFit: insufficient {k} (wants {v}, {free} free)")
        return why

    def _affinity(self, nl: dict[str, str]) -> list[str]:
        why = []
        missing = [t.key for t in self.affinity if t.key not in nl]
        if missing:
            why.append(f"InterPodAffinity: node lacks the affinity topology key(s) {missing}")
        elif self.affinity and not all((t.key, nl[t.key]) in self.affine_pairs for t in self.affinity) \
                and (self.affine_pairs or not self.self_affine):
            # No pod matching every term in the node's domains; the first pod of a self-affine set
            # may still go anywhere the keys exist, as long as no pod anywhere matches.
            where = sorted({p for ps in self.affine_pairs.values() for p in ps})[:5]
            why.append("InterPodAffinity: no pod matching the affinity terms in the node's domain "
                       f"(matching pods elsewhere: {where or 'none'}; the pod matches its own terms: "
                       f"{self.self_affine})")
        for t in self.anti:
            if t.key in nl and (t.key, nl[t.key]) in self.anti_pairs:
                why.append(f"InterPodAffinity: anti-affinity term {t.index} ({t.key}={nl[t.key]}) matches "
                           f"{self.anti_pairs[(t.key, nl[t.key])][:3]}")
        for pair in nl.items():
            if pair in self.repelled:
                why.append(f"InterPodAffinity: existing pods' anti-affinity ({pair[0]}={pair[1]}) repels it: "
                           f"{self.repelled[pair][:3]}")
        return why

    def _spread(self, nl: dict[str, str]) -> list[str]:
        for c in self.spreads:
            if c.key not in nl:
                return [f"PodTopologySpread: node lacks the topology key {c.key}"]
        why = []
        for c, counts in zip(self.spreads, self.domains, strict=True):
            low = min(counts.values()) if counts else 0
            if len(counts) < c.min_domains:
                low = 0
            mine = 1 if c.selector.matches(self.labels) else 0
            skew = counts.get(nl[c.key], 0) + mine - low
            if skew > c.max_skew:
                why.append(f"PodTopologySpread: constraint {c.index} ({c.key}={nl[c.key]}) skew {skew} > maxSkew "
                           f"{c.max_skew} (domains {dict(sorted(counts.items()))}, minDomains {c.min_domains})")
        return why


# -- judging a scheduler's run ------------------------------------------------------------------

def replay(nodes: list[Obj], namespaces: dict[str, dict[str, str]], pods: dict[str, Obj], order: list[str],
           already: Iterable[Obj] = ()) -> list[str]:
    """Adds the pods ``order`` names one by one onto the node each is bound to (``spec.nodeName`` in
    ``pods``), each checked against the pods before it (and ``already``, bound before any of them).
    Returns one line per pod that broke a rule where it was bound."""
    state = State(nodes, namespaces)
    for p in already:
        state.add(p, p["spec"]["nodeName"])
    problems = []
    for i, key in enumerate(order):
        pod = pods[key]
        node = pod["spec"]["nodeName"]
        if node not in state.on:
            problems.append(f"bind #{i + 1}: {key} is bound to {node}, a node the cluster does not have")
        else:
            why = _Check(state, pod).node(state.node(node))
            if why:
                problems.append(f"bind #{i + 1}: {key} on {node} broke " + "; ".join(why))
        state.add(pod, node)
    return problems


def pending_with_room(nodes: list[Obj], namespaces: dict[str, dict[str, str]], bound: Iterable[Obj],
                      pending: Iterable[Obj]) -> dict[str, list[str]]:
    """Pending pods for which some node passes every filter in the state ``bound`` makes -> those nodes."""
    state = State(nodes, namespaces)
    for p in bound:
        state.add(p, p["spec"]["nodeName"])
    out = {}
    for p in pending:
        ok = state.feasible(p)
        if ok:
            out[key_of(p)] = ok
    return out


# Rules whose verdict a later pod can only make worse (or never change): whatever order the pods
# were bound in, a pod that breaks one of them against all the others broke it when it or one of
# those others was bound. Affinity and topology spread are left out (a later pod can satisfy them).
ORDER_FREE = ("NodeUnschedulable", "NodeAffinity", "TaintToleration", "NodeResourcesFit", "NodePorts",
              "InterPodAffinity: anti-affinity", "InterPodAffinity: existing pods' anti-affinity")


def order_free_violations(nodes: list[Obj], namespaces: dict[str, dict[str, str]], bound: list[Obj]) -> list[str]:
    """For a final state whose bind order is unknown (another scheduler's): each bound pod against
    all the others, on the rules of ``ORDER_FREE`` only."""
    problems = []
    for i, pod in enumerate(bound):
        state = State(nodes, namespaces)
        for j, other in enumerate(bound):
            if j != i:
                state.add(other, other["spec"]["nodeName"])
        node = pod["spec"]["nodeName"]
        why = [w for w in _Check(state, pod).node(state.node(node)) if w.startswith(ORDER_FREE)]
        if why:
            problems.append(f"{key_of(pod)} on {node}: " + "; ".join(why))
    return problems
