"""When the log cleaner may, and must, compact a log, by time (Kafka's
``min.compaction.lag.ms`` and ``max.compaction.lag.ms``): records younger than the
minimum lag are left as written, so a consumer sees every update for that long; a dirty
record older than the maximum lag is compacted however low the log's dirty ratio."""

from __future__ import annotations

from epochlog.storage.log_view import LogView

NO_TIMESTAMP = -1


def cleanable_up_to(log: LogView, upper_bound: int, now_ms: int) -> int:
    """``upper_bound`` lowered to the first segment holding a record younger than
    ``min.compaction.lag.ms``."""
    lag = log.config.min_compaction_lag_ms
    if lag <= 0:
        return upper_bound
    for segment in log.segments:
        if segment.base_offset >= upper_bound:
            break
        if segment.max_timestamp > now_ms - lag:
            return segment.base_offset
    return upper_bound


def compaction_overdue(log: LogView, first_dirty: int, upper_bound: int, now_ms: int) -> bool:
    """Whether the oldest dirty cleanable segment was started more than
    ``max.compaction.lag.ms`` ago (its first batch's timestamp, as Kafka judges)."""
    for segment in log.segments[:-1]:
        if segment.next_offset > upper_bound:
            return False
        if segment.next_offset > first_dirty:
            started = segment.first_batch_timestamp
            return started != NO_TIMESTAMP and now_ms - started > log.config.max_compaction_lag_ms
    return False
