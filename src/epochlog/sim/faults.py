"""Fault schedules: which broker fails how, when and for how long, drawn from a seed.

A schedule is plain data, printed with a failing seed and replayed exactly; a shorter
one (fewer faults) is what a failing run is shrunk to.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# kill: SIGKILL on a machine that loses its page cache (sim/disk.py), restarted later;
# partition: cut from the network and the metastore, a zombie until healed;
# split: cut from the other brokers and the metastore only (clients still reach it).
FAULT_KINDS = ("kill", "partition", "split")


@dataclass(frozen=True)
class Fault:
    at: float  # simulated seconds after the workload starts
    kind: str
    broker: int
    lasts: float  # seconds until the restart or the heal

    def __str__(self) -> str:
        return f"{self.at:7.3f}s {self.kind:<9} b{self.broker} for {self.lasts:.3f}s"


def draw_schedule(
    rng: random.Random, kinds: tuple[str, ...], brokers: int, duration: float
) -> list[Fault]:
    """Faults one after another over ``duration`` seconds (each ends before the next
    begins, though a killed broker may still be waiting to register again), none in
    the last five seconds."""
    faults: list[Fault] = []
    if not kinds:
        return faults
    at = rng.uniform(1.0, 4.0)
    while at < duration - 5:
        lasts = round(rng.uniform(0.5, 6.0), 3)
        faults.append(Fault(round(at, 3), rng.choice(kinds), rng.randrange(brokers), lasts))
        at += lasts + rng.uniform(1.0, 6.0)
    return faults
