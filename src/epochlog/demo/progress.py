"""The demo's progress: the story's lines as they happen, and the counts (events
produced and acknowledged, micro-batches and rows written) every couple of seconds. On
a terminal the counts are one live status line under the story (rich), redrawn in
place; in a pipe or a log they are plain lines, so the output stays readable there."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

Counts = Callable[[], str]


class Progress:
    def __init__(
        self, counts: Counts, every_s: float = 2.0, console: Console | None = None
    ) -> None:
        self._counts = counts
        self._every_s = every_s
        self._started = time.monotonic()
        self._phase = "starting"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-progress", daemon=True)
        self._console = console or Console(highlight=False)
        self._live: Live | None = None
        if self._console.is_terminal:
            self._live = Live(
                Spinner("dots", Text("starting")), console=self._console, transient=True,
                refresh_per_second=4, redirect_stdout=False, redirect_stderr=False,
            )  # fmt: skip

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def say(self, text: str) -> None:
        line = f"[{self.elapsed():6.1f}s] {text}"
        with self._lock:
            if self._live is not None:
                self._live.console.print(line, markup=False)  # above the live status
            else:
                print(line, flush=True)

    def phase(self, name: str, text: str) -> None:
        """A new phase of the story, announced on its own line."""
        self._phase = name
        self.say(f"== {name}: {text}")

    def start(self) -> None:
        if self._live is not None:
            self._live.start()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        if self._live is not None:
            self._live.stop()

    def _run(self) -> None:
        while not self._stop.wait(self._every_s):
            try:
                counts = self._counts()
            except Exception as exc:  # noqa: BLE001 - a progress line must never kill the demo
                counts = f"(counts unavailable: {exc})"
            if self._live is not None:
                status = f"[{self.elapsed():6.1f}s] {self._phase}: {counts}"
                self._live.update(Spinner("dots", Text(status)))
            else:
                self.say(f"   {self._phase}: {counts}")


def print_block(title: str, lines: list[str]) -> None:
    print(f"\n{title}", flush=True)
    for line in lines:
        print(f"  {line}", flush=True)
    sys.stdout.flush()
