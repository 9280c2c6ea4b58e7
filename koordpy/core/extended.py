"""DRA-backed extended resources (``DRAExtendedResource``, GA in kube-scheduler v1.37): a pod asks for
``example.com/gpu: 2`` and a DeviceClass backs that name (``spec.extendedResourceName``, or the
class's implicit ``deviceclass.resource.kubernetes.io/<class>``). On a node whose allocatable lists
the resource (a device plugin) the resource fit counts it as any other; elsewhere the devices come
from the class, through a claim kube-scheduler makes for the pod (the "special claim").

Belongs here: which class backs which resource (of two classes naming one resource, the newer, the
lower name on a tie), which of a pod's requests a node leaves to DRA, and the special claim's
requests with the pod's request mappings (``status.extendedResourceClaimStatus.requestMappings``),
named and counted as kube-scheduler names and counts them. Not here: allocating the claim
(``koordpy.core.claims``), creating it and writing the pod's status (the shells).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koordpy.api.dra import EXTENDED_CLASS_PREFIX, ClaimSpec, DeviceClass, DeviceRequest, ExactRequest
from koordpy.api.objects import ContainerExtended, Node, Pod

# The special claim's name until the API server gives it one: not a valid object name, so never the
# name of a claim that exists (kube-scheduler's in-memory name).
SPECIAL = "<extended-resources>"
SUFFIX = "-extended-resources"  # the claim's generateName is <pod>-extended-resources-


def backing(classes: Mapping[str, DeviceClass]) -> dict[str, DeviceClass]:
    """Extended resource name -> the DeviceClass that backs it."""
    out: dict[str, DeviceClass] = {}
    explicit: dict[str, DeviceClass] = {}
    for c in sorted(classes.values(), key=lambda c: c.name):
        out[EXTENDED_CLASS_PREFIX + c.name] = c
        if c.extended_resource_name:
            had = explicit.get(c.extended_resource_name)
            # A migration from one class to another: the newer wins, the lower name on a tie.
            if had is None or (c.creation or 0.0) > (had.creation or 0.0):
                explicit[c.extended_resource_name] = c
    out.update(explicit)
    return out


def asked(pod: Pod, backed: Mapping[str, DeviceClass]) -> tuple[tuple[str, int], ...]:
    """The pod's requests of resources a class backs, (resource, quantity) in name order."""
    if not pod.extended_requests or not backed:
        return ()
    return tuple(sorted((r, q) for r, q in pod.requests.items() if q > 0 and r in backed))


def left_to_dra(wanted: tuple[tuple[str, int], ...], node: Node) -> tuple[str, ...]:
    """Of ``wanted``, the resources ``node``'s allocatable does not list (none, or zero): DRA's there."""
    return tuple(r for r, _ in wanted if node.allocatable.get(r, 0) <= 0)


@dataclass(frozen=True)
class Special:
    """The special claim's spec on a node, and which request serves which container's resource."""

    spec: ClaimSpec
    mappings: tuple[tuple[str, str, str], ...]  # (containerName, resourceName, requestName)


def special_of(containers: tuple[ContainerExtended, ...], resources: tuple[str, ...],
               backed: Mapping[str, DeviceClass]) -> Special:
    """The requests of the claim for ``resources`` (those a node leaves to DRA): per resource, one
    ExactCount request per container that runs alongside the others (app containers and sidecars)
    asking for it; the init containers that run before them first reuse the devices of those that
    start after them, and ask for what is still missing in one request, the largest such (they run
    one at a time), which every one of them then maps to. Requests are in name order."""
    requests: list[DeviceRequest] = []
    mappings: list[tuple[str, str, str]] = []
    for resource in sorted(resources):
        device_class = backed[resource].name
        long: dict[int, DeviceRequest] = {}
        long_maps: list[tuple[str, str, str]] = []
        asks = [(c, q, j) for c in containers for r, q, j in c.requests if r == resource]
        for c, q, j in asks:
            if not c.short_lived:
                name = f"container-{c.index}-request-{j}"
                long[c.index] = DeviceRequest(name, ExactRequest(device_class, count=q))
                long_maps.append((c.name, resource, name))
        short_best: DeviceRequest | None = None
        short_names: set[str] = set()
        short_maps: list[tuple[str, str, str]] = []
        for c, q, j in asks:
            if not c.short_lived:
                continue
            covered = 0
            for index in sorted(i for i in long if i >= c.index):
                reused = long[index]
                assert reused.exactly is not None
                covered += reused.exactly.count
                short_maps.append((c.name, resource, reused.name))
                if covered >= q:
                    break
            if covered >= q:
                continue
            name = f"container-{c.index}-request-{j}"
            own = DeviceRequest(name, ExactRequest(device_class, count=q - covered))
            short_maps.append((c.name, resource, name))
            short_names.add(name)
            assert own.exactly is not None
            if short_best is None or (short_best.exactly is not None and short_best.exactly.count < own.exactly.count):
                short_best = own
        if short_best is not None:
            best = short_best.name
            short_maps = [(c, r, best if n in short_names else n) for c, r, n in short_maps]
            requests.append(short_best)
        requests.extend(long[i] for i in sorted(long))
        mappings.extend(long_maps)
        mappings.extend(short_maps)
    requests.sort(key=lambda d: d.name)
    return Special(ClaimSpec(requests=tuple(requests)), tuple(mappings))
