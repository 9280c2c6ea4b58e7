"""PodGroup (``scheduling.sigs.k8s.io/v1alpha1``) and the gang annotations of Koordinator.

A gang is declared either by a PodGroup CR (pods join it with a label) or by annotations
on the pods themselves. ``GangConfig`` is the resolved declaration either way; annotation
values override the CR's spec.
"""

from __future__ import annotations

import json
import re
from collections.abc import Container, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.errors import ParseError
from koordpy.api.gangname import ANN_NAME, COMPAT_NAME
from koordpy.api.model import NamespacedKey
from koordpy.api.quantity import parse_go_duration
from koordpy.api.raw import Reader, int_text, read_object, rfc3339, subdomain_problem
from koordpy.api.topology import NetworkTopologySpec, parse_network_topology_spec
from koordpy.api.volcano import network_topology_from_annotations

if TYPE_CHECKING:
    from koordpy.api.objects import Pod

GROUP = "scheduling.sigs.k8s.io"
COMPAT_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"
PREFIX = "gang.scheduling.koordinator.sh/"
ANN_MIN = PREFIX + "min-available"
ANN_TOTAL = PREFIX + "total-number"
ANN_MODE = PREFIX + "mode"
ANN_WAIT = PREFIX + "waiting-time"
ANN_GROUPS = PREFIX + "groups"
ANN_MATCH = PREFIX + "match-policy"
ANN_TIMEOUT = PREFIX + "timeout"
ANN_TOPOLOGY_SPEC = PREFIX + "network-topology-spec"
ANN_TOPOLOGY_INDEX = PREFIX + "network-topology-index"

DEFAULT_WAIT_SECONDS = 600.0
PHASES = ("Pending", "PreScheduling", "Scheduling", "Scheduled", "Running", "Finished", "Failed", "Unknown")
Mode = Literal["Strict", "NonStrict"]
MatchPolicy = Literal["once-satisfied", "only-waiting", "waiting-and-running"]
# GangGroup references are only compared, never created, so they are read leniently
# (Koordinator's own examples use names like "namespaceA/gang-a").
_REF_PART = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9._]*[A-Za-z0-9])?$")


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PodGroupStatus(_Model):
    phase: str = "Pending"
    scheduled: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    schedule_start_time: float | None = None

    def counts(self) -> dict[str, object]:
        """The phase and member counts, keyed as the status is written."""
        return {"phase": self.phase, "scheduled": self.scheduled, "running": self.running,
                "succeeded": self.succeeded, "failed": self.failed}

    def written(self) -> dict[str, object]:
        """Every field of the status the scheduler writes, as it stands, spelled as the API does (the
        start time in RFC 3339's whole seconds: what a write of it reads back as)."""
        start = self.schedule_start_time
        return {**self.counts(), "scheduleStartTime": None if start is None else rfc3339(start)}

    @classmethod
    def from_api(cls, r: Reader, status: dict[str, Any]) -> PodGroupStatus:
        """``status`` as the API (or the core's GangStatusUpdate) spells it."""
        phase = r.string(status.get("phase"), "status.phase") or "Pending"
        if phase not in PHASES:
            raise r.fail("status.phase", f"unknown phase {phase!r}; one of {', '.join(PHASES)}")
        return cls(
            phase=phase,
            scheduled=r.integer(status.get("scheduled"), "status.scheduled", default=0) or 0,
            running=r.integer(status.get("running"), "status.running", default=0) or 0,
            succeeded=r.integer(status.get("succeeded"), "status.succeeded", default=0) or 0,
            failed=r.integer(status.get("failed"), "status.failed", default=0) or 0,
            schedule_start_time=r.timestamp(status.get("scheduleStartTime"), "status.scheduleStartTime"),
        )


class PodGroup(_Model, NamespacedKey):
    namespace: str
    name: str
    min_member: int
    min_resources: dict[str, int] = {}  # in the units of Node.allocatable
    schedule_timeout_seconds: int | None = None
    annotations: dict[str, str] = {}
    creation: float | None = None
    status: PodGroupStatus = PodGroupStatus()

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> PodGroup:
        r, meta, (spec, status) = read_object(raw, "PodGroup", "spec", "status")
        min_member = r.integer(spec.get("minMember"), "spec.minMember", default=0, minimum=1)
        assert min_member is not None
        # Zero or negative means the default waiting time (see gang_config_from_podgroup).
        timeout = r.integer(spec.get("scheduleTimeoutSeconds"), "spec.scheduleTimeoutSeconds")
        min_res = r.resources(spec.get("minResources"), "spec.minResources")
        pg = cls(
            namespace=r.namespace(meta.get("namespace")),
            name=r.name(meta.get("name")),
            min_member=min_member,
            min_resources=min_res,
            schedule_timeout_seconds=timeout,
            annotations=r.str_map(meta.get("annotations"), "metadata.annotations"),
            creation=r.timestamp(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
            status=PodGroupStatus.from_api(r, status),
        )
        # Validate the annotations now, so a bad PodGroup is reported once, against itself.
        gang_config_from_podgroup(pg)
        network_topology_from_annotations(f"PodGroup {pg.key}", pg.annotations)
        return pg


class GangConfig(_Model):
    """What a gang asks for, whichever way it was declared."""

    key: str  # namespace/name
    min_member: int
    total_number: int
    mode: Mode = "Strict"
    waiting_seconds: float = DEFAULT_WAIT_SECONDS
    groups: tuple[str, ...] = ()  # the GangGroup, namespace/name of every gang in it; () is just itself
    match_policy: MatchPolicy = "once-satisfied"
    topology: NetworkTopologySpec | None = None
    from_crd: bool = False

    @property
    def group_keys(self) -> tuple[str, ...]:
        return tuple(sorted(set(self.groups) | {self.key}))


def _count(r: Reader, ann: dict[str, str], key: str) -> int:
    field = f"metadata.annotations[{key}]"
    try:
        v = int_text(ann[key])
    except ValueError as exc:
        raise r.fail(field, f"{exc}; a whole number of at least 1 is expected") from exc
    if v < 1:
        raise r.fail(field, f"must be a whole number of at least 1, got {ann[key]!r}")
    return v


def _overrides(r: Reader, ann: dict[str, str], namespace: str, base: dict[str, Any]) -> dict[str, Any]:
    """Applies the gang annotations in ``ann`` on top of ``base`` (a GangConfig's fields)."""
    out = dict(base)
    if ANN_MIN in ann or COMPAT_MIN in ann:
        out["min_member"] = _count(r, ann, ANN_MIN if ANN_MIN in ann else COMPAT_MIN)
    if ANN_TOTAL in ann:
        out["total_number"] = _count(r, ann, ANN_TOTAL)
    if ANN_MODE in ann:
        if ann[ANN_MODE] not in ("Strict", "NonStrict"):
            raise r.fail(f"metadata.annotations[{ANN_MODE}]", f"must be Strict or NonStrict, got {ann[ANN_MODE]!r}")
        out["mode"] = ann[ANN_MODE]
    if ANN_WAIT in ann:
        try:
            wait = parse_go_duration(ann[ANN_WAIT])
        except ValueError as exc:
            raise r.fail(f"metadata.annotations[{ANN_WAIT}]", str(exc)) from exc
        # As in Koordinator, zero or a negative duration (Go accepts "-5s") is the default,
        # never "wait forever" nor "never wait".
        out["waiting_seconds"] = wait if wait > 0 else DEFAULT_WAIT_SECONDS
    if ANN_MATCH in ann:
        if ann[ANN_MATCH] not in ("once-satisfied", "only-waiting", "waiting-and-running"):
            raise r.fail(f"metadata.annotations[{ANN_MATCH}]",
                         f"must be once-satisfied, only-waiting or waiting-and-running, got {ann[ANN_MATCH]!r}")
        out["match_policy"] = ann[ANN_MATCH]
    if ANN_GROUPS in ann:
        out["groups"] = parse_groups(r, ann[ANN_GROUPS], namespace)
    if ann.get(ANN_TOPOLOGY_SPEC, "").strip():  # an empty value declares nothing, as in Koordinator
        try:
            out["topology"] = parse_network_topology_spec(ann[ANN_TOPOLOGY_SPEC])
        except ValueError as exc:
            raise r.fail(f"metadata.annotations[{ANN_TOPOLOGY_SPEC}]", str(exc)) from exc
    if out.get("total_number", 0) < out["min_member"]:
        out["total_number"] = out["min_member"]
    return out


def parse_groups(r: Reader, text: str, namespace: str) -> tuple[str, ...]:
    field = f"metadata.annotations[{ANN_GROUPS}]"
    if not text.strip():
        return ()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise r.fail(field, f'must be a JSON array of "namespace/name" strings: {exc.msg}') from exc
    except (ValueError, RecursionError) as exc:  # an integer too long for Python, or nesting too deep
        raise r.fail(field, f'must be a JSON array of "namespace/name" strings: {exc}') from exc
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise r.fail(field, f'must be a JSON array of "namespace/name" strings, got {text!r}')
    out = []
    for v in value:
        parts = v.split("/")
        if len(parts) > 2 or not all(_REF_PART.match(p) for p in parts):
            raise r.fail(field, f'{v!r} is not a "namespace/name" gang reference')
        out.append(v if len(parts) == 2 else f"{namespace}/{v}")
    return tuple(out)


def gang_config_from_podgroup(pg: PodGroup) -> GangConfig:
    r = Reader(f"PodGroup {pg.key}")
    base: dict[str, Any] = {
        "key": pg.key,
        "min_member": pg.min_member,
        "total_number": pg.min_member,
        # Koordinator reads a timeout of zero or less as unset, so it is the default too.
        "waiting_seconds": float(pg.schedule_timeout_seconds)
        if pg.schedule_timeout_seconds is not None and pg.schedule_timeout_seconds > 0 else DEFAULT_WAIT_SECONDS,
        "from_crd": True,
    }
    return GangConfig(**_overrides(r, pg.annotations, pg.namespace, base))


GANG_KEYS = frozenset({ANN_MIN, COMPAT_MIN, ANN_TOTAL, ANN_MODE, ANN_WAIT, ANN_GROUPS, ANN_MATCH, ANN_TOPOLOGY_SPEC})
# Everything of a pod's that ``gang_config_from_pod`` reads besides its namespace and PodGroup.
GANG_DECLARATION = GANG_KEYS | {ANN_NAME, COMPAT_NAME}


def gang_config_from_pod(pod_ref: str, namespace: str, annotations: dict[str, str],
                         podgroup: PodGroup | None) -> GangConfig | None:
    """The gang declared by a pod's annotations, layered over its PodGroup when there is one.

    Returns None when the pod names a PodGroup that does not exist and declares no minimum of
    its own: the caller keeps such pods waiting until the PodGroup arrives.
    """
    r = Reader(pod_ref)
    name = annotations.get(ANN_NAME) or annotations.get(COMPAT_NAME)
    problem = subdomain_problem(name) if name else None
    if problem:
        raise r.fail(f"metadata.annotations[{ANN_NAME if annotations.get(ANN_NAME) else COMPAT_NAME}]", problem)
    if podgroup is not None:
        base = gang_config_from_podgroup(podgroup).model_dump()
    elif ANN_MIN in annotations or COMPAT_MIN in annotations:
        base = {"key": f"{namespace}/{name}", "min_member": 1, "total_number": 0}
    else:
        if name:
            raise r.fail(f"metadata.annotations[{ANN_MIN}]", f"is required with {ANN_NAME} when no PodGroup "
                         f"{namespace}/{name} exists")
        return None
    # The topology spec counts like every other gang key: an annotation gang has nowhere else to
    # declare it, and on a PodGroup's pods it overrides the PodGroup's, as the other keys do.
    relevant = {k: v for k, v in annotations.items() if k in GANG_KEYS}
    return GangConfig(**_overrides(r, relevant, namespace, base))


def topology_index(pod_ref: str, annotations: dict[str, str]) -> int | None:
    raw = annotations.get(ANN_TOPOLOGY_INDEX)
    if raw is None:
        return None
    try:
        value = int_text(raw)
    except ValueError as exc:
        raise ParseError(pod_ref, f"metadata.annotations[{ANN_TOPOLOGY_INDEX}]", str(exc)) from exc
    if value < 0:
        raise ParseError(pod_ref, f"metadata.annotations[{ANN_TOPOLOGY_INDEX}]", f"must not be negative, got {value}")
    return value


def check_pod_annotations(pod: Pod, podgroups: Mapping[str, PodGroup], invalid: Container[str] = (),
                          gang_checked: bool = False) -> None:
    """Raises ParseError for what a pending pod's gang and topology annotations get wrong: what
    ``koordpy simulate`` refuses up front and the live scheduler reports on the pod. A pod of a
    PodGroup that is itself ``invalid`` is not blamed for it (that error is the PodGroup's);
    ``gang_checked`` skips the gang declaration when the caller knows it was accepted already."""
    ref = f"Pod {pod.key}"
    gang = pod.gang_name
    if gang is not None and gang not in invalid and not gang_checked:
        gang_config_from_pod(ref, pod.namespace, pod.annotations, podgroups.get(gang))
    topology_index(ref, pod.annotations)
