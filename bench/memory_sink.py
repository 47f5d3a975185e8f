"""A Python data sink that takes every row Spark hands it and keeps none: the Arrow
batches are counted and dropped. Timed the same way as the epochlog sink, it shows
what Spark's Python Data Source API itself costs a writer, the ceiling any Python sink
can reach on this machine."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage


@dataclass
class Counted(WriterCommitMessage):
    rows: int


class NothingWriter(DataSourceArrowWriter):
    def write(self, iterator: Iterator[pa.RecordBatch]) -> Counted:
        return Counted(sum(batch.num_rows for batch in iterator))

    def commit(self, messages: list[Any]) -> None:
        return None


class MemorySink(DataSource):
    """``df.write.format("bench-nothing").mode("append").save()``."""

    @classmethod
    def name(cls) -> str:
        return "bench-nothing"

    def writer(self, schema: Any, overwrite: bool) -> NothingWriter:
        return NothingWriter()
