"""The differential run's own checks: its worlds are deterministic and valid input, it finds this
checkout identical to itself, and it catches a message changed in a copy of it."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from koordpy.errors import KoordpyError
from koordpy.sim.simulator import World, simulate
from tests.recut import diff
from tests.recut.worlds import fingerprint, generate

ROOT = Path(diff.__file__).resolve().parents[2]


def test_a_seed_gives_the_same_world_and_seeds_differ() -> None:
    assert fingerprint(generate(7)) == fingerprint(generate(7))
    assert generate(7).yaml() == generate(7).yaml()
    assert len({fingerprint(generate(s)) for s in range(10)}) == 10


def test_the_worlds_are_valid_input_and_cover_every_dialect() -> None:
    kinds: Counter[str] = Counter()
    outcome: Counter[str] = Counter()
    for seed in range(40):
        world = generate(seed)
        kinds.update(f"{o['apiVersion']} {o['kind']}" for o in world.objects)
        try:
            parsed = World.from_objects([(f"world-{seed}.yaml", o) for o in world.objects])
        except KoordpyError:  # refused input (exit 2 in simulate), compared as such
            outcome["refused"] += 1
            continue
        result = simulate(parsed)
        outcome.update(bound=bool(result.bound), pending=bool(result.pending), preempted=bool(result.preempted))
        assert world.pods, seed
    for kind in ("scheduling.koordinator.sh/v1alpha1 ClusterNetworkTopology", "topology.volcano.sh/v1alpha1 HyperNode",
                 "scheduling.sigs.k8s.io/v1alpha1 PodGroup", "scheduling.volcano.sh/v1beta1 PodGroup",
                 "scheduling.run.ai/v2alpha2 PodGroup", "scheduling.k8s.io/v1beta1 PodGroup",
                 "scheduling.k8s.io/v1beta1 Workload", "scheduling.k8s.io/v1alpha3 CompositePodGroup",
                 "resource.k8s.io/v1 ResourceSlice", "resource.k8s.io/v1 ResourceClaim",
                 "resource.k8s.io/v1 ResourceClaimTemplate", "v1 PersistentVolumeClaim",
                 "storage.k8s.io/v1 StorageClass", "scheduling.k8s.io/v1 PriorityClass"):
        assert kinds[kind], kind
    assert kinds["kueue.x-k8s.io/v1beta1 Topology"] + kinds["kueue.x-k8s.io/v1alpha1 Topology"]
    # Each kind of outcome in many worlds: decisions, waits and evictions are all compared.
    assert min(outcome["bound"], outcome["pending"], outcome["preempted"]) >= 5, outcome
    assert 1 <= outcome["refused"] <= 4, outcome  # some refused, most simulated


def test_a_ref_is_exported_with_its_own_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(diff, "CACHE", tmp_path)
    root, label = diff.checkout("HEAD")
    assert root.parent == tmp_path and "HEAD" in label
    shown = subprocess.run(["git", "-C", str(ROOT), "show", "HEAD:koordpy/core/messages.py"], check=True,
                           capture_output=True, text=True).stdout
    assert (root / "koordpy" / "core" / "messages.py").read_text() == shown
    assert diff.checkout("HEAD")[0] == root  # once per commit


def test_this_checkout_is_identical_to_itself(capsys: pytest.CaptureFixture[str]) -> None:
    assert diff.main(["--old", str(ROOT), "--new", str(ROOT), "--worlds", "3", "--seed", "11", "--jobs", "1"]) == 0
    said = capsys.readouterr().out
    assert "3 worlds" in said and " 0 different" in said, said


def _insufficient_world() -> int:
    """A seed whose simulation says "Insufficient <resource>" for some pending pod."""
    for seed in range(100):
        world = generate(seed)
        try:
            result = simulate(World.from_objects([("w.yaml", o) for o in world.objects]))
        except KoordpyError:
            continue
        if any("Insufficient " in m for m in result.pending.values()):
            return seed
    raise AssertionError("no world says Insufficient")


def test_a_message_changed_in_a_copy_is_a_difference_naming_the_world(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The copy keeps the package's __pycache__ (and numba's cache in it), so its kernels do not compile again.
    copy = tmp_path / "changed"
    shutil.copytree(ROOT / "koordpy", copy / "koordpy")
    messages = copy / "koordpy" / "core" / "messages.py"
    text = messages.read_text()
    assert 'return f"Insufficient {resource}"' in text
    messages.write_text(text.replace('return f"Insufficient {resource}"', 'return f"Short of {resource}"'))
    seed = _insufficient_world()
    code = diff.main(["--old", str(ROOT), "--new", str(copy), "--worlds", "1", "--seed", str(seed), "--jobs", "1",
                      "--keep", str(tmp_path / "worlds")])
    said = capsys.readouterr().out
    assert code == 1, said
    assert f"--- world {seed} ({tmp_path / 'worlds' / f'world-{seed}.yaml'}): koordpy simulate" in said, said
    assert "Insufficient " in said and "Short of " in said, said
    assert "different in 1 worlds" in said and f"different worlds (seeds): {seed}" in said, said
