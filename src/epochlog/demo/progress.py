"""Plain progress lines while the demo runs: the phase, events produced and
acknowledged, micro-batches and rows written, every couple of seconds."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

Counts = Callable[[], str]


class Progress:
    def __init__(self, counts: Counts, every_s: float = 2.0) -> None:
        self._counts = counts
        self._every_s = every_s
        self._started = time.monotonic()
        self._phase = "starting"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-progress", daemon=True)

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def say(self, text: str) -> None:
        with self._lock:
            print(f"[{self.elapsed():6.1f}s] {text}", flush=True)

    def phase(self, name: str, text: str) -> None:
        """A new phase of the story, announced on its own line."""
        self._phase = name
        self.say(f"== {name}: {text}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                counts = self._counts()
            except Exception as exc:  # noqa: BLE001 - a progress line must never kill the demo
                counts = f"(counts unavailable: {exc})"
            self.say(f"   {self._phase}: {counts}")


def print_block(title: str, lines: list[str]) -> None:
    print(f"\n{title}", flush=True)
    for line in lines:
        print(f"  {line}", flush=True)
    sys.stdout.flush()
