"""``epochlog`` command line."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence

from epochlog.broker.broker import Broker
from epochlog.broker.config import BrokerConfig, parse_properties
from epochlog.cli.logs import configure_logging
from epochlog.seams import real_seams


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
    props.update(dict(args.set or []))
    return BrokerConfig.from_mapping(props)


async def run_broker(config: BrokerConfig) -> None:
    """Serve until SIGTERM or SIGINT, then stop cleanly (flush, checkpoints)."""
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
    data = os.path.abspath(args.data_dir)
    os.makedirs(data, exist_ok=True)
    props = {
        "broker.id": "0",
        "listeners": f"PLAINTEXT://127.0.0.1:{args.port}",
        "log.dirs": os.path.join(data, "broker-0"),
    }
    props.update(dict(args.set or []))
    configure_logging(args.log_level)
    config = BrokerConfig.from_mapping(props)
    print(f"bootstrap.servers=127.0.0.1:{args.port}  (data in {data}; Ctrl-C stops)", flush=True)
    with asyncio.Runner() as runner:
        runner.run(run_broker(config))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="epochlog", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    broker = sub.add_parser("broker", help="run one broker")
    broker.add_argument("--config", help="a server.properties file (Kafka setting names)")
    broker.add_argument("--broker-id", type=int)
    broker.add_argument("--listeners", help="PLAINTEXT://HOST:PORT")
    broker.add_argument("--log-dirs", help="comma-separated log directories")
    broker.add_argument(
        "--set",
        action="append",
        type=_key_value,
        metavar="KEY=VALUE",
        help="any broker setting by its Kafka name; repeatable",
    )
    broker.add_argument("--log-level", default="INFO")
    broker.set_defaults(func=_cmd_broker)

    up = sub.add_parser("up", help="run a local cluster on loopback")
    up.add_argument("--data-dir", default="var/epochlog")
    up.add_argument("--port", type=int, default=9092)
    up.add_argument("--set", action="append", type=_key_value, metavar="KEY=VALUE")
    up.add_argument("--log-level", default="INFO")
    up.set_defaults(func=_cmd_up)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)
