"""What a log does with damage it finds (recovery, a read's first CRC check, the
scrubber): local damage is a hole to repair, never a divergence to truncate to, and no
offset is ever given out twice.

A damaged batch whose extent is known becomes a hole of damaged bytes
(``storage/log_holes.py``). One whose extent is not known (a damaged tail) has its bytes
kept in quarantine and cut (``storage/damage.py``), and the offsets they held stay taken
up to the log's offset floor, a hole of missing offsets, as are offsets no segment holds
any more (a segment file lost or cut short). A replica's copy fills a hole: in place, or
as a new segment for missing offsets.
"""

from __future__ import annotations

import itertools
import logging

from epochlog.protocol.batch import BatchHeader, iter_batches
from epochlog.storage.damage import DamageCut, quarantine_damaged_tail
from epochlog.storage.log_holes import Hole, RepairMismatch, epochs_learnt, fitting_batches
from epochlog.storage.log_transactions import rebuild_producer_state
from epochlog.storage.log_view import DamageableLog
from epochlog.storage.segment import DamagedBatch, LogSegment

logger = logging.getLogger("epochlog.storage")


def damage_found(log: DamageableLog, damage: DamagedBatch, context: str) -> None:
    """A damaged batch: a hole when its extent is known, otherwise the cut, whose
    offsets become a hole too."""
    where = f"{log.topic}-{log.partition}: {context}"
    if not log.holes.open_at(log.quarantine, log.segments, damage, where):
        cut_at_damage(log, damage, context)


def cut_at_damage(log: DamageableLog, damage: DamagedBatch, context: str) -> DamageCut:
    """Remove a damaged batch whose extent is not known, and every byte after it, into
    one quarantine entry. The offsets they held are not given out again: up to the
    offset floor they become a hole of missing offsets."""
    log.pin_offset_floor()
    while True:
        segments = log.segments
        index = next(i for i, s in enumerate(segments) if s is damage.segment)
        where = f"{log.topic}-{log.partition}: {context}"
        cut = quarantine_damaged_tail(
            log.quarantine, segments, index, damage.position, damage.reason, where
        )
        log.holes.forget_where(segments[index + 1 :], (damage.segment, damage.position))
        log.drop_segments_after(index)
        damage.segment.cut_at(damage.position)
        damage.segment.activate()
        log.damage_cuts.append(cut)
        try:
            log.rebuild_after_truncation()
        except DamagedBatch as again:  # found while replaying headers
            damage = again
            continue
        holes_for_missing_offsets(log, context)
        return cut


def holes_for_missing_offsets(log: DamageableLog, context: str) -> None:
    """Offsets below the log's end or its offset floor that no segment holds become
    holes, and the log's end moves up to its floor. A compacted log's segments have gaps
    of their own: only its tail is judged."""
    where = f"{log.topic}-{log.partition}: {context}"
    if not log.config.compact:
        for before, after in itertools.pairwise(log.segments):
            first, end = before.next_offset, after.base_offset
            if first < end and not any(
                h.first_offset < end and h.end_offset > first for h in log.holes
            ):
                why = f"no segment holds them (the next segment is {after.log_path})"
                log.holes.open_missing(log.quarantine, first, end, why, where)
    first, floor = log.log_end_offset, log.offset_floor
    if first < floor:
        log.move_end_to(floor)
        why = f"the log had reached offset {floor} and now ends at {first}"
        log.holes.open_missing(log.quarantine, first, floor, why, where)


def fill_hole(log: DamageableLog, hole: Hole, data: bytes) -> bool:
    """Write a replica's copy of a hole's batches (in place, or as a new segment for
    missing offsets); True once it is gone, its segment indexed anew and epochs and
    producer state rebuilt with its batches. Raises RepairMismatch (the caller
    truncates to the hole's start: its leader's log differs there)."""
    headers = _fill_missing(log, hole, data) if hole.missing else log.holes.fill(hole, data)
    epochs_learnt(log.epoch_cache, log.segments, headers)
    if not headers or hole.first_offset < hole.end_offset:
        return False
    if hole.segment is not None:
        hole.segment.reindex()
        if hole.segment is not log.active_segment:
            hole.segment.seal()
    log.producer_state.clear()
    log.producer_state.delete_snapshots()
    rebuild_producer_state(log)
    return True


def _fill_missing(log: DamageableLog, hole: Hole, data: bytes) -> list[BatchHeader]:
    """A new sealed segment at the hole's start holding the replica's batches."""
    size, next_offset = fitting_batches(hole, data)
    if size == 0:
        return []
    if any(s.base_offset == hole.first_offset for s in log.segments):
        raise RepairMismatch(f"a segment already starts at offset {hole.first_offset}")
    batches = memoryview(data)[:size]
    headers = [header for _, header in iter_batches(batches)]
    segment = LogSegment(
        log.disk,
        log.directory,
        hole.first_offset,
        log.config.index_interval_bytes,
        log.clock.time_ms(),
    )
    segment.append(batches, headers)
    segment.seal()
    log.insert_segment(segment)
    log.holes.shrink(hole, next_offset, 0)
    logger.warning(
        "%s-%d: offsets %d..%d of a hole of missing offsets filled from a replica into %s",
        log.topic,
        log.partition,
        headers[0].base_offset,
        next_offset - 1,
        segment.log_path,
    )
    return headers
