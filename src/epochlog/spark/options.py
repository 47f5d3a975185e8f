"""The source's options, named as Spark's Kafka source names them, checked once on the
driver so a mistake is reported when the query is defined, naming the option.

``onTruncation`` replaces Spark's ``failOnDataLoss``: ``fail`` (default), ``earliest``,
``latest`` or ``closest`` (the client's KIP-320 reset policies)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from epochlog.client.config import consumer_config
from epochlog.client.errors import ConfigError
from epochlog.client.positions import ResetPolicy

EARLIEST = -2
LATEST = -1
# onTruncation: the consumer's reset policies (client/positions.ResetPolicy), with
# Spark's "fail" (failOnDataLoss) for Kafka's "none".
POLICIES = ("fail", *(p.value for p in ResetPolicy if p is not ResetPolicy.NONE))
# Options of the source itself; any other ``kafka.*`` option goes to the client.
CLIENT_PREFIX = "kafka."
# Large fetches: a task reads one range as fast as it can (measured: 3x the client's
# 1 MiB defaults). ``kafka.*`` options override them.
READ_DEFAULTS = {
    "max.partition.fetch.bytes": 16 << 20,
    "fetch.max.bytes": 64 << 20,
    # A task reads a range planned below the high watermark: its records are there. A
    # long poll would only hold up the task's end: the consumer sends its next fetch
    # as it hands out the last rows, that one waits at the log end, and the close's
    # fetch-session request queues behind it (500 ms a task with the client's default).
    "fetch.max.wait.ms": 10,
    # Spark's Kafka source reads read_uncommitted unless told otherwise; this source
    # reads only committed transactions unless told otherwise (kafka.isolation.level),
    # so that what the exactly-once sink aborted is never read.
    "isolation.level": "read_committed",
}


class SourceOptionError(ValueError):
    """An option the source cannot use, named as the user wrote it."""

    def __init__(self, name: str, problem: str) -> None:
        super().__init__(f"epochlog source option {name}: {problem}")
        self.name = name


@dataclass(frozen=True)
class StartSpec:
    """Where partitions start (or, for a batch read, end): ``earliest``/``latest`` for
    all, or per partition an offset (-2 earliest, -1 latest) with an optional epoch, or
    per partition a timestamp."""

    default: int = LATEST
    offsets: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)
    timestamps: dict[tuple[str, int], int] = field(default_factory=dict)


@dataclass(frozen=True)
class SourceOptions:
    bootstrap_servers: str
    subscribe: tuple[str, ...] = ()
    subscribe_pattern: str | None = None
    assign: dict[str, tuple[int, ...]] = field(default_factory=dict)
    starting: StartSpec = field(default_factory=StartSpec)
    ending: StartSpec = field(default_factory=lambda: StartSpec(LATEST))
    max_offsets_per_trigger: int | None = None
    include_headers: bool = False
    on_truncation: str = "fail"
    poll_timeout_ms: int = 120000
    min_partitions: int | None = None
    client_config: dict[str, str] = field(default_factory=dict)

    def consumer_config(self, **overrides: Any) -> dict[str, Any]:
        """Settings for an epochlog client Consumer built from these options."""
        return {
            **READ_DEFAULTS,
            **self.client_config,
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": "epochlog-spark",
            **overrides,
        }

    @property
    def read_committed(self) -> bool:
        return self.consumer_config()["isolation.level"] == "read_committed"

    def wants(self, topic: str) -> bool:
        """Is ``topic`` read by this source (pattern subscriptions)?"""
        if self.assign:
            return topic in self.assign
        if self.subscribe:
            return topic in self.subscribe
        assert self.subscribe_pattern is not None
        return re.fullmatch(self.subscribe_pattern, topic) is not None


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Spark hands options in a case-insensitive dict; a plain dict is accepted too."""
    if name in options:
        return options[name]
    lowered = {str(k).lower(): v for k, v in options.items()}
    return lowered.get(name.lower())


def _json(name: str, raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise SourceOptionError(name, f"not valid JSON ({exc})") from None


def _int(name: str, raw: object) -> int:
    try:
        return int(str(raw))
    except ValueError:
        raise SourceOptionError(name, f"expected an integer, got {raw!r}") from None


def _bool(name: str, raw: str) -> bool:
    text = raw.strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise SourceOptionError(name, f"expected true or false, got {raw!r}")


def parse_offsets_spec(name: str, raw: str | None, default: int) -> StartSpec:
    """``earliest`` | ``latest`` | ``{"topic": {"0": 5, "1": {"offset": 7, "epoch": 2}}}``."""
    if raw is None:
        return StartSpec(default)
    text = raw.strip()
    if text.lower() == "earliest":
        return StartSpec(EARLIEST)
    if text.lower() == "latest":
        return StartSpec(LATEST)
    spec = _json(name, text)
    if not isinstance(spec, dict):
        raise SourceOptionError(name, "expected earliest, latest or a JSON object")
    offsets: dict[tuple[str, int], tuple[int, int]] = {}
    for topic, parts in spec.items():
        if not isinstance(parts, dict):
            raise SourceOptionError(name, f"topic {topic}: expected an object of partitions")
        for part, value in parts.items():
            if isinstance(value, dict):
                if "offset" not in value:
                    raise SourceOptionError(name, f"{topic}-{part}: missing offset")
                offset = _int(name, value["offset"])
                epoch = _int(name, value.get("epoch", -1))
            else:
                offset, epoch = _int(name, value), -1
            if offset < EARLIEST:
                raise SourceOptionError(name, f"{topic}-{part}: offset {offset} is below -2")
            offsets[(topic, _int(name, part))] = (offset, epoch)
    return StartSpec(default, offsets=offsets)


def parse_timestamps_spec(name: str, raw: str) -> dict[tuple[str, int], int]:
    """``{"topic": {"0": 1700000000000}}``: per partition, the first offset at or after it."""
    spec = _json(name, raw)
    if not isinstance(spec, dict):
        raise SourceOptionError(name, "expected a JSON object")
    out = {}
    for topic, parts in spec.items():
        if not isinstance(parts, dict):
            raise SourceOptionError(name, f"topic {topic}: expected an object of partitions")
        for part, ts in parts.items():
            out[(topic, _int(name, part))] = _int(name, ts)
    return out


def _assign(raw: str) -> dict[str, tuple[int, ...]]:
    spec = _json("assign", raw)
    if not isinstance(spec, dict) or not all(isinstance(v, list) for v in spec.values()):
        raise SourceOptionError("assign", 'expected {"topic": [0, 1]}')
    return {t: tuple(sorted(_int("assign", p) for p in parts)) for t, parts in spec.items()}


def _spec(options: Mapping[str, str], offsets: str, by_time: str, default: int) -> StartSpec:
    spec = parse_offsets_spec(offsets, _get(options, offsets), default)
    raw_times = _get(options, by_time)
    if raw_times is None:
        return spec
    if _get(options, offsets) is not None:
        raise SourceOptionError(by_time, f"give either {offsets} or {by_time}, not both")
    return StartSpec(default, timestamps=parse_timestamps_spec(by_time, raw_times))


def parse_options(options: Mapping[str, str], streaming: bool) -> SourceOptions:
    """All options checked; raises SourceOptionError naming the first wrong one."""
    servers = _get(options, "kafka.bootstrap.servers") or _get(options, "bootstrap.servers")
    if not servers:
        raise SourceOptionError("bootstrap.servers", "required (or kafka.bootstrap.servers)")
    subscribe = _get(options, "subscribe")
    pattern = _get(options, "subscribePattern")
    assign = _get(options, "assign")
    given = [n for n, v in (("subscribe", subscribe), ("subscribePattern", pattern)) if v]
    given += ["assign"] if assign else []
    if len(given) != 1:
        raise SourceOptionError(
            "subscribe", "exactly one of subscribe, subscribePattern, assign is required"
        )
    if pattern is not None:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise SourceOptionError("subscribePattern", str(exc)) from None
    policy = (_get(options, "onTruncation") or "fail").strip().lower()
    if policy not in POLICIES:
        raise SourceOptionError("onTruncation", f"{policy!r} is not one of {', '.join(POLICIES)}")
    max_per_trigger = _get(options, "maxOffsetsPerTrigger")
    limit = None if max_per_trigger is None else _int("maxOffsetsPerTrigger", max_per_trigger)
    if limit is not None and limit < 1:
        raise SourceOptionError("maxOffsetsPerTrigger", "must be at least 1")
    if not streaming and limit is not None:
        raise SourceOptionError("maxOffsetsPerTrigger", "only for streaming queries")
    ending = _spec(options, "endingOffsets", "endingOffsetsByTimestamp", LATEST)
    if streaming and (ending.offsets or ending.timestamps or _get(options, "endingOffsets")):
        raise SourceOptionError("endingOffsets", "only for batch queries")
    if ending.default == EARLIEST and not ending.offsets:
        raise SourceOptionError("endingOffsets", "earliest is not allowed")
    client = {}
    for key, value in options.items():
        k = str(key)
        if k.lower().startswith(CLIENT_PREFIX) and k.lower() != "kafka.bootstrap.servers":
            client[k[len(CLIENT_PREFIX) :].lower()] = value
    if "group.id" in client:
        raise SourceOptionError("kafka.group.id", "the source assigns partitions itself")
    poll_timeout = _get(options, "kafkaConsumer.pollTimeoutMs")
    min_partitions = _get(options, "minPartitions")
    if min_partitions is not None and _int("minPartitions", min_partitions) < 1:
        raise SourceOptionError("minPartitions", "must be at least 1")
    parsed = SourceOptions(
        bootstrap_servers=servers,
        subscribe=tuple(t.strip() for t in subscribe.split(",") if t.strip()) if subscribe else (),
        subscribe_pattern=pattern,
        assign=_assign(assign) if assign else {},
        starting=_spec(
            options,
            "startingOffsets",
            "startingOffsetsByTimestamp",
            LATEST if streaming else EARLIEST,
        ),
        ending=ending,
        max_offsets_per_trigger=limit,
        include_headers=_bool("includeHeaders", _get(options, "includeHeaders") or "false"),
        on_truncation=policy,
        poll_timeout_ms=120000
        if poll_timeout is None
        else _int("kafkaConsumer.pollTimeoutMs", poll_timeout),
        min_partitions=None if min_partitions is None else int(min_partitions),
        client_config=client,
    )
    try:
        consumer_config(parsed.consumer_config())
    except ConfigError as exc:
        raise SourceOptionError(f"kafka.{exc.setting}", str(exc)) from None
    return parsed
