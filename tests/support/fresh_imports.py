"""Which of some modules a fresh interpreter has loaded after running a few lines: how
the import tests pin that a process started again and again (a command, Spark's planning
process) pays for nothing it does not use."""

from __future__ import annotations

import json
import subprocess
import sys

_REPORT = "import json, sys\nprint(json.dumps(sorted(m for m in {!r} if m in sys.modules)))\n"


def loaded_after(code: str, modules: tuple[str, ...]) -> list[str]:
    probe = f"{code}\n{_REPORT.format(modules)}"
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return list(json.loads(ran.stdout))
