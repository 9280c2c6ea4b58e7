"""``koordpy run``'s settings: the configuration file the Helm chart mounts, and flags over it.

Belongs here: the schema of the file (every key, its default and its bounds), reading it, and
the rule that a flag given on the command line wins over the file. Does not belong here: acting
on a setting (the controller does) or any scheduling rule. Pure: no I/O but reading the file.

A bad file stops ``koordpy run`` before it touches the cluster, with one line naming the key
(``logging.format: must be one of auto, json, console``): a scheduler that starts with a
setting it silently ignored is worse than one that does not start.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from koordpy.errors import BadInput

API_VERSION = "config.koordpy.io/v1alpha1"
KIND = "SchedulerConfiguration"
TopologySource = Literal["koordinator", "volcano", "kueue"]
TOPOLOGY_SOURCES: tuple[TopologySource, ...] = ("koordinator", "volcano", "kueue")


class _Strict(BaseModel):
    # An unknown key is most often a typo of a real one; ignoring it would run with the default.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Logging(_Strict):
    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    # auto: JSON lines unless standard error is a terminal (the container's log collector wants
    # JSON; a person at a terminal wants to read it).
    format: Literal["auto", "json", "console"] = "auto"

    @field_validator("level", mode="before")
    @classmethod
    def _upper(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value


class LeaderElection(_Strict):
    enabled: bool = False
    lease_name: str = Field("koordpy", alias="leaseName", min_length=1, max_length=253)
    # Empty: the namespace the pod runs in ($POD_NAMESPACE), else "default".
    lease_namespace: str = Field("", alias="leaseNamespace", max_length=63)
    # kube-scheduler's are 15/10/2; shorter here so that a standby takes over within 15 s of the
    # leader's death (the lease expires, then at most one retry period passes).
    lease_duration: float = Field(12.0, alias="leaseDurationSeconds", gt=0, le=300)
    renew_deadline: float = Field(8.0, alias="renewDeadlineSeconds", gt=0, le=300)
    retry_period: float = Field(2.0, alias="retryPeriodSeconds", gt=0, le=60)

    @model_validator(mode="after")
    def _ordered(self) -> LeaderElection:
        # A leader must give up (renew deadline) before a standby may take the lease (duration),
        # with room for a write in flight; and it must try to renew more than once before that.
        if not self.renew_deadline < self.lease_duration:
            raise ValueError("renewDeadlineSeconds must be less than leaseDurationSeconds")
        if not self.retry_period < self.renew_deadline:
            raise ValueError("retryPeriodSeconds must be less than renewDeadlineSeconds")
        return self

    def namespace(self) -> str:
        return self.lease_namespace or os.environ.get("POD_NAMESPACE") or "default"


class Server(_Strict):
    # host:port for /metrics, /healthz and /readyz; port 0 picks a free one (it is logged), an
    # empty string serves nothing.
    bind_address: str = Field("0.0.0.0:10251", alias="bindAddress")

    @field_validator("bind_address")
    @classmethod
    def _address(cls, value: str) -> str:
        if value:
            split_address(value)
        return value


class Settings(_Strict):
    api_version: str = Field(API_VERSION, alias="apiVersion")
    kind: str = KIND
    scheduler_names: tuple[str, ...] = Field(("koordpy",), alias="schedulerNames", min_length=1)
    preemption: bool = True
    # At most this many pods placed in one scheduling cycle (0: no limit); the jobs after the limit
    # go in the next cycle, at once. 100 keeps a cycle short without costing throughput
    # (docs/benchmarks.md, "Goal 4: a cap on a cycle's work"). Strict: YAML's true is no count (read
    # as 1 it would place one pod a cycle), nor is "100" or 1.0.
    pods_per_cycle: int = Field(100, alias="podsPerCycle", ge=0, strict=True)
    topology_sources: tuple[TopologySource, ...] = Field(TOPOLOGY_SOURCES, alias="topologySources")
    # Seconds one job's gang-wide device search may take where its members' devices, allocated one by
    # one, do not fit together on the nodes placed (docs/design.md, "The gang-wide device search": 1 s
    # covers the kubernetes/kubernetes#138765 shape at 1,000 members, measured at 0.11 s). At most 10,
    # kube-scheduler's bound on one device search.
    device_gang_search_seconds: float = Field(1.0, alias="deviceGangSearchSeconds", gt=0, le=10)
    # A job's minimum runtime (no victim of preemption until it has run this long since its last
    # start) and preemption delay (a pending job waits this long, from its creation or last eviction,
    # before it preempts), where its objects set none: KAI's defaultPreemptMinRuntime is 0, and KAI
    # has no default delay. A week at most: a longer value is most likely a unit mistaken.
    default_min_runtime: float = Field(0.0, alias="defaultPreemptMinRuntimeSeconds", ge=0, le=604800)
    default_preemption_delay: float = Field(0.0, alias="defaultPreemptionDelaySeconds", ge=0, le=604800)
    # How long a gang may run below its minimum (stale: a member failed, was evicted, its node is
    # gone) before the rest of it is evicted so its controller starts it again whole, where the job
    # sets no grace of its own; negative: stale gangs are only reported. 60 is KAI-Scheduler's default.
    stale_gang_grace_period_seconds: float = Field(60.0, alias="staleGangGracePeriodSeconds",
                                                   allow_inf_nan=False)
    # The same for a gang a controller in front of koordpy admitted (Kueue: a member carries its
    # kueue.x-k8s.io/podset label or workload annotation). That controller recovers it (Kueue's
    # waitForPodsReady requeues it, its quota freed), so by default koordpy only reports it; a
    # cluster that turned waitForPodsReady off sets a grace here (60, say).
    admitted_stale_gang_grace_period_seconds: float = Field(-1.0, alias="admittedStaleGangGracePeriodSeconds",
                                                            allow_inf_nan=False)
    logging: Logging = Field(default_factory=lambda: Logging.model_validate({}))
    leader_election: LeaderElection = Field(default_factory=lambda: LeaderElection.model_validate({}),
                                            alias="leaderElection")
    server: Server = Field(default_factory=lambda: Server.model_validate({}))

    @field_validator("api_version", "kind")
    @classmethod
    def _fixed(cls, value: str, info: ValidationInfo) -> str:
        want = API_VERSION if info.field_name == "api_version" else KIND
        if value != want:
            raise ValueError(f"must be {want}")
        return value

    @field_validator("scheduler_names")
    @classmethod
    def _names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not name for name in value):
            raise ValueError("a scheduler name cannot be empty")
        return tuple(dict.fromkeys(value))

    @field_validator("topology_sources")
    @classmethod
    def _sources(cls, value: tuple[TopologySource, ...]) -> tuple[TopologySource, ...]:
        return tuple(dict.fromkeys(value))


class SettingsError(BadInput, ValueError):
    """A configuration that cannot be used; the message names the file and the key."""

    def report(self) -> str:
        return str(self)  # `koordpy run: FILE: KEY: why`, as it always read: the place is the message's start


def split_address(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{address!r} is not host:port (port 0-65535)")
    return host.strip("[]") or "0.0.0.0", int(port)


def _key(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc) or "(top level)"


def _explain(exc: ValidationError, source: str) -> SettingsError:
    err = exc.errors()[0]
    msg = str(err["msg"]).removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    return SettingsError(f"{source}: {_key(tuple(err['loc']))}: {msg}")


def parse(data: object, source: str = "configuration") -> Settings:
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsError(f"{source}: the file must hold a mapping of keys, not {type(data).__name__}")
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        raise _explain(exc, source) from None


def load(path: str | Path) -> Settings:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise SettingsError(f"{path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SettingsError(f"{path}: not YAML: {str(exc).splitlines()[0]}") from None
    return parse(data, str(path))


def override(settings: Settings, flags: dict[str, Any]) -> Settings:
    """``settings`` with the flags given on the command line set over it. ``flags`` maps dotted
    keys of the file (``leaderElection.leaseName``) to values; None means "not given"."""
    data = settings.model_dump(by_alias=True)
    for dotted, value in flags.items():
        if value is None:
            continue
        *parents, leaf = dotted.split(".")
        node = data
        for part in parents:
            node = node[part]
        node[leaf] = value
    return parse(data, "command line")
