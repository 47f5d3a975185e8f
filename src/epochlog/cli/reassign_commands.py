"""``epochlog reassign``: kafka-reassign-partitions.sh's actions through the admin
client's AlterPartitionReassignments and ListPartitionReassignments (KIP-455):
--execute, --verify and --cancel take its JSON file
(``{"version": 1, "partitions": [{"topic": ..., "partition": ..., "replicas": [...]}]}``),
--list shows what is in progress, --generate proposes a move of whole topics to a
broker list."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping

from epochlog.client.admin import AsyncAdmin
from epochlog.client.admin_reassignments import OngoingReassignment
from epochlog.client.errors import TopicPartition
from epochlog.controller.elections import assign_replicas
from epochlog.protocol.errors import ErrorCode
from epochlog.seams.real import real_seams

Assignment = dict[TopicPartition, list[int]]
ACTIONS = ("execute", "verify", "list", "cancel", "generate")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_mutually_exclusive_group(required=True)
    for action in ACTIONS:
        actions.add_argument(f"--{action}", action="store_true")
    parser.add_argument("--reassignment-json-file", metavar="FILE")
    parser.add_argument(
        "--topics-to-move-json-file",
        metavar="FILE",
        help='--generate: {"version": 1, "topics": [{"topic": NAME}, ...]}',
    )
    parser.add_argument("--broker-list", help="--generate: the brokers to move to, as 1,2,3")


def assignment_from_json(text: str) -> Assignment:
    """The partitions and replicas of a kafka-reassign-partitions.sh JSON file."""
    spec = json.loads(text)
    try:
        return {
            TopicPartition(p["topic"], int(p["partition"])): [int(r) for r in p["replicas"]]
            for p in spec["partitions"]
        }
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"reassignment JSON: expected partitions of topic/partition/replicas ({exc})"
        ) from None


def assignment_to_json(assignment: Assignment) -> str:
    partitions = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "replicas": replicas,
            "log_dirs": ["any"] * len(replicas),
        }
        for tp, replicas in sorted(assignment.items())
    ]
    return json.dumps({"version": 1, "partitions": partitions})


async def _current(admin: AsyncAdmin, topics: list[str]) -> Assignment:
    """Each partition's replicas now (during a reassignment: target and leaving)."""
    cluster = await admin.describe_cluster(sorted(set(topics)))
    current: Assignment = {}
    for name in topics:
        topic = cluster.topics.get(name)
        if topic is None or topic.error:
            raise ValueError(f"topic {name}: {topic.error if topic else 'unknown'}")
        for p in topic.partitions:
            current[TopicPartition(name, p.partition)] = p.replicas
    return current


def _read(path: str | None, option: str) -> str:
    if not path:
        raise ValueError(f"this action needs {option}")
    with open(path, encoding="utf-8") as f:
        return f.read()


def _failures(results: Mapping[TopicPartition, tuple[ErrorCode, str | None]]) -> str:
    return "\n".join(
        f"  {tp}: {code.name}{': ' + message if message else ''}"
        for tp, (code, message) in sorted(results.items())
        if code != ErrorCode.NONE
    )


async def run(client: Mapping[str, str], args: argparse.Namespace) -> str:
    """One ``epochlog reassign`` action with these client settings; what it prints."""
    admin = AsyncAdmin(dict(client), real_seams())
    try:
        if args.list:
            return format_ongoing(await admin.list_partition_reassignments())
        if args.generate:
            return await _generate(admin, args)
        wanted = assignment_from_json(
            _read(args.reassignment_json_file, "--reassignment-json-file")
        )
        if args.verify:
            return await _verify(admin, wanted)
        if args.cancel:
            results = await admin.alter_partition_reassignments(dict.fromkeys(wanted))
            failed = _failures(results)
            if failed:
                raise RuntimeError(f"Error cancelling partition reassignments:\n{failed}")
            return "Successfully cancelled partition reassignments for: " + ",".join(
                str(tp) for tp in sorted(wanted)
            )
        current = await _current(admin, [tp.topic for tp in wanted])
        rollback = {tp: current[tp] for tp in wanted if tp in current}
        results = await admin.alter_partition_reassignments(dict(wanted))
        failed = _failures(results)
        if failed:
            raise RuntimeError(f"Error reassigning partitions:\n{failed}")
        return (
            "Current partition replica assignment\n\n"
            f"{assignment_to_json(rollback)}\n\n"
            "Save this to use as the --reassignment-json-file option during rollback\n"
            "Successfully started partition reassignments for "
            + ",".join(str(tp) for tp in sorted(wanted))
        )
    finally:
        await admin.close()


def format_ongoing(ongoing: Mapping[TopicPartition, OngoingReassignment]) -> str:
    if not ongoing:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for tp, move in sorted(ongoing.items()):
        lines.append(
            f"{tp}: replicas: {_ids(move.replicas)}. adding: {_ids(move.adding_replicas)}."
            f" removing: {_ids(move.removing_replicas)}."
        )
    return "\n".join(lines)


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


async def _verify(admin: AsyncAdmin, wanted: Assignment) -> str:
    """kafka-reassign-partitions.sh --verify: each partition's reassignment completed,
    in progress, or absent with another replica set."""
    ongoing = await admin.list_partition_reassignments()
    current = await _current(admin, [tp.topic for tp in wanted])
    lines = ["Status of partition reassignment:"]
    for tp, replicas in sorted(wanted.items()):
        if tp in ongoing:
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif current.get(tp) == replicas:
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is"
                f" {current.get(tp)} rather than {replicas}."
            )
    return "\n".join(lines)


async def _generate(admin: AsyncAdmin, args: argparse.Namespace) -> str:
    """A proposal moving whole topics onto ``--broker-list``, replication factors kept,
    leaders and followers spread round-robin as topic creation does."""
    spec = json.loads(_read(args.topics_to_move_json_file, "--topics-to-move-json-file"))
    if not args.broker_list:
        raise ValueError("--generate needs --broker-list")
    brokers = [int(b) for b in args.broker_list.split(",")]
    topics = [t["topic"] for t in spec.get("topics", [])]
    current = await _current(admin, topics)
    proposed: Assignment = {}
    for start, name in enumerate(topics):
        mine = sorted(tp for tp in current if tp.topic == name)
        factor = len(current[mine[0]]) if mine else 0
        if factor > len(brokers):
            raise ValueError(f"topic {name} has {factor} replicas; only {len(brokers)} brokers")
        spread = assign_replicas(len(mine), factor, brokers, start)
        proposed.update({tp: spread[tp.partition] for tp in mine})
    return (
        f"Current partition replica assignment\n{assignment_to_json(current)}\n\n"
        f"Proposed partition reassignment configuration\n{assignment_to_json(proposed)}"
    )
