"""A compiled walk over the records of a batch: does every record decode, do the
offset deltas run 0..n-1, does each record carry a key where one is required.

The broker checks every record it is asked to store (``record_validation``). Walked in
Python that costs about 0.4 us a record, a third of a broker's time under a steady
produce load; compiled (numba) the same walk costs a few nanoseconds. It answers only
"good" or "the first bad record and what kind of fault"; the Python decoder
(``records._decode``) then walks that batch again to word the error. The two must
accept exactly the same bytes: tests/protocol/test_record_walk.py checks that.
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


@njit(cache=True, nogil=True)
def _varint(buf: np.ndarray, pos: int, limit: int, max_bytes: int) -> tuple[int, int]:
    """Zig-zag varint at ``pos`` read no further than ``limit`` -> (value, next
    position); next position -1 when it runs past ``limit`` or past ``max_bytes``."""
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= limit:
            return 0, -1
        b = np.int64(buf[pos])
        pos += 1
        if shift < 63:
            raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
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
def walk(buf: np.ndarray, start: int, end: int, count: int, require_keys: bool) -> tuple[int, int]:
    """Walk ``count`` records in ``buf[start:end]`` -> (fault, index of the record at
    fault); (OK, count) when every record is good and nothing follows them."""
    pos = start
    for index in range(count):
        length, pos = _varint(buf, pos, end, _VARINT_BYTES)
        if pos < 0 or length < 6 or pos + length > end:
            return BAD_RECORD, index
        record_end = pos + length
        pos += 1  # attributes: unused by every Kafka version so far
        _, pos = _varint(buf, pos, record_end, _VARLONG_BYTES)  # timestamp delta
        if pos < 0:
            return BAD_RECORD, index
        offset_delta, pos = _varint(buf, pos, record_end, _VARINT_BYTES)
        if pos < 0:
            return BAD_RECORD, index
        has_key = False
        for field in range(2):  # key, then value
            size, pos = _varint(buf, pos, record_end, _VARINT_BYTES)
            if pos < 0 or size < -1 or pos + size > record_end:
                return BAD_RECORD, index
            if size >= 0:
                pos += size
                if field == 0:
                    has_key = True
        n_headers, pos = _varint(buf, pos, record_end, _VARINT_BYTES)
        if pos < 0 or n_headers < 0 or 2 * n_headers > record_end - pos:
            return BAD_RECORD, index
        for _ in range(n_headers):
            size, pos = _varint(buf, pos, record_end, _VARINT_BYTES)
            if pos < 0 or size < 0 or pos + size > record_end:
                return BAD_RECORD, index
            if not _utf8_end(buf, pos, pos + size):
                return BAD_RECORD, index
            pos += size
            size, pos = _varint(buf, pos, record_end, _VARINT_BYTES)
            if pos < 0 or size < -1 or pos + size > record_end:
                return BAD_RECORD, index
            if size > 0:
                pos += size
        if pos != record_end:
            return BAD_RECORD, index
        if offset_delta != index:
            return WRONG_OFFSET_DELTA, index
        if require_keys and not has_key:
            return MISSING_KEY, index
    if pos != end:
        return TRAILING_BYTES, count
    return OK, count
