"""Fetch sessions (KIP-227) over the wire against one in-process broker: incremental
answers, long polls on session partitions, leader epochs, and refused sessions."""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from inprocess_broker import (
    batch,
    connect,
    create_topic_via_metadata,
    delete_topic,
    produce,
    run,
    running_broker,
)
from kafka.protocol.consumer import FetchRequest

from epochlog.broker.handlers import fetch as fetch_handler
from epochlog.client.connection import BrokerConnection
from epochlog.protocol.errors import ErrorCode

PARTITIONS = 4


def fetch(
    partitions: dict[int, int],
    *,
    session_id: int = 0,
    epoch: int = 0,
    forgotten: list[int] | None = None,
    topic_id: Any = None,
    current_epoch: int = -1,
    max_wait_ms: int = 0,
) -> FetchRequest:
    """A fetch of topic "t" (by id when given): partition -> offset."""
    fetch_topic = FetchRequest.FetchTopic
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=session_id,
        session_epoch=epoch,
        topics=[
            fetch_topic(
                topic="t",
                topic_id=topic_id,
                partitions=[
                    fetch_topic.FetchPartition(
                        partition=p,
                        current_leader_epoch=current_epoch,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                    for p, offset in partitions.items()
                ],
            )
        ]
        if partitions
        else [],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(topic="t", topic_id=topic_id, partitions=forgotten)
        ]
        if forgotten
        else [],
        rack_id="",
    )


def answered(response: Any) -> dict[int, Any]:
    return {p.partition_index: p for t in response.responses for p in t.partitions}


async def setup(broker: Any) -> Any:
    conn = await connect(broker)
    await create_topic_via_metadata(conn, "t")
    return conn


def test_incremental_fetch_answers_only_partitions_with_new_data(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await setup(broker)
            full = await conn.send(fetch(dict.fromkeys(range(PARTITIONS), 0)), 12)
            assert full.error_code == 0 and full.session_id != 0
            assert sorted(answered(full)) == list(range(PARTITIONS))
            session = full.session_id
            quiet = await conn.send(fetch({}, session_id=session, epoch=1), 12)
            assert (quiet.error_code, quiet.session_id, answered(quiet)) == (0, session, {})
            await produce(conn, "t", batch([b"a", b"b"]), partition=2)
            news = await conn.send(fetch({}, session_id=session, epoch=2), 12)
            (only,) = answered(news).values()
            assert only.partition_index == 2 and only.high_watermark == 2 and only.records
            # The fetcher moves its offset; nothing else is new.
            moved = await conn.send(fetch({2: 2}, session_id=session, epoch=3), 12)
            assert answered(moved) == {}
            await conn.close()

    run(scenario)


def test_long_poll_of_a_session_wakes_on_data_for_an_unlisted_partition(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await setup(broker)
            writer = await connect(broker)
            full = await conn.send(fetch(dict.fromkeys(range(PARTITIONS), 0)), 12)
            clock = broker.seams.clock
            start = clock.monotonic()
            waiting = asyncio.ensure_future(
                conn.send(fetch({}, session_id=full.session_id, epoch=1, max_wait_ms=20_000), 12)
            )
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await produce(writer, "t", batch([b"late"]), partition=3)
            response = await waiting
            assert sorted(answered(response)) == [3]
            assert clock.monotonic() - start < 10
            await conn.close()
            await writer.close()

    run(scenario)


async def long_poll_on_quiet_partitions(
    broker: Any, before_waiting: Callable[[], None] = lambda: None
) -> tuple[BrokerConnection, BrokerConnection, asyncio.Future[Any]]:
    """A session over topic t's partitions, all read to their (empty) end, and a fetch
    of it waiting up to 20 s; a second connection (``writer``) with a topic ``other``."""
    conn = await setup(broker)
    writer = await connect(broker)
    await create_topic_via_metadata(writer, "other")
    full = await conn.send(fetch(dict.fromkeys(range(PARTITIONS), 0)), 12)
    before_waiting()
    waiting = asyncio.ensure_future(
        conn.send(fetch({}, session_id=full.session_id, epoch=1, max_wait_ms=20_000), 12)
    )
    await asyncio.sleep(0.2)
    return conn, writer, waiting


def test_a_long_poll_reads_a_quiet_partition_again_only_once_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every append on the broker wakes every waiting fetch; appends to another topic
    leave this fetch's partitions as they were, so they are not read again."""
    reads: collections.Counter[tuple[str, int]] = collections.Counter()
    read_partition = fetch_handler._read_partition

    def counted(broker: Any, topic: str, cached: Any, *args: Any) -> Any:
        reads[(topic, cached.partition)] += 1
        return read_partition(broker, topic, cached, *args)

    monkeypatch.setattr(fetch_handler, "_read_partition", counted)

    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn, writer, waiting = await long_poll_on_quiet_partitions(broker, reads.clear)
            for n in range(10):
                await produce(writer, "other", batch([b"x%d" % n]), partition=0)
            assert not waiting.done()
            assert reads == {("t", p): 1 for p in range(PARTITIONS)}
            await produce(writer, "t", batch([b"late"]), partition=3)
            response = await waiting
            (late,) = answered(response).values()
            assert (late.partition_index, late.high_watermark) == (3, 1) and late.records
            assert reads == {**{("t", p): 1 for p in range(3)}, ("t", 3): 2}
            await conn.close()
            await writer.close()

    run(scenario)


def test_a_long_poll_answers_once_a_quiet_partition_starts_resigning(tmp_path: Path) -> None:
    """A leader resigning over a damaged log is not a quiet partition any more: the
    next wake-up reads it again and answers NOT_LEADER_OR_FOLLOWER."""

    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn, writer, waiting = await long_poll_on_quiet_partitions(broker)
            # What the replica manager sets when a leader with other in-sync replicas
            # finds its log damaged below the high watermark.
            broker.replica_manager.partition("t", 2).resigning = True
            await produce(writer, "other", batch([b"x"]), partition=0)  # wakes every poll
            response = await asyncio.wait_for(waiting, 5)
            (resigned,) = answered(response).values()
            assert (resigned.partition_index, resigned.error_code) == (
                2,
                ErrorCode.NOT_LEADER_OR_FOLLOWER,
            )
            await conn.close()
            await writer.close()

    run(scenario)


def test_forgotten_partitions_leave_the_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await setup(broker)
            full = await conn.send(fetch({0: 0, 1: 0}), 12)
            session = full.session_id
            left = await conn.send(fetch({}, session_id=session, epoch=1, forgotten=[0]), 12)
            assert answered(left) == {}
            await produce(conn, "t", batch([b"x"]), partition=0)
            await produce(conn, "t", batch([b"y"]), partition=1)
            after = await conn.send(fetch({}, session_id=session, epoch=2), 12)
            assert sorted(answered(after)) == [1]
            await conn.close()

    run(scenario)


def test_a_new_leader_epoch_fences_a_session_partition_in_the_answer(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await setup(broker)
            full = await conn.send(fetch(dict.fromkeys(range(PARTITIONS), 0), current_epoch=0), 12)
            session = full.session_id
            partition = broker.replica_manager.partition("t", 1)
            state = partition.state
            partition.become_leader(dataclasses.replace(state, leader_epoch=state.leader_epoch + 1))
            response = await conn.send(fetch({}, session_id=session, epoch=1), 12)
            (fenced,) = answered(response).values()
            assert fenced.partition_index == 1
            assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
            await conn.close()

    run(scenario)


def test_unknown_session_and_wrong_epoch_get_kafka_errors_and_spare_other_sessions(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await setup(broker)
            first = await conn.send(fetch({0: 0, 1: 0}), 12)
            second = await conn.send(fetch({2: 0, 3: 0}), 12)
            assert first.session_id not in (0, second.session_id)
            unknown = first.session_id ^ second.session_id ^ 0x5A5A
            lost = await conn.send(fetch({}, session_id=unknown, epoch=1), 12)
            assert lost.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            assert (lost.session_id, lost.responses) == (0, [])
            stale = await conn.send(fetch({}, session_id=first.session_id, epoch=7), 12)
            assert stale.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
            assert stale.responses == []
            by_id = await conn.send(
                fetch(
                    {},
                    session_id=first.session_id,
                    epoch=1,
                    topic_id=broker.metadata_cache.topic("t").topic_id,
                ),
                13,
            )
            assert by_id.error_code == ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
            # Both sessions still serve their next epochs.
            await produce(conn, "t", batch([b"z"]), partition=3)
            ok_first = await conn.send(fetch({}, session_id=first.session_id, epoch=1), 12)
            ok_second = await conn.send(fetch({}, session_id=second.session_id, epoch=1), 12)
            assert (ok_first.error_code, answered(ok_first)) == (0, {})
            assert ok_second.error_code == 0 and sorted(answered(ok_second)) == [3]
            await conn.close()

    run(scenario)


def test_final_epoch_fetches_in_full_without_a_session(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await setup(broker)
            for _ in range(2):
                response = await conn.send(fetch({0: 0, 1: 0}, epoch=-1), 12)
                assert response.session_id == 0 and sorted(answered(response)) == [0, 1]
            assert len(broker.fetch_sessions) == 0
            await conn.close()

    run(scenario)


def test_a_session_by_topic_id_never_reads_a_recreated_topic_of_the_same_name(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, num_partitions=str(PARTITIONS)) as broker:
            conn = await setup(broker)
            old_id = broker.metadata_cache.topic("t").topic_id
            full = await conn.send(fetch({0: 0, 1: 0}, topic_id=old_id), 13)
            assert full.session_id != 0
            assert await delete_topic(conn, "t") == 0
            await create_topic_via_metadata(conn, "t")
            assert broker.metadata_cache.topic("t").topic_id != old_id
            await produce(conn, "t", batch([b"new"]), partition=0)
            response = await conn.send(fetch({}, session_id=full.session_id, epoch=1), 13)
            parts = answered(response)
            assert sorted(parts) == [0, 1]
            assert {p.error_code for p in parts.values()} == {ErrorCode.UNKNOWN_TOPIC_ID}
            assert not any(p.records for p in parts.values())
            await conn.close()

    run(scenario)
