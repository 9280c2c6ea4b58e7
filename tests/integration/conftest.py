"""Integration fixtures: a real etcd + kube-apiserver + kwok built and started by e2e/controlplane.

A control plane that cannot be built or started fails these tests; it never skips them.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.kube import (
    ROOT,
    ControlPlane,
    Kube,
    Scheduler,
    UnderTest,
    check_invariants,
    start_kube_scheduler,
)

UP = ROOT / "e2e" / "controlplane" / "up.sh"
DOWN = ROOT / "e2e" / "controlplane" / "down.sh"


def _read_env(path: Path) -> dict[str, str]:
    env = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


@pytest.fixture(scope="session")
def controlplane() -> Iterator[ControlPlane]:
    # KOORDPY_TEST_CONTROLPLANE names a folder to reuse (and leave running) between runs.
    reuse = os.environ.get("KOORDPY_TEST_CONTROLPLANE")
    state = Path(reuse or tempfile.mkdtemp(prefix="koordpy-cp-"))
    run = subprocess.run([str(UP), str(state)], capture_output=True, text=True, timeout=3600, check=False)
    if run.returncode != 0:
        pytest.fail(f"the local control plane did not start:\n{run.stderr[-4000:]}", pytrace=False)
    cp = ControlPlane(dir=state, env=_read_env(state / "env"))
    kube = Kube(cp)
    kube.kubectl("apply", "-f", str(ROOT / "crds"))
    kube.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    yield cp
    if not reuse:
        subprocess.run([str(DOWN), str(state)], capture_output=True, timeout=120, check=False)


@pytest.fixture
def kube(controlplane: ControlPlane) -> Iterator[Kube]:
    k = Kube(controlplane)
    k.reset()
    yield k
    problems = check_invariants(k)
    assert problems == [], problems


@pytest.fixture
def scheduler(controlplane: ControlPlane, kube: Kube, tmp_path: Path) -> Iterator[Scheduler]:
    s = Scheduler(controlplane, tmp_path / "koordpy.log")
    s.start()
    yield s
    alive = s.alive()
    s.kill()
    log = (tmp_path / "koordpy.log").read_text(errors="replace")
    assert alive, f"koordpy run exited during the test:\n{log[-4000:]}"
    assert "Traceback" not in log, log[-4000:]


@pytest.fixture(params=["kube-scheduler", "koordpy"])
def under_test(request: pytest.FixtureRequest, controlplane: ControlPlane, kube: Kube,
               tmp_path: Path) -> Iterator[UnderTest]:
    """Runs the test twice, once with kube-scheduler v1.37.2 (the reference, started with the control
    plane's gates), once with ``koordpy run``: the test's pods name ``under_test.scheduler_name``."""
    if request.param == "kube-scheduler":
        s = start_kube_scheduler(controlplane, tmp_path)
    else:
        k = Scheduler(controlplane, tmp_path / "koordpy.log")
        k.start()
        s = UnderTest("koordpy", "koordpy", k.log, koordpy=k)
    yield s
    s.stop()
