"""The Spark driver of test_standalone_cluster.py, a process of its own: it runs every
policy's query of the truncation story (``truncation_story.run_policies``) on a Spark
standalone cluster and writes what happened as JSON, with what the executors' Python
workers are (their processes, the processes above them, and which epochlog they
import).

    python standalone_driver.py MASTER BASE BOOTSTRAP TOPICS_JSON RESULT_JSON
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from truncation_story import run_policies

import epochlog
from epochlog.spark.session import build_session

# Small executors (one core each, one per worker): the machine is shared.
EXECUTOR_CONF = {
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    # The executors' Python workers import the epochlog this driver imports.
    "spark.executorEnv.PYTHONPATH": str(Path(epochlog.__file__).resolve().parents[1]),
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.streaming.forceDeleteTempCheckpointLocation": "true",
}


def ancestors(pid: int) -> list[int]:
    """The process ids above ``pid`` up to init, from /proc."""
    out = []
    while pid > 1:
        stat = Path(f"/proc/{pid}/stat").read_text()
        pid = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state: ppid
        out.append(pid)
    return out


def python_worker(_: int) -> tuple[int, list[int], str]:
    """Run in an executor's Python worker: its process id, the processes above it, and
    which epochlog it imports."""
    import epochlog as imported

    return os.getpid(), ancestors(os.getpid()), str(Path(imported.__file__).resolve())


def main() -> int:
    parser = argparse.ArgumentParser()
    for name in ("master", "base", "bootstrap", "topics", "result"):
        parser.add_argument(name)
    args = parser.parse_args()
    spark = build_session("epochlog-standalone", master=args.master, conf=EXECUTOR_CONF)
    try:
        run = run_policies(spark, Path(args.base), json.loads(args.topics), args.bootstrap)
        workers = spark.sparkContext.parallelize(range(4), 4).map(python_worker).collect()
        result = {
            "app_id": spark.sparkContext.applicationId,
            "master": spark.sparkContext.master,
            "driver_pid": os.getpid(),
            "python_workers": workers,
            "errors": run.errors,
            "outputs": {
                p: [[o, v.decode(), e] for o, v, e in rows] for p, rows in run.outputs.items()
            },
        }
    finally:
        spark.stop()
    Path(args.result).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
