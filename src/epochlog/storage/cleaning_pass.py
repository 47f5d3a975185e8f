"""One pass of the log cleaner over a broker's compacted logs (what Kafka's
LogCleanerManager chooses): each log dirty enough below its high watermark is cleaned
in turn, in steps (``LogCleaner.clean_steps``), so that a pass over hundreds of
megabytes (``__consumer_offsets`` rolls at 100 MiB) leaves the broker answering; a log
deleted or moved away meanwhile is left."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from typing import TYPE_CHECKING, TypeVar

from epochlog.seams.tasks import Step
from epochlog.storage.cleaner import LogCleaner, dirty_ratio
from epochlog.storage.compaction_lag import cleanable_up_to, compaction_overdue

if TYPE_CHECKING:
    from epochlog.storage.checkpoints import TopicPartition
    from epochlog.storage.log import Log

T = TypeVar("T")


def first_dirty_offset(first_dirty: Mapping[TopicPartition, int], log: Log) -> int:
    """Where the uncleaned part of ``log`` starts (its log start if unknown, or if a
    truncation left the checkpointed offset past the log end)."""
    offset = first_dirty.get((log.topic, log.partition), log.log_start_offset)
    if offset > log.log_end_offset:
        offset = log.log_start_offset
    return max(offset, log.log_start_offset)


def cleaning_pass(
    cleaner: LogCleaner,
    logs: list[Log],
    first_dirty: dict[TopicPartition, int],
    high_watermark: Callable[[str, int], int | None],
    served: Callable[[Log], bool],
    now_ms: int,
) -> Generator[Step, None, int]:
    """Clean every log of ``logs`` dirty enough, pausing after each batch read; how many
    were cleaned (their new first dirty offsets go into ``first_dirty``). ``served``:
    whether a log is still the one its partition is served from, and not moving."""
    cleaned = 0
    for log in logs:
        if not log.config.compact or not served(log):
            continue
        bound = high_watermark(log.topic, log.partition)
        if bound is None:
            continue
        hole = log.holes.first()
        if hole is not None:  # nothing from a hole's segment on until it is filled
            bound = min(bound, hole.first_offset)
        bound = cleanable_up_to(log, bound, now_ms)
        start = first_dirty_offset(first_dirty, log)
        ratio = dirty_ratio(log, start, bound)
        if ratio < log.config.min_cleanable_dirty_ratio and not compaction_overdue(
            log, start, bound, now_ms
        ):
            continue
        steps = cleaner.clean_steps(log, start, bound, now_ms)
        result = yield from _while_served(log, served, steps)
        if result is not None:
            first_dirty[(log.topic, log.partition)] = result[1]
            cleaned += 1
    return cleaned


def _while_served(
    log: Log, served: Callable[[Log], bool], steps: Generator[Step, None, T]
) -> Generator[Step, None, T | None]:
    """``steps`` as long as ``log`` stays served; None once it is not."""
    while True:
        try:
            work = next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        yield work
        if not served(log):
            steps.close()
            return None
