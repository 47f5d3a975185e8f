"""``epochlog quotas alter|describe``: client quotas as kafka-configs.sh sets and shows
them (``--entity-type users|clients``, ``--entity-name`` or ``--entity-default``, the two
types together for a (user, client id) pair; ``--user``/``--client`` and
``--user-defaults``/``--client-defaults`` as shorthands), through the admin client's
AlterClientQuotas and DescribeClientQuotas, with the operator commands' client
settings (``--bootstrap-server``, ``--command-config``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import Any

from epochlog.client.admin import AsyncAdmin
from epochlog.quotas.entities import (
    CLIENT_ID,
    DEFAULT,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    USER,
    QuotaEntity,
)
from epochlog.seams.real import real_seams

# An entity type given without a name: any name of that type (describe only).
ANY = object()
# kafka-configs.sh's entity types and the quota entity type each stands for.
ENTITY_TYPES = {"users": USER, "clients": CLIENT_ID}


class _Entities(argparse.Action):
    """Keeps --entity-type, --entity-name and --entity-default in the order given, as
    kafka-configs.sh pairs them (the n-th name with the n-th type)."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: Any, value: Any, option: str | None = None
    ) -> None:
        given = list(getattr(namespace, "entities", None) or [])
        kind = self.const
        if kind == "type":
            if value not in ENTITY_TYPES:
                parser.error(f"--entity-type must be users or clients, not {value!r}")
            given.append(("type", ENTITY_TYPES[value]))
        elif kind == "name":
            given.append(("name", value))
        elif kind == "default":
            given.append(("name", None))
        else:  # --user / --client [NAME], --user-defaults / --client-defaults
            entity_type, name = kind
            given += [("type", entity_type), ("name", value if name is None else name)]
        namespace.entities = given


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["alter", "describe"])
    ordered: dict[str, Any] = {"dest": "entities", "action": _Entities}
    parser.add_argument("--entity-type", const="type", metavar="users|clients", **ordered)
    parser.add_argument("--entity-name", const="name", **ordered)
    parser.add_argument("--entity-default", const="default", nargs=0, **ordered)
    parser.add_argument("--user", const=(USER, None), metavar="NAME", **ordered)
    parser.add_argument("--client", const=(CLIENT_ID, None), metavar="CLIENT_ID", **ordered)
    parser.add_argument("--user-defaults", const=(USER, DEFAULT), nargs=0, **ordered)
    parser.add_argument("--client-defaults", const=(CLIENT_ID, DEFAULT), nargs=0, **ordered)
    parser.add_argument(
        "--add-config",
        metavar="K=V[,K=V...]",
        help="quotas to set: producer_byte_rate, consumer_byte_rate, request_percentage",
    )
    parser.add_argument("--delete-config", metavar="K[,K...]", help="quotas to remove")


def entity_specs(given: Sequence[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """(entity type, name) pairs from the options in order: a name (or the default,
    None) pairs with the type before it; a type alone means any name of it."""
    specs: list[list[Any]] = []
    for what, value in given:
        if what == "type":
            specs.append([value, ANY])
        elif not specs or specs[-1][1] is not ANY:
            raise ValueError("--entity-name or --entity-default must follow an --entity-type")
        else:
            specs[-1][1] = DEFAULT if value is None or value is DEFAULT else value
    kinds = [kind for kind, _ in specs]
    if len(set(kinds)) != len(kinds):
        raise ValueError("each entity type may be given once")
    return [(kind, name) for kind, name in specs]


def _ops(args: argparse.Namespace) -> dict[str, float | None]:
    ops: dict[str, float | None] = {}
    for item in filter(None, (args.add_config or "").split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--add-config expects key=value, got {item!r}")
        try:
            ops[key.strip()] = float(value)
        except ValueError:
            raise ValueError(f"{key.strip()}: {value!r} is not a number") from None
    for key in filter(None, (args.delete_config or "").split(",")):
        ops[key.strip()] = None
    if not ops:
        raise ValueError("quotas alter needs --add-config or --delete-config")
    return ops


def _shown(name: Any) -> str:
    return "<default>" if name is DEFAULT else repr(name)


def describe_line(entity: QuotaEntity, quotas: Mapping[str, float]) -> str:
    """kafka-configs.sh's sentence for one entity."""
    names = []
    if entity.user is not None:
        names.append(f"user-principal {_shown(entity.user)}")
    if entity.client_id is not None:
        names.append(f"client-id {_shown(entity.client_id)}")
    values = ", ".join(f"{k}={v}" for k, v in sorted(quotas.items()))
    return f"Quota configs for {', '.join(names)} are {values}"


def _as_json(found: Mapping[QuotaEntity, Mapping[str, float]]) -> str:
    rows = []
    for entity, quotas in found.items():
        row: dict[str, Any] = {}
        for kind, name in entity.parts():
            row[kind] = "<default>" if name is None else name
        rows.append({"entity": row, "quotas": dict(sorted(quotas.items()))})
    return json.dumps(rows, indent=2)


async def run(client: Mapping[str, str], args: argparse.Namespace) -> str:
    specs = entity_specs(getattr(args, "entities", None) or [])
    admin = AsyncAdmin(dict(client), real_seams())
    try:
        if args.action == "alter":
            if not specs or any(name is ANY for _, name in specs):
                raise ValueError("quotas alter needs an entity: --entity-type with "
                                 "--entity-name or --entity-default")  # fmt: skip
            named = dict(specs)
            entity = QuotaEntity(named.get(USER), named.get(CLIENT_ID))
            await admin.alter_client_quotas({entity: _ops(args)})
            return f"Completed updating config for {entity}."
        components = [
            (kind, MATCH_SPECIFIED, None)
            if name is ANY
            else (kind, MATCH_DEFAULT, None)
            if name is DEFAULT
            else (kind, MATCH_EXACT, name)
            for kind, name in specs
        ]
        # As kafka-configs.sh: only entities of exactly the types named.
        found = await admin.describe_client_quotas(components, strict=bool(components))
        if args.json:
            return _as_json(found)
        lines = [describe_line(e, q) for e, q in sorted(found.items(), key=lambda i: str(i[0]))]
        return "\n".join(lines) if lines else "No quotas match."
    finally:
        await admin.close()
