"""The scheduler's view of the cluster, fed by watch events and the initial list.

Objects are kept parsed; an object that does not parse is kept as an error so the loop
can report it. Every update carries its resourceVersion, and an older one never replaces
a newer one (a watch that restarts may replay). Pods the scheduler has just bound are
"assumed" on their node until the watch confirms the binding, so the next cycle cannot
place something else in their room.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from koordpy.api.errors import ParseError
from koordpy.api.objects import Node, Pod, PriorityClass
from koordpy.api.podgroup import PodGroup
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.core.snapshot import Snapshot

ASSUME_TTL = 60.0  # seconds an unconfirmed binding keeps its room


def _rv(raw: dict[str, Any]) -> int:
    meta = raw.get("metadata") or {}
    try:
        return int(meta.get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def _key(kind: str, raw: dict[str, Any]) -> str:
    meta = raw.get("metadata") or {}
    name = str(meta.get("name") or "")
    if kind in ("Pod", "PodGroup"):
        return f"{meta.get('namespace') or 'default'}/{name}"
    return name


@dataclass
class Cache:
    nodes: dict[str, Node] = field(default_factory=dict)
    pods: dict[str, Pod] = field(default_factory=dict)
    podgroups: dict[str, PodGroup] = field(default_factory=dict)
    priority_classes: dict[str, PriorityClass] = field(default_factory=dict)
    topology: ClusterNetworkTopology | None = None
    topology_raw: dict[str, Any] | None = None
    invalid: dict[tuple[str, str], tuple[str, dict[str, Any]]] = field(default_factory=dict)
    assumed: dict[str, tuple[str, float]] = field(default_factory=dict)  # pod -> (node, when)
    versions: dict[tuple[str, str], int] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    topology_changed: bool = True

    def observe(self, kind: str, event_type: str | None, raw: dict[str, Any]) -> None:
        """One watch event (type ADDED, MODIFIED, DELETED, or None for a listed object)."""
        key = _key(kind, raw)
        rv = _rv(raw)
        seen = self.versions.get((kind, key), -1)
        if rv and rv < seen:
            return  # a replay of something older than what we hold
        self.versions[(kind, key)] = rv
        if event_type == "DELETED":
            self._remove(kind, key)
            self.versions.pop((kind, key), None)
        else:
            self._store(kind, key, raw)
        self.changed.set()

    def reconcile(self, kind: str, items: list[dict[str, Any]], list_version: int) -> int:
        """A full LIST of ``kind`` at ``list_version``: stores every item and drops what the
        cache holds from before that list but the list no longer has (a deletion whose watch
        event was never seen, say between the first list and the first watch). Returns how
        many were dropped."""
        listed = set()
        for raw in items:
            key = _key(kind, raw)
            listed.add(key)
            self.observe(kind, None, raw)
        stale = [key for (k, key), version in self.versions.items()
                 if k == kind and key not in listed and version <= list_version]
        for key in stale:
            self._remove(kind, key)
            self.versions.pop((kind, key), None)
        if stale:
            self.changed.set()
        return len(stale)

    def _store(self, kind: str, key: str, raw: dict[str, Any]) -> None:
        self.invalid.pop((kind, key), None)
        try:
            if kind == "Node":
                self.nodes[key] = Node.from_raw(raw)
                self.topology_changed = True
            elif kind == "Pod":
                pod = Pod.from_raw(raw)
                self.pods[key] = pod
                if pod.node_name or pod.terminal:
                    self.assumed.pop(key, None)
            elif kind == "PriorityClass":
                self.priority_classes[key] = PriorityClass.from_raw(raw)
            elif kind == "PodGroup":
                self.podgroups[key] = PodGroup.from_raw(raw)
            elif kind == "ClusterNetworkTopology":
                if key != "default":
                    return
                self.topology_raw = raw
                self.topology = ClusterNetworkTopology.from_raw(raw)
                self.topology_changed = True
        except ParseError as exc:
            self._remove(kind, key)
            self.invalid[(kind, key)] = (str(exc), raw)
            if kind == "ClusterNetworkTopology":
                self.topology_raw = raw
                self.topology_changed = True

    def _remove(self, kind: str, key: str) -> None:
        self.invalid.pop((kind, key), None)
        if kind == "Node":
            self.nodes.pop(key, None)
            self.topology_changed = True
        elif kind == "Pod":
            self.pods.pop(key, None)
            self.assumed.pop(key, None)
        elif kind == "PriorityClass":
            self.priority_classes.pop(key, None)
        elif kind == "PodGroup":
            self.podgroups.pop(key, None)
        elif kind == "ClusterNetworkTopology" and key == "default":
            self.topology = None
            self.topology_raw = None
            self.topology_changed = True

    def assume(self, pod: str, node: str) -> None:
        self.assumed[pod] = (node, time.monotonic())

    def forget(self, pod: str) -> None:
        self.assumed.pop(pod, None)
        self.changed.set()

    def topology_error(self) -> str | None:
        found = self.invalid.get(("ClusterNetworkTopology", "default"))
        return found[0] if found else None

    def snapshot(self, scheduler_names: frozenset[str]) -> Snapshot:
        now = time.monotonic()
        for key, (_, since) in list(self.assumed.items()):
            if now - since > ASSUME_TTL:
                del self.assumed[key]
        pods = []
        for key, pod in self.pods.items():
            assumed = self.assumed.get(key)
            pods.append(pod.model_copy(update={"node_name": assumed[0]}) if assumed and not pod.node_name else pod)
        invalid_groups = {key: err for (kind, key), (err, _) in self.invalid.items() if kind == "PodGroup"}
        return Snapshot(nodes=list(self.nodes.values()), pods=pods, podgroups=dict(self.podgroups),
                        topology=self.topology, priority_classes=dict(self.priority_classes),
                        scheduler_names=scheduler_names, invalid_podgroups=invalid_groups,
                        topology_error=self.topology_error())

    def invalid_pending_pods(self, scheduler_names: frozenset[str]) -> list[tuple[str, str, dict[str, Any]]]:
        """Claimed pods that do not parse: (key, error, raw), for the loop to report."""
        out = []
        for (kind, key), (err, raw) in self.invalid.items():
            spec = raw.get("spec") or {}
            if kind == "Pod" and spec.get("schedulerName") in scheduler_names and not spec.get("nodeName"):
                out.append((key, err, raw))
        return out
