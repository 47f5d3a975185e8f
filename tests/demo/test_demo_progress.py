"""The demo's progress on a terminal: the story's lines printed as they happen, the
counts as a live status line redrawn in place (rich); in a pipe, plain lines."""

from __future__ import annotations

import io
import time

from rich.console import Console

from epochlog.demo.progress import Progress


def test_on_a_terminal_the_counts_are_a_live_line_under_the_story() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    calls = []

    def counts() -> str:
        calls.append(1)
        return f"produced {len(calls)}"

    progress = Progress(counts, every_s=0.05, console=console)
    progress.start()
    progress.phase("cluster", "starting 3 brokers")
    deadline = time.monotonic() + 10
    while len(calls) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    progress.stop()
    text = out.getvalue()
    assert "== cluster: starting 3 brokers" in text
    assert "cluster: produced" in text  # drawn in the live status, not as story lines
    assert text.count("== cluster") == 1


def test_in_a_pipe_the_counts_are_plain_lines(capsys: object) -> None:
    console = Console(file=io.StringIO(), force_terminal=False)
    calls = []

    def counts() -> str:
        calls.append(1)
        return "produced 7"

    progress = Progress(counts, every_s=0.05, console=console)
    progress.start()
    progress.phase("draining", "producer stopped")
    deadline = time.monotonic() + 10
    while len(calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    progress.stop()
    printed = capsys.readouterr().out  # type: ignore[attr-defined]
    assert "== draining: producer stopped" in printed
    assert "   draining: produced 7" in printed
