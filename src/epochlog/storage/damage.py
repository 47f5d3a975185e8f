"""The cut: what happens to a log found damaged (at startup, by a read's CRC check of
data not yet checked in this run, or by the scrubber) when the damage cannot be a hole.
The first bad batch and everything after it leave the log, into one quarantine entry,
and the log ends before the bad batch; nothing is destroyed.

Where good batches follow the damage, a follower's log keeps them and the damaged range
becomes a hole (``storage/log_holes.py``) that its fetcher fills in place from the
leader. The cut remains for a leader (or a partition with no other replica), for damage
whose extent is not known (nothing good after it in the last segment), and whenever a
hole cannot be filled; a follower then fetches the removed range again from its leader.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from epochlog.protocol.batch import HEADER_SIZE, read_header
from epochlog.protocol.errors import KafkaError
from epochlog.storage.quarantine import Quarantine
from epochlog.storage.segment import LogSegment

logger = logging.getLogger("epochlog.storage")


@dataclass(frozen=True)
class DamageCut:
    """What a cut at damage removed."""

    first_offset: int
    last_offset_claimed: int | None
    size: int
    path: str


def quarantine_damaged_tail(
    quarantine: Quarantine,
    segments: list[LogSegment],
    index: int,
    position: int,
    reason: str,
    context: str,
    level: int = logging.ERROR,
) -> DamageCut:
    """Keep ``segments[index]`` from ``position`` on, and every later segment, in one
    quarantine entry and log it (``context`` says who cut: recovery after a crash, where
    a torn tail is expected, logs a warning); the caller then cuts and deletes them."""
    damaged = segments[index]
    first_offset = damaged.offset_at_position(position)
    sources = [(damaged.file, position, damaged.size - position)]
    sources += [(s.file, 0, s.size) for s in segments[index + 1 :]]
    size = sum(source[2] for source in sources)
    claimed = _claimed_last_offset(damaged, position)
    path = quarantine.keep(
        f"{first_offset:020d}-damaged-{damaged.base_offset:020d}-{position}",
        sources,
        {
            "reason": f"{context}: {reason}",
            "segment": damaged.log_path,
            "position": position,
            "first_offset": first_offset,
            "last_offset_claimed": claimed,
            "later_segments": [s.log_path for s in segments[index + 1 :]],
        },
    )
    logger.log(
        level,
        "%s cut %s at byte %d (%s): the log now ends at offset %d; "
        "%d bytes (%d later segments) kept in %s",
        context,
        damaged.log_path,
        position,
        reason,
        first_offset,
        size,
        len(segments) - index - 1,
        path,
    )
    return DamageCut(first_offset, claimed, size, path)


def _claimed_last_offset(segment: LogSegment, position: int) -> int | None:
    """The last offset the bad batch's header claims, if it still parses."""
    try:
        return read_header(segment.file.pread(HEADER_SIZE, position)).last_offset
    except KafkaError:
        return None
