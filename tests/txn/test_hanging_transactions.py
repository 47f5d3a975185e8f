"""A hanging transaction found and ended by an operator, as with Kafka's
kafka-transactions.sh: with verification turned off (dynamically, as Kafka's setting
is), a batch under a producer id whose transaction does not include the partition is
stored and holds the partition's last stable offset back; `epochlog transactions
find-hanging` lists it, and not a transaction its coordinator will end;
`epochlog transactions abort` ends it, by its start offset or by producer id, epoch and
coordinator epoch, after which a read_committed consumer reads past it."""

from __future__ import annotations

import asyncio
import time

from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import build_batch
from support.broker import BrokerProcess, run_epochlog, wait_until
from support.clients import create_topic
from support.requests import alter_broker_configs
from support.txn_requests import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    add_partitions,
    connect,
    init_producer,
    latest_offset,
    produce,
    read_committed,
    txn_batch,
)

TOPIC = "hanging"
VERIFICATION = "transaction.partition.verification.enable"
# Transactions written 20 minutes ago: past find-hanging's 15 minutes by default.
AGO_MS = 20 * 60_000
GHOST = 424_242  # a producer id no transactional id holds


def transactions(broker: BrokerProcess, *args: str) -> str:
    done = run_epochlog("transactions", *args, "--bootstrap-server", broker.bootstrap)
    assert done.returncode == 0, done.stderr
    return done.stdout


def rows(table: str) -> list[list[str]]:
    """find-hanging's rows under its header."""
    lines = table.strip().splitlines()
    assert lines[0].split()[:3] == ["Topic", "Partition", "ProducerId"], table
    return [line.split() for line in lines[1:]]


def offsets(broker: BrokerProcess) -> tuple[int, int]:
    """Partition 1's (high watermark, last stable offset)."""

    async def ask() -> tuple[int, int]:
        conn = await connect(broker.port)
        try:
            return (
                await latest_offset(conn, TOPIC, 1, READ_UNCOMMITTED),
                await latest_offset(conn, TOPIC, 1, READ_COMMITTED),
            )
        finally:
            await conn.close()

    return asyncio.run(ask())


def test_a_hanging_transaction_is_found_and_aborted_and_readers_move_on(
    broker_factory,
) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, TOPIC, partitions=2)
    old = int(time.time() * 1000) - AGO_MS

    async def begin() -> tuple[int, int]:
        conn = await connect(broker.port)
        try:
            pid, epoch = await init_producer(conn, "holder")
            await add_partitions(conn, "holder", pid, epoch, TOPIC, [0])
            # Its own transaction, open at partition 0: its coordinator will end it.
            legit = await produce(conn, "holder", TOPIC, 0, txn_batch(pid, epoch, [b"l"], 0, old))
            assert legit.error_code == ErrorCode.NONE
            stray = txn_batch(pid, epoch, [b"stray"], 1, old)
            refused = await produce(conn, "holder", TOPIC, 1, stray)
            assert refused.error_code == ErrorCode.INVALID_TXN_STATE
            return pid, epoch
        finally:
            await conn.close()

    async def hang(stray: bytes) -> int:
        """The stray batch, once the broker follows the setting, and a record after it."""
        conn = await connect(broker.port)
        try:
            for _ in range(100):
                answer = await produce(conn, "holder", TOPIC, 1, stray)
                if answer.error_code == ErrorCode.NONE:
                    break
                await asyncio.sleep(0.1)
            assert answer.error_code == ErrorCode.NONE
            plain = build_batch([(None, b"plain", [], int(time.time() * 1000))])
            assert (await produce(conn, None, TOPIC, 1, plain)).error_code == ErrorCode.NONE
            return answer.base_offset
        finally:
            await conn.close()

    pid, epoch = asyncio.run(begin())
    alter_broker_configs(broker.port, "", {VERIFICATION: (0, "false")})
    start = asyncio.run(hang(txn_batch(pid, epoch, [b"stray"], 1, old)))
    assert offsets(broker) == (2, 0)  # the stray transaction holds readers back
    assert read_committed(broker.bootstrap, TOPIC, 1) == []

    found = rows(transactions(broker, "find-hanging", "--topic", TOPIC))
    assert [r[:6] for r in found] == [[TOPIC, "1", str(pid), str(epoch), "-1", str(start)]]
    assert int(found[0][7]) >= 19  # Duration(min)
    assert rows(transactions(broker, "find-hanging", "--broker-id", "0")) == found
    assert rows(transactions(broker, "find-hanging", "--topic", TOPIC, "--partition", "0")) == []
    assert (
        rows(
            transactions(
                broker, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "30"
            )
        )
        == []
    )

    transactions(broker, "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", "0")
    assert offsets(broker) == (3, 3)
    assert read_committed(broker.bootstrap, TOPIC, 1) == [b"plain"]
    assert rows(transactions(broker, "find-hanging", "--topic", TOPIC)) == []

    # A producer id nobody holds, ended by its ids (a coordinator epoch never seen).
    async def ghost() -> None:
        conn = await connect(broker.port)
        try:
            answer = await produce(conn, "holder", TOPIC, 1, txn_batch(GHOST, 0, [b"g"], 0, old))
            assert answer.error_code == ErrorCode.NONE
        finally:
            await conn.close()

    asyncio.run(ghost())
    assert offsets(broker) == (4, 3)
    [row] = rows(transactions(broker, "find-hanging", "--broker-id", "0"))
    assert row[:6] == [TOPIC, "1", str(GHOST), "0", "-1", "3"]
    transactions(
        broker, "abort", "--topic", TOPIC, "--partition", "1",
        "--producer-id", str(GHOST), "--producer-epoch", "0", "--coordinator-epoch", "-1",
    )  # fmt: skip
    wait_until(lambda: offsets(broker) == (5, 5), 30, "the ghost's transaction aborted")
    assert read_committed(broker.bootstrap, TOPIC, 1) == [b"plain"]
    assert read_committed(broker.bootstrap, TOPIC, 0) == []  # the holder's is still open


def test_abort_and_find_hanging_refuse_what_kafkas_tool_refuses(broker_factory) -> None:
    broker = broker_factory()
    for args, error in [
        (["find-hanging"], "needs --topic or --broker-id"),
        (["find-hanging", "--partition", "0", "--broker-id", "0"], "--partition needs --topic"),
        (["abort", "--topic", TOPIC, "--partition", "0"], "needs --start-offset"),
        (["abort", "--topic", TOPIC, "--partition", "0", "--producer-id", "1"], "--producer-epoch"),
    ]:
        done = run_epochlog("transactions", *args, "--bootstrap-server", broker.bootstrap)
        assert done.returncode == 2 and error in done.stderr, (args, done.stderr)
    create_topic(broker.bootstrap, TOPIC)
    done = run_epochlog(
        "transactions", "abort", "--topic", TOPIC, "--partition", "0", "--start-offset", "5",
        "--bootstrap-server", broker.bootstrap,
    )  # fmt: skip
    assert done.returncode == 1
    assert "no open transaction starts at offset 5" in done.stderr
