"""The simulated disk keeps what a crash keeps: fsynced bytes, maybe a torn prefix of
what came after, never an unsynced truncation; a dead host's I/O goes nowhere."""

from __future__ import annotations

import random

import pytest

from epochlog.sim.disk import HostCrashed, SimDisk


def test_a_crash_keeps_what_was_fsynced_and_at_most_a_prefix_of_the_rest() -> None:
    kept_sizes = set()
    for seed in range(40):
        disk = SimDisk(random.Random(seed))
        view = disk.view("/h")
        f = view.open("/h/log")
        f.append(b"a" * 100)
        f.fsync()
        f.append(b"b" * 50)
        disk.crash(view)
        data = disk.view("/h").read_file("/h/log")
        assert data[:100] == b"a" * 100
        assert data[100:] == b"b" * (len(data) - 100)
        kept_sizes.add(len(data))
    assert 100 in kept_sizes and len(kept_sizes) > 3, "never torn, or always the same"


def test_an_unsynced_truncation_or_overwrite_is_undone_by_a_crash() -> None:
    disk = SimDisk(random.Random(1))
    view = disk.view("/h")
    f = view.open("/h/log")
    f.append(b"x" * 10)
    f.fsync()
    f.truncate(4)
    assert f.size() == 4
    disk.crash(view)
    view = disk.view("/h")
    assert view.read_file("/h/log") == b"x" * 10
    f = view.open("/h/log")
    f.pwrite(b"yy", 3)
    assert view.read_file("/h/log") == b"xxxyyxxxxx"
    disk.crash(view)
    assert disk.view("/h").read_file("/h/log") == b"x" * 10


def test_a_crashed_hosts_handles_and_view_refuse_io_and_other_hosts_keep_theirs() -> None:
    disk = SimDisk(random.Random(1))
    dead, other = disk.view("/a"), disk.view("/b")
    f = dead.open("/a/log")
    g = other.open("/b/log")
    g.append(b"unsynced")
    disk.crash(dead)
    with pytest.raises(HostCrashed):
        f.append(b"late")
    with pytest.raises(HostCrashed):
        dead.write_atomic("/a/x", b"")
    assert other.read_file("/b/log") == b"unsynced"


def test_directories_behave_as_a_files_tree() -> None:
    disk = SimDisk(random.Random(1))
    view = disk.view("/h")
    with pytest.raises(FileNotFoundError):
        view.open("/h/missing/log")
    view.makedirs("/h/t-0")
    view.write_atomic("/h/t-0/a", b"1")
    view.open("/h/t-0/b").append(b"22")
    assert view.listdir("/h") == ["t-0"]
    assert view.listdir("/h/t-0") == ["a", "b"]
    view.rename("/h/t-0", "/h/t-0.deleted")
    assert view.listdir("/h") == ["t-0.deleted"]
    assert view.file_size("/h/t-0.deleted/b") == 2
    view.rmtree("/h/t-0.deleted")
    assert view.listdir("/h") == [] and not view.exists("/h/t-0.deleted/a")


def test_what_the_brokers_remove_from_segments_is_journaled_not_quarantine_files() -> None:
    disk = SimDisk(random.Random(1))
    view = disk.view("/h")
    view.makedirs("/h/t-0/quarantine")
    segment = view.open("/h/t-0/00000000000000000000.log")
    segment.append(b"abcdef")
    segment.truncate(4)
    view.open("/h/t-0/00000000000000000004.log").append(b"gh")
    view.remove("/h/t-0/00000000000000000004.log")
    view.open("/h/t-0/quarantine/x.log").append(b"ef")
    view.remove("/h/t-0/quarantine/x.log")
    view.open("/h/t-0/00000000000000000000.index").append(b"12")
    view.remove("/h/t-0/00000000000000000000.index")
    assert disk.removed == [
        ("/h/t-0/00000000000000000000.log", b"ef"),
        ("/h/t-0/00000000000000000004.log", b"gh"),
    ]
