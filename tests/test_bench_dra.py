"""bench_dra's objects: the sizes upstream's workload names say (scheduler_perf/dra of v1.37.2), a
cluster exactly as full as upstream's at the end, and a final state made from them the way a
scheduler would make it passes the benchmark's whole check (``state_violations``: the DRA checker,
node fit with DRA-backed extended resources left out, PodGroups) while a broken one does not.
No cluster: this keeps the workloads from rotting between the runs that need one."""

from __future__ import annotations

from collections import Counter

from benchmarks.bench_dra import (
    INIT_NS,
    MEASURED_NS,
    PREFIX,
    WORKLOADS,
    Workload,
    allocation,
    node_body,
    plan,
    select,
    state_violations,
)
from tests.integration.checker import Obj, name_of
from tests.integration.dra_checker import dra_violations

BY = {w.short: w for w in WORKLOADS}
ONE = {"devices": {"requests": [{"name": "req-0", "exactly": {"deviceClassName": "test-class"}}]}}


def devices(p_slices: list[Obj]) -> int:
    return sum(len(s["spec"].get("devices") or []) for s in p_slices)


def test_the_sizes_are_upstreams() -> None:
    rct = plan(BY["rct"], 1.0, "s", "r")
    assert (rct.nodes, len(rct.slices), devices(rct.slices), len(rct.allocations), rct.measured) == \
        (500, 500, 5000, 2500, 2500)
    rc = plan(BY["rc"], 1.0, "s", "r")
    assert (rc.nodes, devices(rc.slices), len(rc.claims[INIT_NS]), len(rc.init_pods), len(rc.claims[MEASURED_NS]),
            rc.measured) == (500, 1000, 500, 2500, 500, 2500)
    assert set(Counter(q["spec"]["resourceClaims"][0]["resourceClaimName"] for q in rc.pods()).values()) == {5}
    pgt = plan(BY["pgt"], 1.0, "s", "r")
    assert (pgt.nodes, len(pgt.slices), len(pgt.groups[MEASURED_NS]), pgt.measured) == (50, 100, 100, 5000)
    assert Counter(q["spec"]["schedulingGroup"]["podGroupName"] for q in pgt.pods())["test-dra-7"] == 50
    er = plan(BY["er"], 1.0, "s", "r")
    assert (er.nodes, devices(er.slices), len(er.classes), len(er.init_pods), er.measured) == \
        (500, 5000, 25, 2500, 2500)
    assert {c["spec"]["extendedResourceName"] for c in er.classes} == {f"example.com/gpu-{k}" for k in range(25)}
    pbt = plan(BY["pbt"], 1.0, "s", "r")
    assert (pbt.nodes, len(pbt.slices), len(pbt.allocations), pbt.measured, pbt.steady) == (500, 1000, 250, 10, True)


def test_scale_keeps_the_ratios() -> None:
    for w in WORKLOADS:
        full, small = plan(w, 1.0, "s", "r"), plan(w, 0.1, "s", "r")
        assert small.nodes == full.nodes // 10, w.name
        if not w.steady:
            assert small.measured == full.measured // 10, w.name
            assert len(small.init_pods) == len(full.init_pods) // 10, w.name
            assert len(small.allocations) == len(full.allocations) // 10, w.name


def test_every_pod_names_the_scheduler_and_its_round() -> None:
    for w in WORKLOADS:
        p = plan(w, 0.02, "koordpy", "x-kp")
        for q in p.pods():
            assert q["spec"]["schedulerName"] == "koordpy" and q["metadata"]["labels"]["bench-round"] == "x-kp"
        for q in p.init_pods:
            assert q["metadata"]["labels"]["bench-round"] == "x-kp-init"
    assert [w.short for w in select({"ExtendedResource", "pbt"})] == ["er", "pbt"]


def test_the_allocations_written_before_the_round_are_valid_and_leave_the_rest_free() -> None:
    """Upstream's allocResourceClaims allocates through the allocator; these are written directly, so
    they must hold to the checker: distinct devices, counters within their values."""
    for short in ("rct", "pbt"):
        p = plan(BY[short], 1.0, "s", "r")
        claims = [{**c, "metadata": {**c["metadata"], "namespace": INIT_NS},
                   "status": {"allocation": p.allocations[name_of(c)]}} for c in p.claims[INIT_NS]]
        nodes = [node_body(i) for i in range(p.nodes)]
        assert dra_violations(nodes, [], claims, p.slices, p.classes) == [], short


def schedule(w: Workload, scale: float) -> tuple[list[Obj], list[Obj], list[Obj], list[Obj]]:
    """A final state as a scheduler would leave it: every measured and init pod bound, its claim
    allocated (first free device, node by node) and reserved for it. Returns nodes, pods, claims,
    and the plan's slices."""
    p = plan(w, scale, "s", "r")
    nodes = [node_body(i) for i in range(p.nodes)]
    per_node = devices(p.slices) // p.nodes
    taken: dict[int, int] = Counter()
    claims: list[Obj] = []
    for name, alloc in p.allocations.items():
        n = int(alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"][0][len(PREFIX):])
        taken[n] += 1
        claims.append({"metadata": {"name": name, "namespace": INIT_NS},
                       "spec": ONE,
                       "status": {"allocation": alloc}})
    shared: dict[str, Obj] = {}
    pods = []
    for i, q in enumerate([*((INIT_NS, q) for q in p.init_pods), *((MEASURED_NS, q) for q in p.pods())]):
        ns, body = q
        body["metadata"].update({"namespace": ns, "uid": f"u{i}"})
        me = {"resource": "pods", "name": name_of(body), "uid": f"u{i}"}
        entry = (body["spec"].get("resourceClaims") or [{}])[0]
        key = f"{ns}/{entry.get('resourceClaimName')}"
        if key in shared:  # a claim shared by five pods: they follow its allocation
            c = shared[key]
            c["status"]["reservedFor"].append(me)
            body["spec"]["nodeName"] = c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0][
                "matchFields"][0]["values"][0]
            pods.append(body)
            continue
        n = next(k for k in range(p.nodes) if taken[k] < per_node)
        device = f"basic-device-{taken[n]}"
        taken[n] += 1
        body["spec"]["nodeName"] = f"{PREFIX}{n}"
        alloc = allocation(n, [device])
        if entry.get("resourceClaimName"):
            c = {"metadata": {"name": entry["resourceClaimName"], "namespace": ns},
                 "spec": ONE,
                 "status": {"allocation": alloc, "reservedFor": [me]}}
            shared[key] = c
        elif entry:
            cname = f"{name_of(body)}-resource"
            body["status"] = {"resourceClaimStatuses": [{"name": "resource", "resourceClaimName": cname}]}
            c = {"metadata": {"name": cname, "namespace": ns},
                 "spec": ONE,
                 "status": {"allocation": alloc, "reservedFor": [me]}}
        else:  # an extended resource: the pod's special claim
            res = next(iter(body["spec"]["containers"][0]["resources"]["requests"]))
            cls = next(name_of(k) for k in p.classes if k["spec"]["extendedResourceName"] == res)
            cname = f"{name_of(body)}-extended-resources"
            body["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": cname, "requestMappings": [
                {"containerName": "pause", "resourceName": res, "requestName": "container-0-request-0"}]}}
            alloc["devices"]["results"][0]["request"] = "container-0-request-0"
            c = {"metadata": {"name": cname, "namespace": ns},
                 "spec": {"devices": {"requests": [{"name": "container-0-request-0", "exactly": {
                     "deviceClassName": cls, "allocationMode": "ExactCount", "count": 1}}]}},
                 "status": {"allocation": alloc, "reservedFor": [me]}}
        claims.append(c)
        pods.append(body)
    return nodes, pods, claims, p.slices


def test_a_cluster_filled_as_a_scheduler_fills_it_passes_the_whole_check_and_a_double_allocation_does_not() -> None:
    for short in ("rct", "rc", "er"):
        w = BY[short]
        p = plan(w, 0.02, "s", "r")
        nodes, pods, claims, slices = schedule(w, 0.02)
        assert len(pods) == p.measured + len(p.init_pods)
        # Exactly full: every device of the cluster is taken.
        results = [r for c in claims for r in c["status"]["allocation"]["devices"]["results"]]
        assert len(results) == devices(slices), short
        assert state_violations(nodes, pods, claims, slices, p.classes, [], {}) == [], short
        results[0]["device"], results[-1]["device"] = results[-1]["device"], results[0]["device"]
        results[0]["pool"], results[-1]["pool"] = results[-1]["pool"], results[0]["pool"]
        problems = state_violations(nodes, pods, claims, slices, p.classes, [], {})
        assert any("not usable on node" in x for x in problems), (short, problems[:3])


def test_the_table_shows_both_sides_the_ratio_a_skipped_workload_and_an_error() -> None:
    from benchmarks.bench_dra import table

    side = {"pods_per_s": 50.0, "cpu_s_per_1000": 2.0, "rss_mib": 250.0, "violations": 0, "bound": 250}
    fig = {"duration": 10.0, "workloads": {
        "A/x": {"pods": 250, "nodes": 50, "steady": False, "koordpy": dict(side),
                "kube-scheduler": {**side, "cpu_s_per_1000": 4.0}},
        "B/y": {"skipped": "the control plane's FEATURE_GATES lack DRAWorkloadResourceClaims=true"},
        "C/z": {"pods": 0, "nodes": 50, "steady": True, "koordpy": {**side, "violations": 2, "error": "stalled"}}}}
    rows = table(fig).splitlines()
    assert "2.00 / 4.00, **0.50x**" in rows[2] and "yes, 250 bound / yes, 250 bound" in rows[2]
    assert "skipped: the control plane's FEATURE_GATES lack" in rows[3]
    assert "(steady, 10 s, 50 nodes)" in rows[4] and "**no (2)**, 250 bound, error / -" in rows[4]
