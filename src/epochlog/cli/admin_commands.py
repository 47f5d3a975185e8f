"""``epochlog topics ...``, ``groups ...``, ``status`` and ``transactions ...``: the
cluster seen through the Kafka protocol, the way any operator tool would see it. Each
takes the client settings (``bootstrap.servers`` and, from ``--command-config``, the
security ones) and prints a table, or JSON with ``--json``."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from epochlog.client.admin import (
    DEBUGGING_REPLICA_ID,
    EARLIEST,
    LATEST,
    AsyncAdmin,
    ClusterInfo,
)
from epochlog.client.errors import TopicPartition
from epochlog.protocol.errors import KafkaError
from epochlog.seams.real import real_seams
from epochlog.tools.terminal import as_json, progress, table

Client = Mapping[str, str]

# How long `topics create` waits for every new partition to have a leader.
LEADERS_WAIT_S = 60.0


def _admin(client: Client) -> AsyncAdmin:
    return AsyncAdmin(dict(client), real_seams())


async def topics_create(
    client: Client, name: str, partitions: int, replication_factor: int, configs: dict[str, str]
) -> str:
    """Create the topic and wait until each of its partitions has a leader (a bar shows
    how many do), so that the command's end means the topic is usable."""
    admin = _admin(client)
    try:
        topic_id = await admin.create_topic(name, partitions, replication_factor, configs)
        cluster = await admin.describe_cluster([name])
        count = len(cluster.topics[name].partitions) if name in cluster.topics else partitions
        with progress(f"leaders of {name}", max(count, 1)) as advance:
            led = await _wait_for_leaders(admin, name, advance)
    finally:
        await admin.close()
    return f"created topic {name} (id {topic_id}), {led} partitions with a leader"


async def _wait_for_leaders(admin: AsyncAdmin, name: str, advance: Any) -> int:
    led = 0
    for _ in range(int(LEADERS_WAIT_S / 0.1)):
        topic = (await admin.describe_cluster([name])).topics.get(name)
        if topic is not None and not topic.error:
            led = sum(1 for p in topic.partitions if p.leader >= 0)
            advance(completed=led)
            if topic.partitions and led == len(topic.partitions):
                return led
        await real_seams().clock.sleep(0.1)
    raise RuntimeError(f"{name}: only {led} partitions had a leader after {LEADERS_WAIT_S:g}s")


async def topics_alter(client: Client, name: str, configs: dict[str, str]) -> str:
    admin = _admin(client)
    try:
        await admin.alter_topic_configs(name, configs)
    finally:
        await admin.close()
    return f"altered topic {name}: " + " ".join(f"{k}={v}" for k, v in configs.items())


async def topics_delete(client: Client, name: str) -> str:
    admin = _admin(client)
    try:
        await admin.delete_topic(name)
    finally:
        await admin.close()
    return f"deleted topic {name}"


async def topics_list(client: Client) -> str:
    admin = _admin(client)
    try:
        cluster = await admin.describe_cluster()
    finally:
        await admin.close()
    return "\n".join(sorted(n for n in cluster.topics if not n.startswith("__")))


async def topics_describe(client: Client, names: list[str] | None, json_out: bool) -> str:
    """Each topic (ID, partition count, replication, the configs operators look for
    first) and each partition (leader, leader epoch, replicas, ISR, offline)."""
    admin = _admin(client)
    described: list[dict[str, Any]] = []
    try:
        cluster = await admin.describe_cluster(names)
        for topic in sorted(cluster.topics.values(), key=lambda t: t.name):
            if topic.error:
                described.append({"topic": topic.name, "error": topic.error})
                continue
            configs = await admin.describe_topic_configs(topic.name)
            described.append(
                {
                    "topic": topic.name,
                    "topic_id": str(topic.topic_id),
                    "partitions": [
                        {
                            "partition": p.partition,
                            "leader": p.leader,
                            "leader_epoch": p.leader_epoch,
                            "replicas": p.replicas,
                            "isr": p.isr,
                            "offline_replicas": p.offline_replicas,
                        }
                        for p in topic.partitions
                    ],
                    "configs": {k: configs[k] for k in ("cleanup.policy", "min.insync.replicas")},
                }
            )
    finally:
        await admin.close()
    if json_out:
        return as_json(described)
    return "\n\n".join(_topic_table(t) for t in described)


def _topic_table(topic: dict[str, Any]) -> str:
    if "error" in topic:
        return f"{topic['topic']}: {topic['error']}"
    partitions = topic["partitions"]
    title = (
        f"{topic['topic']}  id={topic['topic_id']}  partitions={len(partitions)}"
        f"  replication={len(partitions[0]['replicas']) if partitions else 0}  "
        + "  ".join(f"{k}={v}" for k, v in topic["configs"].items())
    )
    columns = ["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE"]
    rows = [
        [p["partition"], p["leader"], p["leader_epoch"], p["replicas"], p["isr"]]
        + [p["offline_replicas"]]
        for p in partitions
    ]
    return title + "\n" + table(columns, rows)


async def records_delete(client: Client, before: dict[tuple[str, int], int], json_out: bool) -> str:
    """kafka-delete-records.sh: each partition's log start moves to its offset."""
    admin = _admin(client)
    try:
        low = await admin.delete_records(before)
    finally:
        await admin.close()
    rows = [[tp.topic, tp.partition, mark] for tp, mark in sorted(low.items())]
    if json_out:
        return as_json([{"topic": t, "partition": p, "low_watermark": m} for t, p, m in rows])
    return table(["TOPIC", "PARTITION", "LOW WATERMARK"], rows)


def offsets_from_json(text: str) -> dict[tuple[str, int], int]:
    """kafka-delete-records.sh's --offset-json-file: {"partitions": [{"topic": ...,
    "partition": ..., "offset": ...}], "version": 1}."""
    spec = json.loads(text)
    try:
        return {(p["topic"], int(p["partition"])): int(p["offset"]) for p in spec["partitions"]}
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"offset JSON: expected partitions of topic/partition/offset ({exc})"
        ) from None


async def _replica_offsets(admin: AsyncAdmin, broker: int, topic: str, partition: int) -> Any:
    try:
        start, _ = await admin.list_offset(broker, topic, partition, EARLIEST, DEBUGGING_REPLICA_ID)
        end, _ = await admin.list_offset(broker, topic, partition, LATEST, DEBUGGING_REPLICA_ID)
        return {"log_start": start, "log_end": end}
    except (KafkaError, OSError, KeyError) as exc:
        return {"error": str(exc)}


async def cluster_status(client: Client) -> dict[str, Any]:
    """Per partition: leader, epoch, replicas, ISR, offline replicas, high watermark,
    and each replica's log end and log start."""
    admin = _admin(client)
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


def format_status(status: dict[str, Any], json_out: bool) -> str:
    if json_out:
        return as_json(status)
    head = (
        f"cluster {status['cluster_id']}  controller={status['controller']}"
        f"  brokers={','.join(f'{b}@{a}' for b, a in status['brokers'].items())}"
    )
    columns = ["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "OFFLINE", "HW"]
    rows = []
    for p in status["partitions"]:
        logs = " ".join(
            f"{r}:[{v.get('log_start', '?')},{v.get('log_end', '?')})"
            for r, v in p["replica_logs"].items()
        )
        rows.append(
            [p["topic"], p["partition"], p["leader"], p["leader_epoch"], p["replicas"], p["isr"]]
            + [p["offline_replicas"], p.get("high_watermark"), logs]
        )
    return head + "\n" + table([*columns, "REPLICA LOGS [start,end)"], rows)


async def groups_list(client: Client, json_out: bool) -> str:
    admin = _admin(client)
    try:
        found = sorted(await admin.list_groups(), key=lambda g: g.group_id)
    finally:
        await admin.close()
    if json_out:
        return as_json(
            [{"group": g.group_id, "state": g.state, "type": g.protocol_type} for g in found]
        )
    return table(
        ["GROUP", "STATE", "TYPE"], [[g.group_id, g.state, g.protocol_type] for g in found]
    )


async def groups_describe(client: Client, group: str, json_out: bool) -> str:
    """A group's state and members, and per partition its committed offset WITH the
    leader epoch it was committed with (KIP-320), the log end and the lag."""
    admin = _admin(client)
    try:
        description = (await admin.describe_groups([group]))[group]
        committed = await admin.list_consumer_group_offsets(group)
        ends = await _log_ends(admin, sorted(committed))
    finally:
        await admin.close()
    owners = {tp: m.member_id for m in description.members for tp in m.assignment}
    offsets = []
    for tp, at in sorted(committed.items()):
        end = ends.get(tp)
        offsets.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "committed_offset": at.offset,
                "committed_leader_epoch": at.leader_epoch,
                "log_end_offset": end,
                "lag": None if end is None else max(0, end - at.offset),
                "member": owners.get(tp),
            }
        )
    report = {
        "group": group,
        "state": description.state,
        "protocol": description.protocol,
        "error": description.error,
        "members": [
            {
                "member_id": m.member_id,
                "client_id": m.client_id,
                "host": m.client_host,
                "assignment": [f"{tp.topic}-{tp.partition}" for tp in m.assignment],
            }
            for m in description.members
        ],
        "offsets": offsets,
    }
    if json_out:
        return as_json(report)
    head = f"group {group}  state={description.state}  protocol={description.protocol or '-'}"
    if description.error:
        head += f"  error={description.error}"
    members = table(
        ["MEMBER", "CLIENT", "HOST", "ASSIGNMENT"],
        [[m["member_id"], m["client_id"], m["host"], m["assignment"]] for m in report["members"]],
    )
    columns = ["TOPIC", "PARTITION", "COMMITTED", "EPOCH", "LOG END", "LAG", "MEMBER"]
    rows = [[*o.values()] for o in offsets]
    return "\n".join([head, members, table(columns, rows)])


async def _log_ends(
    admin: AsyncAdmin, partitions: list[TopicPartition]
) -> dict[TopicPartition, int]:
    """Each partition's log end (its high watermark) from its leader; left out if the
    leader cannot say."""
    topics = sorted({tp.topic for tp in partitions})
    cluster = await admin.describe_cluster(topics) if topics else None
    ends: dict[TopicPartition, int] = {}
    for tp in partitions:
        topic = cluster.topics.get(tp.topic) if cluster else None
        leader = (
            next((p.leader for p in topic.partitions if p.partition == tp.partition), -1)
            if topic
            else -1
        )
        if leader < 0:
            continue
        try:
            ends[tp], _ = await admin.list_offset(leader, tp.topic, tp.partition, LATEST)
        except (KafkaError, OSError):
            continue
    return ends


async def transactions_list(client: Client) -> str:
    admin = _admin(client)
    try:
        found = await admin.list_transactions()
    finally:
        await admin.close()
    lines = [f"{'TransactionalId':40} {'ProducerId':>10} {'State':15} Coordinator"]
    lines += [
        f"{t.transactional_id:40} {t.producer_id:>10} {t.state:15} {t.coordinator}" for t in found
    ]
    return "\n".join(lines)


async def transactions_describe(client: Client, transactional_id: str) -> str:
    admin = _admin(client)
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


async def transactions_describe_producers(client: Client, topic: str, partition: int) -> str:
    admin = _admin(client)
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


async def transactions_find_hanging(
    client: Client,
    topic: str | None,
    partition: int | None,
    broker_id: int | None,
    max_timeout_minutes: int,
    now_ms: int,
) -> str:
    """kafka-transactions.sh find-hanging's table: each hanging transaction, with what
    ``transactions abort`` needs to end it."""
    admin = _admin(client)
    try:
        found = await admin.find_hanging_transactions(
            now_ms, topic, partition, broker_id, max_timeout_minutes * 60_000
        )
    finally:
        await admin.close()
    columns = [
        "Topic",
        "Partition",
        "ProducerId",
        "ProducerEpoch",
        "CoordinatorEpoch",
        "StartOffset",
        "LastTimestamp",
        "Duration(min)",
    ]
    rows = [
        [
            o.topic,
            o.partition,
            o.producer.producer_id,
            o.producer.producer_epoch,
            o.producer.coordinator_epoch,
            o.producer.current_txn_start_offset,
            o.producer.last_timestamp,
            (now_ms - o.producer.last_timestamp) // 60_000,
        ]
        for o in found
    ]
    return table(columns, rows)


async def transactions_abort(
    client: Client,
    topic: str,
    partition: int,
    start_offset: int | None,
    producer: tuple[int, int, int] | None,
) -> str:
    """Abort the transaction open at ``start_offset`` (its producer found with
    DescribeProducers), or ``producer``'s (id, epoch, coordinator epoch) as given; a
    coordinator epoch never seen (-1) is sent as 0, as Kafka's tool does."""
    admin = _admin(client)
    try:
        if producer is None:
            states = await admin.describe_producers(topic, partition)
            match = [s for s in states if s.current_txn_start_offset == start_offset]
            if not match:
                raise ValueError(
                    f"no open transaction starts at offset {start_offset} on {topic}-{partition}"
                )
            producer = (match[0].producer_id, match[0].producer_epoch, match[0].coordinator_epoch)
        producer_id, epoch, coordinator_epoch = producer
        await admin.abort_transaction(
            topic, partition, producer_id, epoch, max(coordinator_epoch, 0)
        )
    finally:
        await admin.close()
    return f"aborted the transaction of producer {producer_id} epoch {epoch} on {topic}-{partition}"
