"""A compacted topic on a running broker: the cleaner, bounded by the high watermark,
keeps the latest value of each key in sealed segments."""

from __future__ import annotations

import asyncio
from pathlib import Path

from inprocess_broker import connect, produce, run, running_broker
from kafka.protocol.admin import CreateTopicsRequest

from epochlog.protocol.records import build_batch, iter_records


def test_running_broker_compacts_sealed_segments_of_a_compacted_topic(tmp_path: Path) -> None:
    async def scenario() -> None:
        settings = {"log.cleaner.backoff.ms": "50"}
        async with running_broker(tmp_path, **settings) as broker:
            conn = await connect(broker)
            topic = CreateTopicsRequest.CreatableTopic
            created = await conn.send(
                CreateTopicsRequest(
                    topics=[
                        topic(
                            name="latest",
                            num_partitions=1,
                            replication_factor=1,
                            assignments=[],
                            configs=[
                                topic.CreatableTopicConfig(name=k, value=v)
                                for k, v in {
                                    "cleanup.policy": "compact",
                                    "segment.bytes": "1024",
                                    "min.cleanable.dirty.ratio": "0.01",
                                }.items()
                            ],
                        )
                    ],
                    timeout_ms=10000,
                    validate_only=False,
                ),
                7,
            )
            assert created.topics[0].error_code == 0
            produced_bytes = 0
            for round_ in range(20):
                for key in (b"a", b"b", b"c"):
                    value = b"%s-%d" % (key, round_)
                    batch = build_batch([(key, value, [], 1_700_000_000_000 + round_)])
                    produced_bytes += len(batch)
                    assert (await produce(conn, "latest", batch)).error_code == 0
            log = broker.replica_manager.partition("latest", 0).log
            # The cleaner may already be at work while the batches arrive, so the
            # measure is what was produced, not the log size sampled afterwards.
            before = produced_bytes
            for _ in range(100):
                if log.size_bytes < before / 2:
                    break
                await asyncio.sleep(0.1)
            assert log.size_bytes < before / 2, "the cleaner did not compact the topic"
            records, next_offset = [], log.log_start_offset
            while next_offset < log.log_end_offset:
                read = log.read(next_offset, 1 << 20, max_offset=None, min_one_batch=True)
                data = b"".join(s.file.pread(s.size, s.position) for s in read.slices)
                pos = 0
                while pos < len(data):
                    size = int.from_bytes(data[pos + 8 : pos + 12], "big") + 12
                    records += list(iter_records(data[pos : pos + size]))
                    pos += size
                next_offset = records[-1].offset + 1
            latest = {}
            for record in records:
                latest[record.key] = record.value
            assert latest == {b"a": b"a-19", b"b": b"b-19", b"c": b"c-19"}
            offsets = [r.offset for r in records]
            assert offsets == sorted(offsets) and offsets[-1] == 59
            await conn.close()

    run(scenario)
