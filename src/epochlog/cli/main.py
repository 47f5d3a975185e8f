"""epochlog: a Kafka-compatible replicated commit log.

epochlog broker ...        run one broker
epochlog up --brokers N    run a local cluster of N broker processes on loopback
epochlog topics ...        create, delete, list and describe topics
epochlog status            leaders, epochs, ISR, high watermarks, replica logs
epochlog quarantine ...    list, show and replay what truncations kept aside
epochlog settings          every setting with its default (docs/settings.md)
epochlog chaos ...         real brokers, real faults (root: namespaces, iptables), checked
epochlog demo              the main job: a cluster, a PySpark pipeline, an unclean election
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Sequence

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig, parse_properties
from epochlog.chaos.command import add_chaos_arguments
from epochlog.cli import admin_commands
from epochlog.cli.logs import configure_logging
from epochlog.demo import add_arguments as add_demo_arguments
from epochlog.protocol.errors import KafkaError
from epochlog.seams.real import real_seams
from epochlog.settings.broker import BROKER
from epochlog.sim.command import add_sim_arguments
from epochlog.sim.command import run_from_args as run_sim_from_args
from epochlog.tools import quarantine
from epochlog.tools.local_cluster import LocalCluster, run_local_cluster
from epochlog.tools.settings_reference import reference

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def _broker_config(args: argparse.Namespace) -> BrokerConfig:
    props: dict[str, str] = {}
    if args.config:
        with open(args.config, encoding="utf-8") as f:
            props.update(parse_properties(f.read()))
    if args.broker_id is not None:
        props["broker.id"] = str(args.broker_id)
    if args.listeners:
        props["listeners"] = args.listeners
    if args.log_dirs:
        props["log.dirs"] = args.log_dirs
    if args.metastore:
        props["metastore"] = args.metastore
    props.update(dict(args.set or []))
    return BrokerConfig.from_mapping(props)


async def run_broker(config: BrokerConfig) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly (leadership handed away, flush,
    checkpoints)."""
    broker = Broker(config, real_seams())
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(
        f"epochlog broker {config.broker_id} listening on {config.listener.host}:{broker.port}",
        flush=True,
    )
    await stop.wait()
    await broker.stop()


def _cmd_broker(args: argparse.Namespace) -> int:
    try:
        config = _broker_config(args)
    except (OSError, ValueError) as exc:
        print(f"epochlog broker: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_level)
    with asyncio.Runner() as runner:
        runner.run(run_broker(config))
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    settings = dict(args.set or [])
    try:
        BROKER.parse(settings)
    except ValueError as exc:
        print(f"epochlog up: {exc}", file=sys.stderr)
        return 2
    cluster = LocalCluster(os.path.abspath(args.data_dir), args.brokers, args.port, settings)
    return run_local_cluster(cluster)


def _cmd_settings(args: argparse.Namespace) -> int:
    print(reference(), end="")
    return 0


def _run(work: Callable[[], Awaitable[str] | str]) -> int:
    """Print what a command produced, or its error, as an operator tool should."""
    try:
        result = work()
        print(asyncio.run(result) if inspect.isawaitable(result) else result)
    except (KafkaError, OSError, ValueError, RuntimeError) as exc:
        print(f"epochlog: {exc}", file=sys.stderr)
        return 1
    return 0


def _cmd_topics(args: argparse.Namespace) -> int:
    if args.action == "create":
        return _run(
            lambda: admin_commands.topics_create(
                args.bootstrap_server,
                args.topic,
                args.partitions,
                args.replication_factor,
                dict(args.config or []),
            )
        )
    if args.action == "delete":
        return _run(lambda: admin_commands.topics_delete(args.bootstrap_server, args.topic))
    if args.action == "alter":
        return _run(
            lambda: admin_commands.topics_alter(
                args.bootstrap_server, args.topic, dict(args.config or [])
            )
        )
    if args.action == "list":
        return _run(lambda: admin_commands.topics_list(args.bootstrap_server))
    names = [args.topic] if args.topic else None
    return _run(lambda: admin_commands.topics_describe(args.bootstrap_server, names))


async def _status(bootstrap: str, as_json: bool) -> str:
    return admin_commands.format_status(await admin_commands.cluster_status(bootstrap), as_json)


def _cmd_status(args: argparse.Namespace) -> int:
    return _run(lambda: _status(args.bootstrap_server, args.json))


def _cmd_quarantine(args: argparse.Namespace) -> int:
    if args.action == "list":
        return _run(lambda: quarantine.format_entries(quarantine.entries(args.log_dirs.split(","))))
    if args.action == "show":
        return _run(lambda: quarantine.show(args.file))
    return _run(
        lambda: quarantine.replay(args.file, args.bootstrap_server, args.topic, args.partition)
    )


def _cmd_transactions(args: argparse.Namespace) -> int:
    bootstrap = args.bootstrap_server
    if args.action == "list":
        return _run(lambda: admin_commands.transactions_list(bootstrap))
    if args.action == "describe":
        if not args.transactional_id:
            print("epochlog: transactions describe needs a transactional id", file=sys.stderr)
            return 2
        return _run(lambda: admin_commands.transactions_describe(bootstrap, args.transactional_id))
    if not args.topic:
        print("epochlog: transactions describe-producers needs --topic", file=sys.stderr)
        return 2
    return _run(
        lambda: admin_commands.transactions_describe_producers(
            bootstrap, args.topic, args.partition
        )
    )


def _cmd_demo(args: argparse.Namespace) -> int:
    from epochlog.demo import run_from_args

    return run_from_args(args)


def _cmd_sim(args: argparse.Namespace) -> int:
    return run_sim_from_args(args)


def _cmd_chaos(args: argparse.Namespace) -> int:
    from epochlog.chaos.command import run_from_args

    return run_from_args(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="epochlog", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run one broker")
    broker.add_argument("--config", help="a server.properties file (Kafka setting names)")
    broker.add_argument("--broker-id", type=int)
    broker.add_argument("--listeners", help="PLAINTEXT://HOST:PORT")
    broker.add_argument("--log-dirs", help="comma-separated log directories")
    broker.add_argument(
        "--metastore",
        help="zk://HOST:PORT[/chroot] | sqlite:///PATH | memory:// (default: SQLite in log dir)",
    )
    broker.add_argument(
        "--set",
        action="append",
        type=_key_value,
        metavar="KEY=VALUE",
        help="any broker setting by its Kafka name; repeatable",
    )
    broker.add_argument("--log-level", default="INFO")
    broker.set_defaults(func=_cmd_broker)

    up = sub.add_parser("up", help="run a local cluster of broker processes on loopback")
    up.add_argument("--brokers", type=int, default=3)
    up.add_argument("--data-dir", default="var/epochlog")
    up.add_argument("--port", type=int, default=9092, help="first broker's port")
    up.add_argument("--set", action="append", type=_key_value, metavar="KEY=VALUE")
    up.set_defaults(func=_cmd_up)

    topics = sub.add_parser("topics", help="create, alter, delete, list or describe topics")
    topics.add_argument("action", choices=["create", "alter", "delete", "list", "describe"])
    topics.add_argument("topic", nargs="?")
    topics.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)
    topics.add_argument("--partitions", type=int, default=-1)
    topics.add_argument("--replication-factor", type=int, default=-1)
    topics.add_argument("--config", action="append", type=_key_value, metavar="KEY=VALUE")
    topics.set_defaults(func=_cmd_topics)

    status = sub.add_parser("status", help="per-partition leadership and offsets")
    status.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=_cmd_status)

    kept = sub.add_parser("quarantine", help="what truncations kept aside")
    kept.add_argument("action", choices=["list", "show", "replay"])
    kept.add_argument("file", nargs="?", help="a quarantine .log file (show, replay)")
    kept.add_argument("--log-dirs", default="var/epochlog/broker-0")
    kept.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)
    kept.add_argument("--topic")
    kept.add_argument("--partition", type=int, default=0)
    kept.set_defaults(func=_cmd_quarantine)

    txn = sub.add_parser("transactions", help="list and describe transactions and producers")
    txn.add_argument("action", choices=["list", "describe", "describe-producers"])
    txn.add_argument("transactional_id", nargs="?")
    txn.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)
    txn.add_argument("--topic")
    txn.add_argument("--partition", type=int, default=0)
    txn.set_defaults(func=_cmd_transactions)

    reference_cmd = sub.add_parser(
        "settings", help="every broker, topic and client setting (docs/settings.md)"
    )
    reference_cmd.set_defaults(func=_cmd_settings)

    demo = sub.add_parser("demo", help="the main job end to end, with an unclean election")
    add_demo_arguments(demo)
    demo.set_defaults(func=_cmd_demo)

    sim = sub.add_parser("sim", help="seeds through the deterministic simulator, checked")
    add_sim_arguments(sim)
    sim.set_defaults(func=_cmd_sim)

    chaos = sub.add_parser("chaos", help="real brokers under real faults, checked (root)")
    add_chaos_arguments(chaos)
    chaos.set_defaults(func=_cmd_chaos)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "topics" and args.action in ("create", "alter", "delete") and not args.topic:
        parser.error(f"topics {args.action} needs a topic name")
    if args.command == "quarantine" and args.action != "list" and not args.file:
        parser.error(f"quarantine {args.action} needs a file")
    if args.command == "quarantine" and args.action == "replay" and not args.topic:
        parser.error("quarantine replay needs --topic")
    return args.func(args)
