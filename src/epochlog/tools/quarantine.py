"""``epochlog quarantine list|show|replay``: what truncations and recoveries kept aside.

Run on a broker's host against its log directories; ``replay`` re-produces the kept
records into a topic through any broker, as new records (new offsets, no producer id).
"""

from __future__ import annotations

import json
import os
from typing import Any

from kafka.protocol.producer import ProduceRequest

from epochlog.client.config import parse_bootstrap
from epochlog.client.connection import BrokerConnection
from epochlog.protocol.batch import read_header
from epochlog.protocol.records import build_batch, iter_records
from epochlog.seams.real import OsDisk, RealClock, SocketNetwork
from epochlog.storage.quarantine import QUARANTINE_DIR, Quarantine


def entries(log_dirs: list[str]) -> list[dict[str, Any]]:
    found = []
    disk, clock = OsDisk(), RealClock()
    for log_dir in log_dirs:
        if not os.path.isdir(log_dir):
            continue
        for name in sorted(os.listdir(log_dir)):
            partition_dir = os.path.join(log_dir, name)
            if not os.path.isdir(os.path.join(partition_dir, QUARANTINE_DIR)):
                continue
            for entry in Quarantine(disk, clock, partition_dir).list():
                found.append({"partition_dir": name, **entry})
    return found


def format_entries(found: list[dict[str, Any]]) -> str:
    if not found:
        return "nothing quarantined"
    return "\n".join(
        f"{e['partition_dir']}: offsets {e.get('first_offset')}..{e.get('last_offset')}"
        f" epochs {e.get('epochs')} {e.get('size')} bytes reason={e.get('reason')}"
        f" file={e['file']}"
        for e in found
    )


def batches(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        data = f.read()
    out, pos = [], 0
    while pos + 61 <= len(data):
        header = read_header(data, pos)
        out.append(data[pos : pos + header.size])
        pos += header.size
    return out


def show(path: str) -> str:
    lines = []
    for batch in batches(path):
        header = read_header(batch)
        for record in iter_records(batch):
            lines.append(
                json.dumps(
                    {
                        "offset": record.offset,
                        "leader_epoch": header.partition_leader_epoch,
                        "timestamp": record.timestamp,
                        "key": record.key.decode(errors="replace") if record.key else None,
                        "value": record.value.decode(errors="replace") if record.value else None,
                    }
                )
            )
    return "\n".join(lines)


async def replay(path: str, bootstrap: str, topic: str, partition: int) -> str:
    """Produce the kept records again (acks=all), keeping keys, values, headers and
    timestamps; they get new offsets in the target partition."""
    host, port = parse_bootstrap("bootstrap.servers", bootstrap)[0]
    conn = await BrokerConnection.open(SocketNetwork(), host, port, "epochlog-quarantine")
    count = 0
    try:
        for batch in batches(path):
            records = list(iter_records(batch))
            fresh = build_batch(records)
            request = ProduceRequest(
                transactional_id=None,
                acks=-1,
                timeout_ms=30000,
                topic_data=[
                    ProduceRequest.TopicProduceData(
                        name=topic,
                        partition_data=[
                            ProduceRequest.TopicProduceData.PartitionProduceData(
                                index=partition, records=fresh
                            )
                        ],
                    )
                ],
            )
            response = await conn.send(request, 9)
            answer = response.responses[0].partition_responses[0]
            if answer.error_code:
                raise RuntimeError(f"replay refused with error code {answer.error_code}")
            count += len(records)
    finally:
        await conn.close()
    return f"replayed {count} records into {topic}-{partition}"
