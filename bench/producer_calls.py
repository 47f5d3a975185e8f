"""The per-record producer call, as a Python user writes it first: epochlog's
``Producer.produce`` (and ``AsyncProducer.send``) with a delivery callback per record,
as a ratio to confluent-kafka's ``produce`` with its ``on_delivery`` callback, both
against the same epochlog broker in the same run, runs alternating. A run is
``--records`` 100-byte records to one partition, timed from the first call to the
last delivery report; the figure is the median of the per-run ratios. confluent-kafka
runs twice in each run, first and last, and the faster is the reference: its own rate
is bimodal here (about 1.2 million records/s, or half that in some runs).

    python bench/producer_calls.py [--runs 5] [--records 300000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, median  # noqa: E402

from epochlog.client import Producer  # noqa: E402
from epochlog.client.producer import AsyncProducer  # noqa: E402
from epochlog.seams.real import real_seams  # noqa: E402

# The same batching on both sides (librdkafka's and epochlog's names agree here).
CONF = {"linger.ms": 5, "batch.size": 1_000_000, "acks": "all", "enable.idempotence": True}
VALUE = b"v" * 100


def confluent_seconds(bootstrap: str, topic: str, count: int) -> float:
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, **CONF, "queue.buffering.max.messages": 2_000_000}
    )
    producer.list_topics(topic, timeout=10)
    delivered = [0]

    def on_delivery(err: ck.KafkaError | None, _msg: ck.Message) -> None:
        if err is None:
            delivered[0] += 1

    started = time.perf_counter()
    for i in range(count):
        producer.produce(topic, VALUE, partition=0, on_delivery=on_delivery)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    assert delivered[0] == count, delivered
    return elapsed


def epochlog_seconds(bootstrap: str, topic: str, count: int) -> float:
    delivered = [0]

    def on_delivery(err: BaseException | None, _meta: object) -> None:
        if err is None:
            delivered[0] += 1

    conf = {"bootstrap.servers": bootstrap, **CONF, "queue.buffering.max.messages": 2_000_000}
    with Producer(conf) as producer:
        producer.produce(topic, b"warm", partition=0)
        assert producer.flush(30)
        started = time.perf_counter()
        for _ in range(count):
            producer.produce(topic, VALUE, partition=0, on_delivery=on_delivery)
        assert producer.flush(120)
        elapsed = time.perf_counter() - started
    assert delivered[0] == count, delivered
    return elapsed


def async_seconds(bootstrap: str, topic: str, count: int) -> float:
    async def run() -> float:
        producer = AsyncProducer({"bootstrap.servers": bootstrap, **CONF}, real_seams())
        await producer.send_and_wait(topic, b"warm", partition=0)
        delivered = [0]

        def done(fut: asyncio.Future[object]) -> None:
            if fut.exception() is None:
                delivered[0] += 1

        started = time.perf_counter()
        for _ in range(count):
            (await producer.send(topic, VALUE, partition=0)).add_done_callback(done)
        assert await producer.flush(120)
        elapsed = time.perf_counter() - started
        await producer.close()
        assert delivered[0] == count, delivered
        return elapsed

    return asyncio.run(run())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--records", type=int, default=300_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp), {"num.partitions": 1}).start()
        try:
            admin = AdminClient({"bootstrap.servers": broker.bootstrap})
            ratios: dict[str, list[float]] = {"Producer.produce": [], "AsyncProducer.send": []}
            for run in range(args.runs):
                topics = [f"calls-{run}-{k}" for k in ("ck", "sync", "async", "ck2")]
                for made in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
                    made.result(60)
                first = confluent_seconds(broker.bootstrap, topics[0], args.records)
                sync = epochlog_seconds(broker.bootstrap, topics[1], args.records)
                asynchronous = async_seconds(broker.bootstrap, topics[2], args.records)
                reference = min(first, confluent_seconds(broker.bootstrap, topics[3], args.records))
                ratios["Producer.produce"].append(reference / sync)
                ratios["AsyncProducer.send"].append(reference / asynchronous)
                print(
                    f"run {run}: confluent-kafka {args.records / reference:,.0f} rec/s,"
                    f" Producer.produce {args.records / sync:,.0f} rec/s,"
                    f" AsyncProducer.send {args.records / asynchronous:,.0f} rec/s",
                    flush=True,
                )
        finally:
            broker.stop()
            broker.close()
    for name, values in ratios.items():
        runs = ", ".join(f"{v:.2f}" for v in values)
        print(f"{name}: {median(values):.2f} of confluent-kafka's produce (runs {runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
