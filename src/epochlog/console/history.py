"""The console's own memory of what it observed while running: leader epoch changes and
truncations per partition. The admin API answers only the present, so the timeline is
built by comparing each snapshot with what came before (pure, no I/O).

A truncation shows through the admin API the way KIP-320 defines it: after a leader
change, the new leader's end of the previous epoch (OffsetsForLeaderEpoch, in the
snapshot as ``previous_epoch_end``) is where the logs diverge. If the previous leader
held more, an election cut it; each replica that held more cuts the same range when it
next moves (it truncates to its new leader, keeping the cut part in quarantine). A
replica's log end going down for another reason is a truncation too.
"""

from __future__ import annotations

from collections import deque
from typing import Any

# Events kept per partition: the oldest go first.
EVENTS_KEPT = 200


class _Partition:
    def __init__(self, topic_id: str) -> None:
        self.topic_id = topic_id
        self.leader = -1
        self.leader_epoch = -1
        self.leader_end: int | None = None  # the current leader's last known log end
        self.ends: dict[str, int] = {}  # each replica's last known log end
        # A leader change whose divergence point is not known yet: (old epoch, old
        # leader, its last known log end).
        self.awaiting: tuple[int, int, int | None] | None = None
        # Replicas that held more than the divergence point: replica -> that point.
        self.diverged: dict[str, int] = {}
        self.events: deque[dict[str, Any]] = deque(maxlen=EVENTS_KEPT)


class History:
    """Feed it every snapshot (``observe``); read the timeline and truncations back."""

    def __init__(self) -> None:
        self._partitions: dict[str, _Partition] = {}

    def observe(self, snapshot: dict[str, Any]) -> None:
        now = snapshot["time_ms"]
        for topic in snapshot["topics"]:
            for p in topic["partitions"]:
                key = f"{topic['name']}-{p['partition']}"
                state = self._partitions.get(key)
                if state is None or state.topic_id != topic["topic_id"]:
                    state = self._partitions[key] = _Partition(topic["topic_id"])
                    state.events.append(
                        {"time_ms": now, "kind": "seen", "topic_id": topic["topic_id"]}
                    )
                self._observe_partition(state, p, now)

    def _observe_partition(self, state: _Partition, p: dict[str, Any], now: int) -> None:
        ends = {r: e for r, e in p.get("replica_log_ends", {}).items() if isinstance(e, int)}
        if p["leader_epoch"] != state.leader_epoch:
            state.events.append(
                {
                    "time_ms": now,
                    "kind": "leader_epoch",
                    "old_epoch": state.leader_epoch,
                    "new_epoch": p["leader_epoch"],
                    "old_leader": state.leader,
                    "new_leader": p["leader"],
                }
            )
            if state.leader_epoch >= 0 and state.awaiting is None:
                state.awaiting = (state.leader_epoch, state.leader, state.leader_end)
            state.leader, state.leader_epoch = p["leader"], p["leader_epoch"]
            state.leader_end = None
        answer = p.get("previous_epoch_end")
        if answer is not None and state.awaiting is not None:
            self._diverged(state, answer["end_offset"], now)
        for replica, end in ends.items():
            before = state.ends.get(replica)
            if replica in state.diverged and before is not None and end != before:
                point = state.diverged.pop(replica)
                state.events.append(_truncation(now, "replica", int(replica), point, before))
            elif before is not None and end < before:
                state.events.append(_truncation(now, "replica", int(replica), end, before))
            state.ends[replica] = end
        if str(state.leader) in ends:
            state.leader_end = ends[str(state.leader)]

    @staticmethod
    def _diverged(state: _Partition, point: int, now: int) -> None:
        """The new leader's log departs from what came before at ``point``."""
        assert state.awaiting is not None
        old_epoch, old_leader, old_end = state.awaiting
        state.awaiting = None
        if old_end is not None and point < old_end:
            state.events.append(
                _truncation(now, "election", state.leader, point, old_end)
                | {"epoch": old_epoch, "old_leader": old_leader}
            )
        for replica, end in state.ends.items():
            if replica != str(state.leader) and end > point:
                state.diverged[replica] = min(point, state.diverged.get(replica, point))

    def timeline(self) -> dict[str, list[dict[str, Any]]]:
        """Per partition, every event observed, oldest first."""
        return {key: list(state.events) for key, state in sorted(self._partitions.items())}

    def truncations(self) -> list[dict[str, Any]]:
        """Every truncation observed, with its partition, oldest first."""
        found = [
            {"partition": key, **event}
            for key, state in self._partitions.items()
            for event in state.events
            if event["kind"] == "truncation"
        ]
        return sorted(found, key=lambda e: (e["time_ms"], e["partition"]))


def _truncation(now: int, cause: str, replica: int, end: int, before: int) -> dict[str, Any]:
    """Offsets ``end`` to ``before - 1`` were cut on ``replica``."""
    return {
        "time_ms": now,
        "kind": "truncation",
        "cause": cause,
        "replica": replica,
        "first_offset": end,
        "last_offset": before - 1,
        "records": before - end,
    }
