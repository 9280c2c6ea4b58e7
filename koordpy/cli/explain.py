"""``koordpy explain``: why a pod or a PodGroup waits, or where it went.

Reads the cluster (read-only: LIST calls only) or manifests (``-f``, as ``koordpy simulate``
reads them, through ``koordpy.cli.manifests``), asks ``koordpy.core.explain`` and prints the answer
as text or JSON. The core, the simulator and the controller are imported inside the functions that
need them, so that they are paid only by this command.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
import time
from typing import TYPE_CHECKING, Any, TextIO

from koordpy.cli.manifests import UsageError, load_documents
from koordpy.errors import KoordpyError

if TYPE_CHECKING:
    from koordpy.core.explain import Explanation, PreemptionFacts
    from koordpy.core.snapshot import Snapshot

PROG = "koordpy explain"
TARGET_KINDS = ("pod", "podgroup")
MESSAGE_WIDTH = 110


class NotFound(KoordpyError):
    """No such pod or PodGroup in the input (exit 1); the message names it as the user gave it."""

    fold = False


def parse_target(words: list[str]) -> tuple[str, str]:
    """``[pod|podgroup] [NAMESPACE/]NAME`` as (kind, key); a bare NAME stays bare (its namespace is
    the caller's to find, as kubectl finds it: ``with_namespace``)."""
    if len(words) == 1:
        kind, key = "pod", words[0]
    elif len(words) == 2:
        kind, key = words
        if kind not in TARGET_KINDS:
            raise UsageError(f"{kind!r}: expected pod or podgroup before {key}")
    else:
        raise UsageError(f"expected [pod|podgroup] [NAMESPACE/]NAME, got {' '.join(words)!r}")
    if "/" not in key and key:
        return kind, key
    parts = key.split("/")
    # A podgroup may also be named as messages name an implicit group: NAMESPACE/KIND/NAME
    # (the pods of Job t in default are the group default/Job/t), with what follows it in such a
    # key (a JobSet's restart attempt: default/JobSet/t/attempt-1).
    if kind == "podgroup" and len(parts) >= 3 and all(parts):
        return kind, key
    if len(parts) != 2 or not all(parts):
        shape = "NAMESPACE/NAME or NAMESPACE/KIND/NAME" if kind == "podgroup" else "NAMESPACE/NAME"
        raise UsageError(f"{key!r}: expected {shape}")
    return kind, key


def with_namespace(key: str, namespace: str) -> str:
    """``key`` as ``namespace/NAME`` when the user gave a bare NAME."""
    return key if "/" in key else f"{namespace}/{key}"


# -- reading -----------------------------------------------------------------------------


def snapshot_from_files(paths: list[str], names: frozenset[str], simulate_first: bool,
                        notes: list[str]) -> tuple[Snapshot, float]:
    """The snapshot the manifests describe (after scheduling them as ``simulate`` does, if asked)."""
    from koordpy.sim.simulator import World, simulate  # the core and numba: only the commands that schedule pay

    loaded = load_documents(paths)
    world = World.from_objects(loaded.docs)
    notes.extend(loaded.notes)
    notes.extend(f"not acted on: {line}" for line in world.ignored)
    notes.extend(world.created)
    notes.extend(world.absent_group_kinds())
    if simulate_first:
        result = simulate(world, names)
        if result.truncated:
            notes.append(f"the simulation stopped at its limit of {result.rounds} rounds before it settled")
    return world.snapshot(names), world.now


def snapshot_from_cluster(kubeconfig: str | None, names: frozenset[str],
                          notes: list[str]) -> tuple[Snapshot, dict[str, str]]:
    if kubeconfig and not os.path.exists(kubeconfig):
        raise UsageError(f"--kubeconfig {kubeconfig}: no such file")
    from koordpy.controller.oneshot import read_snapshot  # the API client: only a live read pays for it

    try:
        return read_snapshot(kubeconfig, names, notes)
    except Exception as exc:  # no config, no API server, no permission: one line, not a traceback
        raise UsageError(f"cannot list the cluster: {type(exc).__name__}: {' '.join(str(exc).split())}") from exc


# -- rendering ---------------------------------------------------------------------------


def _short(text: str, width: int = MESSAGE_WIDTH) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _wrap(text: str, indent: str, width: int = 100) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), width=width, initial_indent=indent, subsequent_indent=indent) or [
        indent.rstrip()]


def render_text(exp: Explanation, out: TextIO) -> None:
    w = out.write
    w(f"{exp.kind} {exp.key}: {exp.status.upper()}\n")
    for line in _wrap(exp.summary, "  "):
        w(line + "\n")
    w(f"\nJob         {exp.job}: {exp.job_kind}, priority {exp.priority}\n")
    for g in exp.gangs:
        what = f"gang {g.key} ({g.declared_by})"
        if g.part_of:
            what = f"group {g.key} ({g.declared_by}) in gang {g.part_of}"
        if g.min_member is None and g.part_of is None:
            w(f"  {what}: invalid: {_short(g.error or '')}\n")
            continue
        # Short only where it holds pods back: a gang whose members all run (others finished) waits for nothing.
        short = (f" (SHORT by {g.min_member - g.members})"
                 if g.min_member is not None and g.pending and g.members < g.min_member else "")
        finished = f" (and {g.finished} finished)" if g.finished else ""
        said = g.declared_minimum
        # Waiting (reservations), a mode and a waiting time are only Koordinator's gangs' (mode None otherwise).
        waiting = f", {g.waiting} waiting" if g.mode is not None else ""
        timeout = f", timeout {g.timeout_seconds:g}s" if g.timeout_seconds is not None else ""
        mode = f"; {g.mode}{timeout}" if g.mode is not None else ""
        timed_out = ", TIMED OUT" if g.timed_out else ""
        w(f"  {what}: {g.members} pod(s){finished} of {said}{short}; "
          f"{g.bound} bound, {g.pending} pending{waiting}{mode}{timed_out}\n")
        if g.error:
            w(f"    error: {_short(g.error)}\n")
        for what, value in g.details:
            w(f"    {what}: {_short(value)}\n")
    if exp.topology is not None:
        t = exp.topology
        w(f"Topology    {t.source}: required {'; '.join(t.required) or '-'}; "
          f"preferred {'; '.join(t.preferred) or '-'}\n")
    if exp.pods:
        width = max(len(p.key) for p in exp.pods)
        w("Pods\n")
        for p in exp.pods:
            where = " > ".join(p.path) if p.path else (f"nominated {p.nominated_node}" if p.nominated_node else "-")
            w(f"  {p.key:<{width}}  {p.state:<11}  {where}\n")
            for c in p.claims:  # its ResourceClaims: made, allocated, held by whom
                said = (f"{c.claim}, allocated {', '.join(c.devices)}" if c.devices else f"{c.claim}, not allocated"
                        ) if c.claim else "not created yet"
                who = f"; reserved for {', '.join(c.reserved_for)}" if c.reserved_for else ""
                w(f"    claim {c.name}: {said}{who}\n")
    if exp.would_place:
        w("Would place (dry run)\n")
        for pod, node in exp.would_place:
            w(f"  {pod} -> {node}\n")
    d = exp.diagnosis
    if d is not None:
        w("Diagnosis   (dry run)\n")
        if d.filtered:
            w(f"  filters: {sum(n for _, n in d.filtered)} node removal(s) of {d.nodes} nodes\n")
            width = max(len(str(n)) for _, n in d.filtered)
            for why, n in d.filtered:
                w(f"    {n:>{width}} node(s): {why}\n")
        else:
            w(f"  filters: none of the {d.nodes} nodes removed by selectors, taints or cordons\n")
        if d.domains:
            w(f"  offerslots per domain (desired {d.desired}), best first:\n")
            width = max(len(name) for name, _ in d.domains)
            for name, slots in d.domains[:8]:
                gap = d.desired - slots
                w(f"    {name:<{width}}  {slots:>4}  {'fits' if gap <= 0 else f'short {gap}'}\n")
            if len(d.domains) > 8:
                w(f"    ... {len(d.domains) - 8} more (see -o json)\n")
        if d.closest is not None:  # what the best domain lacked: the nodes of it the job cannot use
            from koordpy.core.messages import lacked  # the core: only a diagnosis with a closest domain pays

            said = f"closest: {d.closest.domain}, {d.closest.offers} of {d.desired}: {lacked(d.closest)}"
            for line in textwrap.wrap(said, width=100, initial_indent="  ", subsequent_indent="    "):
                w(line + "\n")
        # The preemption dry run, when it ran, is the answer; the diagnosis alone only bounds it.
        pre = exp.preemption
        if pre is not None and pre.outcome != "not-tried":
            helps = pre.outcome in ("nominated", "waiting") or pre.try_again_at is not None
        else:
            helps = d.resolvable and d.fits_empty is not False
        w(f"  fits the nodes with every other pod gone: "
          f"{'-' if d.fits_empty is None else 'yes' if d.fits_empty else 'no'}; "
          f"preemption could help: {'yes' if helps else 'no'}\n")
    pre = exp.preemption
    if pre is not None:
        _render_preemption(pre, out)
    if exp.changes:
        w("What would change the answer\n")
        for change in exp.changes:
            lines = _wrap(change, "    ")
            w("  - " + lines[0].lstrip() + "\n")
            for line in lines[1:]:
                w(line + "\n")


def _render_preemption(p: PreemptionFacts, out: TextIO) -> None:
    w = out.write
    nominated = ", ".join(f"{k}->{n}" for k, n in p.nominated) or "none"
    w(f"Preemption  policy {p.policy}, priority {p.priority}; nominated: {nominated}\n")
    if p.terminating:
        w(f"  terminating victims: {', '.join(p.terminating)}\n")
    said = p.message or ("nothing to evict where the job could go" if p.outcome == "none" else "")
    w(f"  dry run: {p.outcome}{f' - {_short(said)}' if said else ''}\n")
    if p.would_evict:
        w(f"  would evict: {', '.join(p.would_evict)} (in {p.where})\n")
    for name, n in p.beyond_budgets:
        w(f"  breaks PodDisruptionBudget {name}: {n} pod(s) beyond its budget\n")
    if p.kept_by_budgets:
        w(f"  kept by PodDisruptionBudgets: {', '.join(p.kept_by_budgets)}\n")
    if p.would_release:
        w(f"  would take back room nominated for: {', '.join(p.would_release)}\n")
    if p.would_nominate:
        w(f"  would nominate: {', '.join(f'{k}->{n}' for k, n in p.would_nominate)}\n")


# -- the command -------------------------------------------------------------------------


def cmd_explain(args: argparse.Namespace) -> int:
    names = frozenset(args.scheduler_name or ["koordpy"])
    notes: list[str] = []
    invalid: dict[str, str] = {}
    kind, key = parse_target(args.target)
    if "/" in key and args.namespace:
        raise UsageError(f"{key!r} names its namespace: give -n/--namespace with a bare NAME only")
    if args.file and args.kubeconfig:
        raise UsageError("give -f files or --kubeconfig, not both")
    if args.simulate and not args.file:
        raise UsageError("--simulate needs -f files (a live cluster is explained as it stands)")
    if args.file:
        key = with_namespace(key, args.namespace or "default")
        snapshot, now = snapshot_from_files(args.file, names, args.simulate, notes)
    else:
        if "/" not in key:
            from koordpy.controller.oneshot import default_namespace  # the API client: only a live read pays

            key = with_namespace(key, args.namespace or default_namespace(args.kubeconfig))
        snapshot, invalid = snapshot_from_cluster(args.kubeconfig, names, notes)
        now = time.time()
    for line in notes:
        print(f"{PROG}: note: {line}", file=sys.stderr)
    # The core: only the commands that schedule pay for it.
    from koordpy.core.explain import explain_pod, explain_podgroup
    from koordpy.core.state import SchedulerState

    # The running scheduler's memory (NonStrict reservations, gang waits) is not readable from
    # outside; a fresh state is what a restarted scheduler would start from.
    state = SchedulerState()
    if kind == "pod":
        exp = explain_pod(snapshot, state, now, key, invalid)
    else:
        exp = explain_podgroup(snapshot, state, now, key)  # AmbiguousGang: a short name several groups share
    if exp is None:
        where = "in the given files" if args.file else "in the cluster"
        what = "pod" if kind == "pod" else "PodGroup (or gang)"
        raise NotFound(f"no {what} {key} {where}")
    if args.output == "json":
        json.dump(exp.to_json(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        render_text(exp, sys.stdout)
    return 0


USAGE = ("koordpy explain [pod|podgroup] [NAMESPACE/][KIND/]NAME [-n NAMESPACE] [-f PATH]... [--kubeconfig PATH]\n"
         "                       [--simulate] [-o {table,json}] [--scheduler-name NAME]...")

HELP = """\
Why is my job stuck? Explains why a pod or a PodGroup waits, or where it went, from the
scheduler's own diagnosis and a dry run that changes nothing: the job's gangs against their
minimums, its topology requirement, the filters that removed nodes, the offerslots of each
domain against the pods wanted, the preemption state, and what would change the answer.
Reads the live cluster with LIST calls only, or manifests with -f.
"""

EPILOG = """\
examples:
  koordpy explain default/train-0
  koordpy explain train-0 -n ml              # a bare NAME: -n, else the kubeconfig context's namespace
  koordpy explain podgroup default/train --kubeconfig ~/.kube/config -o json
  koordpy explain podgroup default/Job/tune -f examples/kai-rack --simulate
  koordpy explain default/too-big-0 -f examples/spine-block --simulate
  kubectl get nodes,pods,podgroups.scheduling.sigs.k8s.io,clusternetworktopologies -A -o yaml \\
    | koordpy explain default/train-0 -f -

exit status: 0 answered; 1 no such pod or PodGroup; 2 invalid arguments or input (one line on
stderr naming the file, the object and the field), or a short group name several groups share.
"""


def add_parser(sub: Any) -> None:
    """``koordpy explain ...`` under the main parser's subcommands."""
    raw = argparse.RawDescriptionHelpFormatter
    cmd = sub.add_parser("explain", help="why is my job stuck? why a pod or PodGroup waits, or where it went",
                         description=HELP, epilog=EPILOG, formatter_class=raw, usage=USAGE)
    cmd.add_argument("target", nargs="+", metavar="TARGET",
                     help="NAMESPACE/NAME of a pod, `pod NAMESPACE/NAME` or `podgroup NAMESPACE/NAME`; a bare "
                          "NAME is in the namespace of -n, else of the kubeconfig's current context (in-cluster: "
                          "the pod's own; with -f: default), as kubectl takes it; a group koordpy forms from an "
                          "owner's pods is `podgroup NAMESPACE/KIND/NAME` as messages name it (or NAMESPACE/NAME "
                          "when no other group has that name)")
    cmd.add_argument("-n", "--namespace", metavar="NAMESPACE",
                     help="the namespace of a bare NAME (default: the kubeconfig context's, else default)")
    cmd.add_argument("-f", "--file", action="append", metavar="PATH",
                     help="explain against manifests instead of the cluster (files, folders, - for standard "
                          "input; repeatable, as for `simulate`)")
    cmd.add_argument("--kubeconfig", metavar="PATH",
                     help="the cluster to read (default: $KUBECONFIG, else in-cluster config)")
    cmd.add_argument("--simulate", action="store_true",
                     help="with -f: first schedule the manifests as `koordpy simulate` does, then explain "
                          "where that leaves the pod")
    cmd.add_argument("-o", "--output", choices=("table", "json"), default="table", help="table (default) or json")
    cmd.add_argument("--scheduler-name", action="append", metavar="NAME",
                     help="pods with this spec.schedulerName are koordpy's (default: koordpy); repeatable")
    cmd.set_defaults(func=cmd_explain, prog=PROG)
