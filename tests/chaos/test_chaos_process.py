"""``epochlog chaos`` for real: three broker processes in their own network namespaces,
minutes of kills, pauses, iptables partitions, degraded links and (with ZooKeeper as the
metastore) ZooKeeper killed and restarted; every checker must hold, nothing the run
created may be left behind, and the run's own history with one acknowledged record
taken out of its final read must fail lost-write (the run's evidence is real).

Needs root and Debian's iproute2 and iptables (bash scripts/test.sh installs them); a
missing tool fails, never skips. These are the CI's process-level chaos."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from subprocess import Popen

import pytest

from epochlog.chaos import verdicts
from epochlog.chaos.command import read_history
from epochlog.chaos.nemesis import FAULT_KINDS, draw_schedule
from epochlog.chaos.netns import BRIDGE_PREFIX, OWNER_MARK, PREFIX
from epochlog.chaos.workload import TOPIC
from support.broker import require_binary

pytestmark = [pytest.mark.chaos, pytest.mark.long]

CHECKERS = [*verdicts.EVIDENCE, "quarantine-complete"]


def start(tmp_path: Path, seed: int, duration_s: int, faults: str, *extra: str) -> Popen[str]:
    """``epochlog chaos`` started (SIGINT as a terminal would deliver it)."""
    assert os.geteuid() == 0, "epochlog chaos needs root (network namespaces, iptables)"
    for tool, package in (("ip", "iproute2"), ("tc", "iproute2"), ("iptables", "iptables")):
        require_binary(tool, package)
    command = [sys.executable, "-m", "epochlog", "chaos", "--seed", str(seed)]
    command += ["--duration", str(duration_s), "--faults", faults, "--data-dir", str(tmp_path)]
    return subprocess.Popen(
        [*command, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def left_behind(pid: int) -> list[str]:
    """What a run of ``pid`` made that still exists: namespaces, links, processes."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    left = [n for n in names.split() if n.startswith(f"{PREFIX}{pid}-")]
    left += re.findall(rf"\d+: ({BRIDGE_PREFIX}{pid}(?:h\d+)?)[:@]", links)
    for entry in Path("/proc").iterdir():
        try:
            if f"{OWNER_MARK}{pid}".encode() in (entry / "cmdline").read_bytes():
                left.append(f"process {entry.name}")
        except OSError:
            continue
    return left


def chaos(tmp_path: Path, seed: int, duration_s: int, faults: str, *extra: str) -> str:
    """Run ``epochlog chaos`` to its end; its output, once it passed and left nothing."""
    process = start(tmp_path, seed, duration_s, faults, *extra)
    output, _ = process.communicate()
    assert process.returncode == 0, output
    for checker in CHECKERS:
        assert re.search(rf"^{checker}\s+ok\s", output, re.MULTILINE), output
    assert left_behind(process.pid) == []
    return output


def assert_planted_loss_is_caught(tmp_path: Path) -> None:
    history = read_history(str(tmp_path / "history.txt"))
    acked = [e for e in history if e[0] == "ack"]
    victim = acked[len(acked) // 2]
    planted = [e for e in history if e[:3] != ("final", victim[2], victim[3])]
    kept = verdicts.read_quarantines([str(p) for p in tmp_path.glob("broker-*")], TOPIC)
    found = {v.checker: v for v in verdicts.judge(planted, TOPIC, kept)}
    assert not found["lost-write"].ok
    assert f"record {victim[1]} acknowledged at {victim[2]}/{victim[3]}" in (
        found["lost-write"].details
    )


def test_two_minutes_of_kills_pauses_partitions_and_degraded_links(tmp_path: Path) -> None:
    kinds = ("kill", "pause", "partition", "netem")
    schedule = draw_schedule(7, kinds, 3, 120)
    assert {f.kind for f in schedule} == set(kinds)
    assert {f.shape for f in schedule} >= {"one-way", "symmetric", "isolated"}
    output = chaos(tmp_path, 7, 120, ",".join(kinds))
    assert output.count("] start ") == len(schedule)
    assert_planted_loss_is_caught(tmp_path)


def test_zookeeper_killed_and_restarted_among_the_other_faults(tmp_path: Path) -> None:
    schedule = draw_schedule(7, FAULT_KINDS, 3, 60)
    assert {f.kind for f in schedule} == set(FAULT_KINDS)
    output = chaos(tmp_path, 7, 60, ",".join(FAULT_KINDS), "--metastore", "zk")
    assert output.count("] start ") == len(schedule)
    assert_planted_loss_is_caught(tmp_path)


def until_first_fault(process: Popen[str]) -> str:
    """The run's output up to its first fault's start line (the cluster is up)."""
    assert process.stdout is not None
    seen = ""
    for line in process.stdout:
        seen += line
        if "] start " in line:
            return seen
    raise AssertionError(f"the run ended before its first fault:\n{seen}")


def test_ctrl_c_and_sigterm_tear_everything_down(tmp_path: Path) -> None:
    for sig, directory in ((signal.SIGINT, "int"), (signal.SIGTERM, "term")):
        process = start(tmp_path / directory, 3, 60, "kill,zookeeper", "--metastore", "zk")
        until_first_fault(process)
        process.send_signal(sig)
        output, _ = process.communicate()
        assert process.returncode == 130, output
        assert "interrupted; namespaces, rules and processes removed" in output
        assert left_behind(process.pid) == []


def test_what_a_killed_run_left_is_removed_by_the_next_run(tmp_path: Path) -> None:
    process = start(tmp_path / "killed", 3, 60, "partition", "--metastore", "zk")
    until_first_fault(process)
    process.kill()
    process.wait()
    assert left_behind(process.pid) != []
    output = chaos(tmp_path / "next", 3, 5, "pause")
    assert f"removed a dead run's {PREFIX}{process.pid}-b0" in output
    assert left_behind(process.pid) == []
