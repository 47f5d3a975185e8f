"""The epochlog sinks: ``df.write.format("epochlog")`` and
``df.writeStream.format("epochlog")``.

By default delivery is AT-LEAST-ONCE, like Spark's own Kafka sink: every write task has
its own idempotent producer (no duplicates from the producer's own retries) and flushes
before the task reports success, so a committed batch is in the log; but a task or batch
that Spark retries (a failed task, a driver restarted from its checkpoint before the
batch was committed) writes its rows again. With ``deliveryGuarantee=exactly-once``
each task writes in a Kafka transaction that the driver commits with the micro-batch
(spark/sink_transactions.py): read_committed readers see each row exactly once, across
task retries, killed executors and restarted queries. ``transactionalIdPrefix`` names
the transactional ids (default: the streaming query's id; for a batch write, a new one
per write).

Columns, named as Spark's Kafka sink names them: ``value`` (required, binary or string),
``key`` (optional, binary or string), ``topic`` (string; the ``topic`` option, when
given, overrides it for every row), ``partition`` (optional int; null or absent means
the producer's partitioner), ``headers`` (optional ``array<struct<key: string, value:
binary>>``). Other columns are ignored. Options: ``bootstrap.servers`` (or
``kafka.bootstrap.servers``), ``topic``, and any ``kafka.<setting>`` passed to the
producer by the Kafka name of the setting (``kafka.linger.ms``, ``kafka.acks``...);
``batch.size`` is 1000000 unless given (SINK_PRODUCER_DEFAULTS).
Topics must exist: the sink does not create them."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from epochlog.client.config import producer_config
from epochlog.client.errors import ConfigError
from epochlog.client.transactions import PreparedTransaction
from epochlog.protocol.column_rows import BinaryColumn
from epochlog.spark.columns import valid, values
from epochlog.spark.sink_producer import Run, TaskProducer
from epochlog.spark.sink_transactions import (
    AT_LEAST_ONCE,
    EXACTLY_ONCE,
    GUARANTEES,
    complete_prepared,
    new_prefix,
    query_prefix,
    write_transactional_task,
)

log = logging.getLogger("epochlog.spark.sink")

CLIENT_PREFIX = "kafka."
# What the sink's producers take unless a kafka.<setting> option says otherwise. A
# task writes in bulk: librdkafka's batch.size, not the Java client's 16384 bytes, at
# which a task spends its time on batches, not records (0.5 against 3.2 million rows/s
# by one task, outside Spark).
SINK_PRODUCER_DEFAULTS = {"client.id": "epochlog-spark-sink", "batch.size": "1000000"}


class SinkError(ValueError):
    """Input or options the sink cannot write, said in the user's terms."""


@dataclass(frozen=True)
class SinkOptions:
    """What a write task needs; pickled to the executors with the writer."""

    bootstrap_servers: str
    topic: str | None = None
    producer_settings: dict[str, str] = field(default_factory=dict)
    delivery_guarantee: str = AT_LEAST_ONCE
    transactional_id_prefix: str | None = None

    @property
    def exactly_once(self) -> bool:
        return self.delivery_guarantee == EXACTLY_ONCE

    def producer_config(self) -> dict[str, object]:
        return {
            **SINK_PRODUCER_DEFAULTS,
            **self.producer_settings,
            "bootstrap.servers": self.bootstrap_servers,
        }


def parse_sink_options(options: Mapping[str, str]) -> SinkOptions:
    """Checked on the driver, so a wrong option fails the query before any task runs."""
    lowered = {str(k).lower(): v for k, v in options.items()}
    servers = lowered.get("kafka.bootstrap.servers") or lowered.get("bootstrap.servers")
    if not servers:
        raise SinkError("epochlog sink option bootstrap.servers: required")
    settings = {
        k[len(CLIENT_PREFIX) :]: str(v)
        for k, v in lowered.items()
        if k.startswith(CLIENT_PREFIX) and k != "kafka.bootstrap.servers"
    }
    topic = lowered.get("topic")
    if topic is not None and not topic.strip():
        raise SinkError("epochlog sink option topic: empty")
    guarantee = str(lowered.get("deliveryguarantee", AT_LEAST_ONCE)).strip().lower()
    if guarantee not in GUARANTEES:
        raise SinkError(
            f"epochlog sink option deliveryGuarantee: {guarantee!r} is not one of "
            f"{', '.join(GUARANTEES)}"
        )
    prefix = lowered.get("transactionalidprefix")
    if "transactional.id" in settings:
        raise SinkError(
            "epochlog sink option kafka.transactional.id: each task has its own; "
            "use transactionalIdPrefix with deliveryGuarantee=exactly-once"
        )
    result = SinkOptions(str(servers), topic, settings, guarantee, prefix)
    try:
        producer_config(result.producer_config())
    except ConfigError as exc:
        raise SinkError(f"epochlog sink option kafka.{exc}") from None
    return result


BYTES_TYPES = (BinaryType, StringType)
PARTITION_TYPES = (IntegerType, ShortType, LongType)


def _is_headers_type(dt: DataType) -> bool:
    if not isinstance(dt, ArrayType) or not isinstance(dt.elementType, StructType):
        return False
    fields = {f.name.lower(): f.dataType for f in dt.elementType.fields}
    return (
        set(fields) == {"key", "value"}
        and isinstance(fields["key"], StringType)
        and isinstance(fields["value"], BYTES_TYPES)
    )


def check_schema(schema: StructType, options: SinkOptions) -> None:
    """Refuse, on the driver, input the sink could not write, naming the column."""
    columns = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in columns:
        raise SinkError(
            f"epochlog sink: a value column is required (binary or string); the input has "
            f"{', '.join(schema.fieldNames()) or 'no columns'}"
        )
    for name in ("key", "value"):
        if name in columns and not isinstance(columns[name], BYTES_TYPES):
            raise SinkError(
                f"epochlog sink: column {name} must be binary or string, "
                f"not {columns[name].simpleString()}"
            )
    if options.topic is None:
        if "topic" not in columns:
            raise SinkError(
                "epochlog sink: no topic column and no topic option: add a string column "
                "named topic or set .option('topic', ...)"
            )
        if not isinstance(columns["topic"], StringType):
            raise SinkError(
                f"epochlog sink: column topic must be a string, "
                f"not {columns['topic'].simpleString()}"
            )
    if "partition" in columns and not isinstance(columns["partition"], PARTITION_TYPES):
        raise SinkError(
            f"epochlog sink: column partition must be an int, "
            f"not {columns['partition'].simpleString()}"
        )
    if "headers" in columns and not _is_headers_type(columns["headers"]):
        raise SinkError(
            "epochlog sink: column headers must be array<struct<key: string, value: binary>>, "
            f"not {columns['headers'].simpleString()}"
        )


def _column(batch: pa.RecordBatch, name: str) -> pa.Array | None:
    for i, f in enumerate(batch.schema):
        if f.name.lower() == name:
            return batch.column(i)
    return None


def _binary(column: pa.Array) -> BinaryColumn:
    """A binary or string column's buffers as they are (strings as their UTF-8 bytes),
    nulls with length -1: no Python object per row."""
    wide = pa.types.is_large_binary(column.type) or pa.types.is_large_string(column.type)
    n, width = len(column), 8 if wide else 4
    _, offsets_buffer, data_buffer = column.buffers()
    offsets = np.frombuffer(
        offsets_buffer, np.int64 if wide else np.int32, n + 1, column.offset * width
    ).astype(np.int64)
    data = (
        np.frombuffer(data_buffer, np.uint8) if data_buffer is not None else np.empty(0, np.uint8)
    )
    lens = np.diff(offsets)
    if column.null_count:
        lens[~valid(column)] = -1
    return BinaryColumn(data, offsets[:-1], lens)


def _partitions(column: pa.Array, first_row: int) -> np.ndarray:
    """The partition column as int64, -1 (the partitioner's choice) for a null; a
    negative partition is refused naming its row."""
    kinds = {pa.int16(): np.int16, pa.int32(): np.int32, pa.int64(): np.int64}
    partitions = values(column, kinds[column.type]).astype(np.int64)
    given = valid(column)
    negative = np.flatnonzero(given & (partitions < 0))
    if len(negative):
        row = int(negative[0])
        raise SinkError(
            f"epochlog sink: row {first_row + row} of this task has partition {partitions[row]}"
        )
    partitions[~given] = -1
    return partitions


def _headers(column: pa.Array) -> list[list[tuple[str, bytes | None]]]:
    out = []
    for entries in column.to_pylist():
        row = []
        for entry in entries or ():
            value = entry["value"]
            row.append((entry["key"], value.encode() if isinstance(value, str) else value))
        out.append(row)
    return out


def batch_runs(batch: pa.RecordBatch, options: SinkOptions, first_row: int) -> list[Run]:
    """An Arrow batch as columns, split where the topic changes (one run for a topic
    option); a null topic or a negative partition is refused naming its row."""
    n = batch.num_rows
    value_col = _column(batch, "value")
    if value_col is None:
        raise SinkError("epochlog sink: the input has no value column")
    whole = Run(options.topic or "", _binary(value_col))
    key_col = _column(batch, "key")
    whole.keys = _binary(key_col) if key_col is not None else None
    part_col = _column(batch, "partition")
    whole.partitions = _partitions(part_col, first_row) if part_col is not None else None
    header_col = _column(batch, "headers")
    whole.headers = _headers(header_col) if header_col is not None else None
    if options.topic is not None:
        return [whole]
    topic_col = _column(batch, "topic")
    if topic_col is None:
        raise SinkError("epochlog sink: no topic column and no topic option")
    topics: list[str | None] = topic_col.to_pylist()
    runs: list[Run] = []
    start = 0
    for i in range(1, n + 1):
        if i < n and topics[i] == topics[start]:
            continue
        topic = topics[start]
        if topic is None:
            raise SinkError(
                f"epochlog sink: row {first_row + start} of this task has a null topic and "
                "no topic option is set"
            )
        runs.append(whole.rows(topic, start, i))
        start = i
    return runs


@dataclass
class SinkCommitMessage(WriterCommitMessage):
    """What one task wrote (all of it acknowledged by the brokers)."""

    records: int
    batch_id: int | None = None
    # exactly-once: the task's transaction, for the driver to commit or abort.
    prepared: PreparedTransaction | None = None


def write_task(
    options: SinkOptions,
    batches: Iterator[pa.RecordBatch],
    prefix: str | None = None,
    batch_id: int | None = None,
) -> SinkCommitMessage:
    """The body of one write task: produce every row, flush, then report success (in a
    prepared transaction with ``deliveryGuarantee=exactly-once``)."""
    if options.exactly_once:
        assert prefix is not None
        written, prepared = write_transactional_task(
            options, batches, prefix, batch_id, lambda b, first: batch_runs(b, options, first)
        )
        return SinkCommitMessage(written, batch_id, prepared)
    producer = TaskProducer(options.producer_config())
    try:
        written = 0
        for batch in batches:
            if batch.num_rows == 0:
                continue
            runs = batch_runs(batch, options, written)
            try:
                producer.send_runs(runs)
            except ValueError as exc:  # e.g. a partition the topic does not have
                raise SinkError(f"epochlog sink: {exc}") from exc
            written += batch.num_rows
        producer.flush()
        return SinkCommitMessage(written)
    finally:
        producer.close()


def _streaming_batch_id() -> int | None:
    """Spark sets this task property for micro-batches (commit/abort get it as an
    argument; write does not)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    raw = ctx.getLocalProperty("streaming.sql.batchId") if ctx is not None else None
    return int(raw) if raw is not None else None


def _total(messages: list[Any]) -> int:
    return sum(m.records for m in messages if isinstance(m, SinkCommitMessage))


def _prepared(messages: list[Any]) -> list[PreparedTransaction]:
    return [m.prepared for m in messages if isinstance(m, SinkCommitMessage) and m.prepared]


class EpochlogBatchWriter(DataSourceArrowWriter):
    """``df.write.format("epochlog")``: append only (a log cannot be overwritten)."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        # One prefix per write job, chosen on the driver and shipped to the tasks.
        self.prefix = options.transactional_id_prefix or new_prefix()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        return write_task(self.options, iterator, self.prefix)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        complete_prepared(self.options.producer_config(), _prepared(list(messages)), True)
        log.info("epochlog sink: %d records written", _total(list(messages)))

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.exactly_once:
            complete_prepared(self.options.producer_config(), _prepared(list(messages)), False)
            log.warning("epochlog sink: write aborted; its transactions were aborted")
            return
        # Nothing to undo: what succeeded tasks wrote stays in the log (at-least-once).
        log.warning(
            "epochlog sink: write aborted; %d records of succeeded tasks remain in the log",
            _total(list(messages)),
        )


class EpochlogStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("epochlog")``: each micro-batch's tasks flush before
    they succeed; a replayed batch is written again (at-least-once), or, exactly-once,
    recognised and skipped, its tasks' transactions committed with the batch."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SinkCommitMessage:
        batch_id = _streaming_batch_id()
        prefix = self.options.transactional_id_prefix or query_prefix()
        message = write_task(self.options, iterator, prefix, batch_id)
        message.batch_id = batch_id
        return message

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        complete_prepared(self.options.producer_config(), _prepared(list(messages)), True)
        log.info("epochlog sink: batch %d: %d records written", batchId, _total(list(messages)))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.options.exactly_once:
            complete_prepared(self.options.producer_config(), _prepared(list(messages)), False)
            log.warning("epochlog sink: batch %d aborted; its transactions were aborted", batchId)
            return
        log.warning(
            "epochlog sink: batch %d aborted; %d records of succeeded tasks remain in the log",
            batchId,
            _total(list(messages)),
        )


def batch_writer(options: Mapping[str, str], schema: StructType, overwrite: bool) -> Any:
    """What ``DefaultSource.writer`` returns, after checking options and columns."""
    if overwrite:
        raise SinkError("epochlog sink: save mode overwrite is not supported (use append)")
    parsed = parse_sink_options(options)
    check_schema(schema, parsed)
    return EpochlogBatchWriter(parsed)


def stream_writer(options: Mapping[str, str], schema: StructType) -> Any:
    """What ``DefaultSource.streamWriter`` returns (any output mode: rows are appended)."""
    parsed = parse_sink_options(options)
    check_schema(schema, parsed)
    return EpochlogStreamWriter(parsed)
