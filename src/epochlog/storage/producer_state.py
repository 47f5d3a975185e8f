"""Idempotent producer state of one partition (Kafka's ProducerStateManager semantics).

Per producer id: the producer epoch and the metadata of its last five batches, enough to
recognise a retried batch and to enforce sequence order.

Validation of a leader append (``ProducerAppend.check``), as Kafka 2.7+ does it:

- a producer epoch below the known one: INVALID_PRODUCER_EPOCH (Kafka 2.7 replaced the
  fatal PRODUCER_FENCED with this retriable code, KIP-588);
- a batch matching one of the cached five (same epoch, first and last sequence): a
  :class:`Duplicate` with the original offsets; the broker answers success with them and
  stores nothing. A retried batch older than the cached five fails the sequence check
  below. We never answer DUPLICATE_SEQUENCE_NUMBER: modern Kafka brokers do not either
  (clients treat it as success without offsets), the Duplicate answer is strictly better;
- a new (bumped) epoch must start at sequence 0, else OUT_OF_ORDER_SEQUENCE_NUMBER;
- same epoch: first sequence must follow the last (wrapping at 2^31-1), else
  OUT_OF_ORDER_SEQUENCE_NUMBER;
- an unknown producer id (never seen, or its state removed with its records by retention,
  or expired) is accepted at any sequence. Kafka stopped sending UNKNOWN_PRODUCER_ID in
  2.5 (KIP-360): refusing would wedge a producer whose records aged out, while accepting
  costs nothing the producer could have prevented.

Transactions (Kafka's ProducerStateManager again): a producer's first transactional
batch opens its transaction at that offset; a marker (control batch) closes it, as a
commit or an abort; the smallest open first offset is the partition's first unstable
offset, which bounds the last stable offset. On a leader append a marker older than the
producer's epoch is INVALID_PRODUCER_EPOCH, one from an older coordinator epoch is
TRANSACTION_COORDINATOR_FENCED, and a plain batch from a producer with a transaction
open is INVALID_TXN_STATE. Batches the broker's coordinators write under a producer's id
(origin COORDINATOR, base sequence -1: transactional offset commits) take part in the
transaction but not in sequence checks.

Verification (KIP-890 part 1, Kafka's VerificationGuard): a client's transactional batch
that opens a transaction here must carry the guard this partition handed out when its
leader asked the transaction coordinator whether the transaction includes the partition;
one that continues a transaction open here at its epoch needs none. Any transactional
batch of the producer written (its first batch, a marker) drops the guard, so a
coordinator's answer that a marker overtook cannot open a transaction nobody will end.

Followers and recovery ``replay`` without ``check``: they trust the leader's log. A leader
replays its own batches too, once they are written.

Snapshots (``<offset>.snapshot``, offset = log end at the time) hold every producer's
five batches and its open transaction, so deduplication and the last stable offset
survive a restart: our own binary format (version 2: int16 version, uint32 CRC32C of the
rest, then producers) rather than Kafka's, which keeps only the last batch. Version 1
snapshots (before transactions) are still read.
"""

from __future__ import annotations

import enum
import logging
import struct
from collections import deque
from dataclasses import dataclass

import crc32c

from epochlog.protocol.batch import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.seams import Disk

SNAPSHOT_SUFFIX = ".snapshot"
NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_EPOCH = -1
MAX_SEQUENCE = 0x7FFFFFFF
_SNAPSHOT_VERSION = 2
NO_TXN = -1

_HEAD = struct.Struct(">hI")
_COUNT = struct.Struct(">i")
_PRODUCER_V1 = struct.Struct(">qhqi")
_PRODUCER = struct.Struct(">qhqiqi")
_BATCH = struct.Struct(">iiqqq")

logger = logging.getLogger("epochlog.storage")


class AppendOrigin(enum.Enum):
    """Who appends a leader's batch (Kafka's AppendOrigin): a client's produce is checked
    for sequence order; the broker's own coordinators write transaction markers and
    transactional offset commits under a client's producer id without sequences."""

    CLIENT = "client"
    COORDINATOR = "coordinator"


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A retried batch already in the log, at these offsets."""

    base_offset: int
    last_offset: int
    max_timestamp: int


@dataclass(frozen=True, slots=True, eq=False)
class VerificationGuard:
    """One verification of a producer's transaction at this partition: compared by
    identity, so an answer to an earlier verification never passes for a later one."""

    epoch: int
    created_ms: int


# What a leader append passes when it asked no coordinator: never held by a partition,
# so only a batch that continues an open transaction passes with it.
NO_GUARD = VerificationGuard(NO_PRODUCER_EPOCH, -1)


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker closed: its records span first..last (the marker)."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    last_timestamp: int = -1
    batches: deque[BatchMetadata] | None = None
    current_txn_first_offset: int = NO_TXN
    coordinator_epoch: int = -1

    def __post_init__(self) -> None:
        if self.batches is None:
            self.batches = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def in_transaction(self) -> bool:
        return self.current_txn_first_offset != NO_TXN

    def copy(self) -> ProducerEntry:
        return ProducerEntry(
            self.producer_id,
            self.epoch,
            self.last_timestamp,
            deque(self.batches or (), maxlen=NUM_BATCHES_TO_RETAIN),
            self.current_txn_first_offset,
            self.coordinator_epoch,
        )

    def _move_to_epoch(self, epoch: int) -> None:
        """A new (bumped) epoch forgets the sequences of the old one."""
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        if header.producer_epoch != self.epoch:
            return None
        for meta in self.batches or ():
            if meta.first_seq == header.base_sequence and meta.last_seq == header.last_sequence:
                return meta
        return None

    def add(self, header: BatchHeader) -> None:
        """Record an appended data batch (offsets assigned)."""
        self._move_to_epoch(header.producer_epoch)
        if header.is_transactional and not self.in_transaction:
            self.current_txn_first_offset = header.base_offset
        self.last_timestamp = max(self.last_timestamp, header.max_timestamp)
        if header.base_sequence == NO_SEQUENCE:
            return  # written by a coordinator: no sequence to follow
        assert self.batches is not None
        self.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )

    def end_transaction(
        self, header: BatchHeader, commit: bool, coordinator_epoch: int
    ) -> CompletedTxn:
        """A marker: the open transaction (if any) ends; a marker with nothing open
        still closes an empty range at its own offset, as Kafka's does."""
        if header.producer_epoch > self.epoch:
            self._move_to_epoch(header.producer_epoch)
        first = self.current_txn_first_offset if self.in_transaction else header.base_offset
        self.current_txn_first_offset = NO_TXN
        self.coordinator_epoch = max(self.coordinator_epoch, coordinator_epoch)
        self.last_timestamp = max(self.last_timestamp, header.max_timestamp)
        return CompletedTxn(self.producer_id, first, header.base_offset, not commit)


Marker = tuple[bool, int]


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class ProducerAppend:
    """The checks of one append's batches before any is written: each batch is checked
    against the state its predecessors in the same append would leave (copies; the
    manager's own state changes only by ``replay`` once the batches are written)."""

    def __init__(
        self, manager: ProducerStateManager, guard: VerificationGuard | None = None
    ) -> None:
        self._manager = manager
        # A client's produce under verification (None: verification off, or an append
        # of the broker's own).
        self._guard = guard
        self.updated: dict[int, ProducerEntry] = {}

    def _entry(self, producer_id: int) -> ProducerEntry | None:
        return self.updated.get(producer_id) or self._manager.producers.get(producer_id)

    def check(
        self,
        header: BatchHeader,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        marker: Marker | None = None,
    ) -> Duplicate | None:
        """Validate a leader append (see module docstring); raises KafkaError."""
        if header.producer_id == NO_PRODUCER_ID:
            if header.is_transactional or header.is_control:
                raise KafkaError(
                    ErrorCode.INVALID_RECORD, "a transactional batch needs a producer id"
                )
            return None
        entry = self._entry(header.producer_id)
        if self._guard is not None and marker is None and header.is_transactional:
            self._require_verified(entry, header)
        if entry is None:
            return None
        pid, epoch = header.producer_id, header.producer_epoch
        if marker is not None:
            if epoch < entry.epoch:
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"marker of producer {pid} epoch {epoch} is older than {entry.epoch}",
                )
            if marker[1] < entry.coordinator_epoch:
                raise KafkaError(
                    ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                    f"marker of producer {pid} from coordinator epoch {marker[1]}, "
                    f"after {entry.coordinator_epoch}",
                )
            return None
        if origin == AppendOrigin.COORDINATOR:
            if epoch < entry.epoch:
                raise KafkaError(
                    ErrorCode.INVALID_PRODUCER_EPOCH,
                    f"producer {pid} epoch {epoch} is older than the current {entry.epoch}",
                )
            return None
        if entry.in_transaction and not header.is_transactional:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {pid} has a transaction open: a plain batch is not allowed",
            )
        duplicate = entry.find_duplicate(header)
        if duplicate is not None:
            return Duplicate(duplicate.first_offset, duplicate.last_offset, duplicate.max_timestamp)
        seq = header.base_sequence
        if epoch < entry.epoch:
            raise KafkaError(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {pid} epoch {epoch} is older than the current {entry.epoch}",
            )
        if epoch != entry.epoch:
            if seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {pid} new epoch {epoch} must start at sequence 0, not {seq}",
                )
        elif entry.batches and not _in_sequence(entry.last_seq, seq):
            raise KafkaError(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid} sequence {seq} does not follow {entry.last_seq}",
            )
        return None

    def _require_verified(self, entry: ProducerEntry | None, header: BatchHeader) -> None:
        """A transactional batch continues a transaction open here at its epoch, or
        carries the guard of a verification the coordinator answered for its epoch."""
        if entry is not None and entry.in_transaction and entry.epoch == header.producer_epoch:
            return
        held = self._manager.verifications.get(header.producer_id)
        if held is None or held is not self._guard or held.epoch != header.producer_epoch:
            raise KafkaError(
                ErrorCode.INVALID_TXN_STATE,
                f"producer {header.producer_id} epoch {header.producer_epoch}: the record "
                "was not part of an ongoing transaction",
            )

    def update(self, header: BatchHeader, marker: Marker | None = None) -> None:
        """Count a batch checked, for the checks of the batches after it."""
        if header.producer_id == NO_PRODUCER_ID:
            return
        entry = self.updated.get(header.producer_id)
        if entry is None:
            current = self._manager.producers.get(header.producer_id)
            entry = current.copy() if current else ProducerEntry(header.producer_id)
            self.updated[header.producer_id] = entry
        if marker is None:
            entry.add(header)
        else:
            entry.end_transaction(header, marker[0], marker[1])


class ProducerStateManager:
    """All producers of a partition, with snapshots kept beside the segments."""

    def __init__(self, disk: Disk, directory: str) -> None:
        self.disk = disk
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        # Producer id -> the guard of the verification under way for its next
        # transaction here (never snapshotted: a restart asks the coordinator again).
        self.verifications: dict[int, VerificationGuard] = {}

    def start_verification(
        self, producer_id: int, epoch: int, now_ms: int
    ) -> VerificationGuard | None:
        """The guard a leader asks the coordinator under before appending a producer's
        transactional batch (the one already under way for that epoch, if any); None
        when its transaction is open here at that epoch, so nothing is asked."""
        entry = self.producers.get(producer_id)
        if entry is not None and entry.in_transaction and entry.epoch == epoch:
            return None
        guard = self.verifications.get(producer_id)
        if guard is None or guard.epoch != epoch:
            guard = self.verifications[producer_id] = VerificationGuard(epoch, now_ms)
        return guard

    def check_append(
        self,
        batches: list[tuple[int, BatchHeader]],
        origin: AppendOrigin,
        markers: dict[int, Marker],
        guard: VerificationGuard | None = None,
    ) -> Duplicate | None:
        """Check a leader append's batches before any is written (KafkaError if one is
        refused); a retried batch's Duplicate. Each is checked against the state its
        predecessors in the append would leave (one batch, the usual case: no copy)."""
        pending = ProducerAppend(self, guard)
        last = batches[-1][0]
        for position, header in batches:
            duplicate = pending.check(header, origin, markers.get(position))
            if duplicate is not None:
                return duplicate
            if position != last:
                pending.update(header, markers.get(position))
        return None

    def replay(self, header: BatchHeader, marker: Marker | None = None) -> CompletedTxn | None:
        """Apply a batch already in the log (recovery, a follower's append, a leader's
        once written): in place, as nothing is left to refuse it."""
        producer_id = header.producer_id
        if producer_id == NO_PRODUCER_ID:
            return None
        if header.is_transactional:
            # Its transaction is open here now, or was just ended: either way a guard
            # handed out before is spent.
            self.verifications.pop(producer_id, None)
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        if marker is None:
            entry.add(header)
            return None
        return entry.end_transaction(header, marker[0], marker[1])

    def first_unstable_offset(self) -> int | None:
        """The first offset of the oldest open transaction, if any is open."""
        firsts = [e.current_txn_first_offset for e in self.producers.values() if e.in_transaction]
        return min(firsts) if firsts else None

    def clear(self) -> None:
        self.producers.clear()
        self.verifications.clear()

    def evict_before(self, log_start_offset: int) -> None:
        """Forget producers whose every batch now lies before the log start (retention)."""
        gone = [
            p
            for p, e in self.producers.items()
            if e.last_offset < log_start_offset and not e.in_transaction
        ]
        for producer_id in gone:
            del self.producers[producer_id]
        for offset in self.snapshot_offsets():
            if offset < log_start_offset:
                self.disk.remove(self._path(offset))

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle longer than ``producer.id.expiration.ms``, and guards
        that long unspent (Kafka's rule for both)."""
        gone = [
            p
            for p, e in self.producers.items()
            if now_ms - e.last_timestamp > expiration_ms and not e.in_transaction
        ]
        for producer_id in gone:
            del self.producers[producer_id]
        for producer_id, guard in list(self.verifications.items()):
            if now_ms - guard.created_ms > expiration_ms:
                del self.verifications[producer_id]
        return len(gone)

    # -- snapshots ---------------------------------------------------------------------

    def _path(self, offset: int) -> str:
        return f"{self.directory}/{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        out = []
        for name in self.disk.listdir(self.directory):
            stem = name[: -len(SNAPSHOT_SUFFIX)]
            if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def take_snapshot(self, offset: int) -> None:
        """Persist the state as of log end ``offset`` (clean shutdown, segment roll)."""
        body = bytearray(_COUNT.pack(len(self.producers)))
        for entry in self.producers.values():
            batches = entry.batches or ()
            body += _PRODUCER.pack(
                entry.producer_id,
                entry.epoch,
                entry.last_timestamp,
                len(batches),
                entry.current_txn_first_offset,
                entry.coordinator_epoch,
            )
            for m in batches:
                body += _BATCH.pack(
                    m.first_seq, m.last_seq, m.first_offset, m.last_offset, m.max_timestamp
                )
        data = _HEAD.pack(_SNAPSHOT_VERSION, crc32c.crc32c(bytes(body))) + bytes(body)
        self.disk.write_atomic(self._path(offset), data)

    def _read_snapshot(self, offset: int) -> dict[int, ProducerEntry]:
        data = self.disk.read_file(self._path(offset))
        version, crc = _HEAD.unpack_from(data, 0)
        body = memoryview(data)[_HEAD.size :]
        if version not in (1, _SNAPSHOT_VERSION) or crc32c.crc32c(body) != crc:
            raise ValueError(f"snapshot {self._path(offset)} is corrupt")
        (count,) = _COUNT.unpack_from(body, 0)
        pos = _COUNT.size
        producers = {}
        layout = _PRODUCER if version == _SNAPSHOT_VERSION else _PRODUCER_V1
        for _ in range(count):
            fields = layout.unpack_from(body, pos)
            pos += layout.size
            pid, epoch, last_ts, n = fields[:4]
            entry = ProducerEntry(pid, epoch, last_ts)
            if version == _SNAPSHOT_VERSION:
                entry.current_txn_first_offset, entry.coordinator_epoch = fields[4:]
            for _ in range(n):
                assert entry.batches is not None
                entry.batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            producers[pid] = entry
        return producers

    def load_latest_snapshot(self, max_offset: int, min_offset: int = 0) -> int | None:
        """Load the newest readable snapshot in [min_offset, max_offset]; drop newer ones.

        Returns the snapshot's offset (replay the log from there), or None: state is then
        empty and must be replayed from ``min_offset``.
        """
        self.producers = {}
        for offset in reversed(self.snapshot_offsets()):
            if offset > max_offset:
                self.disk.remove(self._path(offset))
                continue
            if offset < min_offset:
                break
            try:
                self.producers = self._read_snapshot(offset)
                return offset
            except (ValueError, struct.error) as exc:
                logger.warning("ignoring producer state snapshot: %s", exc)
                self.disk.remove(self._path(offset))
        return None

    def delete_snapshots(self) -> None:
        for offset in self.snapshot_offsets():
            self.disk.remove(self._path(offset))
