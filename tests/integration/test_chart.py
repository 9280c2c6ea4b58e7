"""The Helm chart installed on the local control plane, and ``koordpy run`` working with its RBAC only.

The chart goes in with the real ``helm``. kube-controller-manager makes its Deployment's pods, but
no kubelet runs them (kwok plays kubelets, and no kube-scheduler places them): the tests run
``koordpy run`` themselves, as the chart's pod would, with the configuration file from the
installed ConfigMap and a token of the chart's ServiceAccount minted through the TokenRequest API
(``kubectl create token``): no admin credential, no client certificate.

The API server's audit log (e2e/controlplane/up.sh records every ServiceAccount request) says
which calls that identity made: every verb the chart's roles grant must have been used, and none of
the scheduler's calls may have been refused.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import node, pod, podgroup
from tests.integration.kube import ROOT, ControlPlane, Kube, Scheduler, fake, settle, wait_for, when
from tests.integration.test_dra_live import _backed_class as backed_class
from tests.integration.test_dra_live import _claim as dra_claim
from tests.integration.test_dra_live import _class as dra_class
from tests.integration.test_dra_live import _slice as dra_slice
from tests.integration.test_dra_live import _user as dra_user
from tests.integration.test_dra_live import leave_an_extended_claim
from tests.integration.test_stale_live import kept, stale_gangs_of_every_kind
from tests.integration.test_volumes_live import _claim as volume_claim
from tests.integration.test_volumes_live import _class as volume_class
from tests.integration.test_volumes_live import _user as volume_user
from tests.integration.test_volumes_live import _volume as local_volume
from tests.test_chart import CHART, Grant, grants, rbac_rules

NAMESPACE = "koordpy-system"
RELEASE = "koordpy"
POD_NAME = "koordpy-test-0"  # the leader identity the chart's pod would get from the downward API
# The seed examples whose pods are in their manifests (kai-rack's come from its Jobs, which need a
# Job controller: tests/integration/test_examples.py plays it), in the order they run.
EXAMPLES = ("spine-block", "volcano-tiers", "preemption", "workload-api")


# JobSet's CRD is not among the repository's (koordpy only reads a JobSet's annotations): a
# minimal one, so that the scheduler watches JobSets here as it would where JobSet is installed.
JOBSET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {"group": "jobset.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "jobsets", "singular": "jobset", "kind": "JobSet", "listKind": "JobSetList"},
             "versions": [{"name": "v1alpha2", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]}}


@dataclass
class Installed:
    manifest: list[dict[str, Any]]  # what helm installed, as objects
    service_account: str
    kubeconfig: Path  # the ServiceAccount's token, nothing else
    config: Path  # the ConfigMap's config.yaml
    notes: str

    @property
    def user(self) -> str:
        return f"system:serviceaccount:{NAMESPACE}:{self.service_account}"

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [d for d in self.manifest if d["kind"] == kind]


def helm(cp: ControlPlane, *args: str) -> str:
    run = subprocess.run([cp.env["HELM"], "--kubeconfig", cp.kubeconfig, *args], capture_output=True, text=True,
                         timeout=300, check=False)
    assert run.returncode == 0, f"helm {' '.join(args)} failed:\n{run.stderr}"
    return run.stdout


def token_kubeconfig(cp: ControlPlane, token: str) -> str:
    ca = base64.b64encode((cp.dir / "pki" / "ca.crt").read_bytes()).decode()
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "koordpy-e2e", "cluster": {"server": cp.env["API_SERVER"],
                                                         "certificate-authority-data": ca}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "koordpy-e2e", "user": "sa"}}],
        "current-context": "sa"})


@pytest.fixture(scope="module")
def chart(controlplane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    kube = Kube(controlplane)
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, JOBSET_CRD)
    kube.kubectl("wait", "--for=condition=Established", "crd/jobsets.jobset.x-k8s.io", "--timeout=60s")
    # upgrade --install: a reused control plane may hold it from an earlier run.
    out = helm(controlplane, "upgrade", "--install", RELEASE, str(CHART), "--namespace", NAMESPACE)
    manifest = [d for d in yaml.safe_load_all(helm(controlplane, "get", "manifest", RELEASE, "-n", NAMESPACE)) if d]
    [sa] = [d["metadata"]["name"] for d in manifest if d["kind"] == "ServiceAccount"]
    [cm] = [d for d in manifest if d["kind"] == "ConfigMap"]
    # What the pod would mount: the ConfigMap as the API server holds it, not as rendered.
    live_cm = kube.get("configmap", cm["metadata"]["name"], NAMESPACE)
    folder = tmp_path_factory.mktemp("chart")
    config = folder / "config.yaml"
    config.write_text(live_cm["data"]["config.yaml"])
    token = kube.kubectl("create", "token", sa, "-n", NAMESPACE, "--duration", "2h").strip()
    kubeconfig = folder / "kubeconfig"
    kubeconfig.write_text(token_kubeconfig(controlplane, token))
    yield Installed(manifest, sa, kubeconfig, config, out)
    helm(controlplane, "uninstall", RELEASE, "--namespace", NAMESPACE)
    kube.kubectl("delete", "crd", "jobsets.jobset.x-k8s.io", "--wait=false")


class ChartScheduler(Scheduler):
    """Remembers when it was last started: the audit log is read from then on."""

    started_at = 0.0

    def start(self) -> None:
        self.started_at = time.time()
        super().start()


def as_sa(cp: ControlPlane, installed: Installed, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([cp.kubectl_path, "--kubeconfig", str(installed.kubeconfig), *args], capture_output=True,
                          text=True, timeout=120, check=False)


def chart_scheduler(cp: ControlPlane, kube: Kube, chart: Installed, config: Path, log: Path) -> ChartScheduler:
    """``koordpy run`` as the chart's pod runs it, with the ServiceAccount's token; it serves its
    HTTP endpoints on a free port (the chart's port may be taken on this machine)."""
    # A Lease left by an earlier run would spare the new leader the create the audit must see.
    kube.kubectl("delete", "lease", "-n", NAMESPACE, "--all", check=False)
    s = ChartScheduler(cp, log, args=("--kubeconfig", str(chart.kubeconfig), "--config", str(config),
                                      "--bind-address", "127.0.0.1:0"),
                       env={"POD_NAMESPACE": NAMESPACE, "POD_NAME": POD_NAME, "KUBECONFIG": str(chart.kubeconfig)})
    s.start()
    return s


def stop(s: ChartScheduler) -> None:
    """Stops it and fails the test if it had exited on its own or logged a traceback."""
    died = s.proc is not None and not s.alive()  # a test that stops it on purpose leaves no process
    s.kill()
    log = s.log.read_text(errors="replace")
    assert not died, f"koordpy run exited during the test:\n{log[-4000:]}"
    assert "Traceback" not in log, log[-4000:]


@pytest.fixture
def sa_scheduler(controlplane: ControlPlane, kube: Kube, chart: Installed,
                 tmp_path: Path) -> Iterator[ChartScheduler]:
    s = chart_scheduler(controlplane, kube, chart, chart.config, tmp_path / "koordpy.log")
    yield s
    stop(s)


def example(name: str) -> tuple[list[dict[str, Any]], dict[str, str], set[str]]:
    """The example's objects (nodes handed to kwok), and what ``koordpy simulate`` says of it: the
    pods it binds (pod -> node, without the namespace) and the pods it leaves pending."""
    folder = ROOT / "examples" / name
    objs: list[dict[str, Any]] = []
    for path in sorted(folder.glob("*.yaml")):  # cluster.yaml before jobs.yaml
        objs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    fake([o for o in objs if o["kind"] == "Node"])
    run = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", str(folder), "-o", "json"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300, check=True)
    out = json.loads(run.stdout)
    bound = {key.split("/", 1)[1]: n for key, n in out["bound"].items()}
    pending = {key.split("/", 1)[1] for key in out["pending"]}
    return objs, bound, pending


def run_example(kube: Kube, name: str) -> None:
    objs, want_bound, want_pending = example(name)
    kube.apply(objs)
    placed_before = {o["metadata"]["name"] for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName")}

    def placed() -> dict[str, str]:
        return {p: n for p, n in kube.bound().items() if p not in placed_before}

    got = wait_for(lambda: when(placed().keys() >= want_bound.keys(), placed()), f"example {name} bound", 90)
    assert got == want_bound, f"example {name}: the live scheduler bound {got}, the simulator {want_bound}"
    for p in sorted(want_pending):
        wait_for(partial(kube.condition_message, p), f"example {name}: {p}'s PodScheduled=False condition")
    assert settle(placed, 2.0) == want_bound


def test_install_renders_the_notes_and_a_configuration(chart: Installed, kube: Kube) -> None:
    assert "schedulerName: koordpy" in chart.notes
    assert "koordpy explain <namespace>/<pod>" in chart.notes
    config = yaml.safe_load(chart.config.read_text())
    assert config["leaderElection"] == {**config["leaderElection"], "enabled": True, "leaseNamespace": NAMESPACE}
    deploy = kube.get("deployment", chart.of_kind("Deployment")[0]["metadata"]["name"], NAMESPACE)
    assert deploy["spec"]["replicas"] == 2
    assert deploy["spec"]["template"]["spec"]["serviceAccountName"] == chart.service_account

    # The Deployment and ReplicaSet controllers make its two pods, owned through its ReplicaSet.
    def replicas() -> list[dict[str, Any]] | None:
        sets = {r["metadata"]["uid"] for r in kube.get("replicasets.apps", namespace=NAMESPACE)["items"]
                if any(o["uid"] == deploy["metadata"]["uid"] for o in r["metadata"].get("ownerReferences") or [])}
        pods = [p for p in kube.get("pods", namespace=NAMESPACE)["items"]
                if any(o["uid"] in sets and o.get("controller") for o in p["metadata"].get("ownerReferences") or [])]
        return when(len(pods) == 2, pods)

    pods = wait_for(replicas, "the Deployment's two pods")
    assert {p["spec"]["serviceAccountName"] for p in pods} == {chart.service_account}


def test_the_service_account_is_refused_what_its_role_does_not_grant(
        controlplane: ControlPlane, kube: Kube, chart: Installed) -> None:
    kube.apply(fake([node("n0")]))
    who = json.loads(as_sa(controlplane, chart, "auth", "whoami", "-o", "json").stdout)
    assert who["status"]["userInfo"]["username"] == chart.user
    for args in (("delete", "node", "n0"), ("get", "secrets", "-n", NAMESPACE),
                 ("create", "namespace", "koordpy-not-allowed"),
                 ("delete", "clusterrole", chart.of_kind("ClusterRole")[0]["metadata"]["name"]),
                 ("get", "lease", "-n", "default", "koordpy")):
        run = as_sa(controlplane, chart, *args)
        assert run.returncode != 0 and "Forbidden" in run.stderr, (args, run.stdout, run.stderr)
    assert kube.get("node", "n0", None)["metadata"]["name"] == "n0"
    # What the role does grant works with the same credential.
    assert as_sa(controlplane, chart, "get", "nodes", "-o", "name").stdout.split() == ["node/n0"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_seed_examples_schedule_with_the_charts_rbac(kube: Kube, sa_scheduler: Scheduler, name: str) -> None:
    run_example(kube, name)


def audit_events(cp: ControlPlane, user: str, since: float) -> list[dict[str, Any]]:
    """The audit events of ``user``'s requests received at or after ``since`` (epoch seconds),
    made by anything but kubectl (the tests' own checks use the same identity)."""
    path = cp.dir / "logs" / "audit.log"
    assert path.exists(), (f"{path} is missing: the control plane was started by an up.sh without the "
                           "audit log; stop it (e2e/controlplane/down.sh) and run again")
    events = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue  # the last line may be half written
        if e.get("user", {}).get("username") != user or str(e.get("userAgent", "")).startswith("kubectl/"):
            continue
        if datetime.fromisoformat(e["requestReceivedTimestamp"]).timestamp() >= since:
            events.append(e)
    return events


def call(e: dict[str, Any]) -> Grant | None:
    """(apiGroup, resource[/subresource], verb) of a resource request; None for /api, /apis..."""
    ref = e.get("objectRef") or {}
    if not ref.get("resource"):
        return None
    resource = ref["resource"] + (f"/{ref['subresource']}" if ref.get("subresource") else "")
    return ref.get("apiGroup", ""), resource, e["verb"]


def test_every_granted_verb_is_used_and_nothing_is_refused(
        controlplane: ControlPlane, kube: Kube, chart: Installed, sa_scheduler: ChartScheduler) -> None:
    try:
        drive_every_write(kube)
    except AssertionError as exc:  # a write refused shows up as a wait that timed out: say so
        refused = [(e["verb"], e["requestURI"]) for e in audit_events(controlplane, chart.user, sa_scheduler.started_at)
                   if e["responseStatus"].get("code") == 403]
        raise AssertionError(f"{exc}\nrequests of {chart.user} refused meanwhile: {refused[:20]}") from exc
    assert sa_scheduler.alive()
    sa_scheduler.kill()

    events = audit_events(controlplane, chart.user, sa_scheduler.started_at)
    refused = sorted({(e["verb"], e["requestURI"]) for e in events if e["responseStatus"].get("code") == 403})
    assert refused == [], f"the scheduler was refused: {refused}"
    used = {c for e in events if (c := call(e)) is not None}
    # The API server checks resourceclaims/binding (a synthetic subresource, never requested) with
    # the verb of each status write that changes status.allocation or status.reservedFor.
    used |= {(g, "resourceclaims/binding", v) for g, r, v in set(used) if r == "resourceclaims/status"}
    granted = grants(rbac_rules(chart.of_kind("ClusterRole") + chart.of_kind("Role")))
    never = sorted(granted - used)
    assert never == [], f"the chart grants verbs the scheduler never used: {never}"
    assert used <= granted, sorted(used - granted)  # only when a refusal was missed above


def drive_every_write(kube: Kube) -> None:
    """Every kind of write the scheduler makes, each at least once."""
    # Binds of gangs, a CNT's and HyperNodes' status, the PodGroups' status (all three kinds), conditions and events
    # of the pods that cannot fit, and a preemption (victim marked and deleted, preemptors nominated).
    for name in EXAMPLES:
        kube.reset()
        run_example(kube, name)
    # A NonStrict gang that times out: its pods are annotated (patch pods).
    kube.reset()
    kube.apply(fake([node("n0"), node("n1")]))
    kube.apply(podgroup("late", 3, timeout=2, annotations={"gang.scheduling.koordinator.sh/mode": "NonStrict"}),
               [pod(f"late-{i}", group="late") for i in range(3)])
    wait_for(lambda: all((kube.get("pod", f"late-{i}")["metadata"].get("annotations") or {}).get(
        "gang.scheduling.koordinator.sh/timeout") == "true" for i in range(3)), "the timed-out gang annotated", 60)
    # Stale gangs of every kind of gang object: their stale-since annotated (patch on scheduler-plugins',
    # Volcano's and KAI's PodGroups and on CompositePodGroups; a Kubernetes PodGroup's condition).
    kube.reset()
    for resource, (name, how) in stale_gangs_of_every_kind(kube, "default").items():
        wait_for(lambda r=resource, n=name, h=how: when(kept(kube, "default", r, n, h), True),  # type: ignore[misc]
                 f"{resource} {name}: its stale-since as {how}", 60)
    kube.kubectl("delete", "pods", "--all", "--grace-period=0", "--force", "--wait=true")
    # PreBind's volume writes: a static volume's claimRef (patch persistentvolumes; kube-controller-manager
    # completes the bind) and a provisioned claim's selected node (patch persistentvolumeclaims).
    kube.reset()
    kube.apply(fake([node("n0")]))
    kube.apply(volume_class("static", "kubernetes.io/no-provisioner"),
               volume_class("dynamic", "provisioner.koordpy.test"), volume_claim("s", "static"),
               volume_claim("d", "dynamic"), local_volume("pv-s", "static", "n0"))
    kube.apply(volume_user("su", "s"), volume_user("du", "d"))
    wait_for(lambda: (kube.get("pv", "pv-s", None)["spec"].get("claimRef") or {}).get("name") == "s",
             "the static volume's claimRef set", 60)
    wait_for(lambda: (kube.get("pvc", "d")["metadata"].get("annotations") or {}).get(
        "volume.kubernetes.io/selected-node") == "n0", "the provisioned claim's selected node", 60)
    # DRA's PreBind writes: a claim's finalizer (patch resourceclaims), then its allocation and
    # reservation (patch resourceclaims/status, which the API server also checks as resourceclaims/binding).
    kube.reset()
    kube.apply(fake([node("n0")]), dra_class(), dra_slice("n0"), dra_claim("gpu"), dra_user("gu", "gpu"))
    wait_for(lambda: (kube.get("resourceclaims", "gpu").get("status") or {}).get("reservedFor"),
             "the claim allocated and reserved", 60)
    kube.reset()
    # A DRA-backed extended resource: the claim of a pod's extended resources left by an earlier try is
    # deleted (delete resourceclaims), a new one created (create resourceclaims) and named in the pod's
    # status.extendedResourceClaimStatus (patch pods/status).
    kube.apply(fake([node("n0")]), backed_class(), dra_slice("n0"))
    left = leave_an_extended_claim(kube, "eu")
    wait_for(lambda: kube.bound().get("eu"), "the pod asking a DRA-backed extended resource bound", 60)
    wait_for(lambda: left not in [c["metadata"]["name"] for c in kube.get("resourceclaims")["items"]],
             "the leftover claim deleted", 60)
    kube.reset()
    # The same FailedScheduling Event twice (patch events): a pod that fits nowhere, told A; a second
    # node that does not fit either changes the message to B; that node gone, A again. The writer
    # waits out its settle and cooldown between the condition writes, each followed by its Event.
    repeated_event_is_counted(kube)
    # Leader election: the Lease was created, and renewed (get, update) meanwhile.
    lease = wait_for(lambda: kube.get("lease", "", NAMESPACE)["items"] or None, "the Lease")
    [lease_obj] = lease
    assert POD_NAME in lease_obj["spec"]["holderIdentity"], lease_obj["spec"]


def repeated_event_is_counted(kube: Kube) -> None:
    kube.reset()
    kube.apply(fake([node("n0", cpu="2")]), pod("big", cpu="4"))
    uid = kube.get("pod", "big")["metadata"]["uid"]

    def failed_scheduling() -> list[dict[str, Any]]:
        return [e for e in kube.events() if e["reason"] == "FailedScheduling"
                and (e.get("involvedObject") or {}).get("uid") == uid]

    a = wait_for(lambda: kube.condition_message("big"), "big's first PodScheduled=False condition")
    wait_for(lambda: [e for e in failed_scheduling() if e["message"] == a], f"a FailedScheduling event: {a}")
    kube.apply(fake([node("n1", cpu="2")]))
    b = wait_for(lambda: when(kube.condition_message("big") not in ("", a), kube.condition_message("big")),
                 "big's condition to change with a second node")
    wait_for(lambda: [e for e in failed_scheduling() if e["message"] == b], f"a FailedScheduling event: {b}")
    kube.kubectl("delete", "node", "n1")
    wait_for(lambda: kube.condition_message("big") == a, "big's condition back to the first message", 60)
    again = wait_for(lambda: when(any(e.get("count") == 2 for e in failed_scheduling() if e["message"] == a),
                                  failed_scheduling()), "the first FailedScheduling event counted twice", 60)
    assert sorted((e["message"], e.get("count")) for e in again) == sorted([(a, 2), (b, 1)]), again
    [twice] = [e for e in again if e["message"] == a]
    assert twice["lastTimestamp"] > twice["firstTimestamp"], twice


def test_a_trimmed_configuration_needs_no_more_than_its_trimmed_role(
        controlplane: ControlPlane, kube: Kube, chart: Installed, tmp_path: Path) -> None:
    """One topology source, no preemption and stale gangs only reported: the chart grants less, and the
    scheduler asks for no more."""
    trimmed = ("--set", "config.topologySources={koordinator}", "--set", "config.preemption=false",
               "--set", "config.staleGangGracePeriodSeconds=-1")
    helm(controlplane, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, *trimmed)
    try:
        manifest = [d for d in yaml.safe_load_all(helm(controlplane, "get", "manifest", RELEASE, "-n", NAMESPACE))
                    if d]
        granted = grants(rbac_rules([d for d in manifest if d["kind"] in ("ClusterRole", "Role")]))
        others = {"topology.volcano.sh", "kueue.x-k8s.io", "kai.scheduler"}
        assert not {g for g, _, _ in granted} & others and ("", "pods", "delete") not in granted
        [cm] = [d for d in manifest if d["kind"] == "ConfigMap"]
        config = tmp_path / "config.yaml"
        config.write_text(kube.get("configmap", cm["metadata"]["name"], NAMESPACE)["data"]["config.yaml"])
        s = chart_scheduler(controlplane, kube, chart, config, tmp_path / "koordpy.log")
        try:
            run_example(kube, "spine-block")
        finally:
            stop(s)
        events = audit_events(controlplane, chart.user, s.started_at)
        refused = sorted({(e["verb"], e["requestURI"]) for e in events if e["responseStatus"].get("code") == 403})
        assert refused == [], f"the scheduler was refused: {refused}"
        used = {c for e in events if (c := call(e)) is not None}
        assert used <= granted, sorted(used - granted)
        assert ("scheduling.koordinator.sh", "clusternetworktopologies/status", "patch") in used
    finally:
        helm(controlplane, "upgrade", RELEASE, str(CHART), "--namespace", NAMESPACE, "--reset-values")
