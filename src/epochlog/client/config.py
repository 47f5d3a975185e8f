"""Client settings, declared once with Kafka's names (on the registry the broker's use),
checked at construction so that a mistake is reported where it was made, naming the
setting (as confluent-kafka does)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from epochlog.client.errors import ConfigError
from epochlog.client.positions import ResetPolicy
from epochlog.client.security import SECURITY
from epochlog.protocol import compression
from epochlog.settings.registry import (
    BOOLEAN,
    TEXT,
    ConfigType,
    Kind,
    Registry,
    Setting,
    choice,
    integer,
    items,
)


def parse_bootstrap(name: str, raw: object) -> list[tuple[str, int]]:
    """``HOST:PORT[,HOST:PORT...]`` into address pairs."""
    if not isinstance(raw, str) or not raw.strip():
        raise ConfigError(name, "expected HOST:PORT[,HOST:PORT...]")
    out = []
    for item in raw.split(","):
        host, _, port = item.strip().rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(name, f"expected HOST:PORT, got {item.strip()!r}")
        out.append((host, int(port)))
    return out


def _acks(name: str, raw: object) -> int:
    text = str(raw).strip().lower()
    table = {"all": -1, "-1": -1, "0": 0, "1": 1}
    if isinstance(raw, bool) or text not in table:
        raise ConfigError(name, f"{raw!r} is not one of 0, 1, all")
    return table[text]


BOOTSTRAP = Kind(ConfigType.LIST, parse_bootstrap, "HOST:PORT[,HOST:PORT...]")
ACKS = Kind(ConfigType.STRING, _acks, "0, 1 or all", render=lambda v: "all" if v == -1 else str(v))
_MS = integer(0, long=False)
_BYTES = integer(1, long=False)

COMMON = [
    Setting(
        "bootstrap.servers", BOOTSTRAP, None, "Brokers to ask for metadata first.", required=True
    ),
    Setting("client.id", TEXT, "epochlog", "Sent with every request (logs, quotas)."),
    Setting("request.timeout.ms", integer(1, long=False), 30000, "How long a request may take."),
    Setting("retry.backoff.ms", _MS, 100, "First wait before a retry."),
    Setting("retry.backoff.max.ms", _MS, 1000, "Longest wait before a retry (exponential)."),
    Setting("metadata.max.age.ms", _MS, 300000, "Metadata older than this is refreshed."),
    *SECURITY,
]

# Kafka's consumer and admin setting: a call that retries (an offset lookup waiting out
# OFFSET_NOT_AVAILABLE or a leader change) may go on this long in all.
API_TIMEOUT = Setting(
    "default.api.timeout.ms",
    integer(1, long=False),
    60000,
    "How long an offset lookup may retry in all; each request is bounded by request.timeout.ms.",
)

ADMIN = Registry("Admin client settings", [*COMMON, API_TIMEOUT])


def admin_settings(config: Mapping[str, object]) -> dict[str, object]:
    """What of another client's settings an admin client working beside it takes: the
    bootstrap, client id, timeouts and security (so it reaches the same listener)."""
    return {k: v for k, v in config.items() if k in ADMIN}


PRODUCER = Registry(
    "Producer settings",
    COMMON
    + [
        Setting("acks", ACKS, "all", "Replicas that must have a record before it is acknowledged."),
        Setting("linger.ms", _MS, 5, "How long a batch waits for more records."),
        Setting("batch.size", _BYTES, 16384, "Bytes of one partition's batch."),
        Setting(
            "compression.type",
            choice(*compression.CODEC_NAMES.values(), case_sensitive=False),
            "none",
            "Codec of produced batches.",
        ),
        Setting(
            "enable.idempotence",
            BOOLEAN,
            True,
            "Producer ids and sequence numbers: a retried batch is written once.",
        ),
        Setting("retries", _MS, 2**31 - 1, "Attempts at a batch before it fails."),
        Setting(
            "delivery.timeout.ms",
            integer(1, long=False),
            120000,
            "A record not acknowledged this long after send() fails.",
        ),
        Setting(
            "partitioner",
            choice("murmur2_random", "murmur2", "random", case_sensitive=False),
            "murmur2_random",
            "How a record's partition is chosen (murmur2 of the key, as Kafka's).",
        ),
        Setting("max.request.size", _BYTES, 1048576, "Largest Produce request."),
        Setting(
            "queue.buffering.max.messages",
            integer(1, long=False),
            100000,
            "Records the sync Producer holds unanswered before produce() raises BufferError.",
        ),
        Setting(
            "transactional.id",
            TEXT,
            None,
            "Makes the producer transactional (client/transactions.py); implies idempotence.",
        ),
        Setting(
            "transaction.timeout.ms",
            integer(1, long=False),
            60000,
            "The coordinator aborts a transaction open longer than this.",
        ),
    ],
)

CONSUMER = Registry(
    "Consumer settings",
    COMMON
    + [
        API_TIMEOUT,
        Setting(
            "auto.offset.reset",
            choice(*(p.value for p in ResetPolicy), case_sensitive=False),
            "latest",
            "Where to start without a committed offset, and what to do on a truncation (KIP-320).",
        ),
        Setting("fetch.min.bytes", _BYTES, 1, "Bytes a fetch waits for."),
        Setting("fetch.max.bytes", _BYTES, 52428800, "Bytes of one fetch response."),
        Setting("max.partition.fetch.bytes", _BYTES, 1048576, "Bytes per partition of a fetch."),
        Setting("fetch.max.wait.ms", _MS, 500, "Longest wait of a fetch."),
        Setting("check.crcs", BOOLEAN, True, "Check every fetched batch's CRC."),
        Setting(
            "client.rack",
            TEXT,
            "",
            "The consumer's rack: a leader with a rack-aware replica.selector.class may send "
            "its fetches to an in-sync replica in it (KIP-392).",
        ),
        Setting(
            "isolation.level",
            choice("read_uncommitted", "read_committed", case_sensitive=False),
            "read_uncommitted",
            "read_committed hands out only committed transactions' records.",
        ),
        Setting("group.id", TEXT, None, "The consumer group (client/group.py); none: assign()."),
        Setting(
            "partition.assignment.strategy",
            items("range", "roundrobin"),
            "range",
            "Assignors in order of preference.",
        ),
        Setting("session.timeout.ms", integer(1, long=False), 45000, "Group session."),
        Setting("heartbeat.interval.ms", integer(1, long=False), 3000, "Between heartbeats."),
        Setting(
            "max.poll.interval.ms",
            integer(1, long=False),
            300000,
            "A member that does not poll this long leaves the group.",
        ),
        Setting("enable.auto.commit", BOOLEAN, True, "Commit positions in the background."),
        Setting("auto.commit.interval.ms", _MS, 5000, "Between automatic commits."),
    ],
)


def parse_config(raw: Mapping[str, object], settings: Registry) -> dict[str, Any]:
    """Every setting parsed (defaults filled in); unknown names are refused."""
    return dict(settings.parse(raw))


def producer_config(raw: Mapping[str, object]) -> dict[str, Any]:
    """Producer settings, with Kafka's cross-checks for idempotence and transactions."""
    explicit = "enable.idempotence" in raw
    conf = parse_config(raw, PRODUCER)
    if conf["transactional.id"] is not None:
        if not conf["transactional.id"]:
            raise ConfigError("transactional.id", "must not be empty")
        if explicit and not conf["enable.idempotence"]:
            raise ConfigError("enable.idempotence", "must be true when transactional.id is set")
        if conf["acks"] != -1:
            raise ConfigError("acks", "must be all when transactional.id is set")
        conf["enable.idempotence"] = True
    if conf["enable.idempotence"] and conf["acks"] != -1:
        if explicit:
            raise ConfigError("acks", "must be all when enable.idempotence is true")
        # Like the Java client: the default idempotence yields to an explicit acks.
        conf["enable.idempotence"] = False
    if conf["enable.idempotence"] and conf["retries"] == 0:
        raise ConfigError("retries", "must be above 0 when enable.idempotence is true")
    conf["compression.codec"] = {v: k for k, v in compression.CODEC_NAMES.items()}[
        conf["compression.type"]
    ]
    return conf


def consumer_config(raw: Mapping[str, object]) -> dict[str, Any]:
    return parse_config(raw, CONSUMER)
