"""Volcano's network-topology API: HyperNode (``topology.volcano.sh/v1alpha1``), Volcano's PodGroup
(``scheduling.volcano.sh/v1beta1``) with ``networkTopology`` and ``subGroupPolicy``, and the
``volcano.sh/network-topology-*`` annotations a scheduler-plugins PodGroup may carry.

HyperNodes are validated as Volcano's admission webhook validates them, so a manifest koordpy
accepts is one a Volcano cluster accepts too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import ParseError, object_ref
from koordpy.api.podgroup import PodGroupStatus
from koordpy.api.raw import Reader, int_text
from koordpy.api.selectors import LabelSelector

GROUP_NAME_ANN = "scheduling.k8s.io/group-name"
ANN_MODE = "volcano.sh/network-topology-mode"
ANN_HIGHEST_TIER = "volcano.sh/network-topology-highest-tier"
ANN_HIGHEST_TIER_NAME = "volcano.sh/network-topology-highest-tier-name"
VOLCANO_PHASES = ("Pending", "Running", "Unknown", "Inqueue", "Completed")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class NetworkTopology(_Model):
    mode: Literal["hard", "soft"] = "hard"
    highest_tier: int | None = None
    highest_tier_name: str | None = None

    @classmethod
    def from_raw(cls, r: Reader, value: Any, field: str) -> NetworkTopology:
        m = r.mapping(value, field)
        unknown = set(m) - {"mode", "highestTierAllowed", "highestTierName"}
        if unknown:
            raise r.fail(field, f"unknown keys {sorted(unknown)}; expected mode, highestTierAllowed, highestTierName")
        mode = r.string(m.get("mode"), f"{field}.mode") or "hard"
        if mode not in ("hard", "soft"):
            raise r.fail(f"{field}.mode", f"must be hard or soft, got {mode!r}")
        tier = r.integer(m.get("highestTierAllowed"), f"{field}.highestTierAllowed")
        if tier is not None and tier < 0:
            raise r.fail(f"{field}.highestTierAllowed", f"must not be negative, got {tier}")
        name = r.string(m.get("highestTierName"), f"{field}.highestTierName") or None
        if tier is not None and name is not None:
            raise r.fail(field, "highestTierAllowed and highestTierName cannot both be set")
        return cls(mode=mode, highest_tier=tier, highest_tier_name=name)  # type: ignore[arg-type]


def network_topology_from_annotations(ref: str, annotations: Mapping[str, str]) -> NetworkTopology | None:
    """The ``volcano.sh/network-topology-*`` annotations, or None when none is set."""
    if not any(k in annotations for k in (ANN_MODE, ANN_HIGHEST_TIER, ANN_HIGHEST_TIER_NAME)):
        return None
    mode = annotations.get(ANN_MODE, "hard") or "hard"
    if mode not in ("hard", "soft"):
        raise ParseError(ref, f"metadata.annotations[{ANN_MODE}]", f"must be hard or soft, got {mode!r}")
    tier = None
    if ANN_HIGHEST_TIER in annotations:
        try:
            tier = int_text(annotations[ANN_HIGHEST_TIER])
        except ValueError as exc:
            raise ParseError(ref, f"metadata.annotations[{ANN_HIGHEST_TIER}]", str(exc)) from exc
        if tier < 0:
            raise ParseError(ref, f"metadata.annotations[{ANN_HIGHEST_TIER}]", f"must not be negative, got {tier}")
    name = annotations.get(ANN_HIGHEST_TIER_NAME) or None
    if tier is not None and name is not None:
        raise ParseError(ref, "metadata.annotations", f"{ANN_HIGHEST_TIER} and {ANN_HIGHEST_TIER_NAME} cannot both "
                                                      "be set")
    return NetworkTopology(mode=mode, highest_tier=tier, highest_tier_name=name)  # type: ignore[arg-type]


class MemberSelector(_Model):
    """Exactly one of a name, a regular expression over names, or a label selector."""

    exact_name: str | None = None
    pattern: str | None = None
    labels: LabelSelector | None = None

    def matches(self, name: str, labels: dict[str, str]) -> bool:
        if self.exact_name is not None:
            return name == self.exact_name
        if self.pattern is not None:
            return _regex(self.pattern).search(name) is not None  # Go's MatchString is unanchored too
        return self.labels is not None and self.labels.matches(labels)


_REGEX_CACHE: dict[str, re.Pattern[str]] = {}


def _regex(pattern: str) -> re.Pattern[str]:
    compiled = _REGEX_CACHE.get(pattern)
    if compiled is None:
        compiled = _REGEX_CACHE[pattern] = re.compile(pattern)
    return compiled


class Member(_Model):
    type: Literal["Node", "HyperNode"]
    selector: MemberSelector

    def matches_node(self, name: str, labels: dict[str, str]) -> bool:
        return self.type == "Node" and self.selector.matches(name, labels)


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
        r = Reader(object_ref(raw, "HyperNode"))
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        status = r.mapping(raw.get("status"), "status")
        tier = r.integer(spec.get("tier"), "spec.tier")
        if tier is None:
            raise r.fail("spec.tier", "is required")
        if tier < 0:
            raise r.fail("spec.tier", f"must not be negative, got {tier}")
        items = r.seq(spec.get("members"), "spec.members")
        if not items:
            raise r.fail("spec.members", "a HyperNode needs at least one member")
        members = tuple(_member(r, item, f"spec.members[{i}]") for i, item in enumerate(items))
        count = r.integer(status.get("nodeCount"), "status.nodeCount", bits=64)
        conditions = tuple({str(k): str(v) for k, v in r.mapping(c, f"status.conditions[{i}]").items()}
                           for i, c in enumerate(r.seq(status.get("conditions"), "status.conditions")))
        return cls(name=r.name(meta.get("name")), tier=tier,
                   tier_name=r.string(spec.get("tierName"), "spec.tierName"), members=members,
                   node_count=count, conditions=conditions,
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))


def _member(r: Reader, value: Any, field: str) -> Member:
    m = r.mapping(value, field)
    kind = r.string(m.get("type"), f"{field}.type", required=True)
    if kind not in ("Node", "HyperNode"):
        raise r.fail(f"{field}.type", f"must be Node or HyperNode, got {kind!r}")
    sel = r.mapping(m.get("selector"), f"{field}.selector")
    given = [k for k in ("exactMatch", "regexMatch", "labelMatch") if sel.get(k) is not None]
    unknown = set(sel) - {"exactMatch", "regexMatch", "labelMatch"}
    if unknown:
        raise r.fail(f"{field}.selector", f"unknown keys {sorted(unknown)}; expected exactMatch, regexMatch or "
                                          "labelMatch")
    if len(given) != 1:
        raise r.fail(f"{field}.selector", "exactly one of exactMatch, regexMatch or labelMatch must be set"
                     + (f", got {', '.join(given)}" if given else ""))
    which = given[0]
    if kind == "HyperNode" and which != "exactMatch":
        raise r.fail(f"{field}.selector", f"a HyperNode member is selected by exactMatch only, not {which}")
    if which == "exactMatch":
        name = r.string(r.mapping(sel["exactMatch"], f"{field}.selector.exactMatch").get("name"),
                        f"{field}.selector.exactMatch.name", required=True)
        return Member(type=kind, selector=MemberSelector(exact_name=name))  # type: ignore[arg-type]
    if which == "regexMatch":
        pattern = r.string(r.mapping(sel["regexMatch"], f"{field}.selector.regexMatch").get("pattern"),
                           f"{field}.selector.regexMatch.pattern", required=True)
        try:
            _regex(pattern)  # Python's syntax differs from Go's RE2 only in corners node names never need
        except re.error as exc:
            raise r.fail(f"{field}.selector.regexMatch.pattern", f"invalid regular expression {pattern!r}: "
                                                                  f"{exc}") from exc
        return Member(type=kind, selector=MemberSelector(pattern=pattern))  # type: ignore[arg-type]
    return Member(type=kind, selector=MemberSelector(  # type: ignore[arg-type]
        labels=LabelSelector.from_raw(r, sel["labelMatch"], f"{field}.selector.labelMatch")))


class SubGroupPolicy(_Model):
    name: str
    sub_group_size: int | None = None
    min_sub_groups: int | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: tuple[str, ...] = ()
    network_topology: NetworkTopology | None = None


class VolcanoPodGroup(_Model):
    namespace: str
    name: str
    min_member: int = 0
    min_resources: dict[str, int] = {}
    network_topology: NetworkTopology | None = None
    sub_group_policy: tuple[SubGroupPolicy, ...] = ()
    queue: str = ""
    priority_class_name: str = ""
    annotations: dict[str, str] = {}
    creation: float | None = None
    status: PodGroupStatus = PodGroupStatus()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> VolcanoPodGroup:
        r = Reader(object_ref(raw, "PodGroup"))
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        status = r.mapping(raw.get("status"), "status")
        min_member = r.integer(spec.get("minMember"), "spec.minMember", default=0) or 0
        if min_member < 0:
            raise r.fail("spec.minMember", f"must not be negative, got {min_member}")
        min_res = {str(res): r.quantity(str(res), q, f"spec.minResources.{res}")
                   for res, q in r.mapping(spec.get("minResources"), "spec.minResources").items()}
        topology = (NetworkTopology.from_raw(r, spec["networkTopology"], "spec.networkTopology")
                    if spec.get("networkTopology") is not None else None)
        policies = []
        seen: set[str] = set()
        for i, item in enumerate(r.seq(spec.get("subGroupPolicy"), "spec.subGroupPolicy")):
            f = f"spec.subGroupPolicy[{i}]"
            p = r.mapping(item, f)
            name = r.string(p.get("name"), f"{f}.name", required=True)
            if name in seen:
                raise r.fail(f"{f}.name", f"sub-group policy {name!r} is declared twice")
            seen.add(name)
            size = r.integer(p.get("subGroupSize"), f"{f}.subGroupSize")
            if size is not None and size < 1:
                raise r.fail(f"{f}.subGroupSize", f"must be at least 1, got {size}")
            min_sub = r.integer(p.get("minSubGroups"), f"{f}.minSubGroups")
            if min_sub is not None and min_sub < 0:
                raise r.fail(f"{f}.minSubGroups", f"must not be negative, got {min_sub}")
            policies.append(SubGroupPolicy(
                name=name, sub_group_size=size, min_sub_groups=min_sub,
                label_selector=(LabelSelector.from_raw(r, p["labelSelector"], f"{f}.labelSelector")
                                if p.get("labelSelector") is not None else None),
                match_label_keys=tuple(r.string(k, f"{f}.matchLabelKeys[{j}]", required=True)
                                       for j, k in enumerate(r.seq(p.get("matchLabelKeys"), f"{f}.matchLabelKeys"))),
                network_topology=(NetworkTopology.from_raw(r, p["networkTopology"], f"{f}.networkTopology")
                                  if p.get("networkTopology") is not None else None)))
        phase = r.string(status.get("phase"), "status.phase") or "Pending"
        if phase not in VOLCANO_PHASES:
            raise r.fail("status.phase", f"unknown phase {phase!r}; one of {', '.join(VOLCANO_PHASES)}")
        return cls(
            namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")), min_member=min_member,
            min_resources=min_res, network_topology=topology, sub_group_policy=tuple(policies),
            queue=r.string(spec.get("queue"), "spec.queue"),
            priority_class_name=r.string(spec.get("priorityClassName"), "spec.priorityClassName"),
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            status=PodGroupStatus(phase=phase,
                                  running=r.integer(status.get("running"), "status.running", default=0) or 0,
                                  succeeded=r.integer(status.get("succeeded"), "status.succeeded", default=0) or 0,
                                  failed=r.integer(status.get("failed"), "status.failed", default=0) or 0))
