"""What a broker checks in every produced batch before storing it, as Kafka's
LogValidator does: every record decoded (compressed ones decompressed, within a bound),
lengths consistent, offset deltas 0..n-1, a key on every record of a compacted topic.

A batch whose header and CRC are right can still hold records no reader can decode;
stored, it stalls every consumer at its offset. Records are walked by the compiled
walker (``record_walk``) once it is loaded, so that the check costs little next to the
append itself; until then by the Python decoder (``WalkerPolicy``). Only when a batch
fails is it walked again by the Python decoder, to word the error and name the first bad
record in the answer's ``record_errors`` (Produce v8+).
"""

from __future__ import annotations

import functools
from types import ModuleType

import numpy as np

from epochlog.protocol import batch as _batch
from epochlog.protocol.batch import BatchHeader, Buffer
from epochlog.protocol.compression import BoundedDecompressor
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import _decode
from epochlog.settings.broker import BROKER


class WalkerPolicy:
    """Whether an append's records go through the compiled walker. Loading it (numba)
    costs about 0.75 s of CPU, so a broker that only ever sees a few records at a time
    checks them in Python. It is loaded for an append of more than ``load_for`` records,
    or once ``load_after`` records were checked one by one (a producer of 1 KiB records
    sends 16 or so a partition, 11 us of Python each append against 1.1 in the walker).
    Loaded, it takes every append, one record too (0.9 against 1.2 us)."""

    def __init__(self, load_for: int = 64, load_after: int = 10_000) -> None:
        self.load_for = load_for
        self.load_after = load_after
        self.loaded = False
        self.checked_one_by_one = 0

    def use_walker(self, count: int) -> bool:
        if not self.loaded:
            if count <= self.load_for and self.checked_one_by_one < self.load_after:
                self.checked_one_by_one += count
                return False
            self.loaded = True
        return True


# For the whole process, as the loaded walker is.
_POLICY = WalkerPolicy()


class RecordErrors(KafkaError):
    """INVALID_RECORD (or INVALID_TIMESTAMP) naming the records at fault: (index in the
    batch, message), Produce v8's record_errors."""

    def __init__(
        self,
        message: str,
        record_errors: list[tuple[int, str]],
        code: ErrorCode = ErrorCode.INVALID_RECORD,
    ) -> None:
        super().__init__(code, message)
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
        plain_records = 0
        for position, header in batches:
            attributes = header.attributes  # the flags read here, not through properties
            if attributes & _batch.CONTROL_BIT:
                continue
            start = position + _batch.HEADER_SIZE
            end = position + _batch.LOG_OVERHEAD + header.batch_length
            codec = attributes & _batch.COMPRESSION_MASK
            if codec:
                view = memoryview(records)[start:end]
                data = self._decompressor.decompress(codec, view)
                try:
                    count = header.records_count
                    _check(data, [(0, len(data), count)], count, require_keys)
                finally:
                    data.release()
                    view.release()
            else:
                plain.append((start, end, header.records_count))
                plain_records += header.records_count
        if plain:
            _check(records, plain, plain_records, require_keys)


@functools.cache
def default_validator() -> RecordValidator:
    """One validator with the default bound, for logs opened outside a LogManager."""
    return RecordValidator(BROKER.default("message.max.decompressed.bytes"))


def _check(
    data: Buffer, sections: list[tuple[int, int, int]], records: int, require_keys: bool
) -> None:
    """The records of each (start, end, count) section of ``data``, ``records`` in all."""
    if not _POLICY.use_walker(records):
        for section in sections:
            _check_one_by_one(data, section, require_keys)
        return
    walker = _walker()
    buf = np.frombuffer(data, dtype=np.uint8)
    for section in sections:
        fault, _ = walker.walk(buf, *section, require_keys)
        if fault != walker.OK:
            _check_one_by_one(data, section, require_keys)
            raise RecordErrors(
                "a record the compiled walker refused", [(0, "refused by the record walker")]
            )


@functools.cache
def _walker() -> ModuleType:
    """``record_walk``, imported (and numba loaded) only once ``WalkerPolicy`` says."""
    from epochlog.protocol import record_walk

    return record_walk


def _check_one_by_one(data: Buffer, section: tuple[int, int, int], require_keys: bool) -> None:
    """The same checks record by record, in Python."""
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
