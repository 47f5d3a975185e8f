"""Transaction markers: Kafka's control batches (EndTransactionMarker).

A marker is a batch with the transactional and control attributes, the producer's id
and epoch, base sequence -1 and one record: key = int16 version 0 + int16 type
(0 abort, 1 commit), value = int16 version 0 + int32 coordinator epoch. Markers are
never compressed.
"""

from __future__ import annotations

import enum
import struct

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import build_batch, iter_records

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_VERSION = 0


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def build_marker_batch(
    producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool, timestamp_ms: int
) -> bytearray:
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    key = _KEY.pack(CONTROL_VERSION, kind)
    value = _VALUE.pack(CONTROL_VERSION, coordinator_epoch)
    return bytearray(
        build_batch(
            [(key, value, [], timestamp_ms)],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            is_transactional=True,
            is_control=True,
        )
    )


def read_marker(batch: bytes | bytearray | memoryview) -> tuple[bool, int]:
    """(commit?, coordinator epoch) of a control batch (header included)."""
    records = list(iter_records(batch, check_crc=False))
    if len(records) != 1 or records[0].key is None or len(records[0].key) < _KEY.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "control batch without a marker record")
    _, kind = _KEY.unpack_from(records[0].key)
    if kind not in (ControlType.ABORT, ControlType.COMMIT):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"unknown control record type {kind}")
    value = records[0].value or b""
    coordinator_epoch = _VALUE.unpack_from(value)[1] if len(value) >= _VALUE.size else -1
    return kind == ControlType.COMMIT, coordinator_epoch
