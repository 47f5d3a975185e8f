"""The read path's column helpers: numpy views that respect slices and nulls, and the
conversion to Spark's types, without loading pandas (0.6 s in every new worker)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa

from epochlog.spark.columns import arrow_schema, conform, valid, values
from epochlog.spark.partition_reader import _rewritten_from, _within

MILLIS = pa.timestamp("ms", tz="UTC")


def test_values_and_valid_follow_a_slice_with_nulls() -> None:
    column = pa.array([5, None, 3, -1, 7, None], type=pa.int32()).slice(1, 4)
    assert values(column, np.int32)[1:].tolist() == [3, -1, 7]
    assert valid(column).tolist() == [False, True, True, True]
    assert valid(pa.array([1, 2], type=pa.int64())).tolist() == [True, True]


def _client_batch(offsets: list[int], epochs: list[int | None]) -> pa.RecordBatch:
    n = len(offsets)
    return pa.RecordBatch.from_pydict(
        {
            "key": pa.array([b"k"] * n),
            "value": pa.array([b"v%d" % o for o in offsets]),
            "topic": pa.array(["t"] * n),
            "partition": pa.array([0] * n, type=pa.int32()),
            "offset": pa.array(offsets, type=pa.int64()),
            "timestamp": pa.array([1_000 + o for o in offsets], type=MILLIS),
            "timestampType": pa.array([0] * n, type=pa.int32()),
            "leaderEpoch": pa.array(epochs, type=pa.int32()),
        }
    )


def test_conform_turns_kafka_milliseconds_into_spark_microseconds_on_a_slice() -> None:
    batch = _client_batch([10, 11, 12], [1, 1, 2]).slice(1)
    out = conform(batch, arrow_schema(False))
    assert out.schema == arrow_schema(False)
    stamps = out.column(out.schema.get_field_index("timestamp"))
    assert stamps.equals(batch.column(5).cast(pa.timestamp("us", tz="UTC")))
    assert out.column(1).to_pylist() == [b"v11", b"v12"]


def test_within_keeps_the_planned_range_and_rewritten_from_finds_a_newer_epoch() -> None:
    batch = _client_batch([10, 11, 12, 13, 14], [1, None, 1, 2, 2])
    kept = _within(batch, 11, 14)
    assert kept.column(4).to_pylist() == [11, 12, 13]
    assert _rewritten_from(kept, until_epoch=1) == 2
    assert _rewritten_from(kept, until_epoch=2) is None
    assert _rewritten_from(kept, until_epoch=-1) is None


PANDAS_PROBE = """
import sys
from epochlog.client.arrow_batches import decode_fetched
from epochlog.protocol.records import build_batch
from epochlog.spark.columns import arrow_schema, conform
from epochlog.spark.partition_reader import _rewritten_from, _within
data = build_batch([(b"k", b"v", [], 1000 + i) for i in range(5)], base_offset=10,
                   partition_leader_epoch=3)
batch, _ = decode_fetched(data, "t", 0, 10)
kept = conform(_within(batch, 11, 14), arrow_schema(False))
assert kept.num_rows == 3 and _rewritten_from(kept, 2) == 0
assert "pandas" not in sys.modules, "pandas was imported"
"""


def test_the_read_path_from_fetched_bytes_to_spark_rows_does_not_load_pandas() -> None:
    subprocess.run([sys.executable, "-c", PANDAS_PROBE], check=True, timeout=120)
