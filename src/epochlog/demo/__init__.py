"""``epochlog demo``: the main job end to end on one machine.

A local 3-broker cluster (the brokers of ``epochlog up``, SQLite metastore), a live
stream of events produced with acks=1, a PySpark streaming pipeline (events -> per-user
counts and sums per micro-batch -> parquet, with a checkpoint), and an unclean leader
election forced in the middle of it with real signals. It then shows what the source
detected, what the pipeline did under ``onTruncation``, what the brokers quarantined,
and checks that the output holds every surviving event exactly once. Exit code 0 only
when every check passed.
"""

from __future__ import annotations

import argparse
import os

from epochlog.spark.options import POLICIES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        default="var/epochlog-demo",
        help="where the run's cluster, checkpoint and output go (a fresh run-<id> folder)",
    )
    parser.add_argument("--port", type=int, default=0, help="first broker's port (0: any free)")
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--rate", type=int, default=200, help="events per second")
    parser.add_argument(
        "--on-truncation",
        choices=POLICIES,  # the source's onTruncation values
        default="closest",
        help="the source's onTruncation: closest/earliest resume at the divergence offset"
        " (nothing surviving is skipped), latest skips to the log end, fail stops the query",
    )
    parser.add_argument(
        "--duration", type=float, default=40.0, help="seconds of live stream (about)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="a short run (tests): a few seconds per phase"
    )
    parser.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL only (brokers, producer, pipeline, sink), as `epochlog up --secure`",
    )


def run_from_args(args: argparse.Namespace) -> int:
    """Build the settings from the command line and run the story."""
    from epochlog.demo.story import Settings, run
    from epochlog.tools.local_ports import free_ports

    duration = 8.0 if args.quick else max(8.0, args.duration)
    data_dir = os.path.join(args.data_dir, f"run-{os.getpid()}")
    settings = Settings(
        data_dir=data_dir,
        port=args.port or free_ports(3),
        partitions=args.partitions,
        rate=min(args.rate, 100) if args.quick else args.rate,
        on_truncation=args.on_truncation,
        steady_s=duration * 0.3,
        lost_window_s=duration * 0.3,
        after_s=duration * 0.2,
        trigger_s=1.0,
        clean_stop=not args.quick,
        secure=args.secure,
    )
    return run(settings)
