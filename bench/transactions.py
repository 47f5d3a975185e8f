"""What transactions cost, with confluent-kafka against one epochlog broker.

Every figure is a ratio to a reference measured in the same run: transactional produce
(transactions of 1,000 and of 10,000 records of 100 bytes) as a ratio to idempotent
produce of the same records on the same broker, measured just before and just after
each transactional run (the ratio is to their mean, so that a machine whose speed
drifts biases neither side), and beside librdkafka's mock cluster doing the same
transactions. The mock's transactions are also taken as a ratio to its own idempotent
produce: the same client on a broker that costs next to nothing, so how near
transactions can come at all. read_committed consume as a ratio to read_uncommitted
consume of the same (committed and aborted) log. The cost of verification (KIP-890:
the partition leader asks the coordinator before a transaction's first batch there):
transactions of 100 and of 1,000 records against a second broker with
``transaction.partition.verification.enable=false``, each run taking the two brokers in
turn, ten slices each (alternating which goes first), as a ratio verified / unverified.
Medians of --runs runs; a million records a run (a tenth of it in transactions of 100),
as shorter runs are dominated by noise.

    python bench/transactions.py [--runs 5] [--records 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, fmt_rate, median  # noqa: E402

SIZE = 100
SLICES = 10
PRODUCER_CONF: dict[str, object] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
}


def _produce_all(producer: ck.Producer, topic: str, count: int, value: bytes) -> None:
    for _ in range(count):
        while True:
            try:
                producer.produce(topic, value=value, partition=0)
                break
            except BufferError:
                producer.poll(0.001)


def _cluster(bootstrap: str | None) -> dict[str, object]:
    """Where a producer goes: the broker at ``bootstrap``, or a mock cluster of its own."""
    if bootstrap is None:
        return {"test.mock.num.brokers": 1}
    return {"bootstrap.servers": bootstrap}


def idempotent_seconds(bootstrap: str | None, topic: str, count: int) -> float:
    """Seconds for ``count`` records; as init_transactions is not timed for the
    transactional producer, the producer id is fetched (one record) before the clock
    starts. Without that, the mock's figure dropped by a quarter."""
    producer = ck.Producer({**_cluster(bootstrap), **PRODUCER_CONF})
    producer.list_topics(topic, timeout=10)
    producer.produce(topic, value=b"first", partition=0)
    if producer.flush(60):
        raise RuntimeError("the first idempotent record was not delivered")
    value = os.urandom(SIZE)
    start = time.perf_counter()
    _produce_all(producer, topic, count, value)
    if producer.flush(300):
        raise RuntimeError("idempotent produce did not finish")
    return time.perf_counter() - start


def transactional_seconds(
    producer: ck.Producer, topic: str, count: int, per_txn: int, abort_every: int = 0
) -> float:
    """Seconds for ``count`` records in transactions of ``per_txn``, each committed
    (or every ``abort_every``-th aborted); init_transactions is not timed."""
    value = os.urandom(SIZE)
    start = time.perf_counter()
    done = 0
    n = 0
    while done < count:
        size = min(per_txn, count - done)
        producer.begin_transaction()
        _produce_all(producer, topic, size, value)
        n += 1
        if abort_every and n % abort_every == 0:
            producer.flush(120)  # in the log first: abort purges what is unsent
            producer.abort_transaction(120)
        else:
            producer.commit_transaction(120)
        done += size
    return time.perf_counter() - start


def transactional_producer(bootstrap: str | None, tid: str) -> ck.Producer:
    producer = ck.Producer({**_cluster(bootstrap), **PRODUCER_CONF, "transactional.id": tid})
    producer.init_transactions(60)
    return producer


def consume_seconds(bootstrap: str, topic: str, isolation: str) -> tuple[int, float]:
    """(records handed out, seconds) reading the whole partition from the start."""
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-unused",
            "enable.auto.commit": False,
            "isolation.level": isolation,
            "fetch.wait.max.ms": 5,
            "fetch.queue.backoff.ms": 1,
            "queued.min.messages": 1_000_000,
        }
    )
    try:
        tp = ck.TopicPartition(topic, 0)
        _low, high = consumer.get_watermark_offsets(tp, timeout=30)
        consumer.assign([ck.TopicPartition(topic, 0, ck.OFFSET_BEGINNING)])
        got = 0
        start = time.perf_counter()
        deadline = start + 300
        # The log ends with a commit or abort marker, which takes an offset but is never
        # handed out: done once a round brings nothing and the position reached it.
        while True:
            batch = consumer.consume(1000, 0.2)
            for m in batch:
                if m.error() is not None:
                    raise RuntimeError(f"consume error: {m.error()}")
            got += len(batch)
            if not batch and consumer.position([tp])[0].offset >= high - 1:
                break
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consumed {got} records in 300 s")
        return got, time.perf_counter() - start
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=1_000_000, help="records of 100 bytes")
    args = ap.parse_args(argv)
    count = args.records
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-txn-") as tmp:
        settings = {"transaction.state.log.num.partitions": 1, "offsets.topic.num.partitions": 1}
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp), settings).start()
        unverified = BrokerProcess(
            Path(tmp) / "unverified" / "logs",
            Path(tmp) / "unverified",
            {**settings, "transaction.partition.verification.enable": "false"},
        ).start()
        print(f"epochlog broker pid {broker.pid} at {broker.bootstrap}")
        print(f"unverified broker pid {unverified.pid} at {unverified.bootstrap}")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        plain_admin = AdminClient({"bootstrap.servers": unverified.bootstrap})
        try:
            rates: dict[str, list[float]] = {}

            def add(name: str, seconds: float, n: int) -> None:
                rates.setdefault(name, []).append(n / seconds)

            for run in range(args.runs):
                topics = [f"txn1k-{run}", f"txn10k-{run}", f"mixed-{run}"]
                topics += [f"idem-{n}-{run}-{when}" for n in (1000, 10_000) for when in "ab"]
                for f in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
                    f.result(60)
                for per_txn, topic in ((1000, topics[0]), (10_000, topics[1])):
                    before = count / idempotent_seconds(
                        broker.bootstrap, f"idem-{per_txn}-{run}-a", count
                    )
                    ours = transactional_producer(broker.bootstrap, f"bench-{per_txn}-{run}")
                    add(f"txn{per_txn}", transactional_seconds(ours, topic, count, per_txn), count)
                    after = count / idempotent_seconds(
                        broker.bootstrap, f"idem-{per_txn}-{run}-b", count
                    )
                    rates.setdefault(f"idempotent-{per_txn}", []).append((before + after) / 2)
                    rates.setdefault("idempotent", []).extend((before, after))
                    # The same pair against the mock: how near the client itself lets
                    # transactions come to idempotent produce.
                    mock_before = count / idempotent_seconds(None, f"mock-{run}", count)
                    mock = transactional_producer(None, f"bench-mock-{per_txn}-{run}")
                    seconds = transactional_seconds(mock, f"mock-{run}", count, per_txn)
                    add(f"mock-txn{per_txn}", seconds, count)
                    mock_after = count / idempotent_seconds(None, f"mock-{run}", count)
                    rates.setdefault(f"mock-idempotent-{per_txn}", []).append(
                        (mock_before + mock_after) / 2
                    )
                    del ours, mock
                # One transaction in four aborted: what a read_committed reader skips.
                mixed = transactional_producer(broker.bootstrap, f"bench-mixed-{run}")
                transactional_seconds(mixed, topics[2], count, 1000, abort_every=4)
                del mixed
                for isolation in ("read_uncommitted", "read_committed"):
                    got, seconds = consume_seconds(broker.bootstrap, topics[2], isolation)
                    add(isolation, seconds, got)
                    rates.setdefault(f"{isolation}-records", []).append(got)
                pair = [("verified", broker, admin), ("unverified", unverified, plain_admin)]
                for per_txn, n in ((100, count // 10), (1000, count)):
                    producers = {}
                    for label, where, its_admin in pair:
                        topic = f"{label}-{per_txn}-{run}"
                        its_admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
                        ours = transactional_producer(where.bootstrap, f"bench-{topic}")
                        producers[label] = (ours, topic)
                    seconds = dict.fromkeys(producers, 0.0)
                    # In slices taken in turn, so that both see the machine's same moments.
                    for piece in range(SLICES):
                        order = sorted(producers, reverse=(run + piece) % 2 == 1)
                        for label in order:
                            ours, topic = producers[label]
                            seconds[label] += transactional_seconds(
                                ours, topic, n // SLICES, per_txn
                            )
                    for label, took in seconds.items():
                        add(f"{label}-txn{per_txn}", took, n)
                    del producers, ours
                print(f"run {run + 1} of {args.runs} done", flush=True)
            report(rates, count)
            broker.stop()
            unverified.stop()
        finally:
            broker.close()
            unverified.close()
    return 0


def report(rates: dict[str, list[float]], count: int) -> None:
    m = {k: median(v) for k, v in rates.items()}
    print(f"\n{count:,} records of {SIZE} bytes, medians:")
    print(f"  idempotent produce          {fmt_rate(m['idempotent'], m['idempotent'] * SIZE)}")
    for per_txn in (1000, 10_000):
        ours, mock = m[f"txn{per_txn}"], m[f"mock-txn{per_txn}"]
        # Each run's transactions against the idempotent produce just around them.
        reference = rates[f"idempotent-{per_txn}"]
        per_run = [t / i for t, i in zip(rates[f"txn{per_txn}"], reference, strict=True)]
        mock_reference = rates[f"mock-idempotent-{per_txn}"]
        mock_per_run = [
            t / i for t, i in zip(rates[f"mock-txn{per_txn}"], mock_reference, strict=True)
        ]
        print(
            f"  transactions of {per_txn:>6,}    {fmt_rate(ours, ours * SIZE)}"
            f"  ({median(per_run):.2f} of idempotent, median of runs "
            + ", ".join(f"{r:.2f}" for r in per_run)
            + f"; mock {mock:,.0f} rec/s, {ours / mock:.2f} of mock;"
            f" the mock's own: {median(mock_per_run):.2f} of its idempotent produce, runs "
            + ", ".join(f"{r:.2f}" for r in mock_per_run)
            + ")"
        )
    ru, rc = m["read_uncommitted"], m["read_committed"]
    print(
        f"  read_uncommitted consume    {fmt_rate(ru, ru * SIZE)}"
        f"  ({m['read_uncommitted-records']:,.0f} records)"
    )
    print(
        f"  read_committed consume      {fmt_rate(rc, rc * SIZE)}"
        f"  ({m['read_committed-records']:,.0f} records, one transaction in four aborted;"
        f" {rc / ru:.2f} of read_uncommitted per record handed out)"
    )
    for per_txn in (100, 1000):
        verified = rates[f"verified-txn{per_txn}"]
        per_run = [v / u for v, u in zip(verified, rates[f"unverified-txn{per_txn}"], strict=True)]
        rate = median(verified)
        print(
            f"  verified transactions of {per_txn:>5,}  {fmt_rate(rate, rate * SIZE)}"
            f"  ({median(per_run):.3f} of unverified, median of runs "
            + ", ".join(f"{r:.3f}" for r in per_run)
            + ")"
        )


if __name__ == "__main__":
    raise SystemExit(main())
