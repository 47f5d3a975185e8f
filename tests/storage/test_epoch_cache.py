import pytest

from epochlog.seams.real import OsDisk
from epochlog.storage.epoch_cache import LeaderEpochCache


def cache(*entries):
    c = LeaderEpochCache()
    for epoch, offset in entries:
        c.assign(epoch, offset)
    return c


@pytest.mark.parametrize(
    "requested, expected",
    [
        (-1, (-1, -1)),  # UNDEFINED requested
        (0, (0, 10)),  # below the earliest: Kafka pairs requested with the first start
        (1, (1, 20)),  # earliest epoch: ends where epoch 3 starts
        (2, (1, 20)),  # a hole: largest epoch <= 2 is 1, ends where 3 starts
        (3, (3, 30)),
        (4, (3, 30)),
        (5, (5, 100)),  # the latest: the log end offset
        (6, (-1, -1)),  # newer than anything known
    ],
)
def test_end_offset_for_follows_kafka(requested, expected):
    c = cache((1, 10), (3, 20), (5, 30))
    assert c.end_offset_for(requested, 100) == expected


def test_end_offset_for_with_no_entries_is_undefined():
    assert LeaderEpochCache().end_offset_for(3, 50) == (-1, -1)


def test_assign_only_accepts_newer_epochs_and_drops_entries_it_supersedes():
    c = cache((1, 0), (2, 10))
    assert not c.assign(2, 15)
    assert not c.assign(1, 20)
    assert c.assign(4, 10)  # epoch 2 never wrote anything: replaced
    assert c.entries() == [(1, 0), (4, 10)]
    assert c.latest_epoch == 4


def test_epoch_for_offset():
    c = cache((1, 10), (3, 20))
    assert [c.epoch_for_offset(o) for o in (5, 10, 19, 20, 1000)] == [-1, 1, 1, 3, 3]


def test_truncate_from_end_and_start():
    c = cache((1, 0), (2, 10), (3, 20))
    c.truncate_from_end(15)
    assert c.entries() == [(1, 0), (2, 10)]
    c.truncate_from_start(12)
    assert c.entries() == [(2, 12)]
    c.truncate_from_end(12)
    assert c.entries() == []


def test_checkpoint_file_uses_kafka_format_and_reloads(tmp_path):
    disk = OsDisk()
    path = str(tmp_path / "leader-epoch-checkpoint")
    c = LeaderEpochCache(disk, path)
    c.assign(0, 0)
    c.assign(2, 57)
    assert (tmp_path / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n2 57\n"
    assert LeaderEpochCache(disk, path).entries() == [(0, 0), (2, 57)]
