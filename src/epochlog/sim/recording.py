"""What a workload records into a run's history, shared by the simulator (``run.py``)
and the process-level chaos (``chaos/workload.py``), so both are judged by the same
checkers from the same kinds of events: acknowledgements, polls (with the truncations
they report), ListOffsets answers, the leader epochs clients hold, and the read-back."""

from __future__ import annotations

import asyncio

from epochlog.client.admin import AsyncAdmin
from epochlog.client.consumer import AsyncConsumer
from epochlog.client.errors import ClientError, LogTruncationError
from epochlog.client.producer import AsyncProducer
from epochlog.seams import Clock
from epochlog.sim import checkers

# A run gives up reading back after this long: a lost record would otherwise be waited
# for for ever (in virtual time); the checkers then say what is missing.
READ_BACK_S = 120.0
# How often the workload asks ListOffsets (KIP-207), in (simulated) seconds.
LIST_OFFSETS_S = 0.5


def record_ack(history: list[checkers.Event], i: int, future: asyncio.Future) -> None:
    if future.exception() is None:
        meta = future.result()
        history.append(("ack", i, meta.partition, meta.offset))
    else:
        history.append(("failed", i, type(future.exception()).__name__))


async def poll_into(
    consumer: AsyncConsumer, history: list[checkers.Event], timeout_ms: int, kind: str = "read"
) -> dict[int, int]:
    """One poll into the history; a reported truncation moves to its divergence offset
    (the start of the log when not known). Returns the next offset of each partition
    that handed out records."""
    reached = {}
    try:
        for r in await consumer.poll(timeout_ms):
            history.append((kind, r.partition, r.offset, r.value))
            reached[r.partition] = r.offset + 1
    except LogTruncationError as truncated:
        for tp, divergence in sorted(truncated.divergence.items()):
            history.append(("truncated", tp.partition, divergence))
            consumer.seek(tp, divergence if divergence is not None else 0)
    except ClientError as exc:
        history.append(("error", kind, type(exc).__name__))
    return reached


def client_epochs(
    clients: dict[str, AsyncProducer | AsyncConsumer | AsyncAdmin],
) -> list[tuple[tuple[str, str], int]]:
    """((client, topic-partition), leader epoch) of the metadata each client acts on."""
    held = []
    for name, client in clients.items():
        cache = client._cluster.cache  # what it routes requests by: read, never changed
        for topic, meta in sorted(cache.topics.items()):
            for index, part in sorted(meta.partitions.items()):
                held.append(((name, f"{topic}-{index}"), part.leader_epoch))
    return held


async def ask_list_offsets(
    clock: Clock,
    admin: AsyncAdmin,
    partitions: list[tuple[str, int]],
    history: list[checkers.Event],
) -> None:
    """Ask every partition's earliest and latest offsets now and then, as a client
    would (KIP-207's ListOffsets)."""
    while True:
        await clock.sleep(LIST_OFFSETS_S)
        for spec, kind in ((-2, "earliest"), (-1, "latest")):
            try:
                answers = await admin.list_offsets({tp: spec for tp in partitions})
            except ClientError as exc:
                history.append(("error", "list-offsets", type(exc).__name__))
                continue
            for tp, answer in sorted(answers.items()):
                if answer is not None:
                    history.append(("offsets", kind, tp.partition, answer.offset))


async def read_back(
    clock: Clock,
    consumer: AsyncConsumer,
    admin: AsyncAdmin,
    partitions: list[tuple[str, int]],
    history: list[checkers.Event],
) -> None:
    """Let the live consumer catch up, then read every partition from offset 0."""
    ends = {}
    for tp, answer in (await admin.list_offsets({tp: -1 for tp in partitions})).items():
        ends[tp.partition] = answer.offset if answer is not None else 0
    give_up = clock.monotonic() + READ_BACK_S
    for kind in ("read", "final"):
        reached = {tp[1]: next_offset(consumer, tp) for tp in partitions}
        while clock.monotonic() < give_up and any(reached.get(p, 0) < e for p, e in ends.items()):
            reached.update(await poll_into(consumer, history, 200, kind))
        for tp in partitions:
            consumer.seek(tp, 0)


def next_offset(consumer: AsyncConsumer, tp: tuple[str, int]) -> int:
    position = consumer.position(tp)
    return 0 if position is None else position.offset
