"""Holes: offsets a replica's log lacks below its end, kept out of every read until a
replica's copy fills them. Local damage is never a divergence: a damaged range does not
shorten the log, and the offsets it held are never assigned again.

A hole is one of two kinds. *Damaged bytes*: a batch found damaged (bad header or CRC)
with good batches after it; the damage *extent* runs from the bad batch to the next
position where a valid batch starts whose offsets follow on and whose successors chain
to the end of the segment (or, when none does, to the segment's end, the next segment's
base offset bounding the offsets). Only those bytes go to quarantine. *Missing
offsets*: offsets no segment holds any more (a segment file lost or cut short, a
damaged tail of unknown extent), between the end of what is left and the next segment,
or the log's offset floor (``Log.offset_floor``).

No read returns a hole's bytes: a read stops before a hole, and one starting inside it
is refused with KAFKA_STORAGE_ERROR (a client retries, and finds the partition's next
leader) until the hole is filled or declared *lost* (no replica holds it: the only
replica, ``LogHoles.sole_copy``); a read then steps over it, and a client sees a gap in
offsets, as after compaction. Every walk over a segment's batches steps over a hole.

A follower fills a hole from its leader: its fetcher reads exactly the hole's offsets,
and since followers copy the leader's bytes, the batches of a damaged-bytes hole must
have the same offsets and the same total length; they are written in place
(``FileHandle.pwrite``), CRC-checked again, and the segment's indexes, the producer state
and the epoch cache are rebuilt. Missing offsets are filled by a new segment at the
hole's start. A copy that does not fit means the leader's log differs there: the
follower truncates to the hole's start and fetches again, as after a divergence.
A leader never fills a hole: it gives leadership to the rest of its ISR (see
``replication/replica_manager.py``).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from epochlog.protocol.batch import HEADER_SIZE, BatchHeader, read_header, validate_batch
from epochlog.protocol.errors import KafkaError
from epochlog.storage.epoch_cache import LeaderEpochCache
from epochlog.storage.quarantine import Quarantine
from epochlog.storage.segment import DamagedBatch, LogSegment

logger = logging.getLogger("epochlog.storage")

# A hole's end is searched for within this many bytes after the damage; past that the
# extent is not known and the log is cut as before.
SCAN_BYTES = 32 << 20
_MAGIC_AT = 16
_BASE_OFFSET = struct.Struct(">q")


class RepairMismatch(Exception):
    """What a replica sent for a hole does not fit it byte for byte."""


@dataclass(eq=False)
class Hole:
    """Offsets [first_offset, end_offset) this log lacks. With a ``segment``: damaged
    bytes [position, end_position) of it; without, offsets no segment holds. ``epoch_after``
    is the epoch of the batch after it; ``lost``: no replica holds them (reads step over)."""

    segment: LogSegment | None
    position: int
    end_position: int
    first_offset: int
    end_offset: int
    epoch_after: int | None
    path: str
    lost: bool = False

    @property
    def size(self) -> int:
        return self.end_position - self.position

    @property
    def missing(self) -> bool:
        """Whether no segment holds its offsets (filled by a new segment, not in place)."""
        return self.segment is None


class LogHoles:
    """The holes of one log, oldest offset first, and whether this replica is the only
    copy there is (``sole_copy``: every hole is lost as soon as it is found)."""

    def __init__(self) -> None:
        self._holes: list[Hole] = []
        self.sole_copy = False
        # Told of each new hole (the replica manager: a leader with one steps down).
        self.on_hole: Callable[[Hole], None] | None = None

    def __bool__(self) -> bool:
        return bool(self._holes)

    def __iter__(self) -> Iterator[Hole]:
        return iter(list(self._holes))

    def first(self) -> Hole | None:
        """The hole at the lowest offset: what is repaired first."""
        return self._holes[0] if self._holes else None

    def awaiting_repair(self) -> list[Hole]:
        """Holes some replica may still fill (not lost)."""
        return [h for h in self._holes if not h.lost]

    def add(self, hole: Hole) -> None:
        hole.lost = hole.lost or self.sole_copy
        self._holes.append(hole)
        self._holes.sort(key=lambda h: h.first_offset)
        if hole.segment is not None:
            hole.segment.holes = sorted([*hole.segment.holes, (hole.position, hole.end_position)])
        if self.on_hole is not None:
            self.on_hole(hole)

    def declare_lost(self, why: str) -> None:
        """No replica can fill these holes: from now on reads step over them."""
        for hole in self._holes:
            if not hole.lost:
                hole.lost = True
                logger.error(
                    "offsets %d..%d are lost (%s): readers see a gap there; what was left of "
                    "them is kept in %s",
                    hole.first_offset,
                    hole.end_offset - 1,
                    why,
                    hole.path,
                )

    def covering(self, offset: int) -> Hole | None:
        """The hole holding ``offset``, if one does."""
        return next((h for h in self._holes if h.first_offset <= offset < h.end_offset), None)

    def read_limit(self, start_offset: int) -> int | None:
        """Where a read from ``start_offset`` (not inside a hole) must stop: the first
        offset of the next hole."""
        for hole in self._holes:
            if hole.end_offset > start_offset:
                return hole.first_offset
        return None

    def recovery_point(self, point: int) -> int:
        """``point``, but never past a hole: a crash then re-validates the hole's segment
        and finds it again (holes live in memory only)."""
        hole = self.first()
        return point if hole is None else min(point, hole.first_offset)

    def forget(self, hole: Hole) -> None:
        """The hole left the log (filled, truncated or deleted with its segment)."""
        if hole in self._holes:
            self._holes.remove(hole)
        if hole.segment is not None:
            span = (hole.position, hole.end_position)
            hole.segment.holes = [s for s in hole.segment.holes if s != span]

    def forget_where(self, gone: list[LogSegment], cut: tuple[LogSegment, int] | None) -> None:
        """Drop holes of segments that left the log, and those a cut at (segment,
        position) removed."""
        for hole in list(self._holes):
            if hole.segment is None:
                continue
            if any(hole.segment is s for s in gone) or (
                cut is not None and hole.segment is cut[0] and hole.end_position > cut[1]
            ):
                self.forget(hole)

    def clear(self) -> None:
        for hole in list(self._holes):
            self.forget(hole)

    def forget_from(self, offset: int) -> None:
        """Drop the holes a truncation at ``offset`` removes (none reaches into it)."""
        for hole in list(self._holes):
            if hole.end_offset > offset:
                self.forget(hole)

    def forget_before(self, offset: int) -> None:
        """Drop the holes wholly below a new log start: nobody reads there."""
        for hole in list(self._holes):
            if hole.end_offset <= offset:
                self.forget(hole)

    def open_at(
        self, quarantine: Quarantine, segments: list[LogSegment], damage: DamagedBatch, where: str
    ) -> bool:
        """Make ``damage`` a hole if its extent is known."""
        index = segments.index(damage.segment)
        following = segments[index + 1].base_offset if index + 1 < len(segments) else None
        first = damage.segment.offset_at_position(damage.position)
        hole = open_hole(
            quarantine, damage.segment, damage.position, first, following, damage.reason, where
        )
        if hole is not None:
            self.add(hole)
        return hole is not None

    def open_missing(
        self, quarantine: Quarantine, first_offset: int, end_offset: int, why: str, where: str
    ) -> Hole:
        """Offsets [first_offset, end_offset) no segment holds any more become a hole."""
        path = quarantine.keep(
            f"{first_offset:020d}-missing",
            [],
            {
                "reason": f"{where}: {why}",
                "first_offset": first_offset,
                "last_offset": end_offset - 1,
                "hole": True,
                "missing": True,
            },
        )
        logger.error(
            "%s: offsets %d..%d are missing (%s): a hole, never served, until a replica's "
            "copy fills it; noted in %s",
            where,
            first_offset,
            end_offset - 1,
            why,
            path,
        )
        hole = Hole(None, 0, 0, first_offset, end_offset, None, path)
        self.add(hole)
        return hole

    def shrink(self, hole: Hole, filled_to: int, bytes_filled: int) -> None:
        """The hole's first ``bytes_filled`` bytes and offsets below ``filled_to`` are
        filled; what is left of it stays a hole."""
        self.forget(hole)
        hole.position += bytes_filled
        hole.first_offset = filled_to
        if filled_to < hole.end_offset:
            self._holes.append(hole)
            self._holes.sort(key=lambda h: h.first_offset)
            if hole.segment is not None:
                spans = [*hole.segment.holes, (hole.position, hole.end_position)]
                hole.segment.holes = sorted(spans)

    def fill(self, hole: Hole, data: bytes) -> list[BatchHeader]:
        """Write the batches of ``data`` (a replica's copy) that fill ``hole`` from its
        start in place, read them back and check them again; the hole shrinks or is gone
        (the caller indexes the segment anew then). Returns the headers written (none:
        nothing usable yet). Raises RepairMismatch when the copy cannot fit the hole."""
        size, next_offset = fitting_batches(hole, data)
        segment = hole.segment
        if size == 0 or segment is None:
            return []
        segment.file.pwrite(memoryview(data)[:size], hole.position)
        segment.file.fsync()
        written = segment.file.pread(size, hole.position)
        headers, at = [], 0
        try:
            while at < size:
                headers.append(validate_batch(written, at))
                at += headers[-1].size
        except KafkaError as exc:
            raise RepairMismatch(f"the bytes written fail their check: {exc}") from None
        self.shrink(hole, next_offset, size)
        logger.warning(
            "%s: offsets %d..%d of a hole filled in place from a replica (%d bytes)%s",
            segment.log_path,
            headers[0].base_offset,
            next_offset - 1,
            size,
            "; the hole is gone" if hole.position >= hole.end_position else "",
        )
        return headers


def epochs_learnt(
    cache: LeaderEpochCache, segments: list[LogSegment], headers: list[BatchHeader]
) -> None:
    """A filled hole's batches may carry an epoch's true start, which the cache, built
    without them, places later: then it is rebuilt from every batch."""
    if all(cache.epoch_for_offset(h.base_offset) == h.partition_leader_epoch for h in headers):
        return
    cache.clear()
    for segment in segments:
        for _, header in segment.iter_headers():
            cache.assign(header.partition_leader_epoch, header.base_offset)


def open_hole(
    quarantine: Quarantine,
    segment: LogSegment,
    position: int,
    first_offset: int,
    next_base: int | None,
    reason: str,
    context: str,
) -> Hole | None:
    """Find the damage extent from the bad batch at ``position`` (whose offsets start at
    ``first_offset``; ``next_base`` is the next segment's base offset, if any), keep
    only those bytes in quarantine and describe the hole; None if the extent is not
    known, and the caller cuts."""
    extent = _extent(segment, position, first_offset, next_base)
    if extent is None:
        return None
    end_position, end_offset, epoch_after = extent
    path = quarantine.keep(
        f"{first_offset:020d}-damaged-{segment.base_offset:020d}-{position}-hole",
        [(segment.file, position, end_position - position)],
        {
            "reason": f"{context}: {reason}",
            "segment": segment.log_path,
            "position": position,
            "first_offset": first_offset,
            "last_offset": end_offset - 1,
            "hole": True,
        },
    )
    logger.error(
        "%s found %s damaged at bytes %d..%d (%s): offsets %d..%d are a hole, never "
        "served, until a replica's copy fills them; the damaged bytes are kept in %s",
        context,
        segment.log_path,
        position,
        end_position,
        reason,
        first_offset,
        end_offset - 1,
        path,
    )
    return Hole(segment, position, end_position, first_offset, end_offset, epoch_after, path)


def _extent(
    segment: LogSegment, position: int, first_offset: int, next_base: int | None
) -> tuple[int, int, int | None] | None:
    """(end position, end offset, epoch after) of the damage from ``position``; not
    known when a hole already follows it in the segment (holes never overlap)."""
    if any(start >= position for start, _ in segment.holes):
        return None
    size = segment.size
    data = segment.file.pread(min(size - position, SCAN_BYTES), position)
    for at in _candidates(data, first_offset, next_base):
        if _chains_to_the_end(segment, position + at, first_offset, next_base):
            header = read_header(data, at)
            return position + at, header.base_offset, header.partition_leader_epoch
    scanned_all = len(data) == size - position
    if next_base is not None and next_base > first_offset and scanned_all:
        return size, next_base, None
    return None


def _candidates(data: bytes, first_offset: int, next_base: int | None) -> Iterator[int]:
    """Positions after the first byte that could start a batch following the damage:
    magic 2 and a base offset between the damaged batch's and the next segment's."""
    upper = next_base if next_base is not None else first_offset + (1 << 31)
    at = data.find(2, _MAGIC_AT + 1)
    while at >= 0:
        start = at - _MAGIC_AT
        if start + HEADER_SIZE <= len(data):
            (base,) = _BASE_OFFSET.unpack_from(data, start)
            if first_offset < base < upper:
                yield start
        at = data.find(2, at + 1)


def _chains_to_the_end(
    segment: LogSegment, position: int, first_offset: int, next_base: int | None
) -> bool:
    """Whether valid batches from ``position`` run exactly to the segment's end with
    offsets that only go forward, past ``first_offset`` and up to ``next_base``."""
    size = segment.size
    expected = first_offset + 1
    while position < size:
        try:
            header = read_header(segment.file.pread(HEADER_SIZE, position))
            if position + header.size > size:
                return False
            validate_batch(segment.file.pread(header.size, position))
        except KafkaError:
            return False
        if header.base_offset < expected:
            return False
        expected = header.next_offset
        position += header.size
    return next_base is None or expected <= next_base


def fitting_batches(hole: Hole, data: bytes) -> tuple[int, int]:
    """(bytes, next offset) of the whole batches of ``data`` that fill the hole from its
    start; raises RepairMismatch when they do not fit it exactly."""
    at, expected = 0, hole.first_offset
    epoch = -1
    while at + HEADER_SIZE <= len(data) and expected < hole.end_offset:
        header = _valid_header(data, at)
        if header is None:
            break
        if header.base_offset != expected:
            raise RepairMismatch(f"a batch at offset {header.base_offset}, expected {expected}")
        too_long = not hole.missing and at + header.size > hole.size
        if header.next_offset > hole.end_offset or too_long:
            raise RepairMismatch(
                f"batch {header.base_offset}..{header.last_offset} ({header.size} bytes) "
                f"does not fit the hole's {hole.size - at} bytes up to offset {hole.end_offset}"
            )
        if header.partition_leader_epoch < epoch or (
            hole.epoch_after is not None and header.partition_leader_epoch > hole.epoch_after
        ):
            raise RepairMismatch(f"epoch {header.partition_leader_epoch} out of order")
        epoch = header.partition_leader_epoch
        at += header.size
        expected = header.next_offset
    if hole.missing:
        return at, expected
    if expected == hole.end_offset and at != hole.size:
        raise RepairMismatch(f"offsets up to {expected} in {at} bytes, the hole has {hole.size}")
    if at == hole.size and expected != hole.end_offset:
        raise RepairMismatch(f"{at} bytes end at offset {expected}, not {hole.end_offset}")
    return at, expected


def _valid_header(data: bytes, at: int) -> BatchHeader | None:
    """The header of the whole, CRC-valid batch at ``at``; None if cut short."""
    try:
        header = read_header(data, at)
    except KafkaError as exc:
        raise RepairMismatch(f"a bad batch header: {exc}") from None
    if at + header.size > len(data):
        return None
    try:
        validate_batch(data, at)
    except KafkaError as exc:
        raise RepairMismatch(f"a batch fails its check: {exc}") from None
    return header
