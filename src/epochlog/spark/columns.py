"""The rows the source produces: Spark's Kafka source columns plus ``leaderEpoch``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pyarrow as pa

BASE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int, leaderEpoch int"
)
HEADERS_FIELD = "headers array<struct<key: string, value: binary>>"


def schema_ddl(include_headers: bool) -> str:
    """The DDL schema string Spark asks the data source for."""
    return BASE_SCHEMA + (", " + HEADERS_FIELD if include_headers else "")


def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema ``read()`` yields, matching ``schema_ddl`` column for column.
    pyarrow is imported here, not with the module: Spark's planner processes need only
    ``schema_ddl``."""
    import pyarrow as pa

    fields = [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        # Spark's own conversion uses microseconds for TimestampType.
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("leaderEpoch", pa.int32()),
    ]
    if include_headers:
        fields.append(
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
        )
    return pa.schema(fields)


def values(column: pa.Array, dtype: type[np.generic]) -> np.ndarray:
    """A numpy view of a primitive column's values, nulls included as stored.
    ``Array.to_numpy`` would import pandas: 0.6 s in every new Spark worker."""
    import numpy as np

    width = np.dtype(dtype).itemsize
    return np.frombuffer(
        column.buffers()[1], dtype=dtype, count=len(column), offset=column.offset * width
    )


def valid(column: pa.Array) -> np.ndarray:
    """Which rows of a column are not null, as booleans."""
    import numpy as np

    bitmap = column.buffers()[0]
    if bitmap is None or not column.null_count:
        return np.ones(len(column), dtype=bool)
    bits = np.unpackbits(
        np.frombuffer(bitmap, dtype=np.uint8), count=column.offset + len(column), bitorder="little"
    )
    return bits[column.offset :].astype(bool)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Select and convert the client's columns to exactly what Spark expects."""
    import pyarrow as pa

    arrays = []
    for f in schema:
        column = batch.column(batch.schema.get_field_index(f.name))
        if column.type != f.type:
            column = _convert(column, f.type)
        arrays.append(column)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _convert(column: pa.Array, kind: pa.DataType) -> pa.Array:
    """Kafka's millisecond timestamps to Spark's microseconds in numpy; anything else
    through Arrow's cast (which loads pyarrow.compute)."""
    import numpy as np
    import pyarrow as pa

    millis = pa.timestamp("ms", tz="UTC")
    if column.type == millis and kind == pa.timestamp("us", tz="UTC") and not column.null_count:
        micros = values(column, np.int64) * 1000
        return pa.Array.from_buffers(kind, len(column), [None, pa.py_buffer(micros)])
    return column.cast(kind)
