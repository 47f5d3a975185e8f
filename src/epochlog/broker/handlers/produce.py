"""Produce: append record batches as the partition leader and acknowledge them; a
transaction's first batch at a partition only once its coordinator vouched for it
(KIP-890, ``txn/verification.py``)."""

from __future__ import annotations

import logging
from typing import Any

from epochlog.broker.handlers.context import HandlerContext
from epochlog.broker.responses import RawResponse, error_code
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.batch import first_is_transactional
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.produce_response import (
    PartitionAnswer,
    encode_produce_response,
    throttle_field_end,
)
from epochlog.protocol.record_validation import RecordErrors
from epochlog.replication.replica_manager import ACKS_ALL, AckWait
from epochlog.security.api_rules import allowed
from epochlog.security.session import Session
from epochlog.storage.producer_state import NO_GUARD, AppendOrigin, VerificationGuard
from epochlog.txn.metadata import TopicPartition

API = api(ApiKey.PRODUCE, 3, 9)

log = logging.getLogger("epochlog.produce")

# Errors that mean the producer sent bad data: worth a log line naming the partition.
_REFUSED_DATA = (
    ErrorCode.CORRUPT_MESSAGE,
    ErrorCode.INVALID_RECORD,
    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
    ErrorCode.MESSAGE_TOO_LARGE,
)


def _partition_response(
    index: int,
    code: ErrorCode,
    message: str | None = None,
    record_errors: list[tuple[int, str]] | None = None,
) -> PartitionAnswer:
    return PartitionAnswer(
        index, code, record_errors=list(record_errors or ()), error_message=message
    )


def _produce_one(
    broker: HandlerContext,
    topic: str,
    index: int,
    records: bytes | memoryview | None,
    acks: int,
    guard: VerificationGuard | KafkaError | None,
) -> tuple[PartitionAnswer, AckWait | None]:
    """Append one partition's records (refused if their verification was); for
    acks=all also what to wait for."""
    try:
        if isinstance(guard, KafkaError):
            raise guard
        partition = broker.replica_manager.partition(topic, index)
        partition.check_leader(-1)
        if not records:
            raise KafkaError(ErrorCode.INVALID_RECORD, "empty record set")
        result = broker.replica_manager.append(
            partition, _writable(records), acks, AppendOrigin.CLIENT, guard
        )
    except Exception as exc:
        code = error_code(exc)
        if code in _REFUSED_DATA:
            log.warning("refused produce to %s-%d: %s", topic, index, exc)
        message = str(exc) if isinstance(exc, KafkaError) else None
        record_errors = exc.record_errors if isinstance(exc, RecordErrors) else None
        return _partition_response(index, code, message, record_errors), None
    answer = PartitionAnswer(
        index, ErrorCode.NONE, result.base_offset, result.log_append_time, result.log_start_offset
    )
    wait = None
    if acks == ACKS_ALL:
        # Wait for the HW to pass the last offset appended, in this leader's epoch: a
        # deposed leader's HW cannot move, so it never acknowledges.
        wait = AckWait(partition, result.last_offset + 1, partition.leader_epoch)
    return answer, wait


def _writable(records: bytes | memoryview) -> bytearray | memoryview:
    """The records to append, which the log patches (offsets, leader epoch) in place: a
    view of a large request's frame as it is (the frame was read into a buffer of its
    own), a copy of a small one (a slice of the connection's read-ahead)."""
    if isinstance(records, memoryview) and not records.readonly:
        return records
    return bytearray(records)


async def _guards(
    broker: HandlerContext,
    transactional_id: str | None,
    appending: dict[TopicPartition, bytes | memoryview | None],
    timeout_s: float,
) -> tuple[dict[TopicPartition, VerificationGuard | KafkaError], VerificationGuard | None]:
    """KIP-890: each transactional partition's guard (or refusal) from its coordinator,
    and what the others append with (NO_GUARD: only an open transaction continues;
    None with verification off)."""
    verifier = broker.txn_verifier
    if not verifier.enabled:
        return {}, None
    if transactional_id is None or not appending:
        return {}, NO_GUARD
    partition_of = broker.replica_manager.partition
    return await verifier.guards(transactional_id, appending, partition_of, timeout_s), NO_GUARD


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    acks = request.acks
    clock = broker.seams.clock
    timeout_s = max(0, request.timeout_ms) / 1000
    deadline = clock.monotonic() + timeout_s
    # Kafka's rule: transactional records need a transactional id the principal may
    # write to; else nothing of the request is appended. The flag is each partition's
    # first batch's (a request from a transactional producer is all transactional).
    # (The id's check first: a permitted transactional producer's request is not scanned.)
    txn_refused = (
        request.transactional_id is None
        or not allowed(
            broker.authorizer, session, ApiKey.PRODUCE, "transactional_id", request.transactional_id
        )
    ) and any(
        first_is_transactional(p.records or b"")
        for t in request.topic_data or []
        for p in t.partition_data or []
    )
    # Each partition's answer if it is refused before any append, else None.
    planned: list[tuple[str, list[tuple[Any, PartitionAnswer | None]]]] = []
    appending: dict[TopicPartition, bytes | memoryview | None] = {}
    for topic_data in request.topic_data or []:
        topic_refused = not allowed(
            broker.authorizer, session, ApiKey.PRODUCE, "topic", topic_data.name
        )
        parts: list[tuple[Any, PartitionAnswer | None]] = []
        for p in topic_data.partition_data or []:
            if txn_refused:
                code = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            elif topic_refused:
                code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif acks not in (0, 1, ACKS_ALL):
                code = ErrorCode.INVALID_REQUIRED_ACKS
            else:
                parts.append((p, None))
                appending[(topic_data.name, p.index)] = p.records
                continue
            parts.append((p, _partition_response(p.index, code)))
        planned.append((topic_data.name, parts))
    guards, unverified = await _guards(broker, request.transactional_id, appending, timeout_s)
    responses: list[tuple[str, list[PartitionAnswer]]] = []
    waits: list[tuple[PartitionAnswer, AckWait]] = []
    for topic, parts in planned:
        answers: list[PartitionAnswer] = []
        for p, answer in parts:
            if answer is None:
                guard = guards.get((topic, p.index), unverified)
                answer, wait = _produce_one(broker, topic, p.index, p.records, acks, guard)
                if wait is not None:
                    waits.append((answer, wait))
            answers.append(answer)
        responses.append((topic, answers))
    if waits:
        codes = await broker.replica_manager.wait_for_acks(
            [w for _, w in waits], max(0.0, deadline - clock.monotonic())
        )
        for (answer, wait), code in zip(waits, codes, strict=True):
            if code != ErrorCode.NONE:
                answer.error_code = code
                answer.error_message = f"{wait.partition}: {code.name}"
    if acks == 0:
        return None
    body = encode_produce_response(version, responses)
    answered = [p.error_code for _, parts in responses for p in parts]  # for the metrics
    return RawResponse([body], answered, (0, len(body) - 4 - throttle_field_end(version)))
