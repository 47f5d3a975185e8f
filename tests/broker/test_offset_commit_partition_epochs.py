"""KIP-232's re-created-topic check leans on the partition's latest leader epoch; the
OffsetCommit handler asks the metastore whenever a commit's epoch is above the cached
one, so a leader change the coordinator's cache has not caught up with is never taken
for a re-creation, and the metastore is asked nothing otherwise."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any

from epochlog.broker.handlers.offset_commit import confirm_partition_epochs
from epochlog.coordinator.commits import CommitRequest, partition_commit_error
from epochlog.metadata.model import PartitionState, TopicMetadata
from epochlog.protocol.errors import ErrorCode


class StoredTopics:
    """The metastore's topic nodes, as ClusterLink.stored_topic reads them."""

    def __init__(self, epochs: dict[str, int]) -> None:
        self.epochs = epochs
        self.asked: list[str] = []

    async def stored_topic(self, name: str) -> TopicMetadata | None:
        self.asked.append(name)
        if name not in self.epochs:
            return None
        state = PartitionState(leader=0, leader_epoch=self.epochs[name], replicas=[0], isr=[0])
        return TopicMetadata(name, uuid.uuid4(), {0: state})


def confirmed(stored: StoredTopics, wanted: dict[tuple[str, int], CommitRequest]) -> Any:
    broker: Any = SimpleNamespace(cluster=stored)
    return asyncio.run(confirm_partition_epochs(broker, wanted))


def test_a_commit_ahead_of_the_cache_is_judged_by_the_metastore() -> None:
    stored = StoredTopics({"moved": 1, "recreated": 0})
    wanted = {
        # The coordinator's cache still shows epoch 0; the leader moved to epoch 1.
        ("moved", 0): CommitRequest(10, 1, None, 0),
        # The topic was re-created: its epochs end at 0, the commit is in epoch 3.
        ("recreated", 0): CommitRequest(10, 3, None, 0),
        # Deleted meanwhile: the cached epoch stands.
        ("gone", 0): CommitRequest(10, 2, None, 0),
    }
    found = confirmed(stored, wanted)
    assert {k: c.partition_leader_epoch for k, c in found.items()} == {
        ("moved", 0): 1,
        ("recreated", 0): 0,
        ("gone", 0): 0,
    }
    answers = {k: partition_commit_error(None, c, 4096, True) for k, c in found.items()}
    assert answers == {
        ("moved", 0): ErrorCode.NONE,
        ("recreated", 0): ErrorCode.INVALID_PARTITION_EPOCH,
        ("gone", 0): ErrorCode.INVALID_PARTITION_EPOCH,
    }
    assert sorted(stored.asked) == ["gone", "moved", "recreated"]


def test_commits_within_the_cached_epochs_ask_the_metastore_nothing() -> None:
    """Nor does a commit without an epoch, or one to a partition with no epoch yet."""
    stored = StoredTopics({"t": 5})
    wanted = {
        ("t", 0): CommitRequest(10, 2, None, 2),
        ("t", 1): CommitRequest(10, -1, None, 2),
        # A partition without a leader yet (epoch -1): no bound to be above.
        ("t", 2): CommitRequest(10, 3, None, -1),
    }
    assert confirmed(stored, wanted) == wanted
    assert stored.asked == []
