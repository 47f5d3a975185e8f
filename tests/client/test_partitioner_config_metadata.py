"""Pure parts of the client: murmur2 vectors, settings refused by name, KIP-232 rules."""

from __future__ import annotations

import uuid

import pytest

from epochlog.client.config import consumer_config, producer_config
from epochlog.client.errors import ConfigError, TopicIdChangedError, TopicPartition
from epochlog.client.metadata import (
    MetadataCache,
    MetadataSnapshot,
    PartitionMetadata,
    TopicMetadata,
)
from epochlog.client.partitioner import Partitioner, key_partition, murmur2
from epochlog.seams.real import system_random

# Kafka's own expectations for Utils.murmur2 (its UtilsTest).
MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("key", "expected"), MURMUR2.items())
def test_murmur2_matches_the_java_client(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert murmur2(bytearray(key)) == murmur2(memoryview(key)) == expected


def test_null_keys_stick_to_a_partition_until_its_batch_is_sent() -> None:
    p = Partitioner("murmur2_random", system_random(7))
    first = p.partition("t", None, 8)
    assert {p.partition("t", None, 8) for _ in range(20)} == {first}
    assert p.partition("t", b"abc", 8) == key_partition(b"abc", 8)
    p.batch_sent("t", first)
    assert len({p.partition("t", None, 8) for _ in range(1)}) == 1


@pytest.mark.parametrize("kind", ["murmur2_random", "murmur2", "random"])
def test_a_send_many_call_partitions_its_keys_as_calls_one_by_one_would(kind: str) -> None:
    keys = [b"%d" % i for i in range(50)]
    mixed = [None if i % 3 else k for i, k in enumerate(keys)]
    for some in (keys, mixed, [bytearray(k) for k in keys]):
        together, alone = Partitioner(kind, system_random(3)), Partitioner(kind, system_random(3))
        many = together.partitions("t", some, 7)
        assert many == [alone.partition("t", k, 7) for k in some]
        if kind != "random":
            assert [p for p, k in zip(many, some, strict=True) if k is not None] == [
                key_partition(bytes(k), 7) for k in some if k is not None
            ]


def test_murmur2_partitioner_hashes_null_keys_like_empty_ones() -> None:
    p = Partitioner("murmur2", system_random(7))
    assert p.partition("t", None, 8) == key_partition(b"", 8)


@pytest.mark.parametrize(
    ("settings", "name"),
    [
        ({"acks": "2"}, "acks"),
        ({"linger.ms": -1}, "linger.ms"),
        ({"batch.size": "big"}, "batch.size"),
        ({"compression.type": "brotli"}, "compression.type"),
        ({"enable.idempotence": "maybe"}, "enable.idempotence"),
        ({"enable.idempotence": True, "acks": 1}, "acks"),
        ({"retries": -1}, "retries"),
        ({"delivery.timeout.ms": 0}, "delivery.timeout.ms"),
        ({"request.timeout.ms": "x"}, "request.timeout.ms"),
        ({"lingerms": 5}, "lingerms"),
    ],
)
def test_bad_producer_settings_are_refused_by_name(settings: dict, name: str) -> None:
    with pytest.raises(ConfigError) as info:
        producer_config({"bootstrap.servers": "localhost:9092", **settings})
    assert info.value.setting == name and str(info.value).startswith(name)


def test_producer_defaults_and_idempotence_yielding_to_explicit_acks() -> None:
    conf = producer_config({"bootstrap.servers": "h:1"})
    assert (conf["acks"], conf["enable.idempotence"], conf["compression.codec"]) == (-1, True, 0)
    assert producer_config({"bootstrap.servers": "h:1", "acks": "1"})["enable.idempotence"] is False


def test_bad_consumer_settings_are_refused_by_name() -> None:
    with pytest.raises(ConfigError, match=r"^auto.offset.reset"):
        consumer_config({"bootstrap.servers": "h:1", "auto.offset.reset": "smallest"})
    with pytest.raises(ConfigError, match=r"^bootstrap.servers"):
        consumer_config({"bootstrap.servers": "nohost"})
    with pytest.raises(ConfigError, match=r"^bootstrap.servers: required"):
        consumer_config({})


def snapshot(epochs: dict[int, int], topic_id: uuid.UUID) -> MetadataSnapshot:
    parts = {p: PartitionMetadata(p, 1, e) for p, e in epochs.items()}
    return MetadataSnapshot({1: ("h", 1)}, {"t": TopicMetadata("t", topic_id, parts)})


def test_metadata_with_a_lower_leader_epoch_is_refused() -> None:
    tid = uuid.uuid4()
    cache = MetadataCache()
    cache.apply(snapshot({0: 5, 1: 2}, tid))
    refusal = cache.check(snapshot({0: 4, 1: 3}, tid))
    assert refusal.stale == [(TopicPartition("t", 0), 5, 4)]
    assert not cache.check(snapshot({0: 5, 1: 3}, tid))


def test_recreated_topic_in_use_raises_naming_the_partitions() -> None:
    cache = MetadataCache()
    cache.apply(snapshot({0: 5, 1: 2}, uuid.uuid4()))
    newer = snapshot({0: 0, 1: 0}, uuid.uuid4())
    with pytest.raises(TopicIdChangedError, match="t-0, t-1") as info:
        cache.check(newer, [TopicPartition("t", 0), TopicPartition("t", 1)])
    assert info.value.partitions == [TopicPartition("t", 0), TopicPartition("t", 1)]
    # A topic nobody reads is simply replaced, lower epochs and all.
    assert not cache.check(newer)
