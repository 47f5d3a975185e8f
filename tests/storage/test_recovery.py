import json
import logging
import os

import pytest

from epochlog.protocol.batch import read_header
from epochlog.storage.config import LogConfig

from .conftest import batch

CONFIG = LogConfig(segment_bytes=2000, index_interval_bytes=100)


def fill(log, batches=20):
    for i in range(batches):
        log.append_as_leader(batch(2, size=40), leader_epoch=i // 10)


def crash(log):
    """Close file handles without the clean-shutdown work."""
    for s in log.segments:
        s.close()


def last_segment_path(tmp_path):
    logs = sorted(p for p in os.listdir(tmp_path / "t-0") if p.endswith(".log"))
    return tmp_path / "t-0" / logs[-1]


def test_recovery_cuts_torn_tail_and_quarantines_it(open_log, tmp_path, caplog):
    log = open_log(CONFIG)
    fill(log)
    end = log.log_end_offset
    crash(log)
    seg = last_segment_path(tmp_path)
    data = seg.read_bytes()
    seg.write_bytes(data[:-30])  # the last batch torn mid-write
    with caplog.at_level(logging.WARNING, logger="epochlog.storage"):
        log = open_log(CONFIG, recovery_point=0)
    assert log.log_end_offset == end - 2
    assert "recovery cut" in caplog.text and "torn" in caplog.text
    qdir = tmp_path / "t-0" / "quarantine"
    kept = [p for p in os.listdir(qdir) if p.endswith(".log")]
    assert len(kept) == 1 and (qdir / kept[0]).stat().st_size == len(data) - 30 - seg.stat().st_size
    meta = json.loads((qdir / kept[0].replace(".log", ".json")).read_text())
    assert meta["first_offset"] == end - 2
    assert log.append_as_leader(batch(1), 1).base_offset == end - 2
    assert log.read(end - 4, 1 << 20).size > 0


def test_recovery_holes_a_crc_mismatch_and_keeps_every_later_batch(open_log, tmp_path, caplog):
    log = open_log(CONFIG)
    fill(log)
    end = log.log_end_offset
    crash(log)
    seg = last_segment_path(tmp_path)
    base = int(seg.name.split(".")[0])
    data = bytearray(seg.read_bytes())
    data[61 + 5] ^= 0xFF  # inside the first batch's records
    seg.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="epochlog.storage"):
        log = open_log(CONFIG, recovery_point=0)
    # Good batches follow: a hole; the log keeps them and its end.
    hole = log.holes.first()
    assert log.log_end_offset == end and (hole.first_offset, hole.end_offset) == (base, base + 2)
    assert "CRC32C" in caplog.text
    assert log.append_as_leader(batch(1), 5).base_offset == end


@pytest.mark.parametrize("field", ["leader epoch", "base offset"])
def test_recovery_holes_a_batch_whose_header_rotted_outside_its_crc(
    open_log, tmp_path, caplog, field
):
    """A batch's base offset and leader epoch lie outside its CRC: rot there passes the
    CRC check, and is caught by the neighbours (the next batch goes on from the ones
    before it). Found by the simulator: a rotted epoch (16711681) in the rebuilt
    leader-epoch cache of a replica kept in the ISR."""
    log = open_log(CONFIG)
    fill(log)
    end, epochs = log.log_end_offset, log.epoch_cache.entries()
    crash(log)
    seg = last_segment_path(tmp_path)
    data = bytearray(seg.read_bytes())
    second = read_header(bytes(data), 0).size
    header = read_header(bytes(data), second)
    if field == "leader epoch":
        data[second + 13] ^= 0xFF  # partition leader epoch, bytes 12..15
    else:
        data[second + 3] ^= 0x10  # base offset, bytes 0..7: 2**36 further on
    seg.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="epochlog.storage"):
        log = open_log(CONFIG, recovery_point=0)
    hole = log.holes.first()
    assert hole is not None
    assert (hole.first_offset, hole.end_offset) == (header.base_offset, header.next_offset)
    assert log.log_end_offset == end
    assert log.epoch_cache.entries() == epochs
    assert "out of line" in caplog.text


def test_recovery_rebuilds_indexes_of_recovered_segments(open_log, tmp_path):
    log = open_log(CONFIG)
    fill(log)
    crash(log)
    for name in os.listdir(tmp_path / "t-0"):
        if name.endswith((".index", ".timeindex")):
            (tmp_path / "t-0" / name).write_bytes(b"")
    log = open_log(CONFIG, recovery_point=0)
    assert all(s.offset_index.entries > 0 for s in log.segments if s.size > 300)
    assert log.log_end_offset == 40


def test_recovery_rebuilds_epoch_cache_after_a_lost_checkpoint(open_log, tmp_path):
    log = open_log(CONFIG)
    fill(log)
    crash(log)
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("garbage")
    log = open_log(CONFIG, recovery_point=0)
    assert log.epoch_cache.entries() == [(0, 0), (1, 20)]


def test_clean_shutdown_skips_recovery_and_keeps_everything(open_log):
    log = open_log(CONFIG)
    fill(log)
    log.close()
    log = open_log(CONFIG, clean_shutdown=True)
    assert log.log_end_offset == 40
    assert log.recovery_point == 40
