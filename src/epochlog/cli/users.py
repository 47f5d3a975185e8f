"""``epochlog users add|list|remove``: SCRAM users, as kafka-configs.sh --entity-type
users manages them. Through a broker (AlterUserScramCredentials; ``--command-config``
for a secured listener, as every operator command), or straight in the metastore with
``--metastore`` (as kafka-configs.sh --zookeeper could): how the inter-broker user is
made before any broker can authenticate to another."""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from epochlog.client.admin import AsyncAdmin
from epochlog.metastore import open_metastore
from epochlog.seams.real import real_seams
from epochlog.security.scram_credentials import (
    MECHANISMS,
    MIN_ITERATIONS,
    alter_user,
    credential_for_password,
    read_users,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["add", "list", "remove"])
    parser.add_argument("--metastore", help="write the metastore directly instead of a broker")
    parser.add_argument("--mechanism", default="SCRAM-SHA-512", choices=sorted(MECHANISMS))
    parser.add_argument("--user")
    parser.add_argument("--password")
    parser.add_argument("--iterations", type=int, default=MIN_ITERATIONS)


def _format(users: dict[str, dict[str, int]]) -> str:
    return "\n".join(
        f"{user} " + " ".join(f"{m}(iterations={i})" for m, i in sorted(found.items()))
        for user, found in sorted(users.items())
    )


async def _through_metastore(args: argparse.Namespace) -> str:
    store = await open_metastore(args.metastore, real_seams().clock)
    try:
        if args.action == "list":
            users = await read_users(store)
            return _format({u: {m: c.iterations for m, c in f.items()} for u, f in users.items()})
        if args.action == "remove":
            if not await alter_user(store, args.user, args.mechanism, None):
                raise ValueError(f"user {args.user} has no {args.mechanism} credential")
            return f"removed the {args.mechanism} credential of {args.user}"
        credential = credential_for_password(args.mechanism, args.password, args.iterations)
        await alter_user(store, args.user, args.mechanism, credential)
        return f"set the {args.mechanism} credential of {args.user}"
    finally:
        await store.close()


async def _through_broker(args: argparse.Namespace, client: Mapping[str, str]) -> str:
    admin = AsyncAdmin(dict(client), real_seams())
    try:
        if args.action == "list":
            return _format(await admin.describe_scram_credentials())
        if args.action == "remove":
            await admin.delete_scram_credential(args.user, args.mechanism)
            return f"removed the {args.mechanism} credential of {args.user}"
        await admin.upsert_scram_credential(
            args.user, args.mechanism, args.password, args.iterations
        )
        return f"set the {args.mechanism} credential of {args.user}"
    finally:
        await admin.close()


async def run_users(args: argparse.Namespace, client: Mapping[str, str]) -> str:
    """What ``epochlog users`` prints; ``client``: the settings to reach a broker with."""
    if args.action != "list" and not args.user:
        raise ValueError(f"users {args.action} needs --user")
    if args.action == "add" and not args.password:
        raise ValueError("users add needs --password")
    return await (_through_metastore(args) if args.metastore else _through_broker(args, client))
