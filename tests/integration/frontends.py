"""Kueue v0.19.2 and JobSet v0.12.0, the controllers users run in front of a scheduler, started next to
the local control plane (``e2e/controlplane/up.sh``) for the live tests that need them.

Built by ``e2e/controlplane/build.sh frontends``; their CRDs, webhook configurations and conversion
settings are read from the sources the build downloaded (``config/components`` of each module), and
changed only where a cluster without Services needs it: each webhook is served on loopback with a
certificate made here (a CA of its own, openssl as ``up.sh`` does) and registered as
``url: https://127.0.0.1:PORT/...`` with that CA. Their ``failurePolicy: Fail`` must spare the tests
that do not run them: every webhook is limited to namespaces labelled ``NAMESPACE_LABEL`` (a
cluster-scoped object, a ClusterQueue or a Topology, is still sent to Kueue: those webhooks exist only
while the controllers run, ``stop`` removes them), and only the webhooks of the integrations turned on
(``batch/job``, ``jobset.x-k8s.io/jobset``) and of Kueue's own kinds are registered.

By hand: ``python -m tests.integration.frontends up DIR`` after ``e2e/controlplane/up.sh DIR``, and
``python -m tests.integration.frontends down DIR`` (``e2e/controlplane/down.sh DIR`` stops them too).
Logs go to DIR/logs/kueue.log and DIR/logs/jobset.log.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.integration.kube import ROOT, ControlPlane, Kube, read_env

BUILD = ROOT / "e2e" / "controlplane" / "build.sh"
MODULE = ROOT / "e2e" / "controlplane" / "frontends"
# Only namespaces with this label see Kueue's and JobSet's namespaced webhooks.
NAMESPACE_LABEL = "koordpy-test/frontends"
# Kueue v0.19.2 with its internal certificate management off reads the metrics server's certificate
# from this fixed folder, whether or not metrics are served (cmd/kueue/main.go).
KUEUE_METRICS_CERTS = Path("/etc/kueue/metrics/certs")
KUEUE_INTEGRATIONS = ("batch/job", "jobset.x-k8s.io/jobset")
# The names of the webhook configurations registered here, and their label, by which ``stop``
# deletes them again.
WEBHOOKS = {"kueue": "koordpy-frontends-kueue", "jobset": "koordpy-frontends-jobset"}
MANAGED_BY = "koordpy-tests"
# The resources whose webhooks are kept: Kueue's own kinds, and the kinds of the integrations on.
KEPT_GROUPS = {"kueue.x-k8s.io": None, "batch": {"jobs"}, "jobset.x-k8s.io": {"jobsets"}}
# Kueue's kinds a test creates, which carry Kueue's finalizers (deleted while Kueue runs).
KUEUE_OBJECTS = ("workloads.kueue.x-k8s.io,localqueues.kueue.x-k8s.io,clusterqueues.kueue.x-k8s.io,"
                 "cohorts.kueue.x-k8s.io,resourceflavors.kueue.x-k8s.io,topologies.kueue.x-k8s.io")
READY_TIMEOUT = 120.0
NAMES = ("kueue", "jobset")


class FrontendsError(RuntimeError):
    """The controllers could not be built, configured or started; the message says what was missing."""


def build() -> Path:
    """The folder holding the ``kueue`` and ``jobset`` binaries, built once by build.sh."""
    run = subprocess.run([str(BUILD), "frontends"], capture_output=True, text=True, timeout=3600, check=False)
    if run.returncode != 0:
        raise FrontendsError(f"e2e/controlplane/build.sh frontends failed:\n{run.stderr[-3000:]}")
    return Path(run.stdout.strip().splitlines()[-1])


def module_dir(module: str) -> Path:
    """The source folder of ``module`` as pinned by frontends/go.mod (in the Go module cache)."""
    run = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", module], cwd=MODULE, capture_output=True,
                         text=True, timeout=300, check=False)
    if run.returncode != 0 or not run.stdout.strip():
        raise FrontendsError(f"go list -m {module} failed in {MODULE}: {run.stderr.strip()}")
    return Path(run.stdout.strip())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _openssl(*args: str) -> None:
    run = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60, check=False)
    if run.returncode != 0:
        raise FrontendsError(f"openssl {' '.join(args)} failed: {run.stderr.strip()}")


def make_certificates(pki: Path) -> None:
    """A CA and a serving certificate for 127.0.0.1 signed by it (tls.crt / tls.key, the names
    controller-runtime's webhook server reads), made once per state folder."""
    pki.mkdir(parents=True, exist_ok=True)
    if (pki / "tls.crt").exists() and (pki / "tls.key").exists() and (pki / "ca.crt").exists():
        return
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=koordpy-frontends-ca",
             "-keyout", str(pki / "ca.key"), "-out", str(pki / "ca.crt"))
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", str(pki / "tls.key"),
             "-out", str(pki / "tls.csr"))
    (pki / "tls.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("x509", "-req", "-in", str(pki / "tls.csr"), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
             "-CAcreateserial", "-days", "3650", "-extfile", str(pki / "tls.ext"), "-out", str(pki / "tls.crt"))


def kueue_metrics_certificate() -> None:
    """Kueue's metrics certificate at its fixed path: left as it is when one is there (any certificate
    does: nothing here reads Kueue's metrics), else a self-signed one."""
    crt, key = KUEUE_METRICS_CERTS / "tls.crt", KUEUE_METRICS_CERTS / "tls.key"
    if os.access(crt, os.R_OK) and os.access(key, os.R_OK):
        return
    try:
        KUEUE_METRICS_CERTS.mkdir(parents=True, exist_ok=True)
        if not os.access(KUEUE_METRICS_CERTS, os.W_OK):
            raise PermissionError(str(KUEUE_METRICS_CERTS))
    except OSError as exc:
        raise FrontendsError(
            f"Kueue v0.19.2 reads its metrics certificate from the fixed {KUEUE_METRICS_CERTS} when its internal "
            f"certificate management is off (cmd/kueue/main.go), and this user cannot write there ({exc}). Make the "
            f"folder writable once, e.g. `sudo install -d -o $(id -u) {KUEUE_METRICS_CERTS}`, and run again.") from exc
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj", "/CN=kueue-metrics",
             "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(crt))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def kueue_crds(src: Path, convert_url: str, ca: str) -> list[dict[str, Any]]:
    """Kueue's CRDs; those its kustomization patches for conversion get the webhook at ``convert_url``."""
    crd = src / "config" / "components" / "crd"
    converted = {p["path"].removeprefix("patches/webhook_in_").removesuffix(".yaml")
                 for p in yaml.safe_load((crd / "kustomization.yaml").read_text()).get("patches") or []
                 if "webhook_in_" in p["path"]}
    out = []
    for path in sorted((crd / "bases").glob("*.yaml")):
        for doc in _docs(path):
            if doc["spec"]["names"]["plural"] in converted:
                doc["spec"]["conversion"] = {"strategy": "Webhook", "webhook": {
                    "clientConfig": {"url": convert_url, "caBundle": ca}, "conversionReviewVersions": ["v1"]}}
            out.append(doc)
    if len({d["spec"]["names"]["plural"] for d in out if "conversion" in d["spec"]}) != len(converted):
        raise FrontendsError(f"Kueue's kustomization names conversion for {sorted(converted)}, not all found")
    return out


def jobset_crds(src: Path) -> list[dict[str, Any]]:
    """JobSet's CRD. Its kustomization names a conversion webhook, but JobSet serves one version and no
    ``/convert`` (its type is not convertible), so the API server would never call it: left out."""
    return [d for p in sorted((src / "config" / "components" / "crd" / "bases").glob("*.yaml")) for d in _docs(p)]


def _kept(hook: dict[str, Any]) -> bool:
    for rule in hook.get("rules") or []:
        for group in rule.get("apiGroups") or []:
            if group in KEPT_GROUPS:
                wanted = KEPT_GROUPS[group]
                if wanted is None or set(rule.get("resources") or []) & wanted:
                    return True
    return False


def webhooks(manifest: Path, name: str, url: str, ca: str, keep_all: bool) -> list[dict[str, Any]]:
    """The webhook configurations of ``manifest`` (controller-gen's, service-based) as loopback URLs,
    limited to the labelled namespaces; JobSet's pod webhooks keep their selector on JobSet's pods
    (its kustomize patches add it), Kueue's keep only what ``KEPT_GROUPS`` names."""
    out = []
    for doc in _docs(manifest):
        hooks = []
        for hook in doc.get("webhooks") or []:
            if not keep_all and not _kept(hook):
                continue
            service = hook["clientConfig"].pop("service")
            hook["clientConfig"] = {"url": url + service["path"], "caBundle": ca}
            hook["namespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: "true"}}
            if any("pods" in (r.get("resources") or []) for r in hook.get("rules") or []) and name == "jobset":
                hook["objectSelector"] = {"matchExpressions": [
                    {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
            hook["timeoutSeconds"] = 10
            hooks.append(hook)
        doc["metadata"] = {"name": f"{WEBHOOKS[name]}-{doc['kind'].removesuffix('WebhookConfiguration').lower()}",
                           "labels": {"app.kubernetes.io/managed-by": MANAGED_BY}}
        doc["webhooks"] = hooks
        out.append(doc)
    return out


@dataclass
class Frontends:
    """Kueue and JobSet running for the control plane in ``dir``."""

    dir: Path
    kueue_health: int
    jobset_health: int

    def logs(self) -> str:
        return "\n".join(f"--- {n}.log (end) ---\n{_tail(self.dir / 'logs' / f'{n}.log')}" for n in NAMES)


def _tail(path: Path, chars: int = 3000) -> str:
    return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"


# The controllers this process started, by state folder and name: waited for when stopped, so none
# is left a zombie that still looks alive.
_children: dict[tuple[Path, str], subprocess.Popen[bytes]] = {}


def _alive(pid: int, name: str) -> bool:
    """Whether ``pid`` runs the ``name`` binary still (a pid file of an earlier run may name a pid
    the system has given to another process since)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return Path(argv0.decode(errors="replace")).name == name and state != "Z"


def _pid(cp_dir: Path, name: str) -> int | None:
    f = cp_dir / f"{name}.pid"
    return int(f.read_text()) if f.exists() else None


def _ended(cp_dir: Path, name: str) -> str | None:
    """How the controller ``name`` started for ``cp_dir`` by this process ended ("exit status 1",
    "signal 9"), or None while it runs. Its own child is asked directly (its exit status is the clue
    when its log is empty); one only named by a pid file, by /proc."""
    child = _children.get((cp_dir, name))
    if child is not None:
        code = child.poll()
        if code is None:
            return None
        return f"signal {-code}" if code < 0 else f"exit status {code}"
    pid = _pid(cp_dir, name)
    return None if pid is not None and _alive(pid, name) else "not running"


def _stop_processes(cp_dir: Path) -> None:
    """Stops both at once (each takes a few seconds to shut its servers down)."""
    waits: list[tuple[int, str, subprocess.Popen[bytes] | None]] = []
    for name in NAMES:
        child = _children.pop((cp_dir, name), None)
        if child is not None:
            child.terminate()
            waits.append((child.pid, name, child))
            continue
        pid = _pid(cp_dir, name)
        if pid is not None and _alive(pid, name):  # started by another process (a killed session, by hand)
            os.kill(pid, signal.SIGTERM)
            waits.append((pid, name, None))
    deadline = time.monotonic() + 15
    for pid, name, proc in waits:
        if proc is not None:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
            continue
        while _alive(pid, name) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid, name):
            os.kill(pid, signal.SIGKILL)
    for name in NAMES:
        (cp_dir / f"{name}.pid").unlink(missing_ok=True)


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return int(r.status) == 200
    except (OSError, urllib.error.URLError):
        return False


def _spawn(cp: ControlPlane, name: str, argv: list[str]) -> None:
    env = {**os.environ, "KUBECONFIG": cp.kubeconfig}
    with open(cp.dir / "logs" / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    _children[(cp.dir, name)] = proc
    (cp.dir / f"{name}.pid").write_text(str(proc.pid))


def start(cp: ControlPlane, kueue_config: dict[str, Any] | None = None) -> Frontends:
    """Builds (once) and starts Kueue and JobSet for ``cp``, with their CRDs and webhooks; returns once
    both answer their readiness probes and their webhooks answer the API server, or raises
    ``FrontendsError`` saying what was missing. ``kueue_config``: top-level fields of Kueue's
    Configuration set over the ones here (``waitForPodsReady``, ``fairSharing``: a test module's)."""
    kube = Kube(cp)
    bindir = build()
    kueue_src, jobset_src = module_dir("sigs.k8s.io/kueue"), module_dir("sigs.k8s.io/jobset")
    _stop_processes(cp.dir)  # a previous session's, had it not stopped them
    state = cp.dir / "frontends"
    pki = state / "pki"
    make_certificates(pki)
    kueue_metrics_certificate()
    ca = base64.b64encode((pki / "ca.crt").read_bytes()).decode()
    ports = {k: free_port() for k in ("kueue_webhook", "kueue_health", "kueue_metrics", "jobset_webhook",
                                      "jobset_health")}
    kueue_url = f"https://127.0.0.1:{ports['kueue_webhook']}"
    jobset_url = f"https://127.0.0.1:{ports['jobset_webhook']}"

    crds = [*kueue_crds(kueue_src, kueue_url + "/convert", ca), *jobset_crds(jobset_src)]
    for crd in crds:  # told apart from the control plane's own, to be removed again (``remove_crds``)
        crd["metadata"].setdefault("labels", {})["app.kubernetes.io/managed-by"] = MANAGED_BY
    kube.apply(*crds)
    kube.kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
    kube.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kueue-system"}})

    (state / "kueue.yaml").write_text(yaml.safe_dump({
        "apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['kueue_health']}"},
        "metrics": {"bindAddress": f"127.0.0.1:{ports['kueue_metrics']}"},
        "webhook": {"host": "127.0.0.1", "port": ports["kueue_webhook"], "certDir": str(pki)},
        "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False, "integrations": {"frameworks": list(KUEUE_INTEGRATIONS)},
        **(kueue_config or {})}))
    (state / "jobset.yaml").write_text(yaml.safe_dump({
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1", "kind": "Configuration",
        "health": {"healthProbeBindAddress": f"127.0.0.1:{ports['jobset_health']}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": ports["jobset_webhook"], "certDir": str(pki)},
        "leaderElection": {"leaderElect": False}, "internalCertManagement": {"enable": False}}))
    # VisibilityOnDemand off: on, Kueue serves its visibility API with certificates from /visibility.
    _spawn(cp, "kueue", [str(bindir / "kueue"), "--config", str(state / "kueue.yaml"),
                         "--feature-gates", "VisibilityOnDemand=false", "--zap-log-level", "info"])
    _spawn(cp, "jobset", [str(bindir / "jobset"), "--config", str(state / "jobset.yaml"), "--zap-devel=false"])
    fronts = Frontends(cp.dir, ports["kueue_health"], ports["jobset_health"])

    deadline = time.monotonic() + READY_TIMEOUT
    missing: list[str] = []
    while time.monotonic() < deadline:
        missing = []
        for name, port in (("kueue", ports["kueue_health"]), ("jobset", ports["jobset_health"])):
            ended = _ended(cp.dir, name)
            if ended is not None:
                stop(cp)
                raise FrontendsError(f"{name} exited at its start ({ended}); see {cp.dir}/logs/{name}.log\n"
                                     f"{fronts.logs()}")
            if not _ready(port):
                missing.append(f"{name}'s readiness probe (127.0.0.1:{port}/readyz)")
        if not missing:
            break
        time.sleep(0.5)
    if missing:
        stop(cp)
        raise FrontendsError(f"not ready after {READY_TIMEOUT:g}s: {', '.join(missing)}\n{fronts.logs()}")

    kube.apply(webhooks(kueue_src / "config" / "components" / "webhook" / "manifests.yaml", "kueue", kueue_url, ca,
                        keep_all=False))
    kube.apply(webhooks(jobset_src / "config" / "components" / "webhook" / "manifests.yaml", "jobset", jobset_url,
                        ca, keep_all=True))
    _probe_webhooks(kube, deadline, fronts)
    return fronts


PROBE_NAMESPACE = "koordpy-frontends-probe"


def _probe_webhooks(kube: Kube, deadline: float, fronts: Frontends) -> None:
    """Server-side dry runs that pass through each controller's webhooks: a ResourceFlavor (Kueue's
    cluster-scoped kinds), a Job naming a queue (Kueue's Job webhook) and a JobSet (JobSet's), the
    last two in a labelled namespace. The API server calls the webhooks on a dry run too."""
    kube.apply({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": PROBE_NAMESPACE, "labels": {NAMESPACE_LABEL: "true"}}})
    container = {"name": "c", "image": "busybox"}
    probes = {
        "Kueue's ResourceFlavor webhook": {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                           "metadata": {"name": "koordpy-probe"}},
        "Kueue's Job webhook": {"apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": "probe", "namespace": PROBE_NAMESPACE, "labels": {"kueue.x-k8s.io/queue-name": "probe"}},
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}},
        "JobSet's webhook": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {
            "name": "probe", "namespace": PROBE_NAMESPACE}, "spec": {"replicatedJobs": [{"name": "w", "template": {
                "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}}]}},
    }
    errors: dict[str, str] = {}
    dry_run = [kube.cp.kubectl_path, "--kubeconfig", kube.cp.kubeconfig, "create", "--dry-run=server", "-f", "-"]
    for what, obj in probes.items():
        while True:
            run = subprocess.run(dry_run, input=json.dumps(obj), capture_output=True, text=True, timeout=60,
                                 check=False)
            if run.returncode == 0:
                errors.pop(what, None)
                break
            errors[what] = run.stderr.strip()
            if time.monotonic() > deadline:
                stop(kube.cp)
                raise FrontendsError("webhooks not answering the API server: "
                                     + "; ".join(f"{k}: {v}" for k, v in errors.items()) + "\n" + fronts.logs())
            time.sleep(0.5)


def stop(cp: ControlPlane) -> None:
    """Unregisters the webhooks (so nothing is refused once they are gone) and stops both controllers.
    Their CRDs stay (a Kueue Topology keeps its CRD); the objects are the tests' to delete while the
    controllers run (Kueue's finalizers)."""
    Kube(cp).kubectl("delete", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-l",
                     f"app.kubernetes.io/managed-by={MANAGED_BY}", "--ignore-not-found", check=False)
    _stop_processes(cp.dir)


def own_crds(kube: Kube) -> list[Path]:
    """koordpy's CRDs (crds/), less its copy of Kueue's Topology CRD once Kueue's own is installed
    (by ``start`` in an earlier run, on a reused control plane, told by the label ``start`` gives
    it): the copy would replace Kueue's schema with koordpy's under a running
    Kueue; and the real one serves the v1beta2 koordpy reads."""
    crds = sorted((ROOT / "crds").glob("*.yaml"))
    owner = kube.kubectl("get", "crd", "topologies.kueue.x-k8s.io", "-o",
                         r"jsonpath={.metadata.labels.app\.kubernetes\.io/managed-by}", check=False).strip()
    return [f for f in crds if f.name != "kueue.x-k8s.io_topologies.yaml" or owner != MANAGED_BY]


def remove_crds(cp: ControlPlane, own: Path) -> None:
    """Deletes Kueue's and JobSet's CRDs (their objects gone already: Kueue's finalizers need Kueue)
    and applies ``own`` again, koordpy's copy of Kueue's Topology CRD, which Kueue's replaced: the
    tests after these find the control plane as the session fixture made it (no JobSet kind served,
    Topology v1alpha1 served)."""
    kube = Kube(cp)
    selector = f"app.kubernetes.io/managed-by={MANAGED_BY}"
    # Objects left with a finalizer only the stopped controllers remove (a test that failed before its
    # cleanup, a Workload whose Job went while Kueue was stopping) would hold their CRD's deletion
    # forever: nobody else will act on them now, so their finalizers go first.
    crds = json.loads(kube.kubectl("get", "customresourcedefinitions", "-l", selector, "-o", "json"))["items"]
    for crd in crds:
        resource = f"{crd['spec']['names']['plural']}.{crd['spec']['group']}"
        for obj in kube.everywhere(resource):
            if obj["metadata"].get("finalizers"):
                meta = obj["metadata"]
                where = ["-n", meta["namespace"]] if meta.get("namespace") else []
                kube.kubectl("patch", resource, meta["name"], *where, "--type=merge",
                             "-p", '{"metadata": {"finalizers": null}}', check=False)
    kube.kubectl("delete", "crd", "-l", selector, "--ignore-not-found", "--timeout=120s")
    kube.kubectl("apply", "-f", str(own))
    kube.kubectl("wait", "--for=condition=Established", "crd", "topologies.kueue.x-k8s.io", "--timeout=60s")


def clear_stale(cp: ControlPlane) -> None:
    """Unregisters the webhooks of a session that ended without ``stop`` (killed), on a control plane
    reused between runs: with their controllers gone they would refuse what they are asked about."""
    if any(_alive(pid, name) for name in NAMES if (pid := _pid(cp.dir, name)) is not None):
        return
    kube = Kube(cp)
    if kube.kubectl("get", "mutatingwebhookconfigurations,validatingwebhookconfigurations", "-o", "name",
                    "-l", f"app.kubernetes.io/managed-by={MANAGED_BY}", check=False).strip():
        stop(cp)


def _main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("up", "down"):
        print("usage: python -m tests.integration.frontends up|down DIR", file=sys.stderr)
        return 2
    cp_dir = Path(argv[1]).resolve()
    cp = ControlPlane(dir=cp_dir, env=read_env(cp_dir / "env"))
    try:
        if argv[0] == "up":
            start(cp)
        else:
            stop(cp)
    except FrontendsError as exc:
        print(f"frontends: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
