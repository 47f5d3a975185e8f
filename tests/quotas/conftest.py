"""The in-process broker of tests/broker, for the quota tests that need no process."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
