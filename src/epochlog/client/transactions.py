"""The transactional producer's state and its talks with the coordinators (Kafka's
TransactionManager, librdkafka's rdkafka_txnmgr in spirit): InitProducerId with the
transactional id, the partitions added to the open transaction, offsets sent to it
(AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator with each offset's
leader epoch), and EndTxn.

Errors are classified as librdkafka does: *fatal* ones (fenced by a newer holder of the
transactional id, an unsupported broker) make the producer unusable; *abortable* ones
(a record that could not be delivered inside the transaction) allow only
``abort_transaction``; *retriable* ones (the coordinator moved or is busy) are retried
here until the call's timeout.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
    TxnOffsetCommitRequest,
)

from epochlog.client.errors import ClientError, DeliveryError, TopicPartition
from epochlog.client.metadata import Cluster, backoff_seconds
from epochlog.client.producer_id import ProducerIds
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock

log = logging.getLogger("epochlog.client.producer")

FIND_COORDINATOR_VERSION = 4
INIT_PRODUCER_ID_VERSION = 4
ADD_PARTITIONS_VERSION = 3
ADD_OFFSETS_VERSION = 3
END_TXN_VERSION = 3
TXN_OFFSET_COMMIT_VERSION = 3
GROUP_KEY, TRANSACTION_KEY = 0, 1
_TxnPartition = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition

FATAL = {
    ErrorCode.PRODUCER_FENCED,
    ErrorCode.INVALID_PRODUCER_EPOCH,
    ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
    ErrorCode.UNSUPPORTED_VERSION,
    ErrorCode.INVALID_TRANSACTION_TIMEOUT,
    ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
}
COORDINATOR_MOVED = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
RETRIABLE = COORDINATOR_MOVED | {
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.UNSTABLE_OFFSET_COMMIT,
}


class TransactionError(ClientError):
    """A transactional call failed: ``fatal`` (the producer is unusable), ``abortable``
    (abort the transaction, then go on) or ``retriable`` (try the call again)."""

    def __init__(
        self,
        message: str,
        code: ErrorCode | None = None,
        fatal: bool = False,
        abortable: bool = False,
        retriable: bool = False,
    ) -> None:
        super().__init__(message if code is None else f"{message}: {code.name}")
        self.code = code
        self.fatal = fatal
        self.abortable = abortable
        self.retriable = retriable


@dataclass(frozen=True)
class GroupMetadata:
    """What TxnOffsetCommit needs of the consumer whose offsets are committed
    (``AsyncConsumer.consumer_group_metadata()``); a generation of -1 and no member id
    commit for a group without joining it."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class PreparedTransaction:
    """A transaction whose records are all acknowledged but not yet decided: anyone
    holding this can commit or abort it (``complete_transaction``; KIP-939's idea), as
    the Spark sink's driver does for its tasks."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


class State(enum.Enum):
    UNINITIALIZED = "uninitialized"
    READY = "ready"
    IN_TRANSACTION = "in transaction"
    ABORTABLE_ERROR = "abortable error"
    FATAL_ERROR = "fatal error"


class TransactionManager:
    def __init__(
        self, cluster: Cluster, clock: Clock, config: Mapping[str, Any], ids: ProducerIds
    ) -> None:
        self.transactional_id: str = config["transactional.id"]
        self._timeout_ms: int = config["transaction.timeout.ms"]
        self._cluster = cluster
        self._clock = clock
        self._config = config
        self._ids = ids
        self.state = State.UNINITIALIZED
        self._error: TransactionError | None = None
        self.partitions: set[TopicPartition] = set()
        # Anything was added to the open transaction (partitions or a group's offsets).
        self._touched = False

    # -- state -------------------------------------------------------------------------

    def _require(self, *states: State) -> None:
        if self.state == State.FATAL_ERROR:
            assert self._error is not None
            raise self._error
        if self.state not in states:
            raise TransactionError(
                f"transactional id {self.transactional_id}: not allowed while {self.state.value}"
                + (f" ({self._error})" if self._error else "")
            )

    def check_send(self) -> None:
        """Records may be sent only inside a transaction (Kafka's rule)."""
        if self.state != State.IN_TRANSACTION:
            self._require(State.IN_TRANSACTION)

    def abortable(self, reason: str, code: ErrorCode | None = None) -> None:
        """A record of the transaction failed: only an abort may follow."""
        if code in FATAL:
            self._fatal(TransactionError(reason, code, fatal=True))
        elif self.state == State.IN_TRANSACTION:
            self._error = TransactionError(reason, code, abortable=True)
            self.state = State.ABORTABLE_ERROR
            log.warning("transaction of %s must be aborted: %s", self.transactional_id, reason)

    def _fatal(self, error: TransactionError) -> None:
        self._error = error
        self.state = State.FATAL_ERROR
        log.error("transactional producer %s unusable: %s", self.transactional_id, error)

    def _check(self, code: ErrorCode, what: str) -> None:
        if code == ErrorCode.NONE:
            return
        if code in FATAL:
            self._fatal(TransactionError(what, code, fatal=True))
            raise self._error  # type: ignore[misc]
        raise TransactionError(what, code, abortable=True)

    # -- coordinators ------------------------------------------------------------------

    async def _find(self, key: str, key_type: int) -> tuple[str, int]:
        request = FindCoordinatorRequest(key_type=key_type, coordinator_keys=[key])
        await self._cluster.refresh([])
        for broker in sorted(self._cluster.cache.brokers):
            try:
                response = await self._cluster.send(broker, request, FIND_COORDINATOR_VERSION)
            except (ConnectionError, OSError):
                continue
            (answer,) = response.coordinators
            code = ErrorCode(answer.error_code)
            if code == ErrorCode.NONE:
                return answer.host, answer.port
            raise TransactionError(f"FindCoordinator for {key}", code, retriable=True)
        raise TransactionError(f"no broker answered FindCoordinator for {key}", retriable=True)

    async def _call(
        self, key: str, key_type: int, request: Any, version: int, deadline: float, check: Any
    ) -> Any:
        """Send ``request`` to the coordinator of ``key`` until ``check(response)``
        returns a code that is not retriable, or the deadline passes."""
        attempt = 0
        while True:
            code: ErrorCode | None = None
            try:
                host, port = await self._find(key, key_type)
                conn = await self._cluster.connection_to((host, port))
                response = await conn.send(request, version)
                code = check(response)
                if code not in RETRIABLE:
                    return response
            except TransactionError as exc:
                if not exc.retriable:
                    raise
                code = exc.code
            except (ConnectionError, OSError):
                code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if self._clock.monotonic() >= deadline:
                raise TransactionError(
                    f"{type(request).__name__} for {key} timed out", code, retriable=True
                )
            await self._clock.sleep(
                backoff_seconds(attempt, self._config["retry.backoff.ms"], 1000)
            )
            attempt += 1

    def _deadline(self, timeout_s: float | None) -> float:
        if timeout_s is None:
            timeout_s = self._config["request.timeout.ms"] / 1000 * 2
        return self._clock.monotonic() + timeout_s

    # -- the calls -----------------------------------------------------------------------

    async def init(self, timeout_s: float | None = None) -> None:
        """InitProducerId with the transactional id: fences every earlier holder and
        aborts what it left open. With an id already held (after an abort, KIP-360) it
        names it, so the coordinator bumps that epoch."""
        self._require(State.UNINITIALIZED, State.READY, State.ABORTABLE_ERROR)
        pid, epoch = self._ids.producer
        request = InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self._timeout_ms,
            producer_id=pid,
            producer_epoch=epoch,
        )
        response = await self._call(
            self.transactional_id,
            TRANSACTION_KEY,
            request,
            INIT_PRODUCER_ID_VERSION,
            self._deadline(timeout_s),
            lambda r: ErrorCode(r.error_code),
        )
        self._check(ErrorCode(response.error_code), "InitProducerId")
        self._ids.reset((response.producer_id, response.producer_epoch))
        self.partitions.clear()
        self._touched = False
        self._error = None
        self.state = State.READY

    def begin(self) -> None:
        self._require(State.READY)
        self.state = State.IN_TRANSACTION

    async def add_partitions(self, tps: Iterable[TopicPartition]) -> None:
        """AddPartitionsToTxn for partitions new to this transaction, before their first
        batch is sent; raises TransactionError (and leaves the state abortable)."""
        new = sorted(set(tps) - self.partitions)
        if not new:
            return
        pid, epoch = self._ids.producer
        by_topic: dict[str, list[int]] = {}
        for tp in new:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.transactional_id,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[
                AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=t, partitions=p)
                for t, p in by_topic.items()
            ],
        )

        def worst(response: Any) -> ErrorCode:
            codes = [
                ErrorCode(p.partition_error_code)
                for t in response.results_by_topic_v3_and_below
                for p in t.results_by_partition
            ]
            ignored = (ErrorCode.NONE, ErrorCode.OPERATION_NOT_ATTEMPTED)
            bad = [c for c in codes if c not in ignored]
            return bad[0] if bad else ErrorCode.NONE

        try:
            response = await self._call(
                self.transactional_id,
                TRANSACTION_KEY,
                request,
                ADD_PARTITIONS_VERSION,
                self._deadline(None),
                worst,
            )
            self._check(worst(response), "AddPartitionsToTxn")
        except TransactionError as exc:
            self.abortable(str(exc), exc.code)
            raise
        self.partitions.update(new)
        self._touched = True

    async def send_offsets(
        self,
        offsets: Mapping[TopicPartition, tuple[int, int]],
        group: GroupMetadata,
        timeout_s: float | None = None,
    ) -> None:
        """Commit ``offsets`` (partition -> (offset, leader epoch)) for ``group`` inside
        the transaction: they become the group's committed offsets with its commit."""
        self._require(State.IN_TRANSACTION)
        deadline = self._deadline(timeout_s)
        pid, epoch = self._ids.producer
        add = AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=pid,
            producer_epoch=epoch,
            group_id=group.group_id,
        )
        try:
            answer = await self._call(
                self.transactional_id,
                TRANSACTION_KEY,
                add,
                ADD_OFFSETS_VERSION,
                deadline,
                lambda r: ErrorCode(r.error_code),
            )
            self._check(ErrorCode(answer.error_code), "AddOffsetsToTxn")
            self._touched = True
            by_topic: dict[str, list[Any]] = {}
            for tp, (offset, leader_epoch) in offsets.items():
                by_topic.setdefault(tp.topic, []).append(
                    _TxnPartition(
                        partition_index=tp.partition,
                        committed_offset=offset,
                        committed_leader_epoch=leader_epoch,
                        committed_metadata="",
                    )
                )
            commit = TxnOffsetCommitRequest(
                transactional_id=self.transactional_id,
                group_id=group.group_id,
                producer_id=pid,
                producer_epoch=epoch,
                generation_id=group.generation_id,
                member_id=group.member_id,
                group_instance_id=group.group_instance_id,
                topics=[
                    TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=t, partitions=p)
                    for t, p in by_topic.items()
                ],
            )

            def worst(response: Any) -> ErrorCode:
                codes = [ErrorCode(p.error_code) for t in response.topics for p in t.partitions]
                bad = [c for c in codes if c != ErrorCode.NONE]
                return bad[0] if bad else ErrorCode.NONE

            answer = await self._call(
                group.group_id, GROUP_KEY, commit, TXN_OFFSET_COMMIT_VERSION, deadline, worst
            )
            self._check(worst(answer), "TxnOffsetCommit")
        except TransactionError as exc:
            if not exc.fatal:
                self.abortable(str(exc), exc.code)
            raise

    async def end(self, commit: bool, timeout_s: float | None = None) -> None:
        """EndTxn; the caller has flushed (commit) or dropped (abort) the records."""
        if commit:
            self._require(State.IN_TRANSACTION)
        else:
            self._require(State.IN_TRANSACTION, State.ABORTABLE_ERROR)
        if self._touched or commit:
            pid, epoch = self._ids.producer
            await self.complete(pid, epoch, commit, timeout_s)
        self.partitions.clear()
        self._touched = False
        self._error = None
        self.state = State.READY

    async def complete(
        self, producer_id: int, epoch: int, commit: bool, timeout_s: float | None = None
    ) -> None:
        """EndTxn for this transactional id as (producer id, epoch): from the producer,
        or from whoever holds a PreparedTransaction. A retry of a decision already
        taken is answered NONE by the coordinator."""
        request = EndTxnRequest(
            transactional_id=self.transactional_id,
            producer_id=producer_id,
            producer_epoch=epoch,
            committed=commit,
        )
        response = await self._call(
            self.transactional_id,
            TRANSACTION_KEY,
            request,
            END_TXN_VERSION,
            self._deadline(timeout_s),
            lambda r: ErrorCode(r.error_code),
        )
        self._check(ErrorCode(response.error_code), "EndTxn")

    def prepared(self) -> PreparedTransaction:
        self._require(State.IN_TRANSACTION)
        pid, epoch = self._ids.producer
        return PreparedTransaction(self.transactional_id, pid, epoch)


class TransactionalApi:
    """The transactional calls of AsyncProducer (kept here, beside the manager they
    drive). Kafka's order: ``init_transactions`` once, then per transaction
    ``begin_transaction``, sends, optionally ``send_offsets_to_transaction``, and
    ``commit_transaction`` or ``abort_transaction``."""

    # What AsyncProducer provides.
    _txn: TransactionManager | None
    _queues: dict[TopicPartition, Any]
    _in_flight: set[TopicPartition]
    _wake: asyncio.Event
    flush: Callable[[float | None], Awaitable[bool]]
    _fail: Callable[[Any, DeliveryError], None]

    def _manager(self) -> TransactionManager:
        if self._txn is None:
            raise TransactionError("transactional.id is not set: transactions are off")
        return self._txn

    async def init_transactions(self, timeout: float | None = None) -> None:
        await self._manager().init(timeout)

    async def begin_transaction(self) -> None:
        self._manager().begin()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, Any],
        group_metadata: GroupMetadata,
        timeout: float | None = None,
    ) -> None:
        """``offsets``: partition -> the consumer's next position, an OffsetAndEpoch (its
        leader epoch is committed with it, KIP-320) or a plain offset."""
        wanted = {
            TopicPartition(*tp): (
                (int(pos), -1) if isinstance(pos, int) else (pos.offset, pos.leader_epoch)
            )
            for tp, pos in offsets.items()
        }
        await self._manager().send_offsets(wanted, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Deliver every record of the transaction, then commit it. A record that could
        not be delivered makes this raise an abortable TransactionError."""
        manager = self._manager()
        manager.check_send()
        if not await self.flush(timeout):
            raise TransactionError("records not delivered before the timeout", retriable=True)
        await manager.end(True, timeout)

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Drop the records not sent yet, wait for those in flight, abort, and start a
        new epoch (so that no sequence of a dropped record is missing at a leader)."""
        manager = self._manager()
        self._drop_unsent("transaction aborted")
        await self.flush(timeout)
        await manager.end(False, timeout)
        await manager.init(timeout)

    async def prepare_transaction(self, timeout: float | None = None) -> PreparedTransaction:
        """Deliver every record and hand back what decides the transaction, leaving it
        open: a PreparedTransaction that ``complete_transaction`` (here or in another
        process) commits or aborts."""
        manager = self._manager()
        manager.check_send()
        if not await self.flush(timeout):
            raise TransactionError("records not delivered before the timeout", retriable=True)
        return manager.prepared()

    async def complete_transaction(
        self, prepared: PreparedTransaction, commit: bool, timeout: float | None = None
    ) -> None:
        """Commit or abort a transaction another producer prepared, as that producer
        would (EndTxn with its id and epoch); this producer's own state is untouched."""
        manager = self._manager()
        if prepared.transactional_id != manager.transactional_id:
            raise TransactionError(
                f"prepared transaction of {prepared.transactional_id}, "
                f"not {manager.transactional_id}"
            )
        await manager.complete(prepared.producer_id, prepared.producer_epoch, commit, timeout)

    async def _added_to_transaction(self, by_leader: dict[int, list[Any]]) -> dict[int, list[Any]]:
        """The batches whose partitions are in the transaction (AddPartitionsToTxn for
        new ones first); if that fails, the batches fail and the transaction is left
        abortable."""
        assert self._txn is not None
        batches = [b for group in by_leader.values() for b in group]
        try:
            await self._txn.add_partitions(b.tp for b in batches)
        except TransactionError as exc:
            for b in batches:
                self._fail(b, DeliveryError(b.tp, str(exc), exc.code))
            return {}
        return by_leader

    def _drop_unsent(self, reason: str) -> None:
        """Fail every batch not sent yet (an aborted transaction's records)."""
        for tp, queue in self._queues.items():
            keep = 1 if tp in self._in_flight and queue else 0
            doomed = [queue.pop() for _ in range(len(queue) - keep)]
            for batch in reversed(doomed):  # answered in the order of their records
                batch.fail(DeliveryError(tp, reason))
        self._wake.set()
