"""KIP-320's divergence rules, in one place for every reader of a log: the leader
answering a Fetch (DivergingEpoch), the follower truncating, the consumer validating
its position and the Spark source planning a batch all decide here whether two logs
diverged, and where.

Every rule works on a leader's answer for an epoch, as the leader-epoch cache gives it
(``storage/epoch_cache.py``, OffsetsForLeaderEpoch): the largest epoch it knows at or
below the one asked, and where that epoch ends in its log (-1, -1 when it knows none).
"""

from __future__ import annotations

from dataclasses import dataclass

UNDEFINED = -1


def fetch_diverges(
    last_fetched_epoch: int, fetch_offset: int, answer_epoch: int, end_offset: int
) -> bool:
    """The leader's half (Fetch v12+): a reader whose last fetched epoch the leader
    answers with an older epoch, or with an end before the reader's offset, diverged;
    it gets DivergingEpoch (the answer) instead of records."""
    return answer_epoch < last_fetched_epoch or end_offset < fetch_offset


def follower_truncation_offset(
    leader_epoch: int,
    leader_end: int,
    own_epoch: int,
    own_end: int,
    log_start: int,
    log_end: int,
) -> int:
    """The follower's half (Kafka's rule): where to truncate on DivergingEpoch
    (``leader_epoch``, ``leader_end``), given this log's own answer for that epoch. If
    this log knows the leader's epoch, to the smaller of both ends of it; otherwise to
    the end of the largest epoch it has below it (the next fetch asks again)."""
    if leader_end < 0:
        return log_start
    if own_epoch < 0 or own_end < 0:
        return min(leader_end, log_end)
    if own_epoch == leader_epoch:
        return min(leader_end, own_end)
    return min(own_end, log_end)


@dataclass(frozen=True)
class Divergence:
    """Outcome of comparing a position with a leader's end offset for its epoch."""

    truncated: bool
    offset: int | None = None  # the first diverging offset, None if unknown
    epoch: int | None = None  # the epoch of the record before ``offset``


NO_DIVERGENCE = Divergence(False)


def find_divergence(
    position: int,
    position_epoch: int,
    answer_epoch: int,
    end_offset: int,
    consumed_epochs: list[tuple[int, int | None]] | None = None,
) -> Divergence:
    """The reader's half (consumer, Spark source): did the log diverge from what was
    read up to ``position``? ``answer_epoch`` and ``end_offset`` are the leader's answer
    for ``position_epoch``; ``consumed_epochs`` lists (epoch, first offset read in it)
    for what was read."""
    if answer_epoch < 0 or end_offset < 0:
        return Divergence(True)
    if answer_epoch >= position_epoch:
        if end_offset < position:
            return Divergence(True, end_offset, answer_epoch)
        return NO_DIVERGENCE
    # The leader never had our epoch: everything read in an epoch above its answer is
    # gone. The divergence is where its answered epoch ends, or where we began reading
    # in a later epoch, whichever is first.
    candidates = [end_offset]
    for epoch, start in consumed_epochs or []:
        if epoch > answer_epoch and start is not None:
            candidates.append(start)
            break
    offset = min(candidates)
    if offset < position:
        return Divergence(True, offset, answer_epoch)
    return Divergence(True)
