"""``koordpy run``'s configuration file and flags: defaults, errors that name the key, flags over
the file, and what the settings switch (topology sources watched, preemption, the write fence)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from koordpy.cli.main import build_parser, main
from koordpy.cli.run import run_settings
from koordpy.controller.main import resources
from koordpy.controller.writer import ApiWriter, NotLeader, with_retries
from koordpy.settings import Settings, SettingsError, load, parse
from tests.builders import FakeApiClient


def test_defaults() -> None:
    s = parse({})
    assert s.scheduler_names == ("koordpy",) and s.preemption
    assert s.topology_sources == ("koordinator", "volcano", "kueue")
    assert (s.logging.level, s.logging.format) == ("INFO", "auto")
    le = s.leader_election
    assert not le.enabled and le.lease_name == "koordpy"
    assert (le.lease_duration, le.renew_deadline, le.retry_period) == (12.0, 8.0, 2.0)
    assert s.server.bind_address == "0.0.0.0:10251"
    assert s.pods_per_cycle == 100  # the cap on one cycle's work chosen in docs/benchmarks.md (issue 21)
    assert s.device_gang_search_seconds == 1.0  # docs/design.md, "The gang-wide device search"


def test_pods_per_cycle_from_the_file_and_the_flag(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("podsPerCycle: 0\n")
    assert _run_args("--config", str(cfg)).pods_per_cycle == 0  # no limit
    assert _run_args("--config", str(cfg), "--pods-per-cycle", "250").pods_per_cycle == 250


def test_the_lease_namespace_defaults_to_the_pods(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "koordpy-system")
    assert parse({}).leader_election.namespace() == "koordpy-system"
    assert parse({"leaderElection": {"leaseNamespace": "ops"}}).leader_election.namespace() == "ops"
    monkeypatch.delenv("POD_NAMESPACE")
    assert parse({}).leader_election.namespace() == "default"


@pytest.mark.parametrize(("data", "says"), [
    ({"logging": {"format": "xml"}}, "cfg.yaml: logging.format: Input should be 'auto', 'json' or 'console'"),
    ({"logging": {"level": "loud"}}, "cfg.yaml: logging.level:"),
    ({"leaderElection": {"leaseDurationSeconds": 5}},
     "cfg.yaml: leaderElection: renewDeadlineSeconds must be less than leaseDurationSeconds"),
    ({"leaderElection": {"retryPeriodSeconds": 9}},
     "cfg.yaml: leaderElection: retryPeriodSeconds must be less than renewDeadlineSeconds"),
    ({"leaderElection": {"leaseName": ""}}, "cfg.yaml: leaderElection.leaseName:"),
    ({"schedulerName": ["a"]}, "cfg.yaml: schedulerName: unknown key"),
    ({"leaderElection": {"enable": True}}, "cfg.yaml: leaderElection.enable: unknown key"),
    ({"schedulerNames": []}, "cfg.yaml: schedulerNames:"),
    ({"schedulerNames": [""]}, "cfg.yaml: schedulerNames: a scheduler name cannot be empty"),
    ({"topologySources": ["slurm"]}, "cfg.yaml: topologySources.0:"),
    ({"server": {"bindAddress": "10251"}}, "cfg.yaml: server.bindAddress: '10251' is not host:port"),
    ({"preemption": "sometimes"}, "cfg.yaml: preemption:"),
    ({"podsPerCycle": -1}, "cfg.yaml: podsPerCycle: Input should be greater than or equal to 0"),
    ({"deviceGangSearchSeconds": 0}, "cfg.yaml: deviceGangSearchSeconds: Input should be greater than 0"),
    ({"deviceGangSearchSeconds": 11}, "cfg.yaml: deviceGangSearchSeconds: Input should be less than or equal to 10"),
    ({"apiVersion": "v1"}, "cfg.yaml: apiVersion: must be config.koordpy.io/v1alpha1"),
])
def test_a_bad_key_is_named(data: dict[str, Any], says: str) -> None:
    with pytest.raises(SettingsError) as err:
        parse(data, "cfg.yaml")
    assert str(err.value).startswith(says), str(err.value)


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        load(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("logging: [unclosed\n")
    with pytest.raises(SettingsError, match="not YAML"):
        load(bad)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n")
    with pytest.raises(SettingsError, match="must hold a mapping"):
        load(listing)
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load(empty) == parse({})


def _run_args(*argv: str) -> Settings:
    return run_settings(build_parser().parse_args(["run", *argv]))


def test_flags_override_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("schedulerNames: [a, b]\npreemption: false\nlogging: {level: debug, format: json}\n"
                   "leaderElection: {enabled: true, leaseName: from-file}\n")
    s = _run_args("--config", str(cfg))
    assert s.scheduler_names == ("a", "b") and not s.preemption and s.logging.level == "DEBUG"
    assert s.leader_election.enabled and s.leader_election.lease_name == "from-file"
    s = _run_args("--config", str(cfg), "--scheduler-name", "c", "--preemption", "--no-leader-elect",
                  "--leader-elect-lease-name", "from-flag", "--log-format", "console", "--topology-source",
                  "volcano", "--bind-address", "127.0.0.1:0")
    assert s.scheduler_names == ("c",) and s.preemption and not s.leader_election.enabled
    assert s.leader_election.lease_name == "from-flag" and s.logging.format == "console"
    assert s.logging.level == "DEBUG"  # not given as a flag: the file's
    assert s.topology_sources == ("volcano",) and s.server.bind_address == "127.0.0.1:0"


def test_a_bad_flag_or_file_stops_run_before_any_io(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("leaderElection: {renewDeadlineSeconds: 20}\n")
    assert main(["run", "--config", str(cfg)]) == 2
    assert f"koordpy run: {cfg}: leaderElection: renewDeadlineSeconds must be less than" in capsys.readouterr().err
    assert main(["run", "--bind-address", "nowhere"]) == 2
    assert "koordpy run: --bind-address: 'nowhere' is not host:port" in capsys.readouterr().err
    assert main(["run", "--leader-elect-lease-name", ""]) == 2
    assert "koordpy run: --leader-elect-lease-name:" in capsys.readouterr().err


def test_only_the_chosen_topology_sources_are_watched() -> None:
    def plurals(sources: Any) -> set[str]:
        return {f"{plural}.{group}" for _, group, _, plural in resources(sources)}

    everything = plurals(("koordinator", "volcano", "kueue"))
    assert {"clusternetworktopologies.scheduling.koordinator.sh", "hypernodes.topology.volcano.sh",
            "topologies.kueue.x-k8s.io", "topologies.kai.scheduler"} <= everything
    only_volcano = plurals(("volcano",))
    assert "hypernodes.topology.volcano.sh" in only_volcano
    assert not {"clusternetworktopologies.scheduling.koordinator.sh", "topologies.kueue.x-k8s.io",
                "topologies.kai.scheduler"} & only_volcano
    # Gangs and owners do not depend on the topology sources.
    assert {"pods.", "nodes.", "podgroups.scheduling.volcano.sh", "podgroups.scheduling.sigs.k8s.io",
            "jobs.batch"} <= plurals(())


async def test_the_fence_stops_a_write_before_it_is_sent_and_between_retries() -> None:
    calls = 0
    leading = True

    async def op() -> str:
        nonlocal calls, leading
        calls += 1
        leading = False  # the lease is lost while the first attempt fails
        raise OSError("connection reset")

    with pytest.raises(NotLeader):
        await with_retries("bind x", op, fence=lambda: leading)
    assert calls == 1  # the retry was not sent


class _Core:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def create_namespaced_pod_binding(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append("bind")


async def test_a_fenced_writer_sends_nothing() -> None:
    writer = ApiWriter.__new__(ApiWriter)
    ApiWriter.__init__(writer, api=FakeApiClient(), fence=lambda: False)
    core = _Core()
    writer.core = core
    assert await writer.bind("default/p", "uid", "n0") is False
    assert core.calls == []
    writer.fence = lambda: True
    assert await writer.bind("default/p", "uid", "n0") is True
    assert core.calls == ["bind"]


