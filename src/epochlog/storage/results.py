"""What the log hands back to the broker: plain immutable values."""

from __future__ import annotations

from dataclasses import dataclass, field

from epochlog.storage.segment import FileSlice


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time: int
    log_start_offset: int
    duplicate: bool = False


@dataclass(frozen=True, slots=True)
class ReadResult:
    """Whole batches to send as they lie on disk, plus the log's bounds at read time."""

    slices: list[FileSlice] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0
    # The offset after the last batch sent (with slices).
    next_offset: int = 0

    @property
    def size(self) -> int:
        return sum(s.size for s in self.slices)


@dataclass(frozen=True, slots=True)
class OffsetAndEpoch:
    """A ListOffsets answer: offset, the timestamp found (-1 if none), its leader epoch."""

    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class TruncatedRange:
    """Batches a truncation removed and where their bytes were kept (quarantine)."""

    first_offset: int
    last_offset: int
    epochs: tuple[int, ...]
    size: int
    path: str
