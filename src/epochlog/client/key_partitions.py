"""Kafka's key partitioning (``toPositive(murmur2(key)) % partitions``) of a whole
column of keys in one compiled pass: a key hashed one call at a time costs more than
everything else a columnar send does per record. Imported (with numba) only by
``Partitioner.column_partitions``; tests/client/test_partitioner.py checks it against
the murmurhash2 library, key for key."""

from __future__ import annotations

import numpy as np
from numba import njit

from epochlog.protocol.column_rows import BinaryColumn

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


@njit(cache=True, nogil=True)
def _partitions(data: np.ndarray, starts: np.ndarray, lens: np.ndarray, count: int) -> np.ndarray:
    """Per row, its key's partition; -1 for a null key. Unsigned 32-bit arithmetic in
    int64: every product stays below 2**63."""
    out = np.empty(lens.shape[0], np.int64)
    for r in range(lens.shape[0]):
        length = lens[r]
        if length < 0:
            out[r] = -1
            continue
        at = starts[r]
        h = (_SEED ^ length) & _MASK
        for i in range(at, at + (length & ~3), 4):
            k = (
                np.int64(data[i])
                | (np.int64(data[i + 1]) << 8)
                | (np.int64(data[i + 2]) << 16)
                | (np.int64(data[i + 3]) << 24)
            )
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
        tail = at + (length & ~3)
        rest = length & 3
        if rest == 3:
            h ^= np.int64(data[tail + 2]) << 16
        if rest >= 2:
            h ^= np.int64(data[tail + 1]) << 8
        if rest >= 1:
            h ^= np.int64(data[tail])
            h = (h * _M) & _MASK
        h ^= h >> 13
        h = (h * _M) & _MASK
        h ^= h >> 15
        out[r] = (h & 0x7FFFFFFF) % count
    return out


def key_partitions(keys: BinaryColumn, count: int) -> np.ndarray:
    """Each key's partition of ``count``, as ``partitioner.key_partition`` picks it;
    -1 where the key is null."""
    return _partitions(keys.data, keys.starts, keys.lens, count)
