"""What produce-time record validation costs: confluent-kafka producing to a broker
that validates every record (as every epochlog broker does) as a ratio to a second
broker in the same run whose validator is replaced by a no-op (this program patches
it; no setting turns validation off). Both brokers are warmed up first (the compiled
record walker loads on a broker's first large batch); then runs alternate between the
two; the figure is the median of the per-run ratios.

    python bench/produce_validation.py [--runs 5] [--records 1000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, fmt_rate, median  # noqa: E402
from produce_consume import PRODUCER_CONF, produce  # noqa: E402

# The broker's own entry point with the validator made a no-op: the reference.
_UNVALIDATED = (
    "import sys;"
    "from epochlog.protocol.record_validation import RecordValidator;"
    "RecordValidator.validate = lambda *args, **kwargs: None;"
    "from epochlog.cli.main import main;"
    "sys.exit(main(sys.argv[1:]))"
)
# (record size, codec, linger.ms): large batches, and small ones (linger 0, a few
# records a batch), where a per-batch cost shows.
WORKLOADS = [(100, "none", 5), (100, "lz4", 5), (1024, "zstd", 5), (100, "none", 0)]


class UnvalidatedBroker(BrokerProcess):
    def command(self) -> list[str]:
        return [sys.executable, "-c", _UNVALIDATED, *super().command()[1:]]


def produce_seconds(
    broker: BrokerProcess, topic: str, count: int, size: int, codec: str, linger_ms: int
) -> float:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    producer = ck.Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            **PRODUCER_CONF,
            "compression.type": codec,
            "linger.ms": linger_ms,
        }
    )
    producer.list_topics(topic, timeout=10)
    # Compressible values, as real payloads are: a random head and a repeated tail.
    value = (os.urandom(size // 2) + b"x" * size)[:size]
    return produce(producer, topic, count, value)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=1_000_000)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-validation-") as tmp:
        validating = BrokerProcess(Path(tmp) / "a", Path(tmp) / "a-out").start()
        reference = UnvalidatedBroker(Path(tmp) / "b", Path(tmp) / "b-out", broker_id=0)
        reference.start()
        try:
            print(f"validating {validating.bootstrap}, no-op validator {reference.bootstrap}")
            for broker in (validating, reference):
                produce_seconds(broker, "warm-up", 50_000, 100, "none", 5)
            for size, codec, linger_ms in WORKLOADS:
                ratios, rates = [], []
                for run in range(args.runs):
                    topic = f"v-{size}-{codec}-{linger_ms}-{run}"
                    pair = [(validating, "on"), (reference, "off")]
                    if run % 2:
                        pair.reverse()
                    seconds = {
                        which: produce_seconds(broker, topic, args.records, size, codec, linger_ms)
                        for broker, which in pair
                    }
                    ratios.append(seconds["off"] / seconds["on"])
                    rates.append(args.records / seconds["on"])
                rate = median(rates)
                print(
                    f"  {size:>5} B {codec:<5} linger {linger_ms} ms validated"
                    f" {fmt_rate(rate, rate * size)}"
                    f"  {median(ratios):.2f} of unvalidated (runs: "
                    + ", ".join(f"{r:.2f}" for r in ratios)
                    + ")",
                    flush=True,
                )
            validating.stop()
            reference.stop()
        finally:
            validating.close()
            reference.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
