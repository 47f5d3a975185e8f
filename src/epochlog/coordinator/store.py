"""A coordinator's access to its internal topic (``__consumer_offsets`` for groups,
``__transaction_state`` for transactions): which of its partitions this broker leads,
reading one back at load, and appending records with acks=all.

Everything goes through the replica manager, as a produce would: the internal topic is
replicated and fenced like any other, so a deposed coordinator cannot acknowledge."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.coordinator.hashing import OFFSETS_TOPIC
from epochlog.protocol.batch import NO_PRODUCER_ID, read_header
from epochlog.protocol.control import read_marker
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import Record, build_batch, iter_records
from epochlog.replication.replica_manager import ACKS_ALL, AckWait
from epochlog.storage.producer_state import AppendOrigin

if TYPE_CHECKING:
    from epochlog.replication.partition import Partition
    from epochlog.replication.replica_manager import ReplicaManager
    from epochlog.seams import Clock

log = logging.getLogger("epochlog.coordinator")

KeyValue = tuple[bytes, bytes | None]


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record read back at load, or a transaction marker (``record`` None)."""

    record: Record | None
    # The producer of a transactional batch (or of a marker); -1 for plain records.
    transactional_producer: int = NO_PRODUCER_ID
    commit: bool = False


@dataclass(frozen=True, slots=True)
class TxnProducer:
    """The producer a transactional write is made for (TxnOffsetCommit)."""

    producer_id: int
    producer_epoch: int


class OffsetsStore:
    def __init__(
        self,
        replica_manager: ReplicaManager,
        clock: Clock,
        read_chunk: int,
        topic: str = OFFSETS_TOPIC,
    ) -> None:
        self.topic = topic
        self.replica_manager = replica_manager
        self.clock = clock
        self.read_chunk = max(read_chunk, 1024)

    def partition(self, index: int) -> Partition | None:
        try:
            return self.replica_manager.partition(self.topic, index)
        except KafkaError:
            return None

    def led(self) -> dict[int, int]:
        """Partitions of the topic this broker leads now -> their leader epoch."""
        return {
            p.index: p.leader_epoch
            for p in self.replica_manager.partitions()
            if p.topic == self.topic and p.is_leader
        }

    def read_all(self, index: int) -> Iterator[StoredRecord]:
        """Every record and transaction marker of a partition's log, oldest first (the
        leader's whole log: a clean election's leader holds everything acknowledged)."""
        partition = self.partition(index)
        if partition is None:
            return
        plog = partition.log
        position = plog.log_start_offset
        while position < plog.log_end_offset:
            result = plog.read(position, self.read_chunk)
            if not result.slices:
                return
            for piece in result.slices:
                data = piece.file.pread(piece.size, piece.position)
                pos = 0
                while pos < len(data):
                    header = read_header(data, pos)
                    batch = data[pos : pos + header.size]
                    pos += header.size
                    position = max(position, header.next_offset)
                    if header.is_control:
                        commit, _ = read_marker(batch)
                        yield StoredRecord(None, header.producer_id, commit)
                        continue
                    producer = header.producer_id if header.is_transactional else NO_PRODUCER_ID
                    for record in iter_records(batch, check_crc=False):
                        yield StoredRecord(record, producer)

    async def append(
        self,
        index: int,
        records: list[KeyValue],
        timeout_s: float,
        producer: TxnProducer | None = None,
    ) -> tuple[ErrorCode, int]:
        """Append records as one batch (a transactional one for ``producer``) and wait
        until every in-sync replica has it. Returns the error and the log offset of the
        first record."""
        partition = self.partition(index)
        if partition is None or not partition.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
        now = self.clock.time_ms()
        entries = [(k, v, [], now) for k, v in records]
        if producer is None:
            batch = build_batch(entries)
            origin = AppendOrigin.CLIENT
        else:
            batch = build_batch(
                entries,
                producer_id=producer.producer_id,
                producer_epoch=producer.producer_epoch,
                is_transactional=True,
            )
            origin = AppendOrigin.COORDINATOR
        try:
            result = self.replica_manager.append(partition, bytearray(batch), ACKS_ALL, origin)
        except KafkaError as exc:
            log.warning("append to %s failed: %s", partition, exc)
            return exc.code, -1
        wait = AckWait(partition, result.last_offset + 1, partition.leader_epoch)
        (code,) = await self.replica_manager.wait_for_acks([wait], timeout_s)
        if code != ErrorCode.NONE:
            log.warning(
                "records at %d of %s not acknowledged: %s", result.base_offset, partition, code.name
            )
        return code, result.base_offset


def follow_leadership(
    led: dict[int, int],
    owned: dict[int, int],
    loading: dict[int, int],
    unload: Callable[[int], None],
    load: Callable[[int, int], None],
) -> None:
    """Bring a coordinator's partitions in line with what this broker leads now
    (partition -> leader epoch): unload those lost or led in another epoch, load
    (``load(index, epoch)``, marked loading first) those newly led."""
    for index in list(owned) + list(loading):
        epoch = owned.get(index, loading.get(index))
        if led.get(index) != epoch:
            unload(index)
    for index, epoch in led.items():
        if owned.get(index) != epoch and loading.get(index) != epoch:
            loading[index] = epoch
            load(index, epoch)
