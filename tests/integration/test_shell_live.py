"""``koordpy run`` against the real API server, as an operator sees it (issue 17, items 15 and 17):
every pod of a 300-pod gang gets its ``Scheduled`` Event, a leader stopped with SIGTERM right after
binding writes the Events it owes before it releases the Lease, and ``--log-format json`` writes
nothing but JSON lines, kopf's warning about the JobSet CRD (not installed here) included."""

from __future__ import annotations

import json
import re
import signal
import time
from pathlib import Path
from typing import Any

from tests.builders import node, pod, podgroup
from tests.integration.kube import ControlPlane, Kube, Scheduler, fake, wait_for


def json_lines(log: Path) -> list[dict[str, Any]]:
    """Every line of the log, each parsed as JSON; the first that is not fails the test."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            parsed = json.loads(line)
        except ValueError as exc:
            raise AssertionError(f"a line of `koordpy run --log-format json` is not JSON: {line!r}") from exc
        assert isinstance(parsed, dict), line
        out.append(parsed)
    return out


def scheduled_events(kube: Kube) -> dict[str, int]:
    """Pod -> how many Scheduled Events name it."""
    out: dict[str, int] = {}
    for e in kube.events():
        if e.get("reason") == "Scheduled" and e["involvedObject"].get("kind") == "Pod":
            name = e["involvedObject"]["name"]
            out[name] = out.get(name, 0) + 1
    return out


def test_a_sigterm_after_binding_a_300_pod_gang_flushes_its_scheduled_events(
        controlplane: ControlPlane, kube: Kube, tmp_path: Path) -> None:
    kube.apply(fake([node(f"n{i}", cpu="32") for i in range(10)]))
    lease = re.sub(r"[^a-z0-9]+", "-", tmp_path.name.lower()).strip("-")[:60]
    s = Scheduler(controlplane, tmp_path / "koordpy.log",
                  args=("--leader-elect", "--leader-elect-lease-namespace", "default", "--leader-elect-lease-name",
                        lease, "--log-format", "json"))
    s.start()
    try:
        wait_for(lambda: any(line.get("event") == "leading" for line in json_lines(s.log)), "leading")
        kube.apply(podgroup("big", 300), [pod(f"big-{i}", cpu="1", group="big") for i in range(300)])
        # SIGTERM as soon as the cycle that places the gang says so: its binds are in flight and
        # nearly every Event is still owed.
        wait_for(lambda: any(line.get("event") == "binding" for line in json_lines(s.log)), "the gang placed",
                 every=0.02)
        assert s.proc is not None
        s.proc.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        assert s.proc.wait(timeout=30) == 0
        took = time.monotonic() - stopped
    finally:
        s.kill()
    lines = json_lines(s.log)
    events = [line.get("event") for line in lines]
    # Said whenever the stop found writes owed (on a fast machine the binds and Events may all be
    # through before the signal is handled: then nothing was owed, and the Events below are the test).
    flushed = next((line for line in lines if line.get("event") == "owed writes flushed on stop"), None)
    print(f"stopped {took:.1f}s after SIGTERM; {flushed}")
    if flushed is not None:
        assert flushed["dropped"] == 0
        # Flushed under the Lease, then released.
        leasing = [line for line in lines if str(line.get("event", "")).startswith(("lease", "leadership"))]
        assert "lease released" in events, leasing
        assert events.index("owed writes flushed on stop") < events.index("lease released")
    assert took < 15.0
    bound = kube.bound()
    assert len(bound) == 300
    have = wait_for(lambda: (lambda e: e if len(e) == 300 else None)(scheduled_events(kube)),
                    "a Scheduled Event for each pod", timeout=10)
    assert sorted(have) == sorted(bound) and set(have.values()) == {1}


def test_json_log_format_writes_only_json_lines(controlplane: ControlPlane, kube: Kube, tmp_path: Path) -> None:
    # No JobSet CRD is installed on this control plane: koordpy says so once (kopf's own warning about
    # it is dropped: it repeated ours at every change of any CRD).
    assert "jobsets.jobset.x-k8s.io" not in kube.kubectl("get", "crd", "-o", "name")
    s = Scheduler(controlplane, tmp_path / "koordpy.log", args=("--log-format", "json"))
    s.start()
    try:
        kube.apply(fake([node("n0")]))
        kube.apply(pod("p", cpu="1"), pod("too-big", cpu="64"))
        wait_for(lambda: "Insufficient cpu" in kube.condition_message("too-big"), "too-big reported")
        wait_for(lambda: any(str(line.get("event", "")).startswith("kind not served") and "JobSet" in str(line)
                             for line in json_lines(s.log)), "the warning about the missing JobSet CRD")
        assert s.proc is not None
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=30) == 0
    finally:
        s.kill()
    lines = json_lines(s.log)  # fails on the first line that is not JSON
    # Every line is JSON, kopf's and aiohttp's included (json_lines fails on the first that is not),
    # and every one carries its level and time.
    assert all(line["level"] and line["timestamp"] for line in lines)
    assert sum(1 for line in lines if str(line.get("event", "")).startswith("kind not served")
               and "JobSet" in str(line)) == 1
    assert not any(str(line.get("event", "")).startswith("Unresolved resources") for line in lines)
    assert lines[-1]["event"] == "stopped"
