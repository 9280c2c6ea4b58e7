"""The Helm chart ``charts/koordpy`` as rendered by the real ``helm`` (built by e2e/controlplane/build.sh).

Checked without a cluster: lint, what ``helm template`` renders for several value sets, that the
schema refuses bad values with helm's own message, that the RBAC has no wildcard and grants the
kinds ``koordpy.api.kinds`` says the scheduler reads and writes, that the ConfigMap is a
configuration ``koordpy.settings`` accepts, and that the chart's CRDs are the repository's.
tests/integration/test_chart.py installs it on the local control plane.
"""

from __future__ import annotations

import json
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from koordpy import __version__
from koordpy.api.kinds import grants as registry_grants
from koordpy.api.kinds import watched
from koordpy.settings import parse

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "koordpy"
BUILD = ROOT / "e2e" / "controlplane" / "build.sh"
NAMESPACE = "koordpy-system"
Grant = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)

# Which topology source each topology kind belongs to (values' config.topologySources).
SOURCE_OF = {"clusternetworktopologies.scheduling.koordinator.sh": "koordinator",
             "hypernodes.topology.volcano.sh": "volcano",
             "topologies.kueue.x-k8s.io": "kueue", "topologies.kai.scheduler": "kueue"}


@cache
def helm() -> str:
    """The helm binary; building it (once, cached by build.sh) is part of the test."""
    run = subprocess.run([str(BUILD)], capture_output=True, text=True, timeout=3600, check=False)
    assert run.returncode == 0, f"e2e/controlplane/build.sh failed:\n{run.stderr[-3000:]}"
    binary = Path(run.stdout.strip().splitlines()[-1]) / "helm"
    assert binary.is_file(), binary
    return str(binary)


def render(*sets: str, release: str = "koordpy", namespace: str = NAMESPACE,
           check: bool = True) -> subprocess.CompletedProcess[str]:
    args = [helm(), "template", release, str(CHART), "--namespace", namespace]
    for s in sets:  # a value that --set cannot spell (an empty list) is given as JSON
        args += ["--set-json", s.removeprefix("json:")] if s.startswith("json:") else ["--set", s]
    run = subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)
    if check:
        assert run.returncode == 0, run.stderr
    return run


def objects(*sets: str, **kw: Any) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(render(*sets, **kw).stdout) if d]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind} objects rendered"
    return found[0]


def grants(rules: list[dict[str, Any]]) -> set[Grant]:
    """Every (apiGroup, resource, verb) the rules allow (resourceNames narrow a grant, not widen it)."""
    return {(g, r, v) for rule in rules for g in rule.get("apiGroups", []) for r in rule.get("resources", [])
            for v in rule.get("verbs", [])}


def rbac_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for d in docs if d["kind"] in ("ClusterRole", "Role") for rule in d.get("rules") or []]


def config_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(one(docs, "ConfigMap")["data"]["config.yaml"])
    return data


def test_helm_lint_is_clean() -> None:
    run = subprocess.run([helm(), "lint", "--strict", str(CHART)], capture_output=True, text=True, timeout=120,
                         check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "[WARNING]" not in run.stdout and "[ERROR]" not in run.stdout, run.stdout


def test_default_render_has_every_object_and_no_service() -> None:
    docs = objects()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment", "PodDisruptionBudget", "Role",
                     "RoleBinding", "ServiceAccount"]
    assert all(d["metadata"]["namespace"] == NAMESPACE for d in docs
               if d["kind"] not in ("ClusterRole", "ClusterRoleBinding"))
    service = one(objects("metricsService.enabled=true", "config.server.port=9100"), "Service")
    assert service["spec"]["ports"][0]["port"] == 10251 and service["spec"]["ports"][0]["targetPort"] == "http"


def test_the_configmap_is_a_configuration_koordpy_accepts() -> None:
    docs = objects("config.schedulerNames={koordpy,gang}", "config.preemption=false", "config.podsPerCycle=250",
                   "config.deviceGangSearchSeconds=3", "config.topologySources={volcano}",
                   "config.logging.level=DEBUG",
                   "config.leaderElection.leaseName=sched", "config.server.port=9100")
    settings = parse(config_of(docs), "the chart's ConfigMap")
    assert settings.scheduler_names == ("koordpy", "gang")
    assert settings.preemption is False and settings.pods_per_cycle == 250
    assert settings.device_gang_search_seconds == 3.0
    assert settings.topology_sources == ("volcano",)
    assert settings.logging.level == "DEBUG" and settings.logging.format == "json"
    le = settings.leader_election
    assert le.enabled and le.lease_name == "sched" and le.namespace() == NAMESPACE
    assert settings.server.bind_address == "0.0.0.0:9100"
    # Every key the chart writes is one koordpy reads: nothing falls back to a default unseen.
    assert parse(config_of(objects()), "defaults").leader_election.enabled is True
    assert parse(config_of(objects()), "defaults").pods_per_cycle == 100
    assert parse(config_of(objects()), "defaults").device_gang_search_seconds == 1.0


def test_the_deployment() -> None:
    docs = objects("config.server.port=9100")
    deploy = one(docs, "Deployment")
    spec = deploy["spec"]["template"]["spec"]
    assert deploy["spec"]["replicas"] == 2
    [c] = spec["containers"]
    assert c["image"] == f"koordpy:{__version__}"
    assert [*c["command"], *c["args"]] == ["koordpy", "run", "--config", "/etc/koordpy/config.yaml"]
    env = {e["name"]: e for e in c["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    assert env["NUMBA_CACHE_DIR"]["value"] == "/tmp/numba"
    assert c["ports"] == [{"name": "http", "containerPort": 9100, "protocol": "TCP"}]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert c["resources"]["requests"] and c["resources"]["limits"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["serviceAccountName"] == one(docs, "ServiceAccount")["metadata"]["name"]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]  # the only writable path: numba's cache
    assert volumes[mounts["/etc/koordpy"]]["configMap"]["name"] == one(docs, "ConfigMap")["metadata"]["name"]
    # The ConfigMap's content is in the pod template, so a changed configuration rolls the pods.
    other = one(objects("config.logging.level=DEBUG"), "Deployment")
    assert (other["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
            != deploy["spec"]["template"]["metadata"]["annotations"]["checksum/config"])


def test_the_replicas_prefer_different_nodes_and_a_disruption_budget_keeps_one() -> None:
    # As HA control-plane components run: the leader and its standby on different nodes when the
    # cluster allows (preferred: a one-node cluster still runs both), and a drain evicts one at a time.
    docs = objects()
    deploy = one(docs, "Deployment")
    selector = deploy["spec"]["selector"]["matchLabels"]
    template = deploy["spec"]["template"]
    assert selector.items() <= template["metadata"]["labels"].items()
    affinity = template["spec"]["affinity"]
    assert set(affinity) == {"podAntiAffinity"}
    [term] = affinity["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in affinity["podAntiAffinity"]
    assert term["weight"] == 100
    assert term["podAffinityTerm"] == {"labelSelector": {"matchLabels": selector},
                                       "topologyKey": "kubernetes.io/hostname"}
    pdb = one(docs, "PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1" and pdb["metadata"]["namespace"] == NAMESPACE
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}

    # One replica: no budget (minAvailable 1 would forbid every drain); both can be turned off.
    assert not [d for d in objects("replicaCount=1") if d["kind"] == "PodDisruptionBudget"]
    assert not [d for d in objects("podDisruptionBudget.enabled=false") if d["kind"] == "PodDisruptionBudget"]
    assert "affinity" not in one(objects("podAntiAffinity.enabled=false"), "Deployment")["spec"]["template"]["spec"]
    assert one(objects("podDisruptionBudget.minAvailable=50%"), "PodDisruptionBudget")["spec"]["minAvailable"] == "50%"
    zone = one(objects("podAntiAffinity.topologyKey=topology.kubernetes.io/zone", "podAntiAffinity.weight=50"),
               "Deployment")["spec"]["template"]["spec"]["affinity"]
    [term] = zone["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["weight"] == 50 and term["podAffinityTerm"]["topologyKey"] == "topology.kubernetes.io/zone"

    # The user's affinity is kept beside it; a podAntiAffinity of the user's replaces it.
    node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}]}]}}
    merged = one(objects("json:affinity=" + json.dumps({"nodeAffinity": node_affinity})),
                 "Deployment")["spec"]["template"]["spec"]["affinity"]
    assert merged["nodeAffinity"] == node_affinity and "podAntiAffinity" in merged
    own = {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}]}
    replaced = one(objects("json:affinity=" + json.dumps({"podAntiAffinity": own})),
                   "Deployment")["spec"]["template"]["spec"]["affinity"]
    assert replaced == {"podAntiAffinity": own}


@pytest.mark.parametrize("sets", [(), ("config.topologySources={koordinator}", "config.preemption=false"),
                                  ("json:config.topologySources=[]",), ("config.leaderElection.enabled=false",)])
def test_rbac_has_no_wildcard(sets: tuple[str, ...]) -> None:
    docs = objects(*sets)
    for d in docs:
        if d["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in d["rules"]:
            assert "nonResourceURLs" not in rule, (d["metadata"]["name"], rule)
            for field in ("apiGroups", "resources", "verbs", "resourceNames"):
                for value in rule.get(field, []):
                    assert "*" not in value, (d["metadata"]["name"], field, rule)
            assert rule["verbs"] and rule["resources"], rule


def test_cluster_role_grants_what_the_kinds_registry_reads_and_writes() -> None:
    granted = grants(one(objects(), "ClusterRole")["rules"])
    want: set[Grant] = set()
    for kind in watched():
        want |= {(kind.group, kind.plural, "list"), (kind.group, kind.plural, "watch")}
        if kind.writes_status:
            want.add((kind.group, f"{kind.plural}/status", "patch"))
        if kind.patches:
            want.add((kind.group, kind.plural, "patch"))
    want |= {("", "pods/binding", "create"), ("", "pods/status", "patch"), ("", "pods", "patch"),
             ("", "pods", "delete"), ("", "events", "create"),
             ("", "events", "patch"),
             # kopf watches the CRDs to notice a kind installed after the start
             ("apiextensions.k8s.io", "customresourcedefinitions", "list"),
             ("apiextensions.k8s.io", "customresourcedefinitions", "watch"),
             # DRA's PreBind writes, as kube-scheduler v1.37.2's ClusterRole grants them (with patch
             # for update), and the claim of a pod's DRA-backed extended resources
             ("resource.k8s.io", "resourceclaims/binding", "patch"), ("resource.k8s.io", "resourceclaims", "create"),
             ("resource.k8s.io", "resourceclaims", "delete")}
    assert granted == want, (sorted(granted - want), sorted(want - granted))


@pytest.mark.parametrize(("sets", "sources", "preemption"), [
    ((), None, True),
    (("config.topologySources={koordinator}", "config.preemption=false", "config.staleGangGracePeriodSeconds=-1"),
     ("koordinator",), False),
    (("json:config.topologySources=[]",), (), True),
    (("config.topologySources={volcano,kueue}",), ("volcano", "kueue"), True)])
def test_cluster_role_is_exactly_what_the_kinds_registry_needs(sets: tuple[str, ...], sources: tuple[str, ...] | None,
                                                                preemption: bool) -> None:
    # Every kind the scheduler lists, watches and writes (Kind.writes) has its rule with those verbs,
    # and no rule is left for a kind the registry does not have (or a verb it does not use).
    granted = grants(one(objects(*sets), "ClusterRole")["rules"])
    want = registry_grants(sources, preemption, evicts=preemption)
    assert granted == want, {"granted for nothing the registry has": sorted(granted - want),
                             "needed and not granted": sorted(want - granted)}


def test_cluster_role_follows_topology_sources_and_preemption() -> None:
    full = grants(one(objects(), "ClusterRole")["rules"])
    only = grants(one(objects("config.topologySources={koordinator}", "config.preemption=false",
                              "config.staleGangGracePeriodSeconds=-1"), "ClusterRole")["rules"])
    dropped = {(g, r.split("/")[0], v) for g, r, v in full - only}
    assert ("", "pods", "delete") in dropped
    topology_groups = {ident.split(".", 1)[1] for ident, source in SOURCE_OF.items() if source != "koordinator"}
    assert {g for g, _, _ in dropped} == {"", *topology_groups}
    assert ("scheduling.koordinator.sh", "clusternetworktopologies", "watch") in only
    none = grants(one(objects("json:config.topologySources=[]"), "ClusterRole")["rules"])
    assert not {g for g, _, _ in none} & {ident.split(".", 1)[1] for ident in SOURCE_OF}


def test_pods_delete_stays_with_preemption_off_while_stale_gangs_are_evicted() -> None:
    # Stale gangs' members are deleted too: only a negative grace (report only) drops the verb.
    off = grants(one(objects("config.preemption=false"), "ClusterRole")["rules"])
    assert ("", "pods", "delete") in off
    never = grants(one(objects("config.preemption=false", "config.staleGangGracePeriodSeconds=-1"),
                       "ClusterRole")["rules"])
    assert ("", "pods", "delete") not in never


def test_pods_delete_stays_while_gangs_kueue_admitted_are_evicted() -> None:
    # admittedStaleGangGracePeriodSeconds (-1 by default: Kueue recovers them) set to evict them too.
    kueued = grants(one(objects("config.preemption=false", "config.staleGangGracePeriodSeconds=-1",
                                "config.admittedStaleGangGracePeriodSeconds=60"), "ClusterRole")["rules"])
    assert ("", "pods", "delete") in kueued


def test_the_configmap_carries_the_grace_for_gangs_kueue_admitted() -> None:
    config = yaml.safe_load(one(objects(), "ConfigMap")["data"]["config.yaml"])
    assert config["admittedStaleGangGracePeriodSeconds"] == -1
    assert parse(config).admitted_stale_gang_grace_period_seconds == -1
    set_ = yaml.safe_load(one(objects("config.admittedStaleGangGracePeriodSeconds=60"), "ConfigMap")["data"]
                          ["config.yaml"])
    assert parse(set_).admitted_stale_gang_grace_period_seconds == 60


def test_lease_role_only_with_leader_election() -> None:
    docs = objects("config.leaderElection.leaseName=sched")
    role = one(docs, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert grants(role["rules"]) == {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")}
    named = [r for r in role["rules"] if "resourceNames" in r]
    assert named and all(r["resourceNames"] == ["sched"] for r in named)
    binding = one(docs, "RoleBinding")
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": one(docs, "ServiceAccount")["metadata"]["name"],
                                    "namespace": NAMESPACE}]
    kinds = {d["kind"] for d in objects("config.leaderElection.enabled=false")}
    assert not kinds & {"Role", "RoleBinding"}


@pytest.mark.parametrize(("sets", "error"), [
    (("replicaCount=two",), "at '/replicaCount': got string, want integer"),
    (("config.bogus=1",), "additional properties 'bogus' not allowed"),
    (("config.topologySources={slurm}",), "/config/topologySources/0"),
    (("config.logging.level=verbose",), "/config/logging/level"),
    (("config.server.port=70000",), "/config/server/port"),
    (("config.leaderElection.renewDeadlineSeconds=20",),
     "config.leaderElection.renewDeadlineSeconds must be less than leaseDurationSeconds"),
    (("serviceAccount.create=false",), "serviceAccount.name is required when serviceAccount.create is false"),
    (("podDisruptionBudget.minAvailable=most",), "/podDisruptionBudget/minAvailable"),
    (("podAntiAffinity.weight=101",), "/podAntiAffinity/weight"),
])
def test_bad_values_are_refused_with_a_message_naming_the_key(sets: tuple[str, ...], error: str) -> None:
    run = render(*sets, check=False)
    assert run.returncode != 0, run.stdout[:500]
    assert error in run.stderr, run.stderr
    assert "panic" not in run.stderr


def test_chart_crds_are_the_repository_crds() -> None:
    top = {p.name: p.read_bytes() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_bytes() for p in (CHART / "crds").glob("*.yaml")}
    assert sorted(chart) == sorted(top), "charts/koordpy/crds/ must hold exactly the files of crds/"
    differ = [name for name in top if top[name] != chart[name]]
    assert differ == [], f"copy crds/{differ[0]} to charts/koordpy/crds/ (they differ)"


def test_the_kueue_guides_values_render_the_defaults_they_state() -> None:
    """``examples/kueue/values.yaml`` (docs/behind-kueue.md's ``helm install -f``) renders, and states
    the chart's defaults: the guide says so, and a default that moved would make it wrong."""
    values = ROOT / "examples" / "kueue" / "values.yaml"
    run = subprocess.run([helm(), "template", "koordpy", str(CHART), "--namespace", NAMESPACE, "-f", str(values)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    guided = config_of([d for d in yaml.safe_load_all(run.stdout) if d])
    assert guided == config_of(objects())
    stated = yaml.safe_load(values.read_text())["config"]
    assert stated == {k: guided[k] for k in stated}, (stated, guided)
