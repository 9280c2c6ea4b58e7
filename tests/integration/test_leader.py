"""Replicas of ``koordpy run`` with leader election, and what it serves at /metrics, /healthz
and /readyz, against the real API server: failover with pods in flight, a leader cut off from
the API server, a clean stop that hands over at once."""

from __future__ import annotations

import json
import re
import select
import signal
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.builders import node, pod, podgroup
from tests.integration.kube import ControlPlane, Kube, Scheduler, fake, wait_for

LEASE = ("--leader-elect", "--leader-elect-lease-namespace", "default")
RENEW_DEADLINE = 8.0  # the default renewDeadlineSeconds


def lines(log: Path) -> list[dict[str, Any]]:
    out = []
    for line in log.read_text(errors="replace").splitlines() if log.exists() else []:
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def logged(log: Path, event: str) -> dict[str, Any] | None:
    return next((line for line in lines(log) if line.get("event") == event), None)


def at(line: dict[str, Any]) -> float:
    return datetime.fromisoformat(str(line["timestamp"]).replace("Z", "+00:00")).timestamp()


def scrape(address: str, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{address}{path}", timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        m = re.match(rf"^{re.escape(name)}(?:\{{(.*)\}})? (\S+)$", line)
        if not m:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1) or ""))
        if all(have.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
    return total


def address(log: Path) -> str:
    line = wait_for(lambda: logged(log, "serving /metrics, /healthz and /readyz"), "the metrics address")
    return str(line["address"])


@pytest.fixture
def replicas(controlplane: ControlPlane, kube: Kube, tmp_path: Path) -> Iterator[list[Scheduler]]:
    started: list[Scheduler] = []
    yield started
    for s in started:  # all of them first: a replica left running would schedule in the next test
        s.kill()
    for s in started:
        text = s.log.read_text(errors="replace")
        assert "Traceback" not in text, text[-4000:]


def replica(cp: ControlPlane, tmp_path: Path, name: str, started: list[Scheduler],
            kubeconfig: str | None = None) -> Scheduler:
    # A lease of the test's own: one a previous test's killed leader holds would delay the start.
    lease = ("--leader-elect-lease-name", re.sub(r"[^a-z0-9]+", "-", tmp_path.name.lower()).strip("-")[:60])
    s = Scheduler(cp, tmp_path / f"{name}.log", args=(*LEASE, *lease, "--log-format", "json"),
                  kubeconfig=kubeconfig)
    started.append(s)
    s.start()
    return s


def test_failover_with_1000_pods_in_flight(controlplane: ControlPlane, kube: Kube, tmp_path: Path,
                                          replicas: list[Scheduler]) -> None:
    # 50 Strict gangs of 20 one-CPU pods on 125 eight-CPU nodes: exactly full, so a pod bound
    # twice or a node overcommitted by the two replicas' views would show.
    kube.apply(fake([node(f"n{i}") for i in range(125)]))
    a = replica(controlplane, tmp_path, "a", replicas)
    wait_for(lambda: logged(a.log, "leading"), "replica a leading")
    b = replica(controlplane, tmp_path, "b", replicas)
    wait_for(lambda: logged(b.log, "standing by"), "replica b standing by")
    status, _ = scrape(address(b.log), "/readyz")
    assert status == 200  # a standby is ready: it can take over
    assert metric(scrape(address(b.log))[1], "koordpy_leader") == 0
    assert metric(scrape(address(a.log))[1], "koordpy_leader") == 1
    # Created from another thread while the leader schedules them, as a controller would.
    creating = threading.Thread(target=kube.apply, args=(
        [podgroup(f"g{j}", 20) for j in range(50)],
        [pod(f"g{j}-{i}", cpu="1", group=f"g{j}") for j in range(50) for i in range(20)]))
    creating.start()
    # Killed as soon as it decides its first binds (from its log: faster than asking the API
    # server), so that binds are in flight and most of the pods still pending.
    wait_for(lambda: sum(line.get("event") == "binding" for line in lines(a.log)) >= 5,
             "the leader's first binds", timeout=120, every=0.01)
    a.kill(signal.SIGKILL)
    killed = time.time()
    creating.join()
    in_flight = 1000 - len(kube.bound())
    print(f"leader killed with {in_flight}/1000 pods not yet bound")
    assert in_flight > 0
    took_over = at(wait_for(lambda: logged(b.log, "leading"), "replica b taking over", timeout=30)) - killed
    print(f"replica b took over {took_over:.1f}s after the leader died")
    assert took_over <= 15.0
    wait_for(lambda: len(kube.bound()) == 1000, "all 1000 bound after the failover", timeout=240)
    # One Scheduled event per pod, naming the node it is bound to: nobody bound a pod twice.
    bound = kube.bound()
    for event in kube.events():
        if event["reason"] == "Scheduled":
            pod_name = event["involvedObject"]["name"]
            assert f"to {bound[pod_name]}" in event["message"], event["message"]
    # (the kube fixture checks that no node is over allocatable and no Strict gang partly bound)


class Proxy:
    """A TCP relay to the API server that can be cut: while cut, it forwards nothing and answers
    nothing (a partition, not a refused connection: requests hang until their timeouts)."""

    def __init__(self, port: int) -> None:
        self.target = ("127.0.0.1", port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target)
        except OSError:
            client.close()
            return
        peers = {client: upstream, upstream: client}
        try:
            while not self.closed.is_set():
                ready, _, _ = select.select(list(peers), [], [], 0.2)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if not self.cut.is_set():
                        peers[sock].sendall(data)
        except OSError:
            return
        finally:
            client.close()
            upstream.close()

    def close(self) -> None:
        self.closed.set()
        self.listener.close()


def proxied(controlplane: ControlPlane, tmp_path: Path) -> tuple[Proxy, Path]:
    """A proxy to the API server, and a kubeconfig (the admin's) that goes through it."""
    proxy = Proxy(int(controlplane.env["API_PORT"]))
    kubeconfig = tmp_path / "via-proxy.kubeconfig"
    kubeconfig.write_text(Path(controlplane.kubeconfig).read_text().replace(
        controlplane.env["API_SERVER"], f"https://127.0.0.1:{proxy.port}"))
    return proxy, kubeconfig


def test_a_leader_cut_off_from_the_api_server_stops_before_another_starts(
        controlplane: ControlPlane, kube: Kube, tmp_path: Path, replicas: list[Scheduler]) -> None:
    proxy, kubeconfig = proxied(controlplane, tmp_path)
    try:
        kube.apply(fake([node(f"n{i}") for i in range(4)]))
        a = replica(controlplane, tmp_path, "a", replicas, kubeconfig=str(kubeconfig))
        wait_for(lambda: logged(a.log, "leading"), "replica a leading")
        b = replica(controlplane, tmp_path, "b", replicas)
        wait_for(lambda: logged(b.log, "standing by"), "replica b standing by")
        kube.apply(podgroup("first", 2), [pod(f"first-{i}", group="first") for i in range(2)])
        wait_for(lambda: len(kube.bound()) == 2, "the first gang bound by a")
        proxy.cut.set()
        cut = time.time()
        assert a.proc is not None
        code = a.proc.wait(timeout=RENEW_DEADLINE + 15)
        assert code == 1, "a leader that cannot renew must exit (non-zero) so that it restarts afresh"
        lost = at(wait_for(lambda: logged(a.log, "leadership lost: stopped writing"), "a's loss logged"))
        leading = at(wait_for(lambda: logged(b.log, "leading"), "replica b taking over", timeout=30))
        print(f"cut at 0s; a stopped writing at {lost - cut:.1f}s; b leads at {leading - cut:.1f}s")
        assert lost - cut <= RENEW_DEADLINE + 1.0
        assert lost < leading  # silent before anyone else may start
        kube.apply(podgroup("second", 2), [pod(f"second-{i}", group="second") for i in range(2)])
        wait_for(lambda: len(kube.bound()) == 4, "the second gang bound by b")
    finally:
        proxy.close()


def test_a_clean_stop_hands_the_lease_over_at_once(controlplane: ControlPlane, kube: Kube, tmp_path: Path,
                                                   replicas: list[Scheduler]) -> None:
    a = replica(controlplane, tmp_path, "a", replicas)
    wait_for(lambda: logged(a.log, "leading"), "replica a leading")
    b = replica(controlplane, tmp_path, "b", replicas)
    wait_for(lambda: logged(b.log, "standing by"), "replica b standing by")
    assert a.proc is not None
    a.proc.send_signal(signal.SIGTERM)
    stopped = time.time()
    assert a.proc.wait(timeout=10) == 0
    assert logged(a.log, "lease released") is not None
    leading = at(wait_for(lambda: logged(b.log, "leading"), "replica b taking over", timeout=15))
    assert leading - stopped <= 5.0  # a retry period or two, not a lease duration


def test_metrics_show_the_attempts_of_a_run(kube: Kube, scheduler: Scheduler) -> None:
    kube.apply(fake([node(f"n{i}") for i in range(2)]))
    kube.apply(podgroup("fits", 2), [pod(f"fits-{i}", group="fits") for i in range(2)])
    kube.apply(pod("too-big", cpu="64"))
    wait_for(lambda: len(kube.bound()) == 2, "the gang bound")
    wait_for(lambda: "Insufficient cpu" in kube.condition_message("too-big"), "too-big reported")
    where = address(scheduler.log)
    assert scrape(where, "/healthz")[0] == 200 and scrape(where, "/readyz")[0] == 200
    text = wait_for(lambda: (lambda t: t if metric(t, "koordpy_api_writes_total", kind="pod-status", result="ok")
                             else None)(scrape(where)[1]), "the condition write counted")
    assert metric(text, "scheduler_schedule_attempts_total", result="scheduled", profile="koordpy") == 2
    assert metric(text, "scheduler_schedule_attempts_total", result="unschedulable", profile="koordpy") >= 1
    assert metric(text, "koordpy_gang_bound_total") == 1
    assert metric(text, "koordpy_api_writes_total", kind="bind", result="ok") == 2
    assert metric(text, "koordpy_bind_duration_seconds_count") == 2
    assert metric(text, "scheduler_scheduling_attempt_duration_seconds_count") >= 1
    assert metric(text, "scheduler_pending_pods") == 1  # too-big, in one queue or the other
    assert metric(text, "koordpy_leader") == 1
    assert metric(text, "process_resident_memory_bytes") > 0


def test_a_stop_with_the_api_server_unreachable_ends_within_5s(
        controlplane: ControlPlane, kube: Kube, tmp_path: Path, replicas: list[Scheduler]) -> None:
    # Writes are queued (pods the scheduler reports unschedulable) and a renewal is due when the
    # API server stops answering; SIGTERM must still end the process well within Kubernetes' 30 s.
    proxy, kubeconfig = proxied(controlplane, tmp_path)
    try:
        kube.apply(fake([node("n0")]))
        a = replica(controlplane, tmp_path, "a", replicas, kubeconfig=str(kubeconfig))
        wait_for(lambda: logged(a.log, "leading"), "replica a leading")
        kube.apply([pod(f"big-{i}", cpu="64") for i in range(50)])
        wait_for(lambda: "Insufficient cpu" in kube.condition_message("big-0"), "the first reports written")
        proxy.cut.set()
        kube.apply([pod(f"fits-{i}", cpu="1") for i in range(4)])  # events a cut-off scheduler never sees
        time.sleep(1.0)
        assert a.proc is not None
        a.proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        code = a.proc.wait(timeout=30)
        took = time.monotonic() - stopped
        print(f"stopped {took:.1f}s after SIGTERM with the API server unreachable (exit {code})")
        assert took <= 5.0
        assert code == 0
    finally:
        proxy.close()
