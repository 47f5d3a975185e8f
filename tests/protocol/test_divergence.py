"""KIP-320's divergence rules, each side of them, in the one module that owns them."""

from __future__ import annotations

import pytest

from epochlog.protocol.divergence import (
    Divergence,
    fetch_diverges,
    find_divergence,
    follower_truncation_offset,
)


@pytest.mark.parametrize(
    ("last_epoch", "offset", "answer_epoch", "end", "diverged"),
    [
        (3, 10, 3, 12, False),  # the epoch goes on past the reader
        (3, 10, 3, 10, False),  # the reader is at its end
        (3, 10, 3, 8, True),  # the leader's epoch 3 ended before the reader's offset
        (3, 10, 2, 12, True),  # the leader never had epoch 3
        (3, 10, -1, -1, True),  # the leader knows no epoch at or below 3
    ],
)
def test_the_leader_answers_diverging_epoch_exactly_when_the_reader_left_its_log(
    last_epoch: int, offset: int, answer_epoch: int, end: int, diverged: bool
) -> None:
    assert fetch_diverges(last_epoch, offset, answer_epoch, end) is diverged


@pytest.mark.parametrize(
    ("leader", "own", "expected"),
    [
        ((4, 50), (4, 60), 50),  # both know epoch 4: the smaller end
        ((4, 70), (4, 60), 60),
        ((4, 50), (3, 40), 40),  # this log lacks epoch 4: the end of its epoch below
        ((4, 50), (-1, -1), 50),  # this log knows no epoch at or below: the leader's end
        ((4, -1), (3, 40), 5),  # the leader knows nothing: back to the log start
    ],
)
def test_the_follower_truncates_to_where_both_logs_agree(
    leader: tuple[int, int], own: tuple[int, int], expected: int
) -> None:
    assert follower_truncation_offset(*leader, *own, log_start=5, log_end=80) == expected


def test_the_reader_finds_the_first_diverging_offset() -> None:
    assert find_divergence(10, 3, 3, 7) == Divergence(True, 7, 3)
    assert find_divergence(10, 3, 3, 10) == Divergence(False)
    assert find_divergence(10, 2, 1, 8, [(1, 0), (2, 5)]) == Divergence(True, 5, 1)
    assert find_divergence(10, 3, -1, -1) == Divergence(True)
