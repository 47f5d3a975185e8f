"""Mixed into AsyncAdmin: the log dirs of each broker (DescribeLogDirs) and moving a
replica between the log dirs of its broker (AlterReplicaLogDirs), what kafka-log-dirs.sh
and kafka-reassign-partitions.sh's log dir moves do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin.cluster import AlterReplicaLogDirsRequest, DescribeLogDirsRequest

from epochlog.protocol.errors import ErrorCode, KafkaError

DESCRIBE_LOG_DIRS_VERSION = 4
ALTER_REPLICA_LOG_DIRS_VERSION = 2


@dataclass(frozen=True)
class ReplicaInfo:
    topic: str
    partition: int
    size: int
    offset_lag: int
    is_future: bool


@dataclass(frozen=True)
class LogDirInfo:
    broker: int
    path: str
    error: str | None
    replicas: list[ReplicaInfo]
    total_bytes: int
    usable_bytes: int


class LogDirAdmin:
    _cluster: Any
    describe_cluster: Any
    broker: Any

    async def describe_log_dirs(
        self, brokers: list[int] | None = None, topics: list[str] | None = None
    ) -> list[LogDirInfo]:
        """Every log dir of each broker (all brokers by default) with the replicas it
        holds (of ``topics`` only, when given)."""
        info = await self.describe_cluster(topics)
        wanted = None
        if topics is not None:
            wanted = [
                DescribeLogDirsRequest.DescribableLogDirTopic(
                    topic=name, partitions=[p.partition for p in info.topics[name].partitions]
                )
                for name in topics
                if name in info.topics and info.topics[name].error is None
            ]
        found = []
        for broker in sorted(info.brokers) if brokers is None else brokers:
            conn = await self.broker(broker)
            response = await conn.send(
                DescribeLogDirsRequest(topics=wanted), DESCRIBE_LOG_DIRS_VERSION
            )
            if response.error_code != ErrorCode.NONE:
                raise KafkaError(ErrorCode(response.error_code), f"broker {broker}'s log dirs")
            for result in response.results:
                replicas = [
                    ReplicaInfo(
                        t.name, p.partition_index, p.partition_size, p.offset_lag, p.is_future_key
                    )
                    for t in result.topics
                    for p in t.partitions
                ]
                found.append(
                    LogDirInfo(
                        broker,
                        result.log_dir,
                        ErrorCode(result.error_code).name if result.error_code else None,
                        replicas,
                        result.total_bytes,
                        result.usable_bytes,
                    )
                )
        return found

    async def alter_replica_log_dir(
        self, topic: str, partition: int, broker: int, log_dir: str
    ) -> None:
        """Move ``broker``'s replica of the partition to its log dir ``log_dir`` (an
        absolute path); the broker copies it there and swaps once it is caught up."""
        await self.describe_cluster([])
        Dir = AlterReplicaLogDirsRequest.AlterReplicaLogDir
        request = AlterReplicaLogDirsRequest(
            dirs=[
                Dir(
                    path=log_dir,
                    topics=[Dir.AlterReplicaLogDirTopic(name=topic, partitions=[partition])],
                )
            ]
        )
        conn = await self.broker(broker)
        response = await conn.send(request, ALTER_REPLICA_LOG_DIRS_VERSION)
        for t in response.results:
            for p in t.partitions:
                if p.error_code != ErrorCode.NONE:
                    raise KafkaError(
                        ErrorCode(p.error_code),
                        f"{t.topic_name}-{p.partition_index} on broker {broker} to {log_dir}",
                    )
