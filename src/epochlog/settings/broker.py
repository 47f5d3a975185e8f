"""Every broker setting, declared once with Kafka's name and default (epochlog's own are
marked so). Parsing, ``--set``, DescribeConfigs and docs/settings.md all come from here;
the components take typed dataclasses bound to these names (``registry.bind``)."""

from __future__ import annotations

from epochlog.settings.compatibility import COMPATIBILITY_SETTINGS
from epochlog.settings.quotas import QUOTA_SETTINGS
from epochlog.settings.registry import (
    BOOLEAN,
    INT_MAX,
    LONG_MAX,
    TEXT,
    ConfigType,
    Kind,
    Registry,
    Setting,
    choice,
    integer,
    items,
    number,
)
from epochlog.settings.replica_selector import REPLICA_SELECTOR_SETTINGS
from epochlog.settings.security import SECURITY_SETTINGS

SERVER = "Server"
LOG = "Log defaults (topic settings' server-wide defaults)"
LOG_MANAGER = "Log manager"
REPLICATION = "Replication"
GROUPS = "Group coordinator"
TRANSACTIONS = "Transaction coordinator"
CONTROLLER = "Controller"
METASTORE = "Metastore"

_MS = integer(1)
_MS_OR_OFF = integer(-1)
_POSITIVE = integer(1)
_COUNT = integer(0)
_INT_COUNT = integer(1, long=False)


_POLICIES = items("delete", "compact")


def _parse_policy(name: str, raw: object) -> str:
    return ",".join(sorted(set(_POLICIES.parse(name, raw))))


CLEANUP_POLICY = Kind(ConfigType.LIST, _parse_policy, "delete and/or compact, comma-separated")
TIMESTAMP_TYPE = choice("CreateTime", "LogAppendTime")
COMPRESSION_TYPE = choice("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


def _section(section: str, entries: list[tuple[str, Kind, object, str]]) -> list[Setting]:
    """(name, kind, default, documentation) of one section's settings."""
    return [Setting(name, kind, default, doc, section) for name, kind, default, doc in entries]


_SERVER = _section(
    SERVER,
    [
        ("broker.id", integer(0, long=False), 0, "This broker's id in the cluster."),
        (
            "metrics.listener",
            TEXT,
            "",
            "epochlog's own: where the broker serves Prometheus text at /metrics, "
            "http://HOST:PORT (port 0: any free port); empty: not served.",
        ),
        ("log.dirs", TEXT, "", "Comma-separated log directories (required)."),
        ("log.dir", TEXT, "", "The log directory when log.dirs is not set."),
        ("broker.rack", TEXT, "", "The broker's rack, in Metadata and matched to client.rack."),
        (
            "num.partitions",
            _INT_COUNT,
            1,
            "Partitions of an auto-created topic or a CreateTopics that leaves them to the broker.",
        ),
        (
            "default.replication.factor",
            integer(1, 32767, long=False),
            1,
            "Replication factor of auto-created topics and of CreateTopics that leave it out.",
        ),
        (
            "auto.create.topics.enable",
            BOOLEAN,
            True,
            "Metadata requests that allow it create missing topics.",
        ),
        ("delete.topic.enable", BOOLEAN, True, "DeleteTopics is allowed."),
        (
            "socket.request.max.bytes",
            _INT_COUNT,
            104857600,
            "The largest request frame; a longer one closes the connection.",
        ),
        (
            "queued.max.request.bytes",
            integer(-1),
            268435456,
            "Request bytes held over all connections, each frame's size reserved before it "
            "is read (Kafka: -1, unbounded). Frames over 64 KiB may hold three quarters of "
            "it together, one of them half (a larger one is refused): small requests are "
            "served while large ones wait.",
        ),
        (
            "connections.max.idle.ms",
            _MS,
            600000,
            "Connections idle this long, or this long into receiving a request, are closed.",
        ),
        (
            "request.stall.timeout.ms",
            _MS,
            30000,
            "epochlog's own: a connection whose request frame gets no byte for this long is "
            "closed, freeing its share of queued.max.request.bytes (found within twice this).",
        ),
        (
            "message.max.bytes",
            integer(0, long=False),
            1048588,
            "The largest record batch; server default of max.message.bytes.",
        ),
        (
            "message.max.decompressed.bytes",
            _POSITIVE,
            16 << 20,
            "epochlog's own: what one compressed produced batch may decompress to while it is "
            "validated (Kafka decompresses in a stream); more is refused with MESSAGE_TOO_LARGE.",
        ),
        (
            "controller.max.records.per.batch",
            _POSITIVE,
            10000,
            "The most partitions one CreateTopics or CreatePartitions may ask for in total; "
            "more is refused whole with POLICY_VIOLATION.",
        ),
        (
            "controlled.shutdown.enable",
            BOOLEAN,
            True,
            "On SIGTERM, hand leadership away before stopping.",
        ),
        (
            "controlled.shutdown.max.retries",
            _COUNT,
            3,
            "Attempts at a controlled shutdown.",
        ),
        (
            "controlled.shutdown.retry.backoff.ms",
            _COUNT,
            5000,
            "Wait between controlled shutdown attempts.",
        ),
        (
            "request.timeout.ms",
            _MS,
            30000,
            "How long the broker's own requests (coordinator writes, transaction markers) "
            "may take.",
        ),
    ],
)

_LOG = _section(
    LOG,
    [
        ("log.segment.bytes", integer(14, long=False), 1 << 30, "Segment size."),
        ("log.roll.ms", _MS, None, "Roll a segment this old (over log.roll.hours)."),
        ("log.roll.hours", _INT_COUNT, 168, "Roll a segment this old, in hours."),
        ("log.roll.jitter.ms", _COUNT, None, "Roll up to this much earlier (over hours)."),
        ("log.roll.jitter.hours", integer(0, long=False), 0, "The same, in hours."),
        (
            "log.retention.ms",
            integer(-1),
            None,
            "Delete segments older than this; -1: forever (over minutes and hours).",
        ),
        ("log.retention.minutes", integer(-1, long=False), None, "Retention in minutes."),
        ("log.retention.hours", integer(-1, long=False), 168, "Retention in hours."),
        (
            "log.retention.bytes",
            integer(-1),
            -1,
            "Delete old segments past this size per partition; -1: no limit.",
        ),
        (
            "log.index.interval.bytes",
            integer(0, long=False),
            4096,
            "Bytes between offset index entries.",
        ),
        (
            "log.flush.interval.messages",
            _POSITIVE,
            LONG_MAX,
            "fsync after this many records.",
        ),
        ("log.flush.interval.ms", integer(0), None, "fsync after this long."),
        (
            "log.message.timestamp.type",
            TIMESTAMP_TYPE,
            "CreateTime",
            "Which timestamp records keep.",
        ),
        (
            "log.cleanup.policy",
            CLEANUP_POLICY,
            "delete",
            "delete (time and size retention) and/or compact (latest record per key).",
        ),
        (
            "log.cleaner.delete.retention.ms",
            integer(0),
            86400000,
            "How long a compacted tombstone is kept.",
        ),
        (
            "log.cleaner.min.cleanable.ratio",
            number(0.0, 1.0),
            0.5,
            "Dirty share of a log before the cleaner compacts it.",
        ),
        (
            "unclean.leader.election.enable",
            BOOLEAN,
            False,
            "Elect an out-of-sync replica when no in-sync one is left (loses records; "
            "epochlog quarantines what the new leader's followers truncate).",
        ),
        (
            "min.insync.replicas",
            integer(1, long=False),
            1,
            "In-sync replicas an acks=all write needs.",
        ),
        ("compression.type", COMPRESSION_TYPE, "producer", "The codec leaders store batches in."),
        ("compression.gzip.level", integer(-1, 9, long=False), -1, "Its gzip level (-1: 6)."),
        ("compression.lz4.level", integer(1, 17, long=False), 9, "Its lz4 level."),
        ("compression.zstd.level", integer(-131072, 22, long=False), 3, "Its zstd level."),
        ("log.message.timestamp.before.max.ms", _COUNT, LONG_MAX, "CreateTime's bound behind."),
        ("log.message.timestamp.after.max.ms", _COUNT, LONG_MAX, "CreateTime's bound ahead."),
        ("log.message.timestamp.difference.max.ms", _COUNT, LONG_MAX, "Both bounds (deprecated)."),
        ("log.index.size.max.bytes", integer(4, long=False), 10485760, "A segment's index size."),
        ("log.cleaner.min.compaction.lag.ms", _COUNT, 0, "Least age of a compacted record."),
        ("log.cleaner.max.compaction.lag.ms", _POSITIVE, LONG_MAX, "Most age of a dirty record."),
    ],
)

_LOG_MANAGER = _section(
    LOG_MANAGER,
    [
        (
            "log.flush.scheduler.interval.ms",
            _MS,
            LONG_MAX,
            "How often logs are checked for a time-based flush.",
        ),
        (
            "log.retention.check.interval.ms",
            _MS,
            300000,
            "How often retention runs.",
        ),
        (
            "log.flush.offset.checkpoint.interval.ms",
            _MS,
            60000,
            "How often the recovery point checkpoint is written.",
        ),
        (
            "log.flush.start.offset.checkpoint.interval.ms",
            _MS,
            60000,
            "How often the log start offset checkpoint is written.",
        ),
        (
            "producer.id.expiration.ms",
            _MS,
            86400000,
            "A producer id idle this long is forgotten by a partition.",
        ),
        (
            "producer.id.expiration.check.interval.ms",
            _MS,
            600000,
            "How often idle producer ids are looked for.",
        ),
        ("log.cleaner.enable", BOOLEAN, True, "Run the log cleaner (compaction)."),
        ("log.cleaner.backoff.ms", _MS, 15000, "Cleaner sleep when idle."),
        (
            "log.cleaner.dedupe.buffer.size",
            _POSITIVE,
            134217728,
            "Memory for the cleaner's key map.",
        ),
        (
            "file.delete.delay.ms",
            _MS,
            60000,
            "How long a deleted segment's files wait before removal.",
        ),
        (
            "log.scrub.interval.ms",
            _MS_OR_OFF,
            -1,
            "epochlog's own: how often sealed segments are re-read and CRC-checked; -1: never.",
        ),
        (
            "log.scrub.bytes.per.second",
            _POSITIVE,
            10 << 20,
            "epochlog's own: the scrubber's read rate.",
        ),
    ],
)

_REPLICATION = _section(
    REPLICATION,
    [
        (
            "replica.lag.time.max.ms",
            _MS,
            30000,
            "A follower that has not caught up for this long leaves the ISR.",
        ),
        (
            "replica.fetch.wait.max.ms",
            integer(0, long=False),
            500,
            "Longest wait of a follower's fetch (at most replica.socket.timeout.ms).",
        ),
        ("replica.fetch.min.bytes", _INT_COUNT, 1, "Bytes a follower's fetch waits for."),
        (
            "replica.fetch.max.bytes",
            _INT_COUNT,
            1048576,
            "Bytes per partition of a follower's fetch.",
        ),
        (
            "replica.fetch.response.max.bytes",
            _INT_COUNT,
            10485760,
            "Bytes of a whole follower's fetch response.",
        ),
        (
            "replica.fetch.backoff.ms",
            _INT_COUNT,
            1000,
            "Follower's wait after a failed fetch.",
        ),
        (
            "replica.socket.timeout.ms",
            _INT_COUNT,
            30000,
            "Timeout of a follower's fetch request.",
        ),
        (
            "max.incremental.fetch.session.cache.slots",
            integer(0, long=False),
            1000,
            "The maximum number of incremental fetch sessions that we will maintain "
            "(KIP-227; 0 answers every fetch in full).",
        ),
    ],
)

_GROUPS = _section(
    GROUPS,
    [
        (
            "offsets.topic.num.partitions",
            _INT_COUNT,
            50,
            "Partitions of __consumer_offsets (50 as in Kafka, so a group lands on the same "
            "partition as in a Kafka-written topic).",
        ),
        (
            "offsets.topic.replication.factor",
            integer(1, 32767, long=False),
            3,
            "Replication of __consumer_offsets (up to the live brokers).",
        ),
        (
            "offsets.topic.segment.bytes",
            _INT_COUNT,
            104857600,
            "Segment size of __consumer_offsets.",
        ),
        (
            "offsets.retention.minutes",
            _INT_COUNT,
            10080,
            "KIP-211: a group's committed offsets expire this long after it became empty.",
        ),
        (
            "offsets.retention.check.interval.ms",
            _MS,
            600000,
            "How often expired offsets are looked for.",
        ),
        (
            "offsets.commit.timeout.ms",
            _INT_COUNT,
            5000,
            "How long an offset commit may wait for replication.",
        ),
        (
            "offsets.load.buffer.size",
            _INT_COUNT,
            5242880,
            "Read size when a coordinator loads its partition.",
        ),
        (
            "offset.metadata.max.bytes",
            _INT_COUNT,
            4096,
            "Longest metadata string of a committed offset.",
        ),
        (
            "offsets.commit.reject.stale.leader.epoch",
            BOOLEAN,
            False,
            "epochlog's own (KIP-232): refuse a commit whose leader epoch is older than the"
            " committed one (INVALID_LEADER_EPOCH, code 10232) or above every epoch of the"
            " partition, from a topic since deleted and re-created"
            " (INVALID_PARTITION_EPOCH, code 10233).",
        ),
        (
            "group.min.session.timeout.ms",
            _INT_COUNT,
            6000,
            "Shortest session timeout a member may ask for.",
        ),
        (
            "group.max.session.timeout.ms",
            _INT_COUNT,
            1800000,
            "Longest session timeout a member may ask for.",
        ),
        (
            "group.initial.rebalance.delay.ms",
            integer(0, long=False),
            3000,
            "How long the first rebalance of an empty group waits for more members.",
        ),
        ("group.max.size", _INT_COUNT, INT_MAX, "Most members of one group."),
    ],
)

_TRANSACTIONS = _section(
    TRANSACTIONS,
    [
        (
            "transaction.state.log.num.partitions",
            _INT_COUNT,
            50,
            "Partitions of __transaction_state.",
        ),
        (
            "transaction.state.log.replication.factor",
            integer(1, 32767, long=False),
            3,
            "Replication of __transaction_state (up to the live brokers).",
        ),
        (
            "transaction.state.log.min.isr",
            _INT_COUNT,
            2,
            "min.insync.replicas of __transaction_state.",
        ),
        (
            "transaction.state.log.segment.bytes",
            _INT_COUNT,
            104857600,
            "Segment size of __transaction_state.",
        ),
        (
            "transaction.state.log.load.buffer.size",
            _INT_COUNT,
            5242880,
            "Read size when a coordinator loads its partition.",
        ),
        (
            "transaction.max.timeout.ms",
            _INT_COUNT,
            900000,
            "The longest transaction.timeout.ms a producer may ask for.",
        ),
        (
            "transactional.id.expiration.ms",
            _INT_COUNT,
            604800000,
            "A transactional id idle this long is forgotten.",
        ),
        (
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            _INT_COUNT,
            10000,
            "How often transactions open past their timeout are looked for and aborted.",
        ),
        (
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            _INT_COUNT,
            3600000,
            "How often expired transactional ids are looked for.",
        ),
        (
            "transaction.partition.verification.enable",
            BOOLEAN,
            True,
            "Before a transaction's first batch is appended to a partition, its leader asks "
            "the transaction coordinator whether the transaction includes the partition "
            "(KIP-890): a batch nobody will end is refused, never stored.",
        ),
    ],
)

_CONTROLLER = _section(
    CONTROLLER,
    [
        (
            "auto.leader.rebalance.enable",
            BOOLEAN,
            True,
            "Move leadership back to preferred replicas.",
        ),
        (
            "leader.imbalance.check.interval.seconds",
            _POSITIVE,
            300,
            "How often leadership balance is checked.",
        ),
    ],
)

_METASTORE = _section(
    METASTORE,
    [
        (
            "metastore",
            TEXT,
            "",
            "epochlog's own: zk://HOST:PORT[,HOST:PORT...][/chroot], sqlite:///PATH or "
            "memory://; empty: zookeeper.connect if set, else SQLite in the first log "
            "directory.",
        ),
        (
            "zookeeper.connect",
            TEXT,
            "",
            "HOST:PORT[,HOST:PORT][/chroot] of a ZooKeeper ensemble (zk:// metastore).",
        ),
        (
            "zookeeper.session.timeout.ms",
            _INT_COUNT,
            18000,
            "The broker's metastore session: it leaves the cluster this long after its "
            "last heartbeat.",
        ),
    ],
)

BROKER = Registry(
    "Broker settings",
    _SERVER
    + _LOG
    + _LOG_MANAGER
    + _REPLICATION
    + REPLICA_SELECTOR_SETTINGS
    + _GROUPS
    + _TRANSACTIONS
    + _CONTROLLER
    + SECURITY_SETTINGS
    + QUOTA_SETTINGS
    + _METASTORE
    + COMPATIBILITY_SETTINGS,
)
