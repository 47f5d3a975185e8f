"""Core modules reach time, sockets, files and randomness only through the seams,
so the same code runs under deterministic simulation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "epochlog"
# Where the real world is allowed in: the real seams (real.py and the sockets of
# socket_stream.py) and the process entry points
# (`epochlog demo` runs broker processes, signals them and drives Spark; the tools the
# command line runs start local clusters and read quarantine folders on a broker's
# host; a local SparkSession must name, in the environment, the Python its workers run;
# `epochlog sim` times its seeds and writes failing seeds' histories; `epochlog chaos`
# is a process-level tool like the command line: it makes namespaces and iptables rules,
# starts, signals and kills broker and ZooKeeper processes and drives real clients on
# real time, the very things the simulator stands in for, and never runs inside it).
EXEMPT = (
    {
        SRC / "seams" / "real.py",
        SRC / "seams" / "socket_stream.py",
        SRC / "__main__.py",
        SRC / "spark" / "session.py",
        SRC / "sim" / "command.py",
    }
    | set((SRC / "cli").rglob("*.py"))
    | set((SRC / "chaos").rglob("*.py"))
    | set((SRC / "demo").rglob("*.py"))
    | set((SRC / "tools").rglob("*.py"))
)
# Edges allowed one named reach each, and nothing else of the lists: the real metastore
# backends (SQLite on a worker thread, kazoo's own threads; a simulation uses the memory
# metastore), the synchronous client (its own loop on a thread), the Spark connector
# (it runs in Spark's processes).
REAL_EDGES = {
    SRC / "metastore" / "sqlite.py": {"sqlite3", "concurrent", "run_in_executor"},
    SRC / "metastore" / "zk.py": {"kazoo", "run_in_executor"},
    # A named memory store may be shared by clients on several threads' loops; its lock
    # is never contended in a one-thread simulation.
    SRC / "metastore" / "memory.py": {"threading"},
    SRC / "client" / "sync.py": {"threading", "concurrent", "real_seams"},
    # The sync Producer's per-record futures: answered on its loop thread, waited for
    # on the caller's.
    SRC / "client" / "delivery.py": {"threading"},
    SRC / "spark" / "sink_producer.py": {"threading", "real_seams"},
    SRC / "spark" / "sink_transactions.py": {"real_seams"},
    SRC / "spark" / "batch_reader.py": {"real_seams"},
    SRC / "spark" / "stream_reader.py": {"real_seams"},
}
# The simulator runs on its virtual-time loop, whose clock is the simulated Clock: there,
# asyncio's timers are the Clock's; and it seeds every simulated host's Random.
SIMULATOR = SRC / "sim"
SIMULATOR_MAY = {"random", "asyncio.sleep", "asyncio.timeout", "call_at", "call_later"}
FORBIDDEN_MODULES = {
    "time",
    "socket",
    "random",
    "shutil",
    "pathlib",
    "selectors",
    "threading",
    "concurrent",
    "sqlite3",
    "kazoo",
}
# Timeouts and timers on the event loop's own clock, not the Clock seam.
FORBIDDEN_ASYNCIO = {"sleep", "wait_for", "timeout", "timeout_at", "to_thread"}
FORBIDDEN_METHODS = {"call_later", "call_at", "run_in_executor"}
ALLOWED_OS_ATTRIBUTES = {"path", "sep", "fspath"}


def core_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p not in EXEMPT)


def _found(path: Path) -> list[tuple[str, str]]:
    """(what, where) for each reach past the seams."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                root = alias.name.split(".")[0]
                if root in FORBIDDEN_MODULES:
                    found.append((root, f"line {node.lineno}: import {alias.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module:
            root = node.module.split(".")[0]
            if root in FORBIDDEN_MODULES:
                found.append((root, f"line {node.lineno}: from {node.module} import ..."))
            if any(alias.name == "real_seams" for alias in node.names):
                found.append(("real_seams", f"line {node.lineno}: import real_seams"))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("open", "id"):
                found.append((node.func.id, f"line {node.lineno}: {node.func.id}(...)"))
        elif isinstance(node, ast.Attribute):
            where = f"line {node.lineno}: "
            if isinstance(node.value, ast.Name):
                if node.value.id == "asyncio" and node.attr in FORBIDDEN_ASYNCIO:
                    found.append((f"asyncio.{node.attr}", where + f"asyncio.{node.attr}"))
                if node.value.id == "os" and node.attr not in ALLOWED_OS_ATTRIBUTES:
                    found.append(("os", where + f"os.{node.attr}"))
            if node.attr in FORBIDDEN_METHODS:
                found.append((node.attr, where + f".{node.attr}"))
    return found


def violations(path: Path) -> list[str]:
    allowed = REAL_EDGES.get(path, set())
    if SIMULATOR in path.parents:
        allowed = allowed | SIMULATOR_MAY
    return [where for what, where in _found(path) if what not in allowed]


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_core_module_does_io_only_through_seams(path: Path) -> None:
    assert violations(path) == []


def test_the_check_catches_direct_io(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import time\nimport os\nimport asyncio\nimport threading\nimport sqlite3\n"
        "from epochlog.seams.real import real_seams\n"
        "async def f(loop):\n    open('x')\n    os.fsync(1)\n    asyncio.sleep(1)\n"
        "    time.time()\n    await asyncio.wait_for(g(), 1)\n    loop.call_later(1, g)\n"
        "    async with asyncio.timeout(1):\n        pass\n    return id(loop)\n"
    )
    assert len(violations(bad)) == 11


def test_every_real_edge_still_needs_what_it_is_allowed() -> None:
    for path, allowed in REAL_EDGES.items():
        assert allowed <= {what for what, _ in _found(path)}, path
