"""The ``koordpy`` program: the top-level parser, its commands, and ``main()``.

Belongs here: wiring each command module's parser under ``koordpy``, the start-up chores every
command shares (the numba cache seed), and the one place where an error becomes a line on stderr
and an exit status: any ``KoordpyError`` a command raises is printed as ``PROG: `` and its
``report()``, and exits with its ``exit_code`` (2 for bad input, 1 for a failure such as a pod
explain cannot find, 3 for simulate's round limit). Does not belong here: any command's flags or
work (one module per command beside this one) or reading manifests (``koordpy.cli.manifests``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys

from koordpy import __version__
from koordpy.cli import explain, run, simulate, topology
from koordpy.errors import KoordpyError

HELP = "A gang- and network-topology-aware Kubernetes scheduler."

EPILOG = """\
examples:
  # where would these pods go, or why would they wait? (offline, no cluster needed)
  koordpy simulate -f examples/spine-block

  # schedule the pods whose spec.schedulerName is koordpy in a cluster
  koordpy run --kubeconfig ~/.kube/config

  # draw the topology trees with free capacity per domain; write HyperNodes from node labels
  koordpy topology show -f cluster.yaml
  koordpy topology generate --levels example.com/spine,example.com/rack -f nodes.yaml

`koordpy COMMAND --help` tells more about each command.
"""


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="koordpy", description=HELP, epilog=EPILOG, formatter_class=raw)
    parser.add_argument("--version", action="version", version=f"koordpy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    simulate.add_parser(sub)
    run.add_parser(sub)
    topology.add_parser(sub)
    explain.add_parser(sub)
    return parser


def seed_numba_cache() -> None:
    """Copies the kernels compiled when the image was built ($KOORDPY_NUMBA_SEED) into numba's
    cache directory ($NUMBA_CACHE_DIR) while that is empty. numba uses only a writable cache,
    and in the container only the emptyDir it points at is writable. Nothing to do outside the
    image (no seed), and never fatal: without the copy, the kernels compile once."""
    seed, target = os.environ.get("KOORDPY_NUMBA_SEED"), os.environ.get("NUMBA_CACHE_DIR")
    if not seed or not target or not os.path.isdir(seed):
        return
    try:
        if os.path.isdir(target) and os.listdir(target):
            return
        shutil.copytree(seed, target, dirs_exist_ok=True)
    except OSError as exc:
        print(f"koordpy: the kernels will compile: cannot copy {seed} to {target}: {exc}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    seed_numba_cache()
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `koordpy simulate ... | head` is not an error
        sys.stderr.close()
        return 0
    except KoordpyError as exc:  # every command's errors, printed and mapped here only
        print(f"{args.prog}: {exc.report()}", file=sys.stderr)
        return exc.exit_code
    return code


if __name__ == "__main__":
    sys.exit(main())
