"""A log's transactional side, kept apart from its segments' bookkeeping: the markers
of an appended record set, the aborted-transaction index entries a marker adds, and
rebuilding producer state (open transactions included) from the log."""

from __future__ import annotations

import logging

from epochlog.protocol.batch import BatchHeader, WritableBatches
from epochlog.protocol.control import read_marker
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.storage.log_view import LogView
from epochlog.storage.producer_state import AppendOrigin, CompletedTxn
from epochlog.storage.txn_index import AbortedTxn, TxnIndexCorrupt

logger = logging.getLogger("epochlog.storage")


def markers_of(
    records: WritableBatches, batches: list[tuple[int, BatchHeader]], origin: AppendOrigin
) -> dict[int, tuple[bool, int]]:
    """Each control batch's marker by position; clients may not write any."""
    markers = {}
    for position, header in batches:
        if header.is_control:
            if origin == AppendOrigin.CLIENT:
                raise KafkaError(
                    ErrorCode.INVALID_RECORD, "control batches come only from coordinators"
                )
            markers[position] = read_marker(memoryview(records)[position:][: header.size])
    return markers


def replay_written(
    log: LogView,
    batches: list[tuple[int, BatchHeader]],
    headers: list[BatchHeader],
    markers: dict[int, tuple[bool, int]],
) -> None:
    """Batches just written (``headers``: as written, at ``batches``' positions) into
    the producers' state; each aborted transaction a marker ends into the index."""
    for (position, _), header in zip(batches, headers, strict=True):
        completed = log.producer_state.replay(header, markers.get(position))
        if completed is not None:
            index_aborted(log, [completed])


def index_aborted(log: LogView, completed: list[CompletedTxn]) -> None:
    """Aborted transactions go into the index of the segment holding their marker."""
    segments = log.segments
    for txn in completed:
        if not txn.aborted:
            continue
        segment = segments[log.segment_for(txn.last_offset)]
        lso = log.producer_state.first_unstable_offset()
        segment.txn_index.append(
            AbortedTxn(
                txn.producer_id,
                txn.first_offset,
                txn.last_offset,
                txn.last_offset + 1 if lso is None else lso,
            )
        )


def rebuild_producer_state(log: LogView) -> None:
    """Newest snapshot at or below the log end, then replay batch headers after it
    (reading markers), writing the aborted-transaction index of what is replayed anew.
    A damaged index means a replay of the whole log."""
    state = log.producer_state
    snapshot = state.load_latest_snapshot(log.log_end_offset, log.log_start_offset)
    start = log.log_start_offset if snapshot is None else snapshot
    if not _txn_indexes_readable(log):
        state.clear()
        start = log.log_start_offset
    segments = log.segments[log.segment_for(start) :]
    for segment in segments:
        segment.txn_index.truncate_from(start)
    for segment in segments:
        found = segment.find_batch(start)
        if found is None:
            continue
        for position, header in segment.iter_headers(found[0]):
            if header.base_offset < start:
                continue
            marker = None
            if header.is_control:
                marker = read_marker(segment.file.pread(header.size, position))
            completed = state.replay(header, marker)
            if completed is not None:
                index_aborted(log, [completed])
    state.evict_before(log.log_start_offset)


def _txn_indexes_readable(log: LogView) -> bool:
    for segment in log.segments:
        try:
            segment.txn_index.entries  # noqa: B018 - reads and so checks the file
        except TxnIndexCorrupt as exc:
            logger.warning("%s; rebuilding producer state from the log start", exc)
            return False
    return True
