"""The partitions this broker hosts, and the waits of fetches for new data."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.replication.partition import Partition
from epochlog.storage.log import topic_id_to_str

if TYPE_CHECKING:
    from epochlog.broker.metadata_cache import TopicMetadata
    from epochlog.storage.config import LogConfig
    from epochlog.storage.log_manager import LogManager

log = logging.getLogger("epochlog.replication")


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._data_waiters: set[asyncio.Future[None]] = set()

    def partition(self, topic: str, index: int) -> Partition:
        partition = self._partitions.get((topic, index))
        if partition is None:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index}")
        return partition

    def partitions(self) -> list[Partition]:
        return list(self._partitions.values())

    def remove_topic(self, name: str) -> None:
        for key in [k for k in self._partitions if k[0] == name]:
            partition = self._partitions.pop(key)
            self.log_manager.delete_log(partition.topic, partition.index)

    def apply_topic(self, topic: TopicMetadata, log_config: LogConfig) -> None:
        """Bring hosted partitions in line with what the controller decided."""
        name = topic.name
        for index, state in topic.partitions.items():
            if self.broker_id not in state.replicas:
                continue
            partition = self._partitions.get((name, index))
            if partition is not None and partition.topic_id != topic.topic_id:
                # Same name, new identity: the topic was deleted and re-created.
                self._partitions.pop((name, index))
                self.log_manager.delete_log(name, index)
                partition = None
            if partition is None:
                plog = self.log_manager.get_log(name, index)
                if plog is None:
                    plog = self.log_manager.create_log(
                        name, index, log_config, topic_id_to_str(topic.topic_id.bytes)
                    )
                partition = Partition(name, index, topic.topic_id, plog, state, self.broker_id)
                self._partitions[(name, index)] = partition
            else:
                partition.log.config = log_config
            if state.leader == self.broker_id:
                partition.become_leader(state)
            else:
                partition.state = state

    def append(self, partition: Partition, records: bytearray) -> object:
        result = partition.append_as_leader(records)
        self._wake_fetchers()
        return result

    def _wake_fetchers(self) -> None:
        waiters, self._data_waiters = self._data_waiters, set()
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def wait_for_data(self, timeout_s: float) -> None:
        """Return when any partition receives records, or after the timeout."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._data_waiters.add(waiter)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(waiter, timeout_s)
        finally:
            self._data_waiters.discard(waiter)
