"""The shells' stores, read by name: what the live cache and the simulator's World share.

Both shells file every kind's objects in ``stores`` (``Kind.store`` -> key -> parsed object, made
by ``koordpy.api.kinds.new_stores``). ``Stores`` gives them the typed names they read those stores
by (``nodes``, ``pods``, ``podgroups``...), the storage stores as the ``Storage`` the core reads, the
DRA stores as the ``Devices`` it reads, and
the ClusterNetworkTopology koordpy reads (``topology``). Each name is checked against the registry
when the class is made, so a store the registry drops cannot be read by a stale name. Not here:
what a shell does with its objects (filing, versions, assumptions: the cache; the simulation: the
World), and parsing (the models' modules).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, overload

from koordpy.api.dra import Devices
from koordpy.api.kinds import KINDS, new_stores
from koordpy.api.kueue import KaiPodGroup, Topology
from koordpy.api.objects import Node, Pod, PriorityClass
from koordpy.api.owners import Owner
from koordpy.api.podgroup import PodGroup
from koordpy.api.storage import Storage
from koordpy.api.topology import ClusterNetworkTopology
from koordpy.api.volcano import HyperNode, VolcanoPodGroup
from koordpy.api.workload import WorkloadPodGroup

T = TypeVar("T")
_STORE_NAMES = frozenset(new_stores())
_ONLY_TOPOLOGY = next(k.only for k in KINDS if k.store == "topology")  # "default"


class Store(Generic[T]):
    """A store read as an attribute of the same name: ``shell.nodes`` is ``shell.stores["nodes"]``."""

    name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        if name not in _STORE_NAMES:
            raise TypeError(f"{owner.__name__}.{name}: the kind registry has no store {name!r}")
        self.name = name

    @overload
    def __get__(self, shell: None, owner: type) -> Store[T]: ...

    @overload
    def __get__(self, shell: Stores, owner: type) -> dict[str, T]: ...

    def __get__(self, shell: Stores | None, owner: type) -> Store[T] | dict[str, T]:
        if shell is None:
            return self
        found: dict[str, T] = shell.stores[self.name]
        return found


class Stores:
    """A shell's stores and the names it reads them by. A dataclass that inherits this declares
    ``stores`` (``field(default_factory=new_stores)``), ``storage`` and ``devices`` (``field(init=False)``)."""

    stores: dict[str, dict[str, Any]]
    # Claims, volumes, classes and CSINodes (the volume rules' objects) over their stores.
    storage: Storage
    # DeviceClasses, ResourceSlices, ResourceClaims, templates and DeviceTaintRules over their stores.
    devices: Devices

    nodes = Store[Node]()
    pods = Store[Pod]()
    podgroups = Store[PodGroup]()
    priority_classes = Store[PriorityClass]()
    hypernodes = Store[HyperNode]()
    topologies = Store[Topology]()
    volcano_podgroups = Store[VolcanoPodGroup]()
    kai_podgroups = Store[KaiPodGroup]()
    workload_podgroups = Store[WorkloadPodGroup]()
    owners = Store[Owner]()  # store key (``<Kind>/<namespace>/<name>``) -> owner

    def __post_init__(self) -> None:
        st = self.stores
        self.storage = Storage(st["storage.claims"], st["storage.volumes"], st["storage.classes"],
                               st["storage.csinodes"])
        self.devices = Devices(st["devices.classes"], st["devices.slices"], st["devices.claims"],
                               st["devices.templates"], st["devices.taint_rules"])

    @property
    def topology(self) -> ClusterNetworkTopology | None:
        """The ClusterNetworkTopology koordpy reads (``Kind.only``), or None."""
        found: ClusterNetworkTopology | None = self.stores["topology"].get(_ONLY_TOPOLOGY)
        return found

