"""What the scheduler's memory costs at scale (issue 21, goal 2); prints figures, asserts nothing.

    .venv/bin/python -m benchmarks.bench_memory [--trace] [--only 5000x16000]

Offline, no cluster. Each size runs in a fresh subprocess that imports what ``koordpy run`` imports,
step by step, and reports the resident set (RSS, ``/proc/self/status``) after each step:

    python          the interpreter and the standard library the rest needs
    numpy           numpy
    numba+kernels   numba, LLVM and koordpy's compiled kernels, loaded (``kernels.warm.warm_up``)
    pydantic+api    pydantic and koordpy's API models and settings
    kubernetes      kubernetes_asyncio's client
    kopf            kopf
    controller      koordpy's controller and core, run once (``controller.main.warm_up``)

That last figure is the baseline: RSS before the first object. Then N nodes and M pods (with their
PodGroups and a ClusterNetworkTopology) go into the controller's ``Cache`` as watch events, the way
the live loop's LIST and watches feed it, and the live loop's standing state is built: one
``Cache.snapshot`` and one core cycle (``schedule``), whose binds the cache assumes. RSS is read
after the objects and after the cycle. The pods are gangs of 20 as the live benchmark's workloads
look once the API server has admitted them: labels, an annotation, an owner reference, the two
default tolerations, a service-account volume and cpu/memory requests (half the gangs with a GPU);
nine gangs in ten are bound, spread over the nodes, and one in ten is pending with a PreferGather
topology, for the cycle to place.

Sizes: pods 4,000 / 16,000 / 50,000 at 5,000 nodes, and nodes 2,500 / 5,000 / 10,000 at 16,000
pods; the growth per 1,000 pods and per 1,000 nodes is the least-squares slope over each three.
``--trace`` also runs 5,000 nodes x 16,000 pods (or the ``--only`` size) under tracemalloc and
prints where the held Python memory was allocated (largest first).

``--live-like`` replays the live benchmark's rounds instead (``live_like``: watch lines, the core in a
worker thread, round 1 bound then deleted, parked gangs, round 2; ``--writer`` adds the loop's own
cycles and writes to a fake API server) and reads RSS, its mappings and glibc's account after each
stage; ``--remedy`` compares one malloc arena and ``malloc_trim`` (``controller.memory``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

MiB = 1024 * 1024
GPU = "nvidia.com/gpu"
LAYERS = (("DatacenterLayer", "dc"), ("SpineLayer", "spine"), ("BlockLayer", "block"))
GANG = 20
NAMES = frozenset({"koordpy"})
POD_SIZES = (4_000, 16_000, 50_000)  # at 5,000 nodes
NODE_SIZES = (2_500, 5_000, 10_000)  # at 16,000 pods
PER_CYCLE = int(os.environ.get("BENCH_PER_CYCLE", "1"))  # --live-like: gangs that arrive between two cycles
IMPORT_STEPS = ("python", "numpy", "numba+kernels", "pydantic+api", "kubernetes", "kopf", "controller")


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def node(i: int, per_block: int = 25, blocks_per_spine: int = 10, spines_per_dc: int = 10) -> dict[str, Any]:
    b = i // per_block
    s = b // blocks_per_spine
    d = s // spines_per_dc
    name = f"node-{i}"
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "uid": f"{i:08x}-node-4000-8000-000000000000", "creationTimestamp": "2025-01-01T00:00:00Z",
        "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                   "type": "kwok", "topology/dc": f"dc-{d}", "topology/spine": f"spine-{s}",
                   "topology/block": f"block-{b}"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"}},
        "spec": {"taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "128", "memory": "1Ti", GPU: "8", "pods": "110"},
                   "capacity": {"cpu": "128", "memory": "1Ti", GPU: "8", "pods": "110"},
                   "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def topology() -> dict[str, Any]:
    spec: list[dict[str, Any]] = []
    parent = None
    for layer, key in LAYERS:
        item: dict[str, Any] = {"topologyLayer": layer, "labelKey": [f"topology/{key}"]}
        if parent:
            item["parentTopologyLayer"] = parent
        spec.append(item)
        parent = layer
    spec.append({"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": parent})
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"}, "spec": {"networkTopologySpec": spec}}


def podgroup(name: str) -> dict[str, Any]:
    gather = [{"layer": layer, "strategy": "PreferGather"} for layer, _ in reversed(LAYERS)]
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "bench", "uid": f"uid-pg-{name}", "annotations": {
                "gang.scheduling.koordinator.sh/network-topology-spec": json.dumps({"gatherStrategy": gather})}},
            "spec": {"minMember": GANG}}


def pod(gang: int, i: int, node_name: str | None) -> dict[str, Any]:
    name = f"job-{gang}"
    gpu = gang % 2 == 0
    requests = {"cpu": "2", "memory": "4Gi", **({GPU: "1"} if gpu else {})}
    raw: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": f"{name}-{i}", "namespace": "bench", "uid": f"{gang:08x}-{i:04x}-4000-8000-000000000000",
        "creationTimestamp": "2025-01-01T00:00:00Z",
        "labels": {"pod-group.scheduling.sigs.k8s.io": name, "app": name, "job-name": name},
        "annotations": {"gang.scheduling.koordinator.sh/network-topology-index": str(i)},
        "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": f"uid-job-{gang}",
                             "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"schedulerName": "koordpy", "priority": 0, "terminationGracePeriodSeconds": 30,
                 "tolerations": [
                     {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                      "tolerationSeconds": 300},
                     {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                      "tolerationSeconds": 300},
                     {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                 "volumes": [{"name": "kube-api-access", "projected": {"sources": [
                     {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}}],
                 "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                                 "resources": {"requests": requests,
                                               **({"limits": {GPU: "1"}} if gpu else {})},
                                 "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                                   "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]}]},
        "status": {"phase": "Pending", "qosClass": "Burstable"}}
    if node_name is not None:
        raw["spec"]["nodeName"] = node_name
        raw["status"] = {"phase": "Running", "qosClass": "Burstable", "podIP": "10.0.0.1",
                         "hostIP": "10.0.0.2", "startTime": "2025-01-01T00:00:01Z",
                         "conditions": [{"type": "PodScheduled", "status": "True"},
                                        {"type": "Ready", "status": "True"}]}
    return raw


def objects(n_nodes: int, n_pods: int) -> Iterator[tuple[str, dict[str, Any]]]:
    """The objects in the order a start-up's LISTs bring them, made one at a time (none is kept)
    and each decoded from its own JSON, as a watch delivers it: no two objects share a string."""
    for kind, raw in _made(n_nodes, n_pods):
        yield kind, json.loads(json.dumps(raw))


def _made(n_nodes: int, n_pods: int) -> Iterator[tuple[str, dict[str, Any]]]:
    for i in range(n_nodes):
        yield "Node", node(i)
    yield "ClusterNetworkTopology", topology()
    gangs = n_pods // GANG
    for g in range(gangs):
        yield "PodGroup", podgroup(f"job-{g}")
    slot = 0
    for g in range(gangs):
        pending = g % 10 == 9
        for i in range(GANG):
            node_name = None if pending else f"node-{(slot * 7919) % n_nodes}"  # scattered, as binds land
            slot += 0 if pending else 1
            yield "Pod", pod(g, i, node_name)


def child(n_nodes: int, n_pods: int, trace: bool) -> dict[str, Any]:
    steps: dict[str, int] = {"python": rss()}
    import numpy  # noqa: F401

    steps["numpy"] = rss()
    from koordpy.kernels.warm import warm_up as warm_kernels

    warm_kernels()
    steps["numba+kernels"] = rss()
    import koordpy.api
    import koordpy.settings  # noqa: F401

    steps["pydantic+api"] = rss()
    import kubernetes_asyncio.client  # noqa: F401

    steps["kubernetes"] = rss()
    import kopf  # noqa: F401

    steps["kopf"] = rss()
    from koordpy.controller import main as controller

    controller.warm_up()
    gc.collect()
    steps["controller"] = rss()

    from koordpy.controller.cache import Cache
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState

    if trace:
        import tracemalloc

        tracemalloc.start(4)
    t0 = time.perf_counter()
    cache = Cache()
    for rv, (kind, raw) in enumerate(objects(n_nodes, n_pods), start=10):
        raw["metadata"]["resourceVersion"] = str(rv)
        cache.observe(kind, None, raw)
    assert len(cache.nodes) == n_nodes and len(cache.pods) == n_pods, (len(cache.nodes), len(cache.pods))
    assert not cache.invalid, list(cache.invalid.items())[:1]
    controller.settle_memory()  # as the live loop does once synced
    feed = time.perf_counter() - t0
    held_objects = rss()
    t1 = time.perf_counter()
    state = SchedulerState()
    snap = cache.snapshot(NAMES)
    result = schedule(snap, state, time.time())
    for bind in result.binds:
        cache.assume(bind.pod, bind.node)
    snap = cache.snapshot(NAMES)  # the next cycle's snapshot, with the binds assumed: what stays
    schedule(snap, state, time.time())
    cycle = time.perf_counter() - t1
    pending = sum(1 for g in range(n_pods // GANG) if g % 10 == 9) * GANG
    assert len(result.binds) == pending, (len(result.binds), pending, list(result.waiting.values())[:1])
    gc.collect()
    out: dict[str, Any] = {"nodes": n_nodes, "pods": n_pods, "steps": steps, "objects": held_objects,
                           "cycle": rss(), "feed_s": feed, "cycle_s": cycle, "binds": len(result.binds)}
    if trace:
        import tracemalloc

        snapshot = tracemalloc.take_snapshot()
        traced = tracemalloc.get_traced_memory()[0]
        top = snapshot.statistics("lineno")[:25]
        out["traced"] = traced
        out["top"] = [(str(s.traceback[0]), s.size, s.count) for s in top]
        tracemalloc.stop()
    return out


def malloc_stats() -> dict[str, int]:
    """glibc's own account (``mallinfo2``): bytes in use, bytes free but kept, and bytes in
    mmapped blocks; {} where there is no glibc."""
    import ctypes
    import ctypes.util

    class MallInfo2(ctypes.Structure):
        _fields_ = [(f, ctypes.c_size_t) for f in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                   "fsmblks", "uordblks", "fordblks", "keepcost")]
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return {}
    fn.restype = MallInfo2
    m = fn()
    return {"used": m.uordblks + m.hblkhd, "free": m.fordblks, "mmapped": m.hblkhd}


def mappings() -> dict[str, int]:
    """RSS by kind of mapping (``/proc/self/smaps``): malloc's main heap, its threads' arenas, other
    anonymous memory (pymalloc's arenas, malloc's large blocks, numba's code), files (shared
    libraries), and of the anonymous memory, what is in transparent huge pages."""
    out = {"heap": 0, "arenas": 0, "anon": 0, "files": 0, "huge": 0}
    cat = "anon"
    with open("/proc/self/smaps") as f:
        for line in f:
            if line[0] in "0123456789abcdef" and "-" in line.split(" ", 1)[0]:
                parts = line.split()
                name = parts[5] if len(parts) > 5 else ""
                start = int(parts[0].split("-")[0], 16)
                # A thread's malloc arena grows in heaps of 64 MiB, each aligned on its size.
                arena = not name and start % (64 * MiB) == 0
                cat = ("heap" if name == "[heap]" else "arenas" if arena
                       else "anon" if not name or name.startswith("[") else "files")
            elif line.startswith("Rss:"):
                out[cat] += int(line.split()[1]) * 1024
            elif line.startswith("AnonHugePages:"):  # transparent huge pages (numpy asks for them)
                out["huge"] += int(line.split()[1]) * 1024
    return out


def peak() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def watch_line(type_: str, raw: dict[str, Any]) -> bytes:
    return json.dumps({"type": type_, "object": raw}).encode()


def fake_api(port_file: str) -> None:
    """An API server that accepts every write (``--live-like --writer``): 201 with the body sent
    back, a name given to what has none (an Event), so the writer's path runs as against a cluster."""
    import asyncio

    from aiohttp import web

    count = [0]

    async def accept(request: web.Request) -> web.Response:
        body = await request.read()
        try:
            obj = json.loads(body) if body else {}
        except ValueError:
            obj = {}
        meta = obj.setdefault("metadata", {}) if isinstance(obj, dict) else {}
        count[0] += 1
        if isinstance(meta, dict):
            meta.setdefault("name", f"fake-{count[0]}")
            meta["resourceVersion"] = str(count[0])
        return web.json_response(obj, status=201 if request.method == "POST" else 200)

    async def serve() -> None:
        app = web.Application(client_max_size=64 * MiB)
        app.router.add_route("*", "/{tail:.*}", accept)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        with open(port_file, "w") as f:
            f.write(str(port))
        await asyncio.Event().wait()

    asyncio.run(serve())


def live_like(n_nodes: int, gangs: int, parked: int, trace: bool, remedy: str, writer: bool) -> dict[str, Any]:
    """The live benchmark's process without the cluster: objects arrive as JSON bytes decoded the way
    ``podwatch.watch_kind`` and ``client.list_pages`` decode them (one line per watch event, pages of
    500 listed objects), each cycle's core runs in a worker thread (``asyncio.to_thread``, as the loop
    runs it) while the snapshot is taken on the event loop's thread, binds are assumed and then come
    back on the watch (bound, then running), and the rounds are the live benchmark's: ``gangs`` x 20
    pods bound, then deleted (a deletionTimestamp, then DELETED), then ``parked`` x 20 pods that never
    fit and ``gangs`` x 20 more bound. RSS, its peak and glibc's account are read after each stage.
    ``writer``: the cycles are the live loop's own (``SchedulerLoop.cycle``), whose writes (binds,
    Events, conditions) go through ``ApiWriter`` and kubernetes_asyncio to a fake API server in
    another process that accepts them all, and the log is the live benchmark's (JSON, debug level)."""
    import asyncio
    import tempfile

    steps: dict[str, Any] = {"python": rss()}
    from koordpy.controller import main as controller
    from koordpy.controller.memory import limit_arenas, trim_memory

    if remedy in ("arena", "both"):
        limit_arenas()
    controller.warm_up()
    gc.collect()
    from koordpy.controller.cache import Cache
    from koordpy.core.cycle import schedule
    from koordpy.core.state import SchedulerState

    stages: list[dict[str, Any]] = []
    rv = [10]

    tables: dict[str, Any] = {}
    spent = [0.0]  # seconds in cycles (the snapshot, the core, the binds' watch events)

    def read(name: str) -> None:
        gc.collect()
        row: dict[str, Any] = {"stage": name}
        # Per-object tables that could outlive their objects (deleted pods and gangs): their sizes.
        row["held"] = {f"{owner}.{attr}": len(getattr(obj, attr)) for owner, obj in tables.items()
                       for attr in sorted(vars(obj)) if isinstance(getattr(obj, attr), (dict, set))
                       and len(getattr(obj, attr))}
        if remedy in ("trim", "both"):
            before = rss()
            t0 = time.perf_counter()
            trim_memory()
            row["trim_ms"] = (time.perf_counter() - t0) * 1000
            row["trimmed"] = before - rss()
        row.update({"rss": rss(), "peak": peak(), **malloc_stats(), **mappings(), "cycles_s": spent[0]})
        if trace:
            import tracemalloc

            row["traced"] = tracemalloc.get_traced_memory()[0]
        stages.append(row)

    def stamp(raw: dict[str, Any]) -> dict[str, Any]:
        rv[0] += 1
        raw["metadata"]["resourceVersion"] = str(rv[0])
        return raw

    async def run() -> None:
        read("baseline")
        if trace:
            import tracemalloc

            tracemalloc.start(4)
        cache = Cache()
        state = SchedulerState()
        sched = None
        server = None
        if writer:
            from kubernetes_asyncio.client import ApiClient, Configuration

            from koordpy.controller.loop import SchedulerLoop
            from koordpy.controller.metrics import Metrics
            from koordpy.controller.writer import ApiWriter

            port_file = os.path.join(tempfile.mkdtemp(), "port")
            server = subprocess.Popen([sys.executable, "-m", "benchmarks.bench_memory", "--fake-api", port_file])
            port = ""
            deadline = time.monotonic() + 60
            while not port:  # the fake server writes its port once it listens; never waited on forever
                if server.poll() is not None:
                    raise SystemExit(f"--writer: the fake API server exited ({server.returncode}) before it listened")
                if time.monotonic() > deadline:
                    server.kill()
                    raise SystemExit(f"--writer: the fake API server wrote no port to {port_file} within 60 s")
                await asyncio.sleep(0.1)
                if os.path.exists(port_file):
                    with open(port_file) as f:
                        port = f.read()
            cfg = Configuration(host=f"http://127.0.0.1:{port}")
            cfg.connection_pool_maxsize = 200
            metrics = Metrics()
            sched = SchedulerLoop(cache, ApiWriter(ApiClient(cfg), metrics=metrics), NAMES, metrics=metrics)
            sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (the live benchmark's log, to nowhere)
            controller.configure_logging("DEBUG", "json")
        tables.update(cache=cache, state=state)
        if sched is not None:
            tables.update(loop=sched, writer=sched.writer, reports=sched.writer.reports, state=sched.state)
        nodes = [node(i) for i in range(n_nodes)]
        for start in range(0, n_nodes, 500):  # the LIST, a page at a time
            body = json.dumps({"metadata": {"resourceVersion": "5"},
                               "items": [stamp(n) for n in nodes[start:start + 500]]}).encode()
            cache.observe_listed("Node", json.loads(body)["items"])
        del nodes
        cache.observe_listed("ClusterNetworkTopology", [json.loads(json.dumps(stamp(topology())))])

        def watch(kind: str, type_: str, raw: dict[str, Any]) -> None:
            event = json.loads(watch_line(type_, stamp(raw)))
            cache.observe(kind, event["type"], event["object"])

        async def writes() -> None:
            if sched is not None:
                sched.writer.flush(sched._pending_info, sched._status_now)
                while sched.writer._tasks:
                    await asyncio.gather(*list(sched.writer._tasks), return_exceptions=True)

        async def cycle() -> int:
            t0 = time.perf_counter()
            try:
                return await _cycle()
            finally:
                spent[0] += time.perf_counter() - t0

        async def _cycle() -> int:
            if sched is not None:
                await sched.cycle()
                await writes()
                binds = [(key, held[0]) for key, held in cache.assumed.items()]
            else:
                snap = cache.snapshot(NAMES)
                result = await asyncio.to_thread(schedule, snap, state, time.time())
                binds = [(bind.pod, bind.node) for bind in result.binds]
                for key, node_name in binds:
                    cache.assume(key, node_name, writing=True)
                    cache.bind_written(key)
            for key, node_name in binds:  # back on the watch: bound, then running
                prefix, g, i = key.split("/", 1)[1].rsplit("-", 2)
                running = made(prefix, int(g), int(i), node_name)
                watch("Pod", "MODIFIED", {**running, "status": {"phase": "Pending", "qosClass": "Burstable"}})
                watch("Pod", "MODIFIED", running)
            return len(binds)

        def made(prefix: str, g: int, i: int, node_name: str | None = None, cpu: str | None = None) -> dict[str, Any]:
            p = pod(g, i, node_name)
            group = f"{prefix}-{g}"
            p["metadata"]["name"] = f"{group}-{i}"
            p["metadata"]["uid"] = f"{prefix}-{g:06x}-{i:04x}"
            p["metadata"]["labels"] = {"pod-group.scheduling.sigs.k8s.io": group, "app": group, "job-name": group}
            if cpu is not None:
                p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
            return p

        def gang_pods(prefix: str, g: int, cpu: str | None = None) -> list[dict[str, Any]]:
            return [made(prefix, g, i, None, cpu) for i in range(GANG)]

        async def round_(prefix: str, first: int, count: int, cpu: str | None = None) -> int:
            bound = 0
            for g in range(first, first + count):
                watch("PodGroup", "ADDED", podgroup(f"{prefix}-{g}"))
                for p in gang_pods(prefix, g, cpu):
                    watch("Pod", "ADDED", p)
                if (g - first) % PER_CYCLE == PER_CYCLE - 1:  # cycles run as bursts land between them
                    bound += await cycle()
            bound += await cycle()
            return bound

        b1 = await round_("r1", 0, gangs)
        read(f"round 1: {b1:,} bound")
        for g in range(gangs):  # the benchmark deletes round 1's pods
            for i in range(GANG):
                held = cache.pods.get(f"bench/r1-{g}-{i}")
                p = made("r1", g, i, held.node_name if held else None)
                p["metadata"]["deletionTimestamp"] = "2025-01-01T00:01:00Z"
                p["metadata"]["deletionGracePeriodSeconds"] = 0
                watch("Pod", "MODIFIED", p)
                watch("Pod", "DELETED", dict(p))
            watch("PodGroup", "DELETED", podgroup(f"r1-{g}"))
            if g % PER_CYCLE == PER_CYCLE - 1:
                await cycle()
        await cycle()
        read("round 1 deleted")
        await round_("park", 0, parked, cpu="200")
        if sched is not None:  # their conditions are written once they settle
            await asyncio.sleep(sched.writer.settle + 0.2)
            await writes()
        read(f"{parked * GANG:,} parked")
        b2 = await round_("r2", 0, gangs)
        read(f"round 2: {b2:,} bound")
        if trace:
            import tracemalloc

            snapshot = tracemalloc.take_snapshot()
            steps["top"] = [(str(s.traceback[0]), s.size, s.count) for s in snapshot.statistics("lineno")[:25]]
            tracemalloc.stop()
        steps["pods"] = len(cache.pods)
        if server is not None:
            server.kill()

    asyncio.run(run())
    steps["stages"] = stages
    return steps


def live_main(args: argparse.Namespace) -> None:
    if args.child:
        print(json.dumps(live_like(args.nodes, args.gangs, args.parked, args.trace, args.child, args.writer)))
        return
    for remedy in args.remedy.split(","):
        cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--live-like", "--child", remedy,
               "--nodes", str(args.nodes), "--gangs", str(args.gangs), "--parked", str(args.parked)]
        if args.trace:
            cmd.append("--trace")
        if args.writer:
            cmd.append("--writer")
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False,
                              env={**os.environ, "PYTHONHASHSEED": "0"})
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"live-like{' with the writer' if args.writer else ''}, remedy {remedy}: {args.nodes:,} nodes, "
              f"{args.gangs * GANG:,} pods bound and deleted, {args.parked * GANG:,} parked, "
              f"{args.gangs * GANG:,} bound ({time.perf_counter() - t0:.0f} s)")
        for row in r["stages"]:
            extra = "".join(f", {k} {mib(row[k])}" for k in ("heap", "arenas", "anon", "files", "huge", "used", "free",
                                                              "traced") if k in row)
            extra += f", cycles {row['cycles_s']:.1f} s"
            if "trim_ms" in row:
                extra += f", malloc_trim gave back {mib(row['trimmed'])} MiB in {row['trim_ms']:.1f} ms"
            print(f"  {row['stage']:<24} RSS {mib(row['rss']):>4} MiB, peak {mib(row['peak']):>4}{extra}", flush=True)
            if args.tables:
                print(f"    tables: {row['held']}")
        for where, size, count in r.get("top", [])[:15]:
            print(f"  {size / MiB:7.1f} MiB {count:>9,} blocks  {where}")


def run_child(n_nodes: int, n_pods: int, trace: bool = False) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.bench_memory", "--child", f"{n_nodes}x{n_pods}"]
    if trace:
        cmd.append("--trace")
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "PYTHONHASHSEED": "0"})
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def slope(points: list[tuple[int, int]]) -> float:
    """Least-squares MiB per 1,000 (objects) over (count, bytes) points."""
    xs = [x / 1000 for x, _ in points]
    ys = [y / MiB for _, y in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def mib(n: int) -> str:
    return f"{n / MiB:.0f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true",
                    help="also show where 5,000 x 16,000's (or --only's) memory is held")
    ap.add_argument("--only", help="one size, NODESxPODS (e.g. 5000x16000)")
    ap.add_argument("--live-like", action="store_true",
                    help="emulate the live benchmark's process instead (rounds, churn, a worker thread)")
    ap.add_argument("--nodes", type=int, default=5_000, help="--live-like: nodes")
    ap.add_argument("--gangs", type=int, default=500, help="--live-like: gangs of 20 bound in each round")
    ap.add_argument("--parked", type=int, default=300, help="--live-like: gangs of 20 parked in round 2")
    ap.add_argument("--remedy", default="none", help="--live-like: none, arena, trim, both, or a list (a,b)")
    ap.add_argument("--writer", action="store_true",
                    help="--live-like: the live loop's cycles and writes, to a fake API server")
    ap.add_argument("--fake-api", help=argparse.SUPPRESS)
    ap.add_argument("--tables", action="store_true", help="--live-like: the sizes of per-object tables")
    args = ap.parse_args()
    if args.fake_api:
        fake_api(args.fake_api)
        return
    if args.live_like:
        live_main(args)
        return
    if args.child:
        n, m = (int(x) for x in args.child.split("x"))
        print(json.dumps(child(n, m, args.trace)))
        return
    sizes = [(5_000, p) for p in POD_SIZES] + [(n, 16_000) for n in NODE_SIZES if n != 5_000]
    if args.only:
        n, m = (int(x) for x in args.only.split("x"))
        sizes = [(n, m)]
    runs: dict[tuple[int, int], dict[str, Any]] = {}
    for n, m in sizes:
        r = runs[(n, m)] = run_child(n, m)
        if len(runs) == 1:
            steps = r["steps"]
            before = 0
            parts = []
            for name in IMPORT_STEPS:
                parts.append(f"{name} +{mib(steps[name] - before)}")
                before = steps[name]
            print(f"baseline (before any object): {mib(steps['controller'])} MiB = {', '.join(parts)}", flush=True)
        print(f"{n:>6,} nodes {m:>6,} pods: baseline {mib(r['steps']['controller'])} MiB, objects held "
              f"{mib(r['objects'])} MiB, after a cycle {mib(r['cycle'])} MiB "
              f"(feed {r['feed_s']:.1f} s, two cycles {r['cycle_s']:.1f} s, {r['binds']} binds)", flush=True)
    if not args.only:
        per_pod = slope([(m, runs[(5_000, m)]["cycle"]) for m in POD_SIZES])
        per_node = slope([(n, runs[(n, 16_000)]["cycle"]) for n in NODE_SIZES])
        print(f"slope: {per_pod:.1f} MiB per 1,000 pods (at 5,000 nodes), "
              f"{per_node:.1f} MiB per 1,000 nodes (at 16,000 pods)", flush=True)
    if args.trace:
        n, m = sizes[0] if args.only else (5_000, 16_000)
        t = run_child(n, m, trace=True)
        print(f"tracemalloc at {n:,} x {m:,}: {mib(t['traced'])} MiB traced after the cycle; top lines:")
        for where, size, count in t["top"]:
            print(f"  {size / MiB:7.1f} MiB {count:>9,} blocks  {where}")


if __name__ == "__main__":
    main()
