"""Kafka's record schemas of ``__transaction_state``, so the topic reads the same to
Kafka's own tools.

- TransactionLogKey v0: transactional id.
- TransactionLogValue v0: producer id, producer epoch, timeout, state byte, the
  partitions in the transaction (topic, partition ids), last update and start times.

A null value is a tombstone: the transactional id expired. The KIP-360 "previous"
id and epoch are not stored (Kafka's v0 does not either): after a coordinator moves, a
producer that lost an InitProducerId answer re-initialises as a new holder would.
"""

from __future__ import annotations

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.fields import FieldReader, FieldWriter
from epochlog.txn.metadata import TxnMetadata, TxnState

KEY_VERSION = 0
VALUE_VERSION = 0


def encode_key(transactional_id: str) -> bytes:
    return bytes(FieldWriter().int16(KEY_VERSION).string(transactional_id).buf)


def decode_key(data: bytes) -> str:
    r = FieldReader(data)
    version = r.int16()
    if version != KEY_VERSION:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown transaction key version {version}")
    return r.string()


def encode_value(meta: TxnMetadata) -> bytes:
    w = FieldWriter().int16(VALUE_VERSION).int64(meta.producer_id).int16(meta.producer_epoch)
    w.int32(meta.timeout_ms).int8(meta.state.byte)
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    w.int32(len(by_topic))
    for topic, partitions in by_topic.items():
        w.string(topic).int32(len(partitions))
        for partition in partitions:
            w.int32(partition)
    return bytes(w.int64(meta.last_update_ms).int64(meta.start_ms).buf)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    r = FieldReader(data)
    version = r.int16()
    if version != VALUE_VERSION:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown transaction value version {version}")
    producer_id, epoch, timeout_ms = r.int64(), r.int16(), r.int32()
    try:
        state = TxnState.from_byte(r.int8())
    except ValueError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, str(exc)) from None
    partitions = set()
    for _ in range(max(r.int32(), 0)):
        topic = r.string()
        for _ in range(max(r.int32(), 0)):
            partitions.add((topic, r.int32()))
    last_update_ms, start_ms = r.int64(), r.int64()
    return TxnMetadata(
        transactional_id,
        producer_id,
        epoch,
        timeout_ms,
        state,
        frozenset(partitions),
        start_ms,
        last_update_ms,
    )
