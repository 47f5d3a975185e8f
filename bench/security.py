"""What SASL_SSL costs: confluent-kafka producing and consuming over a broker's
SASL_SSL listener (SCRAM-SHA-512, TLS) as a ratio to its PLAINTEXT listener, on the
same broker in the same run. Runs alternate between the two listeners; each run
produces --records records of 100 B to a fresh topic, then reads them all back; the
figures are the medians of the per-run ratios (Kafka's users see roughly 0.6-0.8).

    python bench/security.py [--runs 3] [--records 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, fmt_rate, free_port, median  # noqa: E402
from produce_consume import CONSUMER_CONF, PRODUCER_CONF, produce  # noqa: E402

from support.certs import make_certs, ssl_listener_settings  # noqa: E402

SIZE = 100


def consume_all(conf: dict[str, object], topic: str, count: int) -> float:
    """Seconds to read the topic's ``count`` records from offset 0."""
    consumer = ck.Consumer({**conf, **CONSUMER_CONF})
    try:
        consumer.get_watermark_offsets(ck.TopicPartition(topic, 0), timeout=30)
        got = 0
        start = time.perf_counter()
        consumer.assign([ck.TopicPartition(topic, 0, 0)])
        deadline = start + 300
        while got < count:
            for message in consumer.consume(1000, 0.5):
                if message.error() is not None:
                    raise RuntimeError(f"consume error: {message.error()}")
                got += 1
            if time.perf_counter() > deadline:
                raise RuntimeError(f"consumed {got} of {count} in 300 s")
        return time.perf_counter() - start
    finally:
        consumer.close()


def one_run(conf: dict[str, object], topic: str, count: int) -> tuple[float, float]:
    """(produce seconds, consume seconds) of ``count`` records to a new topic."""
    admin = AdminClient(conf)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = ck.Producer({**conf, **PRODUCER_CONF})
    producer.list_topics(topic, timeout=10)
    value = (os.urandom(SIZE // 2) + b"x" * SIZE)[:SIZE]
    produce_s = produce(producer, topic, count, value)
    return produce_s, consume_all(conf, topic, count)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-security-") as tmp:
        certs = make_certs(Path(tmp) / "certs")
        broker = BrokerProcess(Path(tmp) / "logs", Path(tmp), ssl_listener_settings(certs, "none"))
        sasl_port = free_port()
        broker.settings |= {
            "listeners": f"PLAINTEXT://127.0.0.1:{broker.port},SASL_SSL://127.0.0.1:{sasl_port}",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        }
        broker.start()
        try:
            plaintext: dict[str, object] = {"bootstrap.servers": broker.bootstrap}
            info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
            upsert = UserScramCredentialUpsertion("bench", info, b"bench-secret")
            admin = AdminClient(plaintext)
            for future in admin.alter_user_scram_credentials([upsert]).values():
                future.result(60)
            del admin  # (no client left polling the broker once it stops)
            sasl_ssl: dict[str, object] = {
                "bootstrap.servers": f"127.0.0.1:{sasl_port}",
                "security.protocol": "SASL_SSL",
                "ssl.ca.location": str(certs.ca),
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "bench",
                "sasl.password": "bench-secret",
            }
            print(f"PLAINTEXT {broker.bootstrap}, SASL_SSL 127.0.0.1:{sasl_port}", flush=True)
            one_run(plaintext, "warm-plain", 50_000)
            one_run(sasl_ssl, "warm-sasl", 50_000)
            ratios: dict[str, list[float]] = {"produce": [], "consume": []}
            rates: dict[str, list[float]] = {"produce": [], "consume": []}
            for run in range(args.runs):
                pair = [("plain", plaintext), ("sasl", sasl_ssl)]
                if run % 2:
                    pair.reverse()
                seconds = {
                    name: one_run(conf, f"{name}-{run}", args.records) for name, conf in pair
                }
                for index, op in enumerate(("produce", "consume")):
                    ratios[op].append(seconds["plain"][index] / seconds["sasl"][index])
                    rates[op].append(args.records / seconds["sasl"][index])
                print(
                    f"  run {run}: produce {ratios['produce'][-1]:.2f}, "
                    f"consume {ratios['consume'][-1]:.2f}",
                    flush=True,
                )
            for op in ("produce", "consume"):
                rate = median(rates[op])
                print(
                    f"{op} over SASL_SSL {fmt_rate(rate, rate * SIZE)}: "
                    f"{median(ratios[op]):.2f} of PLAINTEXT (runs: "
                    + ", ".join(f"{r:.2f}" for r in ratios[op])
                    + ")",
                    flush=True,
                )
            broker.stop()
        finally:
            broker.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
