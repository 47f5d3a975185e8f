"""/metrics of real broker processes through a produce, a consumer's fetch, a leader
kill and an unclean election: the counters move by exactly what happened (records in,
bytes out, the ISR shrink, one unclean election, a partition offline while its
replicas are down and then elected cleanly, a fetch in the old epoch fenced, the
diverged range truncated into quarantine on each returning replica), and every scrape,
taken all along from a thread of its own, parses with prometheus_client's parser."""

from __future__ import annotations

import threading
from pathlib import Path

from cluster_harness import Cluster, eventually

from support.metrics import Samples, scrape

TOPIC = "scraped"
FIRST = [(b"first-%d" % i, b"on every replica") for i in range(5)]
LOST = [(b"lost-%d" % i, b"only on the old ISR") for i in range(5)]
NEW = [(b"new-%d" % i, b"on the unclean leader") for i in range(3)]
DIVERGENCE = len(FIRST)
OLD_END = len(FIRST) + len(LOST)
# As in test_unclean_election: the paused replica stays registered while it is paused.
SETTINGS = {"zookeeper.session.timeout.ms": "30000"}
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
UNCLEAN = "kafka_controller_controllerstats_uncleanleaderelections_total"
ELECTIONS = "kafka_controller_controllerstats_leaderelectionrateandtimems_count"
OFFLINE = "kafka_controller_kafkacontroller_offlinepartitionscount"
FENCED = "epochlog_fenced_requests_total"
# Led by the two replicas that die, without unclean election: offline until they return.
CLEAN_ONLY = "clean-only"
PARTITION = {"topic": TOPIC, "partition": "0"}


class Scraper:
    """Scrapes every running, unpaused broker over and over until stopped. A broker
    may die or stop between the check and the GET (OSError); output that does not
    parse is a failure."""

    def __init__(self, cluster: Cluster, ports: dict[int, int]) -> None:
        self.cluster = cluster
        self.ports = ports
        self.scrapes = 0
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            for broker in self.cluster.responsive():
                try:
                    scrape(self.ports[broker.broker_id])
                    self.scrapes += 1
                except OSError:
                    continue
                except Exception as exc:  # noqa: BLE001 - reported by the test
                    self.failures.append(f"broker {broker.broker_id}: {exc!r}")

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def test_metrics_move_as_a_produce_fetch_leader_kill_and_unclean_election_happen(
    tmp_path: Path,
) -> None:
    cluster = Cluster(tmp_path, f"sqlite://{tmp_path}/metastore.db", 3, SETTINGS)
    ports = cluster.serve_metrics()

    def metrics(broker: int) -> Samples:
        return scrape(ports[broker])

    with cluster:
        scraper = Scraper(cluster, ports)
        controller = cluster.controller_id()
        leader, lagging = [b for b in range(3) if b != controller]
        other = controller
        assert (
            metrics(controller).value("kafka_controller_kafkacontroller_activecontrollercount") == 1
        )
        assert metrics(leader).value("kafka_controller_kafkacontroller_activecontrollercount") == 0
        cluster.create_topic(
            TOPIC,
            assignment=[[leader, other, lagging]],
            unclean_leader_election_enable="true",
            min_insync_replicas="1",
        )
        cluster.create_topic(CLEAN_ONLY, assignment=[[leader, other]])
        _, old_epoch = cluster.leader(TOPIC)
        assert metrics(leader).value("epochlog_partition_leader_epoch", **PARTITION) == old_epoch

        # Produce: records in rise by exactly what was appended, on the leader only.
        assert cluster.produce(leader, TOPIC, FIRST) == (0, 0)
        eventually(
            lambda: cluster.log_end_offset(lagging, TOPIC) == len(FIRST),
            30,
            "every replica to hold the first records",
        )
        on_leader = metrics(leader)
        assert on_leader.value(MESSAGES_IN, topic=TOPIC) == len(FIRST)
        for b in (other, lagging):
            assert metrics(b).total(MESSAGES_IN, topic=TOPIC) == 0
            assert metrics(b).value("kafka_log_log_logendoffset", **PARTITION) == len(FIRST)

        # A consumer's fetch of the whole log (committed once the followers' next fetches
        # have told the leader): bytes out rise by the log's size.
        eventually(
            lambda: cluster.list_offsets(leader, TOPIC).offset == len(FIRST),
            30,
            "the high watermark to reach the log end",
        )
        bytes_out = "kafka_server_brokertopicmetrics_bytesout_total"
        log_size = on_leader.value("kafka_log_log_size", **PARTITION)
        assert on_leader.total(bytes_out, topic=TOPIC) == 0
        assert cluster.fetch_error(leader, TOPIC, 0, 0, old_epoch) == 0
        on_leader = metrics(leader)
        assert on_leader.value(bytes_out, topic=TOPIC) == log_size
        assert on_leader.value("epochlog_topic_messages_out_total", topic=TOPIC) == len(FIRST)
        # The followers' fetches are counted apart from the consumer's, as in Kafka.
        requests = "kafka_network_requestmetrics_requests_total"
        assert on_leader.value(requests, request="FetchConsumer", version="12") == 1
        assert on_leader.total(requests, request="FetchFollower") > 0

        # The lagging replica stops: the leader shrinks the ISR, then takes more records.
        shrinks = on_leader.value("kafka_server_replicamanager_isrshrinks_total")
        unclean_before = sum(metrics(b).value(UNCLEAN) for b in range(3))
        assert unclean_before == 0
        cluster.pause(lagging)
        eventually(
            lambda: lagging not in cluster.metadata(TOPIC, via=leader)["partitions"][0].isr,
            60,
            "the paused replica to leave the ISR",
        )
        eventually(
            lambda: (
                metrics(leader).value("kafka_server_replicamanager_underreplicatedpartitions") == 1
            ),
            30,
            "the leader to report the partition under-replicated",
        )
        # At least the lagging replica's removal (on a loaded machine a follower may
        # also fall behind the lag time for a moment and be dropped and taken back).
        assert metrics(leader).value("kafka_server_replicamanager_isrshrinks_total") > shrinks
        assert cluster.produce(leader, TOPIC, LOST) == (0, len(FIRST))
        assert metrics(leader).value(MESSAGES_IN, topic=TOPIC) == OLD_END

        # Every ISR member dies (the leader killed); the lagging replica is elected
        # uncleanly, by itself as the new controller.
        cluster.kill(other)
        cluster.kill(leader)
        cluster.resume(lagging)
        eventually(
            lambda: cluster.metadata(TOPIC, via=lagging)["partitions"][0].leader == lagging,
            120,
            "the lagging replica to be elected uncleanly",
        )
        new_epoch = cluster.metadata(TOPIC, via=lagging)["partitions"][0].leader_epoch
        on_lagging = metrics(lagging)
        assert on_lagging.value(UNCLEAN) == unclean_before + 1
        assert on_lagging.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
        assert on_lagging.value("epochlog_partition_leader_epoch", **PARTITION) == new_epoch
        assert on_lagging.total(MESSAGES_IN, topic=TOPIC) == 0
        eventually(
            lambda: metrics(lagging).value(OFFLINE) == 1,
            30,
            f"the new controller to count {CLEAN_ONLY} offline",
        )
        elections_while_offline = metrics(lagging).value(ELECTIONS)
        assert elections_while_offline >= 1  # the unclean one, at least
        # A read in the old epoch is fenced, and counted as such.
        assert metrics(lagging).total(FENCED, error="FENCED_LEADER_EPOCH") == 0
        assert cluster.fetch_error(lagging, TOPIC, 0, 0, old_epoch) == 74
        assert metrics(lagging).value(FENCED, request="Fetch", error="FENCED_LEADER_EPOCH") == 1
        eventually(
            lambda: cluster.list_offsets(lagging, TOPIC).error == 0,
            30,
            "the unclean leader to serve offsets",
        )
        assert cluster.produce(lagging, TOPIC, NEW) == (0, DIVERGENCE)
        assert metrics(lagging).value(MESSAGES_IN, topic=TOPIC) == len(NEW)

        # The old replicas return and truncate the diverged range into quarantine.
        cluster.brokers[other].restart()
        cluster.brokers[leader].restart()
        new_end = DIVERGENCE + len(NEW)
        for b in (leader, other):
            eventually(
                lambda b=b: cluster.log_end_offset(b, TOPIC) == new_end,
                60,
                f"broker {b} to follow the unclean leader",
            )
            (kept,) = cluster.quarantined(b, TOPIC)
            returned = metrics(b)
            assert returned.value("epochlog_log_truncations_total", **PARTITION) == 1
            assert (
                returned.value("epochlog_log_truncated_records_total", **PARTITION)
                == OLD_END - DIVERGENCE
            )
            assert returned.value("epochlog_log_truncated_bytes_total", **PARTITION) == kept["size"]
            quarantined = returned.value("epochlog_quarantine_size_bytes", **PARTITION)
            assert quarantined == kept["size"] > 0
            assert returned.value("epochlog_partition_leader_epoch", **PARTITION) == new_epoch
        on_lagging = metrics(lagging)
        assert on_lagging.value("epochlog_log_truncations_total", **PARTITION) == 0
        assert on_lagging.value("epochlog_quarantine_size_bytes", **PARTITION) == 0
        eventually(
            lambda: sorted(cluster.metadata(TOPIC)["partitions"][0].isr) == [0, 1, 2],
            60,
            "the returning replicas to rejoin the ISR",
        )
        eventually(
            lambda: (
                metrics(lagging).value("kafka_server_replicamanager_underreplicatedpartitions") == 0
            ),
            30,
            "the new leader to report the partition fully replicated",
        )
        assert metrics(lagging).value("kafka_server_replicamanager_isrexpands_total") >= 1
        # The replicas of the offline partition are back: it is elected cleanly.
        eventually(lambda: metrics(lagging).value(OFFLINE) == 0, 60, f"{CLEAN_ONLY} online")
        back = metrics(lagging)
        assert back.value(ELECTIONS) > elections_while_offline
        assert back.value(UNCLEAN) == unclean_before + 1
        scraper.stop()
        assert scraper.failures == []
        assert scraper.scrapes > 0
