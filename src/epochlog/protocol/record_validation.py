"""What a broker checks in every produced batch before storing it, as Kafka's
LogValidator does: every record decoded (compressed ones decompressed, within a bound),
lengths consistent, offset deltas 0..n-1, a key on every record of a compacted topic.

A batch whose header and CRC are right can still hold records no reader can decode;
stored, it stalls every consumer at its offset. The check is vectorised
(``record_columns``) so that it costs little next to the append itself; only when it
fails are the records walked one by one, to name the first bad one in the answer's
``record_errors`` (Produce v8+).
"""

from __future__ import annotations

import functools

import numpy as np

from epochlog.protocol import batch as _batch
from epochlog.protocol.batch import BatchHeader
from epochlog.protocol.compression import BoundedDecompressor
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.record_columns import NO_APPEND_TIME, decode_records, record_starts
from epochlog.protocol.records import _decode
from epochlog.settings.broker import BROKER

Buffer = bytes | bytearray | memoryview
# Up to this many records, walking them one by one costs less than numpy's fixed cost.
_SCALAR_UP_TO = 256
# Smaller than any offset delta, so that decode_records keeps every record.
_KEEP_ALL = -(2**62)


class RecordErrors(KafkaError):
    """INVALID_RECORD naming the records at fault: (index in the batch, message)."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(ErrorCode.INVALID_RECORD, message)
        self.record_errors = record_errors


class RecordValidator:
    """Validates produced record sets; holds the one decompression buffer a broker
    needs (``message.max.decompressed.bytes``)."""

    def __init__(self, max_decompressed_bytes: int) -> None:
        self._decompressor = BoundedDecompressor(max_decompressed_bytes)

    def validate(
        self,
        records: Buffer,
        batches: list[tuple[int, BatchHeader]],
        *,
        require_keys: bool = False,
    ) -> None:
        """Raise KafkaError (INVALID_RECORD, RecordErrors, CORRUPT_MESSAGE,
        UNSUPPORTED_COMPRESSION_TYPE or MESSAGE_TOO_LARGE) unless every record of every
        (non-control) batch is well formed. ``batches`` come from ``iter_batches``,
        whose CRC and header checks they passed."""
        plain: list[tuple[int, int, int]] = []
        for position, header in batches:
            if header.is_control:
                continue
            start = position + _batch.HEADER_SIZE
            end = position + header.size
            codec = header.compression
            if codec:
                view = memoryview(records)[start:end]
                data = self._decompressor.decompress(codec, view)
                try:
                    _check(data, [(0, len(data), header.records_count)], require_keys)
                finally:
                    data.release()
                    view.release()
            else:
                plain.append((start, end, header.records_count))
        if plain:
            _check(records, plain, require_keys)


@functools.cache
def default_validator() -> RecordValidator:
    """One validator with the default bound, for logs opened outside a LogManager."""
    return RecordValidator(BROKER.default("message.max.decompressed.bytes"))


def _check(data: Buffer, sections: list[tuple[int, int, int]], require_keys: bool) -> None:
    if sum(count for _, _, count in sections) <= _SCALAR_UP_TO:
        for section in sections:
            _check_one_by_one(data, section, require_keys)
        return
    bounds = np.array(sections, dtype=np.int64).reshape(-1, 3)
    arr = np.frombuffer(data, dtype=np.uint8)
    try:
        starts = record_starts(data, arr, bounds)  # type: ignore[arg-type]
        meta = np.zeros((len(sections), 5), dtype=np.int64)
        meta[:, 1] = NO_APPEND_TIME
        meta[:, 4] = _KEEP_ALL
        fields = decode_records(data, arr, starts, bounds, meta)  # type: ignore[arg-type]
    except KafkaError:
        _locate(data, sections)
        raise
    counts = bounds[:, 2]
    first = np.repeat(np.cumsum(counts) - counts, counts)
    index = np.arange(int(counts.sum()), dtype=np.int64) - first
    wrong = np.flatnonzero(fields.offsets != index)
    if wrong.size:
        at = int(wrong[0])
        expected, found = int(index[at]), int(fields.offsets[at])
        message = f"offset delta {found}, expected {expected}"
        raise RecordErrors(f"record {expected}: {message}", [(expected, message)])
    if require_keys:
        keyless = np.flatnonzero(fields.key_len < 0)
        if keyless.size:
            message = "a compacted topic requires a key on every record"
            raise RecordErrors(
                f"{keyless.size} records without a key; {message}",
                [(int(index[i]), message) for i in keyless.tolist()],
            )


def _check_one_by_one(data: Buffer, section: tuple[int, int, int], require_keys: bool) -> None:
    """The same checks record by record: cheaper than numpy's fixed cost for a few."""
    start, end, count = section
    if isinstance(data, memoryview):  # decompressed: the decoder wants bytes (header keys)
        data, start, end = data[start:end].tobytes(), 0, end - start
    keyless: list[tuple[int, str]] = []
    done = 0
    try:
        for rec in _decode(data, start, end, count, 0, 0, None):  # type: ignore[arg-type]
            if rec.offset != done:
                message = f"offset delta {rec.offset}, expected {done}"
                raise RecordErrors(f"record {done}: {message}", [(done, message)])
            if require_keys and rec.key is None:
                keyless.append((done, "a compacted topic requires a key on every record"))
            done += 1
    except RecordErrors:
        raise
    except KafkaError as exc:
        if done < count:
            raise RecordErrors(f"record {done}: {exc.message}", [(done, exc.message)]) from None
        raise
    if keyless:
        raise RecordErrors(
            f"{len(keyless)} records without a key; a compacted topic requires a key on "
            "every record",
            keyless,
        )


def _locate(data: Buffer, sections: list[tuple[int, int, int]]) -> None:
    """Walk the records one by one to name the first that does not decode."""
    raw = bytes(data)
    for start, end, count in sections:
        done = 0
        try:
            for _ in _decode(raw, start, end, count, 0, 0, None):
                done += 1
        except KafkaError as exc:
            if done < count:
                raise RecordErrors(f"record {done}: {exc.message}", [(done, exc.message)]) from None
            raise
