"""What happened, from the evidence: a fresh batch read of the topic (the surviving
events), the parquet output, the brokers' quarantine (``epochlog quarantine list``
logic) and the source's own record of its decisions in the checkpoint."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from epochlog.tools import quarantine


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


@dataclass
class Quarantined:
    """What the returning brokers cut from their logs: the entries (as ``epochlog
    quarantine list`` prints them) and the event ids found in the kept records."""

    lines: list[str] = field(default_factory=list)
    # partition -> (first offset, last offset, epochs) over every broker's entries
    ranges: dict[int, tuple[int, int, list[int]]] = field(default_factory=dict)
    event_ids: set[str] = field(default_factory=set)


def quarantined(log_dirs: list[str], topic: str) -> Quarantined:
    """Every quarantine entry of ``topic`` on the given brokers' log dirs."""
    found = Quarantined()
    for log_dir in log_dirs:
        entries = [
            e for e in quarantine.entries([log_dir]) if e["partition_dir"].startswith(topic + "-")
        ]
        for entry in entries:
            found.lines.append(
                f"{os.path.basename(log_dir)}: " + quarantine.format_entries([entry])
            )
            partition = int(entry["partition_dir"].rsplit("-", 1)[1])
            first, last = entry.get("first_offset"), entry.get("last_offset")
            if first is None or last is None:
                continue
            epochs = list(entry.get("epochs") or [])
            if partition in found.ranges:
                f0, l0, e0 = found.ranges[partition]
                first, last = min(first, f0), max(last, l0)
                epochs = sorted(set(epochs) | set(e0))
            found.ranges[partition] = (first, last, epochs)
            for line in quarantine.show(entry["file"]).splitlines():
                value = json.loads(line).get("value")
                try:
                    found.event_ids.add(json.loads(value)["id"])
                except (TypeError, ValueError, KeyError):
                    continue
    return found


def topic_events(spark: Any, client: Mapping[str, str], topic: str) -> list[tuple[str, int, int]]:
    """A fresh batch read of the whole topic through the same source: (id, partition,
    offset) of every event the cluster holds now."""
    from epochlog.demo.pipeline import client_options, event_rows

    frame = (
        spark.read.format("epochlog")
        .options(**client_options(client))
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    return [
        (r["id"], int(r["partition"]), int(r["offset"]))
        for r in event_rows(frame).select("id", "partition", "offset").collect()
    ]


def committed_event_ids(client: Mapping[str, str], topic: str, partitions: int) -> list[str]:
    """The ids of every event a read_committed reader of ``topic`` gets."""
    from epochlog.client import Consumer, TopicPartition

    consumer = Consumer(
        {
            **client,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    ids: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        idle = 0
        while idle < 3:
            records = consumer.poll(0.5)
            for r in records:
                try:
                    ids.append(json.loads(r.value or b"")["id"])
                except (ValueError, KeyError, TypeError):
                    continue
            idle = 0 if records else idle + 1
    finally:
        consumer.close()
    return ids


def output_events(spark: Any, output: str) -> list[tuple[str, int, int, int]]:
    """(id, partition, offset, batch_id) of every row the pipeline wrote."""
    path = os.path.join(output, "events")
    if not os.path.isdir(path):
        return []
    return [
        (r["id"], int(r["partition"]), int(r["offset"]), int(r["batch_id"]))
        for r in spark.read.parquet(path).select("id", "partition", "offset", "batch_id").collect()
    ]


def aggregate_total(spark: Any, output: str) -> int:
    """The sum of the per-user counts over every micro-batch."""
    path = os.path.join(output, "aggregates")
    if not os.path.isdir(path):
        return 0
    row = spark.read.parquet(path).groupBy().sum("events").collect()[0]
    return int(row[0] or 0)


def checkpoint_offsets(checkpoint: str) -> list[tuple[int, Any]]:
    """(batch id, the source's end offset JSON) from the query's offset log: what each
    micro-batch was planned to read, automatic truncation decisions included."""
    folder = os.path.join(checkpoint, "offsets")
    if not os.path.isdir(folder):
        return []
    out = []
    for name in sorted((n for n in os.listdir(folder) if n.isdigit()), key=int):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            lines = f.read().splitlines()
        # v1, the batch metadata, then one line per source
        for line in lines[2:]:
            try:
                out.append((int(name), json.loads(line)))
            except ValueError:
                out.append((int(name), line))
    return out


def duplicates(ids: list[str]) -> dict[str, int]:
    return {i: n for i, n in Counter(ids).items() if n > 1}
