"""``koordpy simulate`` end to end, as a user runs it; prints figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_simulate [--runs N] [--keep DIR]

Two workloads, written as YAML manifests and run through the CLI in a fresh process
(parsing, every simulated round and the output included):

A. 5,000 nodes (8 GPUs each; datacenter/spine/block labels and a ClusterNetworkTopology)
   and 300 gangs, 6,500 pods: 200 gangs of 8 to 32 whole-node pods that PreferGather in a
   block then a spine, and 100 that cannot be placed (a third): MustGather in one block
   with more pods than a block has nodes.
B. The same 5,000 nodes and 300 NonStrict gangs of 10 pods with distinct waiting times
   (60 s, 61 s, ...): nine members of each fit and are reserved, the tenth asks for a node
   label no node has, so every gang waits and times out at its own time: 300 clock jumps.

Each run is bounded by a deadline; a run that misses it is reported as such.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from benchmarks.bench_placement import GPU, cluster_objects

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "gang.scheduling.koordinator.sh/"
RUN_DEADLINE = 600.0


def gang(name: str, size: int, min_member: int, gpus: str, *, gather: list[dict[str, str]] | None = None,
         annotations: dict[str, str] | None = None, odd_last: bool = False) -> list[Any]:
    ann = dict(annotations or {})
    if gather:
        ann[PREFIX + "network-topology-spec"] = json.dumps({"gatherStrategy": gather})
    objs: list[Any] = [{"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                        "metadata": {"name": name, "namespace": "default", "annotations": ann},
                        "spec": {"minMember": min_member, "scheduleTimeoutSeconds": 600}}]
    for i in range(size):
        spec: dict[str, Any] = {"schedulerName": "koordpy", "containers": [{"name": "main", "image": "trainer",
                                "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: gpus}}}]}
        if odd_last and i == size - 1:
            spec["nodeSelector"] = {"topology/rack": "missing"}
        objs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"{name}-{i}", "namespace": "default", "labels": {"pod-group.scheduling.sigs.k8s.io": name},
            "annotations": {PREFIX + "network-topology-index": str(i)}}, "spec": spec})
    return objs


def workload_a() -> list[Any]:
    prefer = [{"layer": "BlockLayer", "strategy": "PreferGather"}, {"layer": "SpineLayer", "strategy": "PreferGather"}]
    must_block = [{"layer": "BlockLayer", "strategy": "MustGather"}]
    objs: list[Any] = []
    for g in range(200):  # 8..32 pods, 4,000 in all
        size = 8 + (g * 7) % 25
        objs += gang(f"fit-{g}", size, size, "8", gather=prefer)
    for g in range(100):  # 25 pods each, one more than a block has room for once the fits are placed
        objs += gang(f"wide-{g}", 25 + (g % 2), 25 + (g % 2), "8", gather=must_block)
    return objs


def workload_b() -> list[Any]:
    objs: list[Any] = []
    for g in range(300):
        ann = {PREFIX + "mode": "NonStrict", PREFIX + "waiting-time": f"{60 + g}s"}
        objs += gang(f"wait-{g}", 10, 10, "1", annotations=ann, odd_last=True)
    return objs


def run_cli(files: list[Path]) -> tuple[float, dict[str, Any] | None, str]:
    args = [sys.executable, "-m", "koordpy", "simulate", "-o", "json"]
    for f in files:
        args += ["-f", str(f)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, timeout=RUN_DEADLINE, check=False)
    except subprocess.TimeoutExpired:
        return time.perf_counter() - start, None, f"no answer within {RUN_DEADLINE:.0f} s"
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        return elapsed, None, f"exit {proc.returncode}: {proc.stderr.strip()[-500:]}"
    return elapsed, json.loads(proc.stdout), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="write the manifests here instead of a temporary folder")
    args = parser.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="koordpy-bench-sim-"))
    folder.mkdir(parents=True, exist_ok=True)
    cluster = folder / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(cluster_objects(), sort_keys=False))
    for name, objs in (("A", workload_a()), ("B", workload_b())):
        path = folder / f"workload-{name}.yaml"
        path.write_text(yaml.safe_dump_all(objs, sort_keys=False))
        pods = sum(1 for o in objs if o["kind"] == "Pod")
        times = []
        summary = ""
        for _ in range(args.runs):
            elapsed, out, error = run_cli([cluster, path])
            if out is None:
                print(f"workload {name}: run failed after {elapsed:.2f} s: {error}")
                break
            times.append(elapsed)
            summary = (f"{len(out['bound'])} bound, {len(out['pending'])} pending, {out.get('rounds', '?')} rounds, "
                       f"{sum(1 for e in out['events'] if e['reason'] == 'GangTimeout')} gang timeouts")
        if times:
            print(f"workload {name}: 5000 nodes, {pods} pods: best {min(times):.2f} s, "
                  f"all {', '.join(f'{t:.2f}' for t in times)} s ({summary})")


if __name__ == "__main__":
    main()
