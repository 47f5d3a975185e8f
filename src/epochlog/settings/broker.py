"""Every broker setting, declared once with Kafka's name and default (epochlog's own are
marked so). Parsing, ``--set``, DescribeConfigs and docs/settings.md all come from here;
the components take typed dataclasses bound to these names (``registry.bind``)."""

from __future__ import annotations

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

SERVER = "Server"
LOG = "Log defaults (topic settings' server-wide defaults)"
LOG_MANAGER = "Log manager"
REPLICATION = "Replication"
GROUPS = "Group coordinator"
TRANSACTIONS = "Transaction coordinator"
CONTROLLER = "Controller"
METASTORE = "Metastore"
COMPATIBILITY = "Accepted from Kafka's stock server.properties, with no effect"

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


def _s(name: str, kind: Kind, default: object, doc: str, section: str) -> Setting:
    return Setting(name, kind, default, doc, section)


_SERVER = [
    _s("broker.id", integer(0, long=False), 0, "This broker's id in the cluster.", SERVER),
    _s(
        "listeners",
        TEXT,
        "PLAINTEXT://127.0.0.1:9092",
        "Where the broker listens, NAME://HOST:PORT (the first listener is served).",
        SERVER,
    ),
    _s(
        "advertised.listeners",
        TEXT,
        "",
        "What clients are told to connect to; empty: the listener itself.",
        SERVER,
    ),
    _s("log.dirs", TEXT, "", "Comma-separated log directories (required).", SERVER),
    _s("log.dir", TEXT, "", "The log directory when log.dirs is not set.", SERVER),
    _s("broker.rack", TEXT, "", "The broker's rack, reported in Metadata.", SERVER),
    _s(
        "num.partitions",
        _INT_COUNT,
        1,
        "Partitions of an auto-created topic or a CreateTopics that leaves them to the broker.",
        SERVER,
    ),
    _s(
        "default.replication.factor",
        integer(1, 32767, long=False),
        1,
        "Replication factor of auto-created topics and of CreateTopics that leave it out.",
        SERVER,
    ),
    _s(
        "auto.create.topics.enable",
        BOOLEAN,
        True,
        "Metadata requests that allow it create missing topics.",
        SERVER,
    ),
    _s("delete.topic.enable", BOOLEAN, True, "DeleteTopics is allowed.", SERVER),
    _s(
        "socket.request.max.bytes",
        _INT_COUNT,
        104857600,
        "The largest request frame; a longer one closes the connection.",
        SERVER,
    ),
    _s(
        "queued.max.request.bytes",
        integer(-1),
        268435456,
        "Request bytes buffered over all connections before reading pauses (Kafka: -1, "
        "unbounded; bounded here so that many half-sent frames cannot grow the broker).",
        SERVER,
    ),
    _s(
        "connections.max.idle.ms",
        _MS,
        600000,
        "Connections idle this long are closed.",
        SERVER,
    ),
    _s(
        "message.max.bytes",
        integer(0, long=False),
        1048588,
        "The largest record batch; server default of max.message.bytes.",
        SERVER,
    ),
    _s(
        "message.max.decompressed.bytes",
        _POSITIVE,
        16 << 20,
        "epochlog's own: what one compressed produced batch may decompress to while it is "
        "validated (Kafka decompresses in a stream); more is refused with MESSAGE_TOO_LARGE.",
        SERVER,
    ),
    _s(
        "controller.max.records.per.batch",
        _POSITIVE,
        10000,
        "The most partitions one CreateTopics or CreatePartitions may ask for in total; "
        "more is refused whole with POLICY_VIOLATION.",
        SERVER,
    ),
    _s(
        "controlled.shutdown.enable",
        BOOLEAN,
        True,
        "On SIGTERM, hand leadership away before stopping.",
        SERVER,
    ),
    _s(
        "controlled.shutdown.max.retries",
        _COUNT,
        3,
        "Attempts at a controlled shutdown.",
        SERVER,
    ),
    _s(
        "controlled.shutdown.retry.backoff.ms",
        _COUNT,
        5000,
        "Wait between controlled shutdown attempts.",
        SERVER,
    ),
    _s(
        "request.timeout.ms",
        _MS,
        30000,
        "How long the broker's own requests (coordinator writes, transaction markers) may take.",
        SERVER,
    ),
]

_LOG = [
    _s("log.segment.bytes", integer(14, long=False), 1 << 30, "Segment size.", LOG),
    _s("log.roll.ms", _MS, None, "Roll a segment this old (over log.roll.hours).", LOG),
    _s("log.roll.hours", _INT_COUNT, 168, "Roll a segment this old, in hours.", LOG),
    _s(
        "log.retention.ms",
        integer(-1),
        None,
        "Delete segments older than this; -1: forever (over minutes and hours).",
        LOG,
    ),
    _s("log.retention.minutes", integer(-1, long=False), None, "Retention in minutes.", LOG),
    _s("log.retention.hours", integer(-1, long=False), 168, "Retention in hours.", LOG),
    _s(
        "log.retention.bytes",
        integer(-1),
        -1,
        "Delete old segments past this size per partition; -1: no limit.",
        LOG,
    ),
    _s(
        "log.index.interval.bytes",
        integer(0, long=False),
        4096,
        "Bytes between offset index entries.",
        LOG,
    ),
    _s(
        "log.flush.interval.messages",
        _POSITIVE,
        LONG_MAX,
        "fsync after this many records.",
        LOG,
    ),
    _s("log.flush.interval.ms", integer(0), None, "fsync after this long.", LOG),
    _s(
        "log.message.timestamp.type",
        TIMESTAMP_TYPE,
        "CreateTime",
        "Which timestamp records keep.",
        LOG,
    ),
    _s(
        "log.cleanup.policy",
        CLEANUP_POLICY,
        "delete",
        "delete (time and size retention) and/or compact (latest record per key).",
        LOG,
    ),
    _s(
        "log.cleaner.delete.retention.ms",
        integer(0),
        86400000,
        "How long a compacted tombstone is kept.",
        LOG,
    ),
    _s(
        "log.cleaner.min.cleanable.ratio",
        number(0.0, 1.0),
        0.5,
        "Dirty share of a log before the cleaner compacts it.",
        LOG,
    ),
    _s(
        "unclean.leader.election.enable",
        BOOLEAN,
        False,
        "Elect an out-of-sync replica when no in-sync one is left (loses records; "
        "epochlog quarantines what the new leader's followers truncate).",
        LOG,
    ),
    _s(
        "min.insync.replicas",
        integer(1, long=False),
        1,
        "In-sync replicas an acks=all write needs.",
        LOG,
    ),
]

_LOG_MANAGER = [
    _s(
        "log.flush.scheduler.interval.ms",
        _MS,
        LONG_MAX,
        "How often logs are checked for a time-based flush.",
        LOG_MANAGER,
    ),
    _s(
        "log.retention.check.interval.ms",
        _MS,
        300000,
        "How often retention runs.",
        LOG_MANAGER,
    ),
    _s(
        "log.flush.offset.checkpoint.interval.ms",
        _MS,
        60000,
        "How often the recovery point checkpoint is written.",
        LOG_MANAGER,
    ),
    _s(
        "log.flush.start.offset.checkpoint.interval.ms",
        _MS,
        60000,
        "How often the log start offset checkpoint is written.",
        LOG_MANAGER,
    ),
    _s(
        "producer.id.expiration.ms",
        _MS,
        86400000,
        "A producer id idle this long is forgotten by a partition.",
        LOG_MANAGER,
    ),
    _s(
        "producer.id.expiration.check.interval.ms",
        _MS,
        600000,
        "How often idle producer ids are looked for.",
        LOG_MANAGER,
    ),
    _s("log.cleaner.enable", BOOLEAN, True, "Run the log cleaner (compaction).", LOG_MANAGER),
    _s("log.cleaner.backoff.ms", _MS, 15000, "Cleaner sleep when idle.", LOG_MANAGER),
    _s(
        "log.cleaner.dedupe.buffer.size",
        _POSITIVE,
        134217728,
        "Memory for the cleaner's key map.",
        LOG_MANAGER,
    ),
    _s(
        "file.delete.delay.ms",
        _MS,
        60000,
        "How long a deleted segment's files wait before removal.",
        LOG_MANAGER,
    ),
    _s(
        "log.scrub.interval.ms",
        _MS_OR_OFF,
        -1,
        "epochlog's own: how often sealed segments are re-read and CRC-checked; -1: never.",
        LOG_MANAGER,
    ),
    _s(
        "log.scrub.bytes.per.second",
        _POSITIVE,
        10 << 20,
        "epochlog's own: the scrubber's read rate.",
        LOG_MANAGER,
    ),
]

_REPLICATION = [
    _s(
        "replica.lag.time.max.ms",
        _MS,
        30000,
        "A follower that has not caught up for this long leaves the ISR.",
        REPLICATION,
    ),
    _s(
        "replica.fetch.wait.max.ms",
        integer(0, long=False),
        500,
        "Longest wait of a follower's fetch (at most replica.socket.timeout.ms).",
        REPLICATION,
    ),
    _s(
        "replica.fetch.min.bytes", _INT_COUNT, 1, "Bytes a follower's fetch waits for.", REPLICATION
    ),
    _s(
        "replica.fetch.max.bytes",
        _INT_COUNT,
        1048576,
        "Bytes per partition of a follower's fetch.",
        REPLICATION,
    ),
    _s(
        "replica.fetch.response.max.bytes",
        _INT_COUNT,
        10485760,
        "Bytes of a whole follower's fetch response.",
        REPLICATION,
    ),
    _s(
        "replica.fetch.backoff.ms",
        _INT_COUNT,
        1000,
        "Follower's wait after a failed fetch.",
        REPLICATION,
    ),
    _s(
        "replica.socket.timeout.ms",
        _INT_COUNT,
        30000,
        "Timeout of a follower's fetch request.",
        REPLICATION,
    ),
]

_GROUPS = [
    _s(
        "offsets.topic.num.partitions",
        _INT_COUNT,
        50,
        "Partitions of __consumer_offsets (50 as in Kafka, so a group lands on the same "
        "partition as in a Kafka-written topic).",
        GROUPS,
    ),
    _s(
        "offsets.topic.replication.factor",
        integer(1, 32767, long=False),
        3,
        "Replication of __consumer_offsets (up to the live brokers).",
        GROUPS,
    ),
    _s(
        "offsets.topic.segment.bytes",
        _INT_COUNT,
        104857600,
        "Segment size of __consumer_offsets.",
        GROUPS,
    ),
    _s(
        "offsets.retention.minutes",
        _INT_COUNT,
        10080,
        "KIP-211: a group's committed offsets expire this long after it became empty.",
        GROUPS,
    ),
    _s(
        "offsets.retention.check.interval.ms",
        _MS,
        600000,
        "How often expired offsets are looked for.",
        GROUPS,
    ),
    _s(
        "offsets.commit.timeout.ms",
        _INT_COUNT,
        5000,
        "How long an offset commit may wait for replication.",
        GROUPS,
    ),
    _s(
        "offsets.load.buffer.size",
        _INT_COUNT,
        5242880,
        "Read size when a coordinator loads its partition.",
        GROUPS,
    ),
    _s(
        "offset.metadata.max.bytes",
        _INT_COUNT,
        4096,
        "Longest metadata string of a committed offset.",
        GROUPS,
    ),
    _s(
        "offsets.commit.reject.stale.leader.epoch",
        BOOLEAN,
        False,
        "epochlog's own: refuse commits whose leader epoch is older than the one committed.",
        GROUPS,
    ),
    _s(
        "group.min.session.timeout.ms",
        _INT_COUNT,
        6000,
        "Shortest session timeout a member may ask for.",
        GROUPS,
    ),
    _s(
        "group.max.session.timeout.ms",
        _INT_COUNT,
        1800000,
        "Longest session timeout a member may ask for.",
        GROUPS,
    ),
    _s(
        "group.initial.rebalance.delay.ms",
        integer(0, long=False),
        3000,
        "How long the first rebalance of an empty group waits for more members.",
        GROUPS,
    ),
    _s("group.max.size", _INT_COUNT, INT_MAX, "Most members of one group.", GROUPS),
]

_TRANSACTIONS = [
    _s(
        "transaction.state.log.num.partitions",
        _INT_COUNT,
        50,
        "Partitions of __transaction_state.",
        TRANSACTIONS,
    ),
    _s(
        "transaction.state.log.replication.factor",
        integer(1, 32767, long=False),
        3,
        "Replication of __transaction_state (up to the live brokers).",
        TRANSACTIONS,
    ),
    _s(
        "transaction.state.log.min.isr",
        _INT_COUNT,
        2,
        "min.insync.replicas of __transaction_state.",
        TRANSACTIONS,
    ),
    _s(
        "transaction.state.log.segment.bytes",
        _INT_COUNT,
        104857600,
        "Segment size of __transaction_state.",
        TRANSACTIONS,
    ),
    _s(
        "transaction.state.log.load.buffer.size",
        _INT_COUNT,
        5242880,
        "Read size when a coordinator loads its partition.",
        TRANSACTIONS,
    ),
    _s(
        "transaction.max.timeout.ms",
        _INT_COUNT,
        900000,
        "The longest transaction.timeout.ms a producer may ask for.",
        TRANSACTIONS,
    ),
    _s(
        "transactional.id.expiration.ms",
        _INT_COUNT,
        604800000,
        "A transactional id idle this long is forgotten.",
        TRANSACTIONS,
    ),
    _s(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        _INT_COUNT,
        10000,
        "How often transactions open past their timeout are looked for and aborted.",
        TRANSACTIONS,
    ),
    _s(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        _INT_COUNT,
        3600000,
        "How often expired transactional ids are looked for.",
        TRANSACTIONS,
    ),
]

_CONTROLLER = [
    _s(
        "auto.leader.rebalance.enable",
        BOOLEAN,
        True,
        "Move leadership back to preferred replicas.",
        CONTROLLER,
    ),
    _s(
        "leader.imbalance.check.interval.seconds",
        _POSITIVE,
        300,
        "How often leadership balance is checked.",
        CONTROLLER,
    ),
]

_METASTORE = [
    _s(
        "metastore",
        TEXT,
        "",
        "epochlog's own: zk://HOST:PORT[/chroot], sqlite:///PATH or memory://; empty: "
        "zookeeper.connect if set, else SQLite in the first log directory.",
        METASTORE,
    ),
    _s(
        "zookeeper.connect",
        TEXT,
        "",
        "HOST:PORT[,HOST:PORT][/chroot] of a ZooKeeper ensemble (zk:// metastore).",
        METASTORE,
    ),
    _s(
        "zookeeper.session.timeout.ms",
        _INT_COUNT,
        18000,
        "The broker's metastore session: it leaves the cluster this long after its last heartbeat.",
        METASTORE,
    ),
]

_COMPATIBILITY = [
    _s(name, kind, default, doc, COMPATIBILITY)
    for name, kind, default, doc in [
        ("num.network.threads", _INT_COUNT, 3, "epochlog serves requests on one event loop."),
        ("num.io.threads", _INT_COUNT, 8, "epochlog serves requests on one event loop."),
        (
            "num.recovery.threads.per.data.dir",
            _INT_COUNT,
            1,
            "Recovery reads each log in turn.",
        ),
        ("socket.send.buffer.bytes", integer(-1, long=False), 102400, "The OS default is used."),
        (
            "socket.receive.buffer.bytes",
            integer(-1, long=False),
            102400,
            "The OS default is used.",
        ),
        (
            "zookeeper.connection.timeout.ms",
            integer(0, long=False),
            None,
            "The session timeout bounds the first connection.",
        ),
    ]
]

BROKER = Registry(
    "Broker settings",
    _SERVER
    + _LOG
    + _LOG_MANAGER
    + _REPLICATION
    + _GROUPS
    + _TRANSACTIONS
    + _CONTROLLER
    + _METASTORE
    + _COMPATIBILITY,
)
