"""The partitions this broker hosts: applying the controller's decisions, the replica
fetchers of the partitions it follows, ISR proposals of those it leads, and the waits
of long-polling fetches and acks=all produces."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from epochlog.metadata.model import PartitionState
from epochlog.metastore.api import MetastoreError
from epochlog.metrics.topic_stats import BrokerTopicStats
from epochlog.protocol.control import build_marker_batch
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.replication.fetcher import EndpointOf, ReplicaFetcherManager
from epochlog.replication.log_dir_mover import LogDirMover
from epochlog.replication.partition import Partition, StateChange
from epochlog.replication.replica_selector import preferred_read_replica
from epochlog.replication.settings import ReplicationSettings
from epochlog.seams.tasks import BackgroundTasks, drain
from epochlog.seams.waiting import Signal
from epochlog.storage.partition_metadata import topic_id_to_str
from epochlog.storage.producer_state import AppendOrigin, VerificationGuard

if TYPE_CHECKING:
    from epochlog.metadata.model import TopicMetadata
    from epochlog.protocol.batch import WritableBatches
    from epochlog.seams import Clock, Seams
    from epochlog.storage.config import LogConfig
    from epochlog.storage.log import Log
    from epochlog.storage.log_manager import LogManager
    from epochlog.storage.results import AppendResult

log = logging.getLogger("epochlog.replication")

ProposeIsr = Callable[[str, int, int, int, list[int]], Awaitable[PartitionState | None]]
ACKS_ALL = -1
MAX_PRODUCER_EPOCH = 32767


@dataclass
class AckWait:
    """An acks=all append waiting for the high watermark to pass its last offset."""

    partition: Partition
    required_offset: int
    leader_epoch: int


class ReplicaManager:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        seams: Seams | None = None,
        settings: ReplicationSettings | None = None,
        endpoint_of: EndpointOf | None = None,
        propose_isr: ProposeIsr | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.seams = seams
        self.clock: Clock = seams.clock if seams is not None else log_manager.clock
        self.settings = settings or ReplicationSettings()
        self._propose_isr = propose_isr
        self._partitions: dict[tuple[str, int], Partition] = {}
        # Fired on appends, high-watermark moves and leadership changes.
        self._changed = Signal()
        self._fetchers = (
            ReplicaFetcherManager(
                broker_id, seams, self.settings, endpoint_of, self._on_follower_progress
            )
            if seams is not None and endpoint_of is not None
            else None
        )
        self._tasks = BackgroundTasks()
        self.log_dir_mover = LogDirMover(
            log_manager,
            self.clock,
            self._changed,
            lambda topic, index: self._partitions.get((topic, index)),
            self._swap_log,
            self.settings.replica_fetch_max_bytes,
            self.settings.replica_fetch_backoff_ms / 1000,
        )
        self._isr_task: asyncio.Task[None] | None = None
        log_manager.on_dir_failure = self._on_dir_failure
        # Replicas assigned here before this start (Kafka's isNew false), and those of
        # them whose log is in no online log dir: offline, answering KAFKA_STORAGE_ERROR,
        # never re-created empty (an empty replica taking over would lose the records).
        self.hosted_at_start: set[tuple[str, int]] = set()
        self.offline_partitions: set[tuple[str, int]] = set()
        # (leader epoch, partition epoch) of the state each was last handed away in.
        self._handed_away: dict[tuple[str, int], tuple[int, int]] = {}
        self.stopped = False
        self.topic_stats = BrokerTopicStats()
        # ISR changes the controller accepted (Kafka's IsrShrinksPerSec, IsrExpandsPerSec).
        self.isr_shrinks = 0
        self.isr_expands = 0

    # -- lifecycle ---------------------------------------------------------------------

    async def start(self) -> None:
        """Start the periodic ISR check (Kafka runs it every half lag time)."""
        self._isr_task = asyncio.get_running_loop().create_task(self._isr_expiration_loop())

    async def stop(self) -> None:
        """Stop fetching, checking and proposing; waiting requests are answered now."""
        self.stopped = True
        tasks = [t for t in (self._isr_task, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.log_dir_mover.stop()
        if self._fetchers is not None:
            await self._fetchers.stop()
        self._changed.fire()

    def _now_ms(self) -> int:
        return int(self.clock.monotonic() * 1000)

    # -- hosted partitions -------------------------------------------------------------

    def partition(self, topic: str, index: int) -> Partition:
        partition = self._partitions.get((topic, index))
        if partition is None:
            if (topic, index) in self.offline_partitions:
                raise KafkaError(ErrorCode.KAFKA_STORAGE_ERROR, f"{topic}-{index} is offline")
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index}")
        return partition

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def remove_topic(self, name: str) -> None:
        drain(self.remove_topic_steps(name))

    def remove_topic_steps(self, name: str) -> Generator[None, None, None]:
        """``remove_topic`` one partition at a time (see ``apply_topic_steps``)."""
        for key in [k for k in self._partitions if k[0] == name]:
            partition = self._partitions.pop(key, None)
            if partition is None:
                continue
            if self._fetchers is not None:
                self._fetchers.unfollow(key)
            self.log_manager.delete_log(partition.topic, partition.index)
            self._changed.fire()
            yield

    def apply_topic(self, topic: TopicMetadata, log_config: LogConfig) -> None:
        """Bring hosted partitions in line with what the controller decided. States may
        come late, twice or out of order: older or repeated ones are ignored."""
        drain(self.apply_topic_steps(topic, log_config))

    def apply_topic_steps(
        self, topic: TopicMetadata, log_config: LogConfig
    ) -> Generator[None, None, None]:
        """``apply_topic`` one partition at a time, for a caller that lets other work
        run in between: creating a log costs a mkdir, a few files and fsyncs, and a topic
        of thousands of partitions would hold the event loop for seconds."""
        name = topic.name
        for index, state in topic.partitions.items():
            key = (name, index)
            partition = self._partitions.get(key)
            if self.broker_id not in state.replicas:
                if partition is not None:
                    self._retire(partition, state)
                    self._changed.fire()
                    yield
                continue
            if partition is not None and partition.topic_id != topic.topic_id:
                # Same name, new identity: the topic was deleted and re-created.
                self._partitions.pop(key)
                if self._fetchers is not None:
                    self._fetchers.unfollow(key)
                self.log_manager.delete_log(name, index)
                partition = None
            if partition is None:
                plog = self.log_manager.get_log(name, index)
                if plog is None and self._in_offline_dir(key):
                    self._hand_away(name, index, state)
                    continue
                if plog is None:
                    plog = self.log_manager.create_log(
                        name, index, log_config, topic_id_to_str(topic.topic_id.bytes)
                    )
                partition = Partition(name, index, topic.topic_id, plog, state, self.broker_id)
                plog.holes.on_hole = lambda _hole, p=partition: self._settle_holes(p)
                partition.on_storage_error = lambda exc, k=key: self.log_manager.fail_dir_of(
                    *k, exc
                )
                self._partitions[key] = partition
                self.log_dir_mover.resume(partition)  # a move a restart interrupted
            else:
                partition.log.config = log_config
            self.apply_partition_state(partition, state)
            self._changed.fire()
            yield
        self._changed.fire()

    def _retire(self, partition: Partition, state: PartitionState) -> None:
        """Moved away (a reassignment completed or was cancelled): stop serving and
        fetching; acks=all appends still waiting are answered NOT_LEADER_OR_FOLLOWER
        (the producer retries at the new leader); the log is retired by what the
        replicas left in sync hold (``LogManager.retire_log``)."""
        key = (partition.topic, partition.index)
        log.info("%s: no longer a replica (replicas %s)", partition, state.replicas)
        partition.apply_state(state, self._now_ms())
        self._partitions.pop(key)
        if self._fetchers is not None:
            self._fetchers.unfollow(key)
        self.log_manager.retire_log(
            partition.topic,
            partition.index,
            partition.high_watermark,
            f"this replica left the assignment (replicas now {state.replicas}); its high"
            f" watermark was {partition.high_watermark}",
        )

    def _in_offline_dir(self, key: tuple[str, int]) -> bool:
        """Whether the replica is offline: its log dir failed while running, or it was
        assigned before this start and no online dir has its log."""
        if key in self.offline_partitions:
            return True
        if not self.log_manager.offline_dirs or key not in self.hosted_at_start:
            return False
        if key not in self.offline_partitions:
            offline = ", ".join(sorted(self.log_manager.offline_dirs))
            log.error("%s-%d: offline: not in an online log dir (%s offline)", *key, offline)
            self.offline_partitions.add(key)
        return True

    def _on_dir_failure(self, log_dir: str, failed: list[tuple[str, int]]) -> None:
        """A log dir failed while running: its partitions go offline here, and those
        this broker leads are handed to the rest of their ISR."""
        for key in failed:
            self.offline_partitions.add(key)
            partition = self._partitions.pop(key, None)
            if partition is None:
                continue
            log.error("%s: offline: its log dir %s failed", partition, log_dir)
            if self._fetchers is not None:
                self._fetchers.unfollow(key)
            self._hand_away(partition.topic, partition.index, partition.state)
        self._changed.fire()

    def _hand_away(self, topic: str, index: int, state: PartitionState) -> None:
        """An offline replica cannot lead: it leaves the ISR, so that the controller
        elects another in-sync replica (as Kafka's moves leadership off a failed log
        dir); once per partition state."""
        others = [r for r in state.isr if r != self.broker_id]
        marker = (state.leader_epoch, state.partition_epoch)
        key = (topic, index)
        if state.leader != self.broker_id or not others or self._propose_isr is None:
            return
        if self._handed_away.get(key) == marker:
            return
        self._handed_away[key] = marker
        log.warning("%s-%d: offline here: proposing ISR %s to hand leadership away", *key, others)
        propose = self._propose_isr

        async def send() -> None:
            try:
                await propose(topic, index, state.leader_epoch, state.partition_epoch, others)
            except Exception:
                log.exception("%s-%d: handing leadership away failed", topic, index)

        self._tasks.spawn(send())

    def alter_log_dir(self, topic: str, index: int, log_dir: str) -> None:
        """AlterReplicaLogDirs for one hosted partition (``replication/log_dir_mover.py``)."""
        self.log_dir_mover.alter(self.partition(topic, index), log_dir)

    def _swap_log(self, partition: Partition, moved: Log) -> None:
        """The partition serves from its moved log from now on."""
        partition.log = moved
        moved.holes.on_hole = lambda _hole, p=partition: self._settle_holes(p)
        self._settle_holes(partition)
        self._changed.fire()

    def apply_partition_state(self, partition: Partition, state: PartitionState) -> StateChange:
        """Apply one partition's state (from the controller, or an accepted ISR change)."""
        change = partition.apply_state(state, self._now_ms())
        if change == StateChange.IGNORED:
            return change
        log.info(
            "%s: %s (leader %d, epoch %d, partition epoch %d, ISR %s)",
            partition,
            change.value,
            state.leader,
            state.leader_epoch,
            state.partition_epoch,
            state.isr,
        )
        key = (partition.topic, partition.index)
        if change == StateChange.BECAME_FOLLOWER and self._fetchers is not None:
            self._fetchers.follow(partition)
        elif change == StateChange.BECAME_LEADER and self._fetchers is not None:
            self._fetchers.unfollow(key)
        if change == StateChange.BECAME_LEADER and state.elected_uncleanly:
            self._abort_open_transactions(partition)
        self._settle_holes(partition)
        self._changed.fire()
        return change

    def _settle_holes(self, partition: Partition) -> None:
        """Holes (``storage/log_holes.py``) are never a reason to cut a log. A follower's
        fetcher fills them from its leader. A leader cannot serve them and has nobody to
        fill them from, so with another in-sync replica it gives leadership to the rest
        of its ISR (as Kafka moves leadership off a failed log dir) and fills them as a
        follower; alone in its ISR it keeps leading, refusing reads inside them, until a
        replica that holds them is back in sync. The only replica of a partition declares
        them lost: readers then see a gap there."""
        plog = partition.log
        sole = partition.state.replicas == [self.broker_id]
        plog.holes.sole_copy = sole
        if sole:
            plog.holes.declare_lost(f"{partition}: this broker holds its only replica")
        waiting = plog.holes.awaiting_repair()
        if not partition.is_leader or not waiting or partition.resigning:
            return
        others = [r for r in partition.state.isr if r != self.broker_id]
        if not others:
            return
        log.error(
            "%s: leading with offsets %d..%d damaged here: handing leadership to ISR %s",
            partition,
            waiting[0].first_offset,
            waiting[0].end_offset - 1,
            others,
        )
        partition.resigning = True
        self._resign(partition)
        self._changed.fire()  # waiting fetches answer NOT_LEADER_OR_FOLLOWER now

    # -- leading -----------------------------------------------------------------------

    def append(
        self,
        partition: Partition,
        records: WritableBatches,
        required_acks: int = 1,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        guard: VerificationGuard | None = None,
    ) -> AppendResult:
        """Append produced records as leader; acks=all first needs min.insync.replicas;
        ``guard``: a verified produce's (``storage/producer_state.py``)."""
        if required_acks == ACKS_ALL:
            partition.check_enough_replicas()
        result = partition.append_as_leader(records, origin, guard)
        if not result.duplicate:
            count = result.last_offset - result.base_offset + 1
            self.topic_stats.appended(partition.topic, count, len(records))
        self._changed.fire()
        return result

    def write_txn_marker(
        self,
        partition: Partition,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        commit: bool,
        required_acks: int = ACKS_ALL,
    ) -> AppendResult:
        """Append a transaction marker as leader (WriteTxnMarkers)."""
        marker = build_marker_batch(
            producer_id, producer_epoch, coordinator_epoch, commit, self.clock.time_ms()
        )
        return self.append(partition, marker, required_acks, AppendOrigin.COORDINATOR)

    def _abort_open_transactions(self, partition: Partition) -> None:
        """An uncleanly elected leader may lack the end of any transaction its log holds
        open (records and markers the old leader had): such a transaction can never be
        committed whole here, so it is aborted now, with the producer's epoch bumped at
        this partition so that the rest of it (a retried batch) is refused too."""
        for entry in list(partition.log.producer_state.producers.values()):
            if not entry.in_transaction:
                continue
            epoch = min(entry.epoch + 1, MAX_PRODUCER_EPOCH)
            first = entry.current_txn_first_offset
            try:
                result = self.write_txn_marker(
                    partition, entry.producer_id, epoch, entry.coordinator_epoch, False, 1
                )
            except KafkaError as exc:
                log.warning(
                    "%s: could not abort producer %d: %s", partition, entry.producer_id, exc
                )
                continue
            log.warning(
                "%s: elected uncleanly: aborted the open transaction of producer %d "
                "(from offset %d) with a marker at %d, epoch %d",
                partition,
                entry.producer_id,
                first,
                result.base_offset,
                epoch,
            )

    async def wait_for_acks(self, waits: list[AckWait], timeout_s: float) -> list[ErrorCode]:
        """Answer each acks=all append once the HW passed it, or REQUEST_TIMED_OUT."""
        deadline = self.clock.monotonic() + max(0.0, timeout_s)
        answers: list[ErrorCode | None] = [None] * len(waits)
        while True:
            for i, wait in enumerate(waits):
                if answers[i] is None:
                    answers[i] = wait.partition.ack_status(wait.required_offset, wait.leader_epoch)
            remaining = deadline - self.clock.monotonic()
            if all(a is not None for a in answers) or remaining <= 0 or self.stopped:
                break
            await self._changed.wait(self.clock, remaining)
        return [ErrorCode.REQUEST_TIMED_OUT if a is None else a for a in answers]

    def record_follower_fetch(
        self,
        partition: Partition,
        replica_id: int,
        fetch_offset: int,
        fetch_epoch: int,
        log_start_offset: int = -1,
    ) -> None:
        """A follower fetched at ``fetch_offset`` in ``fetch_epoch``: move the HW, and
        propose adding it to the ISR once it is in sync."""
        now_ms = self._now_ms()
        moved = partition.record_follower_fetch(
            replica_id, fetch_offset, fetch_epoch, now_ms, log_start_offset
        )
        if moved:
            self._changed.fire()
        new_isr = partition.isr_expansion(now_ms)
        if new_isr is not None:
            self._propose(partition, new_isr, "expand")

    def preferred_read_replica(
        self,
        partition: Partition,
        client_rack: str,
        fetch_offset: int,
        racks: Mapping[int, str | None],
    ) -> int | None:
        """KIP-392: the follower ``replica.selector.class`` sends a consumer to, if any."""
        return preferred_read_replica(
            self.settings.replica_selector_class,
            partition,
            client_rack,
            fetch_offset,
            racks,
            self._now_ms(),
        )

    def _propose(self, partition: Partition, new_isr: list[int], why: str) -> None:
        if self._propose_isr is None:
            return
        partition.begin_isr_change(new_isr)
        state = partition.state
        log.info(
            "%s: proposing to %s ISR %s -> %s (epoch %d, partition epoch %d)",
            partition,
            why,
            state.isr,
            new_isr,
            state.leader_epoch,
            state.partition_epoch,
        )
        self._tasks.spawn(self._send_proposal(partition, state, new_isr))

    async def _send_proposal(
        self, partition: Partition, state: PartitionState, new_isr: list[int]
    ) -> None:
        assert self._propose_isr is not None
        accepted: PartitionState | None = None
        try:
            accepted = await self._propose_isr(
                partition.topic,
                partition.index,
                state.leader_epoch,
                state.partition_epoch,
                list(new_isr),
            )
        except asyncio.CancelledError:
            raise
        except MetastoreError as exc:
            # A lost metastore session (the broker registers again) or connection: the
            # ISR is proposed again from the state learnt next, as after a refusal.
            log.warning("%s: ISR proposal %s failed: %r", partition, new_isr, exc)
        except Exception:
            log.exception("%s: ISR proposal %s failed", partition, new_isr)
        if partition.pending_isr is not None and partition.state is state:
            partition.end_isr_change(
                accepted is None, self._now_ms(), self.settings.replica_fetch_backoff_ms
            )
        if accepted is None:
            log.info("%s: controller refused ISR %s", partition, new_isr)
        else:
            if len(new_isr) < len(state.isr):
                self.isr_shrinks += 1
            else:
                self.isr_expands += 1
            if self._partitions.get((partition.topic, partition.index)) is partition:
                self.apply_partition_state(partition, accepted)
        self._changed.fire()

    def _resign(self, partition: Partition) -> None:
        """Propose the ISR without this broker (retried by ``check_isr`` until the
        leadership ends)."""
        others = [r for r in partition.state.isr if r != self.broker_id]
        if partition.pending_isr is None and others:
            self._propose(partition, others, "resign leadership (damaged log):")

    def check_isr(self) -> None:
        """Propose removing followers that were not caught up for the lag time."""
        now_ms = self._now_ms()
        for partition in self.partitions():
            if partition.resigning and partition.is_leader:
                if now_ms >= partition.isr_retry_at_ms:
                    self._resign(partition)
                continue
            new_isr = partition.isr_shrink(now_ms, self.settings.replica_lag_time_max_ms)
            if new_isr is not None:
                self._propose(partition, new_isr, "shrink")

    async def _isr_expiration_loop(self) -> None:
        interval_s = self.settings.replica_lag_time_max_ms / 2000
        while True:
            await self.clock.sleep(interval_s)
            try:
                self.check_isr()
            except Exception:
                log.exception("ISR check failed")

    # -- following and waiting ---------------------------------------------------------

    def _on_follower_progress(self) -> None:
        self._changed.fire()

    async def wait_for_data(self, timeout_s: float) -> None:
        """Return at the next append, high-watermark move or leadership change, or after
        the timeout (a long-polling fetch reads again then)."""
        await self._changed.wait(self.clock, timeout_s)
