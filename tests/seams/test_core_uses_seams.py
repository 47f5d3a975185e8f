"""Core modules reach time, sockets, files and randomness only through the seams
(DESIGN §3), so the same code runs under deterministic simulation."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "epochlog"
# Where the real world is allowed in: the real seams and the process entry points
# (`epochlog demo` runs broker processes, signals them and drives Spark; the tools the
# command line runs start local clusters and read quarantine folders on a broker's
# host; a local SparkSession must name, in the environment, the Python its workers run).
EXEMPT = (
    {SRC / "seams" / "real.py", SRC / "__main__.py", SRC / "spark" / "session.py"}
    | set((SRC / "cli").rglob("*.py"))
    | set((SRC / "demo").rglob("*.py"))
    | set((SRC / "tools").rglob("*.py"))
)
FORBIDDEN_MODULES = {"time", "socket", "random", "shutil", "pathlib", "selectors"}
ALLOWED_OS_ATTRIBUTES = {"path", "sep", "fspath"}


def core_modules() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p not in EXEMPT)


def violations(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in FORBIDDEN_MODULES:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in FORBIDDEN_MODULES:
                found.append(f"line {node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "open":
                found.append(f"line {node.lineno}: open(...)")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id == "asyncio" and node.attr == "sleep":
                found.append(f"line {node.lineno}: asyncio.sleep")
            if node.value.id == "os" and node.attr not in ALLOWED_OS_ATTRIBUTES:
                found.append(f"line {node.lineno}: os.{node.attr}")
    return found


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(SRC)))
def test_core_module_does_io_only_through_seams(path: Path) -> None:
    assert violations(path) == []


def test_the_check_catches_direct_io(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import time\nimport os\nimport asyncio\n"
        "def f():\n    open('x')\n    os.fsync(1)\n    asyncio.sleep(1)\n    time.time()\n"
    )
    assert len(violations(bad)) == 4
