"""``koordpy simulate`` as a user runs it: the example, JSON and table output, bad input on stderr."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.builders import node, pod, podgroup
from tests.integration.test_examples import FRONTED  # the guides of controllers in front: applied live

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "spine-block"


def koordpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "koordpy", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False)


def test_simulate_example_json() -> None:
    run = koordpy("simulate", "-f", str(EXAMPLE), "-o", "json")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert {out["bound"][f"default/training-pod-{i}"] for i in range(4)} == {f"node-{i}" for i in range(5, 9)}
    assert set(out["bound"]) >= {f"default/block-pod-{i}" for i in range(6)}
    assert "desiredOfferSlot: 6" in out["pending"]["default/too-big-0"]
    assert out["preempted"] == []
    assert out["topology"]["detailStatus"][0]["nodeNum"] == 12
    assert out["podgroups"]["default/too-big"]["phase"] == "PreScheduling"


def test_simulate_example_table() -> None:
    run = koordpy("simulate", "-f", str(EXAMPLE / "cluster.yaml"), "-f", str(EXAMPLE / "jobs.yaml"))
    assert run.returncode == 0, run.stderr
    assert re.search(r"default/training-pod-0 +node-5 +Bound", run.stdout)
    assert "10 bound, 6 pending, 0 preempted" in run.stdout


def write(tmp_path: Path, name: str, *objects: object) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(objects))
    return str(path)


@pytest.mark.parametrize(("objects", "needles"), [
    ([podgroup("g", 0)], ["PodGroup default/g", "spec.minMember", "at least 1"]),
    ([pod("p", cpu="many")], ["Pod default/p", "spec.containers[0].resources.requests.cpu"]),
    ([pod("p", priority_class="missing")], ["Pod default/p", "spec.priorityClassName", "'missing'"]),
    ([pod("p", annotations={"gang.scheduling.koordinator.sh/network-topology-index": "x"})],
     ["Pod default/p", "metadata.annotations[gang.scheduling.koordinator.sh/network-topology-index]"]),
    ([pod("p", annotations={"gang.scheduling.koordinator.sh/name": "g"})],
     ["Pod default/p", "metadata.annotations[gang.scheduling.koordinator.sh/min-available]"]),
    ([{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}}], ["Service s", "unsupported v1/Service"]),
    ([{"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "rack"},
       "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "^n(?=$)"}}}]}}],
     ["HyperNode rack", "spec.members[0].selector.regexMatch.pattern", "RE2"]),
    ([{"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "ClusterNetworkTopology",
       "metadata": {"name": "default"}, "spec": {"networkTopologySpec": [
           {"topologyLayer": "BlockLayer", "parentTopologyLayer": "SpineLayer", "labelKey": ["b"]}]}}],
     ["ClusterNetworkTopology default", "parentTopologyLayer", "'SpineLayer'"]),
    ([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "n-gpu"},
       "spec": {"driver": "gpu.example.com", "nodeName": "n", "allNodes": True,
                "pool": {"name": "n", "resourceSliceCount": 1}}}],
     ["ResourceSlice n-gpu", "spec: exactly one of `nodeName`, `nodeSelector`, `allNodes`"]),
    ([{"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
       "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu", "count": -1}}]}}}],
     ["ResourceClaim c", "spec.devices.requests[0].exactly.count", "greater than zero"]),
    ([{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
       "spec": {"extendedResourceName": "cpu"}}], ["DeviceClass gpu", "spec.extendedResourceName"]),
])
def test_invalid_input_exits_2_naming_file_object_and_field(tmp_path: Path, objects: list[object],
                                                            needles: list[str]) -> None:
    path = write(tmp_path, "bad.yaml", node("n"), *objects)
    line = one_error_line(koordpy("simulate", "-f", path, "-o", "json"))
    assert line.startswith(f"{path} (document 2): ")
    for needle in needles:
        assert needle in line


def one_error_line(run: subprocess.CompletedProcess[str]) -> str:
    """Bad input exits 2 with exactly one line on stderr, nothing on stdout, never a traceback."""
    assert run.returncode == 2, (run.returncode, run.stderr)
    assert run.stdout == "" and "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("koordpy simulate: error: "), run.stderr
    return lines[0].removeprefix("koordpy simulate: error: ")


def test_unparseable_yaml_and_missing_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.yaml"
    bad.write_text("kind: Pod\nmetadata: {name: [unclosed\n")
    assert one_error_line(koordpy("simulate", "-f", str(bad))) == (
        f"{bad}:3:1: did not find expected ',' or ']' (while parsing a flow sequence at line 2)")
    missing = tmp_path / "nope.yaml"
    assert one_error_line(koordpy("simulate", "-f", str(missing))) == f"{missing}: no such file or folder"


def test_duplicate_yaml_key_is_an_error_not_last_one_wins(tmp_path: Path) -> None:
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump(node("n")) + "---\n" + yaml.safe_dump(pod("p", cpu="1"))
                    + "spec:\n  nodeName: n\n")
    line = one_error_line(koordpy("simulate", "-f", str(path)))
    assert re.fullmatch(re.escape(str(path)) + r":\d+:1: duplicate key 'spec' \(first at line \d+\)", line)


def test_same_object_in_two_files_names_both_places(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", node("n1"), node("n2"), podgroup("g", 1))
    b = write(tmp_path, "b.yaml", podgroup("g", 2))
    assert one_error_line(koordpy("simulate", "-f", a, "-f", b)) == (
        f"{b} (document 1): PodGroup default/g: metadata.name: defined twice, first in {a} (document 3)")
    c = write(tmp_path, "c.yaml", pod("p", cpu="1"))
    assert one_error_line(koordpy("simulate", "-f", a, "-f", c, "-f", c)) == (
        f"{c} (document 1): Pod default/p: metadata.name: defined twice, first in {c} (document 1)")


def test_empty_input_exits_2_saying_what_was_read_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("")
    folder = tmp_path / "dir"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    (folder / "x.json").write_text("{}")
    nodes = write(tmp_path, "nodes.yaml", node("n"))
    run = koordpy("simulate", "-f", str(tmp_path / "a.txt"), "-f", str(folder), "-f", nodes)
    assert one_error_line(run) == (f"no Kubernetes objects in: {tmp_path}/a.txt (empty); {folder}/ (skipped "
                                   "notes.txt, x.json: only *.yaml/*.yml are read from folders)")


def test_stdin_empty_because_kubectl_failed_is_an_error() -> None:
    run = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", "-"], input="", capture_output=True,
                         text=True, cwd=ROOT, check=False)
    assert one_error_line(run) == "no Kubernetes objects in: <stdin> (empty)"
    twice = koordpy("simulate", "-f", "-", "-f", "-")
    assert one_error_line(twice) == "'-f -' given 2 times: standard input can be read once"


NEW_JOB = """\
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: PodGroup
metadata: {name: new-job, namespace: ml}
spec: {minMember: MIN}
"""
NEW_POD = """\
---
apiVersion: v1
kind: Pod
metadata:
  name: new-job-I
  namespace: ml
  labels: {pod-group.scheduling.sigs.k8s.io: new-job}
spec:
  schedulerName: koordpy
  priorityClassName: training
  preemptionPolicy: POLICY
  containers:
  - name: main
    image: trainer:2
    resources:
      requests: {cpu: 7900m, memory: 16Gi, ephemeral-storage: 10Gi}
"""


def replay(tmp_path: Path, pods: int, policy: str = "PreemptLowerPriority") -> subprocess.CompletedProcess[str]:
    """The what-if workflow: a live cluster's kubectl dump on stdin, plus a job that is not submitted yet."""
    job = tmp_path / "new-job.yaml"
    job.write_text(NEW_JOB.replace("MIN", str(pods))
                   + "".join(NEW_POD.replace("-I", f"-{i}").replace("POLICY", policy) for i in range(pods)))
    cluster = (ROOT / "tests" / "data" / "kubectl-get-cluster.yaml").read_text()
    return subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", "-", "-f", str(job), "-o", "json"],
                          input=cluster, capture_output=True, text=True, cwd=ROOT, check=False)


def test_replay_a_kubectl_dump_from_stdin_and_the_job_lands(tmp_path: Path) -> None:
    run = replay(tmp_path, 2)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    out = json.loads(run.stdout)
    # worker-1 has 7.8 CPUs left after its running pods; worker-2 has all of them back from its finished pod;
    # the control-plane node is tainted. Pods of other schedulers stay as they are.
    assert out["bound"] == {"ml/new-job-0": "worker-2", "ml/new-job-1": "worker-2"}
    assert out["pending"] == {}
    assert out["podgroups"]["ml/new-job"]["phase"] == "Scheduled"
    assert out["podgroups"]["ml/old-job"] == {"phase": "Running", "scheduled": 1, "minMember": 1}
    assert out["truncated"] is False


def test_replay_a_kubectl_dump_and_the_job_waits_saying_why(tmp_path: Path) -> None:
    run = replay(tmp_path, 3, policy="Never")
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["bound"] == {} and out["preempted"] == []
    assert set(out["pending"]) == {"ml/new-job-0", "ml/new-job-1", "ml/new-job-2"}
    why = "0/3 nodes are available: 2 Insufficient cpu, 1 node(s) had untolerated taint"
    assert all(why in msg for msg in out["pending"].values()), out["pending"]
    assert all("not eligible due to preemptionPolicy=Never." in msg for msg in out["pending"].values())


def test_replay_a_kubectl_dump_and_the_job_preempts_a_lower_priority_pod(tmp_path: Path) -> None:
    # The third 7.9-CPU member needs worker-1's room: the web pod there has priority 0, the job 1000;
    # old-job-0 (priority 1000, as the job) and the system pods (higher) are never victims.
    out = json.loads(replay(tmp_path, 3).stdout)
    assert out["preempted"] == ["shop/web-5d9c8b7f6d-q7w2e"]
    assert out["bound"] == {"ml/new-job-0": "worker-1", "ml/new-job-1": "worker-2", "ml/new-job-2": "worker-2"}
    assert out["nominated"] == out["bound"] and out["pending"] == {}


def test_help_speaks_to_users() -> None:
    top = koordpy("--help")
    assert top.returncode == 0
    assert "koordpy simulate -f examples/spine-block" in top.stdout
    assert "koordpy run --kubeconfig" in top.stdout
    assert "only places that do I/O" not in top.stdout  # not the module's docstring
    sim = koordpy("simulate", "--help")
    assert sim.returncode == 0
    assert "    | koordpy simulate -f - -f new-job.yaml" in sim.stdout
    assert "podgroups.scheduling.sigs.k8s.io,clusternetworktopologies \\\n" in sim.stdout


def test_unschedulable_workload_exits_0(tmp_path: Path) -> None:
    run = koordpy("simulate", "-f", write(tmp_path, "w.yaml", node("n"), pod("huge", cpu="64")), "-o", "json")
    assert run.returncode == 0
    assert json.loads(run.stdout)["pending"] == {"default/huge": "0/1 nodes are available: 1 Insufficient cpu."}


def test_scheduler_name_option(tmp_path: Path) -> None:
    path = write(tmp_path, "w.yaml", node("n"), pod("mine", cpu="1", scheduler="team-a"))
    assert json.loads(koordpy("simulate", "-f", path, "-o", "json").stdout)["bound"] == {}
    named = koordpy("simulate", "-f", path, "-o", "json", "--scheduler-name", "team-a")
    assert json.loads(named.stdout)["bound"] == {"default/mine": "n"}


def test_list_kind_and_folder_order(tmp_path: Path) -> None:
    (tmp_path / "a-nodes.yaml").write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [node("n")]}))
    write(tmp_path, "b-pods.yaml", pod("p", cpu="1"))
    (tmp_path / "expected.json").write_text("{}")  # a folder's JSON is not read as manifests
    run = koordpy("simulate", "-f", str(tmp_path), "-o", "json")
    assert json.loads(run.stdout)["bound"] == {"default/p": "n"}
    assert run.stderr == (f"koordpy simulate: note: {tmp_path}/: skipped expected.json "
                          "(only *.yaml/*.yml are read from folders)\n")


@pytest.mark.parametrize("folder", sorted(p.name for p in (ROOT / "examples").iterdir()
                                           if p.is_dir() and p.name not in FRONTED))
def test_every_example_is_written_for_a_real_api_server(folder: str) -> None:
    # Issue 17 item 14, offline: what the API server and kwok need (tests/integration/test_examples.py
    # applies them for real). kwok adopts only annotated nodes and initializes only those not Ready;
    # the API server refuses a Job without containers or restartPolicy and assigns every uid.
    docs = [d for path in sorted((ROOT / "examples" / folder).glob("*.yaml"))
            for d in yaml.safe_load_all(path.read_text()) if d]
    for d in docs:
        meta, what = d["metadata"], f"{folder}: {d['kind']} {d['metadata']['name']}"
        assert "uid" not in meta and "ownerReferences" not in meta, what
        if d["kind"] == "Node":
            assert meta["annotations"]["kwok.x-k8s.io/node"] == "fake", what
            assert "conditions" not in d["status"] and d["status"]["capacity"] == d["status"]["allocatable"], what
        spec = d["spec"]["template"]["spec"] if d["kind"] == "Job" else d.get("spec")
        if d["kind"] == "Job":
            assert spec["restartPolicy"] in ("Never", "OnFailure"), what
        if d["kind"] in ("Pod", "Job"):
            assert spec["containers"], what
            for c in spec["containers"]:
                requests = (c.get("resources") or {}).get("requests") or {}
                extended = {k: v for k, v in requests.items() if "/" in k}
                assert all(c["resources"]["limits"][k] == v for k, v in extended.items()), what
    run = koordpy("simulate", "-f", str(ROOT / "examples" / folder), "-o", "json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["bound"]


def test_replay_a_kubectl_dump_of_the_v1_37_control_plane_with_a_job_made_podgroup() -> None:
    # The Job controller's Workload (listed as not acted on) and PodGroup, the Indexed Job's 8 pods:
    # the gang lands whole in rack r3 (the only one with 8 nodes), in completion index order, and the
    # PodGroup says PodGroupInitiallyScheduled=True as kube-scheduler writes it.
    dump = (ROOT / "tests" / "data" / "kubectl-get-workload.yaml").read_text()
    run = subprocess.run([sys.executable, "-m", "koordpy", "simulate", "-f", "-", "-o", "json"], input=dump,
                         capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    assert "not acted on" in run.stderr and "Workload default/train-" in run.stderr
    out = json.loads(run.stdout)
    index = {d["metadata"]["name"]: int(d["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"])
             for doc in yaml.safe_load_all(dump) for d in doc["items"] if d["kind"] == "Pod"}
    by_index = {index[k.split("/")[1]]: n for k, n in out["bound"].items()}
    assert by_index == {i: f"r3-{i}" for i in range(8)}, out["bound"]
    [(group, status)] = out["podgroups"].items()
    assert group.startswith("default/train-") and "-train-pgt-0-" in group
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("PodGroupInitiallyScheduled", "True", "Scheduled")]


def test_a_workload_podgroup_naming_a_missing_priority_class_exits_2(tmp_path: Path) -> None:
    # The Priority admission refuses a PodGroup whose class does not exist, as it refuses such a pod.
    bad = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup", "metadata": {"name": "g", "namespace":
           "default"}, "spec": {"schedulingPolicy": {"gang": {"minCount": 1}}, "priorityClassName": "missing"}}
    path = write(tmp_path, "bad.yaml", node("n"), bad)
    assert one_error_line(koordpy("simulate", "-f", path)) == (
        f"{path} (document 2): PodGroup default/g: spec.priorityClassName: no PriorityClass named 'missing'")


def test_pods_naming_a_kind_of_podgroup_the_input_lacks_entirely_are_warned_of(tmp_path: Path) -> None:
    # A dump made with a bare `kubectl get podgroups` on v1.37 holds Kubernetes' own PodGroups only:
    # Koordinator's gang waits "not found", and simulate says why on stderr (issue 29, item 15).
    named = [pod(f"train-{i}", cpu="1", group="train") for i in range(2)]
    upstream = pod("up-0", cpu="1", schedulingGroup={"podGroupName": "up"})
    dump = write(tmp_path, "dump.yaml", node("n0"), *named, upstream)
    run = koordpy("simulate", "-f", dump)
    assert run.returncode == 0, run.stderr
    warnings = [line for line in run.stderr.splitlines() if line.startswith("koordpy simulate: warning: ")]
    assert len(warnings) == 2, run.stderr
    assert ("2 pod(s) name a PodGroup of scheduling.sigs.k8s.io as their gang (default/train), and the input holds "
            "no podgroups.scheduling.sigs.k8s.io at all") in warnings[0]
    assert "name it in full, podgroups.scheduling.sigs.k8s.io" in warnings[0].lower()
    assert "no podgroups.scheduling.k8s.io at all" in warnings[1]
    # A PodGroup of the kind in the input (if not the one named), or a gang the pods declare by their
    # own annotations: the kind was not left out, and nothing is said.
    annotated = pod("solo-0", cpu="1", annotations={"gang.scheduling.koordinator.sh/name": "solo",
                                                     "gang.scheduling.koordinator.sh/min-available": "1"})
    quiet = koordpy("simulate", "-f", write(tmp_path, "quiet.yaml", node("n0"), podgroup("other", 1), *named,
                                            annotated))
    assert quiet.returncode == 0 and "warning" not in quiet.stderr, quiet.stderr


def test_a_kueue_topology_at_v1beta2_places_a_kai_job(tmp_path: Path) -> None:
    # Kueue v0.19 stores its Topology at v1beta2 (a `kubectl get topologies -o yaml` dump gives that
    # version): read as the older versions are, it holds the Job's two pods to one rack.
    racks = [node(f"n{i}", cpu="2", labels={"example.com/rack": "ab"[i // 2]}) for i in range(4)]
    topology = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "Topology", "metadata": {"name": "racks"},
                "spec": {"levels": [{"nodeLabel": "example.com/rack"}, {"nodeLabel": "kubernetes.io/hostname"}]}}
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "train", "namespace": "default",
                        "annotations": {"kai.scheduler/topology": "racks",
                                        "kai.scheduler/topology-required-placement": "example.com/rack"}},
           "spec": {"parallelism": 2, "template": {"spec": {
               "schedulerName": "koordpy", "restartPolicy": "Never",
               "containers": [{"name": "main", "image": "busybox", "resources": {"requests": {"cpu": "2"}}}]}}}}
    run = koordpy("simulate", "-f", write(tmp_path, "in.yaml", *racks, topology, job), "-o", "json")
    assert run.returncode == 0, run.stderr
    bound = json.loads(run.stdout)["bound"]
    assert len(bound) == 2 and len({int(n[1:]) // 2 for n in bound.values()}) == 1, bound
