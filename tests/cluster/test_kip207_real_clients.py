"""KIP-207 end to end: confluent-kafka, kafka-python and epochlog's client each ask a
just-elected leader for the latest offset, are answered OFFSET_NOT_AVAILABLE, retry by
their own rules, and settle on the new epoch's start, never on less than an offset
returned before the election.

The election is test_kip207_list_offsets's: a paused ISR member holds the high watermark
back while acks=1 records reach the successor, whose epoch then starts above the high
watermark it knows. Each client runs in a process of its own (kip207_client.py) and
asks once before the election (the old leader's high watermark). After it they
ask one at a time: a client is frozen (SIGSTOP) once the leader's OFFSET_NOT_AVAILABLE
count has grown by two since it asked (it was refused and asked again), so each count is
one client's. Then the paused member resumes, the clients are thawed, and each answers
with what its retries reached."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
from pathlib import Path

from cluster_harness import Cluster, OffsetAnswer, eventually

from support.metrics import scrape

TOPIC = "kip207-clients"
OFFSET_NOT_AVAILABLE = 78
NOT_LEADER_OR_FOLLOWER = 6
REFUSED = "epochlog_offset_not_available_total"
ANSWERED = "kafka_network_requestmetrics_errors_total"
FIRST = [(b"first-%d" % i, b"v") for i in range(5)]
SECOND = [(b"second-%d" % i, b"v") for i in range(5)]
CLIENTS = ("confluent-kafka", "kafka-python", "epochlog")
SETTINGS = {
    # The paused follower must stay in the ISR (and registered) while three clients ask.
    "replica.lag.time.max.ms": "30000",
    "zookeeper.session.timeout.ms": "30000",
}


class ClientProcess:
    """kip207_client.py for one client: made before the election, asked on a line."""

    def __init__(self, client: str, bootstrap: str, log_dir: Path) -> None:
        self.client = client
        self.log = log_dir / f"{client}.log"
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("kip207_client.py"))]
            + [client, bootstrap, TOPIC],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log.open("w"),
            text=True,
        )
        assert self.line() == "ready", client

    def line(self, timeout: float = 60) -> str:
        """The client's next line; a client silent for ``timeout`` fails the test."""
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"{self.client} said nothing for {timeout}s:\n{self.tail()}"
        return self.proc.stdout.readline().strip()

    def ask(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def answer(self) -> int:
        found = self.line()
        assert found.startswith("offset "), (self.client, found, self.tail())
        return int(found.split()[1])

    def tail(self) -> str:
        return "\n".join(self.log.read_text().splitlines()[-30:])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait(30)


def test_three_clients_retry_offset_not_available_to_the_new_epochs_start(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", 3, SETTINGS)
    ports = cluster.serve_metrics()
    clients: list[ClientProcess] = []
    with cluster:
        try:
            # As in test_kip207_list_offsets: the controller succeeds (a controlled shutdown
            # hands leadership to the first other ISR member), the paused one is neither.
            successor = cluster.controller_id()
            old_leader, paused = [b for b in range(3) if b != successor]
            # Partition 1, led by the successor throughout, only gives each client a
            # connection to it, as a client long at work has.
            cluster.create_topic(
                TOPIC, assignment=[[old_leader, successor, paused], [successor, old_leader, paused]]
            )
            assert cluster.produce(old_leader, TOPIC, FIRST) == (0, 0)
            before = cluster.list_offsets(old_leader, TOPIC)
            assert before.offset == len(FIRST)
            clients = [ClientProcess(name, cluster.bootstrap, tmp_path) for name in CLIENTS]
            for client in clients:
                client.ask()
                assert client.answer() == len(FIRST), client.client

            cluster.pause(paused)
            assert cluster.produce(old_leader, TOPIC, SECOND, acks=1) == (0, len(FIRST))
            end = len(FIRST) + len(SECOND)
            eventually(
                lambda: cluster.log_end_offset(successor, TOPIC) == end,
                30,
                "the successor to copy the acks=1 records",
            )
            cluster.brokers[old_leader].stop()
            eventually(
                lambda: cluster.list_offsets(successor, TOPIC).error != NOT_LEADER_OR_FOLLOWER,
                30,
                "the successor to act as leader",
            )
            new_epoch = cluster.metadata(TOPIC, via=successor)["partitions"][0].leader_epoch
            assert cluster.list_offsets(successor, TOPIC).error == OFFSET_NOT_AVAILABLE

            refused = {}
            for client in clients:
                counted = scrape(ports[successor]).total(REFUSED)
                client.ask()
                eventually(
                    lambda c=counted: scrape(ports[successor]).total(REFUSED) >= c + 2,
                    20,
                    f"{client.client} to be refused and ask again",
                )
                client.proc.send_signal(signal.SIGSTOP)
                assert client.proc.poll() is None, f"{client.client} gave up:\n{client.tail()}"
                refused[client.client] = scrape(ports[successor]).total(REFUSED) - counted

            cluster.resume(paused)
            eventually(
                lambda: cluster.list_offsets(successor, TOPIC) == OffsetAnswer(0, end, new_epoch),
                30,
                "the new leader's high watermark to reach its epoch's start",
            )
            # Thawed one by one, nothing produced meanwhile, so each answer is exact.
            answers = {}
            for client in clients[1:]:
                client.proc.send_signal(signal.SIGCONT)
                answers[client.client] = client.answer()
            # confluent-kafka's answer is the offset its reset settles on: the first record it
            # returns, produced once the successor has answered its retried ListOffsets.
            confluent = clients[0]
            answered = scrape(ports[successor]).total(ANSWERED, request="ListOffsets", error="NONE")
            confluent.proc.send_signal(signal.SIGCONT)
            eventually(
                lambda: (
                    scrape(ports[successor]).total(ANSWERED, request="ListOffsets", error="NONE")
                    > answered
                ),
                30,
                "confluent-kafka's offset reset to be answered",
            )
            assert cluster.produce(successor, TOPIC, [(b"third", b"v")]) == (0, end)
            answers[confluent.client] = confluent.answer()
            # Never below each client's own answer before the election (5): each settled on
            # the new epoch's start.
            assert answers == dict.fromkeys(CLIENTS, end), (answers, refused)
        finally:
            for client in clients:
                client.close()
