"""One transactional id's state and the rules that move it (Kafka's TransactionMetadata
and the checks of its TransactionCoordinator), pure: no I/O, no clock of its own.

Every change is computed as a new frozen :class:`TxnMetadata` which the coordinator
writes to ``__transaction_state`` first and installs only once the write is
acknowledged, so what a new coordinator loads is always what clients were told.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from epochlog.protocol.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# An epoch this high cannot be bumped again: the producer gets a new id (Kafka's rule,
# keeping Short.MAX_VALUE free for the epoch a timed-out transaction is fenced with).
MAX_PRODUCER_EPOCH = 32767 - 1

TopicPartition = tuple[str, int]


class TxnState(enum.Enum):
    """Kafka's states, with the byte stored in ``__transaction_state``."""

    EMPTY = ("Empty", 0)
    ONGOING = ("Ongoing", 1)
    PREPARE_COMMIT = ("PrepareCommit", 2)
    PREPARE_ABORT = ("PrepareAbort", 3)
    COMPLETE_COMMIT = ("CompleteCommit", 4)
    COMPLETE_ABORT = ("CompleteAbort", 5)
    DEAD = ("Dead", 6)
    PREPARE_EPOCH_FENCE = ("PrepareEpochFence", 7)

    def __init__(self, display: str, byte: int) -> None:
        self.display = display
        self.byte = byte

    @classmethod
    def from_byte(cls, byte: int) -> TxnState:
        for state in cls:
            if state.byte == byte:
                return state
        raise ValueError(f"unknown transaction state {byte}")

    @classmethod
    def from_display(cls, name: str) -> TxnState | None:
        for state in cls:
            if state.display.lower() == name.lower():
                return state
        return None

    @property
    def is_preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_finished(self) -> bool:
        """No transaction open: a new one may begin."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[TopicPartition] = field(default_factory=frozenset)
    start_ms: int = -1
    last_update_ms: int = -1
    # KIP-360: the id and epoch handed out before the latest bump, so a producer whose
    # InitProducerId answer was lost can still prove it was the holder.
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH

    def with_(self, **changes: object) -> TxnMetadata:
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Decision:
    """What a request leads to: the error to answer and the new state to write first
    (None: nothing to write)."""

    error: ErrorCode = ErrorCode.NONE
    new: TxnMetadata | None = None


def _refuse(error: ErrorCode) -> Decision:
    return Decision(error)


def check_timeout(timeout_ms: int, max_timeout_ms: int) -> ErrorCode:
    if timeout_ms <= 0 or timeout_ms > max_timeout_ms:
        return ErrorCode.INVALID_TRANSACTION_TIMEOUT
    return ErrorCode.NONE


def _bumped(meta: TxnMetadata, new_producer_id: int) -> tuple[int, int]:
    """The next (producer id, epoch): epoch + 1, or a new id at epoch 0 when exhausted."""
    if meta.producer_epoch >= MAX_PRODUCER_EPOCH:
        return new_producer_id, 0
    return meta.producer_id, meta.producer_epoch + 1


def init_producer_id(
    meta: TxnMetadata | None,
    transactional_id: str,
    timeout_ms: int,
    expected_producer_id: int,
    expected_epoch: int,
    new_producer_id: int,
    now_ms: int,
) -> Decision:
    """InitProducerId with a transactional id: a fresh id, or the same id at a bumped
    epoch, which fences every earlier holder. An open transaction is aborted first (the
    client retries on CONCURRENT_TRANSACTIONS until that is done)."""
    if meta is None:
        return Decision(
            new=TxnMetadata(
                transactional_id,
                new_producer_id,
                0,
                timeout_ms,
                TxnState.EMPTY,
                last_update_ms=now_ms,
            )
        )
    if expected_producer_id != NO_PRODUCER_ID:
        # KIP-360: the caller says which id/epoch it holds; a retry of the bump that was
        # already done is answered with the current id and epoch again.
        current = (meta.producer_id, meta.producer_epoch)
        previous = (meta.last_producer_id, meta.last_producer_epoch)
        asked = (expected_producer_id, expected_epoch)
        if asked != current and asked != previous:
            return _refuse(ErrorCode.PRODUCER_FENCED)
        if asked == previous and meta.state.is_finished:
            return Decision(new=None)
    if meta.state.is_preparing or meta.state == TxnState.PREPARE_EPOCH_FENCE:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    if meta.state == TxnState.ONGOING:
        # Fence the old holder and abort what it left open; the caller is told to retry.
        # The epoch it held becomes the previous one: its retry (KIP-360) once the
        # abort is done is answered with the new epoch.
        return Decision(
            ErrorCode.CONCURRENT_TRANSACTIONS,
            meta.with_(
                producer_epoch=meta.producer_epoch + 1,
                state=TxnState.PREPARE_ABORT,
                last_update_ms=now_ms,
                last_producer_id=meta.producer_id,
                last_producer_epoch=meta.producer_epoch,
            ),
        )
    if meta.state == TxnState.DEAD:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    producer_id, epoch = _bumped(meta, new_producer_id)
    return Decision(
        new=meta.with_(
            producer_id=producer_id,
            producer_epoch=epoch,
            timeout_ms=timeout_ms,
            state=TxnState.EMPTY,
            partitions=frozenset(),
            start_ms=-1,
            last_update_ms=now_ms,
            last_producer_id=meta.producer_id,
            last_producer_epoch=meta.producer_epoch,
        )
    )


def check_producer(meta: TxnMetadata | None, producer_id: int, epoch: int) -> ErrorCode:
    """The request comes from the current holder of the transactional id."""
    if meta is None or meta.state == TxnState.DEAD:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_id != producer_id:
        return ErrorCode.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != epoch:
        return ErrorCode.PRODUCER_FENCED
    return ErrorCode.NONE


def add_partitions(
    meta: TxnMetadata | None,
    producer_id: int,
    epoch: int,
    partitions: frozenset[TopicPartition],
    now_ms: int,
) -> Decision:
    """AddPartitionsToTxn / AddOffsetsToTxn: the transaction is (or becomes) Ongoing and
    will send markers to these partitions."""
    error = check_producer(meta, producer_id, epoch)
    if error != ErrorCode.NONE:
        return _refuse(error)
    assert meta is not None
    if meta.state.is_preparing or meta.state == TxnState.PREPARE_EPOCH_FENCE:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    if meta.state == TxnState.ONGOING and partitions <= meta.partitions:
        return Decision()
    starting = meta.state != TxnState.ONGOING
    return Decision(
        new=meta.with_(
            state=TxnState.ONGOING,
            partitions=(frozenset() if starting else meta.partitions) | partitions,
            start_ms=now_ms if starting else meta.start_ms,
            last_update_ms=now_ms,
        )
    )


def verify_partitions(
    meta: TxnMetadata | None,
    producer_id: int,
    epoch: int,
    partitions: frozenset[TopicPartition],
) -> dict[TopicPartition, ErrorCode]:
    """AddPartitionsToTxn v4 with verify_only (KIP-890), a partition leader asking before
    it appends a transaction's first batch: does this producer's transaction include
    each partition? Nothing changes. A partition not added is INVALID_TXN_STATE."""
    error = check_producer(meta, producer_id, epoch)
    if error != ErrorCode.NONE:
        return dict.fromkeys(partitions, error)
    assert meta is not None
    if meta.state.is_preparing:
        return dict.fromkeys(partitions, ErrorCode.CONCURRENT_TRANSACTIONS)
    return {
        tp: ErrorCode.NONE if tp in meta.partitions else ErrorCode.INVALID_TXN_STATE
        for tp in partitions
    }


def end_txn(
    meta: TxnMetadata | None, producer_id: int, epoch: int, commit: bool, now_ms: int
) -> Decision:
    """EndTxn: Ongoing moves to PrepareCommit/PrepareAbort (markers follow); a retry of
    a decision already taken is answered NONE; anything else is INVALID_TXN_STATE."""
    error = check_producer(meta, producer_id, epoch)
    if error != ErrorCode.NONE:
        return _refuse(error)
    assert meta is not None
    done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
    preparing = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    if meta.state == TxnState.ONGOING:
        return Decision(new=meta.with_(state=preparing, last_update_ms=now_ms))
    if meta.state == done:
        return Decision()
    if meta.state == preparing:
        return _refuse(ErrorCode.CONCURRENT_TRANSACTIONS)
    if meta.state == TxnState.EMPTY and not commit:
        # Nothing was sent in this transaction: an abort has nothing to undo.
        return Decision()
    return _refuse(ErrorCode.INVALID_TXN_STATE)


def abort_timed_out(meta: TxnMetadata, now_ms: int) -> TxnMetadata | None:
    """The coordinator aborts a transaction open longer than its timeout, bumping the
    epoch so that its producer is fenced (it can still recover with InitProducerId)."""
    if meta.state != TxnState.ONGOING or now_ms - meta.start_ms <= meta.timeout_ms:
        return None
    if meta.producer_epoch >= MAX_PRODUCER_EPOCH:
        return meta.with_(state=TxnState.PREPARE_ABORT, last_update_ms=now_ms)
    return meta.with_(
        producer_epoch=meta.producer_epoch + 1,
        state=TxnState.PREPARE_ABORT,
        last_update_ms=now_ms,
        last_producer_id=meta.producer_id,
        last_producer_epoch=meta.producer_epoch,
    )


def completed(meta: TxnMetadata, now_ms: int) -> TxnMetadata:
    """Every marker is written: the transaction is over."""
    state = (
        TxnState.COMPLETE_COMMIT
        if meta.state == TxnState.PREPARE_COMMIT
        else TxnState.COMPLETE_ABORT
    )
    return meta.with_(state=state, partitions=frozenset(), last_update_ms=now_ms)


def expired(meta: TxnMetadata, now_ms: int, expiration_ms: int) -> bool:
    """``transactional.id.expiration.ms`` after its last update with no transaction open."""
    return meta.state.is_finished and now_ms - meta.last_update_ms > expiration_ms
