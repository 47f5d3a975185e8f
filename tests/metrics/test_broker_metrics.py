"""A broker's /metrics against in-process state: one broker on a real socket whose
produce, fetch, fenced reads and group commits must show in the scrape exactly; and the
counts the collector renders, at the places they are kept."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

from kafka.protocol.consumer import ListOffsetsRequest, OffsetCommitRequest
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse
from kafka.protocol.producer import ProduceResponse

from broker.inprocess_broker import batch, connect, produce, run, running_broker
from epochlog.broker.broker import Broker
from epochlog.client.connection import BrokerConnection
from epochlog.metadata import layout
from epochlog.metadata.layout import TopicNode
from epochlog.metadata.model import PartitionState
from epochlog.protocol.error_codes import error_codes
from epochlog.protocol.errors import ErrorCode
from epochlog.replication.partition import Partition
from epochlog.seams.real import OsDisk, RealClock
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log
from support.metrics import Samples, http_get, scrape_async
from support.requests import fetch_request

TOPIC = "t"
# A counter's, summary's or histogram's samples add these to the family's name.
SAMPLE_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("_count", "_sum"),
}
DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "epochlog.json"
SETTINGS = {
    "metrics_listener": "http://127.0.0.1:0",
    "offsets.topic.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
}


def list_offsets_request(current_leader_epoch: int) -> Any:
    partition = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
        partition_index=0, current_leader_epoch=current_leader_epoch, timestamp=-1
    )
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[partition])],
    )


async def topic_with_records(broker: Broker, conn: BrokerConnection, data: bytes) -> None:
    await broker.create_topic(TOPIC, 1, 1, {})
    answer = await produce(conn, TOPIC, data)
    assert (answer.error_code, answer.base_offset) == (0, 0)


def test_produce_fetch_and_fenced_reads_show_in_the_scrape_exactly(tmp_path: Path) -> None:
    data = batch([b"value-%d" % i for i in range(5)])

    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            assert broker.metrics_port
            before = await scrape_async(broker.metrics_port)
            assert before.value("kafka_controller_kafkacontroller_activecontrollercount") == 1
            assert before.total("kafka_server_brokertopicmetrics_messagesin_total") == 0
            conn = await connect(broker)
            await topic_with_records(broker, conn, data)
            fetched = await conn.send(fetch_request(TOPIC, 0, min_bytes=0), 12)
            assert len(fetched.responses[0].partitions[0].records) == len(data)
            fenced = await conn.send(fetch_request(TOPIC, 0, current_epoch=3, min_bytes=0), 12)
            assert fenced.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
            listed = await conn.send(list_offsets_request(current_leader_epoch=3), 7)
            assert listed.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH

            s = await scrape_async(broker.metrics_port)
            topic = {"topic": TOPIC}
            partition = {"topic": TOPIC, "partition": "0"}
            assert s.value("kafka_server_brokertopicmetrics_messagesin_total", **topic) == 5
            assert s.value("kafka_server_brokertopicmetrics_bytesin_total", **topic) == len(data)
            assert s.value("kafka_server_brokertopicmetrics_bytesout_total", **topic) == len(data)
            assert s.value("epochlog_topic_messages_out_total", **topic) == 5
            assert s.value("kafka_log_log_logendoffset", **partition) == 5
            assert s.value("kafka_log_log_logstartoffset", **partition) == 0
            assert s.value("kafka_log_log_size", **partition) == len(data)
            assert s.value("epochlog_partition_leader_epoch", **partition) == 0
            assert s.value("epochlog_quarantine_size_bytes", **partition) == 0
            assert s.value("epochlog_log_truncations_total", **partition) == 0
            assert s.value("kafka_server_replicamanager_partitioncount") == 1
            assert s.value("kafka_server_replicamanager_leadercount") == 1
            assert s.value("kafka_server_replicamanager_underreplicatedpartitions") == 0
            assert s.value("kafka_controller_kafkacontroller_offlinepartitionscount") == 0
            assert (
                s.value("kafka_controller_controllerstats_leaderelectionrateandtimems_count") == 1
            )
            assert s.value("kafka_controller_controllerstats_uncleanleaderelections_total") == 0
            assert s.value("kafka_server_socketservermetrics_connection_count") == 1
            requests = "kafka_network_requestmetrics_requests_total"
            assert s.value(requests, request="Produce", version="9") == 1
            assert s.value(requests, request="Fetch", version="12") == 2
            assert s.value(requests, request="FetchConsumer", version="12") == 2
            assert s.total(requests, request="FetchFollower") == 0
            assert s.value(requests, request="ListOffsets", version="7") == 1
            time_count = "kafka_network_requestmetrics_totaltimems_count"
            assert s.value(time_count, request="Fetch", version="12") == 2
            assert s.value(time_count, request="Produce", version="9") == 1
            assert s.types["kafka_network_requestmetrics_totaltimems"] == "histogram"
            errors = "kafka_network_requestmetrics_errors_total"
            assert s.value(errors, request="Produce", error="NONE") == 1
            # Fetch v12 counts its top-level error with each partition's, as Kafka does.
            assert s.value(errors, request="Fetch", error="NONE") == 3
            assert s.value(errors, request="Fetch", error="UNKNOWN_LEADER_EPOCH") == 1
            assert s.total(errors, request="FetchConsumer") == 0  # errors: by API only
            fenced_total = "epochlog_fenced_requests_total"
            assert s.value(fenced_total, request="Fetch", error="UNKNOWN_LEADER_EPOCH") == 1
            assert s.value(fenced_total, request="ListOffsets", error="UNKNOWN_LEADER_EPOCH") == 1
            assert s.total("epochlog_offset_not_available_total") == 0
            assert s.value("epochlog_stale_metadata_refusals_total") == 0
            await conn.close()

    run(scenario)


def test_group_state_and_committed_offset_lag(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            assert broker.metrics_port
            conn = await connect(broker)
            await topic_with_records(broker, conn, batch([b"v"] * 5))
            found = await conn.send(FindCoordinatorRequest(key="g", key_type=0), 3)
            assert found.error_code == 0
            commit = OffsetCommitRequest(
                group_id="g",
                generation_id_or_member_epoch=-1,
                member_id="",
                retention_time_ms=-1,
                topics=[
                    OffsetCommitRequest.OffsetCommitRequestTopic(
                        name=TOPIC,
                        partitions=[
                            OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                                partition_index=0,
                                committed_offset=2,
                                committed_leader_epoch=0,
                                committed_metadata="",
                            )
                        ],
                    )
                ],
            )
            for _ in range(100):  # the offsets partition loads after its creation
                answer = await conn.send(commit, 8)
                code = answer.topics[0].partitions[0].error_code
                if code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    break
                await broker.seams.clock.sleep(0.05)
            assert code == 0
            s = await scrape_async(broker.metrics_port)
            assert s.value("epochlog_group_state", group="g", state="Empty") == 1
            assert s.value("epochlog_group_members", group="g") == 0
            lag = "epochlog_group_committed_offset_lag"
            assert s.value(lag, group="g", topic=TOPIC, partition="0") == 3
            assert s.value("epochlog_group_offsets_expired_total") == 0
            # Every metric the Grafana dashboard queries is one this broker serves.
            # (Sample names: a counter's ends in _total, a gauge's is the family's own.)
            served = {
                family + suffix
                for family, kind in s.types.items()
                for suffix in SAMPLE_SUFFIXES.get(kind, ("",))
            }
            assert dashboard_metrics() - served == set()
            await conn.close()

    run(scenario)


def test_offset_not_available_answers_are_counted(tmp_path: Path) -> None:
    """KIP-207's hold: a leader in a new epoch whose high watermark is below that
    epoch's start (its follower has fetched nothing) answers clients so."""

    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            assert broker.metrics_port
            await broker.create_topic(TOPIC, 1, 1, {})
            partition = broker.replica_manager.partition(TOPIC, 0)
            for epoch in (1, 2):
                # As the cluster would have it: a second replica, in the ISR, silent.
                partition.become_leader(PartitionState(0, epoch, [0, 1], [0, 1]))
                if epoch == 1:
                    conn = await connect(broker)
                    answer = await produce(conn, TOPIC, batch([b"v"] * 5), acks=1)
                    assert (answer.error_code, partition.high_watermark) == (0, 0)
            listed = await conn.send(list_offsets_request(current_leader_epoch=-1), 7)
            assert listed.topics[0].partitions[0].error_code == ErrorCode.OFFSET_NOT_AVAILABLE
            s = await scrape_async(broker.metrics_port)
            assert s.value("epochlog_offset_not_available_total", request="ListOffsets") == 1
            errors = "kafka_network_requestmetrics_errors_total"
            assert s.value(errors, request="ListOffsets", error="OFFSET_NOT_AVAILABLE") == 1
            await conn.close()

    run(scenario)


def test_a_topic_state_from_a_deposed_controller_is_refused_and_counted(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            assert broker.metrics_port and broker.store
            await broker.create_topic(TOPIC, 1, 1, {})
            path = layout.topic_path(TOPIC)
            data, stat = await broker.store.get(path)
            node = TopicNode.decode(TOPIC, data)
            assert node.controller_epoch >= 1
            stale = TopicNode(node.topic, node.controller_epoch - 1)
            await broker.store.set(path, stale.encode(), version=stat.version)
            refusals = "epochlog_stale_metadata_refusals_total"
            for _ in range(200):  # the broker reads the node when its watch fires
                s = await scrape_async(broker.metrics_port)
                if s.value(refusals) > 0:
                    break
                await broker.seams.clock.sleep(0.05)
            assert s.value(refusals) == 1

    run(scenario)


def dashboard_metrics() -> set[str]:
    """The metrics the dashboard's queries name."""
    exprs = [
        target["expr"]
        for panel in json.loads(DASHBOARD.read_text())["panels"]
        for target in panel.get("targets", [])
    ]
    names = {n for e in exprs for n in re.findall(r"\b(?:kafka|epochlog)_\w+", e)}
    assert len(names) > 20, names
    return names


def test_the_endpoint_keeps_connections_alive_and_serves_only_metrics(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, **SETTINGS) as broker:
            assert broker.metrics_port
            first, second = await http_get(broker.metrics_port, requests=2)
            for status, headers, body in (first, second):
                assert status == 200
                assert headers["connection"] == "keep-alive"
                assert Samples(body.decode()).value("kafka_server_replicamanager_leadercount") == 0
            ((status, _, _),) = await http_get(broker.metrics_port, "/other")
            assert status == 404

    run(scenario)


def test_a_partition_counts_each_truncation_with_its_offsets_and_bytes(tmp_path: Path) -> None:
    log = Log.open(OsDisk(), RealClock(), str(tmp_path / "t-0"), "t", 0, LogConfig())
    state = PartitionState(1, 0, [0, 1], [0, 1])
    partition = Partition("t", 0, uuid.uuid4(), log, state, local_broker_id=0)
    sizes = []
    for n in (3, 4):
        records = bytearray(batch([b"x%d" % i for i in range(n)]))
        sizes.append(len(records))
        log.append_as_leader(records, leader_epoch=0)
    assert log.quarantine.size_bytes() == 0
    assert partition.truncate_to(3, "diverged") is not None
    assert partition.truncate_to(5, "beyond the end") is None
    assert (partition.truncations, partition.truncated_records) == (1, 4)
    assert partition.truncated_bytes == sizes[1] == log.quarantine.size_bytes()
    partition.truncate_fully_and_start_at(10, "behind the leader's log start")
    assert (partition.truncations, partition.truncated_records) == (2, 7)
    assert partition.truncated_bytes == sum(sizes) == log.quarantine.size_bytes()
    log.close()
    # A broker started again sums what its quarantine already holds.
    again = Log.open(OsDisk(), RealClock(), str(tmp_path / "t-0"), "t", 0, LogConfig())
    assert again.quarantine.size_bytes() == sum(sizes)
    again.close()


def test_error_codes_are_found_at_every_level_of_an_answer() -> None:
    partition = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
    answer = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name=name,
                partition_responses=[
                    partition(index=i, error_code=code, base_offset=-1, record_errors=[])
                    for i, code in enumerate(codes)
                ],
            )
            for name, codes in (("a", [0, 6]), ("b", [74]))
        ],
        throttle_time_ms=0,
    )
    assert list(error_codes(answer, 9)) == [0, 6, 74]
    # FindCoordinator has one top-level error up to v3, one per key from v4 on.
    old = FindCoordinatorResponse(error_code=15, node_id=-1, host="", port=-1)
    assert list(error_codes(old, 3)) == [15]
    coordinator = FindCoordinatorResponse.Coordinator
    new = FindCoordinatorResponse(
        coordinators=[
            coordinator(key="g", node_id=1, host="h", port=1, error_code=0),
            coordinator(key="h", node_id=-1, host="", port=-1, error_code=15),
        ]
    )
    assert list(error_codes(new, 4)) == [0, 15]
