"""The ``koordpy`` command line: reads files, calls the simulator or the controller, prints.

This module and ``koordpy.controller`` are the only places that do I/O.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import yaml

from koordpy import __version__
from koordpy.sim.simulator import InputError, SimulationResult, World, simulate

FOLDER_SUFFIXES = (".yaml", ".yml")  # a folder's JSON files are often not manifests


def load_documents(paths: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """Every object in the given files and folders (a folder's files in name order)."""
    files: list[Path] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            files.extend(sorted(f for f in path.iterdir() if f.suffix in FOLDER_SUFFIXES and f.is_file()))
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(p, "no such file or folder")
    docs: list[tuple[str, dict[str, Any]]] = []
    for f in files:
        try:
            loaded = list(yaml.safe_load_all(f.read_text(encoding="utf-8")))
        except yaml.YAMLError as exc:
            raise InputError(str(f), f"not valid YAML: {exc}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise InputError(str(f), f"cannot read: {exc}") from exc
        for i, doc in enumerate(loaded):
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise InputError(str(f), f"document {i + 1} is not a Kubernetes object")
            items = doc.get("items") if str(doc.get("kind", "")).endswith("List") else None
            if isinstance(items, list):
                docs.extend((str(f), item) for item in items)
            else:
                docs.append((str(f), doc))
    return docs


def print_table(result: SimulationResult, out: TextIO) -> None:
    rows = [(pod, node, "Bound", "") for pod, node in sorted(result.bound.items())]
    rows += [(pod, "-", "Pending", msg) for pod, msg in sorted(result.pending.items())]
    rows += [(pod, "-", "Preempted", "") for pod in result.preempted]
    width = max([len("POD"), *(len(r[0]) for r in rows), *(len(k) for k in result.podgroups)])
    nwidth = max([len("NODE"), *(len(r[1]) for r in rows)])
    out.write(f"{'POD':<{width}}  {'NODE':<{nwidth}}  {'STATUS':<9}  MESSAGE\n")
    for pod, node, status, msg in rows:
        short = msg if len(msg) <= 160 else msg[:157] + "..."
        out.write(f"{pod:<{width}}  {node:<{nwidth}}  {status:<9}  {short}\n")
    if result.podgroups:
        out.write(f"\n{'PODGROUP':<{width}}  {'PHASE':<13}  SCHEDULED/MIN\n")
        for key, st in sorted(result.podgroups.items()):
            out.write(f"{key:<{width}}  {st['phase']:<13}  {st['scheduled']}/{st['minMember']}\n")
    out.write(f"\n{len(result.bound)} bound, {len(result.pending)} pending, {len(result.preempted)} preempted\n")


def cmd_simulate(args: argparse.Namespace) -> int:
    try:
        world = World.from_objects(load_documents(args.file))
    except InputError as exc:
        print(f"koordpy simulate: error: {exc}", file=sys.stderr)
        return 2
    for line in world.ignored:
        print(f"koordpy simulate: note: not acted on: {line}", file=sys.stderr)
    result = simulate(world, frozenset(args.scheduler_name or ["koordpy"]))
    if args.output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_table(result, sys.stdout)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="koordpy", description=__doc__)
    parser.add_argument("--version", action="version", version=f"koordpy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate", help="schedule manifests offline, no cluster needed")
    sim.add_argument("-f", "--file", action="append", required=True, metavar="PATH",
                     help="a manifest file or a folder of them; repeatable, read in order")
    sim.add_argument("-o", "--output", choices=("json", "table"), default="table")
    sim.add_argument("--scheduler-name", action="append", metavar="NAME",
                     help="pods with this spec.schedulerName are ours (default: koordpy); repeatable")
    sim.set_defaults(func=cmd_simulate)
    live = sub.add_parser("run", help="run as a scheduler in a cluster")
    live.add_argument("--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, else in-cluster config")
    live.add_argument("--scheduler-name", action="append", metavar="NAME",
                      help="claim pods with this spec.schedulerName (default: koordpy); repeatable")
    live.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"), default="INFO")
    live.set_defaults(func=cmd_run)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from koordpy.controller.main import run  # imports kopf; simulate does not need it

    return run(args.kubeconfig, args.scheduler_name or ["koordpy"], args.log_level)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except BrokenPipeError:  # `koordpy simulate ... | head` is not an error
        sys.stderr.close()
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
