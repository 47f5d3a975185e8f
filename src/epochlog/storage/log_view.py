"""What the parts of a log read and call of it: the reader, the transaction replay and
the log cleaner depend on this view, which ``Log`` implements, never on ``Log`` itself
(so ``log.py`` can use them without an import cycle)."""

from __future__ import annotations

from typing import Protocol

from epochlog.seams import Clock, Disk
from epochlog.storage.config import LogConfig
from epochlog.storage.damage import DamageCut
from epochlog.storage.epoch_cache import LeaderEpochCache
from epochlog.storage.log_holes import LogHoles
from epochlog.storage.producer_state import ProducerStateManager
from epochlog.storage.quarantine import Quarantine
from epochlog.storage.segment import DamagedBatch, DeleteLater, LogSegment


class LogView(Protocol):
    topic: str
    partition: int
    directory: str
    producer_state: ProducerStateManager
    damage_cuts: list[DamageCut]
    holes: LogHoles
    delete_later: DeleteLater | None

    @property
    def config(self) -> LogConfig: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def epoch_cache(self) -> LeaderEpochCache: ...

    @property
    def segments(self) -> list[LogSegment]: ...

    def segment_for(self, offset: int) -> int: ...

    def damage_found(self, damage: DamagedBatch, context: str) -> None: ...

    def replace_segments(self, old: list[LogSegment], new: LogSegment) -> None: ...


class DamageableLog(LogView, Protocol):
    """What damage handling (``storage/log_damage.py``) reads and changes of a log."""

    disk: Disk
    clock: Clock
    quarantine: Quarantine

    @property
    def offset_floor(self) -> int: ...

    @property
    def active_segment(self) -> LogSegment: ...

    def pin_offset_floor(self) -> None: ...

    def drop_segments_after(self, index: int) -> None: ...

    def move_end_to(self, offset: int) -> None: ...

    def insert_segment(self, segment: LogSegment) -> None: ...

    def rebuild_after_truncation(self) -> None: ...
