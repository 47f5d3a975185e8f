import os

import pytest

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.storage.config import LogConfig

from .conftest import batch

PID = 4242


def produce(log, seq, n=2, epoch=0, leader_epoch=0):
    return log.append_as_leader(
        batch(n, producer_id=PID, producer_epoch=epoch, base_sequence=seq), leader_epoch
    )


def code_of(fn):
    with pytest.raises(KafkaError) as e:
        fn()
    return e.value.code


def test_retried_batch_is_a_duplicate_with_its_original_offsets(open_log):
    log = open_log()
    first = produce(log, 0)
    produce(log, 2)
    again = produce(log, 0)
    assert again.duplicate and (again.base_offset, again.last_offset) == (0, 1)
    assert first.base_offset == 0
    assert log.log_end_offset == 4


def test_sequence_gap_is_out_of_order(open_log):
    log = open_log()
    produce(log, 0)
    assert code_of(lambda: produce(log, 5)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2


def test_old_duplicate_beyond_the_five_cached_is_out_of_order(open_log):
    log = open_log()
    for i in range(7):
        produce(log, 2 * i)
    assert code_of(lambda: produce(log, 0)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(log, 4).duplicate


def test_stale_producer_epoch_is_fenced_and_new_epoch_must_start_at_zero(open_log):
    log = open_log()
    produce(log, 0, epoch=3)
    assert code_of(lambda: produce(log, 2, epoch=2)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code_of(lambda: produce(log, 7, epoch=4)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(log, 0, epoch=4).base_offset == 2


def test_unknown_producer_is_accepted_at_any_sequence(open_log):
    log = open_log()
    assert not produce(log, 17).duplicate


def test_producer_state_survives_clean_restart_via_snapshot(open_log, tmp_path):
    log = open_log()
    produce(log, 0)
    produce(log, 2)
    log.close()
    assert any(n.endswith(".snapshot") for n in os.listdir(tmp_path / "t-0"))
    log = open_log(clean_shutdown=True)
    assert produce(log, 0).duplicate
    assert code_of(lambda: produce(log, 9)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_producer_state_rebuilt_after_crash_with_no_snapshot(open_log, tmp_path):
    log = open_log()
    produce(log, 0)
    produce(log, 2)
    for s in log.segments:
        s.close()
    assert not any(n.endswith(".snapshot") for n in os.listdir(tmp_path / "t-0"))
    log = open_log()
    assert produce(log, 2).duplicate
    assert produce(log, 4).base_offset == 4


def test_snapshot_then_more_appends_then_crash_replays_after_snapshot(open_log):
    config = LogConfig(segment_bytes=300)
    log = open_log(config)
    for i in range(6):
        produce(log, 2 * i)  # rolls take snapshots
    for s in log.segments:
        s.close()
    log = open_log(config)
    assert produce(log, 10).duplicate
    assert produce(log, 12).base_offset == 12


def test_truncation_rewinds_producer_state(open_log):
    log = open_log()
    produce(log, 0)
    produce(log, 2)
    log.truncate_to(2)
    again = produce(log, 2)
    assert not again.duplicate and again.base_offset == 2
