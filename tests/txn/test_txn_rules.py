"""The transaction coordinator's rules (epochlog.txn.metadata), state by state."""

from __future__ import annotations

import pytest

from epochlog.protocol.errors import ErrorCode
from epochlog.txn import metadata as rules
from epochlog.txn.metadata import TxnMetadata, TxnState
from epochlog.txn.records import decode_key, decode_value, encode_key, encode_value

NOW = 1_700_000_000_000
TP = frozenset({("orders", 0), ("orders", 1)})


def empty(epoch: int = 0, producer_id: int = 7) -> TxnMetadata:
    return TxnMetadata("tx", producer_id, epoch, 60_000, TxnState.EMPTY, last_update_ms=NOW)


def ongoing(epoch: int = 0) -> TxnMetadata:
    return empty(epoch).with_(state=TxnState.ONGOING, partitions=TP, start_ms=NOW)


def test_first_init_gets_the_new_id_at_epoch_zero() -> None:
    decision = rules.init_producer_id(None, "tx", 60_000, -1, -1, 42, NOW)
    assert decision.error == ErrorCode.NONE
    assert decision.new is not None
    assert (decision.new.producer_id, decision.new.producer_epoch) == (42, 0)
    assert decision.new.state == TxnState.EMPTY


def test_init_again_bumps_the_epoch_of_the_same_id_and_remembers_the_previous() -> None:
    decision = rules.init_producer_id(empty(epoch=3), "tx", 60_000, -1, -1, -1, NOW)
    assert decision.new is not None
    assert (decision.new.producer_id, decision.new.producer_epoch) == (7, 4)
    assert (decision.new.last_producer_id, decision.new.last_producer_epoch) == (7, 3)


def test_exhausted_epoch_moves_to_a_new_producer_id() -> None:
    decision = rules.init_producer_id(
        empty(epoch=rules.MAX_PRODUCER_EPOCH), "tx", 60_000, -1, -1, 99, NOW
    )
    assert decision.new is not None
    assert (decision.new.producer_id, decision.new.producer_epoch) == (99, 0)


def test_init_while_a_transaction_is_open_fences_and_aborts_it() -> None:
    decision = rules.init_producer_id(ongoing(epoch=2), "tx", 60_000, -1, -1, -1, NOW)
    assert decision.error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert decision.new is not None
    assert decision.new.state == TxnState.PREPARE_ABORT
    assert decision.new.producer_epoch == 3
    assert decision.new.partitions == TP


@pytest.mark.parametrize("state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT])
def test_init_while_markers_are_written_is_retried(state: TxnState) -> None:
    decision = rules.init_producer_id(empty().with_(state=state), "tx", 60_000, -1, -1, -1, NOW)
    assert decision == rules.Decision(ErrorCode.CONCURRENT_TRANSACTIONS)


def test_kip360_recovery_with_the_current_epoch_bumps_it() -> None:
    decision = rules.init_producer_id(empty(epoch=5), "tx", 60_000, 7, 5, -1, NOW)
    assert decision.new is not None and decision.new.producer_epoch == 6


def test_kip360_retry_with_the_previous_epoch_gets_the_current_one_again() -> None:
    meta = empty(epoch=6).with_(last_producer_id=7, last_producer_epoch=5)
    decision = rules.init_producer_id(meta, "tx", 60_000, 7, 5, -1, NOW)
    assert decision == rules.Decision()


def test_kip360_recovery_with_an_older_epoch_is_fenced() -> None:
    meta = empty(epoch=6).with_(last_producer_id=7, last_producer_epoch=5)
    decision = rules.init_producer_id(meta, "tx", 60_000, 7, 4, -1, NOW)
    assert decision == rules.Decision(ErrorCode.PRODUCER_FENCED)


@pytest.mark.parametrize("timeout", [0, -1, 900_001])
def test_timeout_outside_the_maximum_is_refused(timeout: int) -> None:
    assert rules.check_timeout(timeout, 900_000) == ErrorCode.INVALID_TRANSACTION_TIMEOUT


def test_add_partitions_starts_a_transaction_and_adds_to_it() -> None:
    first = rules.add_partitions(empty(), 7, 0, frozenset({("orders", 0)}), NOW)
    assert first.new is not None and first.new.state == TxnState.ONGOING
    assert first.new.start_ms == NOW
    more = rules.add_partitions(first.new, 7, 0, frozenset({("orders", 1)}), NOW + 5)
    assert more.new is not None and more.new.partitions == TP
    assert more.new.start_ms == NOW
    again = rules.add_partitions(more.new, 7, 0, frozenset({("orders", 1)}), NOW + 9)
    assert again == rules.Decision()


def test_add_partitions_from_an_old_epoch_or_another_id_changes_nothing() -> None:
    assert rules.add_partitions(empty(epoch=2), 7, 1, TP, NOW).error == ErrorCode.PRODUCER_FENCED
    assert (
        rules.add_partitions(empty(), 8, 0, TP, NOW).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    )
    assert rules.add_partitions(None, 7, 0, TP, NOW).error == ErrorCode.INVALID_PRODUCER_ID_MAPPING


def test_verify_partitions_answers_each_partition_and_changes_nothing() -> None:
    """KIP-890's question: a partition added is NONE, one never added INVALID_TXN_STATE;
    another producer id, an old epoch or markers being written answer every partition."""
    asked = frozenset({("orders", 0), ("orders", 9)})
    assert rules.verify_partitions(ongoing(), 7, 0, asked) == {
        ("orders", 0): ErrorCode.NONE,
        ("orders", 9): ErrorCode.INVALID_TXN_STATE,
    }
    assert set(rules.verify_partitions(empty(), 7, 0, TP).values()) == {ErrorCode.INVALID_TXN_STATE}
    for meta, pid, epoch, error in [
        (None, 7, 0, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (ongoing(), 8, 0, ErrorCode.INVALID_PRODUCER_ID_MAPPING),
        (ongoing(epoch=1), 7, 0, ErrorCode.PRODUCER_FENCED),
        (ongoing().with_(state=TxnState.PREPARE_ABORT), 7, 0, ErrorCode.CONCURRENT_TRANSACTIONS),
    ]:
        assert rules.verify_partitions(meta, pid, epoch, TP) == dict.fromkeys(TP, error)


def test_end_txn_prepares_then_retries_are_answered_by_the_state() -> None:
    prepared = rules.end_txn(ongoing(), 7, 0, True, NOW)
    assert prepared.new is not None and prepared.new.state == TxnState.PREPARE_COMMIT
    assert rules.end_txn(prepared.new, 7, 0, True, NOW).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert rules.end_txn(prepared.new, 7, 0, False, NOW).error == ErrorCode.INVALID_TXN_STATE
    done = rules.completed(prepared.new, NOW)
    assert done.state == TxnState.COMPLETE_COMMIT and not done.partitions
    assert rules.end_txn(done, 7, 0, True, NOW) == rules.Decision()
    assert rules.end_txn(done, 7, 0, False, NOW).error == ErrorCode.INVALID_TXN_STATE


def test_end_txn_commit_without_a_transaction_is_an_invalid_state() -> None:
    assert rules.end_txn(empty(), 7, 0, True, NOW).error == ErrorCode.INVALID_TXN_STATE
    assert rules.end_txn(empty(), 7, 0, False, NOW) == rules.Decision()


def test_end_txn_from_a_fenced_producer_is_refused() -> None:
    assert rules.end_txn(ongoing(epoch=3), 7, 2, True, NOW).error == ErrorCode.PRODUCER_FENCED


def test_timed_out_transaction_is_aborted_with_a_bumped_epoch() -> None:
    meta = ongoing(epoch=4)
    assert rules.abort_timed_out(meta, NOW + meta.timeout_ms) is None
    aborted = rules.abort_timed_out(meta, NOW + meta.timeout_ms + 1)
    assert aborted is not None
    assert aborted.state == TxnState.PREPARE_ABORT and aborted.producer_epoch == 5
    assert aborted.partitions == TP
    assert rules.abort_timed_out(empty(), NOW + 10**9) is None


def test_only_finished_ids_expire_after_the_expiration_time() -> None:
    assert rules.expired(empty(), NOW + 1001, 1000)
    assert not rules.expired(empty(), NOW + 1000, 1000)
    assert not rules.expired(ongoing(), NOW + 10**9, 1000)


def test_transaction_log_records_round_trip() -> None:
    meta = ongoing(epoch=9)
    assert decode_key(encode_key("tx")) == "tx"
    back = decode_value("tx", encode_value(meta))
    assert back == meta.with_(last_producer_id=-1, last_producer_epoch=-1)
