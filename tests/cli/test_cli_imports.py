"""Every ``epochlog`` call, a broker's start among them, pays for what the command
line imports: an operator command must not load the broker, the storage package or
numpy (``epochlog --help`` was 1.2 s of CPU with them, 0.6 without)."""

from __future__ import annotations

from support.fresh_imports import loaded_after

HEAVY = ("epochlog.broker.broker", "epochlog.storage.log", "epochlog.sim.cluster", "numpy")


def test_the_command_line_and_an_operator_command_load_no_broker_storage_or_numpy() -> None:
    code = (
        "from epochlog.cli.main import build_parser\n"
        "build_parser().parse_args(['topics', 'list'])\n"
    )
    assert loaded_after(code, HEAVY) == []
