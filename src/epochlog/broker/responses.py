"""What handlers answer besides plain response messages."""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass, field
from typing import Any

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.fetch_response import Part, part_size

log = logging.getLogger("epochlog.server")
_I32 = struct.Struct(">i")


@dataclass
class RawResponse:
    """A body encoded by its handler: bytes, and file ranges (``file``, ``position``,
    ``size``) that are sent without copying; and the error codes it carries (the
    request metrics count them)."""

    parts: list[Part]
    error_codes: list[int] = field(default_factory=list)
    # Where the body's throttle_time_ms is, (part, byte offset), for a handler that
    # encodes its answer before the request's throttle is known; None: left as encoded.
    throttle_field: tuple[int, int] | None = None

    @property
    def size(self) -> int:
        return sum(part_size(p) for p in self.parts)

    def set_throttle(self, throttle_ms: int) -> None:
        if self.throttle_field is None:
            return
        index, at = self.throttle_field
        part = bytearray(self.parts[index])
        part[at : at + 4] = _I32.pack(throttle_ms)
        self.parts[index] = part


def error_code(exc: BaseException) -> ErrorCode:
    """The wire error for an exception met while serving one partition or resource."""
    if isinstance(exc, KafkaError):
        return exc.code
    if isinstance(exc, OSError):  # a log's disk failing, as Kafka answers it
        log.error("storage error: %s", exc)
        return ErrorCode.KAFKA_STORAGE_ERROR
    log.exception("internal error", exc_info=exc)
    return ErrorCode.UNKNOWN_SERVER_ERROR


def fenced_error(code: ErrorCode, version: int, fenced_since: int) -> ErrorCode:
    """PRODUCER_FENCED exists for clients from KIP-588's request versions; older ones
    are told INVALID_PRODUCER_EPOCH, which they treat as fatal the same way."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def check_partitions_per_request(broker: Any, total: int) -> None:
    """Kafka's answer to a CreateTopics or CreatePartitions asking for more partitions
    in total than ``controller.max.records.per.batch``: all of it is refused, before any
    work, so no single request can keep a broker busy long enough to lose its session."""
    limit = broker.config["controller.max.records.per.batch"]
    if total > limit:
        raise KafkaError(
            ErrorCode.POLICY_VIOLATION,
            f"Excessively large number of partitions per request ({total} > {limit}).",
        )


def endpoints_on_listener(broker: Any, listener: Any) -> list[Any]:
    """Every registered broker (and always the answering one: while its registration
    lapses, a paused or restarting process, a client that trusts only the last answer
    must not be left knowing no live broker), each as reached on ``listener``: Kafka's
    rule, a client on the SSL listener is sent to the other brokers' SSL listeners."""
    endpoints = dict(broker.metadata_cache.brokers)
    if broker.endpoint is not None:
        endpoints.setdefault(broker.broker_id, broker.endpoint)
    return [e for e in (b.on(listener) for b in endpoints.values()) if e]
