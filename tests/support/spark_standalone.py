"""A Spark standalone cluster for tests: a master and workers, each its own JVM process
started from PySpark's own ``bin/spark-class`` (pip's PySpark ships no
``sbin/start-master.sh``; ``spark-class`` is what those scripts run), on loopback ports
with their own work and log folders. Each runs in its own process group, so teardown
also ends the executors a worker started (PySpark's daemon of Python workers, in a
group of its own, ends when its executor does). A missing Java or PySpark makes the
test fail, never skip."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pyspark

from epochlog.tools.local_ports import free_port
from support.broker import require_binary, wait_until

SPARK_HOME = Path(pyspark.__file__).resolve().parent
# Start-up reads jars and binds ports; a bound against hangs, not a judgement of speed.
START_BOUND_S = 120.0
STOP_BOUND_S = 30.0
MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


class SparkDaemon:
    """One ``spark-class`` JVM (a Master or a Worker) in a process group of its own."""

    def __init__(self, name: str, main: str, args: list[str], base: Path, ui_port: int) -> None:
        self.name = name
        self.main = main
        self.args = args
        self.base = base
        self.ui_port = ui_port
        self.log_path = base / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> SparkDaemon:
        require_binary("java", "default-jre-headless")
        spark_class = SPARK_HOME / "bin" / "spark-class"
        assert spark_class.is_file(), f"{spark_class} missing: pip install pyspark"
        conf = self.base / "conf"
        conf.mkdir(parents=True, exist_ok=True)
        env = dict(
            os.environ,
            SPARK_HOME=str(SPARK_HOME),
            # An empty configuration folder: nothing of the host's spark-defaults.conf.
            SPARK_CONF_DIR=str(conf),
            SPARK_LOG_DIR=str(self.base),
            SPARK_DAEMON_MEMORY="256m",
            SPARK_LOCAL_IP="127.0.0.1",
        )
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(spark_class), self.main, *self.args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                cwd=self.base,
                start_new_session=True,
            )
        return self

    def ui_json(self) -> dict[str, Any]:
        """What the daemon's web UI serves at ``/json/`` ({} while it does not answer it,
        or answers with a page instead while it starts)."""
        assert self.proc is not None and self.proc.poll() is None, (
            f"{self.name} exited with {self.proc and self.proc.returncode}:\n{self.tail()}"
        )
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
                return dict(json.load(r))
        except (OSError, ValueError):
            return {}

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        """SIGTERM to the whole process group (the JVM, and a worker's executors and
        their Python workers), then SIGKILL to whatever of it outlived the JVM."""
        if self.proc is None:
            return
        _signal_group(self.proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(STOP_BOUND_S)
        _signal_group(self.proc.pid, signal.SIGKILL)
        self.proc.wait(STOP_BOUND_S)
        self.proc = None


def _signal_group(group: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, sig)


class SparkStandalone:
    """A master and ``workers`` workers (one core and ``worker_memory`` each)."""

    def __init__(self, base: Path, workers: int = 2, worker_memory: str = "1g") -> None:
        self.base = base
        self.port = free_port()
        master_ui = free_port()
        args = ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(master_ui)]
        self.master = SparkDaemon("master", MASTER, args, base / "master", master_ui)
        self.workers = []
        for i in range(workers):
            ui = free_port()
            work = base / f"worker{i}"
            args = ["--host", "127.0.0.1", "--webui-port", str(ui), "--cores", "1"]
            args += ["--memory", worker_memory, "--work-dir", str(work / "work"), self.url]
            self.workers.append(SparkDaemon(f"worker{i}", WORKER, args, work, ui))

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def start(self) -> SparkStandalone:
        """Start the master, then the workers; return once the master lists every worker
        ALIVE (its ``/json/``)."""
        try:
            self.master.start()
            wait_until(
                lambda: self.master.ui_json().get("status") == "ALIVE",
                START_BOUND_S,
                "the Spark master to serve",
            )
            for worker in self.workers:
                worker.start()
            wait_until(
                lambda: self.master.ui_json().get("aliveworkers") == len(self.workers),
                START_BOUND_S,
                f"{len(self.workers)} Spark workers to register with the master",
            )
        except BaseException:
            self.stop()
            raise
        return self

    def executors_of(self, app_id: str) -> list[str]:
        """The workers (by name) that ran, or run, an executor of the application."""
        names = []
        for worker in self.workers:
            page = worker.ui_json()
            ran = page.get("executors", []) + page.get("finishedexecutors", [])
            if any(e.get("appid") == app_id for e in ran):
                names.append(worker.name)
        return names

    def stop(self) -> None:
        for daemon in [*self.workers, self.master]:
            daemon.stop()
