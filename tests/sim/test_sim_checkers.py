"""The simulator's checkers name what a history broke, and only that."""

from __future__ import annotations

from epochlog.protocol.records import build_batch
from epochlog.sim.checkers import check, quarantine_complete, value_of


def _findings(history: list[tuple[object, ...]]) -> dict[str, int]:
    return {name: len(found) for name, found in check(history).items() if found}


def test_a_clean_history_breaks_nothing() -> None:
    history = [("ack", 0, 0, 0), ("ack", 1, 0, 1), ("read", 0, 0, value_of(0))]
    history += [("read", 0, 1, value_of(1)), ("final", 0, 0, value_of(0))]
    history += [("final", 0, 1, value_of(1))]
    assert _findings(history) == {}


def test_an_acknowledged_record_missing_or_replaced_is_a_lost_write() -> None:
    history = [("ack", 0, 0, 0), ("ack", 1, 0, 1), ("final", 0, 0, value_of(7))]
    found = check(history)["lost-write"]
    assert found == [
        "record 0 acknowledged at 0/0: holds b'v7'",
        "record 1 acknowledged at 0/1: missing",
    ]


def test_a_skip_or_a_rewind_without_a_reported_truncation_is_caught() -> None:
    reads = [("read", 0, o, value_of(o)) for o in (0, 1, 3, 2)]
    assert check(reads)["poll-skip-or-rewind"] == [
        "partition 0: skipped to 3, expected 2",
        "partition 0: rewound to 2, expected 4",
    ]
    reported = [*reads[:3], ("truncated", 0, 2), ("read", 0, 2, value_of(9))]
    assert check(reported)["poll-skip-or-rewind"] == ["partition 0: skipped to 3, expected 2"]


def test_an_offset_handed_out_as_two_records_is_inconsistent_unless_truncated() -> None:
    history = [("read", 0, 5, b"a"), ("final", 0, 5, b"b")]
    assert check(history)["inconsistent-offsets"] == ["0/5 handed out as b'a', now b'b'"]
    history = [("read", 0, 5, b"a"), ("truncated", 0, 5), ("final", 0, 5, b"b")]
    assert check(history)["inconsistent-offsets"] == []


def _segment(offsets_and_values: list[tuple[int, bytes]]) -> bytes:
    return b"".join(
        build_batch([(None, value, [], 1_700_000_000_000)], base_offset=offset)
        for offset, value in offsets_and_values
    )


def test_records_removed_from_a_segment_must_be_in_that_partitions_quarantine() -> None:
    removed = [("/sim/b0/t-0/00000000000000000000.log", _segment([(5, b"a"), (6, b"b")]))]
    kept = {"/sim/b0/t-0": [_segment([(5, b"a"), (6, b"b"), (7, b"c")])]}
    assert quarantine_complete(removed, kept) == []
    kept_elsewhere = {"/sim/b1/t-0": kept["/sim/b0/t-0"], "/sim/b0/t-0": [_segment([(5, b"a")])]}
    assert quarantine_complete(removed, kept_elsewhere) == [
        "/sim/b0/t-0: offset 6 (b'b') removed, not kept"
    ]
    # A torn batch (a crash's, cut at recovery) holds no record to keep.
    torn = [("/sim/b0/t-0/00000000000000000000.log", _segment([(8, b"d")])[:-3])]
    assert quarantine_complete(torn, {}) == []


def test_a_live_groups_committed_offset_disappearing_is_caught() -> None:
    history: list[tuple[object, ...]] = [("committed", 1, ((0, 5, 1), (1, 3, 1)))]
    history += [("committed", 1, ((0, 7, 1),))]
    assert check(history)["OffsetsOfLiveGroupsKept"] == [
        "partition 1: committed offset gone, group live"
    ]
    # Empty in between: KIP-211 lets its offsets expire.
    emptied = [history[0], ("committed", 0, ((0, 5, 1),)), ("committed", 1, ())]
    assert check(emptied)["OffsetsOfLiveGroupsKept"] == []


def test_an_offset_committed_without_its_epoch_is_caught() -> None:
    history = [("committed", 1, ((0, 0, None), (1, 4, None), (2, 9, 3)))]
    assert check(history)["CommittedOffsetsCarryEpochs"] == [
        "partition 1: offset 4 committed without an epoch"
    ]
