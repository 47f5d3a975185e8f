"""Client settings by Kafka's property names, checked once at construction so that a
mistake is reported where it was made, naming the setting (as confluent-kafka does)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from epochlog.client.errors import ConfigError
from epochlog.client.positions import ResetPolicy
from epochlog.protocol import compression

Parser = Callable[[str, object], Any]


def _int(minimum: int, maximum: int = 2**31 - 1) -> Parser:
    def parse(name: str, raw: object) -> int:
        if isinstance(raw, bool):
            raise ConfigError(name, f"expected an integer, got {raw!r}")
        try:
            value = int(raw)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise ConfigError(name, f"expected an integer, got {raw!r}") from None
        if not minimum <= value <= maximum:
            raise ConfigError(name, f"{value} is outside {minimum}..{maximum}")
        return value

    return parse


def _bool(name: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in ("true", "1"):
        return True
    if text in ("false", "0"):
        return False
    raise ConfigError(name, f"expected true or false, got {raw!r}")


def _choice(*choices: str) -> Parser:
    def parse(name: str, raw: object) -> str:
        text = str(raw).strip().lower()
        if text not in choices:
            raise ConfigError(name, f"{raw!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _string(name: str, raw: object) -> str:
    if not isinstance(raw, str):
        raise ConfigError(name, f"expected a string, got {raw!r}")
    return raw


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


def _strategies(name: str, raw: object) -> tuple[str, ...]:
    """Assignor names in order of preference (Kafka's comma-separated list)."""
    items = raw.split(",") if isinstance(raw, str) else list(raw)  # type: ignore[call-overload]
    names = tuple(str(i).strip().lower() for i in items if str(i).strip())
    if not names or any(n not in ("range", "roundrobin") for n in names):
        raise ConfigError(name, f"{raw!r}: expected range and/or roundrobin")
    return names


@dataclass(frozen=True)
class Setting:
    parse: Parser
    default: object = None
    required: bool = False


COMMON: dict[str, Setting] = {
    "bootstrap.servers": Setting(parse_bootstrap, required=True),
    "client.id": Setting(_string, "epochlog"),
    "request.timeout.ms": Setting(_int(1), 30000),
    "retry.backoff.ms": Setting(_int(0), 100),
    "retry.backoff.max.ms": Setting(_int(0), 1000),
    "metadata.max.age.ms": Setting(_int(0), 300000),
}

PRODUCER: dict[str, Setting] = {
    **COMMON,
    "acks": Setting(_acks, "all"),
    "linger.ms": Setting(_int(0), 5),
    "batch.size": Setting(_int(1), 16384),
    "compression.type": Setting(_choice(*compression.CODEC_NAMES.values()), "none"),
    "enable.idempotence": Setting(_bool, True),
    "retries": Setting(_int(0), 2**31 - 1),
    "delivery.timeout.ms": Setting(_int(1), 120000),
    "partitioner": Setting(_choice("murmur2_random", "murmur2", "random"), "murmur2_random"),
    "max.request.size": Setting(_int(1), 1048576),
    # Transactions (client/transactions.py): a transactional id implies idempotence.
    "transactional.id": Setting(_string),
    "transaction.timeout.ms": Setting(_int(1), 60000),
}

CONSUMER: dict[str, Setting] = {
    **COMMON,
    "auto.offset.reset": Setting(_choice(*(p.value for p in ResetPolicy)), "latest"),
    "fetch.min.bytes": Setting(_int(1), 1),
    "fetch.max.bytes": Setting(_int(1), 52428800),
    "max.partition.fetch.bytes": Setting(_int(1), 1048576),
    "fetch.max.wait.ms": Setting(_int(0), 500),
    "check.crcs": Setting(_bool, True),
    # Kafka's default; read_committed hands out only committed transactions' records.
    "isolation.level": Setting(_choice("read_uncommitted", "read_committed"), "read_uncommitted"),
    # Consumer groups (client/group.py); used only when group.id is set.
    "group.id": Setting(_string),
    "partition.assignment.strategy": Setting(_strategies, "range"),
    "session.timeout.ms": Setting(_int(1), 45000),
    "heartbeat.interval.ms": Setting(_int(1), 3000),
    "max.poll.interval.ms": Setting(_int(1), 300000),
    "enable.auto.commit": Setting(_bool, True),
    "auto.commit.interval.ms": Setting(_int(0), 5000),
}


def parse_config(raw: Mapping[str, object], settings: Mapping[str, Setting]) -> dict[str, Any]:
    """Every known setting parsed (defaults filled in); unknown names are refused."""
    if not isinstance(raw, Mapping):
        raise ConfigError("config", f"expected a dict of settings, got {type(raw).__name__}")
    for name in raw:
        if name not in settings:
            raise ConfigError(str(name), "unknown setting")
    out: dict[str, Any] = {}
    for name, setting in settings.items():
        if name in raw and raw[name] is not None:
            out[name] = setting.parse(name, raw[name])
        elif setting.required:
            raise ConfigError(name, "required")
        else:
            out[name] = None if setting.default is None else setting.parse(name, setting.default)
    return out


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
