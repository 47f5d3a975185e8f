"""Writing a decided transaction's markers into every partition it touched (Kafka's
TransactionMarkerChannelManager): one WriteTxnMarkers request per partition leader,
through the same connection class as every other broker-to-broker request, retried
until each partition has its marker, its topic is gone, or this coordinator is no
longer the transaction's coordinator."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from kafka.protocol.producer import WriteTxnMarkersRequest

from epochlog.client.connection import BrokerConnection
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.waiting import with_timeout
from epochlog.txn.metadata import TopicPartition, TxnMetadata, TxnState

if TYPE_CHECKING:
    from epochlog.seams import Clock, Network

log = logging.getLogger("epochlog.txn")

WRITE_TXN_MARKERS_VERSION = 1
RETRY_BACKOFF_S = 0.1

# leader_of(topic, partition) -> (broker id, host, port), None while leaderless, or
# the string "gone" when the topic or partition no longer exists.
LeaderOf = Callable[[str, int], "tuple[int, str, int] | str | None"]
TOPIC_GONE = "gone"

# A partition answering these will take its marker later (a new leader, the ISR back).
_RETRIABLE = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.FENCED_LEADER_EPOCH,
}


class MarkerWriter:
    def __init__(
        self, network: Network, clock: Clock, leader_of: LeaderOf, timeout_ms: int
    ) -> None:
        self._network = network
        self._clock = clock
        self._leader_of = leader_of
        self._timeout_s = timeout_ms / 1000
        self._connections: dict[int, BrokerConnection] = {}

    async def close(self) -> None:
        for conn in self._connections.values():
            with contextlib.suppress(Exception):
                await conn.close()
        self._connections.clear()

    async def write(
        self, meta: TxnMetadata, coordinator_epoch: int, still_coordinator: Callable[[], bool]
    ) -> bool:
        """Write ``meta``'s markers (commit for PrepareCommit, abort for PrepareAbort);
        True once every partition has one, False if this coordinator was replaced."""
        assert meta.state.is_preparing, meta.state
        commit = meta.state == TxnState.PREPARE_COMMIT
        remaining = set(meta.partitions)
        while remaining:
            if not still_coordinator():
                return False
            by_leader: dict[tuple[int, str, int], list[TopicPartition]] = {}
            for tp in sorted(remaining):
                leader = self._leader_of(*tp)
                if leader == TOPIC_GONE:
                    log.info("%s: %s-%d is gone, no marker", meta.transactional_id, *tp)
                    remaining.discard(tp)
                elif isinstance(leader, tuple):
                    by_leader.setdefault(leader, []).append(tp)
            answers = await asyncio.gather(
                *(
                    self._send(leader, meta, commit, coordinator_epoch, tps)
                    for leader, tps in by_leader.items()
                )
            )
            for done in answers:
                remaining -= done
            if remaining:
                await self._clock.sleep(RETRY_BACKOFF_S)
        return True

    async def _send(
        self,
        leader: tuple[int, str, int],
        meta: TxnMetadata,
        commit: bool,
        coordinator_epoch: int,
        partitions: list[TopicPartition],
    ) -> set[TopicPartition]:
        """One request to one leader; returns the partitions that now have their marker."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(
            markers=[
                WriteTxnMarkersRequest.WritableTxnMarker(
                    producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch,
                    transaction_result=commit,
                    topics=[
                        WriteTxnMarkersRequest.WritableTxnMarker.WritableTxnMarkerTopic(
                            name=topic, partition_indexes=indexes
                        )
                        for topic, indexes in by_topic.items()
                    ],
                    coordinator_epoch=coordinator_epoch,
                )
            ]
        )
        broker_id = leader[0]
        try:
            conn = await self._connection(leader)
            response = await with_timeout(
                self._clock, conn.send(request, WRITE_TXN_MARKERS_VERSION), self._timeout_s
            )
        except (OSError, ConnectionError, TimeoutError) as exc:
            log.info("markers for %s to broker %d: %s", meta.transactional_id, broker_id, exc)
            stale = self._connections.pop(broker_id, None)
            if stale is not None:
                with contextlib.suppress(Exception):
                    await stale.close()
            return set()
        done: set[TopicPartition] = set()
        for marker in response.markers or []:
            for topic in marker.topics or []:
                for p in topic.partitions or []:
                    code = ErrorCode(p.error_code)
                    tp = (topic.name, p.partition_index)
                    if (
                        code == ErrorCode.NONE
                        or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        and (self._leader_of(*tp) == TOPIC_GONE)
                    ):
                        done.add(tp)
                    elif code not in _RETRIABLE:
                        # The partition refuses this marker for good (a newer coordinator
                        # or producer epoch wrote there): nothing more to do for it.
                        log.warning(
                            "marker for %s on %s-%d refused: %s",
                            meta.transactional_id,
                            tp[0],
                            tp[1],
                            code.name,
                        )
                        done.add(tp)
        return done

    async def _connection(self, leader: tuple[int, str, int]) -> BrokerConnection:
        broker_id, host, port = leader
        conn = self._connections.get(broker_id)
        if conn is None or conn.closed:
            conn = await BrokerConnection.open(self._network, host, port, "epochlog-txn-markers")
            self._connections[broker_id] = conn
        return conn
