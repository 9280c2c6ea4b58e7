"""One side of the differential run (``tests/recut/diff.py``): a fork server for one checkout's CLI.

Started as ``python worker.py`` with ``PYTHONPATH`` set to a checkout, it loads that checkout's
``koordpy`` (the CLI, the simulator and the compiled kernels) once, then reads one request per line
on standard input, ``{"argv": [...], "cwd": "..."}``, forks, and in the child runs ``koordpy ARGV``
as ``python -m koordpy ARGV`` would, its standard output and error going to files; it answers one
line, ``{"code": ..., "out": ..., "err": ...}`` (the streams' bytes as latin-1 text). Each command
thus starts from the same loaded state, as a fresh process would, without paying numba's and
the imports' start-up for every command (about 1.5 s each, the most of a small world's run).

This file runs under the checkout being compared, old or new: it imports nothing from ``tests``
and only the CLI's entry point (``koordpy.cli.main.main``) from ``koordpy``, so that an old checkout
serves as well as the new one.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys
import tempfile
import traceback

# Loaded before the first fork so that no child pays for them; absent ones are skipped (an old
# checkout may not have them all).
PRELOAD = ("koordpy.cli.main", "koordpy.cli.simulate", "koordpy.cli.explain", "koordpy.cli.topology",
           "koordpy.sim.simulator", "koordpy.core.explain")
TIMEOUT = 300  # seconds one command may take before it is killed and reported as such


def _child(argv: list[str], cwd: str, out_fd: int, err_fd: int) -> None:
    os.chdir(cwd)
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    import koordpy

    sys.argv = [os.path.join(os.path.dirname(koordpy.__file__), "__main__.py"), *argv]
    code: int
    try:
        from koordpy.cli.main import main

        code = main(argv)
    except SystemExit as exc:  # argparse's usage errors, or a command's own exit
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # what `python -m koordpy` would print for an uncaught error
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code & 0xFF)


def _run(argv: list[str], cwd: str) -> dict[str, object]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                _child(argv, cwd, out.fileno(), err.fileno())
            finally:
                os._exit(70)
        signal.alarm(TIMEOUT)
        try:
            _, status = os.waitpid(pid, 0)
            code: object = os.waitstatus_to_exitcode(status)
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            code = f"killed after {TIMEOUT} s"
        finally:
            signal.alarm(0)
        out.seek(0)
        err.seek(0)
        return {"code": code, "out": out.read().decode("latin-1"), "err": err.read().decode("latin-1")}


def _alarm(signum: int, frame: object) -> None:
    raise TimeoutError


def serve() -> None:
    for name in PRELOAD:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    try:
        from koordpy.kernels import warm_up

        warm_up()
    except ImportError:
        pass
    signal.signal(signal.SIGALRM, _alarm)
    import koordpy

    print(json.dumps({"ready": os.path.dirname(os.path.dirname(os.path.abspath(koordpy.__file__)))}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        print(json.dumps(_run(request["argv"], request["cwd"])), flush=True)


if __name__ == "__main__":
    serve()
