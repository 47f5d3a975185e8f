"""Request handling of one in-process broker, spoken to over a real loopback socket."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from inprocess_broker import (
    batch,
    connect,
    create_topic_via_metadata,
    delete_topic,
    produce,
    run,
    running_broker,
)
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import (
    ListOffsetsRequest,
    OffsetForLeaderEpochRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.producer import InitProducerIdRequest

from epochlog.broker.handlers import SUPPORTED
from epochlog.protocol.errors import ErrorCode
from epochlog.protocol.records import iter_records
from epochlog.settings.topic import NO_EFFECT, TOPIC
from support.requests import fetch_request, produce_request


def list_offsets_request(topic: str, timestamp: int, current_epoch: int = -1) -> ListOffsetsRequest:
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name=topic,
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=current_epoch, timestamp=timestamp
                    )
                ],
            )
        ],
    )


def test_api_versions_advertises_exactly_the_implemented_table(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            response = await conn.send(
                ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
            )
            advertised = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
            assert advertised == {s.key: (s.min_version, s.max_version) for s in SUPPORTED.values()}
            await conn.close()

    run(scenario)


def test_produce_then_fetch_returns_batches_with_offsets_and_leader_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            meta = await create_topic_via_metadata(conn, "t")
            (topic,) = meta.topics
            assert topic.error_code == 0 and topic.partitions[0].leader_epoch == 0
            first = await produce(conn, "t", batch([b"a", b"b"]))
            second = await produce(conn, "t", batch([b"c"]))
            assert (first.error_code, first.base_offset) == (0, 0)
            assert (second.error_code, second.base_offset) == (0, 2)
            response = await conn.send(fetch_request("t", 0), 12)
            part = response.responses[0].partitions[0]
            assert part.error_code == 0 and part.high_watermark == 3
            records = bytes(part.records)
            values = []
            pos = 0
            while pos < len(records):
                size = int.from_bytes(records[pos + 8 : pos + 12], "big") + 12
                assert int.from_bytes(records[pos + 12 : pos + 16], "big", signed=True) == 0
                values += [(r.offset, r.value) for r in iter_records(records[pos : pos + size])]
                pos += size
            assert values == [(0, b"a"), (1, b"b"), (2, b"c")]
            await conn.close()

    run(scenario)


def test_fetch_fences_older_and_newer_current_leader_epochs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            await produce(conn, "t", batch([b"a"]))
            broker.replica_manager.partition("t", 0).become_leader(
                broker.replica_manager.partition("t", 0).state.__class__(
                    leader=0, leader_epoch=3, replicas=[0], isr=[0]
                )
            )
            codes = {}
            for epoch in (-1, 2, 3, 4):
                response = await conn.send(fetch_request("t", 0, current_epoch=epoch), 12)
                codes[epoch] = response.responses[0].partitions[0].error_code
            assert codes == {
                -1: 0,
                2: ErrorCode.FENCED_LEADER_EPOCH,
                3: 0,
                4: ErrorCode.UNKNOWN_LEADER_EPOCH,
            }
            await conn.close()

    run(scenario)


def test_fetch_v12_reports_diverging_epoch_from_last_fetched_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            await produce(conn, "t", batch([b"a", b"b"]))  # epoch 0: offsets 0-1
            partition = broker.replica_manager.partition("t", 0)
            partition.become_leader(
                partition.state.__class__(leader=0, leader_epoch=2, replicas=[0], isr=[0])
            )
            await produce(conn, "t", batch([b"c"]))  # epoch 2: offset 2
            # A reader that saw epoch 1 up to offset 3 diverged: epoch 1 never existed here.
            response = await conn.send(fetch_request("t", 3, last_epoch=1), 12)
            part = response.responses[0].partitions[0]
            assert part.error_code == 0
            assert (part.diverging_epoch.epoch, part.diverging_epoch.end_offset) == (0, 2)
            assert not part.records
            # A reader consistent with the log reads on.
            response = await conn.send(fetch_request("t", 2, last_epoch=0), 12)
            part = response.responses[0].partitions[0]
            assert part.diverging_epoch is None and part.records
            await conn.close()

    run(scenario)


def test_list_offsets_earliest_latest_timestamp_and_max(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            await produce(conn, "t", batch([b"a", b"b", b"c"], timestamp=1000))
            answers = {}
            for ts in (-2, -1, 1001, -3, 5000):
                response = await conn.send(list_offsets_request("t", ts), 7)
                p = response.topics[0].partitions[0]
                answers[ts] = (p.error_code, p.offset, p.timestamp, p.leader_epoch)
            assert answers == {
                -2: (0, 0, -1, 0),
                -1: (0, 3, -1, 0),
                1001: (0, 1, 1001, 0),
                -3: (0, 2, 1002, 0),
                5000: (0, -1, -1, -1),
            }
            fenced = await conn.send(list_offsets_request("t", -1, current_epoch=5), 7)
            assert fenced.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
            await conn.close()

    run(scenario)


def test_offset_for_leader_epoch_answers_from_epoch_cache(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            await produce(conn, "t", batch([b"a", b"b"]))
            partition = broker.replica_manager.partition("t", 0)
            partition.become_leader(
                partition.state.__class__(leader=0, leader_epoch=1, replicas=[0], isr=[0])
            )
            await produce(conn, "t", batch([b"c"]))

            def request(epoch: int) -> OffsetForLeaderEpochRequest:
                return OffsetForLeaderEpochRequest(
                    replica_id=-1,
                    topics=[
                        OffsetForLeaderEpochRequest.OffsetForLeaderTopic(
                            topic="t",
                            partitions=[
                                OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
                                    partition=0, current_leader_epoch=1, leader_epoch=epoch
                                )
                            ],
                        )
                    ],
                )

            answers = {}
            for epoch in (0, 1):
                for version in (2, 3, 4):
                    response = await conn.send(request(epoch), version)
                    p = response.topics[0].partitions[0]
                    answers[(epoch, version)] = (p.error_code, p.leader_epoch, p.end_offset)
            assert {a for (e, _), a in answers.items() if e == 0} == {(0, 0, 2)}
            assert {a for (e, _), a in answers.items() if e == 1} == {(0, 1, 3)}
            await conn.close()

    run(scenario)


def test_recreated_topic_gets_a_new_topic_id(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)

            def create() -> CreateTopicsRequest:
                return CreateTopicsRequest(
                    topics=[
                        CreateTopicsRequest.CreatableTopic(
                            name="t",
                            num_partitions=2,
                            replication_factor=1,
                            assignments=[],
                            configs=[],
                        )
                    ],
                    timeout_ms=5000,
                    validate_only=False,
                )

            first = (await conn.send(create(), 7)).topics[0]
            again = (await conn.send(create(), 7)).topics[0]
            assert first.error_code == 0 and again.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            assert await delete_topic(conn, "t") == 0
            second = (await conn.send(create(), 7)).topics[0]
            assert second.error_code == 0 and second.topic_id != first.topic_id
            await conn.close()

    run(scenario)


def test_create_topics_v5_answers_with_every_setting_and_its_source(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path, log_retention_hours="1") as broker:
            conn = await connect(broker)
            wanted = CreateTopicsRequest.CreatableTopic(
                name="t",
                num_partitions=1,
                replication_factor=1,
                assignments=[],
                configs=[
                    CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
                        name="compression.type", value="gzip"
                    )
                ],
            )
            request = CreateTopicsRequest(topics=[wanted], timeout_ms=5000, validate_only=True)
            (answer,) = (await conn.send(request, 5)).topics
            found = {c.name: (c.value, c.config_source) for c in answer.configs}
            assert answer.error_code == 0 and set(found) == {s.name for s in TOPIC}
            assert found["compression.type"] == ("gzip", 1)  # the topic's own
            assert found["retention.ms"] == ("3600000", 4)  # the broker's file
            assert found["preallocate"] == ("false", 5)  # the default
            (older,) = (await conn.send(request, 4)).topics
            assert older.error_code == 0 and not older.configs
            await conn.close()

    run(scenario)


async def topic_and_producer_id(conn: Any) -> tuple[int, int]:
    """Topic "t" created, and an idempotent producer's id and epoch."""
    await create_topic_via_metadata(conn, "t")
    init = await conn.send(
        InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4
    )
    return init.producer_id, init.producer_epoch


def test_idempotent_retry_is_acknowledged_once_and_stored_once(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            pid, epoch = await topic_and_producer_id(conn)
            first = batch([b"a", b"b"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
            a = await produce(conn, "t", first)
            retry = await produce(conn, "t", first)
            gap = await produce(
                conn, "t", batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=5)
            )
            assert (a.error_code, a.base_offset) == (0, 0)
            assert (retry.error_code, retry.base_offset) == (0, 0)
            assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert broker.replica_manager.partition("t", 0).log.log_end_offset == 2
            await conn.close()

    run(scenario)


def test_incremental_alter_configs_changes_one_topic_setting(tmp_path: Path) -> None:
    from kafka.protocol.admin import DescribeConfigsRequest, IncrementalAlterConfigsRequest

    def alter(name: str, value: str) -> IncrementalAlterConfigsRequest:
        return IncrementalAlterConfigsRequest(
            resources=[
                IncrementalAlterConfigsRequest.AlterConfigsResource(
                    resource_type=2,
                    resource_name="t",
                    configs=[
                        IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
                            name=name, config_operation=0, value=value
                        )
                    ],
                )
            ],
            validate_only=False,
        )

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            ok = await conn.send(alter("unclean.leader.election.enable", "true"), 1)
            bad = await conn.send(alter("retention.ms", "soon"), 1)
            assert ok.responses[0].error_code == 0
            assert bad.responses[0].error_code == ErrorCode.INVALID_CONFIG
            # The registry's message, as everywhere else.
            assert bad.responses[0].error_message == "retention.ms: expected an integer, got 'soon'"
            described = await conn.send(
                DescribeConfigsRequest(
                    resources=[
                        DescribeConfigsRequest.DescribeConfigsResource(
                            resource_type=2,
                            resource_name="t",
                            configuration_keys=["unclean.leader.election.enable", "retention.ms"],
                        )
                    ],
                    include_synonyms=False,
                    include_documentation=False,
                ),
                4,
            )
            values = {c.name: (c.value, c.config_source) for c in described.results[0].configs}
            assert values == {
                "unclean.leader.election.enable": ("true", 1),
                "retention.ms": ("604800000", 5),
            }
            await conn.close()

    run(scenario)


def test_describe_configs_reports_every_setting_with_its_source_type_and_documentation(
    tmp_path: Path,
) -> None:
    from kafka.protocol.admin import DescribeConfigsRequest

    def describe(resource_type: int, name: str, keys: list[str]) -> DescribeConfigsRequest:
        resource = DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=resource_type, resource_name=name, configuration_keys=keys
        )
        return DescribeConfigsRequest(
            resources=[resource], include_synonyms=True, include_documentation=True
        )

    async def scenario() -> None:
        async with running_broker(tmp_path, log_retention_hours="1") as broker:
            conn = await connect(broker)
            await create_topic_via_metadata(conn, "t")
            keys = ["log.retention.hours", "num.partitions"]
            server = await conn.send(describe(4, "0", keys), 4)
            found = {c.name: c for c in server.results[0].configs}
            hours, partitions = found["log.retention.hours"], found["num.partitions"]
            assert (hours.value, hours.config_source) == ("1", 4)
            assert (partitions.value, partitions.config_source) == ("1", 5)
            assert hours.config_type == 3 and hours.documentation
            # Retention may change while the broker runs; the partition count may not.
            assert not hours.read_only and partitions.read_only
            assert [(s.name, s.value, s.source) for s in hours.synonyms] == [
                ("log.retention.hours", "1", 4),
                ("log.retention.hours", "168", 5),
            ]
            topic = await conn.send(describe(2, "t", ["retention.ms"]), 4)
            (retention,) = topic.results[0].configs
            assert (retention.value, retention.config_source) == ("3600000", 4)
            assert retention.config_type == 5 and not retention.read_only
            assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
                ("log.retention.hours", "1", 4),
                ("log.retention.hours", "168", 5),
            ]
            # A Kafka setting without meaning here says so where clients read about it.
            keys = ["preallocate", "compression.type"]
            topic = await conn.send(describe(2, "t", keys), 4)
            found = {c.name: c for c in topic.results[0].configs}
            assert found["preallocate"].documentation.startswith(NO_EFFECT)
            assert found["preallocate"].config_type == 1 and found["preallocate"].value == "false"
            assert not found["compression.type"].documentation.startswith(NO_EFFECT)
            assert [(s.name, s.value, s.source) for s in found["compression.type"].synonyms] == [
                ("compression.type", "producer", 5)
            ]
            await conn.close()

    run(scenario)


def test_transactional_records_without_a_transactional_id_are_refused(tmp_path: Path) -> None:
    """Kafka's answer: they have no transactional id to be authorized against, and
    nothing of a request holding them is appended, its plain batches neither. The flag
    is read from the batch's attributes alone, so it is checked both ways."""

    async def scenario() -> None:
        async with running_broker(tmp_path) as broker:
            conn = await connect(broker)
            pid, epoch = await topic_and_producer_id(conn)
            await create_topic_via_metadata(conn, "u")
            ids = {"producer_id": pid, "producer_epoch": epoch, "base_sequence": 0}
            refused = await produce(conn, "t", batch([b"a"], is_transactional=True, **ids))
            mixed = produce_request("u", batch([b"plain"]))
            mixed.topic_data.append(
                produce_request("t", batch([b"a"], is_transactional=True, **ids)).topic_data[0]
            )
            both = await conn.send(mixed, 9)
            taken = await produce(conn, "t", batch([b"a"], **ids))
            assert refused.error_code == ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            assert [t.partition_responses[0].error_code for t in both.responses] == [
                ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            ] * 2
            assert broker.replica_manager.partition("u", 0).log.log_end_offset == 0
            assert (taken.error_code, taken.base_offset) == (0, 0)
            assert broker.replica_manager.partition("t", 0).log.log_end_offset == 1
            await conn.close()

    run(scenario)
