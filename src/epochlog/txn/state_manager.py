"""The transactional ids a coordinator holds, per ``__transaction_state`` partition it
leads (Kafka's TransactionStateManager): loading a partition when this broker becomes
its leader, forgetting it when it stops, and writing each state change to the log
before it takes effect.

The coordinator epoch of a partition is the leader epoch it was loaded in: markers carry
it, so a partition refuses markers from a coordinator that has since been replaced.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from epochlog.coordinator.store import OffsetsStore
from epochlog.protocol.errors import ErrorCode
from epochlog.txn.metadata import TxnMetadata
from epochlog.txn.partitioning import TRANSACTION_STATE_TOPIC, partition_for
from epochlog.txn.records import decode_key, decode_value, encode_key, encode_value
from epochlog.txn.settings import TransactionSettings

if TYPE_CHECKING:
    from epochlog.replication.replica_manager import ReplicaManager
    from epochlog.seams import Clock

log = logging.getLogger("epochlog.txn")

LOAD_YIELD_EVERY = 1000

# How a failed write of the transaction log is told to the client (Kafka's mapping):
# retriable where another try (or another coordinator) may succeed.
_WRITE_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


class TransactionStateManager:
    def __init__(
        self, replica_manager: ReplicaManager, clock: Clock, settings: TransactionSettings
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.store = OffsetsStore(
            replica_manager, clock, settings.load_buffer_size, TRANSACTION_STATE_TOPIC
        )
        self.transactions: dict[str, TxnMetadata] = {}
        # __transaction_state partition -> coordinator epoch it was loaded in.
        self.owned: dict[int, int] = {}
        self.loading: dict[int, int] = {}
        # Transactional ids with a state write in flight: other requests wait (retry).
        self.pending: set[str] = set()
        self.num_partitions = settings.num_partitions

    # -- ownership ---------------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def ownership_error(self, transactional_id: str) -> ErrorCode:
        """NONE when this broker coordinates the id now and has loaded its partition."""
        index = self.partition_of(transactional_id)
        if index in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        epoch = self.owned.get(index)
        partition = self.store.partition(index)
        if epoch is None or partition is None or not partition.is_leader:
            return ErrorCode.NOT_COORDINATOR
        if partition.leader_epoch != epoch:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def coordinator_epoch(self, transactional_id: str) -> int | None:
        return self.owned.get(self.partition_of(transactional_id))

    def owned_transactions(self) -> list[TxnMetadata]:
        return [
            meta for tid, meta in self.transactions.items() if self.partition_of(tid) in self.owned
        ]

    # -- writing -----------------------------------------------------------------------

    async def write(self, new: TxnMetadata) -> ErrorCode:
        """Append ``new`` to the log (acks=all) and install it once acknowledged by the
        same coordinator epoch; on failure the state stays as it was."""
        return await self._write(new.transactional_id, encode_value(new), new)

    async def remove(self, meta: TxnMetadata) -> ErrorCode:
        """Write the id's tombstone (``transactional.id.expiration.ms``) and forget it."""
        return await self._write(meta.transactional_id, None, None)

    async def _write(
        self, transactional_id: str, value: bytes | None, new: TxnMetadata | None
    ) -> ErrorCode:
        index = self.partition_of(transactional_id)
        epoch = self.owned.get(index)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        self.pending.add(transactional_id)
        try:
            code, _ = await self.store.append(
                index,
                [(encode_key(transactional_id), value)],
                self.settings.request_timeout_ms / 1000,
            )
        finally:
            self.pending.discard(transactional_id)
        if code != ErrorCode.NONE:
            log.warning("writing transaction %r failed: %s", transactional_id, code.name)
            return _WRITE_ERRORS.get(code, ErrorCode.UNKNOWN_SERVER_ERROR)
        if self.owned.get(index) != epoch:
            # The partition moved while we wrote: the new coordinator loads the record.
            return ErrorCode.NOT_COORDINATOR
        if new is None:
            self.transactions.pop(transactional_id, None)
        else:
            self.transactions[transactional_id] = new
        return ErrorCode.NONE

    # -- loading and unloading ---------------------------------------------------------

    async def load(self, index: int, epoch: int) -> list[TxnMetadata] | None:
        """Read a partition's log into transactions; returns those caught in
        PrepareCommit/PrepareAbort (their markers must be written again), or None when
        the load was superseded or failed."""
        self.loading[index] = epoch
        found: dict[str, TxnMetadata] = {}
        count = 0
        try:
            for stored in self.store.read_all(index):
                record = stored.record
                count += 1
                if count % LOAD_YIELD_EVERY == 0:
                    await self.clock.sleep(0)
                    if self.loading.get(index) != epoch:
                        return None
                if record is None or record.key is None:
                    continue
                tid = decode_key(record.key)
                if record.value is None:
                    found.pop(tid, None)
                else:
                    found[tid] = decode_value(tid, record.value)
        except Exception:
            log.exception("loading %s-%d failed", TRANSACTION_STATE_TOPIC, index)
            self.loading.pop(index, None)
            return None
        if self.loading.get(index) != epoch:
            return None
        for tid in [t for t in self.transactions if self.partition_of(t) == index]:
            del self.transactions[tid]
        self.transactions.update(found)
        del self.loading[index]
        self.owned[index] = epoch
        log.info(
            "loaded %s-%d at coordinator epoch %d: %d transactional ids from %d records",
            TRANSACTION_STATE_TOPIC,
            index,
            epoch,
            len(found),
            count,
        )
        return [meta for meta in found.values() if meta.state.is_preparing]

    def unload(self, index: int) -> None:
        self.loading.pop(index, None)
        if self.owned.pop(index, None) is None:
            return
        gone = [tid for tid in self.transactions if self.partition_of(tid) == index]
        for tid in gone:
            del self.transactions[tid]
        log.info("unloaded %s-%d (%d transactional ids)", TRANSACTION_STATE_TOPIC, index, len(gone))
