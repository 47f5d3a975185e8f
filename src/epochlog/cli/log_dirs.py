"""``epochlog log-dirs describe|move``: kafka-log-dirs.sh --describe (each broker's log
dirs and the replicas in them, as a table or as kafka-log-dirs.sh's JSON) and moving a
replica to another log dir of its broker (AlterReplicaLogDirs)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping

from epochlog.client.admin import AsyncAdmin
from epochlog.client.admin_log_dirs import LogDirInfo
from epochlog.seams.real import real_seams


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["describe", "move"])
    parser.add_argument(
        "--broker",
        type=int,
        action="append",
        dest="brokers",
        help="describe: these brokers (repeatable; default all); move: one",
    )
    parser.add_argument(
        "--topic",
        action="append",
        dest="topics",
        help="describe: only these topics (repeatable); move: the topic",
    )
    parser.add_argument("--partition", type=int, default=0)
    parser.add_argument("--dir", help="move: the target log dir (absolute path)")


def as_json(dirs: list[LogDirInfo]) -> str:
    """kafka-log-dirs.sh --describe's JSON (version 1)."""
    brokers: dict[int, list[dict[str, object]]] = {}
    for d in dirs:
        brokers.setdefault(d.broker, []).append(
            {
                "logDir": d.path,
                "error": d.error,
                "partitions": [
                    {
                        "partition": f"{r.topic}-{r.partition}",
                        "size": r.size,
                        "offsetLag": r.offset_lag,
                        "isFuture": r.is_future,
                    }
                    for r in d.replicas
                ],
            }
        )
    return json.dumps(
        {"version": 1, "brokers": [{"broker": b, "logDirs": ds} for b, ds in brokers.items()]}
    )


def as_table(dirs: list[LogDirInfo]) -> str:
    """One aligned row per replica (per dir, when it holds none or failed)."""
    rows = [("BROKER", "LOG DIR", "PARTITION", "SIZE", "LAG", "FUTURE")]
    for d in dirs:
        if d.error or not d.replicas:
            rows.append((str(d.broker), d.path, d.error or "-", "", "", ""))
        for r in d.replicas:
            future = "yes" if r.is_future else "no"
            name = f"{r.topic}-{r.partition}"
            rows.append((str(d.broker), d.path, name, str(r.size), str(r.offset_lag), future))
    widths = [max(len(row[i]) for row in rows) for i in range(6)]
    return "\n".join(
        "  ".join(
            cell.rjust(width) if i in (3, 4) else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


async def run(args: argparse.Namespace, client: Mapping[str, str]) -> str:
    """What ``epochlog log-dirs`` prints; ``client``: the settings to reach a broker with."""
    if args.action == "move" and not (
        args.topics and len(args.topics) == 1 and args.brokers and len(args.brokers) == 1
    ):
        raise ValueError("log-dirs move needs one --topic, one --broker and --dir")
    if args.action == "move" and not args.dir:
        raise ValueError("log-dirs move needs --dir")
    admin = AsyncAdmin(dict(client), real_seams())
    try:
        if args.action == "move":
            topic, broker = args.topics[0], args.brokers[0]
            await admin.alter_replica_log_dir(topic, args.partition, broker, args.dir)
            return (
                f"moving {topic}-{args.partition} on broker {broker} to {args.dir} "
                "(the broker swaps once the copy is caught up)"
            )
        dirs = await admin.describe_log_dirs(args.brokers, args.topics)
        return as_json(dirs) if args.json else as_table(dirs)
    finally:
        await admin.close()
