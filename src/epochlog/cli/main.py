"""epochlog: a Kafka-compatible replicated commit log.

epochlog broker ...        run one broker
epochlog up --brokers N    run a local cluster of N broker processes on loopback
epochlog topics ...        create, delete, list and describe topics
epochlog groups ...        list and describe consumer groups (offsets with epochs, lag)
epochlog records delete    move partitions' log start forward (kafka-delete-records.sh)
epochlog reassign ...      move partitions between brokers (kafka-reassign-partitions.sh)
epochlog status            leaders, epochs, ISR, high watermarks, replica logs
epochlog transactions ...  list, describe, find-hanging, abort (kafka-transactions.sh)
epochlog users ...         add, list and remove SCRAM users
epochlog console           a web console: brokers, partitions, groups, truncations, live
epochlog quarantine ...    list, show and replay what truncations kept aside
epochlog acls ...          add, list and remove ACLs (kafka-acls.sh's options)
epochlog quotas ...        alter and describe client quotas (kafka-configs.sh's options)
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
import time
from collections.abc import Awaitable, Callable, Sequence

from epochlog.broker.config import BrokerConfig, parse_properties
from epochlog.chaos.command import add_chaos_arguments
from epochlog.cli import (
    acl_commands,
    admin_commands,
    log_dirs,
    quota_commands,
    reassign_commands,
    users,
)
from epochlog.cli.logs import configure_logging
from epochlog.client.errors import ClientError
from epochlog.demo import add_arguments as add_demo_arguments
from epochlog.protocol.errors import KafkaError
from epochlog.settings.broker import BROKER
from epochlog.settings.registry import SettingError
from epochlog.sim.command import add_sim_arguments
from epochlog.sim.command import run_from_args as run_sim_from_args

# What one command alone needs (the broker, a local cluster, the quarantine tools) is
# imported in that command's function: every `epochlog` call, a broker's start among
# them, would otherwise pay for all of them (1.15 s of CPU before, for `--help`).

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
    from epochlog.broker.broker import Broker
    from epochlog.seams.real import real_seams

    broker = Broker(config, real_seams())
    await broker.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    served = ", ".join(
        f"{listener.name}://{listener.host}:{broker.ports[listener.name]}"
        for listener in config.listeners.served
    )
    print(f"epochlog broker {config.broker_id} listening on {served}", flush=True)
    await stop.wait()
    await broker.stop()


def _cmd_broker(args: argparse.Namespace) -> int:
    from epochlog.broker.process_memory import keep_large_buffers

    try:
        config = _broker_config(args)
    except (OSError, ValueError) as exc:
        print(f"epochlog broker: {exc}", file=sys.stderr)
        return 2
    configure_logging(args.log_level)
    keep_large_buffers()
    with asyncio.Runner() as runner:
        try:
            runner.run(run_broker(config))
        except SettingError as exc:  # TLS material is read and checked at startup
            print(f"epochlog broker: {exc}", file=sys.stderr)
            return 2
    return 0


def _cmd_up(args: argparse.Namespace) -> int:
    from epochlog.tools import local_security
    from epochlog.tools.local_cluster import LocalCluster, run_local_cluster

    settings = dict(args.set or [])
    try:
        BROKER.parse(settings)
    except ValueError as exc:
        print(f"epochlog up: {exc}", file=sys.stderr)
        return 2
    cluster = LocalCluster(
        os.path.abspath(args.data_dir), args.brokers, args.port, settings, args.metrics_port
    )
    if args.secure:
        os.makedirs(cluster.data_dir, exist_ok=True)
        cluster.security = local_security.prepare(cluster.data_dir, cluster.metastore)
    return run_local_cluster(cluster)


def _cmd_settings(args: argparse.Namespace) -> int:
    from epochlog.tools.settings_reference import reference

    print(reference(), end="")
    return 0


def _run(work: Callable[[], Awaitable[str] | str]) -> int:
    """Print what a command produced, or its error, as an operator tool should."""
    try:
        result = work()
        print(asyncio.run(result) if inspect.isawaitable(result) else result)
    except (KafkaError, ClientError, OSError, ValueError, RuntimeError) as exc:
        print(f"epochlog: {exc}", file=sys.stderr)
        return 1
    return 0


def _client(args: argparse.Namespace) -> dict[str, str]:
    """The client settings of an operator command: ``--bootstrap-server`` and whatever
    ``--command-config`` holds (security.protocol, ssl.*, as kafka-*.sh take them)."""
    settings: dict[str, str] = {}
    if args.command_config:
        with open(args.command_config, encoding="utf-8") as f:
            settings.update(parse_properties(f.read()))
    settings["bootstrap.servers"] = args.bootstrap_server
    return settings


def _cmd_topics(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.action == "create":
        return _run(
            lambda: admin_commands.topics_create(
                client,
                args.topic,
                args.partitions,
                args.replication_factor,
                dict(args.config or []),
            )
        )
    if args.action == "delete":
        return _run(lambda: admin_commands.topics_delete(client, args.topic))
    if args.action == "alter":
        return _run(
            lambda: admin_commands.topics_alter(client, args.topic, dict(args.config or []))
        )
    if args.action == "list":
        return _run(lambda: admin_commands.topics_list(client))
    names = [args.topic] if args.topic else None
    return _run(lambda: admin_commands.topics_describe(client, names, args.json))


def _cmd_groups(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.action == "list":
        return _run(lambda: admin_commands.groups_list(client, args.json))
    return _run(lambda: admin_commands.groups_describe(client, args.group, args.json))


def _records_before(args: argparse.Namespace) -> dict[tuple[str, int], int]:
    if args.offset_json_file:
        with open(args.offset_json_file, encoding="utf-8") as f:
            return admin_commands.offsets_from_json(f.read())
    return {(args.topic, args.partition): args.offset}


def _cmd_records(args: argparse.Namespace) -> int:
    if not (args.topic or args.offset_json_file):
        print("epochlog: records delete needs a topic or --offset-json-file", file=sys.stderr)
        return 2
    return _run(
        lambda: admin_commands.records_delete(_client(args), _records_before(args), args.json)
    )


async def _status(client: dict[str, str], json_out: bool) -> str:
    return admin_commands.format_status(await admin_commands.cluster_status(client), json_out)


def _cmd_status(args: argparse.Namespace) -> int:
    return _run(lambda: _status(_client(args), args.json))


def _cmd_quarantine(args: argparse.Namespace) -> int:
    from epochlog.tools import quarantine

    if args.action == "list":
        return _run(lambda: quarantine.format_entries(quarantine.entries(args.log_dirs.split(","))))
    if args.action == "show":
        return _run(lambda: quarantine.show(args.file))
    return _run(lambda: quarantine.replay(args.file, _client(args), args.topic, args.partition))


async def _console(args: argparse.Namespace) -> None:
    # aiohttp comes with the `console` extra: only this command needs it.
    from epochlog.console import app as console_app
    from epochlog.seams.real import real_seams

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await console_app.serve(
        _client(args), args.host, args.port, args.allow_actions, real_seams(), stop
    )


def _cmd_console(args: argparse.Namespace) -> int:
    configure_logging(args.log_level)
    try:
        asyncio.run(_console(args))
    except OSError as exc:  # the port is taken, or the --command-config file missing
        print(f"epochlog console: {exc}", file=sys.stderr)
        return 1
    return 0


def _cmd_transactions(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.action == "list":
        return _run(lambda: admin_commands.transactions_list(client))
    if args.action == "describe":
        if not args.transactional_id:
            print("epochlog: transactions describe needs a transactional id", file=sys.stderr)
            return 2
        return _run(lambda: admin_commands.transactions_describe(client, args.transactional_id))
    if args.action == "find-hanging":
        return _find_hanging(args, client)
    if args.action == "abort":
        return _abort(args, client)
    if not args.topic:
        print("epochlog: transactions describe-producers needs --topic", file=sys.stderr)
        return 2
    return _run(
        lambda: admin_commands.transactions_describe_producers(
            client, args.topic, args.partition or 0
        )
    )


def _find_hanging(args: argparse.Namespace, client: dict[str, str]) -> int:
    """kafka-transactions.sh find-hanging's options and their rules."""
    if args.topic is None and args.broker_id is None:
        print("epochlog: transactions find-hanging needs --topic or --broker-id", file=sys.stderr)
        return 2
    if args.partition is not None and args.topic is None:
        print("epochlog: --partition needs --topic", file=sys.stderr)
        return 2
    now_ms = int(time.time() * 1000)
    return _run(
        lambda: admin_commands.transactions_find_hanging(
            client,
            args.topic,
            args.partition,
            args.broker_id,
            args.max_transaction_timeout,
            now_ms,
        )
    )


def _abort(args: argparse.Namespace, client: dict[str, str]) -> int:
    """kafka-transactions.sh abort: --topic and --partition, and --start-offset or
    --producer-id, --producer-epoch and --coordinator-epoch."""
    if args.topic is None or args.partition is None:
        print("epochlog: transactions abort needs --topic and --partition", file=sys.stderr)
        return 2
    ids = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is None and args.producer_id is None:
        print(
            "epochlog: transactions abort needs --start-offset, or --producer-id, "
            "--producer-epoch and --coordinator-epoch",
            file=sys.stderr,
        )
        return 2
    if args.start_offset is None and None in ids:
        print(
            "epochlog: --producer-id needs --producer-epoch and --coordinator-epoch",
            file=sys.stderr,
        )
        return 2
    producer = None if args.start_offset is not None else ids
    return _run(
        lambda: admin_commands.transactions_abort(
            client, args.topic, args.partition, args.start_offset, producer
        )
    )


def _cmd_log_dirs(args: argparse.Namespace) -> int:
    return _run(lambda: log_dirs.run(args, _client(args)))


def _cmd_users(args: argparse.Namespace) -> int:
    return _run(lambda: users.run_users(args, _client(args)))


def _add_client_arguments(parser: argparse.ArgumentParser, json_out: bool = True) -> None:
    parser.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP)
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client settings (security.protocol, ssl.*, sasl.*), a properties file as "
        "kafka-*.sh take",
    )
    if json_out:
        parser.add_argument("--json", action="store_true", help="JSON instead of tables")


def _cmd_acls(args: argparse.Namespace) -> int:
    client = _client(args)
    return _run(lambda: acl_commands.run(client, args))


def _cmd_reassign(args: argparse.Namespace) -> int:
    client = _client(args)
    return _run(lambda: reassign_commands.run(client, args))


def _cmd_quotas(args: argparse.Namespace) -> int:
    client = _client(args)
    return _run(lambda: quota_commands.run(client, args))


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
    broker.add_argument("--listeners", help="NAME://HOST:PORT[,NAME://HOST:PORT...]")
    broker.add_argument("--log-dirs", help="comma-separated log directories")
    broker.add_argument(
        "--metastore",
        help="zk://HOST:PORT[,HOST:PORT...][/chroot] | sqlite:///PATH | memory:// "
        "(default: SQLite in log dir)",
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
    up.add_argument(
        "--metrics-port", type=int, default=0, help="first broker's /metrics port (0: none)"
    )
    up.add_argument(
        "--secure",
        action="store_true",
        help="SASL_SSL only: a local CA, SCRAM-SHA-512 users, DATA_DIR/client.properties",
    )
    up.add_argument("--set", action="append", type=_key_value, metavar="KEY=VALUE")
    up.set_defaults(func=_cmd_up)

    topics = sub.add_parser("topics", help="create, alter, delete, list or describe topics")
    topics.add_argument("action", choices=["create", "alter", "delete", "list", "describe"])
    topics.add_argument("topic", nargs="?")
    _add_client_arguments(topics)
    topics.add_argument("--partitions", type=int, default=-1)
    topics.add_argument("--replication-factor", type=int, default=-1)
    topics.add_argument("--config", action="append", type=_key_value, metavar="KEY=VALUE")
    topics.set_defaults(func=_cmd_topics)

    groups = sub.add_parser("groups", help="list and describe consumer groups")
    groups.add_argument("action", choices=["list", "describe"])
    groups.add_argument("group", nargs="?")
    _add_client_arguments(groups)
    groups.set_defaults(func=_cmd_groups)

    records = sub.add_parser("records", help="delete records before an offset")
    records.add_argument("action", choices=["delete"])
    records.add_argument("topic", nargs="?")
    records.add_argument("--partition", type=int, default=0)
    records.add_argument("--offset", type=int, default=-1, help="-1: the high watermark")
    records.add_argument("--offset-json-file", help="kafka-delete-records.sh's JSON")
    _add_client_arguments(records)
    records.set_defaults(func=_cmd_records)

    reassign = sub.add_parser(
        "reassign", help="move partitions between brokers (kafka-reassign-partitions.sh)"
    )
    reassign_commands.add_arguments(reassign)
    _add_client_arguments(reassign, json_out=False)
    reassign.set_defaults(func=_cmd_reassign)

    status = sub.add_parser("status", help="per-partition leadership and offsets")
    _add_client_arguments(status)
    status.set_defaults(func=_cmd_status)

    console = sub.add_parser("console", help="a web console over the admin API")
    _add_client_arguments(console, json_out=False)
    console.add_argument("--host", default="127.0.0.1")
    console.add_argument("--port", type=int, default=8080, help="0: any free port")
    console.add_argument(
        "--allow-actions",
        action="store_true",
        help="enable quarantine replay (read-only without it)",
    )
    console.add_argument("--log-level", default="INFO")
    console.set_defaults(func=_cmd_console)

    kept = sub.add_parser("quarantine", help="what truncations kept aside")
    kept.add_argument("action", choices=["list", "show", "replay"])
    kept.add_argument("file", nargs="?", help="a quarantine .log file (show, replay)")
    kept.add_argument("--log-dirs", default="var/epochlog/broker-0")
    _add_client_arguments(kept, json_out=False)
    kept.add_argument("--topic")
    kept.add_argument("--partition", type=int, default=0)
    kept.set_defaults(func=_cmd_quarantine)

    txn = sub.add_parser(
        "transactions",
        help="list and describe transactions and producers; find and abort hanging ones",
    )
    txn.add_argument(
        "action", choices=["list", "describe", "describe-producers", "find-hanging", "abort"]
    )
    txn.add_argument("transactional_id", nargs="?")
    _add_client_arguments(txn, json_out=False)
    txn.add_argument("--topic")
    txn.add_argument("--partition", type=int, help="describe-producers: 0 unless given")
    txn.add_argument("--broker-id", type=int, help="find-hanging: partitions it holds")
    txn.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=15,
        metavar="MINUTES",
        help="find-hanging: open longer than this (transaction.max.timeout.ms, 15)",
    )
    txn.add_argument("--start-offset", type=int, help="abort: the transaction's first offset")
    txn.add_argument("--producer-id", type=int, help="abort: without --start-offset")
    txn.add_argument("--producer-epoch", type=int, help="abort: with --producer-id")
    txn.add_argument("--coordinator-epoch", type=int, help="abort: with --producer-id")
    txn.set_defaults(func=_cmd_transactions)

    dirs_cmd = sub.add_parser(
        "log-dirs", help="describe each broker's log dirs; move a replica to another dir"
    )
    log_dirs.add_arguments(dirs_cmd)
    _add_client_arguments(dirs_cmd)
    dirs_cmd.set_defaults(func=_cmd_log_dirs)

    users_cmd = sub.add_parser("users", help="add, list and remove SCRAM users")
    users.add_arguments(users_cmd)
    _add_client_arguments(users_cmd, json_out=False)
    users_cmd.set_defaults(func=_cmd_users)

    acls = sub.add_parser("acls", help="add, list and remove ACLs")
    acl_commands.add_arguments(acls)
    _add_client_arguments(acls, json_out=False)
    acls.set_defaults(func=_cmd_acls)

    quotas = sub.add_parser("quotas", help="alter and describe client quotas")
    quota_commands.add_arguments(quotas)
    _add_client_arguments(quotas)
    quotas.set_defaults(func=_cmd_quotas)

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
    if args.command == "groups" and args.action == "describe" and not args.group:
        parser.error("groups describe needs a group")
    if args.command == "quarantine" and args.action != "list" and not args.file:
        parser.error(f"quarantine {args.action} needs a file")
    if args.command == "quarantine" and args.action == "replay" and not args.topic:
        parser.error("quarantine replay needs --topic")
    return args.func(args)
