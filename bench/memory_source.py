"""A Python streaming data source that serves rows shaped like epochlog's (100-byte
values) straight from memory: no broker, no network, no decoding. Timed the same way as
the epochlog source, it shows what Spark's Python Data Source API itself costs per query
and per row, the ceiling any Python source can reach on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

from epochlog.spark.columns import arrow_schema, schema_ddl

VALUE_BYTES = 100
KEY_BYTES = 7
# About what one 16 MiB fetch of 100-byte records gives the epochlog source.
BATCH_ROWS = 125_000


def _binary(n: int, width: int, fill: int) -> pa.Array:
    offsets = np.arange(n + 1, dtype=np.int32) * width
    data = np.full(n * width, fill, dtype=np.uint8)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _batch(first: int, n: int, partition: int) -> pa.RecordBatch:
    offsets = np.arange(first, first + n, dtype=np.int64)
    topic = pa.Array.from_buffers(
        pa.string(),
        n,
        [None, pa.py_buffer(np.arange(n + 1, dtype=np.int32)), pa.py_buffer(b"t" * n)],
    )

    def ints(values: np.ndarray, kind: pa.DataType) -> pa.Array:
        return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(values)])

    columns = [
        _binary(n, KEY_BYTES, ord("k")),
        _binary(n, VALUE_BYTES, ord("v")),
        topic,
        ints(np.full(n, partition, dtype=np.int32), pa.int32()),
        ints(offsets, pa.int64()),
        ints(offsets * 1000, pa.timestamp("us", tz="UTC")),
        ints(np.zeros(n, dtype=np.int32), pa.int32()),
        ints(np.zeros(n, dtype=np.int32), pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(False))


class MemoryStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, rows: int, partitions: int) -> None:
        self.rows = rows
        self.parts = partitions

    def initialOffset(self) -> dict:
        return {"row": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        return None

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        return {"row": self.rows}

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        lo, hi = start["row"], end["row"]
        cuts = [lo + (hi - lo) * i // self.parts for i in range(self.parts + 1)]
        return [InputPartition((i, cuts[i], cuts[i + 1])) for i in range(self.parts)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        index, lo, hi = partition.value
        for first in range(lo, hi, BATCH_ROWS):
            yield _batch(first, min(BATCH_ROWS, hi - first), index)

    def commit(self, end: dict) -> None:
        return None


class MemorySource(DataSource):
    """``spark.readStream.format("bench-memory").option("rows", N)``."""

    @classmethod
    def name(cls) -> str:
        return "bench-memory"

    def schema(self) -> str:
        return schema_ddl(False)

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return MemoryStreamReader(
            int(self.options.get("rows", 1_000_000)), int(self.options.get("partitions", 2))
        )
