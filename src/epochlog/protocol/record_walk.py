"""Compiled walks over the records of a batch, one grammar for both.

``walk``: does every record decode, do the offset deltas run 0..n-1, does each record
carry a key where one is required. The broker checks every record it is asked to store
(``record_validation``). Walked in Python that costs about 0.4 us a record, a third of a
broker's time under a steady produce load; compiled (numba), about 16 ns a record of
100 bytes. It answers only "good" or "the first bad record and what kind of fault";
the Python decoder (``records._decode``) then walks that batch again to word the error.

``columns``: where every field of every record of a fetch answer is, for the client's
columnar decode (``record_columns``): one pass, with the GIL released.

Both run ``_records``, the grammar. Both must accept exactly the bytes the Python
decoder accepts:
tests/protocol/test_record_walk.py checks that.
"""

from __future__ import annotations

import numpy as np
from numba import njit

OK = 0
BAD_RECORD = 1  # a length, varint or field that does not decode
WRONG_OFFSET_DELTA = 2
MISSING_KEY = 3
TRAILING_BYTES = 4  # bytes left after the declared count of records

_VARINT_BYTES = 5
_VARLONG_BYTES = 10


@njit(cache=True, nogil=True, inline="always")
def _varint(buf: np.ndarray, pos: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint at ``pos`` read no further than ``limit`` -> (value, next
    position); next position -1 when it runs past ``limit`` or past ``max_bytes``.
    Bits past the 64th of a ten-byte varlong are dropped, as Java's decoder does."""
    if pos < limit and buf[pos] < 0x80:  # most fields of most records: one byte
        one = np.int64(buf[pos])
        return (one >> 1) ^ -(one & 1), pos + 1
    raw = np.uint64(0)
    shift = np.uint64(0)
    for _ in range(max_bytes):
        if pos >= limit:
            return 0, -1
        b = np.uint64(buf[pos])
        pos += 1
        raw |= (b & np.uint64(0x7F)) << shift
        if b < np.uint64(0x80):
            return np.int64(raw >> np.uint64(1)) ^ -np.int64(raw & np.uint64(1)), pos
        shift += np.uint64(7)
    return 0, -1


@njit(cache=True, nogil=True)
def _utf8_end(buf: np.ndarray, pos: int, end: int) -> bool:
    """Is ``buf[pos:end]`` strict UTF-8, as Python's ``bytes.decode()`` requires (no
    overlong forms, no surrogates, nothing past U+10FFFF)?"""
    while pos < end:
        b = buf[pos]
        if b < 0x80:
            pos += 1
            continue
        if 0xC2 <= b <= 0xDF:
            need, low, high = 1, 0x80, 0xBF
        elif b == 0xE0:
            need, low, high = 2, 0xA0, 0xBF
        elif b == 0xED:
            need, low, high = 2, 0x80, 0x9F
        elif 0xE1 <= b <= 0xEF:
            need, low, high = 2, 0x80, 0xBF
        elif b == 0xF0:
            need, low, high = 3, 0x90, 0xBF
        elif b == 0xF4:
            need, low, high = 3, 0x80, 0x8F
        elif 0xF1 <= b <= 0xF3:
            need, low, high = 3, 0x80, 0xBF
        else:
            return False
        if pos + need >= end:
            return False
        second = buf[pos + 1]
        if second < low or second > high:
            return False
        for k in range(2, need + 1):
            if not 0x80 <= buf[pos + k] <= 0xBF:
                return False
        pos += need + 1
    return True


@njit(cache=True, nogil=True)
def _records(
    buf: np.ndarray,
    pos: int,
    end: int,
    count: int,
    require_keys: bool,
    check_deltas: bool,
    out: np.ndarray,
    row: int,
) -> tuple[int, int, int]:
    """The record grammar: walk ``count`` records from ``pos``, nothing read at or past
    ``end`` -> (fault, index of the record at fault or ``count``, position after the
    last record). With ``check_deltas`` the offset deltas must run 0..count-1; with
    ``require_keys`` every key must be there. Where ``out`` has columns, record i's
    fields go to column ``row + i``: timestamp delta, offset delta, key at, key length,
    value at, value length, headers at, header count (a length of -1 is a null).
    Header keys must be UTF-8. One loop over a section, not a function per record:
    numba's inlining of a per-record function made the walk 1.7 times slower."""
    keep = out.shape[1] > 0
    for index in range(count):
        length, at = _varint(buf, pos, end, _VARINT_BYTES)
        if at < 0 or length < 6 or at + length > end:
            return BAD_RECORD, index, pos
        record_end = at + length
        at += 1  # attributes: unused by every Kafka version so far
        timestamp_delta, at = _varint(buf, at, record_end, _VARLONG_BYTES)
        if at < 0:
            return BAD_RECORD, index, pos
        offset_delta, at = _varint(buf, at, record_end, _VARINT_BYTES)
        if at < 0:
            return BAD_RECORD, index, pos
        key_len, at = _varint(buf, at, record_end, _VARINT_BYTES)
        if at < 0 or key_len < -1 or at + key_len > record_end:
            return BAD_RECORD, index, pos
        key_at = at
        at += max(key_len, 0)
        value_len, at = _varint(buf, at, record_end, _VARINT_BYTES)
        if at < 0 or value_len < -1 or at + value_len > record_end:
            return BAD_RECORD, index, pos
        value_at = at
        at += max(value_len, 0)
        n_headers, at = _varint(buf, at, record_end, _VARINT_BYTES)
        if at < 0 or n_headers < 0 or 2 * n_headers > record_end - at:
            return BAD_RECORD, index, pos
        headers_at = at
        for _ in range(n_headers):
            size, at = _varint(buf, at, record_end, _VARINT_BYTES)
            if at < 0 or size < 0 or at + size > record_end:
                return BAD_RECORD, index, pos
            if not _utf8_end(buf, at, at + size):
                return BAD_RECORD, index, pos
            at += size
            size, at = _varint(buf, at, record_end, _VARINT_BYTES)
            if at < 0 or size < -1 or at + size > record_end:
                return BAD_RECORD, index, pos
            if size > 0:
                at += size
        if at != record_end:
            return BAD_RECORD, index, pos
        if check_deltas and offset_delta != index:
            return WRONG_OFFSET_DELTA, index, pos
        if require_keys and key_len < 0:
            return MISSING_KEY, index, pos
        if keep:
            out[0, row + index] = timestamp_delta
            out[1, row + index] = offset_delta
            out[2, row + index] = key_at
            out[3, row + index] = key_len
            out[4, row + index] = value_at
            out[5, row + index] = value_len
            out[6, row + index] = headers_at
            out[7, row + index] = n_headers
        pos = record_end
    return OK, count, pos


@njit(cache=True, nogil=True)
def walk(buf: np.ndarray, start: int, end: int, count: int, require_keys: bool) -> tuple[int, int]:
    """Walk ``count`` records in ``buf[start:end]`` -> (fault, index of the record at
    fault); (OK, count) when every record is good and nothing follows them."""
    keep_nothing = np.empty((8, 0), dtype=np.int64)
    fault, index, pos = _records(buf, start, end, count, require_keys, True, keep_nothing, 0)
    if fault != OK:
        return fault, index
    if pos != end:
        return TRAILING_BYTES, count
    return OK, count


@njit(cache=True, nogil=True)
def columns(buf: np.ndarray, sections: np.ndarray, out: np.ndarray) -> tuple[int, int]:
    """Every record of the ``sections`` (rows of start, end, record count in ``buf``)
    into ``out``'s rows (see ``_records``), one column a record, in order -> (fault,
    index of the record at fault); (OK, records) when all decode and each section ends
    with its last record."""
    row = 0
    for section in range(sections.shape[0]):
        end = sections[section, 1]
        fault, index, pos = _records(
            buf, sections[section, 0], end, sections[section, 2], False, False, out, row
        )
        if fault != OK:
            return fault, row + index
        row += index
        if pos != end:
            return TRAILING_BYTES, row
    return OK, row
