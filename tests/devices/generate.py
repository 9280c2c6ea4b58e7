"""Random DRA worlds in the API's wire form (``resource.k8s.io/v1`` JSON), for the differential test.

``case(rng, features, name)`` makes one case: nodes, DeviceClasses, ResourceSlices, claims in use
(allocated) and one pod's claims to allocate, as the dicts ``kubectl get -o json`` shows, so kube-
scheduler's allocator (draref) and koordpy's parsers read the same input. ``features`` chooses what
the world may contain (``FEATURES`` lists them); a feature left out never appears, so the test can
be held to what koordpy's allocator implements and widened as it grows.
"""

from __future__ import annotations

import random
from typing import Any

Json = dict[str, Any]

FEATURES = frozenset({
    "drivers",          # a second driver (NICs) beside the GPUs
    "selectors",        # CEL on int / string / version / bool attributes and capacity, in classes and requests
    "counts",           # ExactCount with count > 1
    "all",              # allocationMode All
    "taints",           # device taints (NoSchedule, NoExecute, None) and requests' tolerations
    "in_use",           # claims allocated already (devices taken)
    "first_available",  # requests with firstAvailable subrequests
    "constraints",      # matchAttribute / distinctAttribute
    "counters",         # partitionable devices: a pool's shared counters consumed by its devices
    "network",          # network-attached devices: slices with a nodeSelector or allNodes
    "pools",            # pools of several slices, older generations, incomplete pools
    "admin",            # adminAccess requests
    "consumable",       # allowMultipleAllocations devices, capacity requests and request policies
    "missing_class",    # a request naming a class that does not exist
    "missing_keys",     # selectors reading an attribute some devices lack (a CEL runtime error when reached)
    "invalid_pools",    # a pool with a device name twice
    "binding",          # devices with binding conditions, some binding to the node
    "allocated_claims", # one of the pod's claims allocated already (on some node, or anywhere)
    "fractional",       # consumable capacities with fractional quantities and request policies
    "fractional_range", # with "fractional": request policy ranges whose min / max / step are fractional
    "taint_rules",      # DeviceTaintRules tainting devices by driver / pool / device, or an empty selector
    "taint_rule_no_selector",  # with "taint_rules": a rule without a deviceSelector (it selects nothing)
    "large",            # a node with up to 128 small devices: more results than a claim may hold (32)
})

GPU = "gpu.example.com"
NIC = "nic.example.com"
MODELS = ("a100", "h100", "b200")
VERSIONS = ("1.2.0", "1.10.0", "2.0.0-rc.1", "2.0.0", "2.0.0+build.7")  # same precedence, other text
PCIE = "resource.kubernetes.io/pcieRoot"  # an attribute both drivers publish, in a shared domain


def _node(name: str, rack: str) -> Json:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "rack": rack}},
            "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110"}}}


def _slice(name: str, driver: str, pool: str, where: Json, devices: list[Json], *, generation: int = 1,
           count: int = 1, counters: list[Json] | None = None) -> Json:
    spec: Json = {"driver": driver, "pool": {"name": pool, "generation": generation, "resourceSliceCount": count}}
    spec.update(where)
    if counters is not None:
        spec["sharedCounters"] = counters
    else:
        spec["devices"] = devices
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": name}, "spec": spec}


class _World:
    def __init__(self, rng: random.Random, features: frozenset[str], name: str) -> None:
        self.rng, self.f, self.name = rng, features, name
        self.nodes: list[Json] = []
        self.slices: list[Json] = []
        self.classes: list[Json] = []
        self.devices: list[tuple[str, str, str, Json]] = []  # driver, pool, name, device (usable generation)
        self.uid = 0

    def on(self, feature: str, p: float = 0.5) -> bool:
        return feature in self.f and self.rng.random() < p

    def next_uid(self) -> str:
        self.uid += 1
        return f"{self.name}-uid-{self.uid}"

    # -- devices ---------------------------------------------------------------------------------

    def gpu(self, name: str, index: int) -> Json:
        rng = self.rng
        attrs: Json = {"model": {"string": rng.choice(MODELS)}, "index": {"int": index},
                       "healthy": {"bool": rng.random() < 0.8},
                       "driverVersion": {"version": rng.choice(VERSIONS)},
                       "numa": {"int": rng.randrange(2)}}
        if rng.random() < 0.3:
            attrs[f"{GPU}/family"] = {"string": rng.choice(("ampere", "hopper"))}
        if "drivers" in self.f:
            attrs[PCIE] = {"string": rng.choice(("pci0", "pci1"))}
        if "constraints" in self.f and rng.random() < 0.5:
            # An attribute an int on some devices and a string on others never matches across them.
            attrs["slot"] = rng.choice(({"int": 1}, {"string": "1"}, {"int": 2}))
        mem = rng.choice((40, 80, 141))
        dev: Json = {"name": name, "attributes": attrs, "capacity": {"memory": {"value": f"{mem}Gi"}}}
        if self.on("taints", 0.25):
            dev["taints"] = [{"key": rng.choice(("maintenance", "degraded")),
                              "value": rng.choice(("", "true")),
                              "effect": rng.choice(("NoSchedule", "NoExecute", "None"))}]
        if self.on("binding", 0.2):
            dev["bindingConditions"] = ["attached"]
            dev["bindingFailureConditions"] = ["failed"]
            if rng.random() < 0.5:
                dev["bindsToNode"] = True
        if self.on("fractional", 0.4):
            dev["allowMultipleAllocations"] = True
            policy = rng.choice(("none", "range", "range-fraction", "values") if "fractional_range" in self.f
                                else ("none", "range", "values"))
            cores: Json = {"value": rng.choice(("2", "4") if policy == "range" else ("2", "4", "1500m"))}
            if policy == "range":
                cores["requestPolicy"] = {"default": "1", "validRange": {"min": "1", "max": "2", "step": "1"}}
            elif policy == "range-fraction":
                cores["requestPolicy"] = {"default": "500m",
                                          "validRange": {"min": "500m", "max": "1500m", "step": "250m"}}
            elif policy == "values":
                cores["requestPolicy"] = {"default": "250m", "validValues": ["250m", "500m", "1"]}
            dev["capacity"] = {"memory": {"value": f"{mem}Gi"}, "cores": cores}
            return dev
        if self.on("consumable", 0.3):
            dev["allowMultipleAllocations"] = True
            cap: Json = {"value": f"{mem}Gi"}
            policy = rng.choice(("none", "values", "range"))
            if policy == "values":
                cap["requestPolicy"] = {"default": "10Gi", "validValues": ["10Gi", "20Gi", "40Gi"]}
            elif policy == "range":
                cap["requestPolicy"] = {"default": "8Gi", "validRange": {"min": "8Gi", "max": "40Gi", "step": "8Gi"}}
            dev["capacity"] = {"memory": cap}
        return dev

    def nic(self, name: str, index: int) -> Json:
        return {"name": name, "attributes": {"numa": {"int": self.rng.randrange(2)}, "index": {"int": index},
                                             "speed": {"int": self.rng.choice((100, 400))},
                                             PCIE: {"string": self.rng.choice(("pci0", "pci1"))}}}

    def add_node_pools(self, node: str) -> None:
        rng = self.rng
        n = rng.choice((0, 2, 4, 4, 6, 8))
        devices = [self.gpu(f"gpu-{i}", i) for i in range(n)]
        if self.on("counters", 0.4):
            counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}, "slices": {"value": "4"}}}]
            parts = [("gpu-0-whole", "80Gi", "4"), ("gpu-0-half-0", "40Gi", "2"), ("gpu-0-half-1", "40Gi", "2"),
                     ("gpu-0-quarter-0", "20Gi", "1")]
            for pname, mem, sl in parts:
                d = self.gpu(pname, 0)
                d.pop("allowMultipleAllocations", None)
                d["capacity"] = {"memory": {"value": mem}}
                d["consumesCounters"] = [{"counterSet": "gpu-0-counters",
                                          "counters": {"memory": {"value": mem}, "slices": {"value": sl}}}]
                devices.append(d)
            pool = f"{node}-part"
            self.slices.append(_slice(f"{pool}-counters", GPU, pool, {"nodeName": node}, [], count=2,
                                      counters=counters))
            self.slices.append(_slice(f"{pool}-devices", GPU, pool, {"nodeName": node}, devices[n:], count=2))
            self.devices += [(GPU, pool, d["name"], d) for d in devices[n:]]
            devices = devices[:n]
        if self.on("pools", 0.4) and len(devices) >= 2:
            # Two slices in the newest generation, an older one behind, sometimes one slice missing.
            gen = rng.randint(2, 3)
            half = len(devices) // 2
            self.slices.append(_slice(f"{node}-gpu-old", GPU, node, {"nodeName": node},
                                      [self.gpu("gpu-old-0", 9)], generation=gen - 1))
            incomplete = rng.random() < 0.3
            self.slices.append(_slice(f"{node}-gpu-a", GPU, node, {"nodeName": node}, devices[:half],
                                      generation=gen, count=2))
            if not incomplete:
                self.slices.append(_slice(f"{node}-gpu-b", GPU, node, {"nodeName": node}, devices[half:],
                                          generation=gen, count=2))
            else:
                devices = devices[:half]
        elif self.on("invalid_pools", 0.3) and devices:
            # The same device name in two slices of one pool: the pool is invalid.
            self.slices.append(_slice(f"{node}-gpu", GPU, node, {"nodeName": node}, devices, count=2))
            self.slices.append(_slice(f"{node}-gpu-dup", GPU, node, {"nodeName": node},
                                      [self.gpu(devices[0]["name"], 0)], count=2))
        else:
            self.slices.append(_slice(f"{node}-gpu", GPU, node, {"nodeName": node}, devices))
        self.devices += [(GPU, node, d["name"], d) for d in devices]
        if "drivers" in self.f:
            nics = [self.nic(f"nic-{i}", i) for i in range(rng.randint(0, 2))]
            self.slices.append(_slice(f"{node}-nic", NIC, node, {"nodeName": node}, nics))
            self.devices += [(NIC, node, d["name"], d) for d in nics]

    def add_large_pool(self, node: str) -> None:
        n = self.rng.choice((20, 33, 64, 128))
        devices: list[Json] = [{"name": f"vf-{i}", "attributes": {"index": {"int": i}, "numa": {"int": i % 2},
                                                      "model": {"string": "vf"}, "healthy": {"bool": True},
                                                      "driverVersion": {"version": "1.10.0"}},
                    "capacity": {"memory": {"value": "1Gi"}}} for i in range(n)]
        self.slices.append(_slice(f"{node}-vf", GPU, f"{node}-vf", {"nodeName": node}, devices))
        self.devices += [(GPU, f"{node}-vf", d["name"], d) for d in devices]

    def add_network_pool(self) -> None:
        rng = self.rng
        if rng.random() < 0.4:
            # Each device says where it can be used.
            per: list[Json] = []
            for i in range(rng.randint(1, 4)):
                d = self.gpu(f"local-{i}", 20 + i)
                d.update(rng.choice(({"nodeName": f"node-{rng.randrange(3)}"}, {"allNodes": True},
                                     {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                                         {"key": "rack", "operator": "In", "values": [rng.choice(("r0", "r1"))]}]}]}})))
                per.append(d)
            self.slices.append(_slice("per-device", GPU, "per-device", {"perDeviceNodeSelection": True}, per))
            self.devices += [(GPU, "per-device", d["name"], d) for d in per]
        where: Json = rng.choice(({"allNodes": True},
                                  {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                                      {"key": "rack", "operator": "In", "values": ["r0"]}]}]}}))
        devices = [self.gpu(f"fabric-{i}", 10 + i) for i in range(rng.randint(1, 3))]
        self.slices.append(_slice("fabric", GPU, "fabric", where, devices))
        self.devices += [(GPU, "fabric", d["name"], d) for d in devices]

    # -- classes and requests --------------------------------------------------------------------

    def selector(self) -> str:
        rng = self.rng
        a = f'device.attributes["{GPU}"]'
        return rng.choice((
            f'{a}.model == "{rng.choice(MODELS)}"',
            f'{a}.model != "{rng.choice(MODELS)}"',
            f"{a}.index >= {rng.randrange(3)}",
            f"{a}.numa == {rng.randrange(2)}",
            f"{a}.healthy",
            f"!{a}.healthy || {a}.index < 2",
            f'{a}.driverVersion.isGreaterThan(semver("{rng.choice(VERSIONS)}"))',
            f'{a}.driverVersion.compareTo(semver("1.10.0")) >= 0',
            f'device.capacity["{GPU}"].memory.compareTo(quantity("{rng.choice(("40Gi", "64Gi", "80Gi"))}")) >= 0',
            f'"family" in {a} && {a}.family == "hopper"',
            f'"{GPU}/family" in device.attributes["{GPU}"]',
            f'device.driver == "{GPU}" && {a}.model.startsWith("{rng.choice(("a", "h", "b"))}")',
        ))

    def risky_selector(self) -> str:
        a = f'device.attributes["{GPU}"]'
        # "family" is published by some GPUs only: reading it from another is a runtime error.
        return self.rng.choice((f'{a}.family == "hopper"', f'{a}.family != "ampere" || {a}.index > 1',
                                f'{a}.index > 1 && {a}.family == "hopper"'))

    def make_classes(self) -> None:
        self.classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
                             "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}}]}})
        if "selectors" in self.f:
            self.classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                 "metadata": {"name": "gpu-picky"},
                                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{GPU}"'}},
                                                        {"cel": {"expression": self.selector()}}]}})
        if "drivers" in self.f:
            self.classes.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "nic"},
                                 "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{NIC}"'}}]}})

    def exact(self, sub: str = "") -> Json:
        rng = self.rng
        classes = [c["metadata"]["name"] for c in self.classes]
        if self.on("missing_class", 0.05):
            classes = ["no-such-class"]
        r: Json = {"deviceClassName": rng.choice(classes)}
        if sub:
            r["name"] = sub
        if r["deviceClassName"] != "nic" and self.on("selectors", 0.5):
            r["selectors"] = [{"cel": {"expression": self.selector()}}]
        if r["deviceClassName"] != "nic" and self.on("missing_keys", 0.3):
            r["selectors"] = [*r.get("selectors", ()), {"cel": {"expression": self.risky_selector()}}]
        if self.on("all", 0.15):
            r["allocationMode"] = "All"
        else:
            r["allocationMode"] = "ExactCount"
            r["count"] = rng.choice((1, 1, 1, 2, 3)) if "counts" in self.f else 1
            if self.on("large", 0.2):
                r["count"] = rng.choice((16, 32, 33, 40))
        if self.on("taints", 0.4) or self.on("taint_rules", 0.3):
            r["tolerations"] = [rng.choice((
                {"key": "maintenance", "operator": "Exists"},
                {"key": "degraded", "operator": "Equal", "value": "true", "effect": "NoSchedule"},
                {"operator": "Exists", "effect": "NoExecute"},
                {"key": "rule", "operator": "Exists"},
            ))]
        if not sub and self.on("admin", 0.08):  # a subrequest has no adminAccess
            r["adminAccess"] = True
        if r["deviceClassName"] != "nic" and self.on("consumable", 0.3):
            r["capacity"] = {"requests": {"memory": rng.choice(("5Gi", "10Gi", "16Gi", "30Gi"))}}
        if r["deviceClassName"] != "nic" and self.on("fractional", 0.4):
            r.setdefault("capacity", {"requests": {}})["requests"]["cores"] = rng.choice(
                ("100m", "300m", "600m", "1", "1100m", "1.5", "2"))
        return r

    def request(self, name: str) -> Json:
        if self.on("first_available", 0.25):
            return {"name": name, "firstAvailable": [self.exact(f"s{i}") for i in range(self.rng.randint(1, 3))]}
        return {"name": name, "exactly": self.exact()}

    def claim(self, name: str) -> Json:
        rng = self.rng
        requests = [self.request(f"r{i}") for i in range(rng.choice((1, 1, 2, 3)))]
        devices: Json = {"requests": requests}
        if self.on("constraints", 0.4) and len(requests) >= 1:
            attr = rng.choice((f"{GPU}/numa", f"{GPU}/model", f"{GPU}/index", f"{GPU}/driverVersion",
                               f"{GPU}/slot", PCIE))
            con: Json = {("matchAttribute" if rng.random() < 0.6 else "distinctAttribute"): attr}
            if rng.random() < 0.5:
                names = []
                for r in requests[:rng.randint(1, len(requests))]:
                    subs = [x["name"] for x in r.get("firstAvailable", ())]
                    # A constraint may name one subrequest ("<request>/<subrequest>").
                    names.append(f'{r["name"]}/{rng.choice(subs)}' if subs and rng.random() < 0.5 else r["name"])
                con["requests"] = names
            devices["constraints"] = [con]
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default", "uid": self.next_uid()},
                "spec": {"devices": devices}}

    def taint_rules(self) -> list[Json]:
        rules: list[Json] = []
        if "taint_rules" not in self.f or not self.devices:
            return rules
        for i in range(self.rng.randint(0, 3)):
            driver, pool, dev, _ = self.rng.choice(self.devices)
            spec: Json = {"taint": {"key": "rule", "value": str(i),
                                    "effect": self.rng.choice(("NoSchedule", "NoExecute", "None"))}}
            shapes = ("device", "device", "pool", "driver", "empty")
            shape = self.rng.choice((*shapes, "none") if "taint_rule_no_selector" in self.f else shapes)
            if shape == "device":
                spec["deviceSelector"] = {"driver": driver, "pool": pool, "device": dev}
            elif shape == "pool":
                spec["deviceSelector"] = {"pool": pool}
            elif shape == "driver":
                spec["deviceSelector"] = {"driver": driver}
            elif shape == "empty":
                spec["deviceSelector"] = {}  # every device
            # "none": no selector, no device
            rules.append({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
                          "metadata": {"name": f"rule-{i}"}, "spec": spec})
        return rules

    def allocated_claim(self, name: str, allocated: list[Json]) -> Json:
        return _allocated_claim(self, name, allocated)

    def in_use(self) -> list[Json]:
        out: list[Json] = []
        if "in_use" not in self.f or not self.devices:
            return out
        taken = self.rng.sample(self.devices, self.rng.randint(0, len(self.devices) // 3 + 1))
        # What is in use must itself be possible: partitions within their counters.
        used: dict[tuple[str, str], int] = {}
        for t in list(taken):
            for cc in t[3].get("consumesCounters", ()):
                key = (t[1], cc["counterSet"])
                slices = int(cc["counters"]["slices"]["value"])
                if used.get(key, 0) + slices > 4:
                    taken.remove(t)
                else:
                    used[key] = used.get(key, 0) + slices
        for i, (driver, pool, dev, spec) in enumerate(taken):
            result: Json = {"request": "r", "driver": driver, "pool": pool, "device": dev}
            if spec.get("allowMultipleAllocations"):
                result["shareID"] = f"00000000-0000-4000-8000-{i:012d}"
                result["consumedCapacity"] = {"memory": self.rng.choice(("8Gi", "16Gi", "40Gi"))}
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": f"used-{i}", "namespace": "other", "uid": self.next_uid()},
                        "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                            "deviceClassName": "nic" if driver == NIC else "gpu", "allocationMode": "ExactCount",
                            "count": 1}}]}},
                        "status": {"allocation": {"devices": {"results": [result]}},
                                   "reservedFor": [{"resource": "pods", "name": f"user-{i}",
                                                    "uid": self.next_uid()}]}})
        return out


def _allocated_claim(w: _World, name: str, allocated: list[Json]) -> Json:
    """A claim of the pod's allocated already (another pod shares it), on a device nobody else
    holds: its allocation pins the pod to the device's node, or to nothing for a device of every
    node."""
    held = {(r["driver"], r["pool"], r["device"]) for c in allocated
            for r in c["status"]["allocation"]["devices"]["results"]}
    free = [d for d in w.devices if (d[0], d[1], d[2]) not in held and not d[3].get("allowMultipleAllocations")
            and not d[3].get("consumesCounters")]  # partitions in use are kept within their counters
    claim = w.claim(name)
    if not free:
        return claim
    driver, pool, dev, _ = w.rng.choice(free)
    node = next((s["spec"].get("nodeName") for s in w.slices
                 if s["spec"]["pool"]["name"] == pool and s["spec"]["driver"] == driver), None)
    allocation: Json = {"devices": {"results": [{"request": "r", "driver": driver, "pool": pool, "device": dev}]}}
    if node:
        allocation["nodeSelector"] = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    claim["spec"] = {"devices": {"requests": [{"name": "r", "exactly": {
        "deviceClassName": "nic" if driver == NIC else "gpu", "allocationMode": "ExactCount", "count": 1}}]}}
    claim["status"] = {"allocation": allocation,
                       "reservedFor": [{"resource": "pods", "name": "sharer", "uid": w.next_uid()}]}
    return claim


def case(rng: random.Random, features: frozenset[str], name: str) -> Json:
    """One random case for draref and koordpy's allocator alike."""
    unknown = features - FEATURES
    if unknown:
        raise ValueError(f"unknown features {sorted(unknown)}")
    w = _World(rng, features, name)
    for i in range(rng.randint(1, 3)):
        node = f"node-{i}"
        w.nodes.append(_node(node, f"r{i % 2}"))
        w.add_node_pools(node)
        if w.on("large", 0.5):
            w.add_large_pool(node)
    if w.on("network", 0.5):
        w.add_network_pool()
    w.make_classes()
    allocated = w.in_use()
    claims = [w.claim(f"{name}-claim-{i}") for i in range(rng.randint(1, 2))]
    if w.on("allocated_claims", 0.4) and w.devices:
        claims.insert(0, w.allocated_claim(f"{name}-shared", allocated))
    out: Json = {"name": name, "nodes": w.nodes, "classes": w.classes, "slices": w.slices,
                 "allocated": allocated, "claims": claims}
    # A pod that cannot fit may make the search try every combination (upstream's search is
    # exponential: 300,000 steps for 11 GPUs asked of 10, 3 s in Go): a short bound, given to both
    # sides, keeps a batch quick. Nodes where either side runs into it are not compared.
    out["filterTimeout"] = 1.0 if "large" in features else 2.0
    rules = w.taint_rules()
    if rules:
        out["taintRules"] = rules
    return out
