"""Volcano's network-topology API: HyperNode (``topology.volcano.sh/v1alpha1``), Volcano's own
PodGroup (``scheduling.volcano.sh/v1beta1``) and the network-topology annotations a
scheduler-plugins PodGroup may carry instead.

HyperNodes are checked as Volcano's admission webhook checks them, one object at a time;
what only shows across objects (cycles, a node claimed twice in one tier) is the tree
builder's to report.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Protocol, cast

import re2
from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import ParseError
from koordpy.api.model import NamespacedKey
from koordpy.api.raw import Reader, int_text, read_object, subdomain_problem
from koordpy.api.selectors import LabelSelector, qualified_name_problem

if TYPE_CHECKING:
    from koordpy.api.objects import Pod

HYPERNODE_GROUP = "topology.volcano.sh"
PODGROUP_GROUP = "scheduling.volcano.sh"
GROUP_NAME_ANN = "scheduling.k8s.io/group-name"
ANN_MODE = "volcano.sh/network-topology-mode"
ANN_HIGHEST_TIER = "volcano.sh/network-topology-highest-tier"
ANN_HIGHEST_TIER_NAME = "volcano.sh/network-topology-highest-tier-name"
PHASES = ("Pending", "Running", "Unknown", "Inqueue", "Completed")
Mode = Literal["hard", "soft"]
MemberType = Literal["Node", "HyperNode"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NetworkTopology(_Model):
    """How far a job (or one of its sub-groups) may spread: up to a tier, by number or by name."""

    mode: Mode = "hard"
    highest_tier: int | None = None
    highest_tier_name: str | None = None

    @classmethod
    def from_raw(cls, r: Reader, value: Any, field: str) -> NetworkTopology:
        m = r.mapping(value, field)
        mode = r.string(m.get("mode"), f"{field}.mode") or "hard"
        if mode not in ("hard", "soft"):
            raise r.fail(f"{field}.mode", f"must be hard or soft, got {mode!r}")
        tier = r.integer(m.get("highestTierAllowed"), f"{field}.highestTierAllowed", minimum=0)
        name = r.string(m.get("highestTierName"), f"{field}.highestTierName") or None
        if tier is not None and name is not None:
            raise r.fail(field, "set highestTierAllowed or highestTierName, not both")
        return cls(mode=mode, highest_tier=tier, highest_tier_name=name)  # type: ignore[arg-type]


def network_topology_from_annotations(ref: str, annotations: dict[str, str]) -> NetworkTopology | None:
    """The constraint the Volcano annotations declare, or None when they declare none.

    An annotation with an empty value declares nothing, as an empty Koordinator topology
    spec does, so a template can leave the key in place.
    """
    mode = annotations.get(ANN_MODE, "")
    tier_text = annotations.get(ANN_HIGHEST_TIER, "")
    name = annotations.get(ANN_HIGHEST_TIER_NAME, "")
    if not (mode or tier_text or name):
        return None
    if mode and mode not in ("hard", "soft"):
        raise ParseError(ref, f"metadata.annotations[{ANN_MODE}]", f"must be hard or soft, got {mode!r}")
    tier: int | None = None
    if tier_text:
        field = f"metadata.annotations[{ANN_HIGHEST_TIER}]"
        try:
            tier = int_text(tier_text)
        except ValueError as exc:
            raise ParseError(ref, field, str(exc)) from exc
        if tier < 0:
            raise ParseError(ref, field, f"must not be negative, got {tier}")
    if tier is not None and name:
        raise ParseError(ref, "metadata.annotations",
                         f"set {ANN_HIGHEST_TIER} or {ANN_HIGHEST_TIER_NAME}, not both")
    return NetworkTopology(mode=mode or "hard", highest_tier=tier,  # type: ignore[arg-type]
                           highest_tier_name=name or None)


class _Pattern(Protocol):
    def search(self, text: str) -> object | None: ...


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is reported as a ParseError, not on stderr


@lru_cache(maxsize=1024)  # thousands of nodes are tested against the same few patterns
def _compiled(pattern: str) -> _Pattern:
    """``pattern`` compiled by RE2, the engine of Go's regexp that Volcano compiles it with: what RE2
    refuses (look-around, backreferences) raises ``re2.error``, and what it accepts matches as in
    Volcano (``\\pL``, ``\\z`` and the other constructs Python's ``re`` reads otherwise)."""
    if _ANY_BYTE.search(pattern):  # the one escape RE2's C++ engine takes and Go's regexp refuses
        raise re2.error("invalid escape sequence: \\C (Go's regexp has no any-byte class)")
    return cast(_Pattern, re2.compile(pattern, _RE2_OPTIONS))


_ANY_BYTE = re2.compile(r"(?:^|[^\\])(?:\\\\)*\\C")  # \C after an even number of backslashes


def _re2_error(exc: Exception) -> str:
    text = exc.args[0] if exc.args else exc
    return text.decode(errors="replace") if isinstance(text, bytes) else str(text)


class MemberSelector(_Model):
    """Exactly one of the three is set."""

    exact: str | None = None
    regex: str | None = None
    label: LabelSelector | None = None


class Member(_Model):
    type: MemberType
    selector: MemberSelector

    def matches_node(self, name: str, labels: dict[str, str]) -> bool:
        """Whether this member claims the node ``name``; a HyperNode member claims no node itself."""
        if self.type != "Node":
            return False
        sel = self.selector
        if sel.exact is not None:
            return sel.exact == name
        if sel.regex is not None:
            # Unanchored, like Go's Regexp.MatchString: "^...$" must be written to anchor.
            return _compiled(sel.regex).search(name) is not None
        return sel.label is not None and sel.label.matches(labels)

    @property
    def hypernode(self) -> str | None:
        """The child HyperNode this member names, or None for a node member."""
        return self.selector.exact if self.type == "HyperNode" else None


def _member(r: Reader, raw: Any, field: str) -> Member:
    m = r.mapping(raw, field)
    mtype = r.string(m.get("type"), f"{field}.type", required=True)
    if mtype not in ("Node", "HyperNode"):
        raise r.fail(f"{field}.type", f"must be Node or HyperNode, got {mtype!r}")
    sf = f"{field}.selector"
    sel = r.mapping(m.get("selector"), sf)
    # Presence counts, as with CEL's has(): "exactMatch: {}" is a selector, and an empty one.
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if sel.get(k) is not None]
    if not given:
        raise r.fail(sf, "must set one of exactMatch, regexMatch or labelMatch")
    if len(given) > 1:
        raise r.fail(sf, f"must set only one of exactMatch, regexMatch or labelMatch, got {', '.join(given)}")
    kind = given[0]
    if mtype == "HyperNode" and kind != "exactMatch":
        raise r.fail(f"{sf}.{kind}", "a HyperNode member is selected by exactMatch only")
    if kind == "exactMatch":
        name = r.string(r.mapping(sel[kind], f"{sf}.exactMatch").get("name"), f"{sf}.exactMatch.name",
                        required=True)
        problem = subdomain_problem(name)
        if problem:
            raise r.fail(f"{sf}.exactMatch.name", problem)
        return Member(type=mtype, selector=MemberSelector(exact=name))  # type: ignore[arg-type]
    if kind == "regexMatch":
        pf = f"{sf}.regexMatch.pattern"
        pattern = r.string(r.mapping(sel[kind], f"{sf}.regexMatch").get("pattern"), pf, required=True)
        # Volcano's webhook compiles it with Go's regexp (RE2 syntax) and refuses what does not compile.
        try:
            _compiled(pattern)
        except re2.error as exc:
            raise r.fail(pf, f"invalid regular expression {pattern!r} (Go's RE2 syntax, as Volcano compiles it; "
                             f"no look-around or backreferences): {_re2_error(exc)}") from exc
        return Member(type=mtype, selector=MemberSelector(regex=pattern))  # type: ignore[arg-type]
    return Member(type=mtype,  # type: ignore[arg-type]
                  selector=MemberSelector(label=LabelSelector.from_raw(r, sel[kind], f"{sf}.labelMatch")))


class HyperNode(_Model):
    name: str
    tier: int
    tier_name: str = ""
    members: tuple[Member, ...]
    node_count: int | None = None
    conditions: tuple[dict[str, str], ...] = ()
    creation: float | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> HyperNode:
        r, meta, (spec, status) = read_object(raw, "HyperNode", "spec", "status")
        tier = r.integer(spec.get("tier"), "spec.tier", minimum=0)
        if tier is None:
            raise r.fail("spec.tier", "is required")
        # No members (or an empty list) is an empty HyperNode of 0 nodes: Volcano's API declares
        # members optional, and its scheduler takes such a HyperNode as it is.
        raw_members = r.seq(spec.get("members"), "spec.members")
        members = tuple(_member(r, m, f"spec.members[{i}]") for i, m in enumerate(raw_members))
        node_count = r.integer(status.get("nodeCount"), "status.nodeCount", bits=64, minimum=0)
        conditions = tuple(
            # Times and generations are kept as text: the scheduler only reads type, status and reason.
            {str(k): str(v) for k, v in r.mapping(c, f"status.conditions[{i}]").items()
             if isinstance(v, str | int) and not isinstance(v, bool)}
            for i, c in enumerate(r.seq(status.get("conditions"), "status.conditions"))
        )
        return cls(
            name=r.name(meta.get("name")),
            tier=tier,
            tier_name=r.string(spec.get("tierName"), "spec.tierName"),
            members=members,
            node_count=node_count,
            conditions=conditions,
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        )


class SubGroupPolicy(_Model):
    name: str
    sub_group_size: int | None = None
    min_sub_groups: int | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    network_topology: NetworkTopology | None = None

    def match_values(self, labels: dict[str, str]) -> list[str] | None:
        """A pod's values of ``matchLabelKeys`` when this policy claims the pod, else None.

        As Volcano reads a policy: the pod must match the selector (none: every pod) and carry
        every one of the keys with a non-empty value; a policy that lists no keys claims no pod."""
        if self.label_selector is not None and not self.label_selector.matches(labels):
            return None
        values = [labels.get(k, "") for k in self.match_label_keys]
        return values if values and all(values) else None


def _sub_group_policy(r: Reader, raw: Any, field: str) -> SubGroupPolicy:
    m = r.mapping(raw, field)
    name = r.string(m.get("name"), f"{field}.name", required=True)
    size = r.integer(m.get("subGroupSize"), f"{field}.subGroupSize", minimum=1)
    min_groups = r.integer(m.get("minSubGroups"), f"{field}.minSubGroups", minimum=0)
    keys = tuple(r.string(k, f"{field}.matchLabelKeys[{j}]", required=True)
                 for j, k in enumerate(r.seq(m.get("matchLabelKeys"), f"{field}.matchLabelKeys")))
    for j, key in enumerate(keys):
        problem = qualified_name_problem(key)
        if problem:
            raise r.fail(f"{field}.matchLabelKeys[{j}]", problem)
    if len(set(keys)) != len(keys):
        raise r.fail(f"{field}.matchLabelKeys", f"lists a key twice: {', '.join(keys)}")
    selector = (LabelSelector.from_raw(r, m["labelSelector"], f"{field}.labelSelector")
                if m.get("labelSelector") is not None else None)
    topology = (NetworkTopology.from_raw(r, m["networkTopology"], f"{field}.networkTopology")
                if m.get("networkTopology") is not None else None)
    return SubGroupPolicy(name=name, sub_group_size=size, min_sub_groups=min_groups, label_selector=selector,
                          match_label_keys=keys, network_topology=topology)


class VolcanoPodGroupStatus(_Model):
    phase: str = "Pending"
    running: int = 0
    succeeded: int = 0
    failed: int = 0

    def counts(self) -> dict[str, object]:
        """The phase and member counts, keyed as the status is written."""
        return {"phase": self.phase, "running": self.running, "succeeded": self.succeeded, "failed": self.failed}

    def written(self) -> dict[str, object]:
        """Every field of the status the scheduler writes, as it stands (the counts)."""
        return self.counts()


class VolcanoPodGroup(_Model, NamespacedKey):
    namespace: str
    name: str
    # Volcano's API declares minMember as a bare int32 with no minimum, so only a negative
    # count, which no reading could make sense of, is refused.
    min_member: int = 0
    min_resources: dict[str, int] = {}  # in the units of Node.allocatable
    network_topology: NetworkTopology | None = None
    sub_group_policy: tuple[SubGroupPolicy, ...] = ()
    priority_class_name: str = ""
    queue: str = "default"
    annotations: dict[str, str] = {}
    creation: float | None = None
    status: VolcanoPodGroupStatus = VolcanoPodGroupStatus()

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> VolcanoPodGroup:
        r, meta, (spec, status) = read_object(raw, "PodGroup", "spec", "status")
        min_member = r.integer(spec.get("minMember"), "spec.minMember", default=0, minimum=0) or 0
        min_res = r.resources(spec.get("minResources"), "spec.minResources")
        topology = (NetworkTopology.from_raw(r, spec["networkTopology"], "spec.networkTopology")
                    if spec.get("networkTopology") is not None else None)
        policies = tuple(_sub_group_policy(r, p, f"spec.subGroupPolicy[{i}]")
                         for i, p in enumerate(r.seq(spec.get("subGroupPolicy"), "spec.subGroupPolicy")))
        seen: set[str] = set()
        for i, p in enumerate(policies):
            if p.name in seen:
                raise r.fail(f"spec.subGroupPolicy[{i}].name", f"policy {p.name!r} is declared twice")
            seen.add(p.name)
        phase = r.string(status.get("phase"), "status.phase") or "Pending"
        if phase not in PHASES:
            raise r.fail("status.phase", f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
        counts = {k: r.integer(status.get(k), f"status.{k}", default=0) or 0
                  for k in ("running", "succeeded", "failed")}
        return cls(
            namespace=r.namespace(meta.get("namespace")),
            name=r.name(meta.get("name")),
            min_member=min_member,
            min_resources=min_res,
            network_topology=topology,
            sub_group_policy=policies,
            priority_class_name=r.string(spec.get("priorityClassName"), "spec.priorityClassName"),
            queue=r.string(spec.get("queue"), "spec.queue") or "default",
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            status=VolcanoPodGroupStatus(phase=phase, **counts),
        )


def pod_volcano_group(pod: Pod) -> str | None:
    """``namespace/name`` of the Volcano PodGroup a pod joins by annotation, or None."""
    name = pod.annotations.get(GROUP_NAME_ANN, "")
    return f"{pod.namespace}/{name}" if name else None
