"""A broker's side of the metastore: its registration, what it learns of the cluster
(brokers, controller, topic states), and the requests it files for the controller
(topic creation and deletion, ISR changes, controlled shutdown, producer-id blocks).

Each broker learns state changes through its own watches, so brokers learn a leader
change at different moments (the KIP-232 situation clients must survive).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable

from epochlog.broker.metadata_cache import MetadataCache
from epochlog.controller import elections
from epochlog.metadata import layout
from epochlog.metadata.layout import IsrChangeRequest, ReassignRequest, TopicNode
from epochlog.metadata.model import BrokerEndpoint, PartitionState, TopicMetadata
from epochlog.metastore import (
    BadVersionError,
    ConnectionLossError,
    Create,
    Metastore,
    MetastoreError,
    NodeExistsError,
    NoNodeError,
)
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.seams import Clock
from epochlog.seams.waiting import wait_event

log = logging.getLogger("epochlog.cluster")

PRODUCER_ID_BLOCK_SIZE = 1000
ISR_CHANGE_TIMEOUT_S = 30.0
REGISTER_RETRY_S = 1.0
UNINITIALIZED = PartitionState(leader=-1, leader_epoch=-1, replicas=[], isr=[])


class ClusterLink:
    def __init__(
        self,
        store: Metastore,
        broker_id: int,
        clock: Clock,
        metadata_cache: MetadataCache,
        on_topic: Callable[[TopicMetadata], Awaitable[None]],
        on_topic_removed: Callable[[str], Awaitable[None]],
        new_uuid: Callable[[], uuid.UUID],
    ) -> None:
        self.store = store
        self.broker_id = broker_id
        self.clock = clock
        self.cache = metadata_cache
        self._on_topic = on_topic
        self._on_topic_removed = on_topic_removed
        self._new_uuid = new_uuid
        self._endpoint: BrokerEndpoint | None = None
        self._topic_watches: dict[str, object] = {}
        self._max_controller_epoch = 0
        # Topic states refused for an older controller epoch (a deposed controller's).
        self.stale_states_refused = 0
        self._next_producer_id = 0
        self._producer_id_limit = 0
        self._state_changed = asyncio.Event()
        # Topic states are applied one at a time, in the order read: applying one may
        # let other work run between its partitions (the broker's ``_apply_topic``).
        self._applying = asyncio.Lock()
        # This incarnation's broker epoch, and whether the controller has taken it in:
        # until it has, leadership in the stored state is a previous incarnation's.
        self._epoch: int | None = None
        self._taken_in = False

    # -- joining the cluster ---------------------------------------------------------

    async def load_topics(self) -> dict[str, TopicMetadata]:
        """Topic metadata as stored, before this broker serves anything."""
        with contextlib.suppress(NodeExistsError):
            await self.store.create(layout.TOPICS, b"", make_parents=True)
        topics = {}
        for name in await self.store.children(layout.TOPICS):
            with contextlib.suppress(NoNodeError):
                data, _ = await self.store.get(layout.topic_path(name))
                topics[name] = TopicNode.decode(name, data).topic
        return topics

    async def stored_topic(self, name: str) -> TopicMetadata | None:
        """A topic as the metastore holds it now, for a decision that must not rest on a
        cache a moment behind (None: no such topic)."""
        try:
            data, _ = await self.store.get(layout.topic_path(name))
        except NoNodeError:
            return None
        return TopicNode.decode(name, data).topic

    async def join(self, endpoint: BrokerEndpoint, session_timeout_s: float) -> None:
        """Register this broker and start following the cluster's state."""
        self._endpoint = endpoint
        await self._ensure_cluster_id()
        # Learn the cluster first, so that even while a previous incarnation's
        # registration lingers this broker answers Metadata with what it knows.
        await self.store.watch_children(layout.BROKER_IDS, self._refresh_brokers)
        await self.store.watch_data(layout.CONTROLLER, self._refresh_controller)
        await self.store.watch_children(layout.TOPICS, self._refresh_topics)
        await self._refresh_brokers()
        await self._refresh_controller()
        await self._refresh_topics()
        await self._register(session_timeout_s)
        self.store.on_session_expired(self._on_session_expired)
        await self.store.watch_data(layout.BROKER_EPOCHS, self._refresh_taken_in)
        await self._refresh_taken_in()

    async def _ensure_cluster_id(self) -> None:
        for path in layout.PERSISTENT_PATHS:
            with contextlib.suppress(NodeExistsError):
                await self.store.create(path, b"", make_parents=True)
        try:
            data, _ = await self.store.get(layout.CLUSTER_ID)
        except NoNodeError:
            candidate = str(self._new_uuid())
            try:
                await self.store.create(layout.CLUSTER_ID, candidate.encode(), make_parents=True)
                data = candidate.encode()
            except NodeExistsError:
                data, _ = await self.store.get(layout.CLUSTER_ID)
        self.cache.cluster_id = data.decode()

    async def _register(self, session_timeout_s: float) -> None:
        """Create our ephemeral broker node; a previous incarnation's node (a killed process
        whose session has not expired yet) blocks us until it goes."""
        assert self._endpoint is not None
        deadline = self.clock.monotonic() + max(session_timeout_s * 2, 10.0)
        path = layout.broker_path(self.broker_id)
        while True:
            try:
                await self.store.create(
                    path, layout.encode_broker(self._endpoint), ephemeral=True, make_parents=True
                )
                self._epoch = self.store.session_id
                log.info("broker %d registered (broker epoch %d)", self.broker_id, self._epoch)
                await self._refresh_taken_in()
                return
            except NodeExistsError:
                if self.clock.monotonic() > deadline:
                    raise RuntimeError(
                        f"broker id {self.broker_id} is registered by a live broker"
                    ) from None
                log.info("waiting for the previous session of broker %d to expire", self.broker_id)
                await self.clock.sleep(0.5)

    async def _on_session_expired(self) -> None:
        """Register again in the new session, however long the metastore stays out of
        reach: a broker left unregistered would lead nothing until it restarts."""
        log.warning("metastore session expired: registering broker %d again", self.broker_id)
        while True:
            try:
                await self._register(self.store.session_timeout_ms / 1000)
                return
            except ConnectionLossError as exc:
                log.warning("registering broker %d again failed, retrying: %s", self.broker_id, exc)
                await self.clock.sleep(REGISTER_RETRY_S)

    async def _refresh_taken_in(self, _event: object = None) -> None:
        """Has the controller taken this incarnation in? When that changes, the stored
        topic states are applied again (leadership held back is taken up, or dropped)."""
        try:
            data, _ = await self.store.get(layout.BROKER_EPOCHS)
        except NoNodeError:
            data = b""
        epochs = layout.decode_broker_epochs(data)
        taken_in = self._epoch is not None and epochs.get(self.broker_id) == self._epoch
        if taken_in != self._taken_in:
            self._taken_in = taken_in
            for name in sorted(self._topic_watches):
                await self._read_topic(name)
            self._state_changed.set()

    async def wait_until_taken_in(self, timeout_s: float) -> bool:
        """Wait for the controller to take this incarnation in (a broker leads nothing
        before); False if it has not within ``timeout_s`` (no controller yet)."""
        return await self.wait_for_state(lambda: self._taken_in, timeout_s)

    async def leave(self) -> None:
        with contextlib.suppress(MetastoreError):
            await self.store.delete(layout.broker_path(self.broker_id))

    # -- following the cluster's state -----------------------------------------------

    async def _refresh_brokers(self, _event: object = None) -> None:
        brokers = {}
        for name in await self.store.children(layout.BROKER_IDS):
            with contextlib.suppress(NoNodeError):
                data, _ = await self.store.get(f"{layout.BROKER_IDS}/{name}")
                brokers[int(name)] = layout.decode_broker(int(name), data)
        self.cache.brokers = brokers

    async def _refresh_controller(self, _event: object = None) -> None:
        try:
            data, _ = await self.store.get(layout.CONTROLLER)
            self.cache.controller_id = int(json.loads(data)["brokerid"])
        except NoNodeError:
            self.cache.controller_id = -1

    async def _refresh_topics(self, _event: object = None) -> None:
        names = set(await self.store.children(layout.TOPICS))
        for name in sorted(names - set(self._topic_watches)):
            self._topic_watches[name] = await self.store.watch_data(
                layout.topic_path(name), self._topic_changed
            )
            await self._read_topic(name)
        for name in sorted(set(self._topic_watches) - names):
            self._topic_watches.pop(name).cancel()  # type: ignore[attr-defined]
            async with self._applying:
                await self._forget_topic(name)

    async def _topic_changed(self, event: object) -> None:
        name = event.path.rsplit("/", 1)[1]  # type: ignore[attr-defined]
        await self._read_topic(name)

    async def _read_topic(self, name: str) -> None:
        try:
            data, _ = await self.store.get(layout.topic_path(name))
        except NoNodeError:
            data = None
        async with self._applying:
            if data is None:
                await self._forget_topic(name)
            else:
                await self._apply(TopicNode.decode(name, data))

    async def _apply(self, node: TopicNode) -> None:
        name = node.topic.name
        if node.controller_epoch < self._max_controller_epoch:
            log.warning(
                "ignoring state of %s from controller epoch %d (already saw %d)",
                name,
                node.controller_epoch,
                self._max_controller_epoch,
            )
            self.stale_states_refused += 1
            return
        self._max_controller_epoch = node.controller_epoch
        known = self.cache.topic(name)
        if known is not None and known.topic_id != node.topic.topic_id:
            await self._forget_topic(name)
        self.cache.update_topic(node.topic)
        # Leadership decided for a previous incarnation of this broker is not taken up:
        # the controller moves it (or hands it over again, at a new epoch) first.
        ready = {
            index: state
            for index, state in node.topic.partitions.items()
            if state.leader_epoch >= 0 and (self._taken_in or state.leader != self.broker_id)
        }
        if ready:
            await self._on_topic(
                TopicMetadata(node.topic.name, node.topic.topic_id, ready, node.topic.configs)
            )
        self._state_changed.set()

    async def _forget_topic(self, name: str) -> None:
        if self.cache.topic(name) is not None:
            self.cache.remove_topic(name)
            await self._on_topic_removed(name)
            self._state_changed.set()

    async def wait_for_state(self, predicate: Callable[[], bool], timeout_s: float) -> bool:
        deadline = self.clock.monotonic() + timeout_s
        while not predicate():
            remaining = deadline - self.clock.monotonic()
            if remaining <= 0:
                return False
            self._state_changed.clear()
            await wait_event(self.clock, self._state_changed, remaining)
        return True

    # -- requests to the controller ---------------------------------------------------

    async def create_topic(
        self,
        name: str,
        assignment: dict[int, list[int]],
        configs: dict[str, str],
        timeout_s: float,
    ) -> TopicMetadata:
        topic = TopicMetadata(
            name=name,
            topic_id=self._new_uuid(),
            partitions={
                index: PartitionState(-1, -1, list(replicas), [])
                for index, replicas in assignment.items()
            },
            configs=dict(configs),
        )
        if await self.store.exists(f"{layout.DELETE_TOPICS}/{name}") is not None:
            raise KafkaError(ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} is being deleted")
        try:
            # Stamped with the newest controller epoch seen, so no broker takes the new
            # node for a deposed controller's write.
            node = TopicNode(topic, self._max_controller_epoch)
            await self.store.create(layout.topic_path(name), node.encode())
        except NodeExistsError:
            raise KafkaError(
                ErrorCode.TOPIC_ALREADY_EXISTS, f"topic {name!r} already exists"
            ) from None
        log.info("created topic %s id=%s partitions=%d", name, topic.topic_id, len(assignment))
        topic_id = topic.topic_id
        ready = await self.wait_for_state(lambda: self._has_leaders(name, topic_id), timeout_s)
        if not ready and timeout_s > 0:
            # Kafka's answer: the topic exists and creation goes on.
            raise KafkaError(
                ErrorCode.REQUEST_TIMED_OUT,
                f"topic {name!r} created; not every partition had a leader within the timeout",
            )
        return topic

    def _has_leaders(self, name: str, topic_id: uuid.UUID) -> bool:
        topic = self.cache.topic(name)
        return (
            topic is not None
            and topic.topic_id == topic_id
            and all(state.leader_epoch >= 0 for state in topic.partitions.values())
        )

    async def delete_topic(self, name: str, timeout_s: float) -> TopicMetadata:
        topic = self.cache.topic(name)
        if topic is None or not await self.store.exists(layout.topic_path(name)):
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
        with contextlib.suppress(NodeExistsError):
            await self.store.create(f"{layout.DELETE_TOPICS}/{name}", b"", make_parents=True)
        await self.wait_for_state(lambda: self.cache.topic(name) is None, timeout_s)
        return topic

    async def _update_topic_node(self, name: str, change: Callable[[TopicNode], None]) -> None:
        """Read-modify-write of a topic node, retried on concurrent writes (versioned CAS)."""
        path = layout.topic_path(name)
        while True:
            try:
                data, stat = await self.store.get(path)
            except NoNodeError:
                raise KafkaError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}"
                ) from None
            node = TopicNode.decode(name, data)
            change(node)
            try:
                await self.store.set(path, node.encode(), version=stat.version)
                return
            except BadVersionError:
                continue

    async def create_partitions(self, name: str, assignment: dict[int, list[int]]) -> None:
        def add(node: TopicNode) -> None:
            if min(assignment) != len(node.topic.partitions):
                raise KafkaError(ErrorCode.INVALID_PARTITIONS, "partition count changed meanwhile")
            for index, replicas in assignment.items():
                node.topic.partitions[index] = PartitionState(-1, -1, list(replicas), [])

        await self._update_topic_node(name, add)

    async def alter_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        def replace(node: TopicNode) -> None:
            node.topic.configs = dict(configs)

        await self._update_topic_node(name, replace)

    async def propose_isr(
        self, topic: str, partition: int, leader_epoch: int, partition_epoch: int, isr: list[int]
    ) -> PartitionState | None:
        """Ask the controller to change an ISR; returns the new state, or None if refused."""
        request = IsrChangeRequest(topic, partition, leader_epoch, partition_epoch, list(isr))
        path = await self.store.create(
            f"{layout.ISR_CHANGE}/req-", request.encode(), sequential=True, make_parents=True
        )
        answered = asyncio.Event()
        watch = await self.store.watch_data(path, lambda _e: answered.set())
        try:
            deadline = self.clock.monotonic() + ISR_CHANGE_TIMEOUT_S
            while await self.store.exists(path) is not None:
                if self.clock.monotonic() > deadline:
                    log.warning("no answer to ISR change %s; withdrawing it", request)
                    with contextlib.suppress(MetastoreError):
                        await self.store.delete(path)
                    return None
                answered.clear()
                await wait_event(self.clock, answered, 0.5)
        finally:
            watch.cancel()

        def decided() -> bool:
            known = self.cache.topic(topic)
            state = known.partitions.get(partition) if known else None
            return state is None or state.partition_epoch > partition_epoch

        await self.wait_for_state(decided, ISR_CHANGE_TIMEOUT_S)
        known = self.cache.topic(topic)
        state = known.partitions.get(partition) if known else None
        if state is not None and state.leader_epoch == leader_epoch and set(state.isr) == set(isr):
            return state
        return None

    async def request_reassignments(self, moves: list[ReassignRequest], timeout_s: float) -> bool:
        """File reassignment requests for the controller (one node per partition, all in
        one transaction); True once it has taken every one up within ``timeout_s``."""
        if not moves:
            return True
        paths = await self.store.multi(
            [
                Create(f"{layout.REASSIGN_PARTITIONS}/req-", move.encode(), sequential=True)
                for move in moves
            ]
        )
        taken_up = asyncio.Event()
        watch = await self.store.watch_children(
            layout.REASSIGN_PARTITIONS, lambda _e: taken_up.set()
        )
        try:
            deadline = self.clock.monotonic() + timeout_s
            while True:
                pending = set(await self.store.children(layout.REASSIGN_PARTITIONS))
                if not any(str(path).rsplit("/", 1)[1] in pending for path in paths):
                    return True
                remaining = deadline - self.clock.monotonic()
                if remaining <= 0:
                    return False
                taken_up.clear()
                await wait_event(self.clock, taken_up, min(remaining, 0.5))
        finally:
            watch.cancel()

    async def request_preferred_election(self) -> None:
        """Ask the controller to move leaders back to their preferred replicas."""
        with contextlib.suppress(NodeExistsError):
            await self.store.create(layout.PREFERRED_REPLICA_ELECTION, b"", make_parents=True)

    async def controlled_shutdown(self, timeout_s: float) -> bool:
        """Ask the controller to move leadership away; True once this broker leads nothing."""
        path = f"{layout.CONTROLLED_SHUTDOWN}/{self.broker_id}"
        with contextlib.suppress(NodeExistsError):
            await self.store.create(path, b"", ephemeral=True, make_parents=True)

        def leads_nothing() -> bool:
            return not any(
                state.leader == self.broker_id and len(state.replicas) > 1
                for topic in self.cache.topics()
                for state in topic.partitions.values()
            )

        done = await self.wait_for_state(leads_nothing, timeout_s)
        log.info("controlled shutdown %s", "complete" if done else "timed out")
        return done

    async def allocate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_limit:
            await self._claim_producer_id_block()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id

    async def _claim_producer_id_block(self) -> None:
        while True:
            try:
                data, stat = await self.store.get(layout.PRODUCER_ID_BLOCK)
            except NoNodeError:
                with contextlib.suppress(NodeExistsError):
                    await self.store.create(layout.PRODUCER_ID_BLOCK, b"0")
                continue
            start = int(data or b"0")
            end = start + PRODUCER_ID_BLOCK_SIZE
            try:
                await self.store.set(layout.PRODUCER_ID_BLOCK, str(end).encode(), stat.version)
            except BadVersionError:
                continue
            self._next_producer_id, self._producer_id_limit = start, end
            return

    def assign(
        self, num_partitions: int, replication_factor: int, start: int = 0
    ) -> dict[int, list[int]]:
        live = sorted(self.cache.brokers)
        if replication_factor > len(live):
            raise KafkaError(
                ErrorCode.INVALID_REPLICATION_FACTOR,
                f"replication factor {replication_factor} is larger than the"
                f" {len(live)} available broker(s)",
            )
        return elections.assign_replicas(num_partitions, replication_factor, live, start)
