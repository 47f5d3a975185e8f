"""Which of a log's oldest segments retention deletes: by ``retention.ms``,
``retention.bytes`` and the log start offset (Kafka's rules), decided apart from the log
that then deletes them."""

from __future__ import annotations

from epochlog.storage.config import LogConfig
from epochlog.storage.segment import LogSegment


def deletable_count(
    segments: list[LogSegment], config: LogConfig, log_start_offset: int, now_ms: int
) -> int:
    """How many of the oldest ``segments`` may go. Time and size apply only when
    ``cleanup.policy`` has ``delete``; segments below the log start go under any policy.
    Never the active (last) segment."""
    deletable = 0
    size_excess = (
        sum(s.size for s in segments) - config.retention_bytes
        if config.retention_bytes >= 0
        else -1
    )
    for i, segment in enumerate(segments[:-1]):
        next_base = segments[i + 1].base_offset
        below_start = next_base <= log_start_offset
        largest = segment.max_timestamp if segment.max_timestamp >= 0 else segment.created_ms
        # A compact-only topic keeps everything for the cleaner (Kafka's rule).
        expired = (
            config.delete and config.retention_ms >= 0 and now_ms - largest > config.retention_ms
        )
        over_size = config.delete and size_excess >= 0 and size_excess - segment.size >= 0
        if not (below_start or expired or over_size):
            break
        size_excess -= segment.size
        deletable += 1
    return deletable
