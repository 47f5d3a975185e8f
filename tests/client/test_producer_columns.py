"""AsyncProducer.send_columns: records given as columns land as send_many would put
them (same partitions by key, same order within each partition, nulls and empty
values kept), keep their place between other sends, are stamped and acknowledged with
offsets, and refuse bad input before anything is enqueued. The compiled key hash
picks Kafka's partition for every key."""

from __future__ import annotations

import asyncio
import gc
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from inprocess_broker import run, running_broker
from test_producer_bulk import create, producer, read_all

from epochlog.client.key_partitions import key_partitions
from epochlog.client.partitioner import key_partition
from epochlog.client.produce_batch import _Batch
from epochlog.client.producer import RecordTooLargeError
from epochlog.protocol.column_rows import BinaryColumn


def random_keys(rng: random.Random, n: int) -> list[bytes]:
    return [rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 9, 16, 33])) for _ in range(n)]


def test_compiled_key_hash_picks_kafkas_partition_for_every_key() -> None:
    rng = random.Random(3)
    keys = random_keys(rng, 5000) + [b"", b"\xff\xff\xff\xff\xff", b"key-1"]
    for count in (1, 2, 7, 24, 1000):
        got = key_partitions(BinaryColumn.of(keys), count).tolist()
        assert got == [key_partition(k, count) for k in keys]


def test_null_keys_hash_to_minus_one_for_the_partitioner_to_place() -> None:
    assert key_partitions(BinaryColumn.of([b"a", None, b""]), 5).tolist() == [
        key_partition(b"a", 5),
        -1,
        key_partition(b"", 5),
    ]


def test_columns_land_where_send_many_puts_the_same_records(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            rng = random.Random(11)
            n = 3000
            keys: list[bytes | None] = [
                None if i % 50 == 0 else k for i, k in enumerate(random_keys(rng, n))
            ]
            values: list[bytes | None] = [
                None if i % 97 == 0 else rng.randbytes(rng.choice([0, 1, 100, 300]))
                for i in range(n)
            ]
            given = [rng.choice([-1, -1, -1, 0, 3]) for _ in range(n)]
            admins = [await create(broker, topic, partitions=4) for topic in ("cols", "many")]
            # murmur2: null keys hashed like empty ones, so both calls place them alike.
            p = producer(broker, **{"batch.size": 4000, "linger.ms": 5, "partitioner": "murmur2"})
            columns = await p.send_columns(
                "cols",
                BinaryColumn.of(values),
                BinaryColumn.of(keys),
                np.array(given, np.int64),
            )
            listed = await p.send_many(
                "many", values, keys=keys, partition=[None if g < 0 else g for g in given]
            )
            assert await columns.future is columns
            await listed.future
            assert [(m.partition, m.offset) for m in columns] == [
                (m.partition, m.offset) for m in listed
            ]
            for i, g in enumerate(given):
                if g >= 0:
                    assert columns[i].partition == g
            await p.close()
            for admin in admins:
                await admin.close()

            def stored(topic: str) -> list[Any]:
                return sorted((r.partition, r.offset, r.key, r.value, r.headers) for r in got)

            got = await read_all(broker, [("cols", q) for q in range(4)], n)
            from_columns = stored("cols")
            got = await read_all(broker, [("many", q) for q in range(4)], n)
            assert from_columns == stored("many")
            assert len(from_columns) == n

    run(scenario)


def test_null_keys_stick_to_one_partition_as_send_many_does(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker, partitions=8)
            p = producer(broker)
            keys = BinaryColumn.of([None, b"k", None, None])
            result = await p.send_columns("t", BinaryColumn.of([b"v"] * 4), keys)
            await result.future
            assert len({result[i].partition for i in (0, 2, 3)}) == 1
            assert result[1].partition == key_partition(b"k", 8)
            await p.close()
            await admin.close()

    run(scenario)


def test_columns_keep_their_place_between_other_sends(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker, **{"batch.size": 1000, "linger.ms": 5})
            values = [b"c%04d" % i for i in range(400)]
            before = await p.send("t", b"first", partition=0)
            result = await p.send_columns("t", BinaryColumn.of(values), None, np.zeros(400, int))
            after = await p.send("t", b"last", partition=0)
            await result.future
            assert (await before).offset == 0
            assert [m.offset for m in result] == list(range(1, 401))
            assert {type(m.offset) for m in result} == {int}  # not numpy's
            assert (await after).offset == 401
            assert result[5].timestamp > 0
            await p.close()
            await admin.close()
            got = await read_all(broker, [("t", 0)], 402)
            assert [r.value for r in got] == [b"first", *values, b"last"]

    run(scenario)


def live_batches() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, _Batch))


def test_answered_bulk_sends_leave_no_batch_alive(tmp_path: Path) -> None:
    """Each batch refers to the results it serves; a result's per-record placement must
    not hide that cycle from the collector (it once kept every payload sent)."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker, partitions=4)
            p = producer(broker, **{"batch.size": 2000})
            values = [b"v%05d" % i for i in range(2000)]
            keys = [b"k%d" % (i % 7) for i in range(2000)]
            before = live_batches()
            for _ in range(3):
                result = await p.send_columns("t", BinaryColumn.of(values), BinaryColumn.of(keys))
                await result.future
                many = await p.send_many("t", values, keys=keys)
                await many.future
            del result, many
            await p.close()
            assert live_batches() == before
            await admin.close()

    run(scenario)


def test_bad_columns_are_refused_with_nothing_enqueued(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker, partitions=2)
            p = producer(broker, **{"max.request.size": 10_000})
            values = BinaryColumn.of([b"a", b"b"])
            with pytest.raises(ValueError, match="keys has 1 items for 2 values"):
                await p.send_columns("t", values, BinaryColumn.of([b"k"]))
            with pytest.raises(ValueError, match="partition 2 of t, which has 2"):
                await p.send_columns("t", values, None, np.array([0, 2]))
            with pytest.raises(ValueError, match="partition -2 of t"):
                await p.send_columns("t", values, None, np.array([0, -2]))
            with pytest.raises(RecordTooLargeError, match="max.request.size"):
                await p.send_columns("t", BinaryColumn.of([b"a", b"x" * 20_000]))
            assert not any(p._queues.values())
            ok = await p.send_columns("t", values, None, np.array([1, 1]))
            await ok.future
            assert [m.offset for m in ok] == [0, 1]
            await p.close()
            await admin.close()

    run(scenario)


def test_an_empty_call_completes_at_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            admin = await create(broker)
            p = producer(broker)
            result = await p.send_columns("t", BinaryColumn.of([]))
            assert result.future.done() and len(result) == 0
            await asyncio.wait_for(p.close(), 30)
            await admin.close()

    run(scenario)
