"""Produce-time record validation: every record of every batch decoded, within a bound on
decompression; the compiled walker agrees with the record-by-record decoder."""

from __future__ import annotations

import resource
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlog.protocol import record_validation
from epochlog.protocol.batch import iter_batches
from epochlog.protocol.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    BoundedDecompressor,
    compress,
)
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.record_validation import RecordErrors, RecordValidator, WalkerPolicy
from epochlog.protocol.records import build_batch, iter_records
from support.poison import forged_batch, gzip_bomb, poison_batches, record, section

LIMIT = 16 << 20


def validate(data: bytes, require_keys: bool = False, limit: int = LIMIT) -> None:
    RecordValidator(limit).validate(data, iter_batches(data), require_keys=require_keys)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_valid_batches_of_every_codec_pass(codec: int) -> None:
    records = [
        (b"k%d" % i, b"v" * (i * 37 % 300), [("h", b"x")] if i % 5 == 0 else [], 1000 + i)
        for i in range(200)
    ]
    validate(build_batch(records, compression=codec))
    validate(forged_batch(section(3), 3))


@pytest.mark.parametrize("name", list(poison_batches()))
def test_poison_batch_is_refused_with_kafkas_error(name: str) -> None:
    data, code = poison_batches()[name]
    with pytest.raises(KafkaError) as raised:
        validate(data)
    assert raised.value.code == code


def test_record_errors_name_the_first_bad_record() -> None:
    data, _ = poison_batches()["record-cut-mid-way"]
    with pytest.raises(RecordErrors) as raised:
        validate(data)
    assert [index for index, _ in raised.value.record_errors] == [2]
    data, _ = poison_batches()["offset-delta-gap"]
    with pytest.raises(RecordErrors) as raised:
        validate(data)
    assert raised.value.record_errors == [(1, "offset delta 2, expected 1")]


def test_compacted_topic_names_every_record_without_a_key() -> None:
    data = forged_batch(record(0, b"a") + record(1, b"b", key=None) + record(2, b"c", None), 3)
    validate(data)
    with pytest.raises(RecordErrors) as raised:
        validate(data, require_keys=True)
    assert [index for index, _ in raised.value.record_errors] == [1, 2]


def test_gzip_bomb_is_refused_without_growing_memory_past_the_bound() -> None:
    bomb = gzip_bomb(64 << 20)
    assert len(bomb) < 70_000
    validator = RecordValidator(4 << 20)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(KafkaError) as raised:
        validator.validate(bomb, iter_batches(bomb))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE
    assert grown_kib < 8 * 1024, f"{grown_kib} KiB more resident"


def test_snappy_states_its_size_before_decompressing() -> None:
    data = build_batch([(None, bytes(1 << 20), [], 0)], compression=SNAPPY)
    validate(data, limit=2 << 20)
    with pytest.raises(KafkaError) as raised:
        validate(data, limit=512 << 10)
    assert raised.value.code == ErrorCode.MESSAGE_TOO_LARGE


def _scalar_accepts(data: bytes) -> bool:
    try:
        for pos, header in iter_batches(data):
            got = list(iter_records(data[pos : pos + header.size]))
            if [r.offset for r in got] != list(range(header.records_count)):
                return False
    except KafkaError:
        return False
    return True


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(0, 200), min_size=1, max_size=12),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), max_size=3),
    cut=st.integers(0, 4),
)
def test_compiled_walk_agrees_with_the_record_decoder(
    sizes: list[int], flips: list[tuple[int, int]], cut: int
) -> None:
    """Mutated records sections (CRC made right again): the validator, on both of its
    paths, refuses exactly what decoding record by record refuses."""
    records = b"".join(record(i, b"v" * n) for i, n in enumerate(sizes))
    mutated = bytearray(records)
    for at, mask in flips:
        mutated[at % len(mutated)] ^= mask
    data = forged_batch(bytes(mutated[: len(mutated) - cut]), len(sizes))
    expected = _scalar_accepts(data)
    walker = WalkerPolicy(load_for=-1)
    one_by_one = WalkerPolicy(load_for=1 << 62, load_after=1 << 62)
    for name, policy in (("walker", walker), ("one by one", one_by_one)):
        with mock.patch.object(record_validation, "_POLICY", policy):
            try:
                validate(data)
                accepted = True
            except KafkaError:
                accepted = False
        assert accepted == expected, name


def test_a_large_output_is_given_back_once_not_before_every_batch() -> None:
    """The decompression mapping returns pages after an output past 4 MiB, once: later
    small batches must not pay a madvise and fresh page faults each."""
    import mmap

    given_back: list[int] = []

    class CountingMapping(mmap.mmap):
        def madvise(self, *args: int) -> None:
            given_back.append(1)
            super().madvise(*args)

    decompressor = BoundedDecompressor(LIMIT)
    decompressor._buffer = CountingMapping(-1, LIMIT)
    big = compress(GZIP, bytes(8 << 20))
    small = compress(GZIP, b"x" * 1000)
    assert len(decompressor.decompress(GZIP, big)) == 8 << 20
    for _ in range(3):
        assert bytes(decompressor.decompress(GZIP, small)) == b"x" * 1000
    assert len(given_back) == 1


def test_the_walker_is_loaded_for_a_large_append_then_takes_every_append() -> None:
    policy = WalkerPolicy(load_for=64, load_after=10_000)
    assert not policy.use_walker(64)
    assert policy.use_walker(65)
    assert policy.use_walker(1)


def test_the_walker_is_loaded_once_enough_small_appends_were_checked_one_by_one() -> None:
    """A producer of 1 KiB records appends a few records a partition, never more than
    64: the walker must still take over, not leave the Python decoder to it for ever."""
    policy = WalkerPolicy(load_for=64, load_after=100)
    assert [policy.use_walker(16) for _ in range(8)] == [False] * 7 + [True]
    assert policy.use_walker(1)


def test_validation_goes_through_the_loaded_walker_even_for_one_record() -> None:
    calls: list[int] = []
    walker = record_validation._walker()

    class Counting:
        OK = walker.OK

        @staticmethod
        def walk(*args: object) -> tuple[int, int]:
            calls.append(1)
            return walker.walk(*args)

    loaded = WalkerPolicy()
    loaded.loaded = True
    with (
        mock.patch.object(record_validation, "_POLICY", loaded),
        mock.patch.object(record_validation, "_walker", lambda: Counting),
    ):
        validate(build_batch([(None, b"v", [], 1)]))
    assert calls == [1]
