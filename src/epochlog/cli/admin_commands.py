"""``epochlog topics ...`` and ``epochlog status``: the cluster seen through the Kafka
protocol, the way any operator tool would see it."""

from __future__ import annotations

import json
from typing import Any

from epochlog.client.admin import (
    DEBUGGING_REPLICA_ID,
    EARLIEST,
    LATEST,
    AsyncAdmin,
    ClusterInfo,
)
from epochlog.protocol.errors import KafkaError
from epochlog.seams.real import real_seams


def _admin(bootstrap: str) -> AsyncAdmin:
    return AsyncAdmin({"bootstrap.servers": bootstrap}, real_seams())


async def topics_create(
    bootstrap: str, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> str:
    admin = _admin(bootstrap)
    try:
        topic_id = await admin.create_topic(name, partitions, replication_factor, configs)
    finally:
        await admin.close()
    return f"created topic {name} (id {topic_id})"


async def topics_alter(bootstrap: str, name: str, configs: dict[str, str]) -> str:
    admin = _admin(bootstrap)
    try:
        await admin.alter_topic_configs(name, configs)
    finally:
        await admin.close()
    return f"altered topic {name}: " + " ".join(f"{k}={v}" for k, v in configs.items())


async def topics_delete(bootstrap: str, name: str) -> str:
    admin = _admin(bootstrap)
    try:
        await admin.delete_topic(name)
    finally:
        await admin.close()
    return f"deleted topic {name}"


async def topics_list(bootstrap: str) -> str:
    admin = _admin(bootstrap)
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    return "\n".join(sorted(n for n in cluster.topics if not n.startswith("__")))


async def topics_describe(bootstrap: str, names: list[str] | None) -> str:
    admin = _admin(bootstrap)
    try:
        cluster = await admin.describe_cluster(names)
        lines = []
        for topic in sorted(cluster.topics.values(), key=lambda t: t.name):
            if topic.error:
                lines.append(f"{topic.name}: {topic.error}")
                continue
            configs = await admin.describe_topic_configs(topic.name)
            overrides = {k: configs[k] for k in ("cleanup.policy", "min.insync.replicas")}
            lines.append(
                f"{topic.name}  id={topic.topic_id}  partitions={len(topic.partitions)}"
                f"  replication={len(topic.partitions[0].replicas) if topic.partitions else 0}"
                f"  {' '.join(f'{k}={v}' for k, v in overrides.items())}"
            )
            for p in topic.partitions:
                lines.append(
                    f"  partition {p.partition}: leader={p.leader} epoch={p.leader_epoch}"
                    f" replicas={p.replicas} isr={p.isr} offline={p.offline_replicas}"
                )
    finally:
        await admin.close()
    return "\n".join(lines)


async def _replica_offsets(admin: AsyncAdmin, broker: int, topic: str, partition: int) -> Any:
    try:
        start, _ = await admin.list_offset(broker, topic, partition, EARLIEST, DEBUGGING_REPLICA_ID)
        end, _ = await admin.list_offset(broker, topic, partition, LATEST, DEBUGGING_REPLICA_ID)
        return {"log_start": start, "log_end": end}
    except (KafkaError, OSError, KeyError) as exc:
        return {"error": str(exc)}


async def cluster_status(bootstrap: str) -> dict[str, Any]:
    """Per partition: leader, epoch, replicas, ISR, offline replicas, high watermark,
    and each replica's log end and log start."""
    admin = _admin(bootstrap)
    try:
        cluster: ClusterInfo = await admin.describe_cluster()
        status: dict[str, Any] = {
            "cluster_id": cluster.cluster_id,
            "controller": cluster.controller_id,
            "brokers": {str(b): f"{h}:{p}" for b, (h, p) in sorted(cluster.brokers.items())},
            "partitions": [],
        }
        for topic in sorted(cluster.topics.values(), key=lambda t: t.name):
            for p in topic.partitions:
                entry: dict[str, Any] = {
                    "topic": topic.name,
                    "partition": p.partition,
                    "leader": p.leader,
                    "leader_epoch": p.leader_epoch,
                    "replicas": p.replicas,
                    "isr": p.isr,
                    "offline_replicas": p.offline_replicas,
                }
                if p.leader >= 0:
                    try:
                        entry["high_watermark"], _ = await admin.list_offset(
                            p.leader, topic.name, p.partition, LATEST
                        )
                    except (KafkaError, OSError) as exc:
                        entry["high_watermark"] = str(exc)
                entry["replica_logs"] = {
                    str(r): await _replica_offsets(admin, r, topic.name, p.partition)
                    for r in p.replicas
                    if r in cluster.brokers
                }
                status["partitions"].append(entry)
    finally:
        await admin.close()
    return status


def format_status(status: dict[str, Any], as_json: bool) -> str:
    if as_json:
        return json.dumps(status, indent=2)
    lines = [
        f"cluster {status['cluster_id']}  controller={status['controller']}"
        f"  brokers={','.join(f'{b}@{a}' for b, a in status['brokers'].items())}"
    ]
    for p in status["partitions"]:
        logs = " ".join(
            f"{r}:[{v.get('log_start', '?')},{v.get('log_end', '?')})"
            for r, v in p["replica_logs"].items()
        )
        lines.append(
            f"{p['topic']}-{p['partition']}: leader={p['leader']} epoch={p['leader_epoch']}"
            f" replicas={p['replicas']} isr={p['isr']} offline={p['offline_replicas']}"
            f" hw={p.get('high_watermark', '-')} logs {logs}"
        )
    return "\n".join(lines)


async def transactions_list(bootstrap: str) -> str:
    admin = _admin(bootstrap)
    try:
        found = await admin.list_transactions()
    finally:
        await admin.close()
    lines = [f"{'TransactionalId':40} {'ProducerId':>10} {'State':15} Coordinator"]
    lines += [
        f"{t.transactional_id:40} {t.producer_id:>10} {t.state:15} {t.coordinator}" for t in found
    ]
    return "\n".join(lines)


async def transactions_describe(bootstrap: str, transactional_id: str) -> str:
    admin = _admin(bootstrap)
    try:
        t = await admin.describe_transaction(transactional_id)
    finally:
        await admin.close()
    partitions = ",".join(f"{topic}-{p}" for topic, p in t.partitions) or "-"
    return (
        f"transactional id {t.transactional_id}: {t.state}, producer {t.producer_id}"
        f" epoch {t.producer_epoch}, timeout {t.timeout_ms} ms, started {t.start_time_ms},"
        f" coordinator {t.coordinator}, partitions {partitions}"
    )


async def transactions_describe_producers(bootstrap: str, topic: str, partition: int) -> str:
    admin = _admin(bootstrap)
    try:
        producers = await admin.describe_producers(topic, partition)
    finally:
        await admin.close()
    lines = [
        f"{'ProducerId':>10} {'Epoch':>6} {'LastSequence':>12} {'CoordinatorEpoch':>16} TxnStart"
    ]
    lines += [
        f"{p.producer_id:>10} {p.producer_epoch:>6} {p.last_sequence:>12}"
        f" {p.coordinator_epoch:>16} {p.current_txn_start_offset}"
        for p in producers
    ]
    return "\n".join(lines)
