"""How the sink reads a task's Arrow batch (without Spark): binary and string columns,
sliced or not, are taken as their buffers with nulls kept apart; the partition column's
nulls leave the choice to the partitioner and a negative partition is refused naming
its row; a topic column splits the batch into runs."""

from __future__ import annotations

import pyarrow as pa
import pytest

from epochlog.spark.sink import SinkError, SinkOptions, batch_runs


def items(column: object) -> list[bytes | None]:
    return [column.item(i) for i in range(len(column))]  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", [pa.binary(), pa.string(), pa.large_binary(), pa.large_string()])
def test_bytes_columns_are_read_as_written_sliced_or_not(kind: pa.DataType) -> None:
    raw = ["a", None, "", "héllo", None, "z" * 300]
    data = [None if v is None else (v if "string" in str(kind) else v.encode()) for v in raw]
    expected = [None if v is None else v.encode() for v in raw]
    array = pa.array(data, kind)
    options = SinkOptions("localhost:9092", topic="t")
    for offset in range(len(raw)):
        batch = pa.RecordBatch.from_arrays(
            [array.slice(offset), array.slice(offset)], ["key", "value"]
        )
        (run,) = batch_runs(batch, options, 0)
        assert items(run.values) == expected[offset:]
        assert items(run.keys) == expected[offset:]


def test_partition_nulls_go_to_the_partitioner_and_negatives_are_refused() -> None:
    values = pa.array([b"a", b"b", b"c"])
    options = SinkOptions("localhost:9092", topic="t")
    for kind in (pa.int16(), pa.int32(), pa.int64()):
        partitions = pa.array([2, None, 0], kind)
        batch = pa.RecordBatch.from_arrays([values, partitions], ["value", "partition"])
        (run,) = batch_runs(batch, options, 0)
        assert run.partitions is not None and run.partitions.tolist() == [2, -1, 0]
    batch = pa.RecordBatch.from_arrays([values, pa.array([0, None, -3])], ["value", "partition"])
    with pytest.raises(SinkError, match="row 12 of this task has partition -3"):
        batch_runs(batch, options, 10)


def test_a_topic_column_splits_the_batch_into_runs() -> None:
    batch = pa.RecordBatch.from_arrays(
        [pa.array(["x", "x", "y", "x"]), pa.array([b"1", b"2", b"3", b"4"])], ["topic", "value"]
    )
    runs = batch_runs(batch, SinkOptions("localhost:9092"), 0)
    assert [(r.topic, items(r.values)) for r in runs] == [
        ("x", [b"1", b"2"]),
        ("y", [b"3"]),
        ("x", [b"4"]),
    ]
