"""The exactly-once sink (``deliveryGuarantee=exactly-once``): each write task writes
its rows in a Kafka transaction that it prepares but does not decide; the driver
commits every task's transaction when Spark commits the micro-batch (or the job), and
aborts them when Spark aborts it. See ARCHITECTURE.md, "The exactly-once Spark sink".

- Transactional id of a task: ``<prefix>-<Spark partition id>``, the prefix being
  ``transactionalIdPrefix`` or, for a streaming query, its query id (kept in the
  checkpoint, so a restarted query uses the same ids). A retried task attempt
  initialises the same id: the coordinator fences the earlier attempt and aborts what
  it left open.
- A replayed micro-batch is recognised: each task's transaction also commits, as
  offsets of the group named like its transactional id, the next batch id
  (TxnOffsetCommit); a task first initialises its id (which waits until a transaction
  being committed is complete), then reads that group's committed offset, and writes
  nothing if its batch is already there.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from epochlog.client.admin import AsyncAdmin
from epochlog.client.config import admin_settings
from epochlog.client.errors import TopicPartition
from epochlog.client.producer import AsyncProducer
from epochlog.client.transactions import GroupMetadata, PreparedTransaction
from epochlog.seams.real import real_seams
from epochlog.spark.sink_producer import TaskProducer

log = logging.getLogger("epochlog.spark.sink")

EXACTLY_ONCE = "exactly-once"
AT_LEAST_ONCE = "at-least-once"
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)
# A prepared transaction must outlive the rest of its micro-batch until the driver
# commits it: Kafka's maximum transaction.timeout.ms by default.
TRANSACTION_TIMEOUT_MS = 900_000
# What a retried InitProducerId may wait for (a transaction of an earlier attempt
# being aborted, or one being committed).
INIT_TIMEOUT_S = 120.0


def new_prefix() -> str:
    """A batch write's transactional id prefix when none is given (one per job)."""
    return f"epochlog-sink-{uuid.uuid4()}"


def task_transactional_id(prefix: str) -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return f"{prefix}-{ctx.partitionId() if ctx is not None else 0}"


def query_prefix() -> str | None:
    """The streaming query's id (stable across restarts from one checkpoint)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    return ctx.getLocalProperty("sql.streaming.queryId") if ctx is not None else None


class TransactionalTaskProducer(TaskProducer):
    """A TaskProducer whose records go into one transaction, prepared at the end."""

    def __init__(self, config: Mapping[str, object], transactional_id: str) -> None:
        settings = {
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            **config,
            "transactional.id": transactional_id,
        }
        super().__init__(settings)
        self.transactional_id = transactional_id
        self._admin_settings = admin_settings(config)
        self._run(self._producer.init_transactions(INIT_TIMEOUT_S))

    def committed_batch(self) -> int | None:
        """The last micro-batch whose rows this id's transactions committed."""

        async def read() -> int | None:
            admin = AsyncAdmin(self._admin_settings, real_seams())
            try:
                found = await admin.list_consumer_group_offsets(self.transactional_id)
            finally:
                await admin.close()
            offsets = [o.offset for o in found.values() if o is not None and o.offset >= 0]
            return max(offsets) - 1 if offsets else None

        return self._run(read())

    def begin(self) -> None:
        self._run(self._producer.begin_transaction())

    def record_batch(self, topic: str, batch_id: int) -> None:
        """Commit ``batch_id + 1`` for this id's group inside the transaction."""
        offsets = {TopicPartition(topic, 0): batch_id + 1}
        self._run(
            self._producer.send_offsets_to_transaction(
                offsets, GroupMetadata(self.transactional_id), INIT_TIMEOUT_S
            )
        )

    def prepare(self) -> PreparedTransaction:
        self.flush()
        return self._run(self._producer.prepare_transaction(self.delivery_timeout_s + 30))


def write_transactional_task(
    options: Any,
    batches: Iterator[pa.RecordBatch],
    prefix: str,
    batch_id: int | None,
    runs_of: Any,
) -> tuple[int, PreparedTransaction | None]:
    """One task's rows in one prepared transaction; (rows written, the prepared
    transaction, None when nothing was written or the batch was already committed)."""
    tid = task_transactional_id(prefix)
    producer = TransactionalTaskProducer(options.producer_config(), tid)
    try:
        if batch_id is not None:
            done = producer.committed_batch()
            if done is not None and done >= batch_id:
                log.info("%s: micro-batch %d already committed; writing nothing", tid, batch_id)
                return 0, None
        written = 0
        first_topic: str | None = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            runs = runs_of(batch, written)
            if written == 0:
                producer.begin()
                first_topic = runs[0].topic
            producer.send_runs(runs)
            written += batch.num_rows
        if written == 0:
            return 0, None
        if batch_id is not None:
            assert first_topic is not None
            producer.record_batch(first_topic, batch_id)
        return written, producer.prepare()
    finally:
        producer.close()


def complete_prepared(
    config: Mapping[str, object], prepared: list[PreparedTransaction], commit: bool
) -> None:
    """The driver's half: commit (or abort) every task's prepared transaction."""
    if not prepared:
        return

    async def one(p: PreparedTransaction) -> None:
        producer = AsyncProducer({**config, "transactional.id": p.transactional_id}, real_seams())
        try:
            await producer.complete_transaction(p, commit, INIT_TIMEOUT_S)
        finally:
            await producer.close()

    async def main() -> None:
        await asyncio.gather(*(one(p) for p in prepared))

    asyncio.run(main())
    log.info(
        "epochlog sink: %s %d task transactions",
        "committed" if commit else "aborted",
        len(prepared),
    )
