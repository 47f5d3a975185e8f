"""The broker keeps large freed buffers mapped, so a stream of ~1 MiB requests reuses
pages instead of faulting in fresh ones for every frame (``broker/process_memory.py``)."""

from __future__ import annotations

import subprocess
import sys

# Three live 1 MiB buffers per round, as a produced batch has (frame, decoded records,
# patched copy): together above glibc's default trim threshold, so by default each round
# hands the pages back and the next faults them in again.
ROUNDS = """
import resource, sys
if sys.argv[1] == "keep":
    from epochlog.broker.process_memory import keep_large_buffers
    assert keep_large_buffers()
def round_trip():
    frame = bytearray(1 << 20)
    records = bytes(frame)
    patched = bytearray(records)
    del frame, records, patched
for _ in range(5):
    round_trip()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(100):
    round_trip()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def page_faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", ROUNDS, mode], check=True, capture_output=True, text=True
    )
    return int(out.stdout)


def test_large_buffers_are_reused_without_page_faults() -> None:
    # 100 rounds of 3 MiB: 76,800 pages if every one were fresh.
    assert page_faults("default") > 10_000
    assert page_faults("keep") < 100
