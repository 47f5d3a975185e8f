"""The columnar decoder (client/arrow_batches.py) against the record decoder
(protocol/records.iter_records), through the compiled walk and through the Python
decoder that stands in for it on small fetches: the same rows for random batches of
every codec,
nulls, headers, LogAppendTime and leader epochs, control batches skipped, the fetch
position honoured, the same moves of the consumer's position, malformed input only
ever raising KafkaError; and on batches confluent-kafka wrote to a broker's log."""

from __future__ import annotations

import struct
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import crc32c
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlog.client.arrow_batches import ARROW_SCHEMA, decode_fetched, walk_batches
from epochlog.client.errors import TopicPartition
from epochlog.client.fetched import arrow_of, records_of
from epochlog.client.positions import PartitionPosition
from epochlog.protocol import batch as b
from epochlog.protocol import record_columns
from epochlog.protocol.control import build_marker_batch
from epochlog.protocol.errors import KafkaError
from epochlog.protocol.records import build_batch, iter_records
from support.broker import BrokerProcess
from support.clients import confluent_produce, create_topic
from support.records import make_records

T0 = 1_767_225_600_000
CODECS = [0, 1, 2, 3, 4]
INT64 = (-(2**63), 2**63 - 1)


def control_batch(base_offset: int, epoch: int = 0) -> bytes:
    """A transaction marker (commit) as a coordinator writes it."""
    data = bytearray(
        build_batch(
            [(b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x00", [], T0)],
            base_offset=base_offset,
            is_transactional=True,
            partition_leader_epoch=epoch,
            producer_id=7,
            producer_epoch=0,
        )
    )
    (attributes,) = struct.unpack_from(">h", data, b.ATTRIBUTES)
    struct.pack_into(">h", data, b.ATTRIBUTES, attributes | b.CONTROL_BIT)
    struct.pack_into(">I", data, b.CRC, crc32c.crc32c(memoryview(data)[b.ATTRIBUTES :]))
    return bytes(data)


def expected_rows(data: bytes, topic: str, partition: int, fetch_offset: int) -> list[dict]:
    """The oracle: iter_records over every whole data batch, records at or after the
    fetch position (offsets only grow from batch to batch)."""
    rows = []
    at = 0
    while at + b.HEADER_SIZE <= len(data):
        header = b.read_header(data, at)
        if at + header.size > len(data):
            break
        if not header.is_control:
            epoch = header.partition_leader_epoch
            for r in iter_records(data[at : at + header.size]):
                if r.offset >= fetch_offset:
                    rows.append(
                        {
                            "key": r.key,
                            "value": r.value,
                            "topic": topic,
                            "partition": partition,
                            "offset": r.offset,
                            "timestamp": r.timestamp,
                            "timestampType": int(header.is_log_append_time),
                            "leaderEpoch": None if epoch == -1 else epoch,
                            "headers": [{"key": k, "value": v} for k, v in r.headers],
                        }
                    )
        at += header.size
    return rows


def rows_of(table: pa.RecordBatch) -> list[dict]:
    assert table.schema == ARROW_SCHEMA
    millis = table.column("timestamp").cast(pa.int64()).to_pylist()
    rows = table.to_pylist()
    for row, ms in zip(rows, millis, strict=True):
        row["timestamp"] = ms
    return rows


def assert_same_as_record_path(data: bytes, fetch_offset: int) -> pa.RecordBatch:
    table, _ = decode_fetched(data, "topic-a", 3, fetch_offset)
    assert rows_of(table) == expected_rows(data, "topic-a", 3, fetch_offset)
    # The consumer's position moves the same way on both paths.
    tp = TopicPartition("topic-a", 3)
    by_records, by_arrow = PartitionPosition(), PartitionPosition()
    for pos in (by_records, by_arrow):
        pos.seek(fetch_offset)
        pos.last_timestamp = 42
    records = records_of([(tp, by_records, data, None)], True)
    arrow = arrow_of([(tp, by_arrow, data, None)], True)
    assert [r.offset for r in records] == arrow.column("offset").to_pylist()
    assert [
        {
            "key": r.key,
            "value": r.value,
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
            "timestamp": r.timestamp,
            "leaderEpoch": r.leader_epoch,
            "headers": [{"key": k, "value": v} for k, v in r.headers],
        }
        for r in records
    ] == [
        {k: v for k, v in row.items() if k != "timestampType"}
        for row in expected_rows(data, "topic-a", 3, fetch_offset)
    ]
    assert all(type(r.headers) is list for r in records)
    for field in ("offset", "offset_epoch", "last_timestamp", "consumed_epochs"):
        assert getattr(by_arrow, field) == getattr(by_records, field), field
    return table


@contextmanager
def decoded_by(compiled: bool) -> Iterator[None]:
    """Every fetch through the compiled walk, or every one through the Python decoder."""
    with mock.patch.object(record_columns, "_SCALAR_UP_TO", -1 if compiled else 2**62):
        yield


# --- random batches ------------------------------------------------------------------

sizes = st.one_of(st.integers(0, 20), st.sampled_from([63, 64, 100, 127, 128, 8191, 8192, 9000]))
payload = st.one_of(st.none(), sizes.map(lambda n: bytes(i % 251 for i in range(n))))
headers = st.lists(
    st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=40))), max_size=3
)
record = st.tuples(
    payload,
    payload,
    st.one_of(st.just([]), headers),
    st.integers(T0 - 10**7, T0 + 10**7),
)
batch_spec = st.tuples(
    st.lists(record, min_size=1, max_size=80),
    st.sampled_from(CODECS),
    st.sampled_from([-1, 0, 5]),
    st.booleans(),  # LogAppendTime
    st.booleans(),  # followed by a control batch
)


def build_log(specs: list[Any]) -> tuple[bytes, int]:
    out = []
    offset = 0
    for recs, codec, epoch, append_time, control in specs:
        out.append(
            build_batch(
                recs,
                base_offset=offset,
                compression=codec,
                partition_leader_epoch=epoch,
                timestamp_type_log_append=append_time,
            )
        )
        offset += len(recs)
        if control:
            out.append(control_batch(offset, max(epoch, 0)))
            offset += 1
    return b"".join(out), offset


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(batch_spec, min_size=1, max_size=5),
    start=st.floats(0, 1),
    partial=st.integers(0, 120),
    compiled=st.booleans(),
)
def test_random_batches_decode_like_the_record_path(
    specs: list[Any], start: float, partial: int, compiled: bool
) -> None:
    data, end = build_log(specs)
    # A fetch answer may end in part of a batch; that part is left for the next fetch.
    first = b.read_header(data).size
    data += data[: min(partial, first - 1)]
    with decoded_by(compiled):
        assert_same_as_record_path(data, int(start * end))


@settings(max_examples=60, deadline=None)
@given(
    count=st.integers(1, 400),
    size=st.sampled_from([0, 1, 60, 100, 1000]),
    step=st.sampled_from([0, 1, 7, 40]),
    codec=st.sampled_from(CODECS),
    key=st.booleans(),
)
def test_runs_of_equal_records_decode_like_the_record_path(
    count: int, size: int, step: int, codec: int, key: bool
) -> None:
    """The common layout: records of one size but for growing deltas, in batches of
    150 (the compiled walk's path from 65 records on)."""
    recs = [
        (b"k%d" % (i % 10) if key else None, bytes([i % 256]) * size, [], T0 + i * step)
        for i in range(count)
    ]
    data = b"".join(
        build_batch(recs[i : i + 150], base_offset=i, compression=codec)
        for i in range(0, count, 150)
    )
    assert_same_as_record_path(data, 0)


# --- named cases ---------------------------------------------------------------------

SAMPLE = [
    (b"key-0", b"value-0", [], T0),
    (None, b"null key", [("h", b"v")], T0 + 5),
    (b"null value", None, [("h1", None), ("h2", b""), ("\u00e9t\u00e9", b"x" * 200)], T0 - 3),
    (None, None, [], T0 + 1_000_000),
    (b"", b"", [("", b"")], T0 + 2),
    (b"k" * 300, bytes(range(256)) * 40, [("big", b"y" * 1000)], T0 + 2),
]


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_nulls_and_headers(codec: int, compiled: bool) -> None:
    data = build_batch(SAMPLE, base_offset=100, compression=codec, partition_leader_epoch=4)
    with decoded_by(compiled):
        table = assert_same_as_record_path(data, 0)
    assert table.num_rows == len(SAMPLE)
    assert table.column("key").null_count == 2
    assert table.column("value").null_count == 2
    assert table.column("leaderEpoch").to_pylist() == [4] * len(SAMPLE)
    assert table.column("headers")[2].as_py() == [
        {"key": "h1", "value": None},
        {"key": "h2", "value": b""},
        {"key": "\u00e9t\u00e9", "value": b"x" * 200},
    ]


def test_schema_is_sparks_kafka_columns_plus_leader_epoch() -> None:
    assert ARROW_SCHEMA.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "leaderEpoch",
        "headers",
    ]
    assert ARROW_SCHEMA.field("timestamp").type == pa.timestamp("ms", tz="UTC")
    assert ARROW_SCHEMA.field("headers").type == pa.list_(
        pa.struct([("key", pa.string()), ("value", pa.binary())])
    )


def test_log_append_time_and_no_leader_epoch() -> None:
    data = build_batch(SAMPLE[:2], timestamp_type_log_append=True)
    table = assert_same_as_record_path(data, 0)
    assert table.column("timestampType").to_pylist() == [1, 1]
    assert table.column("leaderEpoch").to_pylist() == [None, None]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [T0 + 5, T0 + 5]


def test_control_batches_give_no_rows_but_move_the_position() -> None:
    data = build_batch(SAMPLE[:2], base_offset=0) + control_batch(2) + control_batch(3)
    table = assert_same_as_record_path(data, 0)
    assert table.column("offset").to_pylist() == [0, 1]
    only_markers = control_batch(2) + control_batch(3)
    table, progress = decode_fetched(only_markers, "t", 0, 2)
    assert table.num_rows == 0 and table.schema == ARROW_SCHEMA
    assert [p.next_offset for p in progress] == [4]


def empty_data_batch(base_offset: int, last_offset_delta: int, epoch: int = 0) -> bytes:
    """A data batch that kept no records (compaction keeps such batches for their
    producer state)."""
    data = bytearray(build_batch(SAMPLE[:1], base_offset=base_offset)[: b.HEADER_SIZE])
    struct.pack_into(">i", data, b.BATCH_LENGTH, b.HEADER_SIZE - b.LOG_OVERHEAD)
    struct.pack_into(">i", data, b.PARTITION_LEADER_EPOCH, epoch)
    struct.pack_into(">i", data, b.LAST_OFFSET_DELTA, last_offset_delta)
    struct.pack_into(">i", data, b.RECORDS_COUNT, 0)
    struct.pack_into(">I", data, b.CRC, crc32c.crc32c(memoryview(data)[b.ATTRIBUTES :]))
    return bytes(data)


def test_batches_without_records_move_the_position_only() -> None:
    alone = empty_data_batch(0, 4)
    table = assert_same_as_record_path(alone, 0)
    assert table.num_rows == 0
    assert [p.next_offset for p in decode_fetched(alone, "t", 0, 0)[1]] == [5]
    mixed = alone + build_batch(SAMPLE, base_offset=5) + empty_data_batch(11, 2)
    table = assert_same_as_record_path(mixed, 0)
    assert table.column("offset").to_pylist() == list(range(5, 11))
    garbage = bytearray(alone + b"\x01\x02")
    struct.pack_into(">i", garbage, b.BATCH_LENGTH, len(garbage) - b.LOG_OVERHEAD)
    with pytest.raises(KafkaError):
        decode_fetched(bytes(garbage), "t", 0, 0, check_crc=False)


def test_fetch_position_inside_a_batch_and_batches_below_it() -> None:
    data = build_batch(SAMPLE, base_offset=10) + build_batch(SAMPLE, base_offset=16)
    for start in (0, 10, 13, 16, 19, 21, 22, 30):
        table = assert_same_as_record_path(data, start)
        assert table.column("offset").to_pylist() == list(range(max(start, 10), 22))
    assert [w.threshold for w in walk_batches(data, 13)] == [13, 16]
    assert walk_batches(data, 16)[0].base_offset == 16


def test_a_fetch_handing_out_a_few_records_leaves_numba_unloaded(tmp_path: Path) -> None:
    """The Spark source's planning reads the last record of a large batch in a fresh
    process each query: loading numba (about 0.3 s) would cost more than the decode."""
    fetched = tmp_path / "fetched.bin"
    fetched.write_bytes(build_batch([(None, b"v", [], 0)] * 5000))
    code = (
        "import sys\n"
        "from epochlog.client.arrow_batches import decode_fetched\n"
        f"data = open({str(fetched)!r}, 'rb').read()\n"
        "assert decode_fetched(data, 't', 0, 4999)[0].num_rows == 1\n"
        "print('numba' in sys.modules)\n"
    )
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert ran.stdout.strip() == "False"


def test_nothing_to_decode_is_an_empty_batch_with_the_schema() -> None:
    for data in (b"", build_batch(SAMPLE, base_offset=0)[:-1]):
        table, progress = decode_fetched(data, "t", 0, 0)
        assert table.num_rows == 0 and table.schema == ARROW_SCHEMA
        assert progress == []


def test_a_bad_crc_is_corrupt_message() -> None:
    data = bytearray(build_batch(SAMPLE))
    data[-1] ^= 0xFF
    with pytest.raises(KafkaError) as info:
        decode_fetched(bytes(data), "t", 0, 0)
    assert info.value.code.name == "CORRUPT_MESSAGE"


@settings(max_examples=300, deadline=None)
@given(
    codec=st.sampled_from([0, 0, 0, 3]),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 40),
    compiled=st.booleans(),
)
def test_damaged_records_raise_kafka_error_or_decode_like_the_record_path(
    codec: int, flips: list[tuple[int, int]], cut: int, compiled: bool
) -> None:
    """Bytes changed inside the records (CRC not checked): both decoders refuse, or
    both give the same rows; nothing but KafkaError ever escapes."""
    data = bytearray(build_batch(SAMPLE + SAMPLE[:3], base_offset=5, compression=codec))
    body = len(data) - b.HEADER_SIZE
    for where, xor in flips:
        data[b.HEADER_SIZE + where % body] ^= xor
    if cut:
        data = data[: len(data) - cut]
        struct.pack_into(">i", data, b.BATCH_LENGTH, len(data) - b.LOG_OVERHEAD)
    raw = bytes(data)
    try:
        expected = list(iter_records(raw, check_crc=False))
    except KafkaError:
        expected = None
    try:
        with decoded_by(compiled):
            table, _ = decode_fetched(raw, "t", 0, 0, check_crc=False)
    except KafkaError:
        table = None
    if expected is None or table is None:
        return  # both refuse, or ours refuses what the other reads lazily wrong
    if any(not INT64[0] <= r.timestamp <= INT64[1] for r in expected):
        return  # beyond Arrow's int64 timestamps
    # A damaged offset delta may put a record below the fetch position (0 here): the
    # columnar path drops such records, as a consumer does.
    expected = [r for r in expected if r.offset >= 0]
    got = rows_of(table)
    assert [(r["offset"], r["key"], r["value"], r["timestamp"]) for r in got] == [
        (r.offset, r.key, r.value, r.timestamp) for r in expected
    ]
    assert [[(h["key"], h["value"]) for h in r["headers"]] for r in got] == [
        r.headers for r in expected
    ]


# --- what confluent-kafka writes -----------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_batches_written_by_confluent_kafka(module_broker: BrokerProcess, codec: str) -> None:
    """librdkafka's batches as the broker stores them (its log segment, unchanged but
    for offsets and the leader epoch), decoded both ways."""
    topic = f"arrow-ck-{codec}"
    create_topic(module_broker.bootstrap, topic)
    recs = make_records(3000, f"ck{codec}")
    offsets = confluent_produce(module_broker.bootstrap, topic, recs, codec)
    assert offsets == list(range(len(recs)))
    segment = Path(module_broker.log_dir) / f"{topic}-0" / f"{0:020d}.log"
    data = segment.read_bytes()
    table = assert_same_as_record_path(data, 0)
    assert table.num_rows == len(recs)
    assert table.column("key").to_pylist() == [r.key for r in recs]
    assert table.column("value").to_pylist() == [r.value for r in recs]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [r.timestamp for r in recs]
    middle = assert_same_as_record_path(data, 1234)
    assert middle.column("offset")[0].as_py() == 1234


def test_read_committed_drops_aborted_transactions_on_both_paths() -> None:
    def txn(pid: int, base: int, values: list[bytes]) -> bytes:
        data = bytearray(
            build_batch(
                [(None, v, [], T0) for v in values],
                base_offset=base,
                producer_id=pid,
                producer_epoch=0,
                base_sequence=0,
                is_transactional=True,
            )
        )
        return bytes(data)

    def marker(pid: int, base: int, commit: bool) -> bytes:
        data = build_marker_batch(pid, 0, 0, commit, T0)
        struct.pack_into(">q", data, 0, base)
        return bytes(data)

    data = b"".join(
        [
            txn(5, 0, [b"aborted-0", b"aborted-1"]),
            marker(5, 2, commit=False),
            txn(6, 3, [b"committed"]),
            marker(6, 4, commit=True),
            build_batch([(None, b"plain", [], T0)], base_offset=5),
            txn(5, 6, [b"later-committed"]),
            marker(5, 7, commit=True),
        ]
    )
    tp = TopicPartition("t", 0)
    by_records, by_arrow = PartitionPosition(), PartitionPosition()
    for pos in (by_records, by_arrow):
        pos.seek(0)
    records = records_of([(tp, by_records, data, [(5, 0)])], True)
    arrow = arrow_of([(tp, by_arrow, data, [(5, 0)])], True)
    expected = [b"committed", b"plain", b"later-committed"]
    assert [r.value for r in records] == expected
    assert arrow.column("value").to_pylist() == expected
    assert by_records.offset == by_arrow.offset == 8
    # read_uncommitted (no aborted list): every record, never a marker.
    uncommitted = PartitionPosition()
    uncommitted.seek(0)
    every = records_of([(tp, uncommitted, data, None)], True)
    assert [r.value for r in every] == [b"aborted-0", b"aborted-1", *expected]
