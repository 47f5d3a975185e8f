"""``epochlog quarantine list|show|replay``: what truncations and recoveries kept aside.

Run on a broker's host against its log directories; ``replay`` re-produces the kept
records into a topic through its leader, as new records (new offsets).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any

from epochlog.client.producer import AsyncProducer
from epochlog.protocol.batch import read_header
from epochlog.protocol.records import Record, iter_records
from epochlog.seams import Seams
from epochlog.seams.real import OsDisk, RealClock, real_seams
from epochlog.storage.quarantine import QUARANTINE_DIR, Quarantine
from epochlog.tools.terminal import progress


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
    return "\n".join(_entry_line(e) for e in found)


def _entry_line(entry: dict[str, Any]) -> str:
    """One entry: its offsets (a damaged tail's last as its header claimed it), what it
    is (a hole of damaged bytes or missing offsets, or what a truncation removed)."""
    last = entry.get("last_offset", entry.get("last_offset_claimed"))
    last = "?" if last is None else last
    kind = ""
    if entry.get("hole"):
        kind = " hole (missing offsets)" if entry.get("missing") else " hole (damaged bytes)"
    epochs = f" epochs {entry['epochs']}" if entry.get("epochs") else ""
    return (
        f"{entry['partition_dir']}: offsets {entry.get('first_offset')}..{last}"
        f"{kind}{epochs} {entry.get('size')} bytes reason={entry.get('reason')}"
        f" file={entry['file']}"
    )


def batches(path: str) -> list[bytes]:
    with open(path, "rb") as f:
        return batches_in(f.read())


def batches_in(data: bytes) -> list[bytes]:
    """The record batches of a quarantine file's bytes (wherever they were read)."""
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


async def replay(path: str, client: Mapping[str, str], topic: str, partition: int) -> str:
    """Produce the kept records of a quarantine file again; a bar shows the records
    acknowledged so far."""
    kept = [list(iter_records(batch)) for batch in batches(path)]
    with progress(f"replay into {topic}-{partition}", sum(map(len, kept))) as advance:
        return await replay_records(kept, client, real_seams(), topic, partition, advance)


async def replay_records(
    kept: list[list[Record]],
    client: Mapping[str, str],
    seams: Seams,
    topic: str,
    partition: int,
    advance: Callable[[int], object] = lambda _: None,
) -> str:
    """Produce kept records (per batch) again through the partition's leader (acks=all,
    idempotent), keeping keys, values, headers and timestamps; they get new offsets."""
    producer = AsyncProducer(dict(client), seams)
    count = 0
    try:
        for records in kept:
            sent = await producer.send_many(
                topic,
                [r.value for r in records],
                keys=[r.key for r in records],
                partition=partition,
                headers=[r.headers for r in records],
                timestamps=[r.timestamp for r in records],
            )
            await sent.future
            count += len(records)
            advance(len(records))
    finally:
        await producer.close()
    return f"replayed {count} records into {topic}-{partition}"
