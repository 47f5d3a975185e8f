"""What authorization costs a request: confluent-kafka producing to a broker with the
authorizer on and 1,000 ACLs (the producer's principal allowed by a prefixed ACL among
them, not a super user) as a ratio to a second broker in the same run without an
authorizer. Runs alternate between the two; the figure is the median of the per-run
ratios, for large batches and for small ones (linger 0: many requests, so a
per-request cost shows). Also printed: one decision's cost in process.

    python bench/authorizer.py [--runs 3] [--records 200000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka as ck
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, fmt_rate, median  # noqa: E402
from produce_consume import PRODUCER_CONF, produce  # noqa: E402

from epochlog.security import acls  # noqa: E402
from epochlog.security.authorizer import Authorizer  # noqa: E402

ACL_COUNT = 1000
# A PLAINTEXT client's principal: what the producer runs as on the guarded broker.
PRODUCER = "User:ANONYMOUS"
WORKLOADS = [(100, 5), (100, 0)]  # (record size, linger.ms)
Allow = AclPermissionType.ALLOW


def bench_acls() -> list[AclBinding]:
    """1,000 ACLs of many users over topics (literal and prefixed), groups and
    transactional ids; the producer's three are among them."""
    literal, prefixed = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED
    out = [
        AclBinding(ResourceType.TOPIC, "bench-", prefixed, PRODUCER, "*", AclOperation.ALL, Allow),
        AclBinding(ResourceType.BROKER, "kafka-cluster", literal, PRODUCER, "*",
                   AclOperation.CREATE, Allow),
        AclBinding(ResourceType.BROKER, "kafka-cluster", literal, PRODUCER, "*",
                   AclOperation.IDEMPOTENT_WRITE, Allow),
    ]  # fmt: skip
    for i in range(500):
        op = AclOperation.READ if i % 2 else AclOperation.WRITE
        out.append(
            AclBinding(ResourceType.TOPIC, f"topic-{i}", literal, f"User:u{i % 50}", "*", op, Allow)
        )
    for i in range(200):
        out.append(
            AclBinding(ResourceType.TOPIC, f"team-{i}-", prefixed, f"User:u{i}", "*",
                       AclOperation.WRITE, Allow)
        )  # fmt: skip
    for i in range(200):
        out.append(
            AclBinding(ResourceType.GROUP, f"group-{i}", literal, f"User:u{i}", "*",
                       AclOperation.READ, Allow)
        )  # fmt: skip
    while len(out) < ACL_COUNT:
        i = len(out)
        out.append(
            AclBinding(ResourceType.TRANSACTIONAL_ID, f"txn-{i}", literal, f"User:u{i}", "*",
                       AclOperation.WRITE, Allow)
        )  # fmt: skip
    return out


def decision_seconds(bindings: list[AclBinding], calls: int = 200_000) -> float:
    """One authorize() call in process, with the same ACLs."""
    authorizer = Authorizer(frozenset(), False)
    grouped: dict[acls.ResourcePattern, list[acls.AccessControlEntry]] = {}
    for b in bindings:
        resource_type = acls.ResourceType(b.restype.value)
        pattern = acls.ResourcePattern(
            resource_type, b.name, acls.PatternType(b.resource_pattern_type.value)
        )
        grouped.setdefault(pattern, []).append(
            acls.AccessControlEntry(
                b.principal, b.host, acls.AclOperation(b.operation.value), acls.AclPermissionType(3)
            )
        )
    for pattern, entries in grouped.items():
        authorizer.set_acls(pattern, entries)
    write, topic = acls.AclOperation.WRITE, acls.ResourceType.TOPIC
    start = time.perf_counter()
    for _ in range(calls):
        authorizer.authorize(PRODUCER, "127.0.0.1", write, topic, "bench-topic-0")
    return (time.perf_counter() - start) / calls


def produce_seconds(broker: BrokerProcess, topic: str, count: int, size: int, linger: int) -> float:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(60)
    conf = {"bootstrap.servers": broker.bootstrap, **PRODUCER_CONF, "linger.ms": linger}
    producer = ck.Producer(conf)
    producer.list_topics(topic, timeout=10)
    return produce(producer, topic, count, b"x" * size)


def guarded_broker(folder: Path, bindings: list[AclBinding]) -> BrokerProcess:
    """A broker with the authorizer on and ``bindings`` stored: added while the
    producer's principal is a super user, then restarted without it, so it is judged
    by the ACLs (which the broker reads back from its metastore)."""
    settings = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": PRODUCER,
    }
    broker = BrokerProcess(folder / "logs", folder / "out", settings).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_acls(bindings).values():
        future.result(120)
    broker.stop()
    broker.settings["super.users"] = ""
    return broker.restart()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args(argv)
    bindings = bench_acls()
    print(f"in process: one decision with {len(bindings)} ACLs costs "
          f"{decision_seconds(bindings) * 1e6:.2f} µs")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-authorizer-") as tmp:
        guarded = guarded_broker(Path(tmp) / "a", bindings)
        reference = BrokerProcess(Path(tmp) / "b" / "logs", Path(tmp) / "b" / "out").start()
        try:
            print(f"{len(bindings)} ACLs {guarded.bootstrap}, no authorizer {reference.bootstrap}")
            for broker in (guarded, reference):
                produce_seconds(broker, "bench-warm-up", 50_000, 100, 5)
            for size, linger in WORKLOADS:
                ratios, rates = [], []
                for run in range(args.runs):
                    topic = f"bench-{size}-{linger}-{run}"
                    pair = [(guarded, "on"), (reference, "off")]
                    if run % 2:
                        pair.reverse()
                    seconds = {
                        which: produce_seconds(broker, topic, args.records, size, linger)
                        for broker, which in pair
                    }
                    ratios.append(seconds["off"] / seconds["on"])
                    rates.append(args.records / seconds["on"])
                rate = median(rates)
                print(
                    f"  {size:>5} B linger {linger} ms with ACLs {fmt_rate(rate, rate * size)}"
                    f"  {median(ratios):.2f} of no authorizer (runs: "
                    + ", ".join(f"{r:.2f}" for r in ratios)
                    + ")",
                    flush=True,
                )
            guarded.stop()
            reference.stop()
        finally:
            guarded.close()
            reference.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
