"""Per-topic log settings, with Kafka's names and defaults.

Topic settings (``segment.bytes`` ...) override broker-level defaults (``log.segment.bytes``
...); :func:`topic_defaults_from_broker` maps the latter onto the former so a broker's
properties file works unchanged.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

LONG_MAX = (1 << 63) - 1
DAY_MS = 24 * 60 * 60 * 1000

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


def _parse_int(name: str, value: str, minimum: int) -> int:
    try:
        parsed = int(value.strip())
    except ValueError:
        raise ValueError(f"invalid value {value!r} for {name}: not an integer") from None
    if parsed < minimum:
        raise ValueError(f"invalid value {value!r} for {name}: must be at least {minimum}")
    return parsed


def _parse_bool(name: str, value: str) -> bool:
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError(f"invalid value {value!r} for {name}: must be true or false")
    return lowered == "true"


def _parse_choice(name: str, value: str, choices: tuple[str, ...]) -> str:
    stripped = value.strip()
    if stripped not in choices:
        raise ValueError(f"invalid value {value!r} for {name}: must be one of {choices}")
    return stripped


def _parse_ratio(name: str, value: str) -> float:
    try:
        parsed = float(value.strip())
    except ValueError:
        raise ValueError(f"invalid value {value!r} for {name}: not a number") from None
    if not 0.0 <= parsed <= 1.0:
        raise ValueError(f"invalid value {value!r} for {name}: must be between 0 and 1")
    return parsed


def _parse_policy(name: str, value: str) -> str:
    parts = sorted(p.strip() for p in value.split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise ValueError(f"invalid value {value!r} for {name}: must be delete and/or compact")
    return ",".join(parts)


# Topic property name -> (LogConfig field, parser).
_TOPIC_PROPERTIES: dict[str, tuple[str, Callable[[str, str], object]]] = {
    "segment.bytes": ("segment_bytes", lambda n, v: _parse_int(n, v, 14)),
    "segment.ms": ("segment_ms", lambda n, v: _parse_int(n, v, 1)),
    "retention.ms": ("retention_ms", lambda n, v: _parse_int(n, v, -1)),
    "retention.bytes": ("retention_bytes", lambda n, v: _parse_int(n, v, -1)),
    "index.interval.bytes": ("index_interval_bytes", lambda n, v: _parse_int(n, v, 0)),
    "flush.messages": ("flush_messages", lambda n, v: _parse_int(n, v, 1)),
    "flush.ms": ("flush_ms", lambda n, v: _parse_int(n, v, 0)),
    "max.message.bytes": ("max_message_bytes", lambda n, v: _parse_int(n, v, 0)),
    "message.timestamp.type": (
        "message_timestamp_type",
        lambda n, v: _parse_choice(n, v, (CREATE_TIME, LOG_APPEND_TIME)),
    ),
    "cleanup.policy": ("cleanup_policy", _parse_policy),
    "delete.retention.ms": ("delete_retention_ms", lambda n, v: _parse_int(n, v, 0)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _parse_ratio),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _parse_bool),
    "min.insync.replicas": ("min_insync_replicas", lambda n, v: _parse_int(n, v, 1)),
}


@dataclass(frozen=True)
class LogConfig:
    """One topic's log settings; immutable, replaced whole on a config change."""

    segment_bytes: int = 1 << 30
    segment_ms: int = 7 * DAY_MS
    retention_ms: int = 7 * DAY_MS
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    cleanup_policy: str = "delete"
    delete_retention_ms: int = DAY_MS
    min_cleanable_dirty_ratio: float = 0.5
    unclean_leader_election_enable: bool = False
    min_insync_replicas: int = 1

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], defaults: LogConfig | None = None
    ) -> LogConfig:
        """Topic properties over ``defaults``; unknown names or bad values raise ValueError."""
        return (defaults or cls()).with_overrides(props)

    def with_overrides(self, props: Mapping[str, str]) -> LogConfig:
        """A copy with the given topic properties applied."""
        changes: dict[str, object] = {}
        for name, value in props.items():
            if name not in _TOPIC_PROPERTIES:
                raise ValueError(f"unknown topic config {name!r}")
            field_name, parse = _TOPIC_PROPERTIES[name]
            changes[field_name] = parse(name, str(value))
        return dataclasses.replace(self, **changes)

    def to_properties(self) -> dict[str, str]:
        """Kafka-named string form (DescribeConfigs, persisted topic config)."""
        out = {}
        for name, (field_name, _) in _TOPIC_PROPERTIES.items():
            value = getattr(self, field_name)
            out[name] = str(value).lower() if isinstance(value, bool) else str(value)
        return out

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @property
    def delete(self) -> bool:
        """Time and size retention apply only under ``delete`` (Kafka's rule)."""
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compact(self) -> bool:
        """The log cleaner keeps the latest record per key; keys are then required."""
        return "compact" in self.cleanup_policy.split(",")


def known_topic_properties() -> list[str]:
    return list(_TOPIC_PROPERTIES)


# Broker setting -> (topic setting, multiplier to the topic setting's unit). The first one
# present of each group wins, as in Kafka (ms over minutes over hours).
_BROKER_GROUPS: list[list[tuple[str, str, int]]] = [
    [("log.segment.bytes", "segment.bytes", 1)],
    [
        ("log.retention.ms", "retention.ms", 1),
        ("log.retention.minutes", "retention.ms", 60_000),
        ("log.retention.hours", "retention.ms", 3_600_000),
    ],
    [("log.retention.bytes", "retention.bytes", 1)],
    [("log.roll.ms", "segment.ms", 1), ("log.roll.hours", "segment.ms", 3_600_000)],
    [("log.index.interval.bytes", "index.interval.bytes", 1)],
    [("log.flush.interval.messages", "flush.messages", 1)],
    [("log.flush.interval.ms", "flush.ms", 1)],
    [("message.max.bytes", "max.message.bytes", 1)],
    [("log.message.timestamp.type", "message.timestamp.type", 1)],
    [("log.cleanup.policy", "cleanup.policy", 1)],
    [("log.cleaner.delete.retention.ms", "delete.retention.ms", 1)],
    [("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio", 1)],
    [("unclean.leader.election.enable", "unclean.leader.election.enable", 1)],
    [("min.insync.replicas", "min.insync.replicas", 1)],
]


def topic_defaults_from_broker(broker_props: Mapping[str, str]) -> LogConfig:
    """The default LogConfig implied by broker-level ``log.*`` settings.

    Settings that do not concern logs are ignored (the broker owns them); malformed values
    of the ones that do raise ValueError naming the broker setting.
    """
    topic_props: dict[str, str] = {}
    for group in _BROKER_GROUPS:
        for broker_name, topic_name, multiplier in group:
            if broker_name not in broker_props:
                continue
            raw = str(broker_props[broker_name])
            if multiplier != 1:
                value = _parse_int(broker_name, raw, -1)
                raw = str(value if value < 0 else value * multiplier)
            try:
                LogConfig().with_overrides({topic_name: raw})
            except ValueError as exc:
                raise ValueError(f"invalid value {raw!r} for {broker_name}: {exc}") from None
            topic_props[topic_name] = raw
            break
    return LogConfig().with_overrides(topic_props)
