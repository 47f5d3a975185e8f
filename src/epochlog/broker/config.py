"""Broker settings under Kafka's names, from a properties file, flags and ``--set``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

# Kafka's broker defaults for the settings epochlog reads. Topic-level log settings
# (log.*) are interpreted by epochlog.storage.config.
DEFAULTS: dict[str, str] = {
    "broker.id": "0",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "advertised.listeners": "",
    "log.dirs": "",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "true",
    "delete.topic.enable": "true",
    "socket.request.max.bytes": "104857600",
    # Kafka's default is -1 (unbounded); bounded here so that many connections each
    # holding part of a large frame cannot grow the broker without limit.
    "queued.max.request.bytes": "268435456",
    "connections.max.idle.ms": "600000",
    "message.max.bytes": "1048588",
    # Kafka's controller bound on one operation's records: no CreateTopics or
    # CreatePartitions request may ask for more partitions than this in total.
    "controller.max.records.per.batch": "10000",
    "replica.fetch.max.bytes": "1048576",
    "broker.rack": "",
    "controlled.shutdown.enable": "true",
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "5000",
    # The group coordinator (epochlog.coordinator.settings has them all, with why).
    "offsets.topic.num.partitions": "50",
    "offsets.topic.replication.factor": "3",
    "offsets.retention.minutes": "10080",
    "offsets.retention.check.interval.ms": "600000",
    "offset.metadata.max.bytes": "4096",
    "offsets.commit.reject.stale.leader.epoch": "false",
    "group.initial.rebalance.delay.ms": "3000",
}


def parse_properties(text: str) -> dict[str, str]:
    """Java-properties subset: ``key=value`` or ``key: value`` lines, ``#``/``!`` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ValueError(f"properties line without '=': {raw!r}")
        props[line[:sep].strip()] = line[sep + 1 :].strip()
    return props


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int

    @classmethod
    def parse(cls, spec: str) -> Listener:
        parts = urlsplit(spec.strip())
        if not parts.scheme or parts.port is None:
            raise ValueError(f"listeners: expected NAME://HOST:PORT, got {spec!r}")
        return cls(parts.scheme.upper(), parts.hostname or "0.0.0.0", parts.port)


@dataclass
class BrokerConfig:
    props: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, overrides: Mapping[str, str]) -> BrokerConfig:
        props = dict(DEFAULTS)
        props.update({k: str(v) for k, v in overrides.items()})
        if not props.get("log.dirs"):
            props["log.dirs"] = props.get("log.dir", "")
        config = cls(props)
        config.validate()
        return config

    def validate(self) -> None:
        if not self.log_dirs:
            raise ValueError("log.dirs: at least one log directory is required")
        for key in ("broker.id", "num.partitions", "socket.request.max.bytes"):
            self.get_int(key)
        self.listener  # noqa: B018 - parses and so validates the setting

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.props.get(key, default)

    def get_int(self, key: str) -> int:
        value = self.props.get(key, DEFAULTS.get(key))
        try:
            return int(str(value))
        except ValueError:
            raise ValueError(f"{key}: expected an integer, got {value!r}") from None

    def get_bool(self, key: str) -> bool:
        value = str(self.props.get(key, DEFAULTS.get(key, ""))).lower()
        if value not in ("true", "false"):
            raise ValueError(f"{key}: expected true or false, got {value!r}")
        return value == "true"

    @property
    def broker_id(self) -> int:
        return self.get_int("broker.id")

    @property
    def log_dirs(self) -> list[str]:
        return [d.strip() for d in str(self.props.get("log.dirs", "")).split(",") if d.strip()]

    @property
    def listener(self) -> Listener:
        return Listener.parse(str(self.props["listeners"]).split(",")[0])

    @property
    def advertised_listener(self) -> Listener:
        advertised = self.props.get("advertised.listeners") or ""
        if advertised:
            return Listener.parse(advertised.split(",")[0])
        return self.listener

    @property
    def rack(self) -> str | None:
        return self.props.get("broker.rack") or None
