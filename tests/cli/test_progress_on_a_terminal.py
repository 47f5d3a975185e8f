"""Long operator commands show a progress bar (rich) when stderr is a terminal, and
nothing of it in a pipe or a log: run here on a pseudo-terminal, as in a shell."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import termios
import time

from support.broker import BrokerProcess, epochlog_command
from support.broker import run_epochlog as epochlog

BAR = "━"
BOUND_S = 120


def on_a_terminal(*args: str) -> tuple[int, str, str]:
    """``epochlog ARGS...`` with stderr on a 120-column pseudo-terminal and stdout piped:
    (exit code, stdout, what the terminal was sent)."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120"}
    proc = subprocess.Popen(
        [*epochlog_command(), *args], stdout=subprocess.PIPE, stderr=slave, env=env
    )
    os.close(slave)
    shown = bytearray()
    deadline = time.monotonic() + BOUND_S
    while time.monotonic() < deadline:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command ended and closed the terminal's other side
            break
        if not chunk:
            break
        shown += chunk
    os.close(master)
    stdout = proc.communicate(timeout=BOUND_S)[0]
    return proc.returncode, stdout.decode(), shown.decode(errors="replace")


def test_topics_create_shows_its_leaders_arriving_on_a_terminal_only(
    module_broker: BrokerProcess,
) -> None:
    server = ["--bootstrap-server", module_broker.bootstrap]
    code, stdout, shown = on_a_terminal(
        "topics", "create", "progress-tty", "--partitions", "40", *server
    )
    assert code == 0, shown
    assert "created topic progress-tty" in stdout
    assert "leaders of progress-tty" in shown and BAR in shown and "40/40" in shown, shown
    assert BAR not in stdout

    piped = epochlog("topics", "create", "progress-pipe", "--partitions", "40", *server)
    assert piped.returncode == 0, piped.stderr
    assert BAR not in piped.stderr and "leaders of" not in piped.stderr
