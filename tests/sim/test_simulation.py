"""Virtual time, the simulated network, and real brokers run on them: what the
simulator stands on. A run is a function of its seed alone (the same trace byte for byte
under different hash seeds, i.e. with sets walked in other orders)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sim_scenarios import (
    cluster_and_clients,
    crashing_brokers,
    digest,
    isolated_leader,
    produce_and_read_back,
)

from epochlog.seams.waiting import finished_within, wait_event, with_timeout
from epochlog.sim.loop import SimClock, SimulationStalled, run_simulated
from epochlog.sim.network import SimNetwork

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


def test_virtual_time_jumps_to_the_next_timer_and_clock_timeouts_follow_it() -> None:
    async def main(clock: SimClock) -> list[tuple[str, float]]:
        seen: list[tuple[str, float]] = []

        async def sleeper(name: str, seconds: float) -> None:
            await clock.sleep(seconds)
            seen.append((name, clock.monotonic()))

        await asyncio.gather(sleeper("hour", 3600), sleeper("minute", 60), sleeper("day", 86400))
        with pytest.raises(TimeoutError):
            await with_timeout(clock, asyncio.Event().wait(), 30)
        seen.append(("timed out", clock.monotonic()))
        event = asyncio.Event()
        asyncio.get_running_loop().call_later(5, event.set)
        assert await wait_event(clock, event, 10)
        assert not await finished_within(clock, asyncio.Event().wait(), 1)
        seen.append(("end", clock.monotonic()))
        return seen

    assert run_simulated(main) == [
        ("minute", 60.0),
        ("hour", 3600.0),
        ("day", 86400.0),
        ("timed out", 86430.0),
        ("end", 86436.0),
    ]


def test_a_run_where_everything_waits_for_ever_is_reported_not_hung() -> None:
    async def main(clock: SimClock) -> None:
        await asyncio.Event().wait()

    with pytest.raises(SimulationStalled):
        run_simulated(main)


def test_the_simulated_network_keeps_order_and_a_partition_breaks_connections() -> None:
    import random

    async def main(clock: SimClock) -> tuple[bytes, type[BaseException]]:
        network = SimNetwork(clock, random.Random(3), latency_ms=(0, 20))
        received: list[bytes] = []
        server_done = asyncio.Event()

        async def echo(conn) -> None:  # type: ignore[no-untyped-def]
            try:
                while True:
                    received.append(await conn.read_exactly(10))
            except asyncio.IncompleteReadError:
                server_done.set()

        await network.serve("a", 1, echo)
        conn = await network.host("b").connect("a", 1)
        for i in range(100):
            conn.write(b"%010d" % i)
        await clock.sleep(1)
        network.partition("a", "b")
        with pytest.raises(ConnectionRefusedError):
            await network.host("b").connect("a", 1)
        with pytest.raises(asyncio.IncompleteReadError) as broken:
            await conn.read_exactly(1)
        await server_done.wait()
        return b"".join(received), broken.type

    data, _ = run_simulated(main)
    assert data == b"".join(b"%010d" % i for i in range(100))


def test_closing_a_simulated_connection_ends_its_own_pending_read_as_a_transport_does() -> None:
    import random

    async def main(clock: SimClock) -> bytes:
        network = SimNetwork(clock, random.Random(3))

        async def silent(conn) -> None:  # type: ignore[no-untyped-def]
            conn.write(b"early")
            await asyncio.Event().wait()

        await network.serve("a", 1, silent)
        conn = await network.host("b").connect("a", 1)
        await clock.sleep(1)
        reader = asyncio.ensure_future(conn.read_exactly(10))
        await asyncio.sleep(0)
        conn.close()
        with pytest.raises(asyncio.IncompleteReadError) as ended:
            await with_timeout(clock, reader, 5)
        return ended.value.partial

    assert run_simulated(main) == b"early"


def test_the_simulated_network_refuses_tls_rather_than_carry_it_in_clear() -> None:
    import random

    from epochlog.seams import Tls

    async def main(clock: SimClock) -> None:
        network = SimNetwork(clock, random.Random(3))

        async def ignore(conn) -> None:  # type: ignore[no-untyped-def]
            return None

        with pytest.raises(ValueError, match="no TLS"):
            await network.serve("a", 1, ignore, Tls())
        await network.serve("a", 1, ignore)
        with pytest.raises(ValueError, match="no TLS"):
            await network.host("b").connect("a", 1, Tls())

    run_simulated(main)


def test_three_brokers_replicate_in_one_process_on_virtual_time() -> None:
    trace = run_simulated(lambda clock: produce_and_read_back(clock, seed=7, records=500))
    acks = [t for t in trace if t[0] == "ack"]
    reads = [t for t in trace if t[0] == "read"]
    assert sorted(t[1] for t in acks) == list(range(500))
    assert sorted(t[5] for t in reads) == sorted(b"v%d" % i for i in range(500))
    # Every record read is where its acknowledgement said it was.
    assert {(t[2], t[3]) for t in acks} == {(t[1], t[2]) for t in reads}


def _digest_in_a_fresh_process(seed: int, hash_seed: int) -> str:
    env = {
        **os.environ,
        "PYTHONHASHSEED": str(hash_seed),
        "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)]),
    }
    done = subprocess.run(
        [sys.executable, str(HERE / "sim_scenarios.py"), str(seed)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def test_the_same_seed_replays_byte_for_byte_whatever_the_hash_seed() -> None:
    runs = {_digest_in_a_fresh_process(7, hash_seed) for hash_seed in (1, 2, 3)}
    assert len(runs) == 1, runs
    assert runs != {_digest_in_a_fresh_process(8, 1)}, "the seed decides nothing"
    assert runs == {digest(run_simulated(lambda clock: produce_and_read_back(clock, 7)))}


def test_an_isolated_leader_loses_no_acknowledged_record() -> None:
    """Jepsen's lost-write check under a clean failover: the leader cut off from the
    network and the metastore for 40 simulated seconds, then back as a zombie."""
    trace = run_simulated(lambda clock: isolated_leader(clock, seed=7))
    acked = {t[1]: t[2] for t in trace if t[0] == "ack"}
    read: dict[int, tuple[int, bytes]] = {}
    for t in trace:
        if t[0] == "read":
            read.setdefault(t[1], (t[2], t[3]))
    assert [t for t in trace if t[0] == "failed"] == []
    assert len(acked) == 12000
    assert {offset: value for offset, (_, value) in read.items()} == {
        offset: b"v%d" % i for i, offset in acked.items()
    }
    assert sorted(read) == list(range(len(read))), "a gap in the log"
    epochs = {epoch for epoch, _ in read.values()}
    assert max(epochs) >= 1, "the leader never changed: the fault did not happen"


def test_a_metastore_client_cut_off_fails_its_calls_and_its_session_expires() -> None:
    from epochlog.metastore import ConnectionLossError, open_metastore
    from epochlog.metastore.memory import MemoryMetastore

    async def main(clock: SimClock) -> None:
        cut = await open_metastore("memory://cut-off", clock, session_timeout_ms=6000)
        other = await open_metastore("memory://cut-off", clock, session_timeout_ms=6000)
        assert isinstance(cut, MemoryMetastore)
        await cut.create("/mine", b"1", ephemeral=True)
        changes: list[object] = []
        await cut.watch_data("/theirs", changes.append)
        expired: list[bool] = []
        cut.on_session_expired(lambda: expired.append(True))
        cut.disconnect()
        with pytest.raises(ConnectionLossError):
            await cut.get("/mine")
        await other.create("/theirs", b"2")
        await clock.sleep(1)
        assert changes == [], "a cut-off client sees no changes"
        await clock.sleep(10)
        assert await other.exists("/mine") is None, "its session expired"
        cut.disconnect(False)
        await clock.sleep(0.1)
        assert expired == [True] and await cut.get("/theirs")
        await cut.close()
        await other.close()

    run_simulated(main)


def test_a_busy_loop_is_reported_not_spun_for_ever() -> None:
    async def main(clock: SimClock) -> None:
        deadline = clock.monotonic() + 1
        while clock.monotonic() < deadline:
            await asyncio.sleep(0)  # yields, but never lets time move

    with pytest.raises(SimulationStalled, match="busy loop"):
        run_simulated(main)


# A spin that never yields cannot be seen by the loop: the hang guard is real time.
@pytest.mark.timeout(60)
def test_a_consumer_poll_with_under_a_millisecond_left_returns_instead_of_spinning() -> None:
    """Found by the simulator: a poll left with less than a millisecond (float rounding
    leaves 1.025 - 1.024 = 0.000999... of a 1 ms poll) kept fetching with 0 ms to wait
    until the deadline passed: a busy loop (for ever, in virtual time). Each poll of
    half a millisecond now returns within it, and the polls still bring every record."""

    async def main(clock: SimClock) -> tuple[list[int], float]:
        async with cluster_and_clients(clock, seed=3) as (_, admin, sender, reader):
            await admin.create_topic("t", partitions=3, replication_factor=3)
            for i in range(30):
                await sender.send("t", b"v%d" % i, partition=i % 3)
            assert await sender.flush(30)
            reader.assign([("t", p) for p in range(3)])
            counts = [len(await reader.poll(0.5))]  # type: ignore[arg-type]
            longest = 0.0  # past the first poll, which looks up metadata and offsets
            while sum(counts) < 30 and len(counts) < 1000:
                before = clock.monotonic()
                counts.append(len(await reader.poll(0.5)))  # type: ignore[arg-type]
                longest = max(longest, clock.monotonic() - before)
            return counts, longest

    counts, longest = run_simulated(main)
    assert sum(counts) == 30 and len(counts) < 1000
    assert longest < 0.0015


def test_a_record_on_one_broker_is_handed_out_without_waiting_for_the_others() -> None:
    """The consumer keeps one fetch out per broker and hands out each answer as it
    comes: a record produced to one broker's partition arrives in milliseconds, not
    after the other brokers' long polls (``fetch.max.wait.ms``, 500) run out."""

    async def main(clock: SimClock) -> list[float]:
        async with cluster_and_clients(clock, seed=5) as (_, admin, sender, reader):
            await admin.create_topic("t", partitions=6, replication_factor=1)
            reader.assign([("t", p) for p in range(6)])
            await reader.poll(100)
            delays = []
            for i in range(10):
                await clock.sleep(0.2)
                sent = clock.monotonic()
                await sender.send_and_wait("t", b"v%d" % i, partition=0)
                while not len(await reader.poll(1000)):
                    pass
                delays.append(clock.monotonic() - sent)
            return delays

    delays = run_simulated(main)
    assert max(delays) < 0.1, delays


def test_brokers_killed_one_at_a_time_lose_no_acknowledged_record() -> None:
    """Lost-write under SIGKILL-like crashes: the killed broker's disk keeps only what
    was fsynced (torn tails included), it recovers from that and catches up; every
    acknowledged record is read back at its offset, and no offset holds two records."""
    trace = run_simulated(lambda clock: crashing_brokers(clock, seed=3))
    acked = {(t[2], t[3]): b"v%d" % t[1] for t in trace if t[0] == "ack"}
    assert len([t for t in trace if t[0] == "crashed"]) >= 3
    assert len(acked) == 8000, [t for t in trace if t[0] == "failed"][:5]
    read: dict[tuple[int, int], bytes] = {}
    for t in trace:
        if t[0] == "read":
            assert read.setdefault((t[1], t[2]), t[3]) == t[3], "one offset, two records"
    assert {key: read.get(key) for key in acked} == acked
