"""``koordpy run``: the live scheduler's flags and configuration file, then the controller.

Belongs here: the flags, setting them over the configuration file (``koordpy.settings`` reads and
checks it) and naming the flag in a problem with one. Does not belong here: anything the running
scheduler does (``koordpy.controller``).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from koordpy.settings import Settings

PROG = "koordpy run"

RUN_HELP = """\
Runs as a scheduler in a cluster, beside kube-scheduler: watches nodes, pods, PriorityClasses,
PodGroups (scheduler-plugins, Volcano, KAI), the ClusterNetworkTopology, Volcano HyperNodes,
Kueue/KAI Topology objects and the owners of pods (Jobs, ReplicaSets, Deployments...), and binds
the pods whose spec.schedulerName is one of its names.
"""

RUN_EPILOG = """\
example:
  koordpy run --kubeconfig ~/.kube/config --scheduler-name koordpy
"""


RUN_FLAGS = {"schedulerNames": "--scheduler-name", "preemption": "--preemption", "podsPerCycle": "--pods-per-cycle",
             "topologySources": "--topology-source", "logging.level": "--log-level",
             "logging.format": "--log-format", "leaderElection.enabled": "--leader-elect",
             "leaderElection.leaseName": "--leader-elect-lease-name",
             "leaderElection.leaseNamespace": "--leader-elect-lease-namespace",
             "server.bindAddress": "--bind-address"}


def run_settings(args: argparse.Namespace) -> Settings:
    """The configuration file (or the defaults) with the flags given set over it. A problem with a
    flag names the flag, not the file's key (``SettingsError``, exit 2)."""
    from koordpy.settings import Settings, SettingsError, load, override  # pydantic: only run pays for it

    try:
        base = load(args.config) if args.config else Settings.model_validate({})
        given = [args.scheduler_name, args.preemption, args.pods_per_cycle, args.topology_source, args.log_level,
                 args.log_format, args.leader_elect, args.leader_elect_lease_name, args.leader_elect_lease_namespace,
                 args.bind_address]
        return override(base, dict(zip(RUN_FLAGS, given, strict=True)))
    except SettingsError as exc:
        message = str(exc)
        if not message.startswith("command line: "):
            raise
        key, _, why = message.removeprefix("command line: ").partition(": ")  # name the flag, not the key
        flag = RUN_FLAGS.get(key.split(".")[0] if key.startswith(("schedulerNames", "topologySources"))
                             else key, key)
        raise SettingsError(f"{flag}: {why}") from exc


def cmd_run(args: argparse.Namespace) -> int:
    settings = run_settings(args)
    from koordpy.controller.main import run  # imports kopf; simulate does not need it

    return run(args.kubeconfig, settings)


def add_parser(sub: Any) -> None:
    """``koordpy run ...`` under the main parser's subcommands."""
    raw = argparse.RawDescriptionHelpFormatter
    live = sub.add_parser("run", help="the live scheduler, beside kube-scheduler: binds the pods whose "
                          "spec.schedulerName is one of its names",
                          description=RUN_HELP, epilog=RUN_EPILOG, formatter_class=raw)
    live.add_argument("--config", metavar="PATH",
                      help="a SchedulerConfiguration YAML file (the Helm chart mounts one); flags override it")
    live.add_argument("--kubeconfig", metavar="PATH", help="default: $KUBECONFIG, else in-cluster config")
    live.add_argument("--scheduler-name", action="append", metavar="NAME",
                      help="claim pods with this spec.schedulerName (default: koordpy); repeatable")
    live.add_argument("--preemption", action=argparse.BooleanOptionalAction, default=None,
                      help="preempt lower-priority jobs for a job that does not fit (default: on)")
    live.add_argument("--pods-per-cycle", type=int, metavar="N",
                      help="place at most N pods in one scheduling cycle, the rest in the next one at once; "
                           "a gang is never split (default: 100; 0: no limit)")
    live.add_argument("--topology-source", action="append", metavar="SOURCE",
                      choices=("koordinator", "volcano", "kueue"),
                      help="watch this source of network topology: koordinator (ClusterNetworkTopology), volcano "
                           "(HyperNode), kueue (Kueue/KAI Topology); repeatable (default: all three)")
    live.add_argument("--log-level", type=str.upper, choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    live.add_argument("--log-format", choices=("auto", "json", "console"),
                      help="json lines, console (for people), or auto: console on a terminal (default)")
    live.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None,
                      help="run as one of several replicas: only the holder of a Lease schedules (default: off; "
                           "the Helm chart turns it on)")
    live.add_argument("--leader-elect-lease-name", metavar="NAME", help="default: koordpy")
    live.add_argument("--leader-elect-lease-namespace", metavar="NAMESPACE",
                      help="default: $POD_NAMESPACE, else default")
    live.add_argument("--bind-address", metavar="HOST:PORT",
                      help="serve /metrics, /healthz and /readyz here (default 0.0.0.0:10251; port 0: any free "
                           "port; \"\": none)")
    live.set_defaults(func=cmd_run, prog=PROG)
