"""Several real broker processes on loopback sharing one metastore (SQLite or ZooKeeper)."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest

from epochlog.client.connection import BrokerConnection
from epochlog.metastore import open_metastore
from epochlog.protocol.records import build_batch
from epochlog.seams.real import RealClock, SocketNetwork
from epochlog.tools.local_ports import free_port
from support.broker import BrokerProcess, epochlog_command, wait_until
from support.requests import fetch_request, send_request
from support.requests import produce_request as raw_produce_request

# Short timeouts so that failures are noticed within seconds in tests.
FAST_FAILURE_SETTINGS = {
    "zookeeper.session.timeout.ms": "3000",
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "100",
    "auto.create.topics.enable": "false",
    "leader.imbalance.check.interval.seconds": "3600",
}


LATEST = -1
EARLIEST = -2
CONSUMER_REPLICA_ID = -1
# Kafka's replica id for tools: any replica answers with its own log end, never held back.
DEBUGGING_REPLICA_ID = -2


class Cluster:
    def __init__(
        self, base: Path, metastore: str, size: int, settings: dict[str, str], log_dirs: int = 1
    ) -> None:
        self.metastore = metastore
        self.brokers = [
            BrokerProcess(
                log_dir=base / f"broker{i}" / "logs",
                output_dir=base / f"broker{i}",
                settings={
                    **FAST_FAILURE_SETTINGS,
                    "metastore": metastore,
                    **settings,
                    **self._log_dirs_setting(base / f"broker{i}", log_dirs),
                },
                broker_id=i,
            )
            for i in range(size)
        ]
        # Brokers stopped with SIGSTOP: alive, but they answer nobody until resumed.
        self.paused: set[int] = set()

    @staticmethod
    def _log_dirs_setting(base: Path, count: int) -> dict[str, str]:
        """``log.dirs`` of a broker with several: ``logs`` (its ``log_dir``), ``logs-1``..."""
        if count == 1:
            return {}
        dirs = [base / "logs"] + [base / f"logs-{n}" for n in range(1, count)]
        return {"log.dirs": ",".join(str(d) for d in dirs)}

    def serve_metrics(self) -> dict[int, int]:
        """Give every broker a ``metrics.listener`` on a free port (before it starts);
        the port of each, by broker id."""
        ports = {b.broker_id: free_port() for b in self.brokers}
        for b in self.brokers:
            b.settings["metrics.listener"] = f"http://127.0.0.1:{ports[b.broker_id]}"
        return ports

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def responsive(self) -> list[BrokerProcess]:
        """Brokers that run and are not paused: those that can answer a request."""
        return [b for b in self.brokers if b.is_running() and b.broker_id not in self.paused]

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.responsive())

    def pause(self, broker: int) -> None:
        """SIGSTOP: the zombie of KIP-320."""
        self.brokers[broker].pause()
        self.paused.add(broker)

    def resume(self, broker: int) -> None:
        self.brokers[broker].resume()
        self.paused.discard(broker)

    def kill(self, broker: int) -> None:
        """SIGKILL, without the SIGCONT ``BrokerProcess.kill`` sends first: a paused
        broker must die without running (and answering anyone) again."""
        proc = self.brokers[broker].proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        self.paused.discard(broker)

    def registered(self, via: int) -> set[int]:
        """Broker ids one broker lists in Metadata."""
        return asyncio.run(_cluster(self.brokers[via].port))[1]

    def start(self) -> Cluster:
        for broker in self.brokers:
            broker.start()
        wait_until(lambda: self.controller_id() >= 0, 30, "a controller to be elected")
        self.wait_for_brokers()
        return self

    def wait_for_brokers(self) -> None:
        """Until every running broker lists every running broker (topic creation assigns
        replicas over the brokers the receiving one knows)."""
        running = {b.broker_id for b in self.responsive()}
        for broker in self.responsive():
            if broker.is_running():
                wait_until(
                    lambda b=broker: running <= asyncio.run(_cluster(b.port))[1],
                    30,
                    f"broker {broker.broker_id} to know brokers {sorted(running)}",
                )

    def __enter__(self) -> Cluster:
        try:
            return self.start()
        except BaseException as exc:
            self.__exit__(type(exc), exc, None)
            raise

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        # The brokers are gone by the time pytest reports (conftest's hook sees only
        # LIVE_BROKERS): their logs go with the failure.
        if exc is not None:
            for broker in self.brokers:
                exc.add_note(broker.tail(80))
        self.close()

    def close(self) -> None:
        """Teardown by SIGKILL: a controlled shutdown of the last brokers would wait out
        its retries (15 s) for leaderships nobody is left to take. Clean stops are
        checked where a test asks for them (``BrokerProcess.stop``)."""
        for broker in self.brokers:
            broker.kill()
            broker.close()
        self.paused.clear()

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.live_bootstrap()})

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication: int = 3,
        assignment: list[list[int]] | None = None,
        **config: str,
    ) -> None:
        """Create through confluent-kafka's AdminClient (an explicit replica assignment,
        leader first, when given) and wait until each partition's leader serves it."""
        configs = {k.replace("_", "."): v for k, v in config.items()}
        if assignment is not None:
            topic = NewTopic(name, len(assignment), replica_assignment=assignment, config=configs)
        else:
            topic = NewTopic(name, partitions, replication, config=configs)
        admin = self.admin()
        admin.create_topics([topic], operation_timeout=30)[name].result(60)
        wait_until(
            lambda: all(p.leader >= 0 for p in self.metadata(name)["partitions"]),
            30,
            f"leaders for {name}",
        )
        for p in self.metadata(name)["partitions"]:
            wait_until(
                lambda p=p: self.list_offsets(p.leader, name, p.index).error == 0,
                30,
                f"broker {p.leader} to serve {name}-{p.index} as leader",
            )

    def metadata(self, topic: str, via: int | None = None) -> dict[str, Any]:
        """Metadata v12 of one topic as a chosen (or any live) broker answers it."""
        brokers = [self.brokers[via]] if via is not None else self.responsive()
        return asyncio.run(_metadata(brokers[0].port, topic))

    def leader(self, topic: str, partition: int = 0) -> tuple[int, int]:
        """(leader, leader epoch); (-1, -1) from a broker that has not learnt the
        partition yet (a follower's metadata lags its controller's by a poll)."""
        partitions = {p.index: p for p in self.metadata(topic)["partitions"]}
        if partition not in partitions:
            return -1, -1
        return partitions[partition].leader, partitions[partition].leader_epoch

    def controller_id(self) -> int:
        for broker in self.responsive():
            try:
                return asyncio.run(_cluster(broker.port))[0]
            except OSError:
                continue
        return -1

    def partition_dir(self, broker: int, topic: str, partition: int = 0) -> Path:
        return self.brokers[broker].log_dir / f"{topic}-{partition}"

    def quarantined(self, broker: int, topic: str, partition: int = 0) -> list[dict[str, Any]]:
        """The JSON descriptions a broker's truncations left in the partition's quarantine."""
        folder = self.partition_dir(broker, topic, partition) / "quarantine"
        if not folder.is_dir():
            return []
        return [json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))]

    def list_offsets(
        self,
        broker: int,
        topic: str,
        partition: int = 0,
        timestamp: int = LATEST,
        *,
        replica_id: int = CONSUMER_REPLICA_ID,
        current_leader_epoch: int = -1,
    ) -> OffsetAnswer:
        """One ListOffsets v7 to one broker, answered as it is (errors are not raised)."""
        request = ListOffsetsRequest(
            replica_id=replica_id,
            isolation_level=0,
            topics=[
                ListOffsetsRequest.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                            partition_index=partition,
                            current_leader_epoch=current_leader_epoch,
                            timestamp=timestamp,
                        )
                    ],
                )
            ],
        )
        response = self.send(broker, request, 7)
        answer = response.topics[0].partitions[0]
        return OffsetAnswer(answer.error_code, answer.offset, answer.leader_epoch)

    def log_end_offset(self, broker: int, topic: str, partition: int = 0) -> int:
        """A replica's own log end, asked as a tool does (replica id -2, any replica)."""
        answer = self.list_offsets(broker, topic, partition, replica_id=DEBUGGING_REPLICA_ID)
        assert answer.error == 0, f"log end of {topic}-{partition} on {broker}: {answer}"
        return answer.offset

    def fetch_error(
        self,
        broker: int,
        topic: str,
        partition: int,
        offset: int,
        current_leader_epoch: int,
        version: int = 12,
    ) -> int:
        """The error code a consumer's Fetch (v12 unless told) in ``current_leader_epoch``
        gets; from v11 a follower may answer it (KIP-392)."""
        request = fetch_request(
            topic, offset, partition=partition, current_epoch=current_leader_epoch, min_bytes=0
        )
        response = self.send(broker, request, version)
        return int(response.responses[0].partitions[0].error_code)

    def produce(
        self,
        broker: int,
        topic: str,
        records: list[tuple[bytes, bytes]],
        partition: int = 0,
        acks: int = -1,
        timeout_ms: int = 10_000,
    ) -> tuple[int, int]:
        """A raw Produce v9 of one batch to one broker: (error code, base offset)."""
        request = produce_request(topic, partition, records, acks, timeout_ms)
        return produce_answer(self.send(broker, request, 9))

    def send(self, broker: int, request: Any, version: int) -> Any:
        """One request to one broker on a fresh connection."""
        return asyncio.run(send_request(self.brokers[broker].port, request, version))

    def status(self) -> dict[str, Any]:
        """What `epochlog status --json` prints, run as an operator runs it."""
        result = subprocess.run(
            [*epochlog_command(), "status", "--bootstrap-server", self.live_bootstrap(), "--json"],
            capture_output=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return json.loads(result.stdout)

    def quarantine_list(self, broker: int) -> str:
        """`epochlog quarantine list --log-dirs <broker's log dir>` output."""
        result = subprocess.run(
            [
                *epochlog_command(),
                "quarantine",
                "list",
                "--log-dirs",
                str(self.brokers[broker].log_dir),
            ],
            capture_output=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result.stdout.decode()

    def quarantine_show(self, file: str) -> list[dict[str, Any]]:
        """`epochlog quarantine show FILE`: one JSON line per kept record."""
        result = subprocess.run(
            [*epochlog_command(), "quarantine", "show", file], capture_output=True, timeout=60
        )
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return [json.loads(line) for line in result.stdout.decode().splitlines() if line]

    def controller_epoch(self) -> int:
        async def read() -> int:
            store = await open_metastore(self.metastore, RealClock(), session_timeout_ms=3000)
            try:
                data, _ = await store.get("/controller_epoch")
                return int(data)
            finally:
                await store.close()

        return asyncio.run(read())


@dataclass(frozen=True)
class OffsetAnswer:
    error: int
    offset: int
    leader_epoch: int


class BackgroundRequest:
    """One request sent from a thread of its own, so the test can act (SIGCONT a paused
    broker) while it waits; ``result`` is the response or the exception it ended with."""

    def __init__(self, port: int, request: Any, version: int, bound_s: float) -> None:
        self.sent = threading.Event()
        self._outcome: Any = None
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._run(port, request, version, bound_s)), daemon=True
        )
        self._thread.start()
        assert self.sent.wait(30), "the request was not sent"

    async def _run(self, port: int, request: Any, version: int, bound_s: float) -> None:
        conn = await BrokerConnection.open(SocketNetwork(), "127.0.0.1", port)
        try:
            answer = asyncio.ensure_future(conn.send(request, version))
            await asyncio.sleep(0.2)  # the request is in the broker's socket by now
            self.sent.set()
            self._outcome = await asyncio.wait_for(answer, bound_s)
        except Exception as exc:  # noqa: BLE001 - handed to the test thread
            self._outcome = exc
        finally:
            self.sent.set()
            await conn.close()

    def result(self, timeout: float = 60.0) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "no outcome for the background request"
        return self._outcome


def produce_request(
    topic: str, partition: int, records: list[tuple[bytes, bytes]], acks: int, timeout_ms: int
) -> Any:
    """A raw Produce (no producer id) of one batch of (key, value) records."""
    batch = build_batch([(k, v, [], None) for k, v in records], now_ms=int(time.time() * 1000))
    return raw_produce_request(topic, batch, partition, acks, timeout_ms)


def produce_answer(response: Any) -> tuple[int, int]:
    """(error code, base offset) of a one-partition Produce response."""
    answer = response.responses[0].partition_responses[0]
    return int(answer.error_code), int(answer.base_offset)


async def _metadata(port: int, topic: str) -> dict[str, Any]:
    response = await send_request(
        port,
        MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic, topic_id=None)],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
        12,
    )
    (entry,) = response.topics
    return {
        "error": entry.error_code,
        "topic_id": entry.topic_id,
        "controller": response.controller_id,
        "partitions": [
            PartitionView(
                p.partition_index,
                p.leader_id,
                p.leader_epoch,
                list(p.isr_nodes),
                list(p.offline_replicas),
                list(p.replica_nodes),
            )
            for p in sorted(entry.partitions, key=lambda p: p.partition_index)
        ],
    }


@dataclass(frozen=True)
class PartitionView:
    index: int
    leader: int
    leader_epoch: int
    isr: list[int]
    offline: list[int]
    replicas: list[int]


async def _cluster(port: int) -> tuple[int, set[int]]:
    """(controller id, registered broker ids) as one broker answers Metadata."""
    response = await send_request(
        port,
        MetadataRequest(
            topics=[], allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
        12,
    )
    return response.controller_id, {b.node_id for b in response.brokers}


@contextmanager
def running_cluster(
    base: Path, metastore: str, size: int = 3, log_dirs: int = 1, **settings: str
) -> Iterator[Cluster]:
    with Cluster(
        base, metastore, size, {k: str(v) for k, v in settings.items()}, log_dirs
    ) as cluster:
        yield cluster


def eventually(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    wait_until(predicate, timeout, what, interval=0.1)


__all__ = [
    "BackgroundRequest",
    "Cluster",
    "OffsetAnswer",
    "eventually",
    "json",
    "produce_answer",
    "produce_request",
    "running_cluster",
    "send_request",
    "time",
]
