"""What the operator commands print: aligned tables (rich) for people, JSON for scripts,
and progress bars for work that takes a while. One place, so every command looks alike."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# Wide enough that a partition's row is never wrapped in a log file or a pipe.
TEXT_WIDTH = 200


def table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows under a header, columns aligned, as plain text (no colour codes): output that
    is read by people and grepped by scripts alike."""
    grid = Table(*columns, box=None, pad_edge=False, padding=(0, 2, 0, 0))
    for row in rows:
        grid.add_row(*(_cell(v) for v in row))
    out = io.StringIO()
    Console(file=out, width=TEXT_WIDTH, no_color=True, highlight=False).print(grid)
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()).strip("\n")


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=False)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value) or "-"
    return str(value)


@contextmanager
def progress(description: str, total: int) -> Iterator[Any]:
    """A progress bar on stderr while ``total`` steps are done (nothing when stderr is
    not a terminal, so pipes and logs stay clean); yields ``advance(n=1)``."""
    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    with bar:
        task = bar.add_task(description, total=total)

        def advance(n: int = 1, completed: int | None = None) -> None:
            if completed is not None:
                bar.update(task, completed=completed)
            else:
                bar.advance(task, n)

        yield advance
