"""Which partition a record goes to: the Java client's murmur2 of the key (librdkafka's
``murmur2_random`` gives the same partitions), sticky or random for null keys."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from murmurhash2 import murmurhash2

from epochlog.seams import Random

if TYPE_CHECKING:
    import numpy as np

    from epochlog.protocol.column_rows import BinaryColumn

# Kafka's Utils.murmur2 is MurmurHash2 (32-bit) with this seed.
_SEED = 0x9747B28C


def murmur2(data: bytes | bytearray | memoryview) -> int:
    """MurmurHash2 as Kafka's ``Utils.murmur2`` computes it (signed 32-bit result)."""
    h = murmurhash2(data if type(data) is bytes else bytes(data), _SEED)
    return h - (1 << 32) if h & 0x80000000 else h


def key_partition(key: bytes, num_partitions: int) -> int:
    """The Java client's ``toPositive(murmur2(key)) % numPartitions``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def _key_partitions(keys: Sequence[bytes | None], num_partitions: int) -> list[int]:
    """``key_partition`` of every key, in one pass (toPositive ignores the sign)."""
    hash_ = murmurhash2
    return [
        (hash_(k if type(k) is bytes else bytes(k), _SEED) & 0x7FFFFFFF) % num_partitions
        for k in keys
    ]


class Partitioner:
    """Keyed records by murmur2; null keys stick to one partition per topic until a
    batch for it is sent (KIP-480), or go to a random one with ``partitioner=random``."""

    def __init__(self, kind: str, random: Random) -> None:
        self._kind = kind
        self._random = random
        self._sticky: dict[str, int] = {}

    @property
    def null_keys_stay(self) -> bool:
        """A null key's partition stays the same from one record to the next until a
        batch of the topic is sealed (sticky, murmur2); not with ``random``."""
        return self._kind != "random"

    def partition(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        if key is not None and self._kind != "random":
            return key_partition(key, num_partitions)
        if self._kind == "murmur2":
            # librdkafka's consistent murmur2: a null key hashes like an empty one.
            return key_partition(b"", num_partitions)
        if self._kind == "random":
            return self._random.randint(0, num_partitions - 1)
        chosen = self._sticky.get(topic)
        if chosen is None or chosen >= num_partitions:
            chosen = self._random.randint(0, num_partitions - 1)
            self._sticky[topic] = chosen
        return chosen

    def partitions(
        self, topic: str, keys: Sequence[bytes | None], num_partitions: int
    ) -> list[int]:
        """``partition`` of each key of one ``send_many`` call (null keys: the partition
        they stick to now, as calls one by one would pick, no batch leaving between)."""
        if self._kind == "random" or None in keys:
            return [self.partition(topic, key, num_partitions) for key in keys]
        return _key_partitions(keys, num_partitions)

    def column_partitions(
        self,
        topic: str,
        rows: int,
        keys: BinaryColumn | None,
        given: np.ndarray | None,
        num_partitions: int,
    ) -> np.ndarray:
        """``partitions`` for ``rows`` records given as columns: ``given`` per record
        where not -1, else by key (hashed in one compiled pass), else as null keys go."""
        import numpy as np

        if given is not None:
            if given.max(initial=-1) >= num_partitions:
                bad = int(given.max())
                raise ValueError(f"partition {bad} of {topic}, which has {num_partitions}")
            if given.min(initial=0) >= 0:
                return given
        if self._kind == "random":
            chosen = np.array([self.partition(topic, None, num_partitions) for _ in range(rows)])
        elif keys is None:
            chosen = np.full(rows, self.partition(topic, None, num_partitions), np.int64)
        else:
            from epochlog.client.key_partitions import key_partitions

            chosen = key_partitions(keys, num_partitions)
            nulls = chosen < 0
            if nulls.any():
                chosen[nulls] = self.partition(topic, None, num_partitions)
        return chosen if given is None else np.where(given >= 0, given, chosen)

    def batch_sent(self, topic: str, partition: int) -> None:
        """A null-key batch left: the next null-key records pick a partition afresh."""
        if self._sticky.get(topic) == partition:
            del self._sticky[topic]
