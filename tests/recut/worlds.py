"""Random worlds for the differential run of a re-cut (``tests/recut/diff.py``): whole ``koordpy
simulate`` inputs, one seed each, as lists of raw Kubernetes objects.

A world switches each feature the re-cut touches on at random: nodes over spines, blocks and racks;
the topology objects of every dialect (a ClusterNetworkTopology, Volcano HyperNodes selected by
name, label or pattern, a Kueue Topology, Kubernetes PodGroups' topology keys); gangs of every
dialect (Koordinator PodGroups, annotation gangs and GangGroups, Strict and NonStrict; Volcano
PodGroups with hard or soft network topology and sub-groups; KAI PodGroups with required and
preferred levels; Kubernetes' PodGroups, Workloads and CompositePodGroups) and lone pods; running
pods under priority classes (so that preemption happens); pod rules (node affinity, pod
(anti-)affinity, topology spread, host ports, taints and tolerations); volumes; and devices (DRA:
classes, slices, partitionable GPUs, claims and templates, claims held by running pods).

The objects come from the test suite's own builders (``tests/builders.py`` and the dialects', the
volumes' and the devices' test helpers), so a world is made of the shapes the tests already use.
Nothing here depends on the code under comparison beyond those builders: the same seed gives the
same world on any checkout. ``World.explain`` names a few pods and groups to ask ``koordpy
explain`` about, drawn with the world.
"""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.builders import cnt, node, pod, podgroup, priority_class
from tests.core.dialects.test_upstream import group as upstream_group
from tests.core.dialects.test_upstream import member as upstream_member
from tests.core.test_volumes import pv, pvc, sc
from tests.sim.test_dra import DRIVER, claim, claiming, gpu_class, gpu_slice, template
from tests.sim.test_dra_gang_search import partitionable, whole_else_half

Obj = dict[str, Any]

SPINE = "network.topology.nvidia.com/spine"
BLOCK = "network.topology.nvidia.com/block"
RACK = "topology.kubernetes.io/rack"
HOST = "kubernetes.io/hostname"
DISK = "example.com/disk"
PARTITION = "volcano.sh/partition-id"
CLASSES = (("low", 10), ("mid", 100), ("high", 1000))


@dataclass
class World:
    """One random world: its objects (in document order) and what to ask ``explain`` about."""

    seed: int
    objects: list[Obj]
    pods: list[str] = field(default_factory=list)  # pending pods, namespace/name
    groups: list[str] = field(default_factory=list)  # explain targets after `podgroup`
    topology: bool = False  # has topology objects, so `topology show` has trees to draw

    def yaml(self) -> str:
        return yaml.safe_dump_all(self.objects, sort_keys=False, default_flow_style=False)

    def write(self, path: Path) -> Path:
        path.write_text(self.yaml())
        return path

    def explain(self, rng: random.Random, pods: int = 2, groups: int = 1) -> list[tuple[str, str]]:
        """(kind, target) pairs: a few of the world's pods and groups, the same for one seed."""
        chosen = [("pod", p) for p in rng.sample(self.pods, min(pods, len(self.pods)))]
        chosen += [("podgroup", g) for g in rng.sample(self.groups, min(groups, len(self.groups)))]
        return chosen


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.world = World(seed, [])
        self.nodes: list[Obj] = []
        self.gpu_nodes: list[str] = []
        self.racks: list[str] = []
        self.tiers: list[str] = []  # the HyperNode tiers' names, lowest first
        self.kueue_levels: list[str] = []
        self.dra = False
        self.storage = False
        self.n = 0

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def add(self, *objs: Obj) -> None:
        self.world.objects.extend(objs)

    def name(self, stem: str) -> str:
        self.n += 1
        return f"{stem}{self.n}"

    # -- the cluster ------------------------------------------------------------------------------------------

    def cluster(self) -> None:
        rng = self.rng
        for s in range(rng.randint(1, 3)):
            for b in range(rng.randint(1, 2)):
                block = f"b{s}{b}"
                for r in range(rng.randint(1, 2)):
                    rack = f"r{s}{b}{r}"
                    self.racks.append(rack)
                    for i in range(rng.randint(1, 3)):
                        name = f"n-{block}-{r}{i}"
                        labels = {SPINE: f"s{s}", BLOCK: block, RACK: rack}
                        if self.chance(0.4):
                            labels[DISK] = rng.choice(["ssd", "hdd"])
                        extra = {"nvidia.com/gpu": rng.choice(["4", "8"])} if self.chance(0.3) else None
                        body = node(name, cpu=rng.choice(["4", "8", "16"]), memory="32Gi", labels=labels,
                                    extra=extra)
                        if self.chance(0.1):
                            body["spec"] = {"taints": [{"key": "dedicated", "value": "infra",
                                                        "effect": rng.choice(["NoSchedule", "NoExecute"])}]}
                        elif self.chance(0.03):
                            body["spec"] = {"unschedulable": True}
                        self.nodes.append(body)
        self.add(*self.nodes)
        self.add(*(priority_class(n, v) for n, v in CLASSES))
        if self.chance(0.3):
            self.add(priority_class("never", 500, policy="Never"))

    def topologies(self) -> None:
        if self.chance(0.5):
            layers: list[tuple[str, str | None, str | None]] = [("SpineLayer", None, SPINE),
                                                                ("BlockLayer", "SpineLayer", BLOCK)]
            if self.chance(0.5):
                layers.append(("RackLayer", "BlockLayer", RACK))
            layers.append(("NodeTopologyLayer", layers[-1][0], None))
            self.add(cnt(*layers))
            self.world.topology = True
        if self.chance(0.4):
            self.hypernodes()
        if self.chance(0.4):
            self.kueue_levels = [SPINE, BLOCK, RACK, HOST][self.rng.randint(0, 2):]
            api = self.rng.choice(["kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1alpha1"])
            self.add({"apiVersion": api, "kind": "Topology", "metadata": {"name": "network"},
                      "spec": {"levels": [{"nodeLabel": k} for k in self.kueue_levels]}})
            self.world.topology = True

    def hypernodes(self) -> None:
        self.world.topology = True
        by_block: dict[str, list[Obj]] = {}
        for n in self.nodes:
            by_block.setdefault(n["metadata"]["labels"][BLOCK], []).append(n)
        named = self.chance(0.5)
        self.tiers = ["leaf", "spine"]
        spines: dict[str, list[str]] = {}
        for block, members in sorted(by_block.items()):
            how = self.rng.choice(["exact", "label", "regex"])
            if how == "exact":
                sel = [{"type": "Node", "selector": {"exactMatch": {"name": n["metadata"]["name"]}}} for n in members]
                if self.chance(0.05):  # a node claimed twice in one tier: the tree builder's warning
                    other = self.rng.choice(self.nodes)["metadata"]["name"]
                    sel.append({"type": "Node", "selector": {"exactMatch": {"name": other}}})
            elif how == "label":
                sel = [{"type": "Node", "selector": {"labelMatch": {"matchLabels": {BLOCK: block}}}}]
            else:
                sel = [{"type": "Node", "selector": {"regexMatch": {"pattern": f"^n-{block}-.*"}}}]
            self.add(self._hypernode(f"hn-{block}", 1, sel, "leaf" if named else ""))
            spines.setdefault(members[0]["metadata"]["labels"][SPINE], []).append(f"hn-{block}")
        if self.chance(0.7):
            for spine, leaves in sorted(spines.items()):
                sel = [{"type": "HyperNode", "selector": {"exactMatch": {"name": leaf}}} for leaf in leaves]
                self.add(self._hypernode(f"hn-{spine}", 2, sel, "spine" if named else ""))
        else:
            self.tiers = ["leaf"]

    @staticmethod
    def _hypernode(name: str, tier: int, members: list[Obj], tier_name: str) -> Obj:
        spec: Obj = {"tier": tier, "members": members}
        if tier_name:
            spec["tierName"] = tier_name
        return {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": name},
                "spec": spec}

    def devices(self) -> None:
        if not self.chance(0.35):
            return
        self.dra = True
        self.add(gpu_class())
        for n in self.nodes:
            if self.chance(0.5):
                name = n["metadata"]["name"]
                self.gpu_nodes.append(name)
                if self.chance(0.5):
                    self.add(*partitionable(name))
                else:
                    self.add(gpu_slice(name, n=self.rng.choice([1, 2, 4]), taint=self.chance(0.1)))
        self.add(whole_else_half(), template("whole", count=1), template("pair", count=2))

    def volumes(self) -> None:
        if not self.chance(0.25):
            return
        self.storage = True
        self.add(sc("local"), sc("fast", mode="Immediate", provisioner="example.com/csi"),
                 sc("late", provisioner="example.com/csi"))
        for i, n in enumerate(self.rng.sample(self.nodes, min(len(self.nodes), 3))):
            self.add(pv(f"pv-{i}", on=n["metadata"]["name"]))

    # -- pods -------------------------------------------------------------------------------------------------

    def pod(self, name: str, *, pending: bool = True, **kw: Any) -> Obj:
        """A pod with random resources and rules; ``kw`` as for ``tests.builders.pod``."""
        rng = self.rng
        kw.setdefault("cpu", rng.choice(["1", "2", "4", "8"]))
        if "priority_class" not in kw and self.chance(0.6):
            # "never" exists in some worlds only: a pod naming it where it does not is refused (exit 2).
            kw["priority_class"] = rng.choice(["low", "mid", "high"] + (["never"] if self.chance(0.1) else []))
        body = pod(name, **kw)
        spec, labels = body["spec"], body["metadata"]["labels"]
        labels["app"] = rng.choice(["a", "b"])
        if self.chance(0.15):
            body["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = rng.choice(["1", "4"])
        if self.chance(0.15):
            spec["nodeSelector"] = {DISK: rng.choice(["ssd", "hdd"])}
        affinity: Obj = {}
        if self.chance(0.15):
            term = {"matchExpressions": [{"key": RACK, "operator": rng.choice(["In", "NotIn"]),
                                          "values": rng.sample(self.racks, 1)}]}
            if self.chance(0.5):
                affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution":
                                            {"nodeSelectorTerms": [term]}}
            else:
                affinity["nodeAffinity"] = {"preferredDuringSchedulingIgnoredDuringExecution":
                                            [{"weight": 50, "preference": term}]}
        if self.chance(0.15):
            kind = rng.choice(["podAffinity", "podAntiAffinity"])
            pterm: Obj = {"labelSelector": {"matchLabels": {"app": labels["app"]}},
                     "topologyKey": rng.choice([HOST, RACK])}
            if self.chance(0.6):
                affinity[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [pterm]}
            else:
                affinity[kind] = {"preferredDuringSchedulingIgnoredDuringExecution":
                                  [{"weight": 10, "podAffinityTerm": pterm}]}
        if affinity:
            spec["affinity"] = affinity
        if self.chance(0.12):
            spec["topologySpreadConstraints"] = [{
                "maxSkew": rng.choice([1, 2]), "topologyKey": rng.choice([HOST, RACK, BLOCK]),
                "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
                "labelSelector": {"matchLabels": {"app": labels["app"]}}}]
        if self.chance(0.08):
            spec["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": rng.choice([8080, 9090])}]
        if self.chance(0.15):
            spec["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        if self.dra and self.chance(0.35) and (pending or self.chance(0.3)):
            claiming(body, template_name=rng.choice(["gpus", "whole", "pair"]))
        if self.storage and pending and self.chance(0.2):
            cname = self.name("data")
            cls = rng.choice(["local", "fast", "late"])
            self.add(pvc(cname, cls=cls, size=rng.choice(["5Gi", "20Gi"])))
            spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": cname}}]
        if pending:
            self.world.pods.append(f"default/{name}")
        return body

    def running(self) -> None:
        """Pods already bound, most of them below the pending ones' priorities: the victims."""
        for _ in range(self.rng.randint(0, 2 * len(self.nodes))):
            where = self.rng.choice(self.nodes)["metadata"]["name"]
            name = self.name("run-")
            body = self.pod(name, pending=False, node_name=where, scheduler=self.rng.choice(["koordpy", "other"]),
                            priority_class=self.rng.choice(["low", "low", "mid"]))
            body["metadata"]["uid"] = f"uid-{name}"
            spec = body["spec"]
            spec.pop("affinity", None)
            spec.pop("topologySpreadConstraints", None)
            spec.pop("resourceClaims", None)
            spec["containers"][0]["resources"].pop("claims", None)
            self.add(body)
            if self.dra and where in self.gpu_nodes and self.chance(0.4):
                self.holding(body, where)

    def holding(self, body: Obj, where: str) -> None:
        """``body`` (running on ``where``) holds a GPU there through a claim allocated and reserved for it."""
        name = body["metadata"]["name"]
        device = self.rng.choice(["gpu-0", "gpu-0-half-0", "gpu-0-half-1"])
        made = claim(f"{name}-gpus", count=1, allocation={"devices": {"results": [
            {"request": "gpus", "driver": DRIVER, "pool": where, "device": device}]}},
            reservedFor=[{"resource": "pods", "name": name, "uid": f"uid-{name}"}])
        made["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        claiming(body, claim_name=f"{name}-gpus")
        self.add(made)

    # -- jobs -------------------------------------------------------------------------------------------------

    def jobs(self) -> None:
        makers = [self.lone, self.koordinator, self.koordinator_annotations, self.gang_group, self.volcano,
                  self.kai, self.upstream, self.composite]
        for _ in range(self.rng.randint(1, 5)):
            self.rng.choice(makers)()

    def lone(self) -> None:
        for _ in range(self.rng.randint(1, 3)):
            self.add(self.pod(self.name("solo-")))

    def _members(self, gname: str, size: int, **kw: Any) -> list[Obj]:
        cpu = self.rng.choice(["1", "2", "4", "8"])
        cls = self.rng.choice([None, "low", "mid", "high"])
        out = []
        for i in range(size):
            extra = dict(kw)
            if cls is not None:
                extra["priority_class"] = cls
            out.append(self.pod(f"{gname}-{i}", cpu=cpu, **extra))
        return out

    def koordinator(self, groups: list[str] | None = None, gname: str | None = None) -> None:
        rng = self.rng
        gname = gname or self.name("kg")
        size = rng.randint(1, 5)
        gather = None
        if self.chance(0.6):
            layer = rng.choice(["SpineLayer", "BlockLayer", "RackLayer"])
            gather = [{"layer": layer, "strategy": rng.choice(["MustGather", "PreferGather"])}]
        ann: dict[str, str] = {}
        if self.chance(0.3):
            ann["gang.scheduling.koordinator.sh/mode"] = rng.choice(["Strict", "NonStrict"])
        if not gather and self.tiers and self.chance(0.3):  # Volcano's annotations on a Koordinator PodGroup
            ann["volcano.sh/network-topology-mode"] = rng.choice(["hard", "soft"])
            ann["volcano.sh/network-topology-highest-tier"] = str(rng.randint(1, len(self.tiers)))
        self.add(podgroup(gname, rng.randint(1, size), gather=gather, groups=groups, annotations=ann,
                          timeout=rng.choice([None, 60, 300])))
        index = self.chance(0.4)
        for i, body in enumerate(self._members(gname, size, group=gname)):
            if index:
                body["metadata"]["annotations"]["gang.scheduling.koordinator.sh/network-topology-index"] = str(i)
            self.add(body)
        self.world.groups.append(f"default/{gname}")

    def koordinator_annotations(self) -> None:
        gname = self.name("ann")
        size = self.rng.randint(1, 4)
        ann = {"gang.scheduling.koordinator.sh/name": gname,
               "gang.scheduling.koordinator.sh/min-available": str(self.rng.randint(1, size))}
        if self.chance(0.4):
            ann["gang.scheduling.koordinator.sh/mode"] = self.rng.choice(["Strict", "NonStrict"])
        self.add(*self._members(gname, size, annotations=ann))
        self.world.groups.append(f"default/{gname}")

    def gang_group(self) -> None:
        names = [self.name("gg") for _ in range(self.rng.randint(2, 3))]
        refs = [f"default/{n}" for n in names]
        for n in names:
            self.koordinator(groups=refs, gname=n)

    def volcano(self) -> None:
        rng = self.rng
        gname = self.name("vc")
        size = rng.randint(1, 6)
        spec: Obj = {"minMember": rng.randint(1, size)}
        if self.tiers and self.chance(0.7):
            topo: Obj = {"mode": rng.choice(["hard", "soft"])}
            if self.chance(0.5):
                topo["highestTierAllowed"] = rng.randint(1, len(self.tiers))
            elif self.chance(0.5):
                topo["highestTierName"] = rng.choice(self.tiers)
            spec["networkTopology"] = topo
        parts = 0
        if size >= 2 and self.chance(0.4):
            parts = rng.randint(1, 2)
            policy: Obj = {"name": "workers", "subGroupSize": max(1, size // parts), "matchLabelKeys": [PARTITION]}
            if self.chance(0.5):
                policy["minSubGroups"] = 1
            if self.tiers and self.chance(0.5):
                policy["networkTopology"] = {"mode": rng.choice(["hard", "soft"]), "highestTierAllowed": 1}
            spec["subGroupPolicy"] = [policy]
        if self.chance(0.3):
            spec["priorityClassName"] = rng.choice(["low", "high"])
        self.add({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                  "metadata": {"name": gname, "namespace": "default"}, "spec": spec})
        for i, body in enumerate(self._members(gname, size, annotations={"scheduling.k8s.io/group-name": gname})):
            if parts:
                body["metadata"]["labels"][PARTITION] = str(i % parts)
            self.add(body)
        self.world.groups.append(f"default/{gname}")

    def kai(self) -> None:
        rng = self.rng
        gname = self.name("kai")
        size = rng.randint(1, 5)
        spec: Obj = {"minMember": rng.randint(1, size)}
        if self.kueue_levels and self.chance(0.7):
            c: Obj = {"topology": "network"}
            if self.chance(0.6):
                c["requiredTopologyLevel"] = rng.choice(self.kueue_levels)
            if self.chance(0.5):
                c["preferredTopologyLevel"] = rng.choice(self.kueue_levels)
            spec[rng.choice(["topologyConstraint", "topologyConstraints"])] = c
        self.add({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup",
                  "metadata": {"name": gname, "namespace": "default"}, "spec": spec})
        self.add(*self._members(gname, size, annotations={"pod-group-name": gname}))
        self.world.groups.append(f"default/{gname}")

    def upstream(self) -> None:
        rng = self.rng
        gname = self.name("up")
        size = rng.randint(1, 5)
        topo = rng.choice([None, RACK, BLOCK, SPINE]) if self.chance(0.7) else None
        spec: Obj = {}
        cls = rng.choice([None, "low", "high"])
        if cls:
            spec["priorityClassName"] = cls
        made = upstream_group(gname, min_count=rng.randint(1, size) if self.chance(0.8) else None, topology=topo,
                              **spec)
        if self.kueue_levels and self.chance(0.2):
            made["metadata"]["annotations"] = {"kai.scheduler/topology-preferred-placement": RACK}
        self.add(made)
        for i in range(size):
            body = self.pod(f"{gname}-{i}", priority_class=cls)
            body["spec"]["schedulingGroup"] = {"podGroupName": gname}
            self.add(body)
        self.world.groups.append(f"default/{gname}")

    def composite(self) -> None:
        """A Workload whose CompositePodGroup needs a few replicas, each a Kubernetes PodGroup."""
        rng = self.rng
        wname = self.name("wl")
        replicas, per = rng.randint(1, 3), rng.randint(1, 3)
        outer = rng.choice([RACK, BLOCK])
        need = rng.randint(1, replicas)
        self.add({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
                  "metadata": {"name": wname, "namespace": "default"},
                  "spec": {"compositePodGroupTemplates": [{
                      "name": "replicas", "schedulingPolicy": {"gang": {"minGroupCount": need}},
                      "schedulingConstraints": {"topology": [{"key": outer}]},
                      "podGroupTemplates": [{"name": "replica",
                                             "schedulingPolicy": {"gang": {"minCount": per}}}]}]}})
        cname = f"{wname}-replicas"
        self.add({"apiVersion": "scheduling.k8s.io/v1alpha3", "kind": "CompositePodGroup",
                  "metadata": {"name": cname, "namespace": "default"},
                  "spec": {"workloadRef": {"workloadName": wname, "templateName": "replicas"},
                           "schedulingPolicy": {"gang": {"minGroupCount": need}},
                           "schedulingConstraints": {"topology": [{"key": outer}]}}})
        for r in range(replicas):
            gname = f"{wname}-{r}"
            self.add({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                      "metadata": {"name": gname, "namespace": "default"},
                      "spec": {"parentCompositePodGroupName": cname,
                               "workloadRef": {"workloadName": wname, "templateName": "replica"},
                               "schedulingPolicy": {"gang": {"minCount": per}}}})
            for i in range(per):
                body = upstream_member(f"{gname}-{i}", cpu=rng.choice(["2", "4"]), group_name=gname)
                self.add(body)
                self.world.pods.append(f"default/{gname}-{i}")
            self.world.groups.append(f"default/{gname}")

    def build(self) -> World:
        self.cluster()
        self.topologies()
        self.devices()
        self.volumes()
        self.running()
        self.jobs()
        if self.chance(0.03):  # input simulate refuses (exit 2): its one line on stderr is compared too
            self.add(self.rng.choice(_INVALID))
        # Each object once in the output, however the builders shared their parts.
        self.world.objects = [copy.deepcopy(o) for o in self.world.objects]
        return self.world


_INVALID: list[Obj] = [
    {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
     "metadata": {"name": "bad", "namespace": "default"},
     "spec": {"minMember": 1, "networkTopology": {"mode": "strict"}}},
    pod("bad", cpu="lots"),
    {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "bad"},
     "spec": {"tier": 1, "members": [{"type": "Rack", "selector": {"exactMatch": {"name": "x"}}}]}},
]


def generate(seed: int) -> World:
    """The world of ``seed``: the same objects for the same seed, on any machine."""
    return _Gen(seed).build()


def fingerprint(world: World) -> str:
    return json.dumps(world.objects, sort_keys=True)
