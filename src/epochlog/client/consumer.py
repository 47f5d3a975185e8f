"""AsyncConsumer without groups (assign and seek): positions carry the leader epoch of
the record before them, every request carries CurrentLeaderEpoch, positions are
validated with OffsetsForLeaderEpoch after a leader change or a seek with an epoch, and
truncation is reported or repaired per ``auto.offset.reset`` (KIP-320 and its draft).
The decisions live in ``positions.py``; this module does the requests."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

import pyarrow as pa

from epochlog.client import fetch_session
from epochlog.client.client_metrics import ConsumerCounts
from epochlog.client.config import consumer_config
from epochlog.client.errors import ConfigError, StaleMetadataError, TopicPartition
from epochlog.client.fetch_session import FetchSessionHandler, PartitionFetch, fetch_request
from epochlog.client.fetched import (  # the record types live there, re-exported here
    ConsumerRecord,  # noqa: F401
    ConsumerRecords,
    Fetched,
    OffsetAndEpoch,
    arrow_of,
    records_of,
)
from epochlog.client.group import GroupMembership
from epochlog.client.lookup import (
    CONSUMER_REPLICA_ID,
    EARLIEST,
    LATEST,
    LIST_OFFSETS_VERSION,
    OffsetAndTimestamp,
    list_offsets,
    list_offsets_request,
    offsets_for_leader_epoch_request,
)
from epochlog.client.metadata import Cluster, backoff_seconds
from epochlog.client.positions import (
    Move,
    PartitionPosition,
    Phase,
    ResetPolicy,
    Target,
    failure,
)
from epochlog.client.security import client_network
from epochlog.client.transactions import GroupMetadata
from epochlog.protocol.batch import Buffer
from epochlog.protocol.divergence import Divergence, find_divergence
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Seams
from epochlog.seams.waiting import first_finished_within

log = logging.getLogger("epochlog.client.consumer")

# v13: topics by ID (KIP-516), so a re-created topic is never read as the old one.
FETCH_VERSION = 13
FETCH_BY_NAME_VERSION = 12
OFFSET_FOR_LEADER_EPOCH_VERSION = 4
READ_COMMITTED = 1
LEADERSHIP_ERRORS = {
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,  # re-created: the refresh reports it (TopicIdChangedError)
}
# Answers that mean "not yet": the broker is behind our metadata, or KIP-207's hold.
RETRY_LATER = {ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.OFFSET_NOT_AVAILABLE}

R = TypeVar("R", ConsumerRecords, pa.RecordBatch)
# A partition's answer: the offset it was fetched from, its batches, and under
# read_committed the aborted transactions of the range.
FetchedAt = tuple[TopicPartition, int, bytes, "list[tuple[int, int]] | None"]


class AsyncConsumer:
    """A consumer of assigned partitions. ``poll`` raises LogTruncationError,
    OffsetOutOfRangeError or NoOffsetForPartitionError only with ``auto.offset.reset``
    none, and TopicIdChangedError when a topic in use was re-created."""

    def __init__(self, config: Mapping[str, object], seams: Seams) -> None:
        self.config = consumer_config(config)
        self._seams = seams
        self._clock = self._seams.clock
        c = self.config
        self._policy = ResetPolicy(c["auto.offset.reset"])
        self._isolation = READ_COMMITTED if c["isolation.level"] == "read_committed" else 0
        self._rack = c["client.rack"]
        self._cluster = Cluster(
            client_network(c, seams),
            self._clock,
            c["bootstrap.servers"],
            c["client.id"],
            c["retry.backoff.ms"],
            c["retry.backoff.max.ms"],
            c["request.timeout.ms"],
        )
        self._positions: dict[TopicPartition, PartitionPosition] = {}
        self.counts = ConsumerCounts(self._policy.value)  # metrics(): Consumer in sync.py
        self._refresh_needed = True
        self._refreshed_at = float("-inf")
        self._retries = 0
        # The fetch out to each broker, with the partitions it asks for. As the Java
        # consumer: a broker with a fetch out gets no other until it answers, each
        # answer is used as soon as it comes (a quiet broker's long poll holds up no
        # other's data), and a fetch outlives the poll that sent it, so the answer
        # travels while the caller handles rows. Answers count only for positions
        # that have not moved since.
        self._in_flight: dict[int, tuple[asyncio.Task[list[FetchedAt]], set[TopicPartition]]] = {}
        # KIP-227: one incremental fetch session per broker fetched from.
        self._fetch_sessions: dict[int, FetchSessionHandler] = {}
        # With group.id: commits, auto-commit (also of assigned partitions), subscribe.
        self._group: GroupMembership | None = None
        if self.config["group.id"] is not None:
            self._group = GroupMembership(self, self._cluster, self._clock)

    # -- assignment and positions ---------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition | tuple[str, int]]) -> None:
        """Read exactly these partitions; new ones start by the reset policy."""
        wanted = [TopicPartition(*p) for p in partitions]
        old, counts = self._positions, self.counts
        self._positions = {tp: old.get(tp) or PartitionPosition(counts=counts) for tp in wanted}
        self._refresh_needed = True

    def assignment(self) -> list[TopicPartition]:
        return list(self._positions)

    def consumer_group_metadata(self) -> GroupMetadata:
        """What a transactional producer sends with this consumer's offsets
        (``send_offsets_to_transaction``): the group, and the generation and member id
        while this consumer is a member."""
        group_id = self.config["group.id"]
        if group_id is None:
            raise ConfigError("group.id", "required for consumer_group_metadata")
        if self._group is None:
            return GroupMetadata(group_id)
        return GroupMetadata(group_id, self._group.generation, self._group.member_id)

    def seek(
        self, tp: TopicPartition | tuple[str, int], offset: int, leader_epoch: int | None = None
    ) -> None:
        """Fetch from ``offset`` next; with ``leader_epoch`` (of the record before it),
        the position is validated against the leader first. No request is made here."""
        tp = TopicPartition(*tp)
        if tp not in self._positions:
            raise ValueError(f"{tp} is not assigned")
        self._positions[tp].seek(offset, leader_epoch)

    def position(self, tp: TopicPartition | tuple[str, int]) -> OffsetAndEpoch | None:
        pos = self._positions[TopicPartition(*tp)]
        return None if pos.offset is None else OffsetAndEpoch(pos.offset, pos.offset_epoch)

    def phase(self, tp: TopicPartition | tuple[str, int]) -> Phase:
        return self._positions[TopicPartition(*tp)].phase

    # -- poll -----------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 1000) -> ConsumerRecords:
        """Records fetched within ``timeout_ms`` (perhaps none)."""
        return await self._poll(timeout_ms, self._records)

    async def poll_arrow(self, timeout_ms: int = 1000) -> pa.RecordBatch:
        """``poll`` as one Arrow RecordBatch of ``ARROW_SCHEMA`` (perhaps no rows),
        decoded vectorised: same fetches, positions, validation and errors."""
        return await self._poll(timeout_ms, self._arrow)

    async def _poll(self, timeout_ms: int, decode: Callable[[list[Fetched]], R]) -> R:
        deadline = self._clock.monotonic() + timeout_ms / 1000
        if self._group is not None:
            await self._group.poll(timeout_ms / 1000)  # join or rejoin, auto-commit
        while True:
            await self._prepare()
            failed = failure(self._positions)
            if failed is not None:
                raise failed
            remaining_s = max(0.0, deadline - self._clock.monotonic())
            result = decode(await self._fetch(remaining_s))
            if len(result):
                self.counts.records_consumed += len(result)
                self._retries = 0
                self._send_fetches()
            # Under a millisecond left counts as none: looping on would spin until the
            # deadline (the simulator caught it).
            if len(result) or remaining_s < 0.001 or self._clock.monotonic() >= deadline:
                return result
            if not any(p.can_fetch() for p in self._positions.values()):
                pause = backoff_seconds(
                    self._retries,
                    self.config["retry.backoff.ms"],
                    self.config["retry.backoff.max.ms"],
                )
                self._retries += 1
                await self._clock.sleep(min(pause, max(0.0, deadline - self._clock.monotonic())))

    async def _prepare(self) -> None:
        """Metadata, then validations, then resets: what must happen before fetching."""
        stale_age = self._clock.monotonic() - self._refreshed_at
        waiting = any(
            p.leader is None or (p.phase is Phase.AWAIT_VALIDATION and not p.can_validate())
            for p in self._positions.values()
        )
        if self._refresh_needed or waiting or stale_age * 1000 > self.config["metadata.max.age.ms"]:
            await self._refresh_metadata()
        await self._validate()
        await self._reset()

    async def _refresh_metadata(self) -> None:
        try:
            # A topic re-created under a position read from it is reported (KIP-232);
            # partitions assigned afresh (no position yet) simply take the new topic.
            read_from = [tp for tp, p in self._positions.items() if p.offset is not None]
            await self._cluster.refresh({tp.topic for tp in self._positions}, read_from)
        except StaleMetadataError as exc:
            log.warning("%s", exc)
            return
        except (ConnectionError, OSError) as exc:
            log.warning("metadata refresh failed: %s", exc)
            return
        self._refresh_needed = False
        self._refreshed_at = self._clock.monotonic()
        for tp, pos in self._positions.items():
            meta = self._cluster.cache.partition(tp)
            if meta is None:
                continue
            before = pos.leader_epoch
            if pos.update_leader(meta.leader, meta.leader_epoch):
                log.info(
                    "%s: leader epoch %s -> %d; validating position %s (epoch %s)",
                    tp,
                    before,
                    meta.leader_epoch,
                    pos.offset,
                    pos.offset_epoch,
                )

    def _log_move(self, tp: TopicPartition, move: Move | None) -> None:
        if move is not None:
            log.warning("%s", move.describe(tp))

    def _by_leader(self, ready: Iterable[TopicPartition]) -> dict[int, list[TopicPartition]]:
        groups: dict[int, list[TopicPartition]] = {}
        for tp in ready:
            leader = self._positions[tp].leader
            assert leader is not None
            groups.setdefault(leader, []).append(tp)
        return groups

    async def _request(self, broker: int, request: Any, version: int) -> Any | None:
        """One request to a leader or read replica; None (and a metadata refresh) if it
        could not answer."""
        try:
            return await self._cluster.send(broker, request, version)
        except (ConnectionError, OSError) as exc:
            log.info("request to broker %d failed: %s", broker, exc)
            for pos in self._positions.values():
                if pos.read_replica == broker:
                    pos.leave_read_replica()
                if pos.leader == broker:
                    pos.leader_lost()
            self._refresh_needed = True
            return None

    def _partition_error(self, tp: TopicPartition, code: ErrorCode, what: str) -> None:
        pos = self._positions[tp]
        if code in LEADERSHIP_ERRORS:
            log.info("%s: %s on %s; refreshing metadata", tp, code.name, what)
            pos.leader_lost()
            self._refresh_needed = True
        elif code in RETRY_LATER:
            log.info("%s: %s on %s; retrying after backoff", tp, code.name, what)
            self._refresh_needed = True
        else:
            log.warning("%s: %s on %s", tp, code.name, what)
            self._refresh_needed = True

    async def _validate(self) -> None:
        ready = [tp for tp, p in self._positions.items() if p.can_validate()]
        await asyncio.gather(
            *(self._validate_on(leader, tps) for leader, tps in self._by_leader(ready).items())
        )

    async def _validate_on(self, leader: int, tps: list[TopicPartition]) -> None:
        positions = self._positions
        request = offsets_for_leader_epoch_request(
            {tp: (positions[tp].current_leader_epoch, positions[tp].offset_epoch) for tp in tps}
        )
        response = await self._request(leader, request, OFFSET_FOR_LEADER_EPOCH_VERSION)
        if response is None:
            return
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                pos = self._positions.get(tp)
                if pos is None or pos.phase is not Phase.AWAIT_VALIDATION:
                    continue
                code = ErrorCode(p.error_code)
                if code != ErrorCode.NONE:
                    self._partition_error(tp, code, "OffsetsForLeaderEpoch")
                    continue
                self._log_move(
                    tp, pos.complete_validation(p.leader_epoch, p.end_offset, self._policy)
                )
                if pos.phase is Phase.AWAIT_RESET:
                    log.warning("%s: log truncated; divergence offset unknown", tp)

    async def _reset(self) -> None:
        ready = []
        for tp, pos in self._positions.items():
            if pos.phase is Phase.AWAIT_RESET and self._policy is ResetPolicy.NONE:
                pos.phase = Phase.FAILED
            elif pos.can_reset():
                ready.append(tp)
        await asyncio.gather(
            *(self._reset_on(leader, tps) for leader, tps in self._by_leader(ready).items())
        )

    async def _list_offsets(
        self, leader: int, wanted: dict[TopicPartition, int]
    ) -> dict[TopicPartition, tuple[int, int]]:
        """ListOffsets with CurrentLeaderEpoch: tp -> (offset, leader epoch); partitions
        that failed are left out (their error handled)."""
        request = list_offsets_request(
            wanted, lambda tp: self._positions[tp].current_leader_epoch, self._isolation
        )
        response = await self._request(leader, request, LIST_OFFSETS_VERSION)
        out: dict[TopicPartition, tuple[int, int]] = {}
        for t in response.topics if response is not None else []:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                code = ErrorCode(p.error_code)
                if code != ErrorCode.NONE:
                    self._partition_error(tp, code, "ListOffsets")
                else:
                    out[tp] = (p.offset, p.leader_epoch)
        return out

    async def _reset_on(self, leader: int, tps: list[TopicPartition]) -> None:
        plans = {tp: self._positions[tp].plan_reset(self._policy) for tp in tps}
        wanted = {}
        for tp, plan in plans.items():
            if plan.target is Target.DIVERGENCE:
                assert plan.offset is not None
                self._log_move(tp, self._positions[tp].complete_reset(plan.offset, plan.target))
            elif plan.target is Target.TIMESTAMP:
                assert plan.timestamp is not None
                wanted[tp] = plan.timestamp
            else:
                wanted[tp] = EARLIEST if plan.target is Target.LOG_START else LATEST
        answers = await self._list_offsets(leader, wanted)
        no_match = {}
        for tp, (offset, _epoch) in answers.items():
            target = plans[tp].target
            if target is Target.TIMESTAMP and offset < 0:
                no_match[tp] = LATEST  # no record at or after that time: the log end
                continue
            self._log_move(tp, self._positions[tp].complete_reset(offset, target))
        if no_match:
            for tp, (offset, _epoch) in (await self._list_offsets(leader, no_match)).items():
                self._log_move(tp, self._positions[tp].complete_reset(offset, Target.LOG_END))

    # -- fetching -------------------------------------------------------------------

    async def _fetch(self, max_wait_s: float) -> list[Fetched]:
        """Send a fetch to every broker that has none out, then take the answers that
        came within ``max_wait_s``: the raw record batches per partition whose
        position still stands."""
        self._send_fetches()
        tasks = [task for task, _ in self._in_flight.values()]
        if max_wait_s > 0:
            await first_finished_within(self._clock, tasks, max_wait_s)
        else:
            await self._clock.sleep(0)  # a poll(0) loop still lets the fetches move
        got: list[FetchedAt] = []
        for node, (task, _) in list(self._in_flight.items()):
            if task.done():
                del self._in_flight[node]
                got.extend(task.result())
        out = []
        for tp, offset, data, aborted in got:
            pos = self._positions.get(tp)
            # Positions only move in decoding, but a seek or reset may come first.
            if pos is not None and pos.can_fetch() and pos.offset == offset:
                out.append((tp, pos, data, aborted))
        return out

    def _send_fetches(self) -> None:
        """A fetch (waiting up to ``fetch.max.wait.ms`` at the broker) to each leader,
        or read replica (KIP-392), of a fetchable partition that has none out; a
        partition already asked for elsewhere waits for that answer."""
        asked = {tp for _, tps in self._in_flight.values() for tp in tps}
        groups: dict[int, list[TopicPartition]] = {}
        now = self._clock.monotonic()
        for tp, pos in self._positions.items():
            node = pos.fetch_from(now) if pos.can_fetch() and tp not in asked else None
            if node is not None and node not in self._cluster.cache.brokers:
                pos.leave_read_replica()  # not in our metadata: the leader, and ask again
                self._refresh_needed = True
                node = pos.leader
            if node is not None and node not in self._in_flight:
                groups.setdefault(node, []).append(tp)
        wait_ms = self.config["fetch.max.wait.ms"]
        for node, tps in groups.items():
            task = asyncio.ensure_future(self._fetch_from(node, tps, wait_ms))
            self._in_flight[node] = (task, set(tps))

    def _records(self, fetched: list[Fetched]) -> ConsumerRecords:
        return records_of(fetched, self.config["check.crcs"])

    def _arrow(self, fetched: list[Fetched]) -> pa.RecordBatch:
        return arrow_of(fetched, self.config["check.crcs"])

    async def _fetch_from(
        self, node: int, tps: list[TopicPartition], max_wait_ms: int
    ) -> list[FetchedAt]:
        """One Fetch to a leader or a read replica (KIP-392), in that broker's session."""
        offsets = {tp: self._positions[tp].offset for tp in tps}
        ids = {tp.topic: self._cluster.cache.topic_id(tp.topic) for tp in tps}
        version = FETCH_VERSION if all(ids.values()) else FETCH_BY_NAME_VERSION
        max_bytes = self.config["max.partition.fetch.bytes"]
        session = self._fetch_sessions.setdefault(node, FetchSessionHandler())
        wanted = [
            PartitionFetch(
                tp.topic,
                ids[tp.topic],
                tp.partition,
                offsets[tp],
                self._positions[tp].current_leader_epoch,
                self._last_fetched_epoch(tp),
                -1,
                max_bytes,
            )
            for tp in tps
        ]
        plan = session.plan(wanted, version >= FETCH_VERSION)
        request = fetch_request(
            plan,
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=max_wait_ms,
            min_bytes=self.config["fetch.min.bytes"],
            max_bytes=self.config["fetch.max.bytes"],
            isolation_level=self._isolation,
            rack_id=self._rack,
        )
        try:
            response = await self._request(node, request, version)
        except BaseException:
            session.failed()  # cancelled mid-request: the broker's epoch is unknown
            raise
        if response is None:
            session.failed()
        elif not session.answered(plan, response):
            log.info("fetch session with broker %d: %s", node, ErrorCode(response.error_code))
        names = {topic_id: topic for topic, topic_id in ids.items()}
        out = []
        for t in response.responses if response is not None else []:
            for p in t.partitions:
                tp = TopicPartition(names.get(t.topic_id, t.topic), p.partition_index)
                pos = self._positions.get(tp)
                # A seek or reset while the fetch was out makes its answer moot.
                if pos is None or not pos.can_fetch() or pos.offset != offsets.get(tp):
                    continue
                data = await self._fetched(node, tp, pos, p)
                if data:
                    aborted = None
                    if self._isolation == READ_COMMITTED:
                        aborted = [
                            (a.producer_id, a.first_offset) for a in p.aborted_transactions or []
                        ]
                    out.append((tp, offsets[tp], data, aborted))
        return out

    def _last_fetched_epoch(self, tp: TopicPartition) -> int:
        epoch = self._positions[tp].offset_epoch
        return -1 if epoch is None else epoch

    async def _fetched(
        self, node: int, tp: TopicPartition, pos: PartitionPosition, p: Any
    ) -> Buffer | None:
        """The partition's record batches (a view of the answer), or None after handling
        its error."""
        code = ErrorCode(p.error_code)
        if code != ErrorCode.NONE and node != pos.leader:
            # As the Java consumer: any error from a read replica (its log behind our
            # offset, an epoch it does not know yet, no longer a replica) sends the
            # partition back to the leader, which decides again.
            pos.leave_read_replica()
            log.info("%s: %s from read replica %d; back to the leader", tp, code.name, node)
            self._refresh_needed |= code in LEADERSHIP_ERRORS
            return None
        if code == ErrorCode.NONE and p.preferred_read_replica >= 0:
            until = self._clock.monotonic() + self.config["metadata.max.age.ms"] / 1000
            pos.prefer_replica(p.preferred_read_replica, until)
            log.info("%s: leader %d sends fetches to replica %d", tp, node, pos.read_replica)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            bounds = await self._list_offsets(node, {tp: EARLIEST})
            ends = await self._list_offsets(node, {tp: LATEST})
            if tp in bounds and tp in ends and pos.phase is Phase.FETCHING:
                before = pos.offset
                pos.out_of_range(bounds[tp][0], ends[tp][0], self._policy)
                log.warning(
                    "%s: offset %s out of range [%d, %d]; %s",
                    tp,
                    before,
                    bounds[tp][0],
                    ends[tp][0],
                    pos.phase.value,
                )
            return None
        if code != ErrorCode.NONE:
            self._partition_error(tp, code, "Fetch")
            return None
        diverging = p.diverging_epoch
        if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
            assert pos.offset is not None and pos.offset_epoch is not None
            found: Divergence = find_divergence(
                pos.offset,
                pos.offset_epoch,
                diverging.epoch,
                diverging.end_offset,
                pos.consumed_epochs,
            )
            self._log_move(tp, pos.truncation(found, self._policy))
            if pos.phase is Phase.AWAIT_RESET:
                log.warning("%s: log truncated; divergence offset unknown", tp)
            return None
        return p.records or b""

    # -- groups and commits (client/group.py drives assign/seek) ----------------------

    def _membership(self) -> GroupMembership:
        if self.config["group.id"] is None:
            raise ConfigError("group.id", "required for subscribe, commit and committed")
        if self._group is None:
            self._group = GroupMembership(self, self._cluster, self._clock)
        return self._group

    def subscribe(self, topics: Iterable[str]) -> None:
        """Consume these topics as a member of ``group.id``; joined on the next poll."""
        if isinstance(topics, str):
            raise TypeError("subscribe takes a list of topics")
        self._membership().subscribe(topics)

    def subscription(self) -> list[str]:
        return [] if self._group is None else list(self._group.subscription)

    async def unsubscribe(self) -> None:
        """Leave the group (committing first with auto-commit); nothing is assigned."""
        if self._group is not None:
            await self._group.unsubscribe()

    async def commit(
        self, offsets: Mapping[TopicPartition | tuple[str, int], OffsetAndEpoch] | None = None
    ) -> None:
        """Commit with leader epochs; by default the positions after returned records."""
        await self._membership().commit(
            None if offsets is None else {TopicPartition(*tp): at for tp, at in offsets.items()}
        )

    async def committed(
        self, partitions: Iterable[TopicPartition | tuple[str, int]]
    ) -> dict[TopicPartition, OffsetAndEpoch | None]:
        return await self._membership().committed([TopicPartition(*p) for p in partitions])

    async def offsets_for_times(
        self, timestamps: Mapping[TopicPartition | tuple[str, int], int]
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """The first offset at or after each timestamp, with its leader epoch."""
        return await list_offsets(
            self._cluster,
            {TopicPartition(*tp): ts for tp, ts in timestamps.items()},
            self.config["default.api.timeout.ms"] / 1000,
            (self.config["retry.backoff.ms"], self.config["retry.backoff.max.ms"]),
            in_use=[tp for tp, p in self._positions.items() if p.offset is not None],
        )

    async def close(self) -> None:
        in_flight = [task for task, _ in self._in_flight.values()]
        self._in_flight.clear()
        for task in in_flight:
            task.cancel()
        for task in in_flight:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._group is not None:
            await self._group.close()
        versions = (FETCH_BY_NAME_VERSION, FETCH_VERSION)
        await fetch_session.close_sessions(
            self._fetch_sessions, self._cluster.send, versions, self._clock
        )
        await self._cluster.close()
