"""``examples/gb200`` as a user runs it (issue 31 item 2): ``koordpy simulate`` puts gang ``train`` (18 pods,
each 4 GPUs and a ComputeDomain channel) in one NVLink clique, the only one of 18 whole trays, and gang
``tune`` waits whole; ``koordpy explain`` names the clique that came closest for ``tune`` and the GPU it
lacked. The ComputeDomains (``nvidia/``) are left out of the folder's manifests."""

import json
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "gb200"
CLIQUE = "nvidia.com/gpu.clique"


def koordpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "koordpy", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False)


def cliques() -> dict[str, str]:
    """node -> the value of its clique label, as cluster.yaml writes it."""
    docs = [d for d in yaml.safe_load_all((EXAMPLE / "cluster.yaml").read_text()) if d]
    return {d["metadata"]["name"]: d["metadata"]["labels"][CLIQUE] for d in docs if d["kind"] == "Node"}


def test_the_cluster_is_four_cliques_of_18_trays_of_4_gpus_published_as_the_driver_does() -> None:
    docs = [d for d in yaml.safe_load_all((EXAMPLE / "cluster.yaml").read_text()) if d]
    where = cliques()
    assert len(where) == 72 and sorted(list(where.values()).count(c) for c in set(where.values())) == [18] * 4
    slices = [d for d in docs if d["kind"] == "ResourceSlice"]
    assert {(s["spec"]["driver"], s["spec"]["nodeName"]) for s in slices} == {
        (driver, n) for n in where for driver in ("gpu.nvidia.com", "compute-domain.nvidia.com")}
    gpus = sorted(len(s["spec"]["devices"]) for s in slices if s["spec"]["driver"] == "gpu.nvidia.com")
    assert gpus == [3] * 3 + [4] * 69  # one tray of cliques 1 to 3 lost a GPU
    kinds = {d["kind"] for d in yaml.safe_load_all((EXAMPLE / "nvidia" / "computedomains.yaml").read_text())}
    assert kinds == {"ComputeDomain"}
    assert not list(EXAMPLE.glob("*.yml"))  # kubectl apply -f examples/gb200 reads *.yaml only at the top


def test_simulate_fills_one_clique_with_the_first_gang_and_the_second_waits_whole() -> None:
    run = koordpy("simulate", "-f", str(EXAMPLE), "-o", "json")
    assert run.returncode == 0, run.stderr
    assert "skipped README.md, nvidia/ (only *.yaml/*.yml are read from folders)" in run.stderr
    out = json.loads(run.stdout)
    where = cliques()
    train = {k: n for k, n in out["bound"].items() if k.startswith("default/train-")}
    assert len(train) == 18 and len(set(train.values())) == 18
    assert {where[n] for n in train.values()} == {where["r0-n00"]}  # clique 0: every one of its trays
    for pod, node in train.items():
        assert sorted(out["devices"][pod]) == sorted([*(f"gpu.nvidia.com/{node}/gpu-{i}" for i in range(4)),
                                                      f"compute-domain.nvidia.com/{node}/channel-0"])
    assert set(out["bound"]) == set(train)
    assert set(out["pending"]) == {f"default/tune-{i}" for i in range(18)}
    assert not any(k.startswith("default/tune-") for k in out["allocations"])
    assert out["pending"]["default/tune-0"].startswith(
        "0/72 nodes are available: no candidate topology nodes can accommodate job, desiredOfferSlot: 18, "
        f"Topology cluster: {CLIQUE}={where['r0-n00']}: 0;")


def test_explain_says_which_clique_came_closest_for_the_waiting_gang_and_what_it_lacked() -> None:
    run = koordpy("explain", "podgroup", "default/tune", "-f", str(EXAMPLE), "--simulate", "-o", "json")
    assert run.returncode == 0, run.stderr
    closest = json.loads(run.stdout)["diagnosis"]["closest"]
    assert closest == {"domain": cliques()["r1-n00"], "offerslots": 17, "nodes": 18, "lacks": [
        {"reason": "cannot allocate all claims (claim gpus, request gpus: too few devices match its class and "
                   "selectors (3 of 4))", "nodes": 1}]}
