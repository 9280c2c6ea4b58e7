"""Kueue's Topology (``kueue.x-k8s.io`` v1beta2, v1beta1 and v1alpha1, one schema), its KAI-Scheduler twin
(``kai.scheduler/v1alpha1``), KAI's PodGroup (``scheduling.run.ai/v2alpha2``) and the KAI
topology annotations.

A Topology lists node-label keys from the top level down; each is one level of one tree.
A job's constraint names the Topology and a required and/or preferred level; its keys may
come from the pod, its PodGroup or its top-level owner, so they are kept as separate
layers here and merged by whoever knows the order.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from koordpy.api.model import NamespacedKey
from koordpy.api.quantity import parse_go_duration
from koordpy.api.raw import read_object
from koordpy.api.selectors import qualified_name_problem

KUEUE_GROUP = "kueue.x-k8s.io"
KAI_GROUP = "kai.scheduler"
KAI_PODGROUP_GROUP = "scheduling.run.ai"
TOPOLOGY_API_VERSIONS = (f"{KUEUE_GROUP}/v1alpha1", f"{KUEUE_GROUP}/v1beta1", f"{KUEUE_GROUP}/v1beta2",
                         f"{KAI_GROUP}/v1alpha1")
HOSTNAME = "kubernetes.io/hostname"
MAX_LEVELS = 16
# What Kueue writes on every pod of a workload it admitted: the pod set's name (a label), and the
# Workload's name (an annotation, written when topology-aware scheduling is on, its default).
LABEL_PODSET = f"{KUEUE_GROUP}/podset"
ANN_WORKLOAD = f"{KUEUE_GROUP}/workload"
# Kueue's topology-aware scheduling: a pod set asks for it with one of these annotations on its
# template (Kueue adds the unconstrained one itself when a TAS flavor admits a pod set that asked for
# none), so every pod of a TAS workload carries one. Its pods are made behind ``TOPOLOGY_GATE``, which
# Kueue removes once it has written its assigned domain's level labels into their nodeSelector.
TAS_ANNOTATIONS = tuple(f"{KUEUE_GROUP}/podset-{what}-topology"
                        for what in ("required", "preferred", "unconstrained", "slice-required"))
TOPOLOGY_GATE = f"{KUEUE_GROUP}/topology"
ANN_TOPOLOGY = "kai.scheduler/topology"
ANN_REQUIRED = "kai.scheduler/topology-required-placement"
ANN_PREFERRED = "kai.scheduler/topology-preferred-placement"
_ANNOTATION_FIELDS = (("topology", ANN_TOPOLOGY), ("required", ANN_REQUIRED), ("preferred", ANN_PREFERRED))


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Topology(_Model):
    group: str
    version: str
    name: str
    levels: tuple[str, ...]  # node-label keys, top level first
    creation: float | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @classmethod
    def from_raw(cls, raw: dict[str, Any], api_version: str | None = None) -> Topology:
        """``api_version`` stands in when ``raw`` carries none (the caller knows the kind)."""
        r, meta, (spec,) = read_object(raw, "Topology", "spec")
        version_text = r.string(raw.get("apiVersion"), "apiVersion") or api_version or ""
        if version_text not in TOPOLOGY_API_VERSIONS:
            raise r.fail("apiVersion", f"must be one of {', '.join(TOPOLOGY_API_VERSIONS)}, got {version_text!r}")
        group, _, version = version_text.partition("/")
        items = r.seq(spec.get("levels"), "spec.levels")
        if not 1 <= len(items) <= MAX_LEVELS:
            raise r.fail("spec.levels", f"must list 1 to {MAX_LEVELS} levels, got {len(items)}")
        levels: list[str] = []
        for i, item in enumerate(items):
            f = f"spec.levels[{i}].nodeLabel"
            key = r.string(r.mapping(item, f"spec.levels[{i}]").get("nodeLabel"), f, required=True)
            problem = qualified_name_problem(key)
            if problem:
                raise r.fail(f, problem)
            if key in levels:
                raise r.fail(f, f"{key!r} is already level {levels.index(key)}")
            levels.append(key)
        if HOSTNAME in levels[:-1]:
            raise r.fail(f"spec.levels[{levels.index(HOSTNAME)}].nodeLabel",
                         f"{HOSTNAME} names single nodes, so it may only be the last (lowest) level")
        return cls(group=group, version=version, name=r.name(meta.get("name")), levels=tuple(levels),
                   creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"))

    def resolve_level(self, text: str) -> int:
        """The index in ``levels`` of a level named by its full key or, when only one level of
        this Topology ends that way, by the key's last segment (``rack`` for ``example.com/rack``)."""
        if text in self.levels:
            return self.levels.index(text)
        hits = [i for i, key in enumerate(self.levels) if key.rpartition("/")[2] == text]
        if len(hits) == 1:
            return hits[0]
        listing = ", ".join(self.levels)
        if hits:
            both = " and ".join(self.levels[i] for i in hits)
            raise ValueError(f"level {text!r} is ambiguous in Topology {self.name}: it ends {both}; "
                             f"use the full key; levels, top first: {listing}")
        raise ValueError(f"Topology {self.name} has no level {text!r}; levels, top first: {listing}")


class TopologyConstraint(_Model):
    """What a KAI job asks of a Topology; an empty string is "not asked"."""

    topology: str = ""
    required: str = ""
    preferred: str = ""

    @classmethod
    def layered(cls, *layers: dict[str, str]) -> TopologyConstraint:
        """The constraint from several layers (pod, PodGroup, owner...), the first that sets a key winning."""
        merged: dict[str, str] = {}
        for layer in layers:
            for key, value in layer.items():
                merged.setdefault(key, value)
        return cls(**merged)

    def keys_set(self) -> dict[str, str]:
        return {k: v for k, v in (("topology", self.topology), ("required", self.required),
                                  ("preferred", self.preferred)) if v}


def kai_constraint_from_annotations(annotations: dict[str, str]) -> dict[str, str]:
    """The constraint keys these annotations set, by TopologyConstraint field name.

    An empty value sets nothing, so a blank key on a pod does not hide its owner's value.
    """
    return {fld: annotations[ann] for fld, ann in _ANNOTATION_FIELDS if annotations.get(ann)}


class KaiPodGroup(_Model, NamespacedKey):
    namespace: str
    name: str
    min_member: int = 0
    queue: str = ""
    priority_class_name: str = ""
    annotations: dict[str, str] = {}
    creation: float | None = None
    topology_constraint: TopologyConstraint | None = None
    phase: str = ""
    # spec.preemptionDelay as written (a Go duration; "" not set): read where it is used, so that a
    # bad value is told as such and does not make the whole PodGroup unusable.
    preemption_delay: str = ""
    # spec.stalenessGracePeriod in seconds (a Go duration; negative: a stale gang is never evicted).
    staleness_grace: float | None = None

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> KaiPodGroup:
        r, meta, (spec, status) = read_object(raw, "PodGroup", "spec", "status")
        min_member = r.integer(spec.get("minMember"), "spec.minMember", default=0, minimum=0) or 0
        # KAI's released API spells the key topologyConstraint; its design document (seed 003)
        # writes topologyConstraints. Either is read; both at once would leave the intent unclear.
        present = [k for k in ("topologyConstraint", "topologyConstraints") if spec.get(k) is not None]
        if len(present) > 1:
            raise r.fail("spec", "set topologyConstraint or topologyConstraints, not both")
        constraint = None
        if present:
            f = f"spec.{present[0]}"
            c = r.mapping(spec[present[0]], f)
            constraint = TopologyConstraint(
                topology=r.string(c.get("topology"), f"{f}.topology"),
                required=r.string(c.get("requiredTopologyLevel"), f"{f}.requiredTopologyLevel"),
                preferred=r.string(c.get("preferredTopologyLevel"), f"{f}.preferredTopologyLevel"),
            )
        grace = None
        if spec.get("stalenessGracePeriod") not in (None, ""):
            try:
                grace = parse_go_duration(spec["stalenessGracePeriod"])
            except ValueError as exc:
                raise r.fail("spec.stalenessGracePeriod", str(exc)) from exc
        return cls(
            staleness_grace=grace,
            namespace=r.namespace(meta.get("namespace")),
            name=r.name(meta.get("name")),
            min_member=min_member,
            queue=r.string(spec.get("queue"), "spec.queue"),
            priority_class_name=r.string(spec.get("priorityClassName"), "spec.priorityClassName"),
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            topology_constraint=constraint,
            phase=r.string(status.get("phase"), "status.phase"),
            preemption_delay=r.string(spec.get("preemptionDelay"), "spec.preemptionDelay"),
        )

    def constraint_keys(self) -> dict[str, str]:
        """The constraint keys this PodGroup sets: its spec first, then its own annotations."""
        spec = self.topology_constraint.keys_set() if self.topology_constraint else {}
        return {**kai_constraint_from_annotations(self.annotations), **spec}


class KaiQueue(_Model):
    """KAI's Queue (``scheduling.run.ai/v2``, cluster-scoped) as far as preemption reads it: its
    parent, and the minimum runtime a job of its must have had before it may be preempted (a Go
    duration as written, "" not set; a queue without one takes its parent's)."""

    name: str
    parent: str = ""
    preempt_min_runtime: str = ""

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> KaiQueue:
        r, meta, (spec,) = read_object(raw, "Queue", "spec")
        return cls(name=r.name(meta.get("name")),
                   parent=r.string(spec.get("parentQueue"), "spec.parentQueue"),
                   preempt_min_runtime=r.string(spec.get("preemptMinRuntime"), "spec.preemptMinRuntime"))
