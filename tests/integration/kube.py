"""A thin, real-kubectl driver for the integration tests, the schedulers they run (``koordpy run``,
kube-scheduler v1.37.2 for the tests that compare the two), and the invariants checked after each."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import yaml

from koordpy.api import Node, Pod, PodGroup
from koordpy.core.cluster import Cluster
from koordpy.core.gang import resolve_gangs
from koordpy.core.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[2]
T = TypeVar("T")


# Three CRDs are called podgroups (scheduler-plugins, Volcano, KAI): kubectl must be told which.
PG = "podgroups.scheduling.sigs.k8s.io"
# Every other kind the tests create, by full name, so that reset leaves nothing behind; the
# Workloads and PodGroups of scheduling.k8s.io are what the Job controller makes for each Job.
OTHERS = ("podgroups.scheduling.volcano.sh", "podgroups.scheduling.run.ai", "hypernodes.topology.volcano.sh",
          "topologies.kueue.x-k8s.io", "topologies.kai.scheduler", "workloads.scheduling.k8s.io",
          "podgroups.scheduling.k8s.io", "compositepodgroups.scheduling.k8s.io", "persistentvolumeclaims",
          "persistentvolumes", "storageclasses.storage.k8s.io", "resourceclaims.resource.k8s.io",
          "resourceclaimtemplates.resource.k8s.io", "resourceslices.resource.k8s.io",
          "deviceclasses.resource.k8s.io", "devicetaintrules.resource.k8s.io", "poddisruptionbudgets.policy")
# The kinds whose controllers (in kube-controller-manager) make pods. A test's own are deleted,
# with their pods, before the pods are; what Helm installed (the chart's Deployment) stays with
# its pods for the rest of the chart's tests.
CONTROLLERS = "jobs.batch,deployments.apps,replicasets.apps,statefulsets.apps,daemonsets.apps"


@dataclass
class ControlPlane:
    dir: Path
    env: dict[str, str]

    @property
    def kubeconfig(self) -> str:
        return self.env["KUBECONFIG"]

    @property
    def kubectl_path(self) -> str:
        return self.env["KUBECTL"]


def read_env(path: Path) -> dict[str, str]:
    """DIR/env as up.sh writes it (NAME=value lines)."""
    env = {}
    for line in path.read_text().splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            env[k] = v
    return env


class Kube:
    def __init__(self, cp: ControlPlane) -> None:
        self.cp = cp

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        run = subprocess.run([self.cp.kubectl_path, "--kubeconfig", self.cp.kubeconfig, *args], input=stdin,
                             capture_output=True, text=True, timeout=120, check=False)
        if check and run.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {run.stderr.strip()}")
        return run.stdout

    def apply(self, *objects: dict[str, Any] | list[dict[str, Any]]) -> None:
        flat: list[dict[str, Any]] = []
        for o in objects:
            flat.extend(o if isinstance(o, list) else [o])
        self.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=yaml.safe_dump_all(flat))

    def get(self, resource: str, name: str = "", namespace: str | None = "default") -> dict[str, Any]:
        args = ["get", resource, *([name] if name else []), "-o", "json"]
        if namespace:
            args += ["-n", namespace]
        return json.loads(self.kubectl(*args))  # type: ignore[no-any-return]

    def everywhere(self, resource: str) -> list[dict[str, Any]]:
        """Every object of ``resource`` in every namespace."""
        return list(json.loads(self.kubectl("get", resource, "--all-namespaces", "-o", "json"))["items"])

    def pods(self, namespace: str = "default") -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.get("pods", namespace=namespace)["items"]}

    def bound(self, namespace: str = "default") -> dict[str, str]:
        return {n: p["spec"]["nodeName"] for n, p in self.pods(namespace).items() if p["spec"].get("nodeName")}

    def condition_message(self, pod: str, namespace: str = "default") -> str:
        raw = self.get("pod", pod, namespace)
        for c in (raw.get("status") or {}).get("conditions") or []:
            if c["type"] == "PodScheduled" and c["status"] == "False":
                return str(c.get("message", ""))
        return ""

    def events(self, namespace: str = "default") -> list[dict[str, Any]]:
        return list(self.get("events", namespace=namespace)["items"])

    def reset(self) -> None:
        """Leaves an empty cluster behind: no pods, PodGroups, nodes or topology, in any namespace
        (namespaces themselves stay, as tests share them), and no controller of a test's that would
        make pods again. The only pods left are those a Helm-installed controller keeps."""
        # Foreground deletion returns once the owners' pods are gone, so none of a test's Jobs or
        # ReplicaSets is still there to replace a pod deleted below.
        self.kubectl("delete", CONTROLLERS, "--all-namespaces", "-l", "app.kubernetes.io/managed-by!=Helm",
                     "--cascade=foreground", "--timeout=60s", check=False)
        self.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force",
                     "--wait=false", check=False)
        self.kubectl("delete", PG, "--all", "--all-namespaces", "--wait=false", check=False)
        for kind in OTHERS:
            self.kubectl("delete", kind, "--all", "--all-namespaces", "--wait=false", check=False)
        self.kubectl("delete", "events", "--all", "--all-namespaces", "--wait=false", check=False)
        self.kubectl("delete", "clusternetworktopologies", "--all", "--wait=false", check=False)
        self.kubectl("delete", "priorityclasses", "-l", "koordpy-test=true", "--wait=false", check=False)
        self.kubectl("delete", "nodes", "--all", "--wait=false", check=False)
        wait_for(lambda: not self.unkept_pods() and not self.everywhere(PG)
                 and not self.get("nodes", namespace=None)["items"], "an empty cluster", timeout=60)

    def unkept_pods(self) -> list[str]:
        """The pods (namespace/name) that no ReplicaSet still there controls: after ``reset`` only a
        Helm-installed Deployment's replicas may remain, as its ReplicaSet makes them again."""
        sets = {r["metadata"]["uid"] for r in self.everywhere("replicasets.apps")}
        return [f"{p['metadata']['namespace']}/{p['metadata']['name']}" for p in self.everywhere("pods")
                if not any(ref.get("controller") and ref.get("kind") == "ReplicaSet" and ref.get("uid") in sets
                           for ref in p["metadata"].get("ownerReferences") or [])]


def fake(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Nodes kwok will run: the annotation hands them to kwok's fake kubelet."""
    for n in nodes:
        n["metadata"].setdefault("annotations", {})["kwok.x-k8s.io/node"] = "fake"
        n["status"]["capacity"] = dict(n["status"]["allocatable"])
        n["status"].pop("conditions", None)
    return nodes


def wait_for(check: Callable[[], T | None], what: str, timeout: float = 30.0, every: float = 0.2) -> T:
    """Calls ``check`` until it returns something truthy, and returns that."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


def when(cond: bool, value: T) -> T | None:
    """``wait_for(lambda: when(cond, value))``: value once cond holds."""
    return value if cond else None


def settle(check: Callable[[], T], duration: float = 3.0) -> T:
    """Keeps calling ``check`` for ``duration`` and returns its last answer: for 'nothing happens'."""
    deadline = time.monotonic() + duration
    value = check()
    while time.monotonic() < deadline:
        time.sleep(0.25)
        value = check()
    return value


class Scheduler:
    """``koordpy run`` as a child process."""

    def __init__(self, cp: ControlPlane, log: Path, args: tuple[str, ...] = (), kubeconfig: str | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.cp = cp
        self.log = log
        self.args = args  # more flags for `koordpy run` (a repeated flag: the last one wins)
        self.kubeconfig = kubeconfig or cp.kubeconfig
        self.env = env or {}  # more environment variables
        self.proc: subprocess.Popen[bytes] | None = None

    READY_TIMEOUT = 300.0  # a fresh checkout compiles the numba kernels at the first start

    def start(self) -> None:
        """Starts the scheduler and returns once it has listed the cluster (after loading its kernels),
        so a test's own deadlines never include a cold start."""
        synced = self._synced()
        out = open(self.log, "ab")  # noqa: SIM115 - the child process owns it
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.proc = subprocess.Popen([sys.executable, "-m", "koordpy", "run", "--kubeconfig", self.kubeconfig,
                                      "--bind-address", "127.0.0.1:0", *self.args],
                                     stdout=out, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        deadline = time.monotonic() + self.READY_TIMEOUT
        while self._synced() <= synced:
            if not self.alive() or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
                raise AssertionError(f"koordpy run did not report 'cache synced' within {self.READY_TIMEOUT:g}s "
                                     f"(alive: {self.alive()}); its log ends:\n{tail}")
            time.sleep(0.2)

    def _synced(self) -> int:
        return self.log.read_text(errors="replace").count('"cache synced"') if self.log.exists() else 0

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.proc = None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


@dataclass
class UnderTest:
    """One scheduler, started for one test (the ``under_test`` fixture: kube-scheduler v1.37.2, then
    ``koordpy run``); ``scheduler_name`` is what the test's pods name."""

    name: str
    scheduler_name: str
    log: Path
    proc: subprocess.Popen[bytes] | None = None  # kube-scheduler
    koordpy: Scheduler | None = None

    def alive(self) -> bool:
        if self.koordpy is not None:
            return self.koordpy.alive()
        return self.proc is not None and self.proc.poll() is None

    def check(self) -> None:
        """Still running, and (koordpy) no traceback in its log: called at the end of each test, so a
        crash fails the test itself."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        assert self.alive(), f"{self.name} exited during the test:\n{text[-4000:]}"
        if self.koordpy is not None:
            assert "Traceback" not in text, text[-4000:]

    def stop(self) -> None:
        if self.koordpy is not None:
            self.koordpy.kill()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)


def start_kube_scheduler(cp: ControlPlane, tmp_path: Path) -> UnderTest:
    cfg = tmp_path / "kube-scheduler.yaml"
    cfg.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": cp.kubeconfig, "qps": 1000, "burst": 1000},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": "default-scheduler"}]}))
    log = tmp_path / "kube-scheduler.log"
    # The control plane's gates: kube-scheduler enables its gang and topology plugins from them.
    gates = ["--feature-gates", cp.env["FEATURE_GATES"]]
    with open(log, "wb") as out:
        proc = subprocess.Popen([cp.env["KUBE_SCHEDULER"], "--config", str(cfg), "--secure-port", "0", *gates],
                                stdout=out, stderr=subprocess.STDOUT)
    return UnderTest("kube-scheduler", "default-scheduler", log, proc=proc)


def check_invariants(kube: Kube) -> list[str]:
    """No node over its allocatable; no Strict gang with some but not enough members bound.

    Judged with the core's own accounting (``Cluster``) and gang resolution (``resolve_gangs``)
    over what the API server holds now, in every namespace. Objects that do not parse are left
    out (hostile tests create them on purpose), except a bound pod: its room cannot be judged."""
    problems: list[str] = []
    podgroups: dict[str, PodGroup] = {}
    for raw in kube.everywhere(PG):
        try:
            pg = PodGroup.from_raw(raw)
        except Exception:  # not a gang anyone can be held to
            continue
        podgroups[pg.key] = pg
    pods: list[Pod] = []
    for raw in kube.everywhere("pods"):
        try:
            pods.append(Pod.from_raw(raw))
        except Exception as exc:  # a pending one is the scheduler's to report, not ours
            if (raw.get("spec") or {}).get("nodeName"):
                problems.append(f"bound pod does not parse: {str(exc)[:300]}")
    nodes = [Node.from_raw(n) for n in kube.get("nodes", namespace=None)["items"]]
    # A DRA-backed extended resource of a pod whose claim serves it (status.extendedResourceClaimStatus)
    # takes no room of a node that does not list it: its devices are the claim's (the DRA tests check those).
    listed = {n.name: n.allocatable for n in nodes}

    def served(p: Pod, r: str) -> bool:
        asked = any(r == e[0] for c in p.extended_requests for e in c.requests)
        return bool(p.extended_claim) and asked and listed.get(p.node_name, {}).get(r, 0) <= 0

    counted = [p.model_copy(update={"requests": {r: q for r, q in p.requests.items() if not served(p, r)}})
               if p.extended_claim else p for p in pods if p.node_name]
    # Only bound pods take room; a pending one asking for more than any node has is no problem.
    cluster = Cluster(Snapshot(nodes=nodes, pods=counted, podgroups=podgroups))
    snapshot = Snapshot(nodes=nodes, pods=pods, podgroups=podgroups)
    problems += [f"node {cluster.nodes[i].name} over allocatable {cluster.resources[j]}: "
                 f"{cluster.used[i, j]} > {cluster.allocatable[i, j]}"
                 for i, j in zip(*np.nonzero(cluster.used > cluster.allocatable), strict=True)]
    gangs, _ = resolve_gangs(snapshot)
    for gang in gangs.values():
        if gang.config is None or gang.config.mode != "Strict":
            continue
        bound = len(gang.bound())
        if 0 < bound < gang.config.min_member:
            problems.append(f"Strict gang {gang.key} partly bound: {bound}/{gang.config.min_member}")
    return problems


def drop_dra_objects(kube: Kube, kinds: tuple[str, ...]) -> None:
    """Deletes the DRA objects of ``kinds`` everywhere, the claims' finalizers first: a claim keeps
    its delete-protection finalizer until kube-controller-manager drops it, and the next test (or
    run) should start from none."""
    for item in kube.get("resourceclaims", namespace="default")["items"]:
        kube.kubectl("patch", "resourceclaims", item["metadata"]["name"], "-n", "default", "--type=merge", "-p",
                     '{"metadata": {"finalizers": null}}', check=False)
    for kind in kinds:
        kube.kubectl("delete", kind, "--all", "--all-namespaces", "--wait=false", check=False)
