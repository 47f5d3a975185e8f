"""The groups a coordinator holds, per ``__consumer_offsets`` partition it leads: which
partitions are loaded or loading, the requests waiting on a group (JoinGroup and
SyncGroup answers), and storing group metadata. Shared by membership and offsets."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from epochlog.coordinator.commits import append_error_to_commit_error
from epochlog.coordinator.group import (
    CommittedOffset,
    Group,
    GroupState,
    JoinAnswer,
    merge_newer,
)
from epochlog.coordinator.hashing import partition_for
from epochlog.coordinator.records import (
    GroupKey,
    OffsetKey,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
)
from epochlog.coordinator.settings import CoordinatorSettings
from epochlog.coordinator.store import OffsetsStore, TxnProducer
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.tasks import BackgroundTasks

if TYPE_CHECKING:
    from epochlog.seams import Clock, Random

log = logging.getLogger("epochlog.coordinator")

SyncAnswer = tuple[ErrorCode, bytes]
LOAD_YIELD_EVERY = 1000


class GroupRegistry:
    def __init__(
        self, store: OffsetsStore, clock: Clock, random: Random, settings: CoordinatorSettings
    ) -> None:
        self.store = store
        self.clock = clock
        self.random = random
        self.settings = settings
        self.groups: dict[str, Group] = {}
        # Offsets partition -> leader epoch it was loaded in.
        self.owned: dict[int, int] = {}
        self.loading: dict[int, int] = {}
        self.join_waiters: dict[tuple[str, str], asyncio.Future[JoinAnswer]] = {}
        self.sync_waiters: dict[tuple[str, str], asyncio.Future[SyncAnswer]] = {}
        # Groups with a write in flight are not expired meanwhile.
        self.pending_writes: dict[str, int] = {}
        self._tasks = BackgroundTasks(log, "coordinator task")
        # The actual partition count of __consumer_offsets once it exists.
        self.num_partitions = settings.num_partitions
        self.wake: Callable[[], None] = lambda: None

    def background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` on its own; failures are logged, never lost silently."""
        self._tasks.spawn(work)

    async def cancel_background(self) -> None:
        await self._tasks.cancel_and_wait()

    # -- time and ids ------------------------------------------------------------------

    def now(self) -> float:
        return self.clock.monotonic()

    def now_ms(self) -> int:
        return self.clock.time_ms()

    def new_member_id(self, prefix: str) -> str:
        """Kafka's form: the client (or instance) id, a dash, a random UUID."""
        return f"{prefix}-{uuid.UUID(int=self.random.getrandbits(128), version=4)}"

    # -- ownership ---------------------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return partition_for(group_id or "", self.num_partitions)

    def ownership_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates the group now and has loaded it."""
        index = self.partition_of(group_id)
        if index in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        epoch = self.owned.get(index)
        if epoch is None:
            return ErrorCode.NOT_COORDINATOR
        partition = self.store.partition(index)
        if partition is None or not partition.is_leader or partition.leader_epoch != epoch:
            return ErrorCode.NOT_COORDINATOR
        return ErrorCode.NONE

    def owned_groups(self) -> list[Group]:
        return [g for gid, g in self.groups.items() if self.partition_of(gid) in self.owned]

    # -- waiting requests --------------------------------------------------------------

    def wait_join(self, group_id: str, member_id: str) -> asyncio.Future[JoinAnswer]:
        key = (group_id, member_id)
        old = self.join_waiters.pop(key, None)
        if old is not None and not old.done():
            old.set_result(_join_error(member_id, ErrorCode.UNKNOWN_MEMBER_ID))
        fut: asyncio.Future[JoinAnswer] = asyncio.get_running_loop().create_future()
        self.join_waiters[key] = fut
        return fut

    def answer_join(self, group_id: str, answer: JoinAnswer) -> None:
        fut = self.join_waiters.pop((group_id, answer.member_id), None)
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def fail_join(self, group_id: str, member_id: str, error: ErrorCode) -> None:
        self.answer_join(group_id, _join_error(member_id, error))

    def wait_sync(self, group_id: str, member_id: str) -> asyncio.Future[SyncAnswer]:
        key = (group_id, member_id)
        old = self.sync_waiters.pop(key, None)
        if old is not None and not old.done():
            old.set_result((ErrorCode.REBALANCE_IN_PROGRESS, b""))
        fut: asyncio.Future[SyncAnswer] = asyncio.get_running_loop().create_future()
        self.sync_waiters[key] = fut
        return fut

    def answer_sync(self, group_id: str, member_id: str, answer: SyncAnswer) -> None:
        fut = self.sync_waiters.pop((group_id, member_id), None)
        if fut is not None and not fut.done():
            fut.set_result(answer)

    def fail_all_waiters(self, group_id: str, error: ErrorCode) -> None:
        for gid, member_id in [k for k in self.join_waiters if k[0] == group_id]:
            self.fail_join(gid, member_id, error)
        for gid, member_id in [k for k in self.sync_waiters if k[0] == group_id]:
            self.answer_sync(gid, member_id, (error, b""))

    # -- storing -----------------------------------------------------------------------

    async def store_group(
        self, group: Group, assignments: dict[str, bytes] | None = None
    ) -> ErrorCode:
        """Write the group's metadata record (acks=all); the error as a client sees it."""
        value = encode_group_value(group.to_value(assignments))
        record = (encode_group_key(GroupKey(group.group_id)), value)
        code = await self.append(group.group_id, [record])
        return append_error_to_commit_error(code)

    async def append(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        code, _ = await self.append_at(group_id, records)
        return code

    async def append_at(
        self,
        group_id: str,
        records: list[tuple[bytes, bytes | None]],
        producer: TxnProducer | None = None,
    ) -> tuple[ErrorCode, int]:
        self.pending_writes[group_id] = self.pending_writes.get(group_id, 0) + 1
        try:
            return await self.store.append(
                self.partition_of(group_id),
                records,
                self.settings.commit_timeout_ms / 1000,
                producer,
            )
        finally:
            left = self.pending_writes[group_id] - 1
            if left:
                self.pending_writes[group_id] = left
            else:
                del self.pending_writes[group_id]

    # -- loading and unloading ---------------------------------------------------------

    async def load(self, index: int, epoch: int) -> None:
        """Read a partition's log into groups; requests for its groups are answered
        COORDINATOR_LOAD_IN_PROGRESS until this is done."""
        self.loading[index] = epoch
        offsets: dict[str, dict[tuple[str, int], CommittedOffset]] = {}
        # Transactional commits not decided yet: producer -> group -> offsets.
        pending: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}
        values: dict[str, bytes | None] = {}
        count = 0
        try:
            for stored in self.store.read_all(index):
                count += 1
                if count % LOAD_YIELD_EVERY == 0:
                    await self.clock.sleep(0)
                    if self.loading.get(index) != epoch:
                        return
                record = stored.record
                if record is None:
                    decided = pending.pop(stored.transactional_producer, {})
                    if stored.commit:
                        for group_id, committed in decided.items():
                            merge_newer(offsets.setdefault(group_id, {}), committed)
                    continue
                if record.key is None:
                    continue
                key = decode_key(record.key)
                if isinstance(key, OffsetKey):
                    target = offsets
                    if stored.transactional_producer >= 0:
                        target = pending.setdefault(stored.transactional_producer, {})
                    group_offsets = target.setdefault(key.group, {})
                    if record.value is None:
                        group_offsets.pop((key.topic, key.partition), None)
                    else:
                        v = decode_offset_value(record.value)
                        group_offsets[(key.topic, key.partition)] = CommittedOffset(
                            v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, record.offset
                        )
                else:
                    values[key.group] = record.value
        except Exception:
            log.exception("loading __consumer_offsets-%d failed", index)
            self.loading.pop(index, None)
            return
        if self.loading.get(index) != epoch:
            return
        now = self.now()
        loaded = 0
        with_pending = {gid for by_group in pending.values() for gid in by_group}
        for group_id in set(offsets) | set(values) | with_pending:
            value = values.get(group_id)
            group_offsets = offsets.get(group_id, {})
            if value is None and not group_offsets and group_id not in with_pending:
                continue
            if value is not None:
                group = Group.from_value(group_id, decode_group_value(value), now)
            else:
                group = Group(group_id)
            group.offsets = group_offsets
            for producer_id, by_group in pending.items():
                if group_id in by_group:
                    group.pending_txn_offsets[producer_id] = by_group[group_id]
            self.groups[group_id] = group
            loaded += 1
        del self.loading[index]
        self.owned[index] = epoch
        log.info(
            "loaded __consumer_offsets-%d at epoch %d: %d groups from %d records",
            index,
            epoch,
            loaded,
            count,
        )

    def unload(self, index: int) -> None:
        """Leadership lost: forget the partition's groups; waiting requests are told
        NOT_COORDINATOR so that clients look the coordinator up again."""
        self.loading.pop(index, None)
        if self.owned.pop(index, None) is None:
            return
        gone = [gid for gid in self.groups if self.partition_of(gid) == index]
        for group_id in gone:
            self.fail_all_waiters(group_id, ErrorCode.NOT_COORDINATOR)
            group = self.groups.pop(group_id)
            group.state = GroupState.DEAD
        log.info("unloaded __consumer_offsets-%d (%d groups)", index, len(gone))


def _join_error(member_id: str, error: ErrorCode) -> JoinAnswer:
    return JoinAnswer(member_id, error, -1, None, None, "", [])
