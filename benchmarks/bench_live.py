"""Live throughput on the local control plane; prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_live [--nodes 1000] [--gangs 100] [--size 10]

Starts (or reuses, with KOORDPY_TEST_CONTROLPLANE) etcd + kube-apiserver + kwok, creates
KWOK nodes with spine/block labels, then runs three rounds of the same pod stream, each
created as fast as the API server takes it (64 requests in flight):

1. the raw ceiling: a tight loop that binds each pod directly the moment it appears;
2. koordpy: ``koordpy run`` scheduling the pods as gangs (one PodGroup per gang,
   PreferGather on blocks);
3. upstream kube-scheduler (default profile, client QPS lifted) scheduling the same
   number of plain pods.

Each round is timed from the first pod created to the last binding seen on a watch.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api, CustomObjectsApi

from koordpy.controller.main import api_client
from koordpy.controller.podwatch import lines
from koordpy.controller.writer import with_retries

ROOT = Path(__file__).resolve().parent.parent
CONCURRENCY = 64
ROUND_DEADLINE = 600.0  # seconds a round may take before it ends saying what is missing
NS = "default"
TOPOLOGY = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
            "metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
                {"topologyLayer": "SpineLayer", "labelKey": ["network.topology.nvidia.com/spine"]},
                {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer",
                 "labelKey": ["network.topology.nvidia.com/block"]},
                {"topologyLayer": "NodeTopologyLayer", "parentTopologyLayer": "BlockLayer"}]}}


def read_env(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


async def gather_limited(coros: list[Any], limit: int = CONCURRENCY) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def one(c: Any) -> Any:
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


class BindWatch:
    """Records when each pod is first seen bound, from a raw pod watch."""

    def __init__(self, api: ApiClient, expected: int, bind_to: list[str] | None = None) -> None:
        self.api = api
        self.expected = expected
        self.bound: dict[str, float] = {}
        self.bind_to = bind_to  # the ceiling round binds what it sees
        self.done = asyncio.Event()
        self._next = 0
        self._binds: set[asyncio.Task[Any]] = set()
        self._sem = asyncio.Semaphore(CONCURRENCY)

    async def run(self) -> None:
        """Watches until every expected pod was seen bound. A watch the API server ends (or that
        breaks) is opened again; its first events list the pods as they are, so nothing is lost."""
        core = CoreV1Api(self.api)
        while not self.done.is_set():
            try:
                resp = await core.list_namespaced_pod(NS, watch=True, _preload_content=False, timeout_seconds=600)
                try:
                    async for line in lines(resp):
                        self._seen(core, json.loads(line))
                        if self.done.is_set():
                            return
                finally:
                    resp.release()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                print(f"  (bench watch ended: {exc!r}; watching again)", flush=True)
                await asyncio.sleep(0.2)

    def _seen(self, core: CoreV1Api, event: dict[str, Any]) -> None:
        pod = event.get("object") or {}
        name = (pod.get("metadata") or {}).get("name")
        if event.get("type") not in ("ADDED", "MODIFIED") or not name:
            return
        if (pod.get("spec") or {}).get("nodeName"):
            if name not in self.bound:
                self.bound[name] = time.perf_counter()
                if len(self.bound) >= self.expected:
                    self.done.set()
        elif self.bind_to is not None and event["type"] == "ADDED":
            node = self.bind_to[self._next % len(self.bind_to)]
            self._next += 1
            task = asyncio.ensure_future(self._bind(core, name, node))
            self._binds.add(task)
            task.add_done_callback(self._binds.discard)

    async def missing(self, names: list[str]) -> str:
        """What the watch has not seen bound, and what a LIST says of those pods, for the message
        a round that misses its deadline ends with."""
        resp = await CoreV1Api(self.api).list_namespaced_pod(NS, _preload_content=False)
        try:
            items = {p["metadata"]["name"]: p for p in (await resp.json()).get("items") or []}
        finally:
            resp.release()
        gone = [n for n in names if n not in self.bound]
        bound_per_list = sum(1 for n in gone if (items.get(n, {}).get("spec") or {}).get("nodeName"))
        return (f"{len(gone)} of {len(names)} pods never seen bound on the watch (first: {', '.join(gone[:5])}); "
                f"a LIST shows {bound_per_list} of them bound and {sum(1 for n in gone if n not in items)} absent")


    async def _bind(self, core: CoreV1Api, name: str, node: str) -> None:
        # As many binds in flight as koordpy allows itself, retried the same way.
        async with self._sem:
            await with_retries(f"bind {name}", lambda: core.create_namespaced_pod_binding(
                name, NS, {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                           "target": {"apiVersion": "v1", "kind": "Node", "name": node}},
                _preload_content=False))


def node_body(i: int, per_block: int = 10, blocks_per_spine: int = 10) -> dict[str, Any]:
    b = i // per_block
    alloc = {"cpu": "8", "memory": "64Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": f"bench-node-{i}", "annotations": {"kwok.x-k8s.io/node": "fake"},
        "labels": {"network.topology.nvidia.com/block": f"block-{b}",
                   "network.topology.nvidia.com/spine": f"spine-{b // blocks_per_spine}"}},
        "status": {"allocatable": alloc, "capacity": alloc}}


def pod_body(name: str, scheduler: str, gang: str | None, index: int) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if gang:
        meta["labels"] = {"pod-group.scheduling.sigs.k8s.io": gang}
        meta["annotations"] = {"gang.scheduling.koordinator.sh/network-topology-index": str(index)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "schedulerName": scheduler, "containers": [{"name": "main", "image": "busybox",
                                                    "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}]}}


async def delete_pods(api: ApiClient) -> None:
    core = CoreV1Api(api)
    await core.delete_collection_namespaced_pod(NS, grace_period_seconds=0, _preload_content=False)
    while True:
        resp = await core.list_namespaced_pod(NS, _preload_content=False)
        items = (await resp.json())["items"]
        resp.release()
        if not items:
            return
        await asyncio.sleep(0.5)


async def round_(api: ApiClient, label: str, scheduler: str, gangs: int, size: int,
                 bind_to: list[str] | None = None, with_groups: bool = False) -> dict[str, float]:
    core = CoreV1Api(api)
    total = gangs * size
    if with_groups:
        custom = CustomObjectsApi(api)
        gather = json.dumps({"gatherStrategy": [{"layer": "BlockLayer", "strategy": "PreferGather"},
                                                {"layer": "SpineLayer", "strategy": "PreferGather"}]})
        await gather_limited([custom.create_namespaced_custom_object(
            "scheduling.sigs.k8s.io", "v1alpha1", NS, "podgroups",
            {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": f"gang-{g}", "annotations": {
                 "gang.scheduling.koordinator.sh/network-topology-spec": gather}},
             "spec": {"minMember": size}}, _preload_content=False) for g in range(gangs)])
    watch = BindWatch(api, total, bind_to)
    watcher = asyncio.ensure_future(watch.run())
    await asyncio.sleep(0.5)
    created: dict[str, float] = {}

    async def create(g: int, i: int) -> None:
        name = f"gang-{g}-{i}"
        await core.create_namespaced_pod(NS, pod_body(name, scheduler, f"gang-{g}" if with_groups else None, i),
                                         _preload_content=False)
        created[name] = time.perf_counter()

    start = time.perf_counter()
    await gather_limited([create(g, i) for g in range(gangs) for i in range(size)])
    created_all = time.perf_counter()
    try:
        await asyncio.wait_for(watch.done.wait(), timeout=ROUND_DEADLINE)
    except TimeoutError:
        names = [f"gang-{g}-{i}" for g in range(gangs) for i in range(size)]
        raise SystemExit(f"  {label}: not done after {ROUND_DEADLINE:.0f} s: {await watch.missing(names)}") from None
    end = max(watch.bound.values())
    watcher.cancel()
    completion = []
    for g in range(gangs):
        names = [f"gang-{g}-{i}" for i in range(size)]
        completion.append(max(watch.bound[n] for n in names) - max(created[n] for n in names))
    completion.sort()
    out = {"pods": float(total), "create_s": created_all - start, "total_s": end - start,
           "pods_per_s": total / (end - start),
           "gang_p50_ms": statistics.median(completion) * 1000,
           "gang_p99_ms": completion[min(len(completion) - 1, int(len(completion) * 0.99))] * 1000}
    print(f"  {label:15s} {total} pods in {out['total_s']:.2f}s = {out['pods_per_s']:.0f} pods/s "
          f"(creating took {out['create_s']:.2f}s); completion after the last member p50 "
          f"{out['gang_p50_ms']:.0f} ms, p99 {out['gang_p99_ms']:.0f} ms", flush=True)
    await delete_pods(api)
    if with_groups:
        await CustomObjectsApi(api).delete_collection_namespaced_custom_object(
            "scheduling.sigs.k8s.io", "v1alpha1", NS, "podgroups", _preload_content=False)
    return out


def kube_scheduler(env: dict[str, str], workdir: Path) -> subprocess.Popen[bytes]:
    cfg = workdir / "kube-scheduler.yaml"
    cfg.write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        f"clientConnection:\n  kubeconfig: {env['KUBECONFIG']}\n  qps: 5000\n  burst: 5000\n"
        "leaderElection:\n  leaderElect: false\n")
    log = open(workdir / "kube-scheduler.log", "wb")  # noqa: SIM115 - the child owns it
    return subprocess.Popen([env["KUBE_SCHEDULER"], "--config", str(cfg), "--secure-port", "0"],
                            stdout=log, stderr=subprocess.STDOUT)


async def main_async(args: argparse.Namespace) -> None:
    reuse = os.environ.get("KOORDPY_TEST_CONTROLPLANE")
    state = Path(reuse or tempfile.mkdtemp(prefix="koordpy-bench-"))
    subprocess.run([str(ROOT / "e2e/controlplane/up.sh"), str(state)], check=True, stdout=subprocess.DEVNULL)
    env = read_env(state / "env")
    subprocess.run([env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"], "apply", "-f", str(ROOT / "crds")],
                   check=True, stdout=subprocess.DEVNULL)
    api = await api_client(env["KUBECONFIG"])
    core = CoreV1Api(api)
    try:
        await delete_pods(api)
        t0 = time.perf_counter()
        await gather_limited([core.create_node(node_body(i), _preload_content=False) for i in range(args.nodes)])
        print(f"== {args.nodes} KWOK nodes created in {time.perf_counter() - t0:.1f}s; "
              f"{args.gangs} gangs x {args.size} pods of 4 CPUs (2 per node)", flush=True)
        nodes = [f"bench-node-{i}" for i in range(args.nodes)]
        await CustomObjectsApi(api).create_cluster_custom_object(
            "scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies", TOPOLOGY, _preload_content=False)
        results = {"ceiling": await round_(api, "raw ceiling", "nobody", args.gangs, args.size, bind_to=nodes)}
        # KOORDPY_BENCH_WRAP prefixes the scheduler's command line, e.g. with a profiler.
        wrap = os.environ.get("KOORDPY_BENCH_WRAP", "").split()
        with open(state / "bench-koordpy.log", "wb") as out:
            sched = subprocess.Popen([*wrap, sys.executable, "-m", "koordpy", "run", "--kubeconfig",
                                      env["KUBECONFIG"], "--log-level", "INFO", "--bind-address", "127.0.0.1:0"],
                                     cwd=ROOT, stdout=out,
                                     stderr=subprocess.STDOUT)
        await asyncio.sleep(6)  # imports and the initial list
        try:
            results["koordpy"] = await round_(api, "koordpy gangs", "koordpy", args.gangs, args.size,
                                              with_groups=True)
        finally:
            sched.send_signal(signal.SIGINT)
            sched.wait(30)
        if args.skip_kube_scheduler:
            return
        ks = kube_scheduler(env, state)
        await asyncio.sleep(5)
        try:
            results["kube-scheduler"] = await round_(api, "kube-scheduler", "default-scheduler", args.gangs, args.size)
        finally:
            ks.terminate()
            ks.wait(30)
        ratio = results["koordpy"]["pods_per_s"] / results["ceiling"]["pods_per_s"]
        vs = results["koordpy"]["pods_per_s"] / results["kube-scheduler"]["pods_per_s"]
        print(f"== koordpy at {ratio:.0%} of the ceiling; {vs:.2f}x kube-scheduler's plain-pod throughput")
        await gather_limited([core.delete_node(n, _preload_content=False) for n in nodes])
        await CustomObjectsApi(api).delete_cluster_custom_object(
            "scheduling.koordinator.sh", "v1alpha1", "clusternetworktopologies", "default", _preload_content=False)
    finally:
        await api.close()
        if not reuse:
            subprocess.run([str(ROOT / "e2e/controlplane/down.sh"), str(state)], check=False)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--gangs", type=int, default=100)
    ap.add_argument("--size", type=int, default=10)
    ap.add_argument("--skip-kube-scheduler", action="store_true")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
