"""Replica fetchers: a follower is a client of its leader.

One task per leader broker fetches every partition this broker follows from it, over a
``BrokerConnection`` (the client's connection class), with Fetch v12: ``replica_id`` is
this broker, ``current_leader_epoch`` the epoch it knows and ``last_fetched_epoch`` the
epoch of its last batch. The leader answers DivergingEpoch instead of records when the
logs diverged, so the follower truncates (into quarantine, never destroying anything)
against a leader in its own epoch before it appends anything in that epoch (KIP-320 rule
1, as Kafka does since KIP-595), and loops until the leader sends records. The fetches
are incremental in a fetch session (KIP-227, ``client/fetch_session.py``): only
partitions whose log end or epoch moved are listed, and the leader answers only
partitions with news. Before each
fetch, holes in a followed log (damaged ranges, ``storage/log_holes.py``) are asked for
as a consumer would ask (``replication/hole_repair.py``) and filled in place.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from epochlog.client.connection import BrokerConnection
from epochlog.client.fetch_session import (
    FetchPlan,
    FetchSessionHandler,
    PartitionFetch,
    fetch_request,
)
from epochlog.protocol.batch import HEADER_SIZE, read_header
from epochlog.protocol.divergence import follower_truncation_offset
from epochlog.protocol.errors import ErrorCode
from epochlog.replication.hole_repair import (
    REPAIR_VERSION,
    apply_repair,
    hole_to_repair,
    repair_request,
)
from epochlog.replication.partition import Partition
from epochlog.replication.settings import ReplicationSettings
from epochlog.seams import Seams
from epochlog.seams.waiting import Signal, finished_within
from epochlog.storage.log_holes import Hole

log = logging.getLogger("epochlog.replication.fetcher")
# A bug planted on purpose for the simulator's tests (tests/sim/test_sim_planted.py),
# never set elsewhere: the follower fetches without naming its last epoch, so the
# leader cannot tell it to truncate first.
_PLANTED_FETCH_BEFORE_TRUNCATING = False

FETCH_VERSION = 12
EndpointOf = Callable[[int], "tuple[str, int] | None"]

# Answers after which the follower waits for the controller's next state.
# The first retry after an answer that says the leader has yet to learn of the
# partition or its epoch (doubling up to replica.fetch.backoff.ms).
LEADER_CATCH_UP_S = 0.025
_LEADER_BEHIND = (
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
)
_WAIT_FOR_STATE = (
    ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.UNKNOWN_LEADER_EPOCH,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.UNKNOWN_TOPIC_ID,
)


@dataclass
class FollowedPartition:
    """A partition this broker follows, and the leader and epoch it follows it in."""

    partition: Partition
    leader_id: int
    leader_epoch: int
    delayed_until: float = 0.0
    # Answers in a row saying the leader has yet to learn this epoch or partition.
    leader_behind: int = 0


class LeaderFetcher:
    """Fetches every partition followed from one leader broker, one request at a time."""

    def __init__(
        self,
        leader_id: int,
        broker_id: int,
        seams: Seams,
        settings: ReplicationSettings,
        endpoint_of: EndpointOf,
        on_progress: Callable[[], None],
    ) -> None:
        self.leader_id = leader_id
        self.broker_id = broker_id
        self._seams = seams
        self._settings = settings
        self._endpoint_of = endpoint_of
        self._on_progress = on_progress
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        self._conn: BrokerConnection | None = None
        self._session = FetchSessionHandler()
        self._changed = Signal()
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def add(self, followed: FollowedPartition) -> None:
        self.partitions[(followed.partition.topic, followed.partition.index)] = followed
        self._changed.fire()

    def remove(self, key: tuple[str, int]) -> None:
        self.partitions.pop(key, None)

    async def stop(self) -> None:
        self._stopping = True
        self._changed.fire()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._close()

    async def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    @property
    def _clock(self) -> Any:
        return self._seams.clock

    async def _backoff(self) -> None:
        await self._changed.wait(self._clock, self._settings.replica_fetch_backoff_ms / 1000)

    async def _run(self) -> None:
        while not self._stopping:
            now = self._clock.monotonic()
            ready = [fp for fp in self.partitions.values() if fp.delayed_until <= now]
            if not ready:
                delays = [fp.delayed_until - now for fp in self.partitions.values()]
                await self._changed.wait(self._clock, min(delays, default=60.0))
                continue
            try:
                await self._fetch_once(ready)
            except asyncio.CancelledError:
                raise
            except (ConnectionError, OSError, TimeoutError) as exc:
                log.info("replica fetch from broker %d failed: %s", self.leader_id, exc)
                await self._close()
                await self._backoff()
            except Exception:
                log.exception("replica fetch from broker %d failed", self.leader_id)
                await self._close()
                await self._backoff()

    async def _connection(self) -> BrokerConnection:
        if self._conn is not None:
            return self._conn
        endpoint = self._endpoint_of(self.leader_id)
        if endpoint is None:
            raise ConnectionError(f"no endpoint known for broker {self.leader_id}")
        host, port = endpoint
        self._conn = await BrokerConnection.open(
            self._seams.network, host, port, client_id=f"epochlog-replica-{self.broker_id}"
        )
        return self._conn

    def _plan(self, ready: list[FollowedPartition]) -> FetchPlan:
        """The next fetch in this fetcher's session: the partitions whose fetch changed
        (a new log end or epoch) and those no longer fetched (KIP-227)."""
        wanted = []
        for fp in ready:
            plog = fp.partition.log
            wanted.append(
                PartitionFetch(
                    fp.partition.topic,
                    None,
                    fp.partition.index,
                    plog.log_end_offset,
                    fp.leader_epoch,
                    -1 if _PLANTED_FETCH_BEFORE_TRUNCATING else plog.epoch_cache.latest_epoch,
                    plog.log_start_offset,
                    self._settings.replica_fetch_max_bytes,
                )
            )
        return self._session.plan(wanted, uses_topic_ids=False)

    def _request(self, plan: FetchPlan) -> Any:
        return fetch_request(
            plan,
            replica_id=self.broker_id,
            max_wait_ms=self._settings.replica_fetch_wait_max_ms,
            min_bytes=self._settings.replica_fetch_min_bytes,
            max_bytes=self._settings.replica_fetch_response_max_bytes,
            isolation_level=0,
        )

    async def _send(self, request: Any, version: int) -> Any:
        conn = await self._connection()
        send = asyncio.ensure_future(conn.send(request, version))
        # If this task is cancelled mid-request, the send ends with the connection.
        send.add_done_callback(_retrieve)
        timeout_s = self._settings.replica_socket_timeout_ms / 1000
        if not await finished_within(self._clock, send, timeout_s):
            await self._close()
            with contextlib.suppress(Exception):
                await send
            raise TimeoutError(f"no answer from broker {self.leader_id} in {timeout_s}s")
        return send.result()

    async def _repair_holes(self, ready: list[FollowedPartition]) -> None:
        """Ask the leader for the first hole of each followed log that has one."""
        wanted: dict[tuple[str, int], tuple[FollowedPartition, Hole]] = {}
        for fp in ready:
            hole = hole_to_repair(fp.partition)
            if hole is not None:
                wanted[(fp.partition.topic, fp.partition.index)] = (fp, hole)
        if not wanted:
            return
        request = repair_request(
            [(fp.partition, fp.leader_epoch, hole) for fp, hole in wanted.values()],
            self._settings.replica_fetch_response_max_bytes,
        )
        response = await self._send(request, REPAIR_VERSION)
        changed = False
        for topic in response.responses:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition_index)
                # Skip a partition that moved (new leader or epoch) while the request was out.
                if key in wanted and self.partitions.get(key) is wanted[key][0]:
                    fp, hole = wanted[key]
                    changed |= apply_repair(fp.partition, hole, answer, self.leader_id)
        if changed:
            self._on_progress()

    async def _fetch_once(self, ready: list[FollowedPartition]) -> None:
        await self._repair_holes(ready)
        sent = {(fp.partition.topic, fp.partition.index): fp for fp in ready}
        plan = self._plan(ready)
        try:
            response = await self._send(self._request(plan), FETCH_VERSION)
        except BaseException:
            self._session.failed()
            raise
        if not self._session.answered(plan, response):
            log.info(
                "fetch session with leader %d: %s; fetching in full",
                self.leader_id,
                ErrorCode(response.error_code).name,
            )
            return
        progressed = False
        for topic in response.responses:
            for answer in topic.partitions:
                key = (topic.topic, answer.partition_index)
                fp = sent.get(key)
                # The partition moved (new leader or epoch) while the request was out;
                # the session thinks it was told, so the next fetch is full.
                if fp is None or self.partitions.get(key) is not fp:
                    self._session.failed()
                    continue
                progressed |= self._handle(fp, answer)
        if progressed:
            self._on_progress()

    def _handle(self, fp: FollowedPartition, answer: Any) -> bool:
        """Apply one partition's answer; True if the log or high watermark moved."""
        partition = fp.partition
        code = ErrorCode(answer.error_code)
        fp.leader_behind = fp.leader_behind + 1 if code in _LEADER_BEHIND else 0
        if code == ErrorCode.NONE:
            diverging = answer.diverging_epoch
            if diverging is not None and (diverging.epoch >= 0 or diverging.end_offset >= 0):
                self._truncate_on_divergence(fp, diverging.epoch, diverging.end_offset)
                return True
            moved = False
            if answer.records:
                moved = self._append(fp, bytearray(answer.records))
            if 0 <= answer.log_start_offset <= partition.log.log_end_offset and (
                answer.log_start_offset > partition.log.log_start_offset
            ):
                partition.log.maybe_increment_log_start_offset(answer.log_start_offset)
            return partition.update_follower_high_watermark(answer.high_watermark) or moved
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._handle_out_of_range(fp, answer)
            return True
        level = logging.INFO if code in _WAIT_FOR_STATE else logging.WARNING
        log.log(
            level,
            "%s: leader %d answered %s to a fetch in epoch %d; retrying after backoff",
            partition,
            fp.leader_id,
            code.name,
            fp.leader_epoch,
        )
        backoff_s = self._settings.replica_fetch_backoff_ms / 1000
        if fp.leader_behind:
            # Told of the new epoch or partition before its leader was (each learns it
            # at its own metastore poll): ask again soon, back off only if it stays behind.
            backoff_s = min(backoff_s, LEADER_CATCH_UP_S * 2 ** (fp.leader_behind - 1))
        fp.delayed_until = self._clock.monotonic() + backoff_s
        return False

    def _truncate_on_divergence(self, fp: FollowedPartition, epoch: int, end_offset: int) -> None:
        """Truncate to where this log and the leader's agree
        (``protocol/divergence.follower_truncation_offset``)."""
        partition = fp.partition
        plog = partition.log
        own_epoch, own_end = plog.end_offset_for_epoch(epoch)
        target = follower_truncation_offset(
            epoch, end_offset, own_epoch, own_end, plog.log_start_offset, plog.log_end_offset
        )
        log.info(
            "%s: leader %d (epoch %d) diverges after epoch %d at offset %d; truncating"
            " from log end %d to %d",
            partition,
            fp.leader_id,
            fp.leader_epoch,
            epoch,
            end_offset,
            plog.log_end_offset,
            target,
        )
        partition.truncate_to(target, f"diverged from leader {fp.leader_id}")
        # An epoch entry starting at the log end holds no batch (an empty leadership);
        # dropping it lets the next fetch name the last epoch this log has data of.
        plog.epoch_cache.truncate_from_end(plog.log_end_offset)

    def _handle_out_of_range(self, fp: FollowedPartition, answer: Any) -> None:
        partition = fp.partition
        plog = partition.log
        if answer.log_start_offset > plog.log_end_offset:
            log.warning(
                "%s: leader %d starts at %d, past this log's end %d; restarting the log there",
                partition,
                fp.leader_id,
                answer.log_start_offset,
                plog.log_end_offset,
            )
            partition.truncate_fully_and_start_at(
                answer.log_start_offset, f"behind leader {fp.leader_id}'s log start"
            )
        elif 0 <= answer.high_watermark < plog.log_end_offset:
            log.warning(
                "%s: fetch offset %d out of range on leader %d; truncating to its HW %d",
                partition,
                plog.log_end_offset,
                fp.leader_id,
                answer.high_watermark,
            )
            partition.truncate_to(answer.high_watermark, f"out of range on {fp.leader_id}")
        else:
            fp.delayed_until = (
                self._clock.monotonic() + self._settings.replica_fetch_backoff_ms / 1000
            )

    def _append(self, fp: FollowedPartition, records: bytearray) -> bool:
        """Append the whole batches that start at this log's end (skipping any before it,
        dropping a partial last batch cut by max bytes)."""
        partition = fp.partition
        end = partition.log.log_end_offset
        start = 0
        usable = 0
        pos = 0
        while pos + HEADER_SIZE <= len(records):
            header = read_header(records, pos)
            if pos + header.size > len(records):
                break
            if header.next_offset <= end:
                start = pos + header.size
            elif header.base_offset < end:
                log.warning("%s: leader sent a batch straddling log end %d", partition, end)
                return False
            usable = pos + header.size
            pos += header.size
        if usable <= start:
            return False
        partition.append_as_follower(records[start:usable])
        return True


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


class ReplicaFetcherManager:
    """Which leader each followed partition is fetched from; one LeaderFetcher each."""

    def __init__(
        self,
        broker_id: int,
        seams: Seams,
        settings: ReplicationSettings,
        endpoint_of: EndpointOf,
        on_progress: Callable[[], None],
    ) -> None:
        self._broker_id = broker_id
        self._seams = seams
        self._settings = settings
        self._endpoint_of = endpoint_of
        self._on_progress = on_progress
        self._fetchers: dict[int, LeaderFetcher] = {}
        self._leader_of: dict[tuple[str, int], int] = {}

    def follow(self, partition: Partition) -> None:
        """Fetch ``partition`` from its leader in its epoch (replacing any older fetch)."""
        key = (partition.topic, partition.index)
        self.unfollow(key)
        leader = partition.state.leader
        if leader < 0 or leader == self._broker_id:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = LeaderFetcher(
                leader,
                self._broker_id,
                self._seams,
                self._settings,
                self._endpoint_of,
                self._on_progress,
            )
            self._fetchers[leader] = fetcher
            fetcher.start()
        fetcher.add(FollowedPartition(partition, leader, partition.leader_epoch))
        self._leader_of[key] = leader

    def unfollow(self, key: tuple[str, int]) -> None:
        leader = self._leader_of.pop(key, None)
        if leader is not None and leader in self._fetchers:
            self._fetchers[leader].remove(key)

    def followed(self, key: tuple[str, int]) -> FollowedPartition | None:
        leader = self._leader_of.get(key)
        fetcher = self._fetchers.get(leader) if leader is not None else None
        return fetcher.partitions.get(key) if fetcher is not None else None

    async def stop(self) -> None:
        fetchers, self._fetchers = list(self._fetchers.values()), {}
        self._leader_of.clear()
        for fetcher in fetchers:
            await fetcher.stop()
