"""What authorization costs a request, with 1,000 ACLs (the client's principal allowed by
a prefixed ACL among them, not a super user), as a ratio to no authorizer, measured in
the same run both ways:

- in process (the figure that matters on a shared machine): a broker's Produce and
  Fetch handlers called directly, in alternating blocks against a broker with the
  authorizer and one without; the median of the per-block ratios;
- end to end: confluent-kafka producing to two broker processes, runs alternating,
  median of the per-run ratios (large batches, and linger 0 where a per-request cost
  shows; noisy when other work shares the cores).

Also printed: one decision's cost in process.

    python bench/authorizer.py [--runs 5] [--records 200000] [--blocks 21]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import confluent_kafka as ck
from confluent_kafka.admin import AclBinding as KafkaAclBinding
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BrokerProcess, fmt_rate, median  # noqa: E402
from produce_consume import PRODUCER_CONF, produce  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "broker"))
from inprocess_broker import batch, running_broker  # noqa: E402
from kafka.protocol.consumer import FetchRequest  # noqa: E402

from epochlog.broker.handlers import fetch  # noqa: E402
from epochlog.broker.handlers import produce as produce_handler
from epochlog.protocol.apis import RequestFrame  # noqa: E402
from epochlog.security.acls import (  # noqa: E402
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from epochlog.security.authorizer import Authorizer  # noqa: E402
from epochlog.security.session import Session  # noqa: E402
from support.requests import produce_request  # noqa: E402

ACL_COUNT = 1000
# A PLAINTEXT client's principal: what the clients run as on the guarded broker.
PRODUCER = "User:ANONYMOUS"
WORKLOADS = [(100, 5), (100, 0)]  # (record size, linger.ms)
REQUESTS_PER_BLOCK = 500


def _acl(
    resource: ResourceType,
    name: str,
    principal: str,
    operation: AclOperation,
    pattern: PatternType = PatternType.LITERAL,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, pattern),
        AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW),
    )


def bench_acls() -> list[AclBinding]:
    """1,000 ACLs of many users over topics (literal and prefixed), groups and
    transactional ids; the client's three are among them."""
    topic, group, txn = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
    out = [
        _acl(topic, "bench-", PRODUCER, AclOperation.ALL, PatternType.PREFIXED),
        _acl(ResourceType.CLUSTER, CLUSTER_NAME, PRODUCER, AclOperation.CREATE),
        _acl(ResourceType.CLUSTER, CLUSTER_NAME, PRODUCER, AclOperation.IDEMPOTENT_WRITE),
    ]
    for i in range(500):
        op = AclOperation.READ if i % 2 else AclOperation.WRITE
        out.append(_acl(topic, f"topic-{i}", f"User:u{i % 50}", op))
    for i in range(200):
        out.append(
            _acl(topic, f"team-{i}-", f"User:u{i}", AclOperation.WRITE, PatternType.PREFIXED)
        )
    for i in range(200):
        out.append(_acl(group, f"group-{i}", f"User:u{i}", AclOperation.READ))
    while len(out) < ACL_COUNT:
        out.append(_acl(txn, f"txn-{len(out)}", f"User:u{len(out)}", AclOperation.WRITE))
    return out


def as_confluent(b: AclBinding) -> KafkaAclBinding:
    return KafkaAclBinding(
        b.pattern.resource_type.value, b.pattern.name, b.pattern.pattern_type.value,
        b.entry.principal, b.entry.host, b.entry.operation.value, b.entry.permission_type.value,
    )  # fmt: skip


def decision_seconds(bindings: list[AclBinding], calls: int = 20_000) -> float:
    """One authorize() call in process, with the same ACLs, each on a resource not
    decided before (no remembered decision)."""
    authorizer = Authorizer(frozenset(), False)
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        grouped.setdefault(b.pattern, []).append(b.entry)
    for pattern, entries in grouped.items():
        authorizer.set_acls(pattern, entries)
    write, topic = AclOperation.WRITE, ResourceType.TOPIC
    names = [f"bench-topic-{i}" for i in range(calls)]
    start = time.perf_counter()
    for name in names:
        authorizer.authorize(PRODUCER, "127.0.0.1", write, topic, name)
    return (time.perf_counter() - start) / calls


def _fetch_request(topic: str) -> Any:
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
        log_start_offset=-1, partition_max_bytes=1 << 16,
    )  # fmt: skip
    topics = [FetchRequest.FetchTopic(topic=topic, partitions=[part])]
    return FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 16, isolation_level=0,
        session_id=0, session_epoch=-1, topics=topics, forgotten_topics_data=[], rack_id="",
    )  # fmt: skip


async def handler_ratios(folder: Path, bindings: list[AclBinding], blocks: int) -> dict[str, float]:
    """Per API, the median over alternating blocks of (seconds without an authorizer) /
    (seconds with it) for the same requests handled in process."""
    session = Session("PLAINTEXT", "PLAINTEXT", PRODUCER, "127.0.0.1:40000")
    frame = RequestFrame(0, 9, 1, "bench", memoryview(b""))
    topic = "bench-handlers"
    on = {"authorizer_class_name": "kafka.security.authorizer.AclAuthorizer"}
    # One broker, no peers: its warning about how brokers would be identified is moot.
    logging.getLogger("epochlog.broker").setLevel(logging.ERROR)
    async with (
        running_broker(folder / "on", **on) as guarded,
        running_broker(folder / "off") as free,
    ):
        assert guarded.acl_store is not None
        await guarded.acl_store.add(bindings)
        for broker in (guarded, free):
            await broker.create_topic(topic, 1, 1, {})
        records = batch([b"x" * 100])
        calls = {
            "Produce": (produce_handler.handle, produce_request(topic, records, acks=1), 9),
            "Fetch": (fetch.handle, _fetch_request(topic), 12),
        }
        ratios = {}
        for name, (handle, request, version) in calls.items():
            per_block: list[float] = []
            for block in range(blocks):
                seconds = {}
                pair = (
                    [(guarded, "on"), (free, "off")]
                    if block % 2
                    else [(free, "off"), (guarded, "on")]
                )
                for broker, which in pair:
                    start = time.perf_counter()
                    for _ in range(REQUESTS_PER_BLOCK):
                        await handle(broker, request, version, frame, session)
                    seconds[which] = time.perf_counter() - start
                per_block.append(seconds["off"] / seconds["on"])
            ratios[name] = median(per_block[1:])  # the first block warms up
        return ratios


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
    for future in admin.create_acls([as_confluent(b) for b in bindings]).values():
        future.result(120)
    broker.stop()
    broker.settings["super.users"] = ""
    return broker.restart()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--blocks", type=int, default=21)
    args = ap.parse_args(argv)
    bindings = bench_acls()
    print(f"in process: one decision with {len(bindings)} ACLs costs "
          f"{decision_seconds(bindings) * 1e6:.2f} µs")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="epochlog-bench-authorizer-") as tmp:
        ratios = asyncio.run(handler_ratios(Path(tmp) / "handlers", bindings, args.blocks))
        for name, ratio in ratios.items():
            print(
                f"  {name} handler with {len(bindings)} ACLs: {ratio:.2f} of no authorizer"
                f" (median of {args.blocks - 1} blocks of {REQUESTS_PER_BLOCK} requests)"
            )
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
