"""``koordpy explain`` offline on the seed examples, and its live path against a fake API server
that records every request (so that explain is seen to read and never write)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from koordpy.cli.explain import parse_target
from koordpy.cli.manifests import load_documents
from koordpy.core.explain import AmbiguousGang, explain_pod, explain_podgroup
from koordpy.core.gang import GangGroupId
from koordpy.core.state import SchedulerState
from koordpy.sim.simulator import World
from tests.builders import pod, podgroup

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SPINE_BLOCK = str(EXAMPLES / "spine-block")
PREEMPTION = str(EXAMPLES / "preemption")


def koordpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "koordpy", "explain", *args], capture_output=True, text=True,
                          cwd=ROOT, check=False)


def explain_json(*args: str) -> dict[str, Any]:
    run = koordpy(*args, "-o", "json")
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def write(tmp_path: Path, name: str, *objects: object) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


# -- offline on the examples ------------------------------------------------------------


def test_must_gather_gang_that_cannot_fit_names_layer_offerslots_and_shortfall() -> None:
    out = explain_json("default/too-big-0", "-f", SPINE_BLOCK)
    assert out["status"] == "pending"
    assert out["topology"] == {"source": "koordinator", "required": ["MustGather SpineLayer"], "preferred": []}
    d = out["diagnosis"]
    assert d["desired"] == 6
    # The example's spines as given (nothing bound yet): 5, 4 and 3 nodes of 8 CPUs, best first.
    assert d["domains"] == [{"name": "SpineLayer/spine-0", "offerslots": 5},
                            {"name": "SpineLayer/spine-1", "offerslots": 4},
                            {"name": "SpineLayer/spine-2", "offerslots": 3}]
    assert d["resolvable"] is True
    assert d["fitsEmptyCluster"] is False  # no spine has six nodes: waiting will not help
    assert any("5 of 6, in SpineLayer/spine-0" in c and "preemption cannot help" in c for c in out["changes"])
    g = out["job"]["gangs"][0]
    assert (g["key"], g["minMember"], g["members"], g["bound"], g["pending"]) == ("default/too-big", 6, 6, 0, 6)


def test_gang_waiting_for_room_says_how_much_more_is_needed_where() -> None:
    # The preemption example: a MustGather gang of four 8-CPU pods where every spine has three free
    # nodes; it fits an empty cluster, so the answer is the room missing in the best spine.
    run = koordpy("default/train-0", "-f", PREEMPTION)
    assert run.returncode == 0, run.stderr
    assert "room for 1 more pod(s) in SpineLayer/spine-0: it offers 3 of the 4 needed" in " ".join(run.stdout.split())
    assert "MustGather SpineLayer" in run.stdout


def test_selector_nobody_matches_names_the_filter_and_count_and_preemption_cannot_help(tmp_path: Path) -> None:
    lonely = pod("lonely", nodeSelector={"example.com/gpu": "h100"})
    extra = write(tmp_path, "lonely.yaml", lonely)
    out = explain_json("default/lonely", "-f", str(EXAMPLES / "spine-block" / "cluster.yaml"), "-f", extra)
    d = out["diagnosis"]
    assert d["resolvable"] is False
    assert d["nodes"] == 12
    assert d["filtered"] == [{"reason": "node(s) didn't match Pod's node affinity/selector", "nodes": 12}]
    assert any("no node passes the filters (12 node(s) didn't match Pod's node affinity/selector)" in c
               and "preemption cannot help" in c for c in out["changes"])
    assert out["job"]["kind"] == "pod"
    table = koordpy("default/lonely", "-f", str(EXAMPLES / "spine-block" / "cluster.yaml"), "-f", extra)
    assert "12 node(s): node(s) didn't match Pod's node affinity/selector" in table.stdout
    assert "preemption could help: no" in table.stdout


def test_gang_short_of_min_member_says_so(tmp_path: Path) -> None:
    objects = [podgroup("short", 8), *(pod(f"short-{i}", group="short") for i in range(6))]
    extra = write(tmp_path, "short.yaml", *objects)
    cluster = str(EXAMPLES / "spine-block" / "cluster.yaml")
    out = explain_json("default/short-3", "-f", cluster, "-f", extra)
    assert out["status"] == "pending"
    assert out["diagnosis"] is None  # it is not tried at all: pre_filter stops it
    assert "minMember: 8" in out["summary"]
    assert out["changes"][0] == ("minMember 8 but only 6 pod(s) of gang default/short exist: create 2 more "
                                 "(or lower minMember)")
    group = explain_json("podgroup", "default/short", "-f", cluster, "-f", extra)
    assert group["target"] == {"kind": "podgroup", "key": "default/short"}
    assert group["job"]["gangs"][0]["members"] == 6
    assert group["job"]["gangs"][0]["minMember"] == 8
    assert group["changes"] == out["changes"]


def test_bound_pod_says_where_it_went_and_where_its_gang_is() -> None:
    out = explain_json("default/training-pod-0", "-f", SPINE_BLOCK, "--simulate")
    assert out["status"] == "bound"
    assert "node-5" in out["summary"]
    pods = {p["key"]: p for p in out["pods"]}
    assert pods["default/training-pod-0"]["path"] == ["SpineLayer/spine-1", "BlockLayer/block-2", "node-5"]
    assert {p["node"] for p in pods.values()} == {"node-5", "node-6", "node-7", "node-8"}
    assert out["diagnosis"] is None and out["preemption"] is None
    table = koordpy("default/training-pod-0", "-f", SPINE_BLOCK, "--simulate")
    assert table.stdout.startswith("pod default/training-pod-0: BOUND\n")
    assert "SpineLayer/spine-1 > BlockLayer/block-3 > node-8" in table.stdout


def test_bound_in_the_manifests_without_simulating() -> None:
    out = explain_json("default/notebook", "-f", PREEMPTION)
    assert out["status"] == "bound"
    assert out["pods"][0]["path"] == ["SpineLayer/spine-1", "BlockLayer/block-2", "node-5"]


def test_preemption_reports_what_would_be_evicted() -> None:
    out = explain_json("default/train-2", "-f", PREEMPTION)
    p = out["preemption"]
    assert p["policy"] == "PreemptLowerPriority"
    assert p["priority"] == 1000000
    assert p["outcome"] == "nominated"
    assert p["wouldEvict"] == ["default/notebook"]
    assert p["where"] == "SpineLayer/spine-1"
    assert p["wouldNominate"] == {f"default/train-{i}": f"node-{i + 5}" for i in range(4)}
    assert p["nominated"] == {} and p["terminating"] == []
    assert out["changes"][0].startswith("preemption makes room: evicting default/notebook in SpineLayer/spine-1")
    table = koordpy("default/train-2", "-f", PREEMPTION)
    assert "would evict: default/notebook (in SpineLayer/spine-1)" in table.stdout


def test_preemption_policy_never_is_said(tmp_path: Path) -> None:
    docs = yaml.safe_load_all((EXAMPLES / "preemption" / "jobs.yaml").read_text())
    changed = []
    for doc in docs:
        if doc.get("kind") == "PriorityClass" and doc["metadata"]["name"] == "training-high":
            doc["preemptionPolicy"] = "Never"
        changed.append(doc)
    jobs = write(tmp_path, "jobs.yaml", *changed)
    out = explain_json("default/train-0", "-f", str(EXAMPLES / "preemption" / "cluster.yaml"), "-f", jobs)
    assert out["preemption"]["policy"] == "Never"
    assert out["preemption"]["outcome"] == "none"
    assert out["preemption"]["wouldEvict"] == []
    assert any("preemptionPolicy is Never" in c for c in out["changes"])


def test_volcano_tier_failure_lists_hypernodes() -> None:
    out = explain_json("podgroup", "default/within-tier-1", "-f", str(EXAMPLES / "volcano-tiers"), "--simulate")
    assert out["topology"]["source"] == "volcano"
    assert out["topology"]["required"] == ["the job within one HyperNode up to tier 1"]
    names = [d["name"] for d in out["diagnosis"]["domains"]]
    assert names == ["s0", "s1", "s2", "s3"]
    assert out["diagnosis"]["desired"] == 3


def test_kai_job_bound_in_its_zone() -> None:
    out = explain_json("default/tune-0", "-f", str(EXAMPLES / "kai-rack"), "--simulate")
    assert out["status"] == "bound"
    assert out["topology"] == {"source": "kai", "required": ["zone of Topology network"],
                               "preferred": ["rack of Topology network"]}
    assert out["job"]["kind"] == "gang (the pods of Job tune)"
    assert len(out["pods"][0]["path"]) == 3


KAI_RACK = str(EXAMPLES / "kai-rack")


@pytest.mark.parametrize("name", ["default/Job/tune", "default/job/tune", "default/tune"])
def test_explain_podgroup_takes_the_names_messages_give_an_owner_group(name: str) -> None:
    # Issue 17 item 12: the KAI group of Job tune's pods has no PodGroup object; messages call it
    # default/Job/tune, and explain podgroup takes that, the kind in any case, or the short name.
    out = explain_json("podgroup", name, "-f", KAI_RACK, "--simulate")
    assert out["target"] == {"kind": "podgroup", "key": "default/Job/tune"}
    assert out["status"] == "bound"
    assert [g["key"] for g in out["job"]["gangs"]] == ["default/Job/tune"]


def test_explain_podgroup_short_name_shared_by_two_groups_lists_them(tmp_path: Path) -> None:
    lone = pod("tune", annotations={"kai.scheduler/topology": "network",
                                    "kai.scheduler/topology-required-placement": "rack"})
    extra = write(tmp_path, "lone.yaml", lone)  # its own group: default/Pod/tune
    run = koordpy("podgroup", "default/tune", "-f", KAI_RACK, "-f", extra)
    assert run.returncode == 2, run.stdout
    assert run.stderr.splitlines()[-1] == ("koordpy explain: error: default/tune names 2 groups: default/Job/tune, "
                                           "default/Pod/tune; give one of them")
    run = koordpy("podgroup", "default/Pod/tune", "-f", KAI_RACK, "-f", extra)
    assert run.returncode == 0, run.stderr
    world = World.from_objects(load_documents([KAI_RACK, extra]).docs)
    with pytest.raises(AmbiguousGang) as err:
        explain_podgroup(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, "default/tune")
    assert err.value.candidates == ["default/Job/tune", "default/Pod/tune"]


def test_a_pod_is_not_named_with_a_kind() -> None:
    run = koordpy("pod", "default/Job/tune", "-f", KAI_RACK)
    assert run.returncode == 2
    assert "expected NAMESPACE/NAME" in run.stderr
    run = koordpy("podgroup", "default/Job/", "-f", KAI_RACK)
    assert run.returncode == 2
    assert "expected NAMESPACE/NAME or NAMESPACE/KIND/NAME" in run.stderr


def test_a_podgroup_may_be_named_by_a_key_of_more_parts() -> None:
    # A JobSet's gang names its restart attempt after the JobSet: default/JobSet/train/attempt-1.
    assert parse_target(["podgroup", "default/JobSet/train/attempt-1"]) == ("podgroup",
                                                                          "default/JobSet/train/attempt-1")
    assert parse_target(["podgroup", "default/Job/tune"]) == ("podgroup", "default/Job/tune")


def test_a_pod_that_fits_now_is_schedulable() -> None:
    out = explain_json("default/block-pod-0", "-f", SPINE_BLOCK)
    assert out["status"] == "schedulable"
    assert set(out["wouldPlace"]) == {f"default/block-pod-{i}" for i in range(6)}


def test_json_shape() -> None:
    out = explain_json("default/train-0", "-f", PREEMPTION)
    assert out["apiVersion"] == "explain.koordpy.io/v1alpha1" and out["kind"] == "Explanation"
    assert set(out) == {"apiVersion", "kind", "target", "status", "summary", "job", "pods", "topology",
                        "diagnosis", "wouldPlace", "preemption", "changes", "messages"}
    assert set(out["job"]) == {"id", "kind", "priority", "gangs"}
    assert set(out["job"]["gangs"][0]) == {"key", "declaredBy", "minMember", "declaredMinimum", "members",
                                           "finished", "bound", "lost", "pending", "waiting", "mode",
                                           "timeoutSeconds", "timedOut", "error", "partOf", "details"}
    assert set(out["pods"][0]) == {"key", "state", "node", "nominatedNode", "path", "message", "claims"}
    assert set(out["diagnosis"]) == {"pod", "reason", "resolvable", "nodes", "filtered", "desired", "domains",
                                     "fitsEmptyCluster", "closest"}
    assert set(out["preemption"]) == {"policy", "priority", "nominated", "terminating", "outcome", "message",
                                      "wouldEvict", "wouldRelease", "wouldNominate", "where", "beyondBudgets",
                                      "keptByBudgets", "tryAgainAt"}
    assert set(out["messages"]) == {f"default/train-{i}" for i in range(4)}


# -- bad input, unknown targets -----------------------------------------------------------


@pytest.mark.parametrize(("args", "needle"), [
    (["a/b/c"], "'a/b/c': expected NAMESPACE/NAME"),
    (["podgroup", "a/"], "'a/': expected NAMESPACE/NAME or NAMESPACE/KIND/NAME"),
    (["default/x", "-n", "ml", "-f", PREEMPTION], "'default/x' names its namespace"),
    (["pods", "default/x"], "'pods': expected pod or podgroup"),
    (["a", "b", "c"], "expected [pod|podgroup] [NAMESPACE/]NAME"),
    (["default/x", "-f", PREEMPTION, "--kubeconfig", "/dev/null"], "not both"),
    (["default/x", "--simulate", "--kubeconfig", "/nonexistent"], "--simulate needs -f"),
    (["default/x", "--kubeconfig", "/nonexistent/kubeconfig"], "--kubeconfig /nonexistent/kubeconfig: no such file"),
    (["default/x", "-f", "/nonexistent.yaml"], "/nonexistent.yaml: no such file or folder"),
])
def test_bad_arguments_exit_2(args: list[str], needle: str) -> None:
    run = koordpy(*args)
    assert run.returncode == 2, run.stdout
    assert needle in run.stderr
    assert run.stderr.count("\n") == 1 and "Traceback" not in run.stderr


def test_bad_manifest_exit_2_names_file_object_and_field(tmp_path: Path) -> None:
    bad = write(tmp_path, "bad.yaml", pod("p", cpu="many"))
    run = koordpy("default/p", "-f", bad)
    assert run.returncode == 2
    assert bad in run.stderr and "Pod default/p" in run.stderr
    assert "spec.containers[0].resources.requests.cpu" in run.stderr
    assert run.stderr.count("\n") == 1


def test_unknown_pod_or_podgroup_exit_1() -> None:
    run = koordpy("default/ghost", "-f", PREEMPTION)
    assert run.returncode == 1
    assert run.stderr == "koordpy explain: error: no pod default/ghost in the given files\n"
    run = koordpy("podgroup", "default/ghost", "-f", PREEMPTION)
    assert run.returncode == 1
    assert "no PodGroup (or gang) default/ghost" in run.stderr


def test_pod_of_another_scheduler(tmp_path: Path) -> None:
    other = write(tmp_path, "other.yaml", pod("other", scheduler="default-scheduler"))
    out = explain_json("default/other", "-f", str(EXAMPLES / "spine-block" / "cluster.yaml"), "-f", other)
    assert out["status"] == "not-ours"
    assert "'default-scheduler'" in out["summary"]


# -- nothing is changed -------------------------------------------------------------------


def test_the_core_changes_neither_state_nor_snapshot() -> None:
    world = World.from_objects(load_documents([PREEMPTION]).docs)
    snapshot = world.snapshot(frozenset({"koordpy"}))
    pods_before = list(snapshot.pods)
    state = SchedulerState(reserved={"default/x": "node-0"}, wait_since={GangGroupId.of("default/y"): 1.0})
    exp = explain_pod(snapshot, state, world.now, "default/train-0")
    assert exp is not None and exp.preemption is not None and exp.preemption.would_evict == ("default/notebook",)
    assert state.reserved == {"default/x": "node-0"} and state.wait_since == {GangGroupId.of("default/y"): 1.0}
    assert state.view is None and not state.satisfied
    assert snapshot.pods == pods_before and all(a is b for a, b in zip(snapshot.pods, pods_before, strict=True))
    assert explain_pod(snapshot, state, world.now, "default/ghost") is None
    assert explain_podgroup(snapshot, state, world.now, "default/ghost") is None


def test_offline_leaves_the_files_as_they_were() -> None:
    files = sorted((EXAMPLES / "preemption").iterdir())
    before = [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
    assert koordpy("default/train-0", "-f", PREEMPTION).returncode == 0
    assert [hashlib.sha256(f.read_bytes()).hexdigest() for f in files] == before


class _FakeApi(BaseHTTPRequestHandler):
    """Serves LISTs of the example's objects; records every request; 404 for kinds it lacks."""

    lists: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    requests: ClassVar[list[tuple[str, str]]] = []
    forbidden: ClassVar[set[str]] = set()  # paths served but not readable (403)

    def _record(self) -> None:
        self.requests.append((self.command, self.path))

    def do_GET(self) -> None:
        self._record()
        path = self.path.split("?")[0]
        if path in self.forbidden:
            self._send(403, {"kind": "Status", "code": 403})
            return
        if path not in self.lists:
            self._send(404, {"kind": "Status", "code": 404})
            return
        self._send(200, {"kind": "List", "metadata": {"resourceVersion": "7"}, "items": self.lists[path]})

    def _refuse(self) -> None:
        self._record()
        self._send(405, {"kind": "Status", "code": 405})

    do_POST = do_PUT = do_PATCH = do_DELETE = _refuse

    def _send(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def fake_api(tmp_path: Path) -> Iterator[tuple[str, type[_FakeApi]]]:
    from koordpy.api.kinds import kind_for

    lists: dict[str, list[dict[str, Any]]] = {}
    for i, (_, raw) in enumerate(load_documents([PREEMPTION]).docs):
        kind = kind_for(raw["apiVersion"], raw["kind"])
        assert kind is not None
        prefix = f"/apis/{kind.group}/{kind.version}" if kind.group else f"/api/{kind.version}"
        item = {k: v for k, v in raw.items() if k not in ("apiVersion", "kind")}  # as a list's items come
        item["metadata"] = {**item["metadata"], "resourceVersion": str(i + 1), "uid": f"uid-{i}",
                            "creationTimestamp": f"2026-01-01T00:00:{i:02d}Z"}
        lists.setdefault(f"{prefix}/{kind.plural}", []).append(item)
    from koordpy.api.kinds import watched

    for kind in watched():  # a real API server serves every core kind, if only as an empty list
        if not kind.group:
            lists.setdefault(f"/api/{kind.version}/{kind.plural}", [])
    handler = type("Api", (_FakeApi,), {"lists": lists, "requests": [], "forbidden": set()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
              "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}],
              "users": [{"name": "fake", "user": {"token": "x"}}],
              "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    try:
        yield str(path), handler
    finally:
        server.shutdown()
        server.server_close()


def test_live_path_reads_with_get_only_and_answers(fake_api: tuple[str, type[_FakeApi]]) -> None:
    kubeconfig, handler = fake_api
    out = explain_json("default/train-0", "--kubeconfig", kubeconfig)
    assert out["preemption"]["wouldEvict"] == ["default/notebook"]
    assert out["diagnosis"]["domains"][0]["offerslots"] == 3
    assert handler.requests, "the fake API server was never asked"
    assert {method for method, _ in handler.requests} == {"GET"}
    assert any(p.startswith("/api/v1/pods") for _, p in handler.requests)
    bound = explain_json("podgroup", "default/batch", "--kubeconfig", kubeconfig)
    assert bound["status"] == "bound"
    missing = koordpy("default/ghost", "--kubeconfig", kubeconfig)
    assert missing.returncode == 1 and "no pod default/ghost in the cluster" in missing.stderr
    assert {method for method, _ in handler.requests} == {"GET"}


def test_live_path_says_nothing_of_kinds_not_installed_and_notes_kinds_it_may_not_list(
        fake_api: tuple[str, type[_FakeApi]]) -> None:
    # The fake serves no JobSet, Volcano, KAI or Kueue kinds (404, their CRDs not installed): there is
    # nothing of them to leave out, and explain says nothing (issue 29, item 18). A kind it serves
    # but refuses (403) may hold objects: that is noted.
    kubeconfig, handler = fake_api
    run = koordpy("default/train-0", "--kubeconfig", kubeconfig)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    handler.forbidden.add("/apis/topology.volcano.sh/v1alpha1/hypernodes")
    run = koordpy("default/train-0", "--kubeconfig", kubeconfig)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ("koordpy explain: note: hypernodes.topology.volcano.sh not listed (403): its objects are "
                          "left out\n")


def test_a_bare_name_is_in_the_kubeconfig_contexts_namespace_or_the_one_given(
        fake_api: tuple[str, type[_FakeApi]], tmp_path: Path) -> None:
    kubeconfig, _ = fake_api
    assert explain_json("train-0", "--kubeconfig", kubeconfig)["target"] == {"kind": "pod", "key": "default/train-0"}
    assert explain_json("podgroup", "batch", "--kubeconfig", kubeconfig)["target"]["key"] == "default/batch"
    config = yaml.safe_load(Path(kubeconfig).read_text())
    config["contexts"][0]["context"]["namespace"] = "ml"
    in_ml = tmp_path / "in-ml"
    in_ml.write_text(yaml.safe_dump(config))
    missing = koordpy("train-0", "--kubeconfig", str(in_ml))
    assert missing.returncode == 1 and "no pod ml/train-0 in the cluster" in missing.stderr
    found = explain_json("train-0", "-n", "default", "--kubeconfig", str(in_ml))
    assert found["target"]["key"] == "default/train-0"


def test_a_bare_name_in_files_is_in_default_or_the_namespace_given(tmp_path: Path) -> None:
    assert explain_json("train-0", "-f", PREEMPTION)["target"]["key"] == "default/train-0"
    other = pod("p", cpu="1")
    other["metadata"]["namespace"] = "ml"
    extra = write(tmp_path, "ml.yaml", other)
    out = explain_json("p", "-n", "ml", "-f", str(EXAMPLES / "spine-block" / "cluster.yaml"), "-f", extra)
    assert out["target"]["key"] == "ml/p" and out["status"] == "schedulable"


def test_default_namespace_reads_the_current_context(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from koordpy.controller import oneshot

    def config(namespace: str | None) -> str:
        context: dict[str, Any] = {"cluster": "c", "user": "u", **({"namespace": namespace} if namespace else {})}
        path = tmp_path / f"config-{namespace}"
        path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "current-context": "x",
                                        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                                        "users": [{"name": "u", "user": {"token": "t"}}],
                                        "contexts": [{"name": "x", "context": context}]}))
        return str(path)

    assert oneshot.default_namespace(config("team-a")) == "team-a"
    assert oneshot.default_namespace(config(None)) == "default"
    monkeypatch.setenv("KUBECONFIG", config("from-env"))
    assert oneshot.default_namespace(None) == "from-env"
    assert oneshot.default_namespace(str(tmp_path / "missing")) == "default"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(oneshot, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "sa-namespace")
    assert oneshot.default_namespace(None) == "default"
    (tmp_path / "sa-namespace").write_text("in-cluster\n")
    assert oneshot.default_namespace(None) == "in-cluster"


def test_live_path_unreachable_is_one_line_exit_2(tmp_path: Path) -> None:
    config = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
              "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
              "users": [{"name": "u", "user": {"token": "x"}}],
              "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(config))
    run = koordpy("default/x", "--kubeconfig", str(path))
    assert run.returncode == 2
    assert run.stderr.startswith("koordpy explain: error: cannot list the cluster:")
    assert run.stderr.count("\n") == 1


# -- explain agrees with the scheduler ----------------------------------------------------------


def _explain(objects: list[dict[str, Any]], key: str) -> Any:
    world = World.from_objects([("test", o) for o in objects])
    exp = explain_pod(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, key)
    assert exp is not None
    return exp


def test_explain_says_preemption_helps_a_job_of_unlike_pods_and_names_its_victims(tmp_path: Path) -> None:
    from tests.builders import node, priority_class

    def at(name: str, cpu: str, spine: str) -> dict[str, Any]:
        return node(name, cpu=cpu, labels={"network.topology.nvidia.com/spine": spine,
                                           "network.topology.nvidia.com/block": f"blk-{spine}"})

    from tests.builders import SPINE_BLOCK_CNT
    must = [{"layer": "SpineLayer", "strategy": "MustGather"}]
    groups = ["default/master", "default/worker"]
    objects = [at("w0", "4", "a"), at("w1", "4", "a"), at("m0", "2", "a"), at("b0", "4", "b"), SPINE_BLOCK_CNT,
               priority_class("high", 1000), priority_class("low", 10),
               pod("low-w0", cpu="4", node_name="w0", priority_class="low", scheduler="other"),
               pod("low-w1", cpu="4", node_name="w1", priority_class="low", scheduler="other"),
               pod("low-m0", cpu="2", node_name="m0", priority_class="low", scheduler="other"),
               podgroup("master", 1, gather=must, groups=groups), podgroup("worker", 2, gather=must, groups=groups),
               pod("master-0", cpu="1", group="master", index=0, priority_class="high"),
               *[pod(f"worker-{i}", cpu="4", group="worker", index=i + 1, priority_class="high") for i in range(2)]]
    exp = _explain(objects, "default/master-0")
    assert exp.preemption is not None and exp.preemption.outcome == "nominated"
    assert set(exp.preemption.would_evict) == {"default/low-w0", "default/low-w1", "default/low-m0"}
    assert not any("preemption cannot help" in c for c in exp.changes)
    run = koordpy("default/master-0", "-f", write(tmp_path, "unlike.yaml", *objects))
    assert run.returncode == 0, run.stderr
    assert "preemption could help: yes" in run.stdout and "not helpful" not in run.stdout


def test_explain_does_not_promise_room_that_a_job_ahead_takes(tmp_path: Path) -> None:
    from tests.builders import node, priority_class

    # One free node; "first" (higher priority) is ahead of "second" in the queue and takes it.
    objects = [node("n0"), priority_class("high", 1000), priority_class("low", 10),
               pod("first", cpu="8", priority_class="high", preemptionPolicy="Never"),
               pod("second", cpu="8", priority_class="low")]
    exp = _explain(objects, "default/second")
    assert exp.status == "pending" and exp.would_place == ()
    assert "ahead of it in the queue" in exp.summary and "default/first" in exp.summary
    assert "next cycle would bind" not in exp.summary
    first = _explain(objects, "default/first")
    assert first.status == "schedulable" and first.would_place == (("default/first", "n0"),)
    run = koordpy("default/second", "-f", write(tmp_path, "queue.yaml", *objects))
    assert run.returncode == 0, run.stderr
    assert "ahead of it in the queue" in run.stdout and "next cycle would bind" not in run.stdout


# -- issue 20: Kubernetes' own PodGroups ---------------------------------------------------------

WORKLOAD_API = str(EXAMPLES / "workload-api")


def test_explain_names_a_workload_podgroups_policy_topology_preferred_label_priority_and_condition() -> None:
    out = explain_json("podgroup", "default/tune", "-f", WORKLOAD_API, "--simulate")
    gang = out["job"]["gangs"][0]
    assert gang["declaredBy"] == "PodGroup scheduling.k8s.io"
    details = gang["details"]
    assert details["policy"].startswith("gang, minCount 2")
    assert details["topology key"] == "example.com/block"
    assert details["preferred label"] == ("topology.kubernetes.io/rack "
                                          "(kai.scheduler/topology-preferred-placement)")
    assert details["priority"] == "0"
    assert details["PodGroupInitiallyScheduled"] == "True, Scheduled"
    assert out["topology"]["preferred"] == ["one domain of topology.kubernetes.io/rack inside it "
                                            "(kai.scheduler/topology-preferred-placement)"]


def test_explain_text_shows_a_workload_podgroups_facts_and_its_pending_condition(tmp_path: Path) -> None:
    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "g", "namespace": "default"},
             "spec": {"schedulingPolicy": {"basic": {}}, "priorityClassName": "high"}}
    high = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 1000}
    member = pod("p", cpu="1", priority_class="high")
    member["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    run = koordpy("podgroup", "default/g", "-f", write(tmp_path, "g.yaml", group, high, member))
    assert run.returncode == 0, run.stderr
    assert "    policy: basic (no quorum)\n" in run.stdout
    assert "    priority: 1000 (PriorityClass high)\n" in run.stdout
    assert "    PodGroupInitiallyScheduled: not set\n" in run.stdout


# -- issue 29, item 17: finished jobs, composite children, the dialect's own words ---------------


def _explain_group(objects: list[dict[str, Any]], key: str) -> Any:
    world = World.from_objects([("test", o) for o in objects])
    exp = explain_podgroup(world.snapshot(frozenset({"koordpy"})), SchedulerState(), world.now, key)
    assert exp is not None
    return exp


def _finished(p: dict[str, Any], phase: str = "Succeeded") -> dict[str, Any]:
    p["status"] = {"phase": phase}
    return p


def test_a_finished_job_is_finished_not_short_of_pods(tmp_path: Path) -> None:
    from tests.builders import node

    objects = [*(node(f"n{i}") for i in range(4)), podgroup("done", 4),
               *(_finished(pod(f"done-{i}", cpu="1", group="done", node_name=f"n{i}"), "Failed" if i == 3
                           else "Succeeded") for i in range(4))]
    exp = _explain_group(objects, "default/done")
    assert exp.status == "finished"
    assert exp.summary == "the job has finished: its 4 pod(s) 3 Succeeded, 1 Failed"
    assert exp.changes == () and not any("create" in c for c in exp.changes)
    assert [(g.members, g.finished) for g in exp.gangs] == [(0, 4)]
    assert [p.state for p in exp.pods] == ["Succeeded", "Succeeded", "Succeeded", "Failed"]
    run = koordpy("podgroup", "default/done", "-f", write(tmp_path, "done.yaml", *objects))
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("podgroup default/done: FINISHED\n")
    assert "SHORT" not in run.stdout and "create" not in run.stdout


def test_an_upstream_gang_whose_member_finished_is_bound_and_said_in_its_own_words(tmp_path: Path) -> None:
    # An Indexed Job's group (minCount 8) once one pod Succeeded: 7 live members, all bound. Nothing
    # waits, so nothing is short; and Kubernetes' PodGroup has a minCount, no mode, no waiting time.
    from tests.builders import node

    group = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
             "metadata": {"name": "idx", "namespace": "default"},
             "spec": {"schedulingPolicy": {"gang": {"minCount": 8}}}}
    members = [pod(f"idx-{i}", cpu="1", node_name=f"n{i}", schedulingGroup={"podGroupName": "idx"})
               for i in range(8)]
    objects = [*(node(f"n{i}") for i in range(8)), group, *members[:3], _finished(members[3]), *members[4:]]
    exp = _explain_group(objects, "default/idx")
    assert exp.status == "bound"
    assert exp.summary == "all 7 pod(s) are bound, on n0, n1, n2, n4, n5, n6, n7; 1 more finished (Succeeded)"
    g = exp.gangs[0]
    assert (g.members, g.finished, g.min_member, g.declared_minimum) == (7, 1, 8, "minCount 8")
    assert (g.mode, g.timeout_seconds) == (None, None)
    run = koordpy("podgroup", "default/idx", "-f", write(tmp_path, "idx.yaml", *objects))
    assert run.returncode == 0, run.stderr
    line = next(x for x in run.stdout.splitlines() if x.startswith("  gang default/idx"))
    assert line == ("  gang default/idx (PodGroup scheduling.k8s.io): 7 pod(s) (and 1 finished) of minCount 8; "
                    "7 bound, 0 pending")
    for koordinator_word in ("SHORT", "Strict", "minMember", "timeout", "waiting"):
        assert koordinator_word not in run.stdout


def test_a_short_gang_counts_its_finished_pods_apart() -> None:
    # One of a Strict gang's pods finished and a replacement waits: the gang rule counts live pods,
    # and explain says why the count is one short.
    from tests.builders import node

    objects = [*(node(f"n{i}") for i in range(4)), podgroup("g", 3),
               pod("g-0", cpu="1", group="g", node_name="n0"),
               _finished(pod("g-1", cpu="1", group="g", node_name="n1")), pod("g-2", cpu="1", group="g")]
    exp = _explain_group(objects, "default/g")
    assert exp.status == "pending"
    assert exp.changes[0] == ("minMember 3 but only 2 pod(s) of gang default/g exist (1 more finished, which count "
                              "no more): create 1 more (or lower minMember)")


def test_explain_podgroup_on_a_composite_child_explains_the_child(tmp_path: Path) -> None:
    out = explain_json("podgroup", "default/serve-0", "-f", WORKLOAD_API, "--simulate")
    assert out["target"] == {"kind": "podgroup", "key": "default/serve-0"}
    assert out["status"] == "bound"
    assert out["summary"] == ("all 2 pod(s) are bound, on r1-0; default/serve-0 is part of the gang "
                              "default/serve-replicas (CompositePodGroup scheduling.k8s.io)")
    assert out["job"]["id"] == "default/serve-replicas"
    composite, child = out["job"]["gangs"]
    assert composite["declaredBy"] == "CompositePodGroup scheduling.k8s.io"
    assert composite["declaredMinimum"] == "minGroupCount 2 of its 3 child PodGroups (at least 4 pods)"
    assert composite["details"]["policy"] == "gang, minGroupCount 2"
    assert composite["details"]["child PodGroups"] == ("serve-0 2/2 bound (minCount 2), serve-1 2/2 bound "
                                                       "(minCount 2), serve-2 0/2 bound (minCount 2)")
    assert (child["key"], child["partOf"], child["declaredBy"]) == ("default/serve-0", "default/serve-replicas",
                                                                     "PodGroup scheduling.k8s.io")
    assert (child["minMember"], child["members"], child["bound"], child["mode"]) == (2, 2, 2, None)
    assert [p["key"] for p in out["pods"]] == ["default/serve-0-0", "default/serve-0-1"]
    # A hostname level names its domain after the node: the path says it once.
    assert out["pods"][0]["path"] == ["r1", "r1-0"]
    waiting = explain_json("podgroup", "serve-2", "-f", WORKLOAD_API, "--simulate")
    assert waiting["target"]["key"] == "default/serve-2" and waiting["status"] == "pending"
    assert [p["key"] for p in waiting["pods"]] == ["default/serve-2-0", "default/serve-2-1"]
    assert waiting["wouldPlace"] == {}
    # A pod of a child: its gang is the composite's, and its own group is said beside it.
    member = explain_json("default/serve-2-1", "-f", WORKLOAD_API, "--simulate")
    assert [(g["key"], g["partOf"]) for g in member["job"]["gangs"]] == [
        ("default/serve-replicas", None), ("default/serve-2", "default/serve-replicas")]
    text = koordpy("podgroup", "default/serve-0", "-f", WORKLOAD_API, "--simulate")
    assert text.returncode == 0, text.stderr
    assert ("  group default/serve-0 (PodGroup scheduling.k8s.io) in gang default/serve-replicas: 2 pod(s) of "
            "minCount 2; 2 bound, 0 pending\n") in text.stdout
    # explain's own words for the upstream dialect: no HyperNodes, sub-groups, modes or waiting times.
    own = text.stdout.split("\n\n", 1)[1]
    for word in ("HyperNode", "sub-group", "Strict", "minMember", "timeout"):
        assert word not in own, word


def test_node_and_pod_names_sort_naturally(tmp_path: Path) -> None:
    from tests.builders import node

    objects = [*(node(f"node-{i}", cpu="1") for i in (2, 10, 1)), podgroup("t", 3),
               *(pod(f"t-{i}", cpu="1", group="t", node_name=f"node-{n}") for i, n in ((10, 1), (2, 10), (1, 2)))]
    exp = _explain_group(objects, "default/t")
    assert exp.summary == "all 3 pod(s) are bound, on node-1, node-2, node-10"
    assert [p.key for p in exp.pods] == ["default/t-1", "default/t-2", "default/t-10"]
    fits = _explain_group([*(node(f"node-{i}", cpu="1") for i in (10, 2, 1)), podgroup("u", 3),
                           *(pod(f"u-{i}", cpu="1", group="u") for i in (10, 2, 1))], "default/u")
    assert fits.status == "schedulable"
    assert [p for p, _ in fits.would_place] == ["default/u-1", "default/u-2", "default/u-10"]
    assert "on node-1, node-2, node-10" in fits.summary


def test_explain_lists_a_pods_claims_and_says_why_it_cannot_have_their_devices(tmp_path: Any) -> None:
    # Issue 30: the claim and request that fail, and why, per node; each pod's claims, made or not,
    # allocated or not, held by whom.
    import subprocess
    import sys

    import yaml

    from tests.sim.test_dra import claim, claiming, gpu_class, gpu_nodes, gpu_slice

    taken = claim("held", allocation={"devices": {"results": [
        {"request": "gpus", "driver": "gpu.example.com", "pool": "node-a", "device": f"gpu-{d}"} for d in range(8)]}},
        reservedFor=[{"resource": "pods", "name": "other", "uid": "u-other"}])
    objs = [*gpu_nodes("node-a"), gpu_class(), gpu_slice("node-a"), taken, claim("mine"),
            claiming(pod("p", cpu="1"), claim_name="mine")]
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    done = subprocess.run([sys.executable, "-m", "koordpy", "explain", "default/p", "-f", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert ("0/1 nodes are available: 1 cannot allocate all claims (claim gpus, request gpus: too few of the "
            "devices that match are free (0 of 8))") in said
    assert "claim gpus: default/mine, not allocated" in said


def test_explain_lists_the_claim_of_a_pods_dra_backed_extended_resources(tmp_path: Any) -> None:
    import subprocess
    import sys

    import yaml

    from tests.sim.test_dra import claim, gpu_class, gpu_nodes, gpu_slice

    made = claim("p-extended-resources-abcde", allocation={"devices": {"results": [
        {"request": "container-0-request-1", "driver": "gpu.example.com", "pool": "node-a", "device": "gpu-0"}]}},
        reservedFor=[{"resource": "pods", "name": "p", "uid": "uid-p"}])
    backed = gpu_class()
    backed["spec"]["extendedResourceName"] = "example.com/gpu"
    running = pod("p", cpu="1", node_name="node-a")
    running["spec"]["containers"][0]["resources"]["requests"]["example.com/gpu"] = "1"
    running["status"] = {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-abcde",
                                                         "requestMappings": []}}
    path = tmp_path / "in.yaml"
    path.write_text(yaml.safe_dump_all([*gpu_nodes("node-a"), backed, gpu_slice("node-a"), made, running]))
    done = subprocess.run([sys.executable, "-m", "koordpy", "explain", "default/p", "-f", str(path)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stdout.split())
    assert "claim <extended-resources>: default/p-extended-resources-abcde" in said, said
    assert "gpu.example.com/node-a/gpu-0" in said, said
