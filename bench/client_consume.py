"""epochlog's client beside confluent-kafka, kafka-python and aiokafka, in one run.

One broker process holds --records records of 100 bytes (uncompressed, written by
confluent-kafka). Each client reads all of them from offset 0 with assign (no group),
timed from its construction to its last record: epochlog's record path (``poll``)
and Arrow path (``poll_arrow``), confluent-kafka, kafka-python, aiokafka. Then the pure
decode figure: arrow_batches decoding the partition's log as the broker serves it
(its segment files, in fetch-sized answers), on one core. Then produce: epochlog's
``Producer`` (per record and ``produce_batch``), ``AsyncProducer`` (``send`` and
``send_many``) and confluent-kafka's, the same records and settings. Figures are medians
of --runs runs; ratios are to confluent-kafka in the same run. --produce-only skips the
consumers.

    python bench/client_consume.py [--runs 3] [--records 1000000] [--produce-records 200000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, median  # noqa: E402

from epochlog.client import AsyncProducer, Consumer, Producer  # noqa: E402
from epochlog.client.arrow_batches import decode_fetched, walk_batches  # noqa: E402
from epochlog.seams.real import real_seams  # noqa: E402

T = TypeVar("T")

SIZE = 100
# A hang guard for one client's whole pass; never a judgement on speed.
PASS_LIMIT_S = 900.0
FETCH_BYTES = 1_048_576  # every client's default max.partition.fetch.bytes
CONFLUENT_CONSUMER: dict[str, object] = {
    "group.id": "epochlog-bench-unused",
    "enable.auto.commit": False,
    "enable.partition.eof": False,
    "auto.offset.reset": "earliest",
    # librdkafka pauses fetching whenever its queue holds queued.min.messages; a reader
    # that drains fast should not measure those pauses.
    "fetch.queue.backoff.ms": 1,
    "queued.min.messages": 1_000_000,
}
PRODUCER_CONF: dict[str, object] = {"acks": "all", "linger.ms": 5, "batch.size": 1_000_000}
# Records per produce_batch / send_many call (an Arrow batch's worth, as the Spark sink).
BULK = 10_000


def _guard(started: float, got: int, count: int, who: str) -> None:
    if time.perf_counter() - started > PASS_LIMIT_S:
        raise RuntimeError(f"{who}: {got} of {count} records in {PASS_LIMIT_S:.0f} s")


def epochlog_records(bootstrap: str, topic: str, count: int) -> float:
    start = time.perf_counter()
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, 0)])
        got = 0
        while got < count:
            got += len(c.poll(1.0))
            _guard(start, got, count, "epochlog poll")
        return time.perf_counter() - start


def epochlog_arrow(bootstrap: str, topic: str, count: int) -> float:
    start = time.perf_counter()
    with Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": "earliest"}) as c:
        c.assign([(topic, 0)])
        got = 0
        while got < count:
            got += c.poll_arrow(1.0).num_rows
            _guard(start, got, count, "epochlog poll_arrow")
        return time.perf_counter() - start


def confluent(bootstrap: str, topic: str, count: int) -> float:
    start = time.perf_counter()
    consumer = ck.Consumer({"bootstrap.servers": bootstrap, **CONFLUENT_CONSUMER})
    try:
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        got = 0
        while got < count:
            # consume() waits out its timeout unless it gets all it asked for.
            for m in consumer.consume(min(10_000, count - got), 1.0):
                if m.error() is not None:
                    raise RuntimeError(f"confluent-kafka: {m.error()}")
                got += 1
            _guard(start, got, count, "confluent-kafka")
        return time.perf_counter() - start
    finally:
        consumer.close()


def kafka_python(bootstrap: str, topic: str, count: int) -> float:
    from kafka import KafkaConsumer, TopicPartition

    start = time.perf_counter()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = 0
        while got < count:
            for recs in consumer.poll(timeout_ms=1000, max_records=10_000).values():
                got += len(recs)
            _guard(start, got, count, "kafka-python")
        return time.perf_counter() - start
    finally:
        consumer.close()


def aiokafka(bootstrap: str, topic: str, count: int) -> float:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    async def run() -> float:
        start = time.perf_counter()
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
        )
        await consumer.start()
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            consumer.seek(tp, 0)
            got = 0
            while got < count:
                for recs in (await consumer.getmany(timeout_ms=1000, max_records=10_000)).values():
                    got += len(recs)
                _guard(start, got, count, "aiokafka")
            return time.perf_counter() - start
        finally:
            await consumer.stop()

    return asyncio.run(run())


CONSUMERS: dict[str, Callable[[str, str, int], float]] = {
    "confluent-kafka": confluent,
    "epochlog poll_arrow": epochlog_arrow,
    "epochlog poll": epochlog_records,
    "kafka-python": kafka_python,
    "aiokafka": aiokafka,
}


def fetch_answers(log_dir: Path, topic: str) -> list[bytes]:
    """The partition's log cut as a fetch answers it: whole batches, up to the fetch
    size per answer (a batch larger than that alone)."""
    answers = []
    for segment in sorted((log_dir / f"{topic}-0").glob("*.log")):
        data = segment.read_bytes()
        walked = walk_batches(data, 0)
        start = 0
        for w in walked:
            if w.end - start > FETCH_BYTES and w.at > start:
                answers.append(data[start : w.at])
                start = w.at
        if start < len(data):
            answers.append(data[start:])
    return answers


def decode_seconds(answers: list[bytes], topic: str) -> tuple[float, int]:
    """CPU seconds of decoding every answer into Arrow (CRC checked, as the consumer
    does by default), and the rows it gave."""
    rows = 0
    offset = 0
    start = time.process_time()
    for data in answers:
        table, progress = decode_fetched(data, topic, 0, offset)
        rows += table.num_rows
        if progress:
            offset = progress[-1].next_offset
    return time.process_time() - start, rows


def _with_room(producer: Producer, produce: Callable[[], T]) -> T:
    """Call ``produce`` again while the queue is full (queue.buffering.max.messages), as
    a confluent-kafka user polls on BufferError; a short flush lets answers arrive."""
    while True:
        try:
            return produce()
        except BufferError:
            producer.flush(0.001)


def produce_epochlog(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    with Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF}) as producer:
        errors: list[BaseException] = []

        def delivered(error: BaseException | None, _metadata: object) -> None:
            if error is not None:
                errors.append(error)

        start = time.perf_counter()
        for _ in range(count):
            _with_room(
                producer,
                lambda: producer.produce(topic, value, partition=0, on_delivery=delivered),
            )
        # flush() waits for every record produced before it, the hand-off included.
        if not producer.flush(PASS_LIMIT_S):
            raise RuntimeError("epochlog producer: flush left records undelivered")
        if errors:
            raise RuntimeError(f"epochlog producer: records failed: {errors[0]}")
        return time.perf_counter() - start


def produce_epochlog_async(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    """The asyncio core without the synchronous wrapper's thread hand-off per record."""

    async def run() -> float:
        producer = AsyncProducer({"bootstrap.servers": bootstrap, **PRODUCER_CONF}, real_seams())
        try:
            start = time.perf_counter()
            futures = [await producer.send(topic, value, partition=0) for _ in range(count)]
            if not await producer.flush(PASS_LIMIT_S):
                raise RuntimeError("epochlog AsyncProducer: records left undelivered")
            for future in futures:
                future.result()
            return time.perf_counter() - start
        finally:
            await producer.close()

    return asyncio.run(run())


def produce_epochlog_batch(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    """The sync Producer's bulk path: produce_batch in slices of BULK records."""
    with Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF}) as producer:
        start = time.perf_counter()
        futures = [
            _with_room(
                producer,
                lambda i=i: producer.produce_batch(
                    topic, [value] * min(BULK, count - i), partition=0
                ),
            )
            for i in range(0, count, BULK)
        ]
        if not producer.flush(PASS_LIMIT_S):
            raise RuntimeError("epochlog produce_batch: flush left records undelivered")
        if any(f.exception() is not None for f in futures):
            raise RuntimeError("epochlog produce_batch: records failed")
        return time.perf_counter() - start


def produce_epochlog_send_many(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    """AsyncProducer.send_many in slices of BULK records: one future per slice."""

    async def run() -> float:
        producer = AsyncProducer({"bootstrap.servers": bootstrap, **PRODUCER_CONF}, real_seams())
        try:
            start = time.perf_counter()
            results = [
                await producer.send_many(topic, [value] * min(BULK, count - i), partition=0)
                for i in range(0, count, BULK)
            ]
            for result in results:
                await result.future
            return time.perf_counter() - start
        finally:
            await producer.close()

    return asyncio.run(run())


def produce_confluent(bootstrap: str, topic: str, count: int, value: bytes) -> float:
    producer = ck.Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF})
    errors = 0

    def on_delivery(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        nonlocal errors
        errors += err is not None

    start = time.perf_counter()
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=0, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.001)
    left = producer.flush(PASS_LIMIT_S)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"confluent-kafka producer: {left} undelivered, {errors} failed")
    return elapsed


PRODUCERS: dict[str, Callable[[str, str, int, bytes], float]] = {
    "confluent-kafka": produce_confluent,
    "epochlog Producer": produce_epochlog,
    "epochlog AsyncProducer": produce_epochlog_async,
    "epochlog produce_batch": produce_epochlog_batch,
    "epochlog send_many": produce_epochlog_send_many,
}


def produce_only(runs: int, n: int, value: bytes) -> int:
    """Only the produce figures (--produce-only), on a fresh broker."""
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp)).start()
        try:
            produce: dict[str, list[float]] = {name: [] for name in PRODUCERS}
            for run in range(runs):
                for name, writer in PRODUCERS.items():
                    target = f"produce-{run}-{name.replace(' ', '-')}"
                    create(broker.bootstrap, target)
                    produce[name].append(n / writer(broker.bootstrap, target, n, value))
                    print(f"  run {run + 1}: produce {name:22} {produce[name][-1]:>10,.0f} rec/s")
            reference = median(produce["confluent-kafka"])
            print(f"\nproduce {n:,} records of {SIZE} bytes (acks=all, idempotent), medians:")
            for name, values in produce.items():
                rate = median(values)
                print(f"  {name:24} {rate:>10,.0f} rec/s  {rate / reference:5.2f}x confluent")
            broker.stop()
        finally:
            broker.close()
    return 0


def create(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000, help="records of 100 bytes")
    ap.add_argument("--produce-records", type=int, default=200_000)
    ap.add_argument("--produce-only", action="store_true", help="skip the consumers")
    args = ap.parse_args(argv)
    if args.produce_only:
        return produce_only(args.runs, args.produce_records, os.urandom(SIZE))
    count = args.records
    value = os.urandom(SIZE)

    with tempfile.TemporaryDirectory(prefix="epochlog-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp)).start()
        print(f"epochlog broker pid {broker.pid} at {broker.bootstrap}", flush=True)
        try:
            topic = "consume-100"
            create(broker.bootstrap, topic)
            produce_confluent(broker.bootstrap, topic, count, value)
            print(f"{count:,} records of {SIZE} bytes written by confluent-kafka", flush=True)

            rates: dict[str, list[float]] = {name: [] for name in CONSUMERS}
            decode: list[float] = []
            produce: dict[str, list[float]] = {name: [] for name in PRODUCERS}
            answers = fetch_answers(broker.log_dir, topic)
            for run in range(args.runs):
                for name, consume in CONSUMERS.items():
                    seconds = consume(broker.bootstrap, topic, count)
                    rates[name].append(count / seconds)
                    print(f"  run {run + 1}: {name:20} {count / seconds:>12,.0f} rec/s", flush=True)
                seconds, rows = decode_seconds(answers, topic)
                if rows != count:
                    raise RuntimeError(f"decoded {rows} rows, expected {count}")
                decode.append(rows / seconds)
                print(f"  run {run + 1}: {'arrow decode':20} {rows / seconds:>12,.0f} rec/s")
                n = args.produce_records
                for name, writer in PRODUCERS.items():
                    target = f"produce-{run}-{name.replace(' ', '-')}"
                    create(broker.bootstrap, target)
                    produce[name].append(n / writer(broker.bootstrap, target, n, value))
                    print(f"  run {run + 1}: produce {name:22} {produce[name][-1]:>10,.0f} rec/s")
            report(count, args.produce_records, rates, decode, produce, len(answers))
            broker.stop()
        finally:
            broker.close()
    return 0


def report(
    count: int,
    produced: int,
    rates: dict[str, list[float]],
    decode: list[float],
    produce: dict[str, list[float]],
    answers: int,
) -> None:
    runs = len(decode)
    reference = median(rates["confluent-kafka"])
    print(f"\nconsume {count:,} records of {SIZE} bytes, one broker, medians of {runs} runs:")
    for name, values in sorted(rates.items(), key=lambda kv: -median(kv[1])):
        rate = median(values)
        print(
            f"  {name:20} {rate:>12,.0f} rec/s {rate * SIZE / 1e6:>8.1f} MB/s"
            f"  {rate / reference:>6.2f} x confluent-kafka"
        )
    rate = median(decode)
    print(
        f"  {'arrow decode':20} {rate:>12,.0f} rec/s  (one core, CPU time, {answers} fetch"
        f" answers of <= {FETCH_BYTES // 1024} KiB, CRC checked)"
    )
    reference = median(produce["confluent-kafka"])
    print(f"\nproduce {produced:,} records of {SIZE} bytes (acks=all, idempotent), medians:")
    for name, values in produce.items():
        rate = median(values)
        print(f"  {name:22} {rate:>10,.0f} rec/s  {rate / reference:>6.2f} x confluent-kafka")


if __name__ == "__main__":
    raise SystemExit(main())
