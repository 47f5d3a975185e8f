import asyncio
import json
import os

from epochlog.storage.checkpoints import OffsetCheckpointFile
from epochlog.storage.config import LogConfig
from epochlog.storage.log_manager import LogManager, LogManagerSettings

from .conftest import batch


def manager(disk, clock, tmp_path, **settings):
    dirs = [str(tmp_path / "d1"), str(tmp_path / "d2")]
    m = LogManager(disk, clock, dirs, LogConfig(), LogManagerSettings(**settings))
    m.start()
    return m


def test_new_logs_go_to_the_log_dir_with_fewest_partitions(disk, clock, tmp_path):
    m = manager(disk, clock, tmp_path)
    for p in range(4):
        m.create_log("t", p)
    assert len(os.listdir(tmp_path / "d1")) == len(os.listdir(tmp_path / "d2")) == 2
    assert m.create_log("t", 0) is m.get_log("t", 0)


def test_clean_close_writes_checkpoints_and_marker_and_restart_loads_everything(
    disk, clock, tmp_path
):
    m = manager(disk, clock, tmp_path)
    log = m.create_log("orders", 3, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    log.append_as_leader(batch(5), 2)
    m.close()
    d = str(tmp_path / m._dir_of[("orders", 3)].rsplit("/", 1)[1])
    assert (tmp_path / d / ".kafka_cleanshutdown").exists()
    text = (tmp_path / d / "recovery-point-offset-checkpoint").read_text()
    assert text == "0\n1\norders 3 5\n"
    assert (tmp_path / d / "orders-3" / "partition.metadata").read_text() == (
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n"
    )
    m2 = manager(disk, clock, tmp_path)
    assert not (tmp_path / d / ".kafka_cleanshutdown").exists()
    again = m2.get_log("orders", 3)
    assert again.log_end_offset == 5 and again.topic_id == "AAAAAAAAAAAAAAAAAAAAAA"
    assert again.epoch_cache.entries() == [(2, 0)]


def test_start_removes_leftover_delete_dirs(disk, clock, tmp_path):
    (tmp_path / "d1" / "t-0.abc-delete").mkdir(parents=True)
    m = manager(disk, clock, tmp_path)
    assert not (tmp_path / "d1" / "t-0.abc-delete").exists()
    assert m.all_logs() == []


def test_delete_log_removes_its_directory(disk, clock, tmp_path):
    m = manager(disk, clock, tmp_path)
    m.create_log("t", 0)
    assert m.delete_log("t", 0)
    assert m.get_log("t", 0) is None
    # Renamed aside at once; removed off the loop (here, the deferred removals run now).
    (aside,) = [n for n in os.listdir(tmp_path / "d1") if n.startswith("t-0")]
    assert aside.endswith("-delete")
    m.deferred_deletes.run_now()
    assert not any(n.startswith("t-0") for n in os.listdir(tmp_path / "d1"))


def test_a_retired_log_keeps_what_lies_above_the_high_watermark_in_quarantine(
    disk, clock, tmp_path
):
    m = manager(disk, clock, tmp_path)
    log = m.create_log("t", 0)
    log.append_as_leader(batch(5), 1)
    log.append_as_leader(batch(3), 1)
    m.retire_log("t", 0, 5, "left the assignment")
    folder = tmp_path / "d1" / "t-0"
    assert m.get_log("t", 0) is None
    assert [p.name for p in folder.iterdir()] == ["quarantine"]
    (kept,) = [p for p in (folder / "quarantine").glob("*.json")]
    assert (
        json.loads(kept.read_text())["first_offset"],
        json.loads(kept.read_text())["last_offset"],
    ) == (5, 7)


def test_a_retired_log_with_nothing_above_the_high_watermark_goes_whole(disk, clock, tmp_path):
    m = manager(disk, clock, tmp_path)
    m.create_log("t", 0).append_as_leader(batch(5), 1)
    m.retire_log("t", 0, 5, "left the assignment")
    m.deferred_deletes.run_now()
    assert not any(n.startswith("t-0") for n in os.listdir(tmp_path / "d1"))


def test_background_loop_runs_retention_and_checkpoints_on_the_clock(disk, clock, tmp_path):
    m = manager(
        disk,
        clock,
        tmp_path,
        retention_check_interval_ms=1000,
        flush_offset_checkpoint_interval_ms=500,
        flush_start_offset_checkpoint_interval_ms=500,
    )
    log = m.create_log("t", 0, LogConfig(segment_bytes=300, retention_ms=10_000))
    for _ in range(10):
        log.append_as_leader(batch(2, ts=clock.now_ms - 60_000, size=40), 0)

    async def run():
        stop = asyncio.Event()
        task = asyncio.create_task(m.run_background(stop))
        for _ in range(50):
            await asyncio.sleep(0)
            if clock.slept and sum(clock.slept) > 3:
                break
        stop.set()
        await task

    asyncio.run(run())
    assert log.log_start_offset > 0
    d = m._dir_of[("t", 0)]
    starts = OffsetCheckpointFile(disk, f"{d}/log-start-offset-checkpoint").read()
    assert starts[("t", 0)] == log.log_start_offset


def test_malformed_checkpoint_means_full_recovery_not_a_crash(disk, clock, tmp_path):
    m = manager(disk, clock, tmp_path)
    m.create_log("t", 0).append_as_leader(batch(2), 0)
    m.close()
    d = m._dir_of[("t", 0)]
    with open(f"{d}/recovery-point-offset-checkpoint", "w") as f:
        f.write("7\nnonsense")
    m2 = manager(disk, clock, tmp_path)
    assert m2.get_log("t", 0).log_end_offset == 2


def test_dynamic_broker_settings_reach_every_log_and_the_cleaner(disk, clock, tmp_path):
    m = manager(disk, clock, tmp_path)
    plain = m.create_log("plain", 0)
    own = m.create_log("own", 0, LogConfig(retention_ms=5))
    defaults = LogConfig(retention_ms=60_000, max_message_bytes=2000)
    configs = {"plain": defaults, "own": defaults.with_overrides({"retention.ms": "5"})}
    settings = LogManagerSettings(cleaner_dedupe_buffer_size=24 * 10, cleaner_backoff_ms=7)
    m.reconfigure(defaults, settings, configs.__getitem__)
    # A topic without its own setting takes the new default; one with keeps its own.
    assert (plain.config.retention_ms, plain.config.max_message_bytes) == (60_000, 2000)
    assert (own.config.retention_ms, own.config.max_message_bytes) == (5, 2000)
    assert m.default_config == defaults and m.create_log("later", 0).config == defaults
    assert m.cleaner.max_keys == 10 and m.settings.cleaner_backoff_ms == 7
