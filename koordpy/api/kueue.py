"""Kueue's Topology (``kueue.x-k8s.io`` v1alpha1 and v1beta1, and KAI's copy ``kai.scheduler/v1alpha1``),
KAI's PodGroup (``scheduling.run.ai/v2alpha2``) and KAI's topology annotations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import object_ref
from koordpy.api.podgroup import PodGroupStatus
from koordpy.api.raw import Reader

ANN_TOPOLOGY = "kai.scheduler/topology"
ANN_REQUIRED = "kai.scheduler/topology-required-placement"
ANN_PREFERRED = "kai.scheduler/topology-preferred-placement"
HOSTNAME = "kubernetes.io/hostname"
MAX_LEVELS = 16  # as Kueue's CRD bounds spec.levels
_NAME = r"[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_LABEL_KEY = re.compile(rf"(?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*/)?{_NAME}")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Topology(_Model):
    group: str
    version: str
    name: str
    levels: tuple[str, ...]  # node label keys, top level first
    creation: float | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> Topology:
        r = Reader(object_ref(raw, "Topology"))
        group, _, version = str(raw.get("apiVersion", "")).rpartition("/")
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        items = r.seq(spec.get("levels"), "spec.levels")
        if not 1 <= len(items) <= MAX_LEVELS:
            raise r.fail("spec.levels", f"must list 1 to {MAX_LEVELS} levels, got {len(items)}")
        levels: list[str] = []
        for i, item in enumerate(items):
            f = f"spec.levels[{i}].nodeLabel"
            key = r.string(r.mapping(item, f"spec.levels[{i}]").get("nodeLabel"), f, required=True)
            if len(key) > 316 or not _LABEL_KEY.fullmatch(key):
                raise r.fail(f, f"{key!r} is not a valid label key")
            if key in levels:
                raise r.fail(f, f"level {key!r} is listed twice")
            levels.append(key)
        if HOSTNAME in levels[:-1]:
            raise r.fail("spec.levels", f"{HOSTNAME} may only be the lowest level")
        return cls(group=group, version=version, name=r.name(meta.get("name")), levels=tuple(levels),
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))

    def resolve_level(self, text: str) -> int:
        """The index of the level ``text`` names: its full label key, or the key's last segment
        when no other level of this Topology ends the same way."""
        if text in self.levels:
            return self.levels.index(text)
        short = [i for i, key in enumerate(self.levels) if key.rsplit("/", 1)[-1] == text]
        listed = ", ".join(self.levels)
        if len(short) == 1:
            return short[0]
        if short:
            raise ValueError(f"level {text!r} is ambiguous in Topology {self.name!r} (levels: {listed}); "
                             "use the full label key")
        raise ValueError(f"level {text!r} is not in Topology {self.name!r}; levels: {listed}")


class TopologyConstraint(_Model):
    topology: str = ""
    required: str = ""
    preferred: str = ""


def kai_constraint_from_annotations(annotations: Mapping[str, str]) -> dict[str, str]:
    """The KAI keys the annotations set (only those), so callers can layer pod, PodGroup and owner."""
    return {k: annotations[k] for k in (ANN_TOPOLOGY, ANN_REQUIRED, ANN_PREFERRED) if annotations.get(k)}


class KaiPodGroup(_Model):
    namespace: str
    name: str
    min_member: int = 1
    topology_constraint: TopologyConstraint | None = None
    annotations: dict[str, str] = {}
    creation: float | None = None
    status: PodGroupStatus = PodGroupStatus()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> KaiPodGroup:
        r = Reader(object_ref(raw, "PodGroup"))
        meta = r.mapping(raw.get("metadata"), "metadata")
        spec = r.mapping(raw.get("spec"), "spec")
        min_member = r.integer(spec.get("minMember"), "spec.minMember", default=1)
        if min_member is None or min_member < 0:
            raise r.fail("spec.minMember", f"must not be negative, got {min_member}")
        # KAI's API spells it topologyConstraint; seed 003 writes topologyConstraints. Both are read.
        spelled = [k for k in ("topologyConstraint", "topologyConstraints") if spec.get(k) is not None]
        if len(spelled) > 1:
            raise r.fail("spec", "set topologyConstraint or topologyConstraints, not both")
        constraint = None
        if spelled:
            f = f"spec.{spelled[0]}"
            tc = r.mapping(spec[spelled[0]], f)
            unknown = set(tc) - {"topology", "requiredTopologyLevel", "preferredTopologyLevel"}
            if unknown:
                raise r.fail(f, f"unknown keys {sorted(unknown)}; expected topology, requiredTopologyLevel, "
                                "preferredTopologyLevel")
            constraint = TopologyConstraint(
                topology=r.string(tc.get("topology"), f"{f}.topology"),
                required=r.string(tc.get("requiredTopologyLevel"), f"{f}.requiredTopologyLevel"),
                preferred=r.string(tc.get("preferredTopologyLevel"), f"{f}.preferredTopologyLevel"))
        return cls(namespace=r.namespace(meta.get("namespace")), name=r.name(meta.get("name")),
                   min_member=min_member, topology_constraint=constraint,
                   annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))
