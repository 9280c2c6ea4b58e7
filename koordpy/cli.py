"""The ``koordpy`` command line: reads files, calls the simulator or the controller, prints.

This module (with ``koordpy.topology_cli``, its ``topology`` commands, and ``koordpy.explain_cli``,
``explain``), ``koordpy.settings`` (which reads ``run``'s configuration file) and
``koordpy.controller`` are the only places that do I/O.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import pickle
import shutil
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

import yaml

from koordpy import __version__
from koordpy.sim.errors import InputError

if TYPE_CHECKING:
    from koordpy.settings import Settings
    from koordpy.sim.simulator import SimulationResult

FOLDER_SUFFIXES = (".yaml", ".yml")  # a folder's JSON files are often not manifests
FOLDER_RULE = "only *.yaml/*.yml are read from folders"
STDIN = "-"
STDIN_NAME = "<stdin>"
EXIT_INPUT = 2
EXIT_ROUND_LIMIT = 3
_MERGE_TAG = "tag:yaml.org,2002:merge"
_STR_TAG = "tag:yaml.org,2002:str"

# libyaml's parser is several times faster on a cluster-sized dump; the constructor stays Python either way.
_BaseLoader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class NoDuplicateKeys(yaml.constructor.SafeConstructor):
    """Refuses a key given twice in one mapping (PyYAML keeps the last, silently)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        explicit = [k for k, _ in node.value]  # before flatten_mapping splices merged (<<) keys in
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        if len(mapping) == len(node.value) == len(explicit):
            return mapping
        seen: dict[Any, yaml.Node] = {}
        for key_node in explicit:
            if key_node.tag == _MERGE_TAG:
                continue  # a merged key that is also given explicitly is overridden by design
            key = self.construct_object(key_node)  # already constructed above: a cache look-up
            if key in seen:
                first = seen[key].start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {first})", key_node.start_mark)
            seen[key] = key_node
        return mapping


class _Loader(NoDuplicateKeys, _BaseLoader):  # type: ignore[valid-type,misc]
    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        # Most scalars of a manifest are quoted, or plain and starting with a character no implicit
        # type (int, bool, null, timestamp...) can start with: they are strings, decided without
        # the regex walk. The rest, and every collection, goes the usual way.
        if kind is yaml.ScalarNode and (not implicit[0] or (value and value[0] not in _IMPLICIT_FIRST)):
            return _STR_TAG
        return super().resolve(kind, value, implicit)

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        pass  # no path resolvers are registered, so there is no path to track

    def ascend_resolver(self) -> None:
        pass


_IMPLICIT_FIRST = frozenset(k for k in _Loader.yaml_implicit_resolvers if k)


def _documents(text: str) -> list[Any]:
    """Every document of ``text``. libyaml composes the nodes; turning them into dicts and lists here,
    strings straight from the node, costs half of what PyYAML's generic constructor does on a
    cluster-sized dump. Anything unusual (merge keys, non-string scalars, unknown tags) still goes
    through the constructor above, duplicate check and error messages included."""
    loader = cast(Any, _Loader)(text)  # its libyaml base is untyped
    try:
        out = []
        while loader.check_node():
            node = loader.get_node()
            out.append(None if node is None else _build(node, loader, {}))
        return out
    finally:
        loader.dispose()


def _build(node: yaml.Node, loader: _Loader, seen: dict[int, Any]) -> Any:
    kind = node.__class__
    if kind is yaml.ScalarNode:
        return node.value if node.tag == _STR_TAG else loader.construct_object(node, deep=True)
    done = seen.get(id(node))  # an alias of a collection built already
    if done is not None:
        return done
    if kind is yaml.SequenceNode:
        items: list[Any] = []
        seen[id(node)] = items
        items.extend(_build(n, loader, seen) for n in node.value)
        return items
    if node.tag != "tag:yaml.org,2002:map" or any(k.tag == _MERGE_TAG for k, _ in node.value):
        return loader.construct_object(node, deep=True)
    mapping: dict[Any, Any] = {}
    seen[id(node)] = mapping
    for key_node, value_node in node.value:
        key = _build(key_node, loader, seen)
        try:
            duplicate = key in mapping
        except TypeError:
            duplicate = True
        if duplicate:  # the constructor says what is wrong, in the words it uses everywhere
            return loader.construct_object(node, deep=True)
        mapping[key] = _build(value_node, loader, seen)
    return mapping


class UsageError(ValueError):
    """Input that is wrong as a whole rather than in one object (exit 2 too)."""


@dataclass
class Loaded:
    docs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def yaml_problem(name: str, text: str, exc: yaml.YAMLError) -> str:
    """``NAME:LINE:COLUMN: problem`` on one line, instead of PyYAML's multi-line dump."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "not valid YAML"
        if exc.problem and exc.context and exc.context_mark is not None:
            problem += f" ({exc.context} at line {exc.context_mark.line + 1})"
        where = f"{name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else name
        return f"{where}: {problem}"
    if isinstance(exc, yaml.reader.ReaderError):
        before = text[:exc.position]
        line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        return f"{name}:{line}:{column}: unacceptable character #x{char:04x}: {exc.reason}"
    return f"{name}: not valid YAML: {' '.join(str(exc).split())}"


def parse_manifests(name: str, text: str) -> tuple[list[tuple[str, dict[str, Any]]], str]:
    """The objects in one file's text, each with ``NAME (document N[, item M])``; and, when there are
    none, why (for the message)."""
    try:
        loaded = _documents(text)
    except yaml.YAMLError as exc:
        raise UsageError(yaml_problem(name, text, exc)) from exc
    except RecursionError as exc:
        raise UsageError(f"{name}: nested too deeply to be a Kubernetes object") from exc
    docs: list[tuple[str, dict[str, Any]]] = []
    lists = 0
    for i, doc in enumerate(loaded):
        where = f"{name} (document {i + 1})"
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(where, f"not a Kubernetes object (a {type(doc).__name__})")
        if not str(doc.get("kind", "")).endswith("List") or "items" not in doc:
            docs.append((where, doc))
            continue
        items = doc["items"] if doc["items"] is not None else []
        if not isinstance(items, list):
            raise InputError(where, f"{doc['kind']}: items: expected a list, got {type(items).__name__}")
        lists += 1
        docs.extend((f"{name} (document {i + 1}, item {j + 1})", item) for j, item in enumerate(items))
    why = "a List with no items" if lists else "empty"
    return docs, why


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise InputError(str(path), f"cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise InputError(str(path), f"cannot read: not UTF-8 text (byte {exc.start})") from exc


def _read_stdin(stdin: TextIO) -> str:
    try:
        data = stdin.buffer.read() if hasattr(stdin, "buffer") else stdin.read()
        return data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise InputError(STDIN_NAME, f"cannot read: not UTF-8 text (byte {exc.start})") from exc


def load_documents(paths: list[str], stdin: TextIO | None = None) -> Loaded:
    """Every object in the given files, folders (their ``*.yaml``/``*.yml`` in name order) and ``-``
    (standard input), in order. An input that yields no object is an error: a replay whose
    ``kubectl get`` failed must not quietly simulate an empty cluster."""
    if paths.count(STDIN) > 1:
        raise UsageError(f"'-f -' given {paths.count(STDIN)} times: standard input can be read once")
    out = Loaded()
    empty: list[str] = []
    for p in paths:
        if p == STDIN:
            found, why = parse_manifests(STDIN_NAME, _read_stdin(stdin or sys.stdin))
            out.docs.extend(found)
            if not found:
                empty.append(f"{STDIN_NAME} ({why})")
            continue
        path = Path(p)
        if path.is_dir():
            _load_folder(path, out, empty)
        elif path.exists():  # a regular file, or a pipe such as <(kubectl get ... -o yaml)
            found, why = parse_manifests(p, _read(path))
            out.docs.extend(found)
            if not found:
                empty.append(f"{p} ({why})")
        else:
            raise InputError(p, "no such file or folder")
    if empty:
        raise UsageError(f"no Kubernetes objects in: {'; '.join(empty)}")
    return out


def _load_folder(path: Path, out: Loaded, empty: list[str]) -> None:
    label = str(path).rstrip("/") + "/"
    entries = sorted(path.iterdir())
    files = [f for f in entries if f.suffix.lower() in FOLDER_SUFFIXES and f.is_file()]
    skipped = [f.name + ("/" if f.is_dir() else "") for f in entries if f not in files]
    found_here = 0
    for f in files:
        found, _ = parse_manifests(str(f), _read(f))
        out.docs.extend(found)
        found_here += len(found)
    if found_here and skipped:
        out.notes.append(f"{label}: skipped {', '.join(skipped)} ({FOLDER_RULE})")
    elif not found_here:
        parts = [f"read {', '.join(f.name for f in files)}: no objects"] if files else []
        if skipped:
            parts.append(f"skipped {', '.join(skipped)}: {FOLDER_RULE}")
        empty.append(f"{label} ({'; '.join(parts) or 'an empty folder'})")


def print_table(result: SimulationResult, out: TextIO) -> None:
    rows = [(pod, node, "Bound", "") for pod, node in sorted(result.bound.items())]
    rows += [(pod, "-", "Pending", msg) for pod, msg in sorted(result.pending.items())]
    rows += [(pod, "-", "Preempted", "") for pod in result.preempted]
    width = max([len("POD"), *(len(r[0]) for r in rows), *(len(k) for k in result.podgroups),
                 *(len(k) for k in result.volumes)])
    nwidth = max([len("NODE"), *(len(r[1]) for r in rows)])
    out.write(f"{'POD':<{width}}  {'NODE':<{nwidth}}  {'STATUS':<9}  MESSAGE\n")
    for pod, node, status, msg in rows:
        short = msg if len(msg) <= 160 else msg[:157] + "..."
        out.write(f"{pod:<{width}}  {node:<{nwidth}}  {status:<9}  {short}\n")
    if result.podgroups:
        out.write(f"\n{'PODGROUP':<{width}}  {'PHASE':<13}  SCHEDULED/MIN\n")
        for key, st in sorted(result.podgroups.items()):
            out.write(f"{key:<{width}}  {st['phase']:<13}  {st['scheduled']}/{st['minMember']}\n")
    if result.volumes:  # what PreBind wrote on claims before their pods' bindings
        out.write(f"\n{'CLAIM':<{width}}  PREBIND\n")
        for key, wrote in sorted(result.volumes.items()):
            what = (f"volume.kubernetes.io/selected-node={wrote['selectedNode']}" if "selectedNode" in wrote
                    else f"bound to PersistentVolume {wrote['volume']}")
            out.write(f"{key:<{width}}  {what}\n")
    out.write(f"\n{len(result.bound)} bound, {len(result.pending)} pending, {len(result.preempted)} preempted\n")


def _one_line(message: object) -> str:
    return " ".join(str(message).split())


def read_aside(paths: list[str]) -> Callable[[], Loaded]:
    """Starts reading the manifests in a forked child, so that YAML parsing (the longest part of a
    cluster-sized run) overlaps with loading the scheduler and its compiled kernels on the other
    core. Returns a function that waits for the child and returns what it read, raising what it
    raised. Without ``fork`` the reading simply happens when the function is called."""
    if not hasattr(os, "fork"):
        return lambda: load_documents(paths)
    sys.stdout.flush()
    sys.stderr.flush()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: read, send the result (or the error) back, and leave at once
        os.close(read_end)
        payload: tuple[str, object]
        try:
            payload = ("ok", load_documents(paths))
        except (InputError, UsageError) as exc:
            payload = ("error", _one_line(exc))
        except BaseException:
            payload = ("crash", traceback.format_exc())
        with os.fdopen(write_end, "wb") as out:
            pickle.dump(payload, out, protocol=pickle.HIGHEST_PROTOCOL)
        os._exit(0)
    os.close(write_end)

    def wait() -> Loaded:
        with os.fdopen(read_end, "rb") as data:
            raw = data.read()
        _, status = os.waitpid(pid, 0)
        if not raw:
            raise RuntimeError(f"the manifest reader died (wait status {status})")
        kind, value = pickle.loads(raw)
        if kind == "error":
            raise UsageError(value)
        if kind == "crash":
            raise RuntimeError(f"the manifest reader failed:\n{value}")
        assert isinstance(value, Loaded)
        return value

    return wait


def cmd_simulate(args: argparse.Namespace) -> int:
    # Parsing a cluster dump makes millions of objects that all live to the end: the collector
    # would walk them again and again for nothing (a sixth of a 5,000-node run). It stays off
    # while they are made, and what exists then is frozen out of its sight.
    gc.disable()
    try:
        wait = read_aside(args.file)
        from koordpy.kernels import warm_up
        from koordpy.sim.simulator import World, simulate

        warm_up()  # numba loads each kernel on its first call; do it while the child parses
        loaded = wait()
        world = World.from_objects(loaded.docs)
    except (InputError, UsageError) as exc:
        print(f"koordpy simulate: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_INPUT
    finally:
        gc.freeze()
        gc.enable()
    for line in (*loaded.notes, *(f"not acted on: {x}" for x in world.ignored), *world.created):
        print(f"koordpy simulate: note: {line}", file=sys.stderr)
    result = simulate(world, frozenset(args.scheduler_name or ["koordpy"]))
    for name, status in result.hypernodes.items():  # the live scheduler sets Valid=False on these
        for problem in status.get("problems", ()):
            print(f"koordpy simulate: warning: HyperNode {name}: {problem}", file=sys.stderr)
    if args.output == "json":
        json.dump(result.to_json(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
    else:
        print_table(result, sys.stdout)
    if result.truncated:
        sys.stdout.flush()
        print(f"koordpy simulate: error: stopped at the limit of {result.rounds} scheduling rounds before "
              "the cluster settled; the result above is partial", file=sys.stderr)
        return EXIT_ROUND_LIMIT
    return 0


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
  kubectl get nodes,pods,podgroups,clusternetworktopologies,hypernodes,topologies,priorityclasses,jobs \\
    -A -o yaml \\
    | koordpy simulate -f - -f new-job.yaml

exit status: 0 simulated (pods that cannot be placed are listed as Pending, with why);
2 invalid input (one line on stderr naming the file, the object and the field);
3 the simulation hit its round limit (the printed result is partial).
"""

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


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="koordpy", description=HELP, epilog=EPILOG, formatter_class=raw)
    parser.add_argument("--version", action="version", version=f"koordpy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
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
    sim.set_defaults(func=cmd_simulate)
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
    live.set_defaults(func=cmd_run)
    from koordpy import topology_cli  # its heavy imports stay inside its commands

    topology_cli.add_parser(sub)
    from koordpy import explain_cli

    explain_cli.add_parser(sub)
    return parser


RUN_FLAGS = {"schedulerNames": "--scheduler-name", "preemption": "--preemption",
             "topologySources": "--topology-source", "logging.level": "--log-level",
             "logging.format": "--log-format", "leaderElection.enabled": "--leader-elect",
             "leaderElection.leaseName": "--leader-elect-lease-name",
             "leaderElection.leaseNamespace": "--leader-elect-lease-namespace",
             "server.bindAddress": "--bind-address"}


def run_settings(args: argparse.Namespace) -> Settings:
    """The configuration file (or the defaults) with the flags given set over it."""
    from koordpy.settings import Settings, load, override

    base = load(args.config) if args.config else Settings.model_validate({})
    given = [args.scheduler_name, args.preemption, args.topology_source, args.log_level, args.log_format,
             args.leader_elect, args.leader_elect_lease_name, args.leader_elect_lease_namespace, args.bind_address]
    return override(base, dict(zip(RUN_FLAGS, given, strict=True)))


def cmd_run(args: argparse.Namespace) -> int:
    from koordpy.settings import SettingsError

    try:
        settings = run_settings(args)
    except SettingsError as exc:
        message = str(exc)
        if message.startswith("command line: "):  # name the flag, not the file's key
            key, _, why = message.removeprefix("command line: ").partition(": ")
            flag = RUN_FLAGS.get(key.split(".")[0] if key.startswith(("schedulerNames", "topologySources"))
                                 else key, key)
            message = f"{flag}: {why}"
        print(f"koordpy run: {message}", file=sys.stderr)
        return 2
    from koordpy.controller.main import run  # imports kopf; simulate does not need it

    return run(args.kubeconfig, settings)


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
    return code


if __name__ == "__main__":
    sys.exit(main())
