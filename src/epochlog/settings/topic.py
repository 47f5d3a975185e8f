"""Every topic setting (CreateTopics, AlterConfigs, ``topics create --config``), with the
broker settings that give its server-wide default (``segment.bytes`` from
``log.segment.bytes``; ``retention.ms`` from ``log.retention.ms``, ``.minutes`` or
``.hours``, the first one set winning, as in Kafka)."""

from __future__ import annotations

from collections.abc import Mapping

from epochlog.settings.broker import BROKER, CLEANUP_POLICY, COMPRESSION_TYPE, TIMESTAMP_TYPE
from epochlog.settings.registry import (
    BOOLEAN,
    LONG_MAX,
    TEXT,
    Kind,
    Registry,
    Setting,
    SettingError,
    Settings,
    integer,
    items,
    number,
)

# Topic setting -> (its kind, what it does, broker synonyms with their unit in the
# topic setting's unit, fallback when no synonym has a default).
_DECLARED: list[tuple[str, Kind, str, tuple[tuple[str, int], ...], object]] = [
    ("segment.bytes", integer(14, long=False), "Segment size.", (("log.segment.bytes", 1),), None),
    (
        "segment.ms",
        integer(1),
        "Roll a segment this old.",
        (("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
        None,
    ),
    (
        "segment.jitter.ms",
        integer(0),
        "A segment rolls up to this much before segment.ms, by an amount fixed per "
        "segment, so that partitions created together do not all roll at once.",
        (("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)),
        None,
    ),
    (
        "retention.ms",
        integer(-1),
        "Delete segments older than this; -1: forever.",
        (
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ),
        None,
    ),
    (
        "retention.bytes",
        integer(-1),
        "Delete old segments past this size; -1: no limit.",
        (("log.retention.bytes", 1),),
        None,
    ),
    (
        "index.interval.bytes",
        integer(0, long=False),
        "Bytes between offset index entries.",
        (("log.index.interval.bytes", 1),),
        None,
    ),
    (
        "flush.messages",
        integer(1),
        "fsync after this many records.",
        (("log.flush.interval.messages", 1),),
        None,
    ),
    ("flush.ms", integer(0), "fsync after this long.", (("log.flush.interval.ms", 1),), LONG_MAX),
    (
        "max.message.bytes",
        integer(0, long=False),
        "The largest record batch.",
        (("message.max.bytes", 1),),
        None,
    ),
    (
        "message.timestamp.type",
        TIMESTAMP_TYPE,
        "Which timestamp records keep.",
        (("log.message.timestamp.type", 1),),
        None,
    ),
    (
        "cleanup.policy",
        CLEANUP_POLICY,
        "delete (time and size retention) and/or compact (latest record per key).",
        (("log.cleanup.policy", 1),),
        None,
    ),
    (
        "delete.retention.ms",
        integer(0),
        "How long a compacted tombstone is kept.",
        (("log.cleaner.delete.retention.ms", 1),),
        None,
    ),
    (
        "min.cleanable.dirty.ratio",
        number(0.0, 1.0),
        "Dirty share of a log before the cleaner compacts it.",
        (("log.cleaner.min.cleanable.ratio", 1),),
        None,
    ),
    (
        "unclean.leader.election.enable",
        BOOLEAN,
        "Elect an out-of-sync replica when no in-sync one is left.",
        (("unclean.leader.election.enable", 1),),
        None,
    ),
    (
        "min.insync.replicas",
        integer(1, long=False),
        "In-sync replicas an acks=all write needs.",
        (("min.insync.replicas", 1),),
        None,
    ),
    (
        "compression.type",
        COMPRESSION_TYPE,
        "producer: batches are stored in the producer's codec; a codec's name: the leader "
        "rewrites every batch in that codec.",
        (("compression.type", 1),),
        None,
    ),
    (
        "compression.gzip.level",
        integer(-1, 9, long=False),
        "The gzip level a leader rewrites batches at (1..9; -1: gzip's default, 6).",
        (("compression.gzip.level", 1),),
        None,
    ),
    (
        "compression.lz4.level",
        integer(1, 17, long=False),
        "The lz4 level a leader rewrites batches at.",
        (("compression.lz4.level", 1),),
        None,
    ),
    (
        "compression.zstd.level",
        integer(-131072, 22, long=False),
        "The zstd level a leader rewrites batches at.",
        (("compression.zstd.level", 1),),
        None,
    ),
    (
        "message.timestamp.before.max.ms",
        integer(0),
        "With CreateTime, a record whose timestamp is further than this behind the "
        "broker's clock is refused (INVALID_TIMESTAMP).",
        (("log.message.timestamp.before.max.ms", 1),),
        None,
    ),
    (
        "message.timestamp.after.max.ms",
        integer(0),
        "With CreateTime, a record whose timestamp is further than this ahead of the "
        "broker's clock is refused (INVALID_TIMESTAMP).",
        (("log.message.timestamp.after.max.ms", 1),),
        None,
    ),
    (
        "message.timestamp.difference.max.ms",
        integer(0),
        "Deprecated by Kafka: bounds a record's timestamp both ways, as the two above "
        "(the smaller bound wins).",
        (("log.message.timestamp.difference.max.ms", 1),),
        None,
    ),
    (
        "segment.index.bytes",
        integer(4, long=False),
        "Size of a segment's offset (and time) index; a full index rolls the segment.",
        (("log.index.size.max.bytes", 1),),
        None,
    ),
    (
        "min.compaction.lag.ms",
        integer(0),
        "A record stays uncompacted at least this long after it was written.",
        (("log.cleaner.min.compaction.lag.ms", 1),),
        None,
    ),
    (
        "max.compaction.lag.ms",
        integer(1),
        "A record is compacted at most this long after it was written, however little "
        "of the log is dirty.",
        (("log.cleaner.max.compaction.lag.ms", 1),),
        None,
    ),
]

NO_EFFECT = "Accepted from Kafka, with no effect here"


def _remote_storage(name: str, raw: object) -> bool:
    """Kafka refuses ``true`` on a broker without tiered storage; epochlog has none."""
    if BOOLEAN.parse(name, raw):
        raise SettingError(name, "tiered storage is not available on this broker")
    return False


_REPLICA_LIST = items(nonempty=False)


def _throttled_replicas(name: str, raw: object) -> tuple[str, ...]:
    """Kafka's form, checked as Kafka checks it: ``*`` or ``partition:broker`` pairs."""
    values = _REPLICA_LIST.parse(name, raw)
    if values == ("*",):
        return values
    for value in values:
        partition, sep, broker = value.partition(":")
        if not (sep and partition.strip().isdigit() and broker.strip().isdigit()):
            raise SettingError(name, f"{value!r}: expected * or PARTITION:BROKER,...")
    return values


THROTTLED_REPLICAS = Kind(
    _REPLICA_LIST.config_type, _throttled_replicas, "* or a list of PARTITION:BROKER"
)

# Topic settings Kafka knows that have no meaning here: (name, kind, Kafka's default,
# why). Accepted, stored and described, so that no client is refused a name Kafka knows.
_ACCEPTED: list[tuple[str, Kind, object, str]] = [
    (
        "file.delete.delay.ms",
        integer(0),
        60000,
        "Deleted segments go at once (truncated ones to quarantine).",
    ),
    (
        "follower.replication.throttled.replicas",
        THROTTLED_REPLICAS,
        "",
        "No replication throttling.",
    ),
    (
        "leader.replication.throttled.replicas",
        THROTTLED_REPLICAS,
        "",
        "No replication throttling.",
    ),
    ("local.retention.bytes", integer(-2), -2, "No tiered storage: retention.bytes applies."),
    ("local.retention.ms", integer(-2), -2, "No tiered storage: retention.ms applies."),
    ("message.downconversion.enable", BOOLEAN, True, "Only record batches of magic 2 exist here."),
    ("message.format.version", TEXT, "3.0-IV1", "Only record batches of magic 2 exist here."),
    ("preallocate", BOOLEAN, False, "Segment files grow as they are written."),
    ("remote.log.copy.disable", BOOLEAN, False, "No tiered storage."),
    ("remote.log.delete.on.disable", BOOLEAN, False, "No tiered storage."),
    (
        "remote.storage.enable",
        Kind(BOOLEAN.config_type, _remote_storage, "false"),
        False,
        "No tiered storage; true is refused, as Kafka refuses it without.",
    ),
]

SYNONYMS: dict[str, tuple[tuple[str, int], ...]] = {
    **{name: syn for name, _, _, syn, _ in _DECLARED},
    **{name: () for name, _, _, _ in _ACCEPTED},
}


def _scaled(value: object, scale: int) -> object:
    """A broker value in the topic setting's unit (negative means "no limit", unscaled)."""
    if scale == 1 or not isinstance(value, int) or value < 0:
        return value
    return value * scale


def _server_default(synonyms: tuple[tuple[str, int], ...], fallback: object) -> object:
    for name, scale in synonyms:
        default = BROKER.default(name)
        if default is not None:
            return _scaled(default, scale)
    return fallback


TOPIC = Registry(
    "Topic settings",
    [
        Setting(
            name,
            kind,
            _server_default(synonyms, fallback),
            doc + f" Server default: {', '.join(n for n, _ in synonyms)}.",
        )
        for name, kind, doc, synonyms, fallback in _DECLARED
    ]
    + [
        Setting(name, kind, default, f"{NO_EFFECT}: {why}", NO_EFFECT)
        for name, kind, default, why in _ACCEPTED
    ],
)


def server_defaults(broker: Settings) -> dict[str, object]:
    """The topic settings a broker's configuration sets (through its ``log.*`` synonyms)."""
    out: dict[str, object] = {}
    for name, synonyms in SYNONYMS.items():
        for synonym, scale in synonyms:
            if synonym in broker.given:
                out[name] = _scaled(broker[synonym], scale)
                break
    return out


def parse_topic_settings(raw: Mapping[str, object]) -> dict[str, object]:
    """Only the given topic settings, parsed (unknown names refused)."""
    return {name: TOPIC.check(name, value) for name, value in raw.items()}


__all__ = ["NO_EFFECT", "SYNONYMS", "TOPIC", "parse_topic_settings", "server_defaults"]
