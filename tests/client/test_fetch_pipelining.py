"""A poll that hands out rows sends the next fetch at once, so the answer travels while
the caller handles the rows; an answer for a position that moved since (a seek) is
dropped, never handed out."""

from __future__ import annotations

from pathlib import Path

from inprocess_broker import run, running_broker
from test_poll_arrow import bootstrap, consumer_of

from epochlog.client import AsyncConsumer, AsyncProducer, OffsetAndEpoch
from epochlog.client.admin import AsyncAdmin


async def _one_batch_per_fetch(broker: object) -> AsyncConsumer:
    """A consumer of a topic of ten one-record batches that fetches one batch a time."""
    admin = AsyncAdmin({"bootstrap.servers": bootstrap(broker)}, broker.seams)  # type: ignore[attr-defined]
    await admin.create_topic("t", partitions=1, replication_factor=1)
    producer = AsyncProducer({"bootstrap.servers": bootstrap(broker)}, broker.seams)  # type: ignore[attr-defined]
    for i in range(10):  # one batch each, so a one-byte fetch limit returns one batch
        await producer.send_and_wait("t", b"%d" % i)
    await producer.close()
    await admin.close()
    consumer = consumer_of(broker, **{"max.partition.fetch.bytes": 1})
    consumer.assign([("t", 0)])
    return consumer


def test_rows_handed_out_send_the_next_fetch_and_all_rows_arrive_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            consumer = await _one_batch_per_fetch(broker)
            offsets: list[int] = []
            for _ in range(100):
                batch = await consumer.poll_arrow(200)
                if batch.num_rows:
                    assert consumer._in_flight  # the next fetch is already out
                offsets.extend(batch.column("offset").to_pylist())
                if len(offsets) >= 10:
                    break
            assert offsets == list(range(10))
            assert consumer.position(("t", 0)) == OffsetAndEpoch(10, 0)
            await consumer.close()
            assert not consumer._in_flight

    run(scenario)


def test_a_seek_between_polls_drops_the_answer_already_under_way(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            consumer = await _one_batch_per_fetch(broker)
            for expected in range(3):
                assert [r.offset for r in await consumer.poll(2000)] == [expected]
            ((pipelined, _),) = consumer._in_flight.values()
            await pipelined  # the answer for offset 3 is here before the seek back
            consumer.seek(("t", 0), 1)
            after = await consumer.poll(2000)
            assert [(r.offset, r.value) for r in after] == [(1, b"1")]
            await consumer.close()

    run(scenario)
