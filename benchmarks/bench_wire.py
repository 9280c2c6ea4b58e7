"""What one hot write costs the scheduler's process, by the path it takes (issue 21, goal 1); prints
figures, asserts nothing about time.

    .venv/bin/python -m benchmarks.bench_wire [--writes 3000] [--concurrency 32] [--rounds 2]

On the local control plane (``KOORDPY_TEST_CONTROLPLANE=DIR`` reuses one), each path creates
``--writes`` Events (the body of a pod's ``Scheduled`` Event) in namespace bench-wire, ``--concurrency``
at a time, after 200 to open its connections, and reads each response as the writer does (the
created Event's name): through ``transport.DirectCore`` on the client's aiohttp session (the path
before ``controller/wire.py``), and on the client's own ``Wire``; each under asyncio's event loop
and under uvloop's (``controller.main.loop_factory``). Each path runs in a fresh process, one after
the other, ``--rounds`` times in turn; the figure is CPU (utime + stime of that process, from
``time.process_time``) per write, and writes per second. The API server runs on the same cores, so
writes per second say little; CPU per write is the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NS = "bench-wire"
PATHS = [("aiohttp", "asyncio"), ("wire", "asyncio"), ("aiohttp", "uvloop"), ("wire", "uvloop")]
DEADLINE = 600.0  # seconds one path's process may take, its writes and its warm-up included


def event(i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"p{i}.", "namespace": NS},
            "involvedObject": {"kind": "Pod", "name": f"p{i}", "namespace": NS, "apiVersion": "v1", "uid": "u"},
            "reason": "Scheduled", "message": f"Successfully assigned {NS}/p{i} to node-{i}", "type": "Normal",
            "source": {"component": "koordpy"}, "reportingComponent": "koordpy", "reportingInstance": "bench",
            "firstTimestamp": "2026-11-26T00:00:00Z", "lastTimestamp": "2026-11-26T00:00:00Z", "count": 1}


async def writes(kubeconfig: str, path: str, count: int, concurrency: int) -> dict[str, float]:
    """One path's figures, in this process (``--one``)."""
    from koordpy.controller.client import api_client
    from koordpy.controller.transport import DirectCore, raise_for_status

    api = await api_client(kubeconfig)
    if path == "aiohttp":
        if api.wire is not None:
            await api.wire.close()
        api.wire = None
    elif api.wire is None:
        raise SystemExit("the client has no Wire (a proxy in the environment?): nothing to measure")
    core = DirectCore(api)
    slots = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with slots:
            response = await raise_for_status(await core.create_namespaced_event(NS, event(i), _preload_content=False))
            if not (response.json() or {}).get("metadata", {}).get("name"):
                raise SystemExit(f"an Event came back without a name: {response.body[:200]!r}")

    try:
        await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(200))), DEADLINE / 4)  # connections open
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(count))), DEADLINE / 2)
        took, used = time.perf_counter() - started, time.process_time() - cpu
    finally:
        await api.close()
    return {"us_cpu_per_write": 1e6 * used / count, "writes_per_s": count / took}


def one(args: argparse.Namespace) -> None:
    loop = None
    if args.loop == "uvloop":
        from koordpy.controller.main import loop_factory

        loop = loop_factory()
        if loop is None:
            raise SystemExit("uvloop is not installed")
    with asyncio.Runner(loop_factory=loop) as runner:
        print(json.dumps(runner.run(writes(args.kubeconfig, args.path, args.writes, args.concurrency))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--writes", type=int, default=3000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--path", choices=("aiohttp", "wire"), help=argparse.SUPPRESS)
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), help=argparse.SUPPRESS)
    ap.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args)
        return
    reuse = os.environ.get("KOORDPY_TEST_CONTROLPLANE")
    state = Path(reuse or tempfile.mkdtemp(prefix="koordpy-bench-wire-"))
    try:
        subprocess.run([str(ROOT / "e2e/controlplane/up.sh"), str(state)], check=True, timeout=1800,
                       stdout=subprocess.DEVNULL)
        env = dict(line.split("=", 1) for line in (state / "env").read_text().splitlines() if "=" in line)
        kubectl = [env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"]]
        subprocess.run([*kubectl, "create", "namespace", NS], check=False, timeout=60, capture_output=True)
        figures: dict[str, list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for path, loop in PATHS:
                run = subprocess.run([sys.executable, "-m", "benchmarks.bench_wire", "--one", "--path", path,
                                      "--loop", loop, "--kubeconfig", env["KUBECONFIG"], "--writes", str(args.writes),
                                      "--concurrency", str(args.concurrency)],
                                     cwd=ROOT, capture_output=True, text=True, timeout=DEADLINE)
                if run.returncode != 0:
                    raise SystemExit(f"{path} on {loop}: exit {run.returncode}: {run.stderr.strip()[-2000:]}")
                fig = json.loads(run.stdout.strip().splitlines()[-1])
                figures.setdefault(f"{path} on {loop}", []).append(fig)
                print(f"{path:8s} on {loop:8s}: {fig['us_cpu_per_write']:6.0f} us CPU a write, "
                      f"{fig['writes_per_s']:6.0f} writes/s", flush=True)
            subprocess.run([*kubectl, "delete", "events", "--all", "-n", NS, "--wait=false"], check=False,
                           timeout=300, capture_output=True)
        print("\npath                 us CPU a write (best of rounds)")
        for name, figs in figures.items():
            print(f"{name:20s} {min(f['us_cpu_per_write'] for f in figs):6.0f}")
    finally:
        if not reuse:
            subprocess.run([str(ROOT / "e2e/controlplane/down.sh"), str(state)], check=False, timeout=120)


if __name__ == "__main__":
    main()
