"""An independent checker of DRA allocations in a final state: are the bound pods' ResourceClaims
allocated as the ``resource.k8s.io/v1`` API's rules demand?

Written from the API's rules (``k8s.io/api/resource/v1/types.go``, the DRA library's
``resourceclaim`` package, kube-scheduler's DynamicResources plugin of v1.37), over plain dicts as
the API server returns them. Like ``checker.py`` it imports nothing from koordpy on purpose: the
benchmarks hold koordpy's allocations and kube-scheduler's to it alike, so it must not share
koordpy's mistakes. It favours being obviously right over being fast, but stays linear in the
objects (5,000 pods and claims on 500 slices check in about a second).

What it checks (``dra_violations``), one line per violation:

- Every bound live pod: each ``spec.resourceClaims`` entry resolves to a claim (``resourceClaimName``,
  or through ``status.resourceClaimStatuses`` for a template; a status without a claim name means
  none was needed) that exists, is allocated, whose ``allocation.nodeSelector`` admits the pod's node,
  and whose ``reservedFor`` holds the consumer ``resourceclaim.BindTo`` names: the pod (by UID), or
  its PodGroup (``scheduling.k8s.io`` ``podgroups``, by name) when the pod's entry is identical to one
  of the PodGroup's ``spec.resourceClaims``. ``reservedFor`` has at most 256 entries.
- A pod's requests for an extended resource that its node does not publish and a DeviceClass
  serves (``extendedResourceName``, or the implicit ``deviceclass.resource.kubernetes.io/<class>``):
  ``status.extendedResourceClaimStatus`` names a claim, allocated and reserved for the pod, mapping
  each (container, resource) to a request whose results are exactly the quantity asked, of devices
  of that class.
- Every allocated claim: each result names a device of the newest generation of a complete pool,
  usable on the node the allocation is for (the slice's ``nodeName`` / ``nodeSelector`` /
  ``allNodes``, or the device's own with ``perDeviceNodeSelection``); it matches the request's
  class and the class's and request's CEL selectors (only the forms ``device.driver == "..."``
  joined by ``&&`` are understood: any other selector is reported as not checked, never passed);
  each request has exactly its ``count`` results (ExactCount, default 1), every matching device
  usable on the node (All), or the results of exactly one of its ``firstAvailable`` subrequests;
  no result names an unknown request.
- No device is allocated twice: a device without ``allowMultipleAllocations`` appears in at most
  one result over all claims (``adminAccess`` results excepted, as the allocator excepts them).
- Shared counters (partitionable devices): per pool and counter set, what the allocated devices'
  ``consumesCounters`` take is at most the counter's value.

Left out (the DRA benchmarks use none of them): the capacity a shared device's ``shareID`` results
consume (consumable capacity), device taints, ``matchAttribute`` / ``distinctAttribute``
constraints, binding conditions, and CEL beyond the driver test.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

from tests.integration.checker import Obj, key_of, name_of, namespace_of, node_selector_matches, quantity

MAX_RESERVED = 256  # resource.k8s.io/v1 ResourceClaimReservedForMaxSize
IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
PODGROUPS = ("scheduling.k8s.io", "podgroups")
# Resources a node's allocatable always answers for (not extended resources).
NATIVE = {"cpu", "memory", "ephemeral-storage", "pods"}

DeviceId = tuple[str, str, str]  # driver, pool, device


def _live(p: Obj) -> bool:
    return (not p["metadata"].get("deletionTimestamp")
            and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


# -- CEL, the one form the benchmarks use ------------------------------------------------------------

_DRIVER_TEST = re.compile(r'^\s*device\.driver\s*==\s*"([^"\\]*)"\s*$')


def selector_verdict(expression: str, driver: str) -> bool | None:
    """The verdict of a CEL selector on a device of ``driver``, for conjunctions of
    ``device.driver == "..."``; ``None`` for anything else (not understood, so not checked)."""
    verdict = True
    for part in expression.split("&&"):
        m = _DRIVER_TEST.match(part)
        if m is None:
            return None
        verdict = verdict and m.group(1) == driver
    return verdict


# -- pools ------------------------------------------------------------------------------------------

@dataclass
class Device:
    slice: Obj
    raw: Obj

    @property
    def driver(self) -> str:
        return str(self.slice["spec"]["driver"])

    @property
    def pool(self) -> str:
        return str(self.slice["spec"]["pool"]["name"])

    def usable_on(self, node: Obj) -> bool:
        """Whether the device may serve a pod on ``node``: the slice's node selection, or with
        ``perDeviceNodeSelection`` the device's own."""
        spec = self.slice["spec"]
        where = self.raw if spec.get("perDeviceNodeSelection") else spec
        if where.get("allNodes"):
            return True
        if where.get("nodeName"):
            return bool(where["nodeName"] == name_of(node))
        if where.get("nodeSelector") is not None:
            return node_selector_matches(where["nodeSelector"], node)
        return False


class Pools:
    """The newest generation of each (driver, pool), its devices by name, whether it is complete
    (as many slices of that generation as ``resourceSliceCount`` says) and its shared counters."""

    def __init__(self, slices: Iterable[Obj]) -> None:
        newest: dict[tuple[str, str], int] = {}
        by_pool: dict[tuple[str, str], list[Obj]] = defaultdict(list)
        for s in slices:
            spec = s["spec"]
            key = (spec["driver"], spec["pool"]["name"])
            gen = int(spec["pool"].get("generation") or 0)
            if gen > newest.get(key, -1):
                newest[key] = gen
                by_pool[key] = []
            if gen == newest[key]:
                by_pool[key].append(s)
        self.devices: dict[DeviceId, Device] = {}
        self.duplicates: list[str] = []
        self.complete: dict[tuple[str, str], bool] = {}
        self.counters: dict[tuple[str, str, str, str], Fraction] = {}  # driver, pool, set, counter -> value
        for key, ss in by_pool.items():
            self.complete[key] = len(ss) == int(ss[0]["spec"]["pool"].get("resourceSliceCount") or 0)
            for s in ss:
                for cs in s["spec"].get("sharedCounters") or []:
                    for c, v in (cs.get("counters") or {}).items():
                        self.counters[(*key, cs["name"], c)] = quantity(v["value"])
                for d in s["spec"].get("devices") or []:
                    did = (*key, d["name"])
                    if did in self.devices:
                        self.duplicates.append("/".join(did))
                    self.devices[did] = Device(s, d)

    def matching(self, node: Obj, selectors: list[str]) -> list[DeviceId]:
        """The devices usable on ``node``, from complete pools, that every selector admits."""
        return [did for did, d in self.devices.items() if d.usable_on(node) and self.complete.get(did[:2], False)
                and all(selector_verdict(e, d.driver) for e in selectors)]


# -- claims -----------------------------------------------------------------------------------------

def claim_name(pod: Obj, entry: Obj) -> tuple[str | None, str]:
    """The claim a pod's ``spec.resourceClaims`` entry stands for, as ``resourceclaim.Name`` finds it:
    (name, "") or (None, why): "none needed" when the controller decided so, else what is missing."""
    if entry.get("resourceClaimName"):
        return str(entry["resourceClaimName"]), ""
    if entry.get("resourceClaimTemplateName"):
        for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if st.get("name") == entry["name"]:
                return (str(st["resourceClaimName"]), "") if st.get("resourceClaimName") else (None, "none needed")
        return None, "no status.resourceClaimStatuses entry (the claim was never made)"
    return None, "neither resourceClaimName nor resourceClaimTemplateName"


def consumer(pod: Obj, group: Obj | None, entry: Obj) -> tuple[str, str, str, str]:
    """``resourceclaim.BindTo``: (apiGroup, resource, name, uid or "") of whom the claim is reserved
    for. The PodGroup when its ``spec.resourceClaims`` has an identical entry, else the pod."""
    if group is not None:
        for g in (group.get("spec") or {}).get("resourceClaims") or []:
            if (g.get("name") == entry.get("name") and g.get("resourceClaimName") == entry.get("resourceClaimName")
                    and g.get("resourceClaimTemplateName") == entry.get("resourceClaimTemplateName")):
                return (*PODGROUPS, name_of(group), "")  # a pod does not know its PodGroup's UID
    return "", "pods", name_of(pod), str(pod["metadata"].get("uid") or "")


def reserved_for(claim: Obj, who: tuple[str, str, str, str]) -> bool:
    for r in (claim.get("status") or {}).get("reservedFor") or []:
        if who[1] == "pods" and who[3] and r.get("uid") == who[3]:
            return True
        if who[1] != "pods" and (r.get("apiGroup"), r.get("resource"), r.get("name")) == who[:3]:
            return True
    return False


def _request_classes(claim: Obj) -> dict[str, Obj]:
    """Each request name results may carry (``req`` or ``req/sub``) -> its ``exactly`` part, with
    the name of the request it belongs to under ``_parent``."""
    out: dict[str, Obj] = {}
    for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        if r.get("exactly"):
            out[r["name"]] = {**r["exactly"], "_parent": r["name"]}
        for sub in r.get("firstAvailable") or []:
            out[f"{r['name']}/{sub['name']}"] = {**sub, "_parent": r["name"]}
    return out


def _selectors(spec: Obj) -> list[str]:
    return [s["cel"]["expression"] for s in spec.get("selectors") or [] if (s or {}).get("cel")]


def allocation_violations(claim: Obj, node: Obj, pools: Pools, classes: Mapping[str, Obj]) -> list[str]:
    """What ``claim``'s allocation breaks on ``node`` (the node it serves): each result's device,
    its class and selectors, the counts per request."""
    key = key_of(claim)
    alloc = (claim.get("status") or {}).get("allocation") or {}
    results = (alloc.get("devices") or {}).get("results") or []
    requests = _request_classes(claim)
    problems: list[str] = []
    per_request: Counter[str] = Counter()
    for res in results:
        did: DeviceId = (res.get("driver", ""), res.get("pool", ""), res.get("device", ""))
        shown = "/".join(did)
        spec = requests.get(res.get("request", ""))
        if spec is None:
            problems.append(f"claim {key}: result {shown} for request {res.get('request')!r}, which the claim lacks")
            continue
        per_request[res["request"]] += 1
        dev = pools.devices.get(did)
        if dev is None:
            problems.append(f"claim {key}: device {shown} is in no slice of its pool's newest generation")
            continue
        if not pools.complete.get(did[:2], False):
            problems.append(f"claim {key}: device {shown} is from an incomplete pool")
        if not dev.usable_on(node):
            problems.append(f"claim {key}: device {shown} is not usable on node {name_of(node)}")
        cls = classes.get(spec.get("deviceClassName", ""))
        if cls is None:
            problems.append(f"claim {key}: request {res['request']} names DeviceClass "
                            f"{spec.get('deviceClassName')!r}, which does not exist")
            continue
        for expr in _selectors(cls.get("spec") or {}) + _selectors(spec):
            verdict = selector_verdict(expr, dev.driver)
            if verdict is None:
                problems.append(f"claim {key}: selector {expr!r} not checked (not understood by this checker)")
            elif not verdict:
                problems.append(f"claim {key}: device {shown} does not match selector {expr!r}")
    for r in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
        name = r["name"]
        if r.get("exactly"):
            ex = r["exactly"]
            mode = ex.get("allocationMode") or "ExactCount"
            if mode == "ExactCount":
                want = int(ex.get("count") or 1)
            else:  # All: every device of the class usable on the node, from complete pools
                cls = classes.get(ex.get("deviceClassName", "")) or {}
                want = len(pools.matching(node, _selectors(cls.get("spec") or {}) + _selectors(ex)))
            if per_request[name] != want:
                problems.append(f"claim {key}: request {name} ({mode}) has {per_request[name]} results, not {want}")
        elif r.get("firstAvailable"):
            used = [s for s in r["firstAvailable"] if per_request[f"{name}/{s['name']}"]]
            if len(used) != 1:
                problems.append(f"claim {key}: request {name} has results of {len(used)} subrequests, not one")
            else:
                s = used[0]
                ref = f"{name}/{s['name']}"
                want = int(s.get("count") or 1)
                if (s.get("allocationMode") or "ExactCount") == "ExactCount" and per_request[ref] != want:
                    problems.append(f"claim {key}: subrequest {ref} has {per_request[ref]} results, not {want}")
    return problems


def exclusive_violations(claims: Iterable[Obj], pools: Pools) -> list[str]:
    """A device allocated twice (outside ``allowMultipleAllocations`` and ``adminAccess``), and
    shared counters taken beyond their value."""
    holders: dict[DeviceId, list[str]] = defaultdict(list)
    for c in claims:
        alloc = (c.get("status") or {}).get("allocation") or {}
        for res in (alloc.get("devices") or {}).get("results") or []:
            if res.get("adminAccess"):
                continue
            did = (res.get("driver", ""), res.get("pool", ""), res.get("device", ""))
            dev = pools.devices.get(did)
            if dev is not None and dev.raw.get("allowMultipleAllocations"):
                continue
            holders[did].append(key_of(c))
    problems = [f"device {'/'.join(did)} allocated {len(hs)} times: {', '.join(sorted(hs)[:4])}"
                for did, hs in sorted(holders.items()) if len(hs) > 1]
    used: dict[tuple[str, str, str, str], Fraction] = defaultdict(Fraction)
    for did in holders:
        dev = pools.devices.get(did)
        if dev is None:
            continue
        for cc in dev.raw.get("consumesCounters") or []:
            for c, v in (cc.get("counters") or {}).items():
                used[(*did[:2], cc["counterSet"], c)] += quantity(v["value"])
    for k, v in sorted(used.items()):
        cap = pools.counters.get(k)
        if cap is None:
            problems.append(f"pool {k[0]}/{k[1]}: allocated devices consume counter {k[2]}/{k[3]}, "
                            "which no slice of the pool declares")
        elif v > cap:
            problems.append(f"pool {k[0]}/{k[1]}: counter {k[2]}/{k[3]} is {cap}, its allocated devices take {v}")
    return problems


def extended_classes(classes: Iterable[Obj]) -> dict[str, str]:
    """Extended resource name -> the DeviceClass serving it (explicit names and implicit ones)."""
    out: dict[str, str] = {}
    for c in classes:
        out[IMPLICIT_PREFIX + name_of(c)] = name_of(c)
        ext = (c.get("spec") or {}).get("extendedResourceName")
        if ext:
            out[ext] = name_of(c)
    return out


def dra_backed(pod: Obj, node: Obj | None, served: Mapping[str, str]) -> dict[tuple[str, str], int]:
    """(container, resource) -> quantity for each extended resource request of the pod that a
    DeviceClass serves and ``node`` (when given) does not publish in its allocatable."""
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    out: dict[tuple[str, str], int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        for r, q in ((c.get("resources") or {}).get("requests") or {}).items():
            if r in served and r not in NATIVE and r not in allocatable:
                out[(c["name"], r)] = int(quantity(q))
    return out


def dra_violations(nodes: list[Obj], pods: list[Obj], claims: list[Obj], slices: list[Obj],
                   classes: list[Obj], podgroups: Iterable[Obj] = ()) -> list[str]:
    """Every rule above, on a final state (``claims`` from one LIST, so one consistent snapshot)."""
    pools = Pools(slices)
    problems = [f"device {d} is listed twice in its pool" for d in pools.duplicates]
    node_by = {name_of(n): n for n in nodes}
    claim_by = {key_of(c): c for c in claims}
    group_by = {f"{namespace_of(g)}/{name_of(g)}": g for g in podgroups}
    class_by = {name_of(c): c for c in classes}
    served = extended_classes(classes)
    checked: dict[str, str] = {}  # claim -> node its allocation was checked on
    for pod in pods:
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name or not _live(pod):
            continue
        pk, ns = key_of(pod), namespace_of(pod)
        node = node_by.get(node_name)
        if node is None:
            problems.append(f"{pk} is bound to {node_name}, a node the cluster does not have")
            continue
        group_name = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
        group = group_by.get(f"{ns}/{group_name}") if group_name else None
        wanted: list[tuple[str, tuple[str, str, str, str], str]] = []  # claim key, consumer, what for
        for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
            name, why = claim_name(pod, entry)
            if name is None:
                if why != "none needed":
                    problems.append(f"{pk} is bound but its claim {entry.get('name')!r} is unresolved: {why}")
                continue
            wanted.append((f"{ns}/{name}", consumer(pod, group, entry), f"claim {entry['name']!r}"))
        backed = dra_backed(pod, node, served)
        if backed:
            ext = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
            if not ext.get("resourceClaimName"):
                problems.append(f"{pk} is bound with extended resources {sorted(r for _, r in backed)} served by "
                                "DRA but no status.extendedResourceClaimStatus")
            else:
                ck = f"{ns}/{ext['resourceClaimName']}"
                wanted.append((ck, ("", "pods", name_of(pod), str(pod["metadata"].get("uid") or "")),
                               "extended resources"))
                problems += _extended_violations(pk, claim_by.get(ck), backed, ext, served)
        for ck, who, what in wanted:
            claim = claim_by.get(ck)
            if claim is None:
                problems.append(f"{pk} is bound but its {what} names {ck}, which does not exist")
                continue
            status = claim.get("status") or {}
            alloc = status.get("allocation")
            if not alloc:
                problems.append(f"{pk} is bound on {node_name} but its {what} ({ck}) is not allocated")
                continue
            if alloc.get("nodeSelector") is not None and not node_selector_matches(alloc["nodeSelector"], node):
                problems.append(f"{pk} is bound on {node_name} but the allocation of {ck} is for other nodes")
            if not reserved_for(claim, who):
                problems.append(f"{pk} is bound but {ck} is not reserved for {who[1]}/{who[2]}")
            if len(status.get("reservedFor") or []) > MAX_RESERVED:
                problems.append(f"claim {ck} is reserved for {len(status['reservedFor'])} consumers, over "
                                f"{MAX_RESERVED}")
            if ck not in checked:
                checked[ck] = node_name
                problems += allocation_violations(claim, node, pools, class_by)
    problems += exclusive_violations(claims, pools)
    return problems


def _extended_violations(pk: str, claim: Obj | None, backed: Mapping[tuple[str, str], int], ext: Obj,
                         served: Mapping[str, str]) -> list[str]:
    """The special claim of a pod's DRA-backed extended resources: a request per (container,
    resource) as the status maps them, of the serving class, with exactly the quantity's results."""
    if claim is None:
        return []  # reported by the caller
    mapping = {(m.get("containerName"), m.get("resourceName")): m.get("requestName")
               for m in ext.get("requestMappings") or []}
    requests = {r["name"]: r.get("exactly") or {} for r in
                ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []}
    results = Counter(res.get("request") for res in
                      (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
    problems = []
    for (container, resource), amount in sorted(backed.items()):
        req = mapping.get((container, resource))
        if req is None or req not in requests:
            problems.append(f"{pk}: extended resource {resource} of container {container} maps to no request "
                            f"of its claim {key_of(claim)}")
            continue
        if requests[req].get("deviceClassName") != served[resource]:
            problems.append(f"{pk}: request {req} of {key_of(claim)} asks class "
                            f"{requests[req].get('deviceClassName')!r}, not {served[resource]!r} ({resource})")
        if results[req] != amount:
            problems.append(f"{pk}: {resource} x{amount} got {results[req]} devices in {key_of(claim)}")
    return problems
