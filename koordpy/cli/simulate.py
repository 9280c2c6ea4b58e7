"""``koordpy simulate``: schedules manifests offline with the same core as ``koordpy run`` and
prints where each pod lands or why it waits.

Belongs here: the command's flags, reading its input (through ``koordpy.cli.manifests``), the
table and JSON output, and its notes and warnings on stderr. Does not belong here: parsing or
scheduling (``koordpy.sim`` does both) or how errors become exit statuses (``koordpy.cli.main``).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from koordpy.cli.manifests import read_aside
from koordpy.errors import KoordpyError

if TYPE_CHECKING:
    from koordpy.sim.simulator import SimulationResult

PROG = "koordpy simulate"
EXIT_ROUND_LIMIT = 3


class RoundLimit(KoordpyError):
    """The simulation stopped at its round limit before the cluster settled (exit 3); raised after
    the partial result is printed."""

    exit_code = EXIT_ROUND_LIMIT


def print_table(result: SimulationResult, out: TextIO) -> None:
    rows = [(pod, node, "Bound", "") for pod, node in sorted(result.bound.items())]
    rows += [(pod, "-", "Pending", msg) for pod, msg in sorted(result.pending.items())]
    rows += [(pod, "-", "Preempted", "") for pod in result.preempted]
    rows += [(pod, "-", "Evicted", reason) for pod, reason in sorted(result.evicted.items())]
    width = max([len("POD"), *(len(r[0]) for r in rows), *(len(k) for k in result.groups),
                 *(len(k) for k in result.volumes)])
    nwidth = max([len("NODE"), *(len(r[1]) for r in rows)])
    out.write(f"{'POD':<{width}}  {'NODE':<{nwidth}}  {'STATUS':<9}  MESSAGE\n")
    for pod, node, status, msg in rows:
        short = msg if len(msg) <= 160 else msg[:157] + "..."
        out.write(f"{pod:<{width}}  {node:<{nwidth}}  {status:<9}  {short}\n")
    # The groups' objects, one table per heading and columns their dialects give, in the order the
    # dialects report them: tables of more columns (a phase and counts) before one-column tables.
    sections: dict[tuple[tuple[tuple[str, int], ...], str], dict[str, tuple[str, ...]]] = {}
    for key in result.groups:
        row = result.group_rows[key]
        sections.setdefault((row.columns, result.group_headings.get(key, "")), {})[key] = row.cells
    for columns, heading in sorted(sections, key=lambda section: -len(section[0])):
        out.write(f"\n{heading:<{width}}" + "".join(f"  {title:<{pad}}" for title, pad in columns) + "\n")
        for key, cells in sorted(sections[columns, heading].items()):
            out.write(f"{key:<{width}}" + "".join(f"  {cell:<{pad}}" for (_, pad), cell in zip(columns, cells,
                                                                                              strict=True)) + "\n")
    if result.volumes:  # what PreBind wrote on claims before their pods' bindings
        out.write(f"\n{'CLAIM':<{width}}  PREBIND\n")
        for key, wrote in sorted(result.volumes.items()):
            what = (f"volume.kubernetes.io/selected-node={wrote['selectedNode']}" if "selectedNode" in wrote
                    else f"bound to PersistentVolume {wrote['volume']}")
            out.write(f"{key:<{width}}  {what}\n")
    if result.devices:  # DRA: the devices each bound pod's claims hold
        out.write(f"\n{'POD':<{width}}  DEVICES\n")
        for key, devices in sorted(result.devices.items()):
            out.write(f"{key:<{width}}  {', '.join(devices) or '-'}\n")
    evicted = f", {len(result.evicted)} evicted" if result.evicted else ""
    out.write(f"\n{len(result.bound)} bound, {len(result.pending)} pending, {len(result.preempted)} preempted"
              f"{evicted}\n")



def cmd_simulate(args: argparse.Namespace) -> int:
    # Parsing a cluster dump makes millions of objects that all live to the end: the collector
    # would walk them again and again for nothing (a sixth of a 5,000-node run). It stays off
    # while they are made, and what exists then is frozen out of its sight.
    gc.disable()
    try:
        wait = read_aside(args.file)
        # Imported after the fork, not at the top: loading the scheduler and its kernels overlaps
        # with the child's parsing, the child stays small, and the other commands never pay for them.
        from koordpy.kernels import warm_up
        from koordpy.sim.simulator import World, simulate

        warm_up()  # numba loads each kernel on its first call; do it while the child parses
        loaded = wait()
        world = World.from_objects(loaded.docs)
    finally:
        gc.freeze()
        gc.enable()
    for line in (*loaded.notes, *(f"not acted on: {x}" for x in world.ignored), *world.created):
        print(f"koordpy simulate: note: {line}", file=sys.stderr)
    for line in world.absent_group_kinds():
        print(f"koordpy simulate: warning: {line}", file=sys.stderr)
    names = frozenset(args.scheduler_name or ["koordpy"])
    graces = {"stale_grace": args.stale_gang_grace_period,
              "admitted_stale_grace": args.admitted_stale_gang_grace_period}
    extra = {k: v for k, v in graces.items() if v is not None}
    result = simulate(world, names, default_min_runtime=args.default_preempt_min_runtime,
                      default_preemption_delay=args.default_preemption_delay, **extra)
    for status in result.statuses:  # the live scheduler tells these in the object's condition and Events
        for problem in status.problems:
            print(f"koordpy simulate: warning: {status.kind.kind} {status.name}: {problem}", file=sys.stderr)
    from koordpy.core.decisions import EventReason  # loaded with the core, after the fork (above)

    # A minimum runtime or preemption delay that cannot be read counts as 0: the live scheduler says
    # so in a Warning Event, simulate on standard error too (once each).
    for line in dict.fromkeys(e.message for e in result.events
                              if e.reason == EventReason.INVALID_PREEMPTION_SETTING):
        print(f"koordpy simulate: warning: {line}", file=sys.stderr)
    if args.output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_table(result, sys.stdout)
    if result.truncated:
        sys.stdout.flush()
        raise RoundLimit(f"stopped at the limit of {result.rounds} scheduling rounds before the cluster settled; "
                         "the result above is partial")
    return 0



SIMULATE_HELP = """\
Schedules Kubernetes manifests offline, with the same core as `koordpy run`, and prints
where each pod lands or why it waits. Pods with spec.nodeName are running there; pending
pods whose schedulerName is ours are scheduled. Nothing is sent to a cluster.
"""

SIMULATE_EPILOG = """\
examples:
  # the built-in example: a folder of manifests
  koordpy simulate -f examples/spine-block

  # what if: replay a live cluster from standard input, add a new job
  kubectl get -A -o yaml \\
    nodes,pods,priorityclasses,runtimeclasses,jobs,podgroups.scheduling.sigs.k8s.io,clusternetworktopologies \\
    | koordpy simulate -f - -f new-job.yaml
  (each PodGroup kind by its full name: a bare `podgroups` is Kubernetes' own
  scheduling.k8s.io PodGroup on a v1.37 cluster that serves it)

exit status: 0 simulated (pods that cannot be placed are listed as Pending, with why);
2 invalid input (one line on stderr naming the file, the object and the field);
3 the simulation hit its round limit (the printed result is partial).
"""


def add_parser(sub: Any) -> None:
    """``koordpy simulate ...`` under the main parser's subcommands."""
    raw = argparse.RawDescriptionHelpFormatter
    sim = sub.add_parser("simulate", help="where would these pods go, or why would they wait? Schedules "
                         "manifests offline with the same core as `run`; no cluster needed",
                         description=SIMULATE_HELP, epilog=SIMULATE_EPILOG, formatter_class=raw)
    sim.add_argument("-f", "--file", action="append", required=True, metavar="PATH",
                     help="a manifest file, a folder of *.yaml/*.yml, or - for standard input; "
                          "repeatable, read in order")
    sim.add_argument("-o", "--output", choices=("json", "table"), default="table",
                     help="table (default) or json")
    sim.add_argument("--scheduler-name", action="append", metavar="NAME",
                     help="pods with this spec.schedulerName are ours (default: koordpy); repeatable")
    sim.add_argument("--default-preempt-min-runtime", type=_seconds, default=0.0, metavar="SECONDS",
                     help="a job's minimum runtime where it sets none (the setting "
                          "defaultPreemptMinRuntimeSeconds; default 0)")
    sim.add_argument("--default-preemption-delay", type=_seconds, default=0.0, metavar="SECONDS",
                     help="a job's preemption delay where it sets none (the setting "
                          "defaultPreemptionDelaySeconds; default 0)")
    sim.add_argument("--stale-gang-grace-period", type=float, metavar="SECONDS",
                     help="how long a gang may run below its minimum before the rest of it is evicted, where "
                          "the job sets none (staleGangGracePeriodSeconds; default 60; negative: only reported)")
    sim.add_argument("--admitted-stale-gang-grace-period", type=float, metavar="SECONDS",
                     help="the same for a gang a controller in front of koordpy admitted, which recovers it "
                          "itself (admittedStaleGangGracePeriodSeconds; default -1: only reported)")
    sim.set_defaults(func=cmd_simulate, prog=PROG)


def _seconds(text: str) -> float:
    """A number of seconds, 0 to a week (the settings' bounds)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 <= value <= 604800:
        raise argparse.ArgumentTypeError(f"must be 0 to 604800 seconds, got {text}")
    return value
