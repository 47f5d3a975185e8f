"""Consumer group membership and commits for AsyncConsumer (the classic "consumer"
protocol, eager rebalancing): FindCoordinator, JoinGroup, SyncGroup, a Heartbeat task
on the Clock seam, LeaveGroup on close; OffsetCommit v8 and OffsetFetch v8 with leader
epochs. The group drives the consumer only through its public ``assign``/``seek``:
a new assignment starts each partition at its committed offset WITH the committed
epoch, so the consumer validates it (KIP-320) once metadata has reached that epoch,
and a partition without a committed offset starts by ``auto.offset.reset``."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from epochlog.client import assignors
from epochlog.client.connection import BrokerConnection
from epochlog.client.errors import ClientError, KafkaClientError, TopicPartition
from epochlog.client.group_commits import (
    COORDINATOR_ERRORS,
    MEMBERSHIP_ERRORS,
    NO_GENERATION,
    RETRY_ERRORS,
    CoordinatorLost,
    GroupCommits,
    MemberConsumer,
)
from epochlog.client.metadata import Cluster, backoff_seconds
from epochlog.protocol.errors import ErrorCode
from epochlog.seams import Clock

log = logging.getLogger("epochlog.client.group")

FIND_COORDINATOR_VERSION = 4
JOIN_GROUP_VERSION = 7
SYNC_GROUP_VERSION = 5
HEARTBEAT_VERSION = 4
LEAVE_GROUP_VERSION = 4


class GroupMembership(GroupCommits):
    """One consumer's place in its group; created by AsyncConsumer when ``group.id`` is
    set. ``poll`` runs before each consumer poll (join, rejoin, auto-commit)."""

    def __init__(self, consumer: MemberConsumer, cluster: Cluster, clock: Clock) -> None:
        c = consumer.config
        self._consumer = consumer
        self._cluster = cluster
        self._clock = clock
        self.group_id: str = c["group.id"]
        self._strategies: tuple[str, ...] = c["partition.assignment.strategy"]
        self._session_timeout_ms: int = c["session.timeout.ms"]
        self._heartbeat_s: float = c["heartbeat.interval.ms"] / 1000
        self._rebalance_timeout_ms: int = c["max.poll.interval.ms"]
        self._max_poll_interval_s: float = c["max.poll.interval.ms"] / 1000
        self._metadata_max_age_s: float = c["metadata.max.age.ms"] / 1000
        self._auto_commit: bool = c["enable.auto.commit"]
        self._auto_commit_s: float = c["auto.commit.interval.ms"] / 1000
        self._backoff = (c["retry.backoff.ms"], c["retry.backoff.max.ms"])
        self._request_timeout_s: float = c["request.timeout.ms"] / 1000
        self._client_id: str = c["client.id"]
        self._bootstrap: list[tuple[str, int]] = c["bootstrap.servers"]
        self.subscription: list[str] = []
        self.member_id = ""
        self.generation = NO_GENERATION
        self.protocol: str | None = None
        self.rejoin_needed = False
        self._stable = False
        self._coordinator: BrokerConnection | None = None
        self._coordinator_id: int | None = None
        self._discovery = asyncio.Lock()
        self._heartbeat: asyncio.Task[None] | None = None
        self._beating = False  # a Heartbeat request is out
        self._lingering: asyncio.Task[None] | None = None  # stopped with a request out
        self._next_auto_commit = 0.0
        self._last_poll = 0.0
        # Partition counts of the subscribed topics when the assignment was made: a
        # change (partitions added, a topic created) calls for a rebalance.
        self._counts: dict[str, int] = {}
        self._next_metadata_check = 0.0

    # -- the application's calls ---------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join (or rejoin) the group for these topics on the next poll."""
        wanted = sorted(set(topics))
        if wanted != self.subscription:
            self.subscription = wanted
            self.rejoin_needed = True

    def assignment(self) -> list[TopicPartition]:
        return self._consumer.assignment() if self._stable else []

    async def poll(self, timeout_s: float | None = None) -> None:
        """Before fetching: join when needed, then commit if auto-commit is due. Without
        a coordinator within ``timeout_s`` it returns unjoined (the next poll goes on)."""
        self._last_poll = self._clock.monotonic()
        if self._stable and self._last_poll >= self._next_metadata_check:
            await self._check_metadata()
        if self.subscription and (self.rejoin_needed or not self._stable):
            if self._stable and self._auto_commit:
                await self._commit_quietly("before rejoining")
            deadline = None if timeout_s is None else self._last_poll + timeout_s
            await self._join(deadline)
        if self._auto_commit and self._may_auto_commit():
            now = self._clock.monotonic()
            if now >= self._next_auto_commit:
                self._next_auto_commit = now + self._auto_commit_s
                await self._commit_quietly("auto-commit")

    def _may_auto_commit(self) -> bool:
        """In the group with an assignment, or reading assigned partitions (no
        subscription: commits as a standalone consumer, as Kafka's do)."""
        return self._stable if self.subscription else bool(self._consumer.assignment())

    async def unsubscribe(self) -> None:
        """Commit (with auto-commit), leave the group and read nothing more."""
        if self._stable and self._auto_commit:
            await self._commit_quietly("on unsubscribe")
        await self._leave("unsubscribed")
        self.subscription = []
        self._consumer.assign([])

    async def close(self) -> None:
        """Commit (with auto-commit), leave the group, stop heartbeating."""
        if self._auto_commit and self._may_auto_commit():
            await self._commit_quietly("on close")
        await self._leave("closing")
        if self._coordinator is not None:
            await self._coordinator.close()  # also ends a heartbeat waiting for its answer
            self._coordinator = None
        if self._lingering is not None:
            self._lingering.cancel()  # its connection is closed: no answer is orphaned
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._lingering

    async def _check_metadata(self) -> None:
        """Rejoin when a subscribed topic's partition count differs from the one the
        assignment was made with (Kafka's consumers do the same)."""
        counts = await self._partition_counts()
        unknown = any(n == 0 for n in counts.values())
        wait = self._backoff[1] / 1000 if unknown else self._metadata_max_age_s
        self._next_metadata_check = self._clock.monotonic() + wait
        if counts != self._counts:
            log.info(
                "group %s: partition counts changed %s -> %s; rejoining",
                self.group_id,
                self._counts,
                counts,
            )
            self.rejoin_needed = True

    def _read_from(self) -> list[TopicPartition]:
        """Partitions with a position: a topic re-created under them is reported by the
        consumer (KIP-232); ones assigned afresh simply take the new topic."""
        return [tp for tp in self._consumer.assignment() if self._consumer.position(tp)]

    async def _partition_counts(self) -> dict[str, int]:
        # With the partitions read from, so that a re-created topic is reported by the
        # consumer (KIP-232) rather than silently applied to the shared metadata here.
        with contextlib.suppress(ClientError, ConnectionError, OSError):
            await self._cluster.refresh(self.subscription, self._read_from())
        return {t: self._cluster.cache.partition_count(t) or 0 for t in self.subscription}

    async def _leave(self, why: str) -> None:
        """LeaveGroup (the coordinator rebalances the others at once), stop heartbeating."""
        self._stop_heartbeat()
        if self.member_id and self.subscription:
            request = LeaveGroupRequest(
                group_id=self.group_id,
                members=[LeaveGroupRequest.MemberIdentity(member_id=self.member_id)],
            )
            try:
                response = await self._send(request, LEAVE_GROUP_VERSION, discover=False)
                log.info(
                    "group %s: member %s left, %s (%s)",
                    self.group_id,
                    self.member_id,
                    why,
                    ErrorCode(response.error_code).name,
                )
            except (CoordinatorLost, ConnectionError, OSError) as exc:
                log.info("group %s: LeaveGroup not sent: %s", self.group_id, exc)
        self._stable = False
        self.member_id, self.generation = "", NO_GENERATION

    # -- the coordinator -----------------------------------------------------------------

    async def _pause(self, attempt: int) -> None:
        await self._clock.sleep(backoff_seconds(attempt, *self._backoff))

    def _coordinator_dead(self, why: str) -> None:
        if self._coordinator is not None:
            log.info("group %s: coordinator %s lost (%s)", self.group_id, self._coordinator_id, why)
            conn, self._coordinator = self._coordinator, None
            task = asyncio.get_running_loop().create_task(conn.close())
            task.add_done_callback(lambda t: t.exception() if not t.cancelled() else None)
        self._coordinator_id = None

    async def _ensure_coordinator(self) -> BrokerConnection:
        """FindCoordinator until one answers, then a connection of the group's own (a
        long JoinGroup or Fetch on a shared connection would hold heartbeats up).
        Raises CoordinatorLost after ``request.timeout.ms`` without one."""
        async with self._discovery:
            attempt = 0
            deadline = self._clock.monotonic() + self._request_timeout_s
            while self._coordinator is None or self._coordinator.closed:
                if attempt and self._clock.monotonic() >= deadline:
                    raise CoordinatorLost(
                        f"no coordinator found within {self._request_timeout_s:.0f}s"
                    )
                try:
                    found = await self._find_coordinator()
                except (ConnectionError, OSError) as exc:
                    log.info("group %s: FindCoordinator failed: %s", self.group_id, exc)
                    found = None
                if found is not None:
                    node, host, port = found
                    try:
                        self._coordinator = await BrokerConnection.open(
                            self._cluster.network,
                            host,
                            port,
                            client_id=self._client_id,
                            clock=self._clock,
                        )
                        self._coordinator_id = node
                        log.info("group %s: coordinator is broker %d", self.group_id, node)
                        break
                    except (ConnectionError, OSError) as exc:
                        log.info("group %s: broker %d unreachable: %s", self.group_id, node, exc)
                await self._pause(attempt)
                attempt += 1
            return self._coordinator

    async def _find_coordinator(self) -> tuple[int, str, int] | None:
        """Ask the known brokers, then the bootstrap servers. No metadata is fetched
        here: the consumer's first topic metadata comes from where it would without a
        group (its bootstrap), which KIP-232's stale-epoch check relies on."""
        request = FindCoordinatorRequest(key_type=0, coordinator_keys=[self.group_id])
        known = [self._cluster.cache.brokers[b] for b in sorted(self._cluster.cache.brokers)]
        addresses = known + [a for a in self._bootstrap if a not in known]
        problems = []
        for address in addresses:
            try:
                conn = await self._cluster.connection_to(address)
                response = await conn.send(request, FIND_COORDINATOR_VERSION)
            except (ConnectionError, OSError) as exc:
                problems.append(f"{address[0]}:{address[1]}: {exc}")
                continue
            (answer,) = response.coordinators
            code = ErrorCode(answer.error_code)
            if code != ErrorCode.NONE:
                log.info("group %s: FindCoordinator answered %s", self.group_id, code.name)
                return None
            return answer.node_id, answer.host, answer.port
        raise ConnectionError("no broker answered FindCoordinator: " + "; ".join(problems))

    async def _send(self, request: Any, version: int, discover: bool = True) -> Any:
        """One request to the coordinator; a lost connection raises CoordinatorLost."""
        conn = await self._ensure_coordinator() if discover else self._coordinator
        if conn is None:
            raise CoordinatorLost("no coordinator")
        try:
            return await conn.send(request, version)
        except (ConnectionError, OSError) as exc:
            self._coordinator_dead(str(exc))
            raise CoordinatorLost(str(exc)) from exc

    # -- joining -------------------------------------------------------------------------

    def _protocols(self) -> list[Any]:
        metadata = assignors.encode_subscription(self.subscription)
        return [
            JoinGroupRequest.JoinGroupRequestProtocol(name=name, metadata=metadata)
            for name in self._strategies
        ]

    def _membership_error(self, code: ErrorCode, what: str) -> None:
        """REBALANCE_IN_PROGRESS: this generation still holds (commits are accepted
        until the rejoin); ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID: it is over."""
        log.info("group %s: %s on %s; rejoining", self.group_id, code.name, what)
        self.rejoin_needed = True
        if code is ErrorCode.REBALANCE_IN_PROGRESS:
            return
        if code is ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id, self.generation = "", NO_GENERATION
        elif code is ErrorCode.ILLEGAL_GENERATION:
            self.generation = NO_GENERATION
        self._stable = False

    async def _join(self, deadline: float | None = None) -> None:
        """JoinGroup then SyncGroup until this member holds an assignment. Eager
        protocol: what it read so far is given up first (another member may get it);
        past ``deadline`` between attempts it gives up until the next poll."""
        self._stop_heartbeat()
        self._stable = False
        self._consumer.assign([])
        attempt = 0
        while True:
            try:
                partitions = await self._join_once()
            except CoordinatorLost as exc:
                self._coordinator_dead(str(exc))
                partitions = None
            if partitions is not None:
                break
            if deadline is not None and self._clock.monotonic() >= deadline:
                log.info("group %s: not joined yet; trying again on the next poll", self.group_id)
                return
            await self._pause(attempt)
            attempt += 1
        await self._apply(partitions)

    async def _join_once(self) -> list[TopicPartition] | None:
        """One JoinGroup/SyncGroup round; None when it must be tried again."""
        request = JoinGroupRequest(
            group_id=self.group_id,
            session_timeout_ms=self._session_timeout_ms,
            rebalance_timeout_ms=self._rebalance_timeout_ms,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type=assignors.PROTOCOL_TYPE,
            protocols=self._protocols(),
        )
        joined = await self._send(request, JOIN_GROUP_VERSION)
        code = ErrorCode(joined.error_code)
        if code is ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = joined.member_id
            return await self._join_once()
        if code in COORDINATOR_ERRORS:
            raise CoordinatorLost(code.name)
        if code in MEMBERSHIP_ERRORS or code in RETRY_ERRORS:
            self._membership_error(code, "JoinGroup")
            return None
        if code != ErrorCode.NONE:
            raise KafkaClientError(code, f"JoinGroup of group {self.group_id}")
        self.member_id = joined.member_id
        self.generation = joined.generation_id
        self.protocol = joined.protocol_name
        leader = joined.leader == joined.member_id
        assignments = await self._lead(joined) if leader else {}
        sync = SyncGroupRequest(
            group_id=self.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=None,
            protocol_type=assignors.PROTOCOL_TYPE,
            protocol_name=self.protocol,
            assignments=[
                SyncGroupRequest.SyncGroupRequestAssignment(
                    member_id=member, assignment=assignors.encode_assignment(tps)
                )
                for member, tps in assignments.items()
            ],
        )
        synced = await self._send(sync, SYNC_GROUP_VERSION)
        code = ErrorCode(synced.error_code)
        if code in COORDINATOR_ERRORS:
            raise CoordinatorLost(code.name)
        if code in MEMBERSHIP_ERRORS or code in RETRY_ERRORS:
            self._membership_error(code, "SyncGroup")
            return None
        if code != ErrorCode.NONE:
            raise KafkaClientError(code, f"SyncGroup of group {self.group_id}")
        partitions = assignors.decode_assignment(synced.assignment)
        log.info(
            "group %s: generation %d, member %s%s, %s assigned %s",
            self.group_id,
            self.generation,
            self.member_id,
            " (leader)" if leader else "",
            self.protocol,
            ", ".join(str(tp) for tp in partitions) or "nothing",
        )
        return partitions

    async def _lead(self, joined: Any) -> dict[str, list[TopicPartition]]:
        """The leader assigns every member's partitions with the chosen assignor."""
        subscriptions = {
            m.member_id: assignors.decode_subscription(m.metadata) for m in joined.members
        }
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        with contextlib.suppress(ClientError, ConnectionError, OSError):
            await self._cluster.refresh(topics, self._read_from())
        counts = {t: self._cluster.cache.partition_count(t) or 0 for t in topics}
        return assignors.assign(self.protocol or self._strategies[0], subscriptions, counts)

    async def _apply(self, partitions: list[TopicPartition]) -> None:
        """Eager protocol: every partition starts afresh from its committed offset and
        epoch (validated before fetching), or by the reset policy without one."""
        committed = await self.committed(partitions) if partitions else {}
        self._counts = await self._partition_counts()
        self._next_metadata_check = self._clock.monotonic() + self._metadata_max_age_s
        self._consumer.assign([])
        self._consumer.assign(partitions)
        for tp, found in committed.items():
            if found is not None:
                self._consumer.seek(tp, found.offset, found.leader_epoch)
        self.rejoin_needed = False
        self._stable = True
        self._next_auto_commit = self._clock.monotonic() + self._auto_commit_s
        self._last_poll = self._clock.monotonic()  # still inside poll: a long join is not idling
        self._heartbeat = asyncio.get_running_loop().create_task(
            self._heartbeat_loop(self.generation)
        )

    # -- heartbeats ----------------------------------------------------------------------

    def _stop_heartbeat(self) -> None:
        """Stop the heartbeat task; one waiting for its answer is left to end by itself
        (it sees the generation is over), since cancelling would orphan the answer."""
        task, self._heartbeat = self._heartbeat, None
        if task is not None and task is not asyncio.current_task():
            if self._beating:
                self._lingering = task
            else:
                task.cancel()

    async def _heartbeat_loop(self, generation: int) -> None:
        """Every ``heartbeat.interval.ms`` while this generation is stable; a rebalance
        or a lost membership is noted for the next poll to rejoin."""
        while self._stable and self.generation == generation:
            await self._clock.sleep(self._heartbeat_s)
            if not self._stable or self.generation != generation:
                return
            if self._clock.monotonic() - self._last_poll > self._max_poll_interval_s:
                log.warning(
                    "group %s: no poll within max.poll.interval.ms (%d ms); leaving the group "
                    "so that its partitions move to live members",
                    self.group_id,
                    self._rebalance_timeout_ms,
                )
                await self._leave("poll interval exceeded")
                self.rejoin_needed = True
                return
            request = HeartbeatRequest(
                group_id=self.group_id,
                generation_id=generation,
                member_id=self.member_id,
                group_instance_id=None,
            )
            self._beating = True
            try:
                response = await self._send(request, HEARTBEAT_VERSION)
            except CoordinatorLost:
                continue
            except (ConnectionError, OSError) as exc:
                log.info("group %s: heartbeat failed: %s", self.group_id, exc)
                continue
            finally:
                self._beating = False
            if self._heartbeat is not asyncio.current_task():
                return  # stopped while the request was out
            code = ErrorCode(response.error_code)
            if code in COORDINATOR_ERRORS:
                self._coordinator_dead(code.name)
            elif code in MEMBERSHIP_ERRORS:
                self._membership_error(code, "Heartbeat")
                if code is not ErrorCode.REBALANCE_IN_PROGRESS:
                    return  # heartbeats go on until the rejoin: the coordinator sees us alive
            elif code != ErrorCode.NONE and code not in RETRY_ERRORS:
                log.warning("group %s: heartbeat answered %s", self.group_id, code.name)
