"""The zombie of KIP-320: a leader paused with SIGSTOP loses leadership while it sleeps.
When it wakes it is fenced (its epoch is refused by the new leader, and it refuses
produce once it knows the new state), it truncates to the new leader's log (what it
cut is kept in quarantine), and no write it received as a stale leader is acknowledged
with acks=all."""

from __future__ import annotations

from pathlib import Path

from cluster_harness import (
    BackgroundRequest,
    Cluster,
    eventually,
    produce_answer,
    produce_request,
    running_cluster,
)

from support.clients import confluent_consume

TOPIC = "zombie"
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
NOT_LEADER_OR_FOLLOWER = 6

FIRST = [(b"first-%02d" % i, b"acked by the old leader") for i in range(10)]
SECOND = [(b"second-%02d" % i, b"acked by the new leader") for i in range(10)]
STALE = [(b"stale-%02d" % i, b"sent to the sleeping leader") for i in range(3)]


def test_paused_leader_is_fenced_truncates_and_acknowledges_no_stale_write(
    tmp_path: Path, metastore_uri: str
) -> None:
    with running_cluster(tmp_path, metastore_uri) as cluster:
        zombie_is_fenced_and_truncates(cluster)


def zombie_is_fenced_and_truncates(cluster: Cluster) -> None:
    """The story on a started 3-broker cluster (also told over a SASL_SSL inter-broker
    listener, tests/cluster/test_sasl_inter_broker.py)."""
    cluster.create_topic(TOPIC, partitions=1, replication=3, min_insync_replicas="2")
    zombie, old_epoch = cluster.leader(TOPIC)
    others = [b for b in range(3) if b != zombie]
    assert cluster.produce(zombie, TOPIC, FIRST) == (0, 0)

    cluster.pause(zombie)
    # A write reaches the zombie while it sleeps; its socket holds it until SIGCONT.
    stale = BackgroundRequest(
        cluster.brokers[zombie].port,
        produce_request(TOPIC, 0, STALE, acks=-1, timeout_ms=10_000),
        9,
        bound_s=60,
    )

    def moved() -> bool:
        p = cluster.metadata(TOPIC)["partitions"][0]
        return p.leader in others and p.leader_epoch > old_epoch

    eventually(moved, 60, "leadership to move away from the paused leader")
    new_leader, new_epoch = cluster.leader(TOPIC)
    eventually(
        lambda: cluster.list_offsets(new_leader, TOPIC).error == 0,
        30,
        "the new leader to serve offsets",
    )
    assert cluster.produce(new_leader, TOPIC, SECOND) == (0, len(FIRST))

    # Requests in the zombie's epoch are fenced by the new leader; newer are unknown.
    fenced = cluster.list_offsets(new_leader, TOPIC, current_leader_epoch=old_epoch)
    assert fenced.error == FENCED_LEADER_EPOCH
    assert cluster.fetch_error(new_leader, TOPIC, 0, 0, old_epoch) == FENCED_LEADER_EPOCH
    ahead = cluster.list_offsets(new_leader, TOPIC, current_leader_epoch=new_epoch + 1)
    assert ahead.error == UNKNOWN_LEADER_EPOCH
    assert cluster.fetch_error(new_leader, TOPIC, 0, 0, new_epoch + 1) == (UNKNOWN_LEADER_EPOCH)
    current = cluster.list_offsets(new_leader, TOPIC, current_leader_epoch=new_epoch)
    assert (current.error, current.offset) == (0, len(FIRST) + len(SECOND))

    cluster.resume(zombie)
    outcome = stale.result()
    if not isinstance(outcome, Exception):
        error, _ = produce_answer(outcome)
        assert error != 0, "the sleeping leader acknowledged an acks=all write"

    # Once it has learnt the new state it refuses produce, and consumer fetches that
    # must reach a leader (before Fetch v11; from v11 a follower may serve them up to
    # its high watermark, KIP-392) or carry the old epoch.
    attempts: list[tuple[int, int]] = []

    def refuses_produce() -> bool:
        key = b"late-%03d" % len(attempts)
        attempts.append(cluster.produce(zombie, TOPIC, [(key, b"x")], timeout_ms=1000))
        return attempts[-1][0] == NOT_LEADER_OR_FOLLOWER

    eventually(refuses_produce, 60, "the woken leader to refuse produce")
    assert all(error != 0 for error, _ in attempts), attempts
    refused = cluster.fetch_error(zombie, TOPIC, 0, 0, new_epoch, version=10)
    assert refused == NOT_LEADER_OR_FOLLOWER
    assert cluster.fetch_error(zombie, TOPIC, 0, 0, old_epoch) == FENCED_LEADER_EPOCH

    # It truncates to the new leader's log and returns to the ISR.
    end = len(FIRST) + len(SECOND)
    eventually(
        lambda: cluster.log_end_offset(zombie, TOPIC) == end,
        60,
        "the woken leader to hold exactly the new leader's log",
    )
    eventually(
        lambda: sorted(cluster.metadata(TOPIC)["partitions"][0].isr) == [0, 1, 2],
        60,
        "the woken leader to rejoin the ISR",
    )
    status = cluster.status()
    (entry,) = [p for p in status["partitions"] if p["topic"] == TOPIC]
    assert entry["leader"] == new_leader and entry["leader_epoch"] == new_epoch
    assert entry["high_watermark"] == end
    assert {b: log["log_end"] for b, log in entry["replica_logs"].items()} == {
        str(b): end for b in range(3)
    }

    # Whatever the zombie appended as a stale leader was cut, and kept aside: only
    # offsets after the acknowledged ones, all in its old epoch.
    # (Whether the stale write was appended before the zombie learnt the new state
    # depends on which it handles first on waking; either way it is never acked.)
    stale_keys = {k for k, _ in STALE} | {b"late-%03d" % i for i in range(len(attempts))}
    for kept in cluster.quarantined(zombie, TOPIC):
        assert kept["first_offset"] >= len(FIRST), kept
        assert kept["epochs"] == [old_epoch], kept
        records = cluster.quarantine_show(kept["file"])
        assert {r["key"].encode() for r in records} <= stale_keys, records
        assert [r["offset"] for r in records] == list(
            range(kept["first_offset"], kept["last_offset"] + 1)
        )
        assert f"offsets {kept['first_offset']}..{kept['last_offset']}" in (
            cluster.quarantine_list(zombie)
        )
    for b in others:
        assert cluster.quarantined(b, TOPIC) == []

    got = confluent_consume(cluster.live_bootstrap(), TOPIC)
    assert [(g.offset, g.key) for g in got] == [(i, k) for i, (k, _) in enumerate(FIRST + SECOND)]
