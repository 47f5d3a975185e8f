"""Compiled encoding of a batch's records section from columns, for records without
headers (what producers send most): lengths and bytes of keys and values, timestamp
deltas. Encoded in Python, a record costs about half a microsecond, as much as all the
rest a producer does per record; compiled (numba), a few tens of nanoseconds. Loaded
only by ``records.build_batch`` for batches large enough to repay loading numba.

tests/protocol/test_record_encode.py checks the bytes against the Python encoder's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from epochlog.protocol.column_rows import NS_PER_MS, BinaryColumn, ColumnRows


@njit(cache=True, nogil=True, inline="always")
def _zigzag(value: int) -> np.uint64:
    return np.uint64((value << 1) ^ (value >> 63))


@njit(cache=True, nogil=True, inline="always")
def _varint_size(value: int) -> int:
    v = _zigzag(value)
    size = 1
    while v >= 0x80:
        v >>= np.uint64(7)
        size += 1
    return size


@njit(cache=True, nogil=True, inline="always")
def _put_varint(out: np.ndarray, pos: int, value: int) -> int:
    v = _zigzag(value)
    while v >= 0x80:
        out[pos] = np.uint8((v & np.uint64(0x7F)) | np.uint64(0x80))
        v >>= np.uint64(7)
        pos += 1
    out[pos] = np.uint8(v)
    return pos + 1


@intrinsic
def _copy_bytes(
    typingctx: Any, out: Any, pos: Any, src: Any, at: Any, length: Any
) -> tuple[Any, Callable[..., Any]]:
    """``out[pos:pos + length] = src[at:at + length]`` (uint8 arrays) as LLVM's memcpy.
    numba copies a slice, or a loop, byte by byte: 550 ns for a field of 1,000 bytes,
    where this takes 20 (and 2 for 100 bytes, against 59). An intrinsic, not a ctypes
    call of libc's memcpy, so that the compiled encoder is still cached on disk."""
    signature = types.void(out, pos, src, at, length)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        out_, pos_, src_, at_, length_ = args
        out_data = context.make_array(sig.args[0])(context, builder, out_).data
        src_data = context.make_array(sig.args[2])(context, builder, src_).data
        to, start = builder.gep(out_data, [pos_]), builder.gep(src_data, [at_])
        cgutils.raw_memcpy(builder, to, start, length_, 1)
        return context.get_dummy_value()

    return signature, codegen


@njit(cache=True, nogil=True, inline="always")
def _put_bytes(out: np.ndarray, pos: int, src: np.ndarray, at: int, length: int) -> int:
    """A length-prefixed field (-1: null) copied from ``src`` at ``at``: the position
    in ``out`` after it."""
    pos = _put_varint(out, pos, length)
    if length <= 0:
        return pos
    _copy_bytes(out, pos, src, at, length)
    return pos + length


@njit(cache=True, nogil=True, inline="always")
def _body_size(index: int, delta: int, key_len: int, value_len: int) -> int:
    """A record's length after its own length varint: attributes, deltas, key, value,
    header count. A length of -1 is a null key or value."""
    size = 1 + _varint_size(delta) + _varint_size(index) + _varint_size(key_len)
    size += max(key_len, 0) + _varint_size(value_len) + max(value_len, 0)
    return size + 1


@njit(cache=True, nogil=True)
def _encode(
    keys: np.ndarray,
    key_starts: np.ndarray,
    key_lens: np.ndarray,
    values: np.ndarray,
    value_starts: np.ndarray,
    value_lens: np.ndarray,
    rows: np.ndarray,
    deltas: np.ndarray,
    room: int,
) -> np.ndarray:
    """Records ``rows`` of the key and value columns (row r: ``lens[r]`` bytes at
    ``starts[r]``), the j-th of them at offset delta j and timestamp delta ``deltas[j]``,
    after ``room`` bytes left for the caller."""
    n = rows.shape[0]
    total = room
    for j in range(n):
        r = rows[j]
        body = _body_size(j, deltas[j], key_lens[r], value_lens[r])
        total += _varint_size(body) + body
    out = np.empty(total, np.uint8)
    pos = room
    for j in range(n):
        r = rows[j]
        key_len, value_len = key_lens[r], value_lens[r]
        pos = _put_varint(out, pos, _body_size(j, deltas[j], key_len, value_len))
        out[pos] = 0  # attributes
        pos = _put_varint(out, pos + 1, deltas[j])
        pos = _put_varint(out, pos, j)
        pos = _put_bytes(out, pos, keys, key_starts[r], key_len)
        pos = _put_bytes(out, pos, values, value_starts[r], value_len)
        out[pos] = 0  # no headers
        pos += 1
    return out


def encode_records(
    keys: Sequence[bytes | None] | None,
    values: Sequence[bytes | None],
    timestamps: Sequence[int],
    room: int = 0,
    *,
    in_ns: bool = False,
) -> tuple[np.ndarray, int, int]:
    """The records section (no headers) of keys (None: all null), values and
    timestamps (milliseconds, or nanoseconds if ``in_ns``), record i at offset delta i,
    after ``room`` bytes left free (a batch's header, written there by the caller: no
    copy of the section to put it in front): (the uint8 array, base timestamp, max
    timestamp), in milliseconds."""
    deltas = np.fromiter(timestamps, np.int64, len(timestamps))
    if in_ns:
        deltas //= NS_PER_MS
    base = int(deltas[0])
    deltas -= base
    key_col = None if keys is None else BinaryColumn.of(keys)
    rows = np.arange(len(deltas), dtype=np.int64)
    section = _section(key_col, BinaryColumn.of(values), rows, deltas, room)
    return section, base, base + int(deltas.max())


def encode_rows(records: ColumnRows, room: int = 0) -> tuple[np.ndarray, int, int]:
    """``encode_records`` for rows held as columns (one timestamp, no headers)."""
    deltas = np.zeros(len(records.rows), np.int64)
    section = _section(records.keys, records.values, records.rows, deltas, room)
    return section, records.timestamp, records.timestamp


def _section(
    keys: BinaryColumn | None,
    values: BinaryColumn,
    rows: np.ndarray,
    deltas: np.ndarray,
    room: int,
) -> np.ndarray:
    if keys is None:
        n = len(values)
        keys = BinaryColumn(_NO_BYTES, np.zeros(n, np.int64), np.full(n, -1, np.int64))
    return _encode(
        keys.data,
        keys.starts,
        keys.lens,
        values.data,
        values.starts,
        values.lens,
        rows.astype(np.int64, copy=False),
        deltas,
        room,
    )


_NO_BYTES = np.empty(0, np.uint8)
