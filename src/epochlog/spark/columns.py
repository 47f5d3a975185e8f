"""The rows the source produces: Spark's Kafka source columns plus ``leaderEpoch``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Select and cast the client's columns to exactly what Spark expects."""
    import pyarrow as pa

    arrays = []
    for f in schema:
        column = batch.column(batch.schema.get_field_index(f.name))
        arrays.append(column if column.type == f.type else column.cast(f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
