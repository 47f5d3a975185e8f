"""The transaction coordinator of one broker (Kafka's TransactionCoordinator): it serves
the transactional ids that hash to the ``__transaction_state`` partitions this broker
leads. Each request is decided by the pure rules of ``metadata.py``, written to the
log, then answered; a decided transaction's markers are written in the background and
its completion logged after them. A new leader of a partition loads it and finishes
every transaction it finds in PrepareCommit/PrepareAbort; transactions open longer than
their timeout are aborted, idle ids expire."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epochlog.coordinator.store import follow_leadership
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.tasks import BackgroundTasks
from epochlog.seams.waiting import Signal, finished_within
from epochlog.txn import metadata as rules
from epochlog.txn.markers import LeaderOf, MarkerWriter
from epochlog.txn.metadata import TopicPartition, TxnMetadata, TxnState
from epochlog.txn.partitioning import TRANSACTION_STATE_TOPIC
from epochlog.txn.settings import TransactionSettings
from epochlog.txn.state_manager import TransactionStateManager

if TYPE_CHECKING:
    from epochlog.replication.replica_manager import ReplicaManager
    from epochlog.seams import Seams

log = logging.getLogger("epochlog.txn")

AllocateProducerId = Callable[[], Awaitable[int]]
# How long a request waits for the previous transaction's markers before it is told
# CONCURRENT_TRANSACTIONS (the client then retries).
COMPLETION_WAIT_S = 5.0


@dataclass(frozen=True)
class ProducerIdAndEpoch:
    error: ErrorCode
    producer_id: int = rules.NO_PRODUCER_ID
    producer_epoch: int = rules.NO_PRODUCER_EPOCH


class TransactionCoordinator:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        seams: Seams,
        settings: TransactionSettings,
        allocate_producer_id: AllocateProducerId,
        leader_of: LeaderOf,
    ) -> None:
        self.settings = settings
        self.clock = seams.clock
        self.state = TransactionStateManager(replica_manager, seams.clock, settings)
        self.markers = MarkerWriter(
            seams.network, seams.clock, leader_of, settings.request_timeout_ms
        )
        self._allocate = allocate_producer_id
        # Serialises creating __transaction_state among concurrent FindCoordinator calls.
        self.topic_creation = asyncio.Lock()
        self._tasks = BackgroundTasks(log, "transaction coordinator task")
        # Transactions whose markers are being written -> done when they are complete.
        self._completing: dict[str, asyncio.Event] = {}
        self._wake = Signal()
        self._loop_task: asyncio.Task[None] | None = None
        self._stopped = False

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        self._loop_task = asyncio.get_running_loop().create_task(self._run())
        self.on_leadership_change()

    async def stop(self) -> None:
        self._stopped = True
        tasks = [t for t in (self._loop_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for index in list(self.state.owned):
            self.state.unload(index)
        await self.markers.close()

    def _background(self, work: Awaitable[Any]) -> None:
        self._tasks.spawn(work)

    async def _run(self) -> None:
        """Abort timed-out transactions and expire idle ids, each on its interval."""
        abort_s = self.settings.abort_interval_ms / 1000
        expire_s = self.settings.expiration_interval_ms / 1000
        now = self.clock.monotonic()
        next_abort, next_expiry = now + abort_s, now + expire_s
        while not self._stopped:
            now = self.clock.monotonic()
            try:
                if now >= next_abort:
                    next_abort = now + abort_s
                    self.abort_timed_out()
                if now >= next_expiry:
                    next_expiry = now + expire_s
                    await self.expire_ids()
            except Exception:
                log.exception("transaction coordinator tick failed")
            wait_s = min(next_abort, next_expiry) - self.clock.monotonic()
            await self._wake.wait(self.clock, max(wait_s, 0.001))

    # -- leadership --------------------------------------------------------------------

    def on_leadership_change(self, num_partitions: int | None = None) -> None:
        """Load the ``__transaction_state`` partitions this broker now leads, unload the
        others; ``num_partitions``: the topic's real partition count."""
        s = self.state
        if num_partitions and num_partitions != s.num_partitions:
            for index in list(s.owned) + list(s.loading):
                s.unload(index)
            s.num_partitions = num_partitions
        follow_leadership(
            s.store.led(),
            s.owned,
            s.loading,
            s.unload,
            lambda index, epoch: self._background(self._load(index, epoch)),
        )

    async def _load(self, index: int, epoch: int) -> None:
        unfinished = await self.state.load(index, epoch)
        for meta in unfinished or []:
            log.info(
                "%s-%d: finishing %r caught in %s",
                TRANSACTION_STATE_TOPIC,
                index,
                meta.transactional_id,
                meta.state.display,
            )
            self._complete_later(meta)

    # -- requests ----------------------------------------------------------------------

    def _busy(self, transactional_id: str) -> bool:
        return transactional_id in self.state.pending

    async def init_producer_id(
        self,
        transactional_id: str,
        timeout_ms: int,
        expected_producer_id: int = rules.NO_PRODUCER_ID,
        expected_epoch: int = rules.NO_PRODUCER_EPOCH,
    ) -> ProducerIdAndEpoch:
        if not transactional_id:
            return ProducerIdAndEpoch(ErrorCode.INVALID_REQUEST)
        await self._after_completion(transactional_id)
        error = rules.check_timeout(timeout_ms, self.settings.max_timeout_ms)
        if error == ErrorCode.NONE:
            error = self.state.ownership_error(transactional_id)
        if error == ErrorCode.NONE and self._busy(transactional_id):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return ProducerIdAndEpoch(error)
        meta = self.state.transactions.get(transactional_id)
        needs_new_id = meta is None or meta.producer_epoch >= rules.MAX_PRODUCER_EPOCH
        new_id = await self._allocate() if needs_new_id else rules.NO_PRODUCER_ID
        if self._busy(transactional_id) or self.state.transactions.get(transactional_id) != meta:
            return ProducerIdAndEpoch(ErrorCode.CONCURRENT_TRANSACTIONS)
        decision = rules.init_producer_id(
            meta,
            transactional_id,
            timeout_ms,
            expected_producer_id,
            expected_epoch,
            new_id,
            self.clock.time_ms(),
        )
        if decision.new is not None:
            code = await self.state.write(decision.new)
            if code != ErrorCode.NONE:
                return ProducerIdAndEpoch(code)
            if decision.new.state.is_preparing:
                # The previous holder's transaction is being aborted; retry later.
                self._complete_later(decision.new)
        if decision.error != ErrorCode.NONE:
            return ProducerIdAndEpoch(decision.error)
        current = self.state.transactions[transactional_id]
        return ProducerIdAndEpoch(ErrorCode.NONE, current.producer_id, current.producer_epoch)

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> ErrorCode:
        """AddPartitionsToTxn and AddOffsetsToTxn (the group's offsets partition)."""
        await self._after_completion(transactional_id)
        error = self.state.ownership_error(transactional_id)
        if error == ErrorCode.NONE and self._busy(transactional_id):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return error
        decision = rules.add_partitions(
            self.state.transactions.get(transactional_id),
            producer_id,
            producer_epoch,
            partitions,
            self.clock.time_ms(),
        )
        if decision.new is not None and decision.error == ErrorCode.NONE:
            return await self.state.write(decision.new)
        return decision.error

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """KIP-890's question from a partition leader: answered from the state as it
        is, without waiting for a write under way (the leader's append rechecks)."""
        error = ErrorCode.INVALID_REQUEST if not transactional_id else ErrorCode.NONE
        if error == ErrorCode.NONE:
            error = self.state.ownership_error(transactional_id)
        if error != ErrorCode.NONE:
            return dict.fromkeys(partitions, error)
        return rules.verify_partitions(
            self.state.transactions.get(transactional_id), producer_id, producer_epoch, partitions
        )

    async def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> ErrorCode:
        """EndTxn: answered once PrepareCommit/PrepareAbort is in the log; the markers
        and the completion follow in the background (Kafka answers at the same point)."""
        error = self.state.ownership_error(transactional_id)
        if error == ErrorCode.NONE and self._busy(transactional_id):
            error = ErrorCode.CONCURRENT_TRANSACTIONS
        if error != ErrorCode.NONE:
            return error
        decision = rules.end_txn(
            self.state.transactions.get(transactional_id),
            producer_id,
            producer_epoch,
            commit,
            self.clock.time_ms(),
        )
        if decision.error != ErrorCode.NONE or decision.new is None:
            return decision.error
        code = await self.state.write(decision.new)
        if code == ErrorCode.NONE:
            self._complete_later(decision.new)
        return code

    # -- completing transactions -------------------------------------------------------

    def _complete_later(self, meta: TxnMetadata) -> None:
        if meta.transactional_id in self._completing:
            return
        self._completing[meta.transactional_id] = asyncio.Event()
        self._background(self._complete(meta))

    async def _after_completion(self, transactional_id: str) -> None:
        """A request that would be told CONCURRENT_TRANSACTIONS while the previous
        transaction's markers are written waits for them a little first: clients begin
        their next transaction right after EndTxn is answered, and a producer told to
        retry its AddPartitionsToTxn may abort meanwhile with nothing added (the
        coordinator would then refuse the abort)."""
        done = self._completing.get(transactional_id)
        if done is not None:
            await finished_within(self.clock, done.wait(), COMPLETION_WAIT_S)

    async def _complete(self, meta: TxnMetadata) -> None:
        tid = meta.transactional_id
        try:
            epoch = self.state.coordinator_epoch(tid)
            if epoch is None:
                return

            def still_coordinator() -> bool:
                return (
                    self.state.coordinator_epoch(tid) == epoch
                    and self.state.transactions.get(tid) == meta
                )

            if not await self.markers.write(meta, epoch, still_coordinator):
                return
            while still_coordinator():
                code = await self.state.write(rules.completed(meta, self.clock.time_ms()))
                if code == ErrorCode.NONE:
                    # One line per transaction: debug, as Kafka's coordinator logs it.
                    log.debug(
                        "%r: producer %d epoch %d %s",
                        tid,
                        meta.producer_id,
                        meta.producer_epoch,
                        "committed" if meta.state == TxnState.PREPARE_COMMIT else "aborted",
                    )
                    return
                if code == ErrorCode.NOT_COORDINATOR:
                    return
                await self.clock.sleep(0.1)
        finally:
            finished = self._completing.pop(tid, None)
            if finished is not None:
                finished.set()

    def abort_timed_out(self) -> None:
        """Abort every transaction here open longer than its ``transaction.timeout.ms``."""
        now_ms = self.clock.time_ms()
        for meta in self.state.owned_transactions():
            aborted = rules.abort_timed_out(meta, now_ms)
            tid = meta.transactional_id
            if aborted is None or self._busy(tid) or tid in self._completing:
                continue
            log.info(
                "%r: transaction of producer %d open %d ms > timeout %d ms: aborting",
                tid,
                meta.producer_id,
                now_ms - meta.start_ms,
                meta.timeout_ms,
            )
            self._background(self._abort(aborted))

    async def _abort(self, aborted: TxnMetadata) -> None:
        if await self.state.write(aborted) == ErrorCode.NONE:
            self._complete_later(aborted)

    async def expire_ids(self) -> None:
        """``transactional.id.expiration.ms``: forget ids idle that long (a tombstone)."""
        now_ms = self.clock.time_ms()
        for meta in self.state.owned_transactions():
            tid = meta.transactional_id
            if self._busy(tid) or not rules.expired(meta, now_ms, self.settings.id_expiration_ms):
                continue
            if await self.state.remove(meta) == ErrorCode.NONE:
                log.info("%r: expired after %d ms idle", tid, now_ms - meta.last_update_ms)

    # -- operators ---------------------------------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self.state.ownership_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        meta = self.state.transactions.get(transactional_id)
        if meta is None:
            return ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None
        return ErrorCode.NONE, meta

    def list_transactions(
        self, states: set[TxnState] | None, producer_ids: set[int] | None, min_duration_ms: int
    ) -> tuple[ErrorCode, list[TxnMetadata]]:
        error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if self.state.loading else ErrorCode.NONE
        now_ms = self.clock.time_ms()
        found = [
            meta
            for meta in self.state.owned_transactions()
            if (states is None or meta.state in states)
            and (producer_ids is None or meta.producer_id in producer_ids)
            and (
                min_duration_ms < 0
                or (meta.state == TxnState.ONGOING and now_ms - meta.start_ms >= min_duration_ms)
            )
        ]
        return error, sorted(found, key=lambda m: m.transactional_id)
