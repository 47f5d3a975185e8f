"""Certificates for the security tests, made once per session in a temporary folder."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from support.certs import Certs, make_certs


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


# The in-process broker of tests/broker.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "broker"))
