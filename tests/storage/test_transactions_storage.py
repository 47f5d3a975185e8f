"""A partition's transactions: open transactions bound the first unstable offset,
markers close them, aborted ones land in the segment's .txnindex; the rules of a leader
append; and all of it rebuilt after a truncation (a cut marker reopens its transaction),
an unclean stop, a clean one, and a damaged index; compaction that never lets an aborted
value replace a committed one and keeps the index of the segments it merges."""

import os

import pytest

from epochlog.protocol.control import build_marker_batch
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.storage.producer_state import NO_GUARD, AppendOrigin

from . import test_cleaner as cleaning
from .conftest import batch

PID, OTHER = 7, 8


def txn(log, pid=PID, seq=0, n=2, epoch=0, guard=None):
    records = batch(
        n, producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=True
    )
    return log.append_as_leader(records, 0, AppendOrigin.CLIENT, guard)


def marker(log, commit, pid=PID, epoch=0, coordinator_epoch=0):
    records = build_marker_batch(pid, epoch, coordinator_epoch, commit, 5000)
    return log.append_as_leader(records, 0, AppendOrigin.COORDINATOR)


def code_of(fn):
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


def test_open_transactions_bound_the_first_unstable_offset_until_their_markers(open_log):
    log = open_log()
    assert log.first_unstable_offset() is None
    txn(log)  # offsets 0-1
    txn(log, pid=OTHER)  # 2-3
    assert log.first_unstable_offset() == 0
    assert marker(log, commit=True).base_offset == 4
    assert log.first_unstable_offset() == 2
    marker(log, commit=False, pid=OTHER)  # 5
    assert log.first_unstable_offset() is None
    assert log.collect_aborted_transactions(0, 6) == [(OTHER, 2)]
    assert log.collect_aborted_transactions(0, 2) == []  # ends before it starts


def test_leader_append_rules_for_transactions(open_log):
    log = open_log()
    txn(log, epoch=2)
    plain = batch(1, producer_id=PID, producer_epoch=2, base_sequence=2)
    assert code_of(lambda: log.append_as_leader(plain, 0)) == ErrorCode.INVALID_TXN_STATE
    control = build_marker_batch(PID, 2, 0, True, 5000)
    assert code_of(lambda: log.append_as_leader(control, 0)) == ErrorCode.INVALID_RECORD
    marker(log, True, epoch=2, coordinator_epoch=3)
    txn(log, seq=2, epoch=2)
    assert code_of(lambda: marker(log, True, epoch=1, coordinator_epoch=3)) == (
        ErrorCode.INVALID_PRODUCER_EPOCH
    )
    assert code_of(lambda: marker(log, True, epoch=2, coordinator_epoch=2)) == (
        ErrorCode.TRANSACTION_COORDINATOR_FENCED
    )
    end = log.log_end_offset
    assert log.first_unstable_offset() == 3  # nothing refused changed the log
    assert end == 5


def test_a_verified_append_opens_a_transaction_only_with_its_guard(open_log):
    """KIP-890: the first transactional batch of a transaction needs the guard its
    verification was started under; later ones continue the open transaction."""
    log = open_log()
    state = log.producer_state
    assert code_of(lambda: txn(log, guard=NO_GUARD)) == ErrorCode.INVALID_TXN_STATE
    guard = state.start_verification(PID, 0, 1000)
    assert state.start_verification(PID, 0, 1000) is guard  # one verification under way
    assert code_of(lambda: txn(log, epoch=1, guard=guard)) == ErrorCode.INVALID_TXN_STATE
    assert txn(log, guard=guard).base_offset == 0
    assert state.start_verification(PID, 0, 1000) is None  # open here: nothing to ask
    assert txn(log, seq=2, guard=NO_GUARD).base_offset == 2
    marker(log, commit=True)
    # The guard was spent by the first batch: the next transaction is verified anew.
    assert code_of(lambda: txn(log, seq=4, guard=guard)) == ErrorCode.INVALID_TXN_STATE
    assert log.log_end_offset == 5
    assert log.first_unstable_offset() is None


def test_a_marker_written_during_a_verification_spends_its_guard(open_log):
    """The coordinator vouched for the transaction, then aborted it (its marker came
    first): the answer must not open a transaction here that nobody will end."""
    log = open_log()
    guard = log.producer_state.start_verification(PID, 0, 1000)
    marker(log, commit=False)
    assert code_of(lambda: txn(log, guard=guard)) == ErrorCode.INVALID_TXN_STATE
    assert log.first_unstable_offset() is None
    fresh = log.producer_state.start_verification(PID, 0, 1000)
    assert fresh is not guard
    assert txn(log, guard=fresh).base_offset == 1


def test_unspent_guards_expire_with_idle_producers(open_log):
    log = open_log()
    state = log.producer_state
    state.start_verification(PID, 0, 1000)
    state.remove_expired(1000 + 60_000, 60_000)
    assert PID in state.verifications
    state.remove_expired(1001 + 60_000, 60_000)
    assert state.verifications == {}


def test_truncation_that_cuts_a_marker_reopens_its_transaction(open_log):
    log = open_log()
    txn(log)  # 0-1
    marker(log, commit=False)  # 2
    assert log.collect_aborted_transactions(0, 3) == [(PID, 0)]
    log.truncate_to(2)
    assert log.first_unstable_offset() == 0
    assert log.collect_aborted_transactions(0, 3) == []
    log.truncate_to(0)
    assert log.first_unstable_offset() is None


@pytest.mark.parametrize("clean", [True, False])
def test_open_transactions_and_the_aborted_index_survive_a_restart(open_log, clean):
    log = open_log()
    txn(log)  # 0-1
    marker(log, commit=False)  # 2
    txn(log, pid=OTHER)  # 3-4
    log.roll()
    txn(log, seq=2)  # 5-6
    if clean:
        log.close()
    else:
        log.flush()
    again = open_log(clean_shutdown=clean)
    assert again.first_unstable_offset() == 3
    assert again.collect_aborted_transactions(0, 7) == [(PID, 0)]
    marker(again, commit=False, pid=OTHER)
    assert again.first_unstable_offset() == 5
    assert again.collect_aborted_transactions(3, 8) == [(OTHER, 3)]


def test_a_damaged_txn_index_is_rebuilt_from_the_log(open_log, tmp_path):
    log = open_log()
    txn(log)
    marker(log, commit=False)
    log.close()
    (index,) = [f for f in os.listdir(tmp_path / "t-0") if f.endswith(".txnindex")]
    with open(tmp_path / "t-0" / index, "ab") as f:
        f.write(b"\x00garbage")
    again = open_log(clean_shutdown=True)
    assert again.collect_aborted_transactions(0, 3) == [(PID, 0)]


def test_compaction_keeps_committed_values_over_aborted_ones_and_moves_the_index(open_log, clock):
    log = open_log(cleaning.COMPACT)
    log.append_as_leader(cleaning.keyed((b"k", b"committed")), 0)  # 0
    log.roll()
    aborted = cleaning.keyed(
        (b"k", b"aborted"), producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True
    )
    log.append_as_leader(aborted, 0)  # 1
    marker(log, commit=False, pid=5)  # 2
    log.roll()
    log.append_as_leader(cleaning.keyed((b"other", b"x")), 0)  # 3, active
    cleaning.clean(log, clock)
    assert len(log.segments) == 2  # the two sealed segments merged into one
    values = [(off, bytes(r.value or b"")) for off, r, _ in cleaning.stored(log) if r.key == b"k"]
    assert (0, b"committed") in values
    assert log.collect_aborted_transactions(0, 4) == [(5, 1)]
