"""Plumbing for bench_live that cannot hang: every call has a time limit and retries, every wait
a deadline that ends in an error naming what is missing.

- ``Pods``: one round's pods kept from a LIST and a WATCH that resumes from its last
  resourceVersion when it ends or breaks (a 410 Gone: a new LIST, then a watch from its version);
  a LIST whenever a wait stops progressing is the safety net for anything a watch missed.
- ``create``/``empty``: creation with 64 requests in flight and koordpy's retries; deletion by
  name in passes until nothing is left (never one deletecollection).
- ``Child``: a process (koordpy, kube-scheduler) that dies with the benchmark and is stopped,
  or killed after 10 s.
- readers of the API server's write counters, its audit log, Prometheus text and /proc
  (``cpu_seconds``, ``quiet``: a scheduler's CPU, and waiting until it has nothing left to do).
- ``LiveBench``: one scheduler at a time (``koordpy run`` or kube-scheduler) on nodes the benchmark
  owns, started and stopped per round, and the namespaces it empties between rounds (bench_rules,
  bench_workloads).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

import aiohttp
import structlog
from kubernetes_asyncio.client import ApiClient, CoreV1Api
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from koordpy.controller.podwatch import lines
from koordpy.controller.writer import Conflict, Gone, with_retries

ROOT = Path(__file__).resolve().parent.parent

NS = "bench-live"
CONCURRENCY = 64
ATTEMPTS = 10  # with koordpy's backoff (capped at 5 s) about 30 s: an API server restart fits in
CALL_SECONDS = 30.0  # per attempt; without one aiohttp waits forever, as the old deletecollection did
LIST_SECONDS = 120.0
WATCH_SECONDS = 60  # the server ends the watch then; a silent connection is given up 30 s later
SAFETY_LIST_AFTER = 3.0  # seconds without progress before a LIST looks for what a watch missed
STARTED = time.perf_counter()
START = time.time()  # wall clock, for the audit logs rotated during the run


class BenchError(Exception):
    """A step did not finish; the message says what was missing."""


def run_bench(label: str, bench: Callable[[Path, dict[str, Any]], Coroutine[Any, Any, None]], json_path: str | None,
              root: Path) -> dict[str, Any]:
    """Runs ``bench(state, fig)`` on the control plane ``KOORDPY_TEST_CONTROLPLANE`` names (else on a
    fresh one, stopped afterwards) and returns its figures; a ``BenchError`` writes the figures
    measured before it (and to ``json_path``), says what was missing and exits 1."""
    reuse = os.environ.get("KOORDPY_TEST_CONTROLPLANE")
    state = Path(reuse or tempfile.mkdtemp(prefix=f"koordpy-{label}-"))
    fig: dict[str, Any] = {}
    try:
        asyncio.run(bench(state, fig))
    except BenchError as exc:
        fig["error"] = str(exc)
        if json_path:
            Path(json_path).write_text(json.dumps(fig, indent=2, sort_keys=True) + "\n")
        say(f"{label}: error: {exc}\nthe figures measured before it: {json.dumps(fig, sort_keys=True)}")
        sys.exit(1)
    finally:
        if not reuse:
            subprocess.run([str(root / "e2e/controlplane/down.sh"), str(state)], check=False, timeout=120)
    return fig


def run_and_report(label: str, bench: Callable[[Path, dict[str, Any]], Coroutine[Any, Any, None]],
                   json_path: str | None, root: Path, table: Callable[[dict[str, Any]], str]) -> None:
    """``run_bench`` quietly (koordpy's own log lines above errors only), then the figures' table on
    stdout and every figure in ``json_path``."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.ERROR))
    fig = run_bench(label, bench, json_path, root)
    print("\n" + table(fig))
    if json_path:
        Path(json_path).write_text(json.dumps(fig, indent=2, sort_keys=True) + "\n")


def say(message: str) -> None:
    print(f"[{time.perf_counter() - STARTED:7.1f}s] {message}", flush=True)


def wall(stamp: str) -> float:
    """Seconds since the epoch of an RFC 3339 time as the API server writes it."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


async def limited(coros: Iterable[Awaitable[Any]], limit: int = CONCURRENCY) -> list[Any]:
    sem = asyncio.Semaphore(limit)

    async def one(c: Awaitable[Any]) -> Any:
        async with sem:
            return await c

    return await asyncio.gather(*(one(c) for c in coros))


async def call(what: str, op: Callable[[], Awaitable[Any]]) -> Any:
    """One call with retries (429, 5xx, connection errors, timeouts); the decoded JSON answer.
    A raw (unpreloaded) response never raises on its status, so it is checked here."""
    async def once() -> Any:
        resp = await op()
        try:
            if resp.status >= 300:
                raise ApiException(status=resp.status, reason=f"{resp.reason}: {(await resp.text())[:300]}")
            return await resp.json()
        finally:
            resp.release()

    return await with_retries(what, once, attempts=ATTEMPTS, retried=lambda reason: RETRIES.update([reason]))


RETRIES: Counter[str] = Counter()  # retried calls by reason (status code or unreachable), for the progress lines


@dataclass
class PodState:
    version: int
    node: str
    scheduled: str  # the PodScheduled condition's status: True, False or "" (none yet)
    reason: str
    message: str
    phase: str
    deleting: bool
    scheduled_at: float  # the PodScheduled=True condition's lastTransitionTime (epoch seconds), else 0

    def show(self) -> str:
        cond = f"PodScheduled={self.scheduled or '-'}" + (f" {self.reason} {self.message[:100]!r}" if self.reason
                                                          else "")
        return (f"phase={self.phase or '-'} node={self.node or '-'} {cond}"
                + (" terminating" if self.deleting else ""))


def pod_state(pod: dict[str, Any]) -> PodState:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    cond: dict[str, Any] = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), {})
    at = wall(cond["lastTransitionTime"]) if cond.get("status") == "True" and cond.get("lastTransitionTime") else 0.0
    return PodState(int(meta.get("resourceVersion") or 0), spec.get("nodeName") or "", cond.get("status", ""),
                    cond.get("reason", ""), cond.get("message", ""), status.get("phase", ""),
                    bool(meta.get("deletionTimestamp")), at)


class Pods:
    """The pods of one round (a label selector), from a LIST and a resuming WATCH. ``bound_at``
    is when each was first seen bound (perf_counter). A pod first seen bound on a LIST (its bind
    fell in a gap of the watch) gets the time of its ``PodScheduled=True`` condition instead
    (1 s resolution), and is counted in ``from_list``. ``on_unbound`` is told of each pod seen
    pending: the raw ceiling binds it. ``namespace`` is bench_live's unless told (bench_rules
    measures in its own)."""

    def __init__(self, api: ApiClient, round_: str, on_unbound: Callable[[str], None] | None = None,
                 namespace: str = NS) -> None:
        self.core = CoreV1Api(api)
        self.namespace = namespace
        self.selector = f"bench-round={round_}"
        self.on_unbound = on_unbound
        self.state: dict[str, PodState] = {}
        self.bound_at: dict[str, float] = {}
        self.from_list = 0
        self.breaks = 0  # watches that failed or ended early (not at the server's timeout) and were resumed
        self.relists = 0  # 410 Gone: the version was too old to resume from
        self.safety_lists = 0
        self.version = ""
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        await self.refresh(for_watch=True)
        self._task = asyncio.ensure_future(self._watch())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def _record(self, pod: dict[str, Any], listed: bool) -> None:
        name = (pod.get("metadata") or {}).get("name") or ""
        new = pod_state(pod)
        old = self.state.get(name)
        if old is not None and old.version > new.version:
            return  # a LIST older than what the watch already told
        self.state[name] = new
        if new.node and name not in self.bound_at:
            seen = time.perf_counter()
            if listed and new.scheduled_at:
                seen -= max(0.0, time.time() - new.scheduled_at)
                self.from_list += 1
            self.bound_at[name] = seen
        elif not new.node and not new.deleting and self.on_unbound is not None:
            self.on_unbound(name)

    async def refresh(self, for_watch: bool = False) -> None:
        data = await call(f"LIST pods {self.selector}", lambda: self.core.list_namespaced_pod(
            self.namespace, label_selector=self.selector, _preload_content=False, _request_timeout=LIST_SECONDS))
        names = set()
        for pod in data.get("items") or []:
            self._record(pod, listed=True)
            names.add(pod["metadata"]["name"])
        for gone in set(self.state) - names:
            del self.state[gone]
        if for_watch:  # only the watch's own LIST may move it: it must not skip events still to come
            self.version = (data.get("metadata") or {}).get("resourceVersion") or ""
        else:
            self.safety_lists += 1

    async def _watch(self) -> None:
        delay = 0.5
        while True:
            try:
                if not self.version:
                    self.relists += 1
                    await self.refresh(for_watch=True)
                opened = time.perf_counter()
                resp = await self.core.list_namespaced_pod(
                    self.namespace, label_selector=self.selector, watch=True, resource_version=self.version,
                    allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS, _preload_content=False,
                    _request_timeout=(10, WATCH_SECONDS + 30))
                try:
                    if resp.status == 410:
                        say(f"  (watch {self.selector}: resourceVersion {self.version} is gone (410); listing again)")
                        self.version = ""
                        continue
                    if resp.status != 200:
                        raise ApiException(status=resp.status, reason=str(resp.reason))
                    async for line in lines(resp):
                        event = json.loads(line)
                        obj, kind = event.get("object") or {}, event.get("type")
                        if kind == "ERROR":
                            if obj.get("code") == 410:
                                say(f"  (watch {self.selector}: resourceVersion {self.version} is gone (410); "
                                    "listing again)")
                                self.version = ""
                                break
                            raise ApiException(status=obj.get("code"), reason=obj.get("message"))
                        if kind in ("ADDED", "MODIFIED"):
                            self._record(obj, listed=False)
                        elif kind == "DELETED":
                            self.state.pop(obj["metadata"]["name"], None)
                        self.version = (obj.get("metadata") or {}).get("resourceVersion") or self.version
                        delay = 0.5
                finally:
                    resp.release()
                if self.version and time.perf_counter() - opened < WATCH_SECONDS - 5:
                    self.breaks += 1  # the server went away (a restart ends watches cleanly)
                    say(f"  (watch {self.selector} ended after {time.perf_counter() - opened:.0f} s; resuming from "
                        f"resourceVersion {self.version})")
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.breaks += 1
                say(f"  (watch {self.selector} broke: {exc!r}; resuming from resourceVersion {self.version or '-'} "
                    f"in {delay:.1f} s)")
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

    async def describe(self, missing: list[str]) -> str:
        """What a fresh LIST says of the pods a wait still misses."""
        await self.refresh()
        seen = Counter("absent" if n not in self.state else "bound" if self.state[n].node else
                       f"pending PodScheduled={self.state[n].scheduled or '-'}" for n in missing)
        first = "; ".join(f"{n}: {self.state[n].show() if n in self.state else 'absent'}" for n in missing[:5])
        return (f"{len(missing):,} missing (a LIST now shows {dict(seen)}); first: {first}"
                f" [watch breaks {self.breaks}, relists {self.relists}]")


async def wait_for(what: str, count: Callable[[], int], total: int, missing: Callable[[], list[str]],
                   deadline: float, stall: float, pods: Pods | None = None, children: Iterable[Child] = ()) -> float:
    """Waits until ``count()`` reaches ``total`` and returns the seconds it took. Ends in a BenchError
    naming what is ``missing()`` after ``deadline`` seconds, or ``stall`` seconds without progress,
    or when a child process has died. After SAFETY_LIST_AFTER seconds without progress it LISTs
    ``pods``: what a watch missed is found there."""
    start = last_progress = last_print = last_list = time.perf_counter()
    best, list_every = -1, SAFETY_LIST_AFTER
    while True:
        n, now = count(), time.perf_counter()
        if n >= total:
            return now - start
        if n > best:
            best, last_progress, list_every = n, now, SAFETY_LIST_AFTER
        for child in children:
            child.check()
        if now - last_print >= 10:
            say(f"  {what}: {n:,} of {total:,} after {now - start:.0f} s")
            last_print = now
        if now - start > deadline or now - last_progress > stall:
            why = f"deadline of {deadline:.0f} s" if now - start > deadline else f"no progress for {stall:.0f} s"
            left = missing()
            detail = f"first: {', '.join(left[:5])}"
            if pods is not None:
                try:
                    detail = await pods.describe(left)
                except Exception as exc:
                    detail += f" (a LIST of them failed too: {exc!r})"
            raise BenchError(f"{what}: {n:,} of {total:,} after {now - start:.0f} s ({why}); {detail}; "
                             f"retried calls {dict(RETRIES) or 'none'}")
        if pods is not None and now - last_progress >= SAFETY_LIST_AFTER and now - last_list >= list_every:
            try:
                await pods.refresh()
            except Exception as exc:  # the deadline still ends the wait
                say(f"  (a LIST of {pods.selector} failed: {exc!r})")
            # A long stall is the scheduler's, not a missed event: LISTs of 10,000 pods must not add to the load.
            last_list, list_every = time.perf_counter(), min(list_every * 2, 60.0)
            continue
        await asyncio.sleep(0.1)


async def create(what: str, bodies: list[dict[str, Any]], op: Callable[[dict[str, Any]], Awaitable[Any]]
                 ) -> dict[str, float]:
    """Creates every body (64 in flight, retried); returns when each was created (perf_counter). A 409
    is taken as created: an earlier attempt whose answer was lost made it."""
    created: dict[str, float] = {}
    failed: list[str] = []

    async def one(body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        try:
            await call(f"create {name}", lambda: op(body))
        except Conflict:
            pass
        except Exception as exc:
            failed.append(f"{name}: {exc!r}"[:300])
            return
        created[name] = time.perf_counter()

    await limited(one(b) for b in bodies)
    if failed:
        raise BenchError(f"{len(failed):,} of {len(bodies):,} {what} not created; first: {'; '.join(failed[:3])}")
    return created


async def empty(what: str, list_names: Callable[[], Awaitable[list[str]]],
                delete: Callable[[str], Awaitable[Any]], pass_seconds: float, passes: int = 5) -> int:
    """Deletes by name (64 in flight) until a LIST finds nothing, each pass with a deadline;
    returns how many were deleted."""
    deleted = 0
    for n in range(1, passes + 1):
        names = await list_names()
        if not names:
            return deleted
        say(f"  deleting {len(names):,} {what} (pass {n})")

        async def one(name: str) -> None:
            with contextlib.suppress(Gone):
                await call(f"delete {name}", lambda: delete(name))

        try:
            await asyncio.wait_for(limited(one(name) for name in names), pass_seconds)
        except Exception as exc:  # the next pass lists again and goes on
            say(f"  (deleting {what} ended early: {exc!r})")
        deleted += len(names)
    left = await list_names()
    if left:
        raise BenchError(f"{len(left):,} {what} still there after {passes} passes of deletes; "
                         f"first: {', '.join(left[:5])}")
    return deleted


async def list_names(op: Callable[[], Awaitable[Any]]) -> list[str]:
    data = await call("LIST", op)
    return [item["metadata"]["name"] for item in data.get("items") or []]


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here: the child between fork and exec only calls it


def _die_with_parent() -> None:
    _LIBC.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: a benchmark killed -9 leaves no scheduler behind


class Child:
    """A child process whose output goes to ``log``."""

    def __init__(self, name: str, argv: list[str], log: Path, cwd: Path) -> None:
        self.name, self.log = name, log
        self._out: IO[bytes] = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(argv, stdout=self._out, stderr=subprocess.STDOUT, cwd=cwd,
                                     preexec_fn=_die_with_parent)

    def check(self) -> None:
        if self.proc.poll() is not None:
            lines_ = [line for line in self.log.read_bytes()[-65536:].decode(errors="replace").splitlines()[1:]
                      if '"event": "cycle"' not in line]  # koordpy's debug line a cycle says nothing here
            tail = "\n".join(line[:300] for line in lines_[-12:])
            raise BenchError(f"{self.name} exited with {self.proc.returncode}; the end of {self.log} (cycle lines "
                             f"left out):\n{tail}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                say(f"  {self.name} did not exit in 10 s: killed")
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()

    def memory(self) -> dict[str, float]:
        """VmRSS and VmHWM in MiB."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The samples of one metric in Prometheus text, by their sorted labels."""
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE"}


async def apiserver_metrics(api: ApiClient) -> str:
    resp = await api.call_api("/metrics", "GET", auth_settings=["BearerToken"], _preload_content=False,
                              _request_timeout=LIST_SECONDS)
    try:
        if resp.status != 200:
            raise BenchError(f"GET /metrics of the API server answered {resp.status}")
        text: str = await resp.text()
        return text
    finally:
        resp.release()


async def dropped_watchers(api: ApiClient) -> int:
    """Pod watchers the API server has closed because their client read too slowly (it does so
    without a word: the watch just ends, which is how issue 10's benchmark lost its watch)."""
    found = samples(await apiserver_metrics(api), "apiserver_terminated_watchers_total")
    return int(sum(v for labels, v in found.items() if dict(labels).get("resource") == "pods"))


async def apiserver_writes(api: ApiClient) -> Counter[str]:
    """The API server's own count of write requests so far, by verb and resource[/subresource]."""
    text = await apiserver_metrics(api)
    out: Counter[str] = Counter()
    for labels, value in samples(text, "apiserver_request_total").items():
        d = dict(labels)
        if d.get("verb", "").upper() in WRITE_VERBS:
            sub = d.get("subresource", "")
            out[f"{d['verb']} {d.get('resource', '')}{'/' + sub if sub else ''}"] += int(value)
    return out


@dataclass
class Audited:
    at: float  # requestReceivedTimestamp, seconds since the epoch
    what: str  # verb resource[/subresource]
    code: int


def audited_writes(log: Path, offset: int, user: str) -> list[Audited]:
    """The write requests ``user`` made, from the audit log past byte ``offset`` and from the logs
    the API server rotated it into meanwhile (it rotates at 100 MB: a run writes more than that,
    and a figure read from the current file alone came out empty)."""
    out: list[Audited] = []
    rotated = sorted(p for p in log.parent.glob(f"{log.stem}-*{log.suffix}") if p.stat().st_mtime >= START)
    for path in [*rotated, log]:
        out += _audited(path, offset if path == log and not rotated else 0, user)
    return out


def _audited(log: Path, offset: int, user: str) -> list[Audited]:
    out = []
    with open(log, "rb") as f:
        f.seek(offset)
        for line in f:
            if user.encode() not in line:
                continue
            e = json.loads(line)
            if e.get("stage") != "ResponseComplete" or (e.get("user") or {}).get("username") != user:
                continue
            verb = e.get("verb", "")
            if verb.upper() not in WRITE_VERBS:
                continue
            ref = e.get("objectRef") or {}
            sub = ref.get("subresource")
            out.append(Audited(wall(e["requestReceivedTimestamp"]),
                               f"{verb} {ref.get('resource', '')}{'/' + sub if sub else ''}",
                               int((e.get("responseStatus") or {}).get("code") or 0)))
    return out


def in_window(writes: list[Audited], start: float, end: float) -> Counter[str]:
    return Counter(w.what + ("" if w.code < 300 else f" ({w.code})") for w in writes if start <= w.at < end)


def cycle_seconds(log: Path, start: int, end: int, field: str = "seconds") -> list[float]:
    """The durations of the cycles koordpy logged between two byte offsets of its log (``field``
    "core_cpu": the CPU its core's thread spent on each, where the log line has it)."""
    with open(log, "rb") as f:
        f.seek(start)
        chunk = f.read(max(0, end - start))
    out = []
    for line in chunk.splitlines():
        if b'"cycle"' in line:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("event") == "cycle" and field in event:
                out.append(float(event[field]))
    return out


def size(path: Path) -> int:
    return os.path.getsize(path) if path.exists() else 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def koordpy_ready(port: int, child: Child, deadline: float) -> float:
    start = time.perf_counter()
    async with aiohttp.ClientSession() as s:
        while True:
            child.check()
            try:
                async with s.get(f"http://127.0.0.1:{port}/readyz", timeout=aiohttp.ClientTimeout(total=5)) as r:
                    if r.status == 200:
                        return time.perf_counter() - start
            except (aiohttp.ClientError, TimeoutError):
                pass
            if time.perf_counter() - start > deadline:
                raise BenchError(f"koordpy not ready after {deadline:.0f} s (GET :{port}/readyz); see {child.log}")
            await asyncio.sleep(0.5)


def run(argv: list[str], timeout: float) -> str:
    done = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        raise BenchError(f"{' '.join(argv)} exited with {done.returncode}: {done.stderr[-1500:]}")
    return done.stdout


def kwok_node(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """A node kwok runs, of scheduler_perf's node template (4 CPUs, 32Gi, 110 pods), with ``labels``
    beside its ``kubernetes.io/hostname``."""
    alloc = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
        "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": alloc, "capacity": alloc}}


def control_plane(state: Path) -> dict[str, str]:
    """The control plane of ``state`` (e2e/controlplane) up, with koordpy's CRDs applied (said with
    the time it took); the variables of its ``env`` file (KUBECONFIG, KUBECTL, FEATURE_GATES, ...)."""
    t0 = time.perf_counter()
    run([str(ROOT / "e2e/controlplane/up.sh"), str(state)], timeout=1800)
    env = dict(line.split("=", 1) for line in (state / "env").read_text().splitlines() if "=" in line)
    run([env["KUBECTL"], "--kubeconfig", env["KUBECONFIG"], "apply", "-f", str(ROOT / "crds")], timeout=120)
    say(f"control plane {state} up in {time.perf_counter() - t0:.1f} s")
    return env


# -- a scheduler's CPU ----------------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")
QUIET_SHARE = 0.05  # of one core, over QUIET_WINDOW: a scheduler with nothing to do
QUIET_WINDOW = 2.0
QUIET_DEADLINE = 180.0


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` and of its descendants alive now, plus what its reaped children
    used (cutime + cstime), from /proc/PID/stat; 0 once it is gone."""
    parent: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        p = int(d.name)
        parent[p] = int(fields[1])
        ticks[p] = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if p == pid else 0)
    total, todo = 0, [pid]
    children: dict[int, list[int]] = defaultdict(list)
    for p, pp in parent.items():
        children[pp].append(p)
    while todo:
        p = todo.pop()
        total += ticks.get(p, 0)
        todo += children.get(p, [])
    return total / TICK


async def quiet(child: Child, what: str) -> tuple[float, bool]:
    """Waits until ``child`` uses at most QUIET_SHARE of a core over QUIET_WINDOW seconds; returns its
    CPU seconds then, and whether it went quiet (after QUIET_DEADLINE seconds it is reported and the
    benchmark goes on with the figure of that moment)."""
    start = time.perf_counter()
    last, at = cpu_seconds(child.proc.pid), time.perf_counter()
    while True:
        await asyncio.sleep(QUIET_WINDOW)
        child.check()
        now, t = cpu_seconds(child.proc.pid), time.perf_counter()
        if (now - last) / (t - at) <= QUIET_SHARE:
            return now, True
        if t - start > QUIET_DEADLINE:
            say(f"  {child.name} was never quiet {what} in {QUIET_DEADLINE:.0f} s (last {(now - last) / (t - at):.0%} "
                "of a core): its CPU is read now")
            return now, False
        last, at = now, t


# -- one scheduler at a time ----------------------------------------------------------------------

class LiveBench:
    """What a benchmark that runs koordpy and kube-scheduler in turn on the same objects needs: its
    nodes (named by ``prefix``), its namespaces emptied of pods, and the scheduler of a round,
    started (``koordpy run``; kube-scheduler v1.37 with the control plane's feature gates) and
    stopped. Its logs are ``<state>/<tag>-<scheduler>.log``."""

    def __init__(self, api: ApiClient, env: dict[str, str], state: Path, tag: str, prefix: str,
                 deadline: float, stall: float) -> None:
        self.api, self.env, self.state, self.tag, self.prefix = api, env, state, tag, prefix
        self.deadline, self.stall = deadline, stall
        self.core = CoreV1Api(api)
        self.children: list[Child] = []

    async def namespaces(self, names: Iterable[str]) -> None:
        for ns in names:
            with contextlib.suppress(Conflict):
                await call(f"create namespace {ns}", lambda ns=ns: self.core.create_namespace(  # type: ignore[misc]
                    {"metadata": {"name": ns}}, _preload_content=False, _request_timeout=CALL_SECONDS))

    async def clean(self, ns: str) -> None:
        t0 = time.perf_counter()
        n = await empty(f"pods of {ns}", lambda: list_names(lambda: self.core.list_namespaced_pod(
            ns, _preload_content=False, _request_timeout=LIST_SECONDS)),
            lambda name: self.core.delete_namespaced_pod(name, ns, grace_period_seconds=0, _preload_content=False,
                                                         _request_timeout=CALL_SECONDS), 300.0)
        if n:
            say(f"  {ns} emptied of {n:,} pods in {time.perf_counter() - t0:.1f} s")

    async def our_nodes(self) -> list[str]:
        return [n for n in await list_names(lambda: self.core.list_node(
            _preload_content=False, _request_timeout=LIST_SECONDS)) if n.startswith(self.prefix)]

    async def drop_nodes(self, keep: frozenset[str] = frozenset()) -> None:
        async def others() -> list[str]:
            return [n for n in await self.our_nodes() if n not in keep]

        await empty("nodes", others, lambda n: self.core.delete_node(
            n, _preload_content=False, _request_timeout=CALL_SECONDS), 300.0)

    async def nodes(self, bodies: list[dict[str, Any]], same: Callable[[dict[str, Any]], bool] | None = None) -> None:
        """The benchmark's nodes are exactly ``bodies``: those missing (or, when ``same`` says a node
        is not as wanted, replaced) are created, those over are deleted, and all are Ready; other
        nodes are named (they would take pods too)."""
        t0 = time.perf_counter()
        want = {b["metadata"]["name"] for b in bodies}
        data = await call("LIST nodes", lambda: self.core.list_node(
            _preload_content=False, _request_timeout=LIST_SECONDS))
        have = {n["metadata"]["name"] for n in data.get("items") or [] if n["metadata"]["name"].startswith(self.prefix)
                and (same is None or same(n))}
        if set(await self.our_nodes()) - (have & want):  # over, or not as wanted: the rest would take pods too
            await self.drop_nodes(keep=frozenset(have & want))
        await create("nodes", [b for b in bodies if b["metadata"]["name"] not in have],
                     lambda b: self.core.create_node(b, _preload_content=False, _request_timeout=CALL_SECONDS))
        say(f"{len(want - have):,} nodes created ({len(have & want):,} there already) in "
            f"{time.perf_counter() - t0:.1f} s; waiting until kwok has them Ready")
        start = time.perf_counter()
        while True:
            data = await call("LIST nodes", lambda: self.core.list_node(
                _preload_content=False, _request_timeout=LIST_SECONDS))
            items = data.get("items") or []
            ready = {n["metadata"]["name"] for n in items if any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (n.get("status") or {}).get("conditions") or [])}
            missing = sorted(want - ready)
            if not missing:
                others = [n["metadata"]["name"] for n in items if not n["metadata"]["name"].startswith(self.prefix)]
                if others:
                    say(f"  warning: {len(others)} other nodes are in the cluster and may take pods: {others[:5]}")
                break
            if time.perf_counter() - start > self.deadline:
                raise BenchError(f"{len(missing):,} of {len(want):,} nodes not Ready after {self.deadline:.0f} s "
                                 f"(is kwok running? see its log); first: {', '.join(missing[:5])}")
            await asyncio.sleep(2)
        say(f"  all {len(want):,} nodes Ready after {time.perf_counter() - start:.1f} s")

    def child(self, name: str, argv: list[str]) -> Child:
        log = self.state / f"{self.tag}-{name}.log"
        log.unlink(missing_ok=True)
        c = Child(name, argv, log, ROOT)
        self.children.append(c)
        return c

    def stop(self, c: Child) -> None:
        c.stop()
        self.children.remove(c)

    def stop_all(self) -> None:
        for c in list(self.children):
            self.stop(c)

    async def start_koordpy(self) -> Child:
        port = free_port()
        wrap = os.environ.get("KOORDPY_BENCH_WRAP", "").split()
        c = self.child("koordpy", [*wrap, sys.executable, "-m", "koordpy", "run", "--kubeconfig",
                                   self.env["KUBECONFIG"], "--log-format", "json", "--bind-address",
                                   f"127.0.0.1:{port}"])
        took = await koordpy_ready(port, c, self.deadline)
        say(f"  koordpy (pid {c.proc.pid}, log {c.log}) ready after {took:.1f} s")
        return c

    async def start_kube_scheduler(self, probe_ns: str, probe: dict[str, Any]) -> Child:
        """kube-scheduler, ready once it has bound ``probe`` (a pod labelled ``bench-round=probe``
        for default-scheduler), which is deleted again with the rest of ``probe_ns``'s pods."""
        cfg = self.state / f"{self.tag}-kube-scheduler.yaml"
        cfg.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                       f"clientConnection:\n  kubeconfig: {self.env['KUBECONFIG']}\n  qps: 5000\n  burst: 5000\n"
                       "leaderElection:\n  leaderElect: false\n")
        # The control plane's feature gates (e2e/controlplane/up.sh), as a cluster's own kube-scheduler has them.
        gates = ["--feature-gates", self.env["FEATURE_GATES"]] if self.env.get("FEATURE_GATES") else []
        c = self.child("kube-scheduler", [self.env["KUBE_SCHEDULER"], "--config", str(cfg), "--secure-port", "0",
                                          *gates])
        watch = Pods(self.api, "probe", namespace=probe_ns)
        await watch.start()
        try:
            await create("probe pod", [probe], lambda b: self.core.create_namespaced_pod(
                probe_ns, b, _preload_content=False, _request_timeout=CALL_SECONDS))
            name = probe["metadata"]["name"]
            took = await wait_for("kube-scheduler's probe pod", lambda: len(watch.bound_at), 1, lambda: [name],
                                  self.deadline, self.stall, watch, [c])
        finally:
            await watch.stop()
        say(f"  kube-scheduler (pid {c.proc.pid}, log {c.log}) bound a probe pod after {took:.1f} s")
        await self.clean(probe_ns)
        return c
