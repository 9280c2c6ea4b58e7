"""ClusterNetworkTopology (``scheduling.koordinator.sh/v1alpha1``) and the gather-strategy annotation."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from koordpy.api.quantity import INT32_MAX
from koordpy.api.raw import Reader, read_object

CLUSTER_LAYER = "ClusterTopologyLayer"
NODE_LAYER = "NodeTopologyLayer"


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TopologyLayerSpec(_Model):
    layer: str
    parent: str = ""  # "" for the top layer, whose parent is the cluster
    label_keys: tuple[str, ...] = ()


class ClusterNetworkTopology(_Model):
    name: str
    layers: tuple[TopologyLayerSpec, ...]  # top-down, the node layer (if declared) last

    @classmethod
    def from_raw(cls, raw: dict[str, Any]) -> ClusterNetworkTopology:
        r, meta, (spec,) = read_object(raw, "ClusterNetworkTopology", "spec")
        items = r.seq(spec.get("networkTopologySpec"), "spec.networkTopologySpec")
        declared: list[TopologyLayerSpec] = []
        for i, item in enumerate(items):
            f = f"spec.networkTopologySpec[{i}]"
            m = r.mapping(item, f)
            keys = tuple(r.string(k, f"{f}.labelKey[{j}]", required=True)
                         for j, k in enumerate(r.seq(m.get("labelKey"), f"{f}.labelKey")))
            parent = r.string(m.get("parentTopologyLayer"), f"{f}.parentTopologyLayer")
            declared.append(TopologyLayerSpec(
                layer=r.string(m.get("topologyLayer"), f"{f}.topologyLayer", required=True),
                parent="" if parent == CLUSTER_LAYER else parent,
                label_keys=keys,
            ))
        return cls(name=r.name(meta.get("name")),
                   layers=_order_layers(r, declared))

    @property
    def layer_names(self) -> tuple[str, ...]:
        return (CLUSTER_LAYER, *(layer.layer for layer in self.layers))


def _order_layers(r: Reader, declared: list[TopologyLayerSpec]) -> tuple[TopologyLayerSpec, ...]:
    """Puts the layers in a top-down chain, or says precisely why they do not form one."""
    field = "spec.networkTopologySpec"
    by_name: dict[str, TopologyLayerSpec] = {}
    for i, layer in enumerate(declared):
        if layer.layer in by_name or layer.layer == CLUSTER_LAYER:
            raise r.fail(f"{field}[{i}].topologyLayer", f"layer {layer.layer!r} is declared twice")
        by_name[layer.layer] = layer
    children: dict[str, list[str]] = {}
    for i, layer in enumerate(declared):
        if layer.parent and layer.parent not in by_name:
            raise r.fail(f"{field}[{i}].parentTopologyLayer",
                         f"layer {layer.layer!r} names parent {layer.parent!r}, which is not declared; "
                         f"declared layers: {', '.join(by_name) or 'none'}")
        children.setdefault(layer.parent, []).append(layer.layer)
    for parent, kids in children.items():
        if len(kids) > 1:
            raise r.fail(field, f"layers must form a chain, but {parent or CLUSTER_LAYER!r} has "
                         f"several child layers: {', '.join(kids)}")
    chain: list[TopologyLayerSpec] = []
    current = ""
    while current in children:
        current = children[current][0]
        chain.append(by_name[current])
    if len(chain) != len(declared):
        stray = sorted(set(by_name) - {layer.layer for layer in chain})
        raise r.fail(field, f"layers {', '.join(stray)} do not descend from the cluster (a parent cycle)")
    for layer in chain[:-1]:
        if not layer.label_keys:
            raise r.fail(field, f"layer {layer.layer!r} has no labelKey; only the last (node) layer may omit it")
    return tuple(chain)


class GatherRule(_Model):
    layer: str
    strategy: Literal["PreferGather", "MustGather"]
    pod_count_multiple: int = 1


class NetworkTopologySpec(_Model):
    gather: tuple[GatherRule, ...]


@lru_cache(maxsize=1024)  # every pod of a gang carries the same text
def parse_network_topology_spec(text: str) -> NetworkTopologySpec:
    """The ``network-topology-spec`` annotation; raises ValueError with the reason."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except (ValueError, RecursionError) as exc:  # an integer too long for Python, or nesting too deep
        raise ValueError(f"invalid JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ValueError('expected a JSON object like {"gatherStrategy": [...]}')
    unknown = set(value) - {"gatherStrategy"}
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}; expected gatherStrategy")
    rules_raw = value.get("gatherStrategy")
    if not isinstance(rules_raw, list):
        raise ValueError("gatherStrategy must be a list")
    rules = []
    for i, item in enumerate(rules_raw):
        if not isinstance(item, dict):
            raise ValueError(f"gatherStrategy[{i}] must be an object")
        layer = item.get("layer")
        strategy = item.get("strategy")
        if not isinstance(layer, str) or not layer:
            raise ValueError(f"gatherStrategy[{i}].layer is required")
        if strategy not in ("PreferGather", "MustGather"):
            raise ValueError(f"gatherStrategy[{i}].strategy must be PreferGather or MustGather, got {strategy!r}")
        multiple = item.get("podCountMultiple", 1)
        if isinstance(multiple, bool) or not isinstance(multiple, int) or not 1 <= multiple <= INT32_MAX:
            raise ValueError(f"gatherStrategy[{i}].podCountMultiple must be a whole number from 1 to {INT32_MAX} "
                             f"(an int32), got {multiple!r}")
        extra = set(item) - {"layer", "strategy", "podCountMultiple"}
        if extra:
            raise ValueError(f"gatherStrategy[{i}] has unknown keys {sorted(extra)}")
        rules.append(GatherRule(layer=layer, strategy=strategy, pod_count_multiple=multiple))
    return NetworkTopologySpec(gather=tuple(rules))
