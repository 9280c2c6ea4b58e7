"""How far ``Scheduled`` Events trail binds, and what a SIGTERM'd leader leaves unwritten (issue 17, item 15).

    .venv/bin/python -m benchmarks.bench_events [--nodes 550] [--size 2000] [--json PATH]

On the local control plane (``KOORDPY_TEST_CONTROLPLANE=DIR`` reuses one), in namespace bench-live
(emptied first), with KWOK nodes of 8 CPUs as bench_live makes them:

1. lag: one ``koordpy run`` (leader election on) places a gang of ``--size`` one-CPU pods (one
   PodGroup). A watch on pods and one on Events, both in this process, note when each pod is seen
   bound and when its ``Scheduled`` Event is seen; the lag is the difference (p50, p99, max).
2. leader stop: two replicas; the leader gets SIGTERM as soon as it logs the cycle that places a
   second gang of ``--size`` pods (its binds in flight, its Events owed); the standby takes over.
   Counted once everything has settled: pods bound, and pods bound without a ``Scheduled`` Event.

Every wait has a deadline and ends in an error naming what is missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client import ApiClient, CoreV1Api

from benchmarks.bench_live import ROOT, Bench, stream
from benchmarks.live_harness import CALL_SECONDS, NS, BenchError, Child, call, run, say
from koordpy.controller.main import api_client
from koordpy.controller.podwatch import lines
from koordpy.controller.writer import Conflict


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))] if ordered else float("nan")


class Seen:
    """When this process saw each pod bound and each pod's Scheduled Event (monotonic seconds)."""

    def __init__(self, api: ApiClient) -> None:
        self.core = CoreV1Api(api)
        self.bound: dict[str, float] = {}
        self.event: dict[str, float] = {}
        self.events_per_pod: dict[str, int] = {}
        self._event_uids: set[str] = set()  # a watch started again replays every Event as ADDED
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self._tasks = [asyncio.ensure_future(self._forever(self._pods)),
                       asyncio.ensure_future(self._forever(self._events))]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _forever(self, watch_once: Any) -> None:
        while True:
            try:
                await watch_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken watch: watch again (what was seen is kept)
                say(f"  watch ended: {type(exc).__name__}: {exc}; watching again")
                await asyncio.sleep(0.5)

    async def _pods(self) -> None:
        # Raw JSON lines, not the client's models: building those costs milliseconds an object, and a
        # watch that falls behind would skew the times it notes.
        resp = await self.core.list_namespaced_pod(NS, watch=True, timeout_seconds=300, _preload_content=False,
                                                   _request_timeout=330)
        async for line in lines(resp):
            obj = json.loads(line).get("object") or {}
            name = (obj.get("metadata") or {}).get("name")
            if name and (obj.get("spec") or {}).get("nodeName") and name not in self.bound:
                self.bound[name] = time.monotonic()

    async def _events(self) -> None:
        resp = await self.core.list_namespaced_event(NS, watch=True, timeout_seconds=300, _preload_content=False,
                                                     _request_timeout=330)
        async for line in lines(resp):
            ev = json.loads(line)
            obj = ev.get("object") or {}
            involved = obj.get("involvedObject") or {}
            if ev.get("type") != "ADDED" or obj.get("reason") != "Scheduled" or involved.get("kind") != "Pod":
                continue
            uid = str((obj.get("metadata") or {}).get("uid") or "")
            if uid in self._event_uids:
                continue
            self._event_uids.add(uid)
            name = str(involved.get("name"))
            self.event.setdefault(name, time.monotonic())
            self.events_per_pod[name] = self.events_per_pod.get(name, 0) + 1


async def until(what: str, done: Any, deadline: float, children: list[Child]) -> None:
    start = time.monotonic()
    while not done():
        for c in children:
            c.check()
        if time.monotonic() - start > deadline:
            raise BenchError(f"{what}: not done after {deadline:.0f} s")
        await asyncio.sleep(0.2)


def logged(log: Path, event: str) -> bool:
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        with contextlib.suppress(ValueError):
            if json.loads(line).get("event") == event:
                return True
    return False


async def bench(args: argparse.Namespace, state: Path, fig: dict[str, Any]) -> None:
    run([str(ROOT / "e2e/controlplane/up.sh"), str(state)], timeout=1800)
    env = dict(line.split("=", 1) for line in (state / "env").read_text().splitlines() if "=" in line)
    run([env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"], "apply", "-f", str(ROOT / "crds")], timeout=120)
    api = await api_client(env["KUBECONFIG"])
    b = Bench(api, args)
    seen = Seen(api)
    try:
        with contextlib.suppress(Conflict):
            await call("create namespace", lambda: b.core.create_namespace(
                {"metadata": {"name": NS}}, _preload_content=False, _request_timeout=CALL_SECONDS))
        await b.clean()
        with contextlib.suppress(Exception):
            await b.core.delete_collection_namespaced_event(NS, _request_timeout=CALL_SECONDS)
        await b.nodes()
        await seen.start()
        lease = f"bench-events-{int(time.time())}"

        def replica(name: str) -> Child:
            return b.child(name, [sys.executable, "-m", "koordpy", "run", "--kubeconfig", env["KUBECONFIG"],
                                  "--log-format", "json", "--bind-address", "127.0.0.1:0", "--leader-elect",
                                  "--leader-elect-lease-namespace", NS, "--leader-elect-lease-name", lease],
                           state / f"bench-events-{name}.log")

        # 1. lag
        a = replica("a")
        await until("replica a leading", lambda: logged(a.log, "leading"), args.deadline, [a])
        pods, groups = stream("lag", 1, args.size, "koordpy", cpu=1, grouped=True)
        t0 = time.monotonic()
        await b.create_stream(pods, groups)
        names = [p["metadata"]["name"] for p in pods]
        await until("every pod of the gang bound", lambda: all(n in seen.bound for n in names), args.deadline, [a])
        await until("a Scheduled Event for each pod", lambda: all(n in seen.event for n in names), args.deadline, [a])
        lags = [seen.event[n] - seen.bound[n] for n in names]
        fig["lag"] = {"pods": len(names), "p50": round(pct(lags, 50), 3), "p99": round(pct(lags, 99), 3),
                      "max": round(max(lags), 3), "last_bind_s": round(max(seen.bound[n] for n in names) - t0, 2),
                      "last_event_s": round(max(seen.event[n] for n in names) - t0, 2)}
        say(f"lag of {len(names):,} Scheduled Events behind their binds: {fig['lag']}")

        # 2. leader stop
        standby = replica("b")
        await until("replica b standing by", lambda: logged(standby.log, "standing by"), args.deadline, [a, standby])
        pods, groups = stream("stop", 1, args.size, "koordpy", cpu=1, grouped=True)
        names = [p["metadata"]["name"] for p in pods]
        cycles_before = a.log.read_text(errors="replace").count('"binding"')
        await b.create_stream(pods, groups)
        await until("the leader placing the second gang",
                    lambda: a.log.read_text(errors="replace").count('"binding"') > cycles_before, args.deadline, [a])
        a.proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        await asyncio.to_thread(a.proc.wait, 60)  # the watches go on meanwhile
        fig["stop"] = {"exit": a.proc.returncode, "stop_seconds": round(time.monotonic() - stopped, 2)}
        b.stop(a)
        await until("every pod of the second gang bound", lambda: all(n in seen.bound for n in names),
                    args.deadline, [standby])
        await asyncio.sleep(args.settle)  # whatever either replica still writes
        missing = [n for n in names if n not in seen.event]
        fig["stop"].update({"pods": len(names), "bound": sum(n in seen.bound for n in names),
                            "without_event": len(missing),
                            "with_two_events": sum(seen.events_per_pod.get(n, 0) > 1 for n in names)})
        for line in a.log.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                parsed = json.loads(line)
                if parsed.get("event") == "owed writes flushed on stop":
                    fig["stop"]["flush"] = {k: parsed[k] for k in ("after_grace", "dropped", "seconds")}
        say(f"leader stopped with SIGTERM while binding the second gang: {fig['stop']}")
    finally:
        await seen.stop()
        for c in list(b.children):
            b.stop(c)
        await api.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=550)  # room for both gangs (8 CPUs a node)
    parser.add_argument("--size", type=int, default=2000)
    parser.add_argument("--deadline", type=float, default=600.0)
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    state = Path(os.environ.get("KOORDPY_TEST_CONTROLPLANE") or tempfile.mkdtemp(prefix="koordpy-bench-events-"))
    fig: dict[str, Any] = {"nodes": args.nodes, "size": args.size}
    try:
        asyncio.run(bench(args, state, fig))
    finally:
        print(json.dumps(fig, indent=1))
        if args.json:
            args.json.write_text(json.dumps(fig, indent=1))


if __name__ == "__main__":
    main()
