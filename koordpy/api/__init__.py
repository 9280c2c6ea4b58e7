"""Typed models of the Kubernetes objects koordpy reads, parsed from raw API dicts.

Belongs here: the models (pydantic, or frozen slotted records for what the cache holds by the
thousand: see ``koordpy.api.model``), quantity/duration parsing, annotation decoding and the
errors that name the object and field at fault. Does not belong here: anything that
decides where a pod goes (that is ``koordpy.core``) or reads files and sockets.
"""

from koordpy.api.errors import ParseError
from koordpy.api.objects import Node, Pod, PriorityClass, Taint, Toleration
from koordpy.api.podgroup import GangConfig, PodGroup
from koordpy.api.topology import ClusterNetworkTopology, GatherRule, NetworkTopologySpec, TopologyLayerSpec

__all__ = [
    "ClusterNetworkTopology",
    "GangConfig",
    "GatherRule",
    "NetworkTopologySpec",
    "Node",
    "ParseError",
    "Pod",
    "PodGroup",
    "PriorityClass",
    "Taint",
    "Toleration",
    "TopologyLayerSpec",
]
