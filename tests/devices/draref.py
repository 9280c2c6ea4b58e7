"""kube-scheduler v1.37.2's own DRA allocator as a test's reference: ``e2e/controlplane/kube/draref``,
built by ``e2e/controlplane/build.sh`` beside the control plane's binaries (as tests/test_chart.py
gets helm), run once on a whole batch of cases."""

from __future__ import annotations

import hashlib
import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "e2e" / "controlplane" / "build.sh"
SOURCE = ROOT / "e2e" / "controlplane" / "kube" / "draref" / "main.go"
GO_SUM = ROOT / "e2e" / "controlplane" / "kube" / "go.sum"


@cache
def binary() -> Path:
    """The draref binary; building it (once per source, cached by build.sh) is part of the test."""
    run = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=3600, check=False)
    assert run.returncode == 0, f"e2e/controlplane/build.sh failed:\n{run.stderr[-3000:]}"
    # build.sh names it by the same hash, so an edited main.go is never answered by an old binary.
    digest = hashlib.sha256(SOURCE.read_bytes() + GO_SUM.read_bytes()).hexdigest()[:16]
    path = Path(run.stdout.strip().splitlines()[-1]) / f"draref-{digest}"
    assert path.is_file(), path
    return path


def run(cases: list[dict[str, Any]]) -> dict[str, Any]:
    """draref's answer for ``cases``: ``{"features": {...}, "cases": [...]}`` (see main.go)."""
    done = subprocess.run([str(binary())], input=json.dumps(cases), capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, f"draref failed:\n{done.stderr[-3000:]}"
    out: dict[str, Any] = json.loads(done.stdout)
    return out
