"""The same produce / consume / offsets-for-times operations through each real client.

Each client is used the way its users use it, without consumer groups (assign and
seek only), so a test pins what the broker does for that client's protocol versions.
Time bounds here only stop a hang; they never judge speed.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Sequence

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

from support.records import Got, Rec

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
# A hang guard for one whole produce or consume of a test's records.
IO_BOUND_S = 600.0


# --------------------------------------------------------------------------- admin


def create_topic(
    bootstrap: str, name: str, partitions: int = 1, config: dict[str, str] | None = None
) -> None:
    """Create a topic through confluent-kafka's AdminClient and wait for the answer."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})
    futures = admin.create_topics([topic], operation_timeout=30, request_timeout=30)
    futures[name].result(timeout=60)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        md = admin.list_topics(topic=name, timeout=10)
        t = md.topics.get(name)
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"topic {name} not visible in Metadata after creation")


# --------------------------------------------------------------------- confluent-kafka


def confluent_producer(bootstrap: str, **conf: object) -> ck.Producer:
    """Idempotent acks=all producer: what current clients do by default."""
    base: dict[str, object] = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 10,
    }
    base.update({k.replace("_", "."): v for k, v in conf.items()})
    return ck.Producer(base)


def confluent_produce(
    bootstrap: str, topic: str, recs: Sequence[Rec], codec: str, partition: int = 0
) -> list[int]:
    """Produce all records; return the offset of each from its delivery report."""
    producer = confluent_producer(bootstrap, compression_type=codec)
    offsets: list[int] = [-1] * len(recs)
    errors: list[str] = []

    def make_cb(i: int):  # noqa: ANN202 - librdkafka callback
        def cb(err: ck.KafkaError | None, msg: ck.Message) -> None:
            if err is not None:
                errors.append(f"record {i}: {err}")
            else:
                offsets[i] = msg.offset()

        return cb

    for i, r in enumerate(recs):
        while True:
            try:
                producer.produce(
                    topic,
                    value=r.value,
                    key=r.key,
                    headers=r.headers or None,
                    timestamp=r.timestamp,
                    partition=partition,
                    on_delivery=make_cb(i),
                )
                break
            except BufferError:
                producer.poll(0.05)
        if i % 1000 == 0:
            producer.poll(0)
    left = producer.flush(IO_BOUND_S)
    assert left == 0, f"{left} records still undelivered after {IO_BOUND_S}s"
    assert not errors, f"{len(errors)} delivery errors, first: {errors[:3]}"
    return offsets


def confluent_consumer(bootstrap: str) -> ck.Consumer:
    """A consumer for assign/seek reads; the group id is required but never joined."""
    return ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "epochlog-tests-unused",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "check.crcs": True,
            "enable.partition.eof": True,
        }
    )


def confluent_consume(
    bootstrap: str, topic: str, count: int | None = None, partition: int = 0, start: int = 0
) -> list[Got]:
    """Read from `start` up to `count` records, or to the end of the log when count is None."""
    consumer = confluent_consumer(bootstrap)
    try:
        if count is None:
            _, end = _watermarks(consumer, topic, partition)
            count = max(0, end - start)
        consumer.assign([ck.TopicPartition(topic, partition, start)])
        got: list[Got] = []
        deadline = time.monotonic() + IO_BOUND_S
        while len(got) < count and time.monotonic() < deadline:
            for m in consumer.consume(10000, 1.0):
                err = m.error()
                if err is not None:
                    if err.code() == ck.KafkaError._PARTITION_EOF:
                        continue
                    raise AssertionError(f"confluent-kafka consume error: {err}")
                ts_type, ts = m.timestamp()
                got.append(Got(m.offset(), m.key(), m.value(), list(m.headers() or []), ts))
        assert len(got) >= count, (
            f"confluent-kafka consumed {len(got)} of {count} records in {IO_BOUND_S}s"
        )
        return got
    finally:
        consumer.close()


def confluent_offsets_for_times(
    bootstrap: str, topic: str, targets: Sequence[int], partition: int = 0
) -> list[int | None]:
    """ListOffsets by timestamp; None where the broker says no such record (-1)."""
    consumer = confluent_consumer(bootstrap)
    try:
        out: list[int | None] = []
        for ts in targets:
            (tp,) = consumer.offsets_for_times([ck.TopicPartition(topic, partition, ts)], 30)
            assert tp.error is None, f"offsets_for_times({ts}): {tp.error}"
            out.append(None if tp.offset < 0 else tp.offset)
        return out
    finally:
        consumer.close()


def confluent_watermarks(bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = confluent_consumer(bootstrap)
    try:
        low, high = _watermarks(consumer, topic, partition)
        return int(low), int(high)
    finally:
        consumer.close()


# Answers a partition gives while its leadership moves (a broker just restarted applies
# the controller's election a moment after it starts answering): Kafka's clients retry
# them, librdkafka's watermark query hands them to the caller.
_LEADER_MOVING = (ck.KafkaError.NOT_LEADER_FOR_PARTITION, ck.KafkaError.LEADER_NOT_AVAILABLE)


def _watermarks(consumer: ck.Consumer, topic: str, partition: int) -> tuple[int, int]:
    deadline = time.monotonic() + 30
    while True:
        try:
            return consumer.get_watermark_offsets(ck.TopicPartition(topic, partition), 30)
        except ck.KafkaException as exc:
            if exc.args[0].code() not in _LEADER_MOVING or time.monotonic() > deadline:
                raise
        time.sleep(0.1)


# ------------------------------------------------------------------------ kafka-python


def kafka_python_produce(
    bootstrap: str, topic: str, recs: Sequence[Rec], codec: str, partition: int = 0
) -> list[int]:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        compression_type=None if codec == "none" else codec,
        acks="all",
        linger_ms=10,
        batch_size=256 * 1024,
    )
    try:
        futures = [
            producer.send(
                topic,
                key=r.key,
                value=r.value,
                headers=r.headers,
                timestamp_ms=r.timestamp,
                partition=partition,
            )
            for r in recs
        ]
        producer.flush(timeout=IO_BOUND_S)
        return [f.get(timeout=60).offset for f in futures]
    finally:
        producer.close(timeout=30)


def _kafka_python_consumer(bootstrap: str):  # noqa: ANN202 - kafka.KafkaConsumer
    from kafka import KafkaConsumer

    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        check_crcs=True,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    )


def kafka_python_consume(
    bootstrap: str, topic: str, count: int | None = None, partition: int = 0, start: int = 0
) -> list[Got]:
    from kafka import TopicPartition

    consumer = _kafka_python_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        if count is None:
            end = consumer.end_offsets([tp])[tp]
            count = max(0, end - start)
        consumer.seek(tp, start)
        got: list[Got] = []
        deadline = time.monotonic() + IO_BOUND_S
        while len(got) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=1000, max_records=10000).values():
                for m in batch:
                    got.append(Got(m.offset, m.key, m.value, list(m.headers), m.timestamp))
        assert len(got) >= count, (
            f"kafka-python consumed {len(got)} of {count} records in {IO_BOUND_S}s"
        )
        return got
    finally:
        consumer.close()


def kafka_python_offsets_for_times(
    bootstrap: str, topic: str, targets: Sequence[int], partition: int = 0
) -> list[int | None]:
    from kafka import TopicPartition

    consumer = _kafka_python_consumer(bootstrap)
    try:
        tp = TopicPartition(topic, partition)
        out: list[int | None] = []
        for ts in targets:
            ans = consumer.offsets_for_times({tp: ts})[tp]
            out.append(None if ans is None else ans.offset)
        return out
    finally:
        consumer.close()


# ----------------------------------------------------------------------------- aiokafka


def aiokafka_produce(
    bootstrap: str, topic: str, recs: Sequence[Rec], codec: str, partition: int = 0
) -> list[int]:
    async def run() -> list[int]:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if codec == "none" else codec,
            acks="all",
            linger_ms=10,
            max_batch_size=256 * 1024,
        )
        await producer.start()
        try:
            futures = []
            for r in recs:
                futures.append(
                    await producer.send(
                        topic,
                        key=r.key,
                        value=r.value,
                        headers=r.headers,
                        timestamp_ms=r.timestamp,
                        partition=partition,
                    )
                )
            metas = await asyncio.wait_for(asyncio.gather(*futures), IO_BOUND_S)
            return [m.offset for m in metas]
        finally:
            await producer.stop()

    return asyncio.run(run())


def aiokafka_consume(
    bootstrap: str, topic: str, count: int | None = None, partition: int = 0, start: int = 0
) -> list[Got]:
    async def run() -> list[Got]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            check_crcs=True,
            max_partition_fetch_bytes=4 * 1024 * 1024,
        )
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            n = count
            if n is None:
                end = (await consumer.end_offsets([tp]))[tp]
                n = max(0, end - start)
            consumer.seek(tp, start)
            got: list[Got] = []
            deadline = time.monotonic() + IO_BOUND_S
            while len(got) < n and time.monotonic() < deadline:
                data = await consumer.getmany(tp, timeout_ms=1000, max_records=10000)
                for m in data.get(tp, []):
                    got.append(Got(m.offset, m.key, m.value, list(m.headers), m.timestamp))
            assert len(got) >= n, f"aiokafka consumed {len(got)} of {n} records in {IO_BOUND_S}s"
            return got
        finally:
            await consumer.stop()

    return asyncio.run(run())


def aiokafka_offsets_for_times(
    bootstrap: str, topic: str, targets: Sequence[int], partition: int = 0
) -> list[int | None]:
    async def run() -> list[int | None]:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
        await consumer.start()
        try:
            tp = TopicPartition(topic, partition)
            out: list[int | None] = []
            for ts in targets:
                ans = (await consumer.offsets_for_times({tp: ts}))[tp]
                out.append(None if ans is None else ans.offset)
            return out
        finally:
            await consumer.stop()

    return asyncio.run(run())


# --------------------------------------------------------------------------------- kcat

KCAT_FIELD_SEP = "\x1f"  # unit separator: never inside keys, values or headers here
KCAT_RECORD_END = "\x1e"


def kcat_produce(
    kcat: str,
    bootstrap: str,
    topic: str,
    recs: Sequence[Rec],
    codec: str,
    headers: Sequence[tuple[str, str]],
    partition: int = 0,
) -> None:
    """kcat -P: one record per line, key before a tab; the same headers on every record.

    kcat cannot set per-record timestamps or headers, so librdkafka stamps CreateTime.
    """
    lines = b"".join(r.key + b"\t" + (r.value or b"") + b"\n" for r in recs)  # type: ignore[operator]
    cmd = [
        kcat,
        "-P",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-p",
        str(partition),
        "-K",
        "\t",
        "-X",
        "acks=all",
        "-X",
        "linger.ms=10",
    ]
    if codec != "none":
        cmd += ["-z", codec]
    for name, value in headers:
        cmd += ["-H", f"{name}={value}"]
    res = subprocess.run(cmd, input=lines, capture_output=True, timeout=IO_BOUND_S)
    assert res.returncode == 0, f"kcat -P exited {res.returncode}: {res.stderr[-2000:]!r}"


def kcat_consume(kcat: str, bootstrap: str, topic: str, partition: int = 0) -> list[Got]:
    """kcat -C -o beginning -e with a format string carrying every field we check."""
    fmt = KCAT_FIELD_SEP.join(["%o", "%k", "%s", "%h", "%T", "%p"]) + KCAT_RECORD_END
    cmd = [
        kcat,
        "-C",
        "-b",
        bootstrap,
        "-t",
        topic,
        "-p",
        str(partition),
        "-o",
        "beginning",
        "-e",
        "-q",
        "-f",
        fmt,
        "-X",
        "check.crcs=true",
    ]
    res = subprocess.run(cmd, capture_output=True, timeout=IO_BOUND_S)
    assert res.returncode == 0, f"kcat -C exited {res.returncode}: {res.stderr[-2000:]!r}"
    got: list[Got] = []
    for rec in res.stdout.split(KCAT_RECORD_END.encode()):
        if not rec:
            continue
        offset, key, value, hdrs, ts, part = rec.split(KCAT_FIELD_SEP.encode())
        assert int(part) == partition
        headers = []
        if hdrs:
            for pair in hdrs.split(b","):
                name, _, val = pair.partition(b"=")
                headers.append((name.decode(), val))
        got.append(Got(int(offset), key, value, headers, int(ts)))
    return got


def kcat_offset_for_time(
    kcat: str, bootstrap: str, topic: str, target: int, partition: int = 0
) -> int | None:
    """kcat -Q -t topic:partition:timestamp; None where the broker answers -1."""
    cmd = [kcat, "-Q", "-b", bootstrap, "-t", f"{topic}:{partition}:{target}"]
    res = subprocess.run(cmd, capture_output=True, timeout=120)
    assert res.returncode == 0, f"kcat -Q exited {res.returncode}: {res.stderr[-2000:]!r}"
    for line in res.stdout.decode().splitlines():
        # "<topic> [<partition>] offset <n>"
        parts = line.split()
        if len(parts) >= 4 and parts[0] == topic and parts[2] == "offset":
            offset = int(parts[3])
            return None if offset < 0 else offset
    raise AssertionError(f"kcat -Q printed no offset: {res.stdout!r} {res.stderr!r}")
