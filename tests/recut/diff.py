"""The differential run of a re-cut: old against new over random worlds, byte for byte.

    python -m tests.recut.diff --old REF [--new PATH_OR_REF] [--worlds N] [--seed S] [--keep DIR]

Each world (``tests/recut/worlds.py``, seeds S, S+1, ...) is written as one multi-document YAML
file, and both checkouts run the same commands on it: ``koordpy simulate -f WORLD`` in both output
forms (JSON and table), ``koordpy explain`` for a few of its pods and groups (with and without
``--simulate``, table and JSON), and ``koordpy topology show`` (with and without ``--nodes``) where
the world has topology objects. Their standard output, standard error and exit status must be
the same bytes (the checkouts' own paths, which tracebacks would name, are written as
``<checkout>``). The summary names the worlds, the commands, how many were identical and how many
were not, and shows the first differences as unified diffs with the world files kept; the exit
status is 1 on any difference, 0 when there is none.

A REF is anything ``git rev-parse`` takes in the repository this file is in; its tree is exported
(``git archive``, so no worktree is registered in the shared repository) once per commit under the
temporary directory, where numba's cache of its kernels stays for the next run. A PATH is a
checkout used as it is; ``--new`` defaults to the working tree this file is in. Both sides run
with this Python, ``PYTHONPATH`` set to their checkout and ``PYTHONHASHSEED`` fixed; the simulator's
clock is its own fixed epoch. Each side is one fork server per lane (``tests/recut/worker.py``) that
loads its checkout once and forks per command, so a command costs what it computes, not the
interpreter's start-up. Two lanes at most (``--jobs``), each running one command at a time.
"""

from __future__ import annotations

import argparse
import difflib
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue

from tests.recut.worlds import World, generate

HERE = Path(__file__).resolve()
REPO = HERE.parents[2]
WORKER = HERE.parent / "worker.py"
CACHE = Path(tempfile.gettempdir()) / "koordpy-recut"
SHOWN = 5  # differences shown as diffs in the summary
DIFF_LINES = 80  # lines of one diff shown
# Seconds a worker may take to load its checkout or to answer one command (a simulate of a random
# world takes well under one): past it the run stops saying which worker hung, never waits for ever.
WORKER_DEADLINE = 300.0


# -- checkouts ------------------------------------------------------------------------------------------------

def checkout(spec: str) -> tuple[Path, str]:
    """The directory holding ``koordpy/`` for a path or a git ref, and a label for it."""
    path = Path(spec)
    if path.is_dir():
        if not (path / "koordpy" / "__init__.py").is_file():
            raise SystemExit(f"recut diff: {spec} has no koordpy/ package")
        return path.resolve(), str(path.resolve())
    sha = _git("rev-parse", "--verify", f"{spec}^{{commit}}").strip()
    dest = CACHE / sha
    if not (dest / "koordpy" / "__init__.py").is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=f"{sha[:12]}.", dir=CACHE))
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", sha, "koordpy"],
                                 check=True, capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            tar.extractall(scratch, filter="tar")
        try:
            scratch.rename(dest)
        except OSError:  # another run extracted it meanwhile
            shutil.rmtree(scratch, ignore_errors=True)
    return dest, f"{spec} ({sha[:12]})"


def _git(*args: str) -> str:
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"recut diff: git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


# -- one side's fork server -----------------------------------------------------------------------------------

class Side:
    """A worker process serving one checkout's CLI; ``run`` sends one command and waits for its result."""

    def __init__(self, root: Path) -> None:
        self.root = root
        env = {**os.environ, "PYTHONPATH": str(root), "PYTHONHASHSEED": "0", "KUBECONFIG": os.devnull,
               "COLUMNS": "100"}
        self.proc = subprocess.Popen([sys.executable, str(WORKER)], cwd=str(root), env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=1)

    def ready(self) -> Side:
        """Waits until the worker has loaded its checkout (started in ``__init__``, so sides load together)."""
        root = self.root
        assert self.proc.stdout is not None
        first = self._line("load its checkout")
        if not first:
            raise SystemExit(f"recut diff: the worker for {root} did not start")
        loaded = json.loads(first)["ready"]
        if Path(loaded).resolve() != root.resolve():
            raise SystemExit(f"recut diff: the worker for {root} loaded koordpy from {loaded}")
        return self

    def run(self, argv: list[str], cwd: Path) -> tuple[object, str, str]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "cwd": str(cwd)}) + "\n")
        self.proc.stdin.flush()
        line = self._line(f"answer {' '.join(argv[:2])}")
        if not line:
            raise SystemExit(f"recut diff: the worker for {self.root} died")
        got = json.loads(line)
        here = str(self.root)
        return got["code"], got["out"].replace(here, "<checkout>"), got["err"].replace(here, "<checkout>")

    def _line(self, what: str) -> str:
        """The worker's next line, read within ``WORKER_DEADLINE`` (read in a thread: a pipe's
        readline has no timeout of its own); a worker past it is killed and the run stops."""
        assert self.proc.stdout is not None
        got: Queue[str] = Queue()
        threading.Thread(target=lambda: got.put(self.proc.stdout.readline() if self.proc.stdout else ""),
                         daemon=True).start()
        try:
            return got.get(timeout=WORKER_DEADLINE)
        except Empty:
            self.proc.kill()
            raise SystemExit(f"recut diff: the worker for {self.root} did not {what} within "
                             f"{WORKER_DEADLINE:g} s") from None

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)


# -- the commands of one world --------------------------------------------------------------------------------

def commands(world: World, path: str) -> list[list[str]]:
    """What both sides run on one world; the choice of targets is the world's seed's."""
    rng = random.Random(world.seed * 7919 + 1)
    out = [["simulate", "-f", path, "-o", "json"], ["simulate", "-f", path]]
    for i, (kind, target) in enumerate(world.explain(rng)):
        argv = ["explain", kind, target, "-f", path]
        if i == 0 or rng.random() < 0.7:
            argv.append("--simulate")
        if rng.random() < 0.5:
            argv += ["-o", "json"]
        out.append(argv)
    if world.topology:
        out += [["topology", "show", "-f", path], ["topology", "show", "-f", path, "--nodes"]]
    return out


@dataclass
class Difference:
    seed: int
    world: Path
    argv: list[str]
    diffs: list[str]


@dataclass
class Tally:
    worlds: int = 0
    runs: int = 0
    identical: int = 0
    different: list[Difference] = field(default_factory=list)
    exits: dict[str, int] = field(default_factory=dict)  # the old side's exit statuses, counted


def _unified(name: str, old: str, new: str) -> str:
    lines = list(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                      f"old/{name}", f"new/{name}"))
    if len(lines) > DIFF_LINES:
        lines = [*lines[:DIFF_LINES], f"... {len(lines) - DIFF_LINES} more lines\n"]
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def compare(seed: int, path: Path, old: Side, new: Side, tally: Tally, lock: threading.Lock) -> None:
    world = generate(seed)
    world.write(path)
    for argv in commands(world, path.name):
        a, b = old.run(argv, path.parent), new.run(argv, path.parent)
        diffs = []
        if a[0] != b[0]:
            diffs.append(f"exit status: old {a[0]}, new {b[0]}\n")
        for i, stream in ((1, "stdout"), (2, "stderr")):
            if a[i] != b[i]:
                diffs.append(_unified(stream, str(a[i]), str(b[i])))
        with lock:
            tally.runs += 1
            tally.exits[str(a[0])] = tally.exits.get(str(a[0]), 0) + 1
            if diffs:
                tally.different.append(Difference(seed, path, argv, diffs))
            else:
                tally.identical += 1
    with lock:
        tally.worlds += 1


def _pair(old_root: Path, new_root: Path) -> tuple[Side, Side]:
    old, new = Side(old_root), Side(new_root)
    return old.ready(), new.ready()


def run(old_root: Path, new_root: Path, seeds: list[int], folder: Path, jobs: int = 2) -> Tally:
    tally, lock = Tally(), threading.Lock()
    todo: Queue[int] = Queue()
    for s in seeds:
        todo.put(s)
    failures: list[BaseException] = []

    def lane(first: tuple[Side, Side] | None = None) -> None:
        old = new = None
        try:
            old, new = first or _pair(old_root, new_root)
            while True:
                try:
                    seed = todo.get_nowait()
                except Empty:
                    return
                compare(seed, folder / f"world-{seed}.yaml", old, new, tally, lock)
        except BaseException as exc:  # reported once the lanes are done
            failures.append(exc)
        finally:
            for side in (old, new):
                if side is not None:
                    side.close()

    # The first lane's sides start before the others: a checkout exported afresh compiles its
    # kernels into numba's cache once, and the other lane's sides then load them from it.
    first = _pair(old_root, new_root)
    lanes = [threading.Thread(target=lane, args=(first if i == 0 else None,))
             for i in range(max(1, min(jobs, 2, len(seeds))))]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    if failures:
        raise failures[0]
    tally.different.sort(key=lambda d: (d.seed, d.argv))
    return tally


def summary(tally: Tally, labels: tuple[str, str], seconds: float, kept: Path | None) -> Iterator[str]:
    yield f"old: {labels[0]}\nnew: {labels[1]}\n"
    exits = ", ".join(f"{n} x exit {code}" for code, n in sorted(tally.exits.items()))
    worlds = sorted({d.seed for d in tally.different})
    yield (f"{tally.worlds} worlds, {tally.runs} commands on each side ({exits} on the old side): "
           f"{tally.identical} identical, {len(tally.different)} different"
           f"{' in ' + str(len(worlds)) + ' worlds' if worlds else ''}; {seconds:.0f} s\n")
    for d in tally.different[:SHOWN]:
        where = (kept / d.world.name) if kept else d.world
        yield f"\n--- world {d.seed} ({where}): koordpy {' '.join(d.argv)}\n"
        yield from d.diffs
    if len(tally.different) > SHOWN:
        yield f"\n... and {len(tally.different) - SHOWN} more differences\n"
    if worlds:
        yield f"\ndifferent worlds (seeds): {' '.join(map(str, worlds))}\n"
        if kept:
            yield f"world files kept in {kept}, every difference in {kept / 'differences.txt'}\n"


def write_differences(tally: Tally, path: Path) -> None:
    """Every difference, as the summary shows the first ones, in one file."""
    with path.open("w") as out:
        for d in tally.different:
            out.write(f"--- world {d.seed} ({d.world.name}): koordpy {' '.join(d.argv)}\n")
            out.writelines(d.diffs)
            out.write("\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.recut.diff", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, metavar="PATH_OR_REF", help="the checkout before (a git ref or a path)")
    parser.add_argument("--new", default=str(REPO), metavar="PATH_OR_REF",
                        help="the checkout after (default: this working tree)")
    parser.add_argument("--worlds", type=int, default=200, metavar="N", help="how many worlds (default 200)")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="the first world's seed (default 0)")
    parser.add_argument("--keep", metavar="DIR", help="write every world here and keep them (default: only the "
                                                      "worlds that differ are kept, in a new temporary folder)")
    parser.add_argument("--jobs", type=int, default=2, choices=(1, 2), help="lanes in parallel (default 2)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    (old_root, old_label), (new_root, new_label) = checkout(args.old), checkout(args.new)
    seeds = list(range(args.seed, args.seed + args.worlds))
    with tempfile.TemporaryDirectory(prefix="koordpy-recut-worlds.") as scratch:
        folder = Path(args.keep) if args.keep else Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        tally = run(old_root, new_root, seeds, folder.resolve(), args.jobs)
        kept: Path | None = Path(args.keep).resolve() if args.keep else None
        if tally.different and kept is None:
            kept = Path(tempfile.mkdtemp(prefix="koordpy-recut-diff."))
            for seed in sorted({d.seed for d in tally.different}):
                shutil.copy(folder / f"world-{seed}.yaml", kept)
        if kept is not None and tally.different:
            write_differences(tally, kept / "differences.txt")
        for chunk in summary(tally, (old_label, new_label), time.monotonic() - started, kept):
            sys.stdout.write(chunk)
    return 1 if tally.different else 0


if __name__ == "__main__":
    sys.exit(main())
