"""Dynamic broker settings (Kafka's DynamicBrokerConfig): which broker settings may
change while the brokers run, set for one broker (its id) or as the cluster-wide
default, and a broker's settings as in force, merged as Kafka merges them: its own
dynamic values over the cluster-wide default over its file's over the defaults.

The dynamic ones are those epochlog honours live: every broker setting that gives a
topic setting its server default (``log.retention.ms``, ``log.segment.bytes``,
``min.insync.replicas``, ``unclean.leader.election.enable``, ``message.max.bytes``,
``compression.type``, ``log.cleaner.*`` of topics ...), which each partition's log
follows unless its topic overrides it, three of the log manager's own, and
``transaction.partition.verification.enable``. Any other is refused as Kafka refuses a
read-only one."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from epochlog.settings.broker import BROKER
from epochlog.settings.registry import Settings
from epochlog.settings.topic import SYNONYMS

log = logging.getLogger("epochlog.settings")

# DescribeConfigs' ConfigSource values.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# The metastore entity of the cluster-wide default (Kafka's ZooKeeper name for it).
CLUSTER_DEFAULT = "<default>"

_TOPIC_DEFAULTS = frozenset(name for synonyms in SYNONYMS.values() for name, _ in synonyms)
# Read by the log manager on each use, so a change applies at its next run.
_LOG_MANAGER = frozenset(
    {"log.cleaner.backoff.ms", "log.cleaner.dedupe.buffer.size", "producer.id.expiration.ms"}
)
# Handed to the transaction verifier (Broker._reconfigure).
_TRANSACTIONS = frozenset({"transaction.partition.verification.enable"})
DYNAMIC: frozenset[str] = _TOPIC_DEFAULTS | _LOG_MANAGER | _TRANSACTIONS


class DynamicRefused(ValueError):
    """Settings no broker may take while running (Kafka: INVALID_REQUEST), with
    Kafka's message."""


def check_dynamic(configs: Mapping[str, str]) -> dict[str, object]:
    """``configs`` parsed as one level's dynamic settings. SettingError for a name no
    broker has or a bad value; DynamicRefused, with Kafka's message, for read-only ones."""
    for name in configs:
        BROKER[name]
    read_only = sorted(name for name in configs if name not in DYNAMIC)
    if read_only:
        names = ", ".join(read_only)
        raise DynamicRefused(f"Cannot update these configs dynamically: Set({names})")
    return {name: BROKER.check(name, value) for name, value in configs.items()}


def synonyms_of(name: str) -> list[str]:
    """The broker settings that set the same thing as ``name``, in Kafka's order of
    precedence (``log.retention.ms``, ``.minutes``, ``.hours``); just ``name`` if none."""
    for synonyms in SYNONYMS.values():
        names = [n for n, _ in synonyms]
        if name in names:
            return names
    return [name]


def merged(static: Settings, default: Mapping[str, str], own: Mapping[str, str]) -> Settings:
    """A broker's settings in force. A stored value this broker cannot take (written
    by a broker of another version) is left out, and said so, rather than stopping it."""
    values: dict[str, object] = {}
    for level, configs in (("cluster-wide default", default), ("this broker's", own)):
        for name, value in configs.items():
            try:
                values |= check_dynamic({name: value})
            except ValueError as exc:
                log.warning("ignoring the %s dynamic setting %s", level, exc)
    return static.overlaid(values)
