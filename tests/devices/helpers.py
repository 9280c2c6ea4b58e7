"""Small builders of DRA records for the allocator's tests (names as in upstream's table: node-1,
driver-a, pool-1, slice-1, device-1, class-a, claim-0, req-0)."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

from koordpy.api.dra import (
    Allocation,
    Capacity,
    ClaimSpec,
    CounterConsumption,
    CounterSet,
    Device,
    DeviceClass,
    DeviceConstraint,
    DeviceRequest,
    DeviceResult,
    Devices,
    DeviceTaint,
    DeviceTaintRule,
    DeviceToleration,
    ExactRequest,
    NodeSelection,
    OpaqueConfig,
    Quantity,
    ResourceClaim,
    ResourceSlice,
)
from koordpy.api.objects import Node, NodeSelectorTerm, Requirement
from koordpy.devices.allocator import Allocator
from koordpy.devices.pools import Pools
from koordpy.devices.reasons import Unallocatable
from koordpy.devices.state import InUse

NODE1, NODE2 = "node-1", "node-2"
DRIVER_A, DRIVER_B = "driver-a", "driver-b"
CLASS_A, CLASS_B = "class-a", "class-b"


def q(text: str | int) -> Quantity:
    s = str(text)
    if s.endswith("m"):
        return Quantity(Fraction(int(s[:-1]), 1000), s)
    if s.endswith("Gi"):
        return Quantity(Fraction(int(s[:-2]) * 2**30), s)
    return Quantity(Fraction(s), s)


def node(name: str = NODE1, region: str = "region-1") -> Node:
    return Node(name=name, labels={"region": region, "planet": "earth"})


def cls(name: str = CLASS_A, driver: str = DRIVER_A, *extra: str,
        config: Sequence[OpaqueConfig] = ()) -> DeviceClass:
    return DeviceClass(name=name, selectors=(f'device.driver == "{driver}"', *extra), config=tuple(config))


def dev(name: str, attrs: dict[str, Any] | None = None, *, capacity: dict[str, Capacity] | None = None,
        counters: Sequence[CounterConsumption] = (), taints: Sequence[DeviceTaint] = (),
        node_sel: NodeSelection | None = None, multi: bool = False, binding: Sequence[str] = (),
        binding_failure: Sequence[str] = (), binds_to_node: bool = False) -> Device:
    return Device(name=name, attributes=attrs or {}, capacity=capacity or {}, consumes_counters=tuple(counters),
                  taints=tuple(taints), node=node_sel, allow_multiple_allocations=multi,
                  binding_conditions=tuple(binding), binding_failure_conditions=tuple(binding_failure),
                  binds_to_node=binds_to_node)


def devs(n: int, start: int = 0) -> list[Device]:
    return [dev(f"device-{i}") for i in range(start, start + n)]


def slice_(name: str, devices: Iterable[Device], *, node: str | None = NODE1, pool: str = "pool-1",
           driver: str = DRIVER_A, generation: int = 1, count: int = 1,
           selector: tuple[NodeSelectorTerm, ...] | None = None, all_nodes: bool = False,
           per_device: bool = False, counters: Sequence[CounterSet] = ()) -> ResourceSlice:
    if per_device:
        where = None
    elif selector is not None:
        where = NodeSelection(node_selector=selector)
    elif all_nodes:
        where = NodeSelection(all_nodes=True)
    else:
        where = NodeSelection(node_name=node or "")
    return ResourceSlice(name=name, driver=driver, pool=pool, generation=generation, slice_count=count,
                         node=where, devices=tuple(devices), shared_counters=tuple(counters))


def region_selector(region: str = "region-1") -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_expressions=(Requirement(key="region", operator="In", values=(region,)),)),)


def req(name: str = "req-0", cls_name: str = CLASS_A, count: int = 1, *, mode: str = "ExactCount",
        selectors: Sequence[str] = (), admin: bool = False, tolerations: Sequence[DeviceToleration] = (),
        capacity: dict[str, str] | None = None) -> DeviceRequest:
    return DeviceRequest(name=name, exactly=exact(cls_name, count, mode=mode, selectors=selectors, admin=admin,
                                                  tolerations=tolerations, capacity=capacity))


def exact(cls_name: str = CLASS_A, count: int = 1, *, name: str = "", mode: str = "ExactCount",
          selectors: Sequence[str] = (), admin: bool = False, tolerations: Sequence[DeviceToleration] = (),
          capacity: dict[str, str] | None = None) -> ExactRequest:
    return ExactRequest(device_class=cls_name, selectors=tuple(selectors), mode=mode,  # type: ignore[arg-type]
                        count=count if mode == "ExactCount" else 0, admin_access=admin,
                        tolerations=tuple(tolerations), name=name,
                        capacity={k: q(v) for k, v in (capacity or {}).items()})


def first_available(name: str, *subs: ExactRequest) -> DeviceRequest:
    return DeviceRequest(name=name, first_available=tuple(subs))


def numa_constraints(rng: random.Random, match: float, distinct: float) -> list[DeviceConstraint]:
    """A random world's constraint on the NUMA attribute: matchAttribute with chance ``match``, else
    distinctAttribute with chance ``distinct``, else none."""
    if rng.random() < match:
        return [DeviceConstraint(match_attribute="driver-a/numa")]
    if rng.random() < distinct:
        return [DeviceConstraint(distinct_attribute="driver-a/numa")]
    return []


def claim(name: str = "claim-0", *requests: DeviceRequest, constraints: Sequence[DeviceConstraint] = (),
          config: Sequence[OpaqueConfig] = (), allocation: Allocation | None = None,
          **kw: Any) -> ResourceClaim:
    if not requests:
        requests = (req(),)
    return ResourceClaim(namespace="default", name=name, uid=f"uid-{name}",
                         spec=ClaimSpec(requests=tuple(requests), constraints=tuple(constraints),
                                        config=tuple(config)),
                         allocation=allocation, **kw)


def result(request: str, device: str, *, pool: str = "pool-1", driver: str = DRIVER_A, **kw: Any) -> DeviceResult:
    return DeviceResult(request=request, driver=driver, pool=pool, device=device, **kw)


def local(node_name: str = NODE1) -> tuple[NodeSelectorTerm, ...]:
    return (NodeSelectorTerm(match_fields=(Requirement(key="metadata.name", operator="In", values=(node_name,)),)),)


class World:
    """Slices, classes, rules and claims in use; ``allocate`` runs the allocator on one node."""

    def __init__(self, slices: Sequence[ResourceSlice] = (), classes: Sequence[DeviceClass] = (cls(),),
                 allocated: Sequence[ResourceClaim] = (), rules: Sequence[DeviceTaintRule] = ()) -> None:
        self.devices = Devices(classes={c.name: c for c in classes}, slices={s.name: s for s in slices},
                               taint_rules={r.name: r for r in rules})
        self.pools = Pools.build(self.devices)
        self.in_use = InUse.from_claims(allocated)
        ids = iter(range(1, 10**6))
        self.allocator = Allocator(self.pools, self.devices.classes, self.in_use,
                                   share_id=lambda: f"share-{next(ids)}")

    def allocate(self, claims: Sequence[ResourceClaim], on: Node | None = None,
                 now: float = 1000.0) -> list[Allocation] | Unallocatable:
        return self.allocator.allocate(on or node(), claims, now)

    def devices_of(self, claims: Sequence[ResourceClaim], on: Node | None = None) -> list[list[tuple[str, str]]]:
        """Each claim's (request, device) pairs, or raises AssertionError with the reason."""
        got = self.allocate(claims, on)
        assert not isinstance(got, Unallocatable), got
        return [[(r.request, r.device) for r in a.results] for a in got]


def why(got: object) -> str:
    assert isinstance(got, Unallocatable), got
    return got.why
