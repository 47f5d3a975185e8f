"""Leader epoch -> start offset history of a partition (Kafka's LeaderEpochFileCache).

It answers OffsetsForLeaderEpoch, which followers and KIP-320 consumers use to find
where their log diverged from the leader's. Persisted as ``leader-epoch-checkpoint``:
a version line (0), a count line, then one ``<epoch> <start offset>`` line per entry.
"""

from __future__ import annotations

import bisect
import logging

from epochlog.seams import Disk

CHECKPOINT_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1

logger = logging.getLogger("epochlog.storage")


class LeaderEpochCache:
    """Sorted (epoch, start offset) entries; both columns strictly increase."""

    def __init__(self, disk: Disk | None = None, path: str | None = None) -> None:
        self._disk = disk
        self._path = path
        self._epochs: list[int] = []
        self._offsets: list[int] = []
        if disk is not None and path is not None and disk.exists(path):
            self._load(disk.read_file(path).decode())

    def _load(self, text: str) -> None:
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        if len(lines) < 2 or lines[0] != "0" or int(lines[1]) != len(lines) - 2:
            raise ValueError(f"malformed {self._path}")
        for line in lines[2:]:
            epoch, offset = line.split()
            self._epochs.append(int(epoch))
            self._offsets.append(int(offset))
        pairs = list(zip(self._epochs, self._offsets, strict=True))
        if any(e < 0 or o < 0 for e, o in pairs) or any(
            b[0] <= a[0] or b[1] <= a[1] for a, b in zip(pairs, pairs[1:], strict=False)
        ):
            raise ValueError(f"{self._path}: entries do not strictly increase")

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    @property
    def latest_epoch(self) -> int:
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._offsets[0]) if self._epochs else None

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` began at ``start_offset``; ignored unless it is newer.

        A later entry with a lower or equal start offset would violate monotonicity (it
        can only come from stale information), so such entries are dropped first, as
        Kafka does when a new leader's epoch starts where an empty older one did.
        """
        if epoch < 0 or (self._epochs and epoch <= self._epochs[-1]):
            return False
        while self._offsets and self._offsets[-1] >= start_offset:
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        self._flush()
        return True

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch in which ``offset`` was written, or -1 if before all entries."""
        i = bisect.bisect_right(self._offsets, offset) - 1
        return self._epochs[i] if i >= 0 else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch, with Kafka's exact answers (LeaderEpochFileCache):

        - requested UNDEFINED, or no entries: (-1, -1);
        - requested == latest epoch: (requested, log end offset);
        - requested newer than every epoch: (-1, -1) (a leader never sees this);
        - otherwise the start offset of the first epoch above the requested one, paired
          with the largest known epoch <= requested; when the requested epoch is below
          every known epoch (older epochs removed by retention) Kafka pairs that start
          offset with the requested epoch itself, so a follower truncates to where the
          leader's known history begins.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(self._epochs, requested_epoch)
        if i == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if i == 0:
            return requested_epoch, self._offsets[0]
        return self._epochs[i - 1], self._offsets[i]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after ``end_offset`` (log truncated there)."""
        keep = bisect.bisect_left(self._offsets, end_offset)
        if keep != len(self._offsets):
            del self._epochs[keep:]
            del self._offsets[keep:]
            self._flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Log start moved to ``start_offset``: drop older entries, clamp the one covering it."""
        i = bisect.bisect_right(self._offsets, start_offset) - 1
        if i < 0:
            return
        changed = i > 0 or self._offsets[0] != start_offset
        del self._epochs[:i]
        del self._offsets[:i]
        self._offsets[0] = max(self._offsets[0], start_offset)
        if changed:
            self._flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self._flush()

    def _flush(self) -> None:
        if self._disk is None or self._path is None:
            return
        lines = ["0", str(len(self._epochs))]
        lines += [f"{e} {o}" for e, o in zip(self._epochs, self._offsets, strict=True)]
        self._disk.write_atomic(self._path, ("\n".join(lines) + "\n").encode())
