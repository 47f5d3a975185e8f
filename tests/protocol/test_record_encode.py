"""The compiled encoder (record_encode) writes exactly the bytes of the Python one, for
every shape of record it takes: null and empty keys and values, lengths and deltas
that need several varint bytes, timestamps before the first; and rows held as columns
(``ColumnRows``) encode as the same records held as tuples."""

from __future__ import annotations

import random

import numpy as np
import pytest

from epochlog.protocol import records as records_module
from epochlog.protocol.batch import HEADER_SIZE
from epochlog.protocol.column_rows import BinaryColumn, ColumnRows, RecordLists
from epochlog.protocol.record_encode import encode_records
from epochlog.protocol.records import build_batch, build_batch_view, iter_records


def random_records(rng: random.Random, n: int) -> list[tuple]:
    def blob() -> bytes | None:
        return rng.choice([None, b"", rng.randbytes(rng.choice([1, 5, 63, 64, 200, 20_000]))])

    base = 1_700_000_000_000
    return [(blob(), blob(), (), base + rng.randint(-100_000, 10**9)) for _ in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_compiled_section_is_byte_for_byte_the_python_one(seed: int) -> None:
    rng = random.Random(seed)
    recs = random_records(rng, rng.choice([65, 300, 2000]))
    expected, base, top = records_module._records_section(recs, None)
    compiled = records_module._compiled_section(recs)
    assert compiled is not None
    framed, *stamps = compiled
    # The section comes after room for the batch's header, written there by build_batch.
    assert len(framed) == HEADER_SIZE + len(expected)
    assert (bytes(framed[HEADER_SIZE:]), *stamps) == (expected, base, top)


def test_build_batch_takes_the_compiled_path_for_many_plain_records_and_decodes() -> None:
    recs = [
        (b"k%d" % i if i % 3 else None, b"v" * (i % 300), (), 1_000 + i % 7) for i in range(500)
    ]
    assert records_module._compiled_section(recs) is not None
    data = build_batch(recs, producer_id=7, producer_epoch=1, base_sequence=0)
    decoded = list(iter_records(data))
    assert [(r.offset, r.key, r.value, r.timestamp) for r in decoded] == [
        (i, k, v, ts) for i, (k, v, _, ts) in enumerate(recs)
    ]


def test_headers_or_missing_timestamps_keep_the_python_encoder() -> None:
    with_headers = [(None, b"v", (("h", b"x"),), 5)] * 100
    assert records_module._compiled_section(with_headers) is None
    without_time = [(None, b"v", (), None)] * 100
    assert records_module._compiled_section(without_time) is None
    data = build_batch(without_time, now_ms=42)
    assert {r.timestamp for r in iter_records(data)} == {42}


def test_encode_records_with_every_key_null() -> None:
    values = (b"a", b"bb", None)
    expected, _, _ = records_module._records_section([(None, v, (), 0) for v in values], None)
    for keys in ((None, None, None), None):  # a column of nulls, or none at all
        section, base, top = encode_records(keys, values, (7, 7, 7))
        assert (base, top) == (7, 7)
        assert bytes(section) == expected


@pytest.mark.parametrize("seed", range(4))
def test_rows_held_as_columns_encode_as_the_same_records_as_tuples(seed: int) -> None:
    """A batch of ``ColumnRows`` (any rows of the columns, in any order) is byte for
    byte the batch of the same records as tuples."""
    rng = random.Random(seed)
    recs = random_records(rng, 400)
    keys = BinaryColumn.of([k for k, _, _, _ in recs])
    values = BinaryColumn.of([v for _, v, _, _ in recs])
    rows = np.array(rng.sample(range(400), 150))
    as_tuples = [(recs[r][0], recs[r][1], (), 99) for r in rows]
    for key_column in (keys, None):
        if key_column is None:
            as_tuples = [(None, v, (), 99) for _, v, _, _ in as_tuples]
        built = build_batch(
            ColumnRows(key_column, values, rows, 99), producer_id=3, base_sequence=5
        )
        assert built == build_batch(as_tuples, producer_id=3, base_sequence=5)
        assert ColumnRows(key_column, values, rows, 99)[7] == as_tuples[7]


@pytest.mark.parametrize("seed", range(4))
def test_record_lists_build_as_the_same_records_held_as_tuples(seed: int) -> None:
    """An open producer batch's ``RecordLists`` (records appended one by one and runs
    extended whole, keys null or not, headers or none) is byte for byte the batch of
    the same records as tuples, by the compiled encoder or the Python one."""
    rng = random.Random(seed)
    lists, as_tuples = RecordLists(), []
    for _ in range(rng.randint(2, 12)):
        stamp = 1_700_000_000_000 + rng.randint(-1000, 1000)
        if rng.random() < 0.5:
            values = [rng.randbytes(rng.choice([0, 9, 300])) for _ in range(rng.randint(1, 80))]
            keys = None if rng.random() < 0.5 else [b"k%d" % i for i in range(len(values))]
            lists.extend(keys, values, stamp)
            as_tuples += [(keys and keys[i], v, (), stamp) for i, v in enumerate(values)]
        else:
            record = (rng.choice([None, b"key"]), rng.choice([None, b"v" * 40]), (), stamp)
            lists.append(*record)
            as_tuples.append(record)
    if seed == 3:  # headers send the batch to the Python encoder
        lists.append(None, b"h", (("h", b"x"),), 5)
        as_tuples.append((None, b"h", (("h", b"x"),), 5))
        lists.append(None, b"after", (), 6)
        as_tuples.append((None, b"after", (), 6))
    assert list(lists) == as_tuples and len(lists) == len(as_tuples)
    assert [lists[i] for i in range(len(lists))] == as_tuples
    assert lists[-1] == as_tuples[-1]
    assert (records_module._compiled_section(lists) is None) == (seed == 3)
    assert lists.keyed == any(k is not None for k, _, _, _ in as_tuples)
    built = build_batch(lists, producer_id=3, base_sequence=5)
    assert built == build_batch(as_tuples, producer_id=3, base_sequence=5)
    # ... and the Python encoder writes the same bytes as the compiled one.
    python_section, _, _ = records_module._records_section(as_tuples, None)
    assert built[HEADER_SIZE:] == python_section


def test_record_lists_hold_keys_and_headers_only_up_to_the_last_record_that_has_them() -> None:
    """What send()'s hot path leans on: a record with a null key and no headers appends
    only its value and stamp; it reads back null and header-less, stamped in ms."""
    lists = RecordLists()
    lists.append(None, b"a", (), 1_000)
    lists.append(b"k", b"b", (), 1_001)
    lists.append(None, b"c", (("h", b"x"),), 1_002)
    lists.values.append(b"d")  # as the hot path does
    lists.stamps_ns.append(1_003_999_999)
    assert (lists.keys, lists.headers) == ([None, b"k"], [(), (), (("h", b"x"),)])
    assert list(lists) == [
        (None, b"a", (), 1_000),
        (b"k", b"b", (), 1_001),
        (None, b"c", (("h", b"x"),), 1_002),
        (None, b"d", (), 1_003),
    ]
    assert lists.all_keys() == [None, b"k", None, None] and lists[3][3] == 1_003


def test_the_producer_view_is_the_batch_without_a_copy() -> None:
    """``build_batch_view`` (what the producer sends) is ``build_batch``'s bytes, as a
    view of the array the compiled encoder wrote, not a copy of it."""
    lists = RecordLists()
    lists.extend(None, [b"v" * 100] * 500, 1_700_000_000_000)
    view = build_batch_view(lists, producer_id=3, base_sequence=5)
    assert view == build_batch(lists, producer_id=3, base_sequence=5)
    assert type(view.obj).__name__ == "ndarray"


def test_record_lists_take_any_int64_timestamp() -> None:
    """Stamps are kept in nanoseconds; a timestamp given in milliseconds past 2262 does
    not fit int64 so, and goes to the Python encoder, which writes it as given."""
    lists, as_tuples = RecordLists(), []
    for i in range(100):
        record = (None, b"v%d" % i, (), 2**62 + i)
        lists.append(*record)
        as_tuples.append(record)
    assert records_module._compiled_section(lists) is None
    assert build_batch(lists) == build_batch(as_tuples)
    stamps = [r.timestamp for r in iter_records(build_batch(lists))]
    assert stamps == [2**62 + i for i in range(100)]
