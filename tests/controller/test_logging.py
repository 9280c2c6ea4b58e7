"""Issue 17, item 17: in JSON mode every line koordpy writes to standard error is a JSON object,
kopf's own warnings and any other stdlib logger's lines included (a strict JSON log pipeline must
never meet plain text). Run in a child process: logging's configuration is process-wide."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

EMIT = r"""
import logging, warnings, structlog
from koordpy.controller.main import configure_logging
configure_logging("INFO", "json")
# A warning of kopf's own, on the logger that says which kinds it cannot serve; what it says at
# every start and CRD change when an optional CRD (JobSet) is not installed is koordpy's to say
# once (issue 29, item 18), and dropped.
from kopf._core.reactor import observation
observation.logger.warning("Ambiguous resources will not be served (try specifying API groups): "
                           "podgroups => podgroups.scheduling.sigs.k8s.io, podgroups.scheduling.volcano.sh")
observation.logger.warning("Unresolved resources cannot be served (try creating their CRDs): "
                           "jobsets.v1alpha2.jobset.x-k8s.io")
logging.getLogger("kopf.objects").warning("handler failed: %s", "x", extra={"k8s_obj": {"kind": "Pod"}})
logging.getLogger("kopf").info("below kopf's level: not shown")
try:
    1 / 0
except ZeroDivisionError:
    logging.getLogger("asyncio").exception("Task exception was never retrieved")
logging.warning("the root logger")
warnings.warn("a Python warning", UserWarning)
structlog.get_logger("koordpy").info("cache synced", nodes=3)
"""


def test_json_mode_routes_kopf_and_stdlib_logging_through_structlog() -> None:
    run = subprocess.run([sys.executable, "-c", EMIT], capture_output=True, text=True, timeout=120, cwd=ROOT,
                         check=False)
    assert run.returncode == 0, run.stderr
    lines = run.stderr.splitlines()
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise AssertionError(f"not a JSON line on stderr: {line!r}\n{run.stderr}") from exc
    by_event = {str(p["event"]): p for p in parsed}
    ambiguous = next(p for e, p in by_event.items() if e.startswith("Ambiguous resources will not be served"))
    assert "podgroups" in ambiguous["event"] and ambiguous["level"] == "warning"
    assert ambiguous["logger"].startswith("kopf.") and ambiguous["timestamp"]
    assert "Unresolved resources" not in run.stderr
    assert by_event["handler failed: x"]["logger"] == "kopf.objects"
    assert "below kopf's level: not shown" not in run.stderr
    boom = by_event["Task exception was never retrieved"]
    assert boom["level"] == "error" and "ZeroDivisionError" in boom["exception"]
    assert by_event["the root logger"]["level"] == "warning"
    assert any("a Python warning" in e for e in by_event)
    assert by_event["cache synced"]["nodes"] == 3
    assert len(parsed) == 6, lines
