"""What the driver asks the cluster while planning a batch: topic IDs, leaders, log start
and high watermark of each partition, the leaders' answers to OffsetsForLeaderEpoch for
the positions to validate, offsets for timestamps, and the leader epoch of the record
before a planned end offset (read with the client, whose decoder is the only one).

Every call runs on a private event loop and retries leadership errors (and KIP-207's
OFFSET_NOT_AVAILABLE) with backoff up to a hang guard: a leader change while planning
is waited out, not reported as an error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafka.protocol.consumer import OffsetForLeaderEpochRequest

from epochlog.client import AsyncConsumer, TopicPartition
from epochlog.client.admin import AsyncAdmin, ClusterInfo
from epochlog.client.config import admin_settings
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.seams import Seams
from epochlog.spark.options import EARLIEST, LATEST, SourceOptions

READ_COMMITTED = 1

log = logging.getLogger("epochlog.spark")

T = TypeVar("T")
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
CONSUMER_REPLICA_ID = -1
RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.OFFSET_NOT_AVAILABLE,
}


class NotReady(Exception):
    """The cluster cannot answer yet (no leader, leader changing): retry."""


@dataclass(frozen=True)
class PartitionView:
    leader: int
    leader_epoch: int
    log_start: int
    high_watermark: int


@dataclass
class ClusterSnapshot:
    """One consistent-enough look at the partitions a batch is planned over."""

    topic_ids: dict[str, str] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionView] = field(default_factory=dict)
    # OffsetsForLeaderEpoch answers: tp -> (largest epoch <= asked, its end offset).
    epoch_ends: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)


class LeaderView:
    """Driver-side questions to the cluster for one source."""

    def __init__(self, options: SourceOptions, seams: Seams, guard_s: float = 120.0) -> None:
        self._options = options
        self._guard_s = guard_s
        self._seams = seams
        # Spark keeps the stream reader (and so this view) alive in one Python process
        # for the whole query: one event loop and one admin client serve every driver
        # call, instead of a connection and metadata round trip per call.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._admin: AsyncAdmin | None = None

    def __getstate__(self) -> dict[str, Any]:
        """A pickled copy (Spark ships the reader to workers) carries no loop or socket."""
        state = dict(self.__dict__)
        state["_loop"] = None
        state["_admin"] = None
        return state

    # -- plumbing ----------------------------------------------------------------

    def _call(self, work: Awaitable[T]) -> T:
        if self._loop is None or self._loop.is_closed():
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(work)

    def close(self) -> None:
        """Close the kept admin client and loop (a later call opens new ones)."""
        if self._loop is None or self._loop.is_closed():
            return
        loop = self._loop
        try:
            if self._admin is not None:
                loop.run_until_complete(self._admin.close())
            # Requests a failed attempt left running end here, as asyncio.run ends them.
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
        finally:
            self._admin = None
            loop.close()
            self._loop = None

    def _run(self, what: str, attempt: Callable[[AsyncAdmin], Awaitable[T]]) -> T:
        """Run ``attempt`` with the kept admin client until it succeeds or the guard
        ends; a failed attempt drops the client, so the next one starts afresh."""

        async def main() -> T:
            clock = self._seams.clock
            deadline = clock.monotonic() + self._guard_s
            pause = 0.05
            while True:
                if self._admin is None:
                    self._admin = AsyncAdmin(
                        admin_settings(self._options.consumer_config()), self._seams
                    )
                try:
                    return await attempt(self._admin)
                except BaseException as exc:
                    admin, self._admin = self._admin, None
                    await admin.close()
                    if not isinstance(exc, (NotReady, ConnectionError, OSError, KafkaError)):
                        raise
                    if isinstance(exc, KafkaError) and exc.code not in RETRIABLE:
                        raise
                    if clock.monotonic() + pause > deadline:
                        raise TimeoutError(f"epochlog source: {what}: {exc}") from exc
                    log.info("%s: %s; retrying", what, exc)
                await clock.sleep(pause)
                pause = min(pause * 2, 1.0)

        return self._call(main())

    async def _describe(self, admin: AsyncAdmin, topics: Iterable[str] | None) -> ClusterInfo:
        wanted = None if topics is None else sorted(set(topics))
        info = await admin.describe_cluster(wanted)
        for name, topic in info.topics.items():
            if topic.error and topic.error != "UNKNOWN_TOPIC_OR_PARTITION":
                raise NotReady(f"topic {name}: {topic.error}")
            for p in topic.partitions:
                if p.leader < 0:
                    raise NotReady(f"{name}-{p.partition} has no leader")
        return info

    def _topics(self) -> list[str] | None:
        o = self._options
        if o.assign:
            return list(o.assign)
        if o.subscribe:
            return list(o.subscribe)
        return None

    def _selected(self, info: ClusterInfo) -> dict[TopicPartition, tuple[str, int, int]]:
        """tp -> (topic id, leader, leader epoch) for the partitions this source reads."""
        out = {}
        for name, topic in info.topics.items():
            if topic.error or not self._options.wants(name) or name.startswith("__"):
                continue
            only = self._options.assign.get(name)
            for p in topic.partitions:
                if only is None or p.partition in only:
                    out[TopicPartition(name, p.partition)] = (
                        str(topic.topic_id),
                        p.leader,
                        p.leader_epoch,
                    )
        return out

    # -- questions -----------------------------------------------------------------

    def snapshot(self, validate: dict[TopicPartition, int]) -> ClusterSnapshot:
        """Topic IDs, leaders, log start and end of every partition read, and the
        leaders' OffsetsForLeaderEpoch answers for ``validate`` (tp -> epoch)."""

        async def attempt(admin: AsyncAdmin) -> ClusterSnapshot:
            info = await self._describe(admin, self._topics())
            selected = self._selected(info)
            snap = ClusterSnapshot()
            order = sorted(selected.items())
            # All questions at once: the connections pipeline them.
            # Under read_committed the end is the last stable offset: what a reader
            # can read to without waiting for an open transaction.
            isolation = READ_COMMITTED if self._options.read_committed else 0
            bounds = await asyncio.gather(
                *(
                    admin.list_offset(
                        leader, tp.topic, tp.partition, spec, isolation_level=isolation
                    )
                    for tp, (_, leader, _) in order
                    for spec in (EARLIEST, LATEST)
                )
            )
            for i, (tp, (topic_id, leader, epoch)) in enumerate(order):
                snap.topic_ids[tp.topic] = topic_id
                start, end = bounds[2 * i][0], bounds[2 * i + 1][0]
                snap.partitions[tp] = PartitionView(leader, epoch, start, end)
            asked = sorted((tp, e) for tp, e in validate.items() if tp in selected and e >= 0)
            answers = await asyncio.gather(
                *(
                    _end_for_epoch(admin, selected[tp][1], tp, selected[tp][2], epoch)
                    for tp, epoch in asked
                )
            )
            snap.epoch_ends.update(zip((tp for tp, _ in asked), answers, strict=True))
            return snap

        return self._run("reading partition offsets", attempt)

    def offsets_for_times(self, wanted: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """The first offset at or after each timestamp; the log end when there is none."""

        async def attempt(admin: AsyncAdmin) -> dict[TopicPartition, int]:
            info = await self._describe(admin, sorted({tp.topic for tp in wanted}))
            leaders = {
                TopicPartition(t.name, p.partition): p.leader
                for t in info.topics.values()
                for p in t.partitions
            }
            out = {}
            for tp, ts in wanted.items():
                if tp not in leaders:
                    raise NotReady(f"{tp} is unknown")
                offset, _ = await admin.list_offset(leaders[tp], tp.topic, tp.partition, ts)
                if offset < 0:
                    offset, _ = await admin.list_offset(leaders[tp], tp.topic, tp.partition, LATEST)
                out[tp] = offset
            return out

        return self._run("finding offsets for timestamps", attempt)

    def records_before(
        self, ends: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """The leader epoch and timestamp of the record before each end offset (> 0),
        read with the client: what a checkpointed position needs to be validated later,
        and to be placed by time if its divergence is ever unknown."""
        if not ends:
            return {}

        async def main() -> dict[TopicPartition, tuple[int, int]]:
            config = self._options.consumer_config(
                **{"auto.offset.reset": "earliest", "max.partition.fetch.bytes": 1}
            )
            consumer = AsyncConsumer(config, self._seams)
            clock = self._seams.clock
            deadline = clock.monotonic() + self._guard_s
            found: dict[TopicPartition, tuple[int, int]] = {}
            try:
                consumer.assign(list(ends))
                for tp, end in ends.items():
                    consumer.seek(tp, end - 1)
                while len(found) < len(ends):
                    if clock.monotonic() > deadline:
                        missing = sorted(set(ends) - set(found))
                        raise TimeoutError(
                            "epochlog source: could not read the records before "
                            + ", ".join(f"{tp} offset {ends[tp]}" for tp in missing)
                        )
                    for record in await consumer.poll(500):
                        tp = TopicPartition(record.topic, record.partition)
                        if tp in found or record.offset < ends[tp] - 1:
                            continue
                        epoch = -1 if record.leader_epoch is None else record.leader_epoch
                        found[tp] = (epoch, record.timestamp)
            finally:
                await consumer.close()
            return found

        return self._call(main())


async def _end_for_epoch(
    admin: AsyncAdmin, leader: int, tp: TopicPartition, current: int, epoch: int
) -> tuple[int, int]:
    """The leader's (largest epoch <= ``epoch``, end offset of that epoch)."""
    topic_cls = OffsetForLeaderEpochRequest.OffsetForLeaderTopic
    request = OffsetForLeaderEpochRequest(
        replica_id=CONSUMER_REPLICA_ID,
        topics=[
            topic_cls(
                topic=tp.topic,
                partitions=[
                    topic_cls.OffsetForLeaderPartition(
                        partition=tp.partition, current_leader_epoch=current, leader_epoch=epoch
                    )
                ],
            )
        ],
    )
    conn = await admin.broker(leader)
    response: Any = await conn.send(request, OFFSET_FOR_LEADER_EPOCH_VERSION)
    answer = response.topics[0].partitions[0]
    if answer.error_code:
        raise KafkaError(ErrorCode(answer.error_code), f"OffsetsForLeaderEpoch {tp}")
    return answer.leader_epoch, answer.end_offset
