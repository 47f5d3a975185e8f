"""The leader-side rules of a partition, as a state machine driven
by follower fetches and a clock given as numbers: no sockets, no sleeping."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from epochlog.metadata.model import PartitionState
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.records import build_batch
from epochlog.replication.monotonic_list_offsets import offsets_available
from epochlog.replication.partition import Partition, StateChange
from epochlog.replication.settings import ReplicationSettings
from epochlog.seams.real import OsDisk
from epochlog.settings.broker import BROKER
from epochlog.storage.config import LogConfig
from epochlog.storage.log import Log

LAG_MS = 30_000


class Clock:
    def time_ms(self) -> int:
        return 1_700_000_000_000

    def monotonic(self) -> float:
        return 0.0

    async def sleep(self, seconds: float) -> None:  # pragma: no cover - never called
        raise AssertionError("state machine must not sleep")


def records(n: int) -> bytearray:
    return bytearray(build_batch([(None, b"v%d" % i, [], 1000 + i) for i in range(n)]))


def state(leader: int = 0, epoch: int = 1, isr=(0, 1, 2), pe: int = 0, **kw) -> PartitionState:
    return PartitionState(leader, epoch, [0, 1, 2], list(isr), partition_epoch=pe, **kw)


def make_partition(tmp_path: Path, initial: PartitionState, min_isr: int = 1) -> Partition:
    config = LogConfig(min_insync_replicas=min_isr)
    log = Log.open(OsDisk(), Clock(), str(tmp_path / "t-0"), "t", 0, config)
    partition = Partition("t", 0, uuid.uuid4(), log, initial, local_broker_id=0)
    assert partition.apply_state(initial, now_ms=0) != StateChange.IGNORED
    return partition


def test_high_watermark_moves_only_when_every_isr_member_fetches_in_the_current_epoch(
    tmp_path: Path,
) -> None:
    p = make_partition(tmp_path, state(epoch=1))
    p.append_as_leader(records(3))
    assert p.high_watermark == 0
    assert not p.record_follower_fetch(1, 3, fetch_epoch=1, now_ms=1)
    assert p.high_watermark == 0  # broker 2 has not fetched in this epoch
    assert p.record_follower_fetch(2, 2, fetch_epoch=1, now_ms=1)
    assert p.high_watermark == 2
    # A new leadership: fetches of the old epoch no longer count.
    p.apply_state(state(epoch=2, pe=1), now_ms=2)
    p.append_as_leader(records(1))
    p.record_follower_fetch(1, 4, fetch_epoch=1, now_ms=3)
    p.record_follower_fetch(2, 4, fetch_epoch=1, now_ms=3)
    assert p.high_watermark == 2
    p.record_follower_fetch(1, 4, fetch_epoch=2, now_ms=4)
    assert p.high_watermark == 2  # broker 2 still on the old epoch
    p.record_follower_fetch(2, 4, fetch_epoch=2, now_ms=4)
    assert p.high_watermark == 4


def test_high_watermark_never_goes_backwards_on_the_leader(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1))
    p.append_as_leader(records(5))
    p.record_follower_fetch(1, 5, 1, 1)
    p.record_follower_fetch(2, 5, 1, 1)
    assert p.high_watermark == 5
    p.record_follower_fetch(2, 1, 1, 2)  # e.g. a follower that lost its disk
    assert p.high_watermark == 5
    p.apply_state(state(epoch=2, pe=1), now_ms=3)  # re-elected
    assert p.high_watermark == 5 and p.leader_epoch_start_offset == 5


def test_single_replica_isr_commits_on_append(tmp_path: Path) -> None:
    p = make_partition(tmp_path, PartitionState(0, 0, [0], [0]))
    p.append_as_leader(records(2))
    assert p.high_watermark == 2


def test_follower_joins_isr_only_after_reaching_the_leader_epoch_start(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)))
    p.append_as_leader(records(5))
    p.record_follower_fetch(1, 3, 1, 1)
    assert p.high_watermark == 3
    # Re-elected in epoch 2 at log end 5 with the HW still at 3.
    p.apply_state(state(epoch=2, isr=(0, 1), pe=1), now_ms=2)
    assert (p.leader_epoch_start_offset, p.high_watermark) == (5, 3)
    p.record_follower_fetch(2, 4, fetch_epoch=2, now_ms=3)
    assert p.isr_expansion(now_ms=3) is None  # past the HW, short of the epoch start
    p.record_follower_fetch(2, 5, fetch_epoch=1, now_ms=4)
    assert p.isr_expansion(now_ms=4) is None  # far enough, but fetching in an old epoch
    p.record_follower_fetch(2, 5, fetch_epoch=2, now_ms=5)
    assert p.isr_expansion(now_ms=5) == [0, 1, 2]


def test_replica_marked_offline_is_never_proposed_for_the_isr(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1), offline_replicas=[2]))
    p.append_as_leader(records(1))
    p.record_follower_fetch(2, 1, 1, 1)
    assert p.isr_expansion(now_ms=1) is None


def test_pending_isr_addition_holds_the_high_watermark(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)))
    p.append_as_leader(records(2))
    p.record_follower_fetch(2, 0, 1, 1)
    p.record_follower_fetch(1, 0, 1, 1)
    assert p.isr_expansion(now_ms=1) == [0, 1, 2]
    p.begin_isr_change([0, 1, 2])
    assert p.isr_expansion(now_ms=1) is None  # one proposal at a time
    p.record_follower_fetch(1, 2, 1, 2)
    # Committed ISR {0, 1} is at 2, but broker 2 may join at any moment with 0.
    assert p.high_watermark == 0
    p.record_follower_fetch(2, 2, 1, 3)
    assert p.high_watermark == 2


def test_follower_leaves_isr_after_lag_time_without_catching_up(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1))
    p.append_as_leader(records(1))
    p.record_follower_fetch(1, 1, 1, now_ms=1_000)  # caught up
    p.record_follower_fetch(2, 0, 1, now_ms=1_000)  # behind ever since the leadership began
    assert p.isr_shrink(now_ms=LAG_MS, lag_time_max_ms=LAG_MS) is None
    p.append_as_leader(records(1))
    # Broker 1 keeps up with every append; broker 2 keeps fetching but never reaches the end.
    p.record_follower_fetch(1, 2, 1, now_ms=LAG_MS)
    p.record_follower_fetch(2, 0, 1, now_ms=LAG_MS)
    assert p.isr_shrink(now_ms=LAG_MS + 1, lag_time_max_ms=LAG_MS) == [0, 1]
    # Reaching the end the leader had at the previous fetch counts as caught up back then,
    # even though the leader has appended again since.
    p.append_as_leader(records(1))
    p.record_follower_fetch(2, 2, 1, now_ms=LAG_MS + 2)
    assert p.isr_shrink(now_ms=LAG_MS + 2, lag_time_max_ms=LAG_MS) is None


def test_refused_isr_proposal_backs_off(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)))
    p.record_follower_fetch(2, 0, 1, 1)
    p.begin_isr_change([0, 1, 2])
    p.end_isr_change(refused=True, now_ms=10, retry_backoff_ms=1000)
    assert p.isr_expansion(now_ms=500) is None
    assert p.isr_expansion(now_ms=1010) == [0, 1, 2]


def test_stale_and_repeated_states_are_ignored(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=3, pe=5))
    p.append_as_leader(records(2))
    assert p.apply_state(state(epoch=3, pe=5), now_ms=1) == StateChange.IGNORED
    assert p.leader_epoch_start_offset == 0  # a repeat does not restart the epoch
    assert p.apply_state(state(epoch=2, pe=9), now_ms=1) == StateChange.IGNORED
    assert p.apply_state(state(epoch=3, isr=(0, 1), pe=6), now_ms=1) == StateChange.UPDATED
    assert p.state.isr == [0, 1] and p.is_leader
    assert p.apply_state(state(leader=1, epoch=4, pe=7), now_ms=1) == StateChange.BECAME_FOLLOWER
    assert not p.is_leader


def test_isr_shrink_confirmed_by_controller_lets_high_watermark_advance(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1))
    p.append_as_leader(records(2))
    p.record_follower_fetch(1, 2, 1, 1)
    assert p.high_watermark == 0
    p.apply_state(state(epoch=1, isr=(0, 1), pe=1), now_ms=2)
    assert p.high_watermark == 2


def test_acks_all_answers(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)), min_isr=2)
    p.append_as_leader(records(2))
    assert p.ack_status(2, append_epoch=1) is None
    p.record_follower_fetch(1, 2, 1, 1)
    assert p.ack_status(2, append_epoch=1) == ErrorCode.NONE
    p.apply_state(state(epoch=1, isr=(0,), pe=1), now_ms=2)
    assert p.ack_status(2, append_epoch=1) == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    with pytest.raises(KafkaError) as refused:
        p.check_enough_replicas()
    assert refused.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    p.apply_state(state(leader=1, epoch=2, pe=2), now_ms=3)
    assert p.ack_status(2, append_epoch=1) == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_an_append_is_answered_across_its_leaders_next_epoch(tmp_path: Path) -> None:
    """A reassignment that keeps the leader bumps its epoch under appends waiting for
    acks=all: they are answered as the high watermark passes them (as Kafka does), not
    failed, which a client would retry and, with a later batch acknowledged first,
    count as delivered without an offset (librdkafka's implicit ack)."""
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)))
    p.append_as_leader(records(2))
    p.apply_state(state(epoch=2, isr=(0, 1), pe=1), now_ms=1)
    assert p.is_leader and p.ack_status(2, append_epoch=1) is None
    p.record_follower_fetch(1, 2, fetch_epoch=2, now_ms=2)
    assert p.ack_status(2, append_epoch=1) == ErrorCode.NONE


def test_an_append_cut_under_another_leader_is_never_answered(tmp_path: Path) -> None:
    """Leader in epoch 1, follower in 2 (its second record cut, another written there),
    leader again in 3: the high watermark passing offset 2 says nothing of the record
    appended in epoch 1, which is gone."""
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)))
    p.append_as_leader(records(2))
    p.apply_state(state(leader=1, epoch=2, isr=(1, 0), pe=1), now_ms=1)
    p.truncate_to(1, "diverged from the new leader")
    p.append_as_follower(
        bytearray(
            build_batch([(None, b"other", [], 1001)], base_offset=1, partition_leader_epoch=2)
        )
    )
    p.apply_state(state(epoch=3, isr=(0, 1), pe=2), now_ms=2)
    p.record_follower_fetch(1, 2, fetch_epoch=3, now_ms=3)
    assert p.is_leader and p.high_watermark == 2
    assert p.ack_status(2, append_epoch=1) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.ack_status(2, append_epoch=3) == ErrorCode.NONE


def test_kip207_holds_clients_until_hw_reaches_epoch_start_but_not_replicas(
    tmp_path: Path,
) -> None:
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)))
    p.append_as_leader(records(3))
    p.apply_state(state(epoch=2, isr=(0, 1), pe=1), now_ms=1)
    assert p.leader_epoch_start_offset == 3 and p.high_watermark == 0
    assert not offsets_available(p, replica_id=-1)
    assert offsets_available(p, replica_id=1)
    p.record_follower_fetch(1, 3, 2, 2)
    assert offsets_available(p, replica_id=-1)


def test_kip207_not_applied_after_unclean_election(tmp_path: Path) -> None:
    p = make_partition(tmp_path, state(epoch=1, isr=(0, 1)))
    p.append_as_leader(records(1))
    p.apply_state(state(epoch=2, isr=(0, 1), pe=1, elected_uncleanly=True), now_ms=1)
    assert p.high_watermark < p.leader_epoch_start_offset
    assert offsets_available(p, replica_id=-1)


def test_settings_use_kafka_names_and_defaults() -> None:
    assert ReplicationSettings.from_settings(BROKER.parse({})) == ReplicationSettings()
    s = ReplicationSettings.from_settings(BROKER.parse({"replica.lag.time.max.ms": "100"}))
    assert s.replica_lag_time_max_ms == 100 and s.replica_fetch_wait_max_ms == 500
    with pytest.raises(ValueError, match="replica.fetch.backoff.ms"):
        BROKER.parse({"replica.fetch.backoff.ms": "soon"})
    with pytest.raises(ValueError, match="replica.socket.timeout.ms"):
        ReplicationSettings.from_settings(
            BROKER.parse({"replica.fetch.wait.max.ms": "600", "replica.socket.timeout.ms": "500"})
        )


def test_a_follower_out_of_the_isr_counts_again_only_from_its_next_fetch(
    tmp_path: Path,
) -> None:
    """Broker 2 fetched up to 5, crashed and restarted with 2 records: the controller
    takes it out of the ISR. Its position from before must not take it back in (nor
    hold up the HW): found by the simulator (tests/sim/regressions/seed-210.json)."""
    p = make_partition(tmp_path, state(epoch=1))
    p.append_as_leader(records(5))
    p.record_follower_fetch(1, 5, 1, 1)
    p.record_follower_fetch(2, 5, 1, 1)
    assert p.high_watermark == 5
    p.apply_state(state(epoch=1, isr=(0, 1), pe=1), now_ms=2)
    assert p.isr_expansion(now_ms=2) is None
    p.record_follower_fetch(2, 2, 1, 3)  # its first fetch in its new life
    assert p.isr_expansion(now_ms=3) is None
    p.record_follower_fetch(2, 5, 1, 4)
    assert p.isr_expansion(now_ms=4) == [0, 1, 2]
