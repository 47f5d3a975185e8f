"""Quota entities and keys as Kafka names them, and what AlterClientQuotas and
DescribeClientQuotas accept, with Kafka's errors (its ClientQuotaControlManager and
ClientQuotasImage, the KRaft controller's rules). No I/O.

An entity is a user, a client id, or both, each either named or the default of its
type (``<default>`` in kafka-configs.sh, a null name on the wire). Keys:
``producer_byte_rate`` and ``consumer_byte_rate`` (bytes per second, whole numbers) and
``request_percentage`` (a share of request handling time, 100 = one thread's worth).
Kafka also knows ``controller_mutation_rate`` (KIP-599) and IP entities with
``connection_creation_rate`` (KIP-612); epochlog enforces neither, so it refuses them
rather than store a quota it would not apply."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from epochlog.metadata import layout
from epochlog.protocol.errors import ErrorCode, KafkaError

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
# Each key Kafka's QuotaConfig declares for users and client ids: whether its values
# are whole numbers (LONG) rather than DOUBLE.
QUOTA_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True, REQUEST_PERCENTAGE: False}
NOT_ENFORCED = {
    "controller_mutation_rate": "controller mutation quotas (KIP-599)",
    "connection_creation_rate": "connection rate quotas (KIP-612)",
}

# DescribeClientQuotas match types.
MATCH_EXACT = 0
MATCH_DEFAULT = 1
MATCH_SPECIFIED = 2


class _Default:
    """The default entity of a type: ``<default>``, a null name on the wire."""

    __slots__ = ()

    def __repr__(self) -> str:
        return layout.DEFAULT_ENTITY


DEFAULT = _Default()
Name = str | _Default


def _invalid(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_REQUEST, message)


@dataclass(frozen=True)
class QuotaEntity:
    """A user, a client id or both (None: that type is not part of the entity)."""

    user: Name | None = None
    client_id: Name | None = None

    def parts(self) -> list[tuple[str, str | None]]:
        """(entity type, name) as the wire carries them: a default's name is None."""
        out = []
        for kind, name in ((USER, self.user), (CLIENT_ID, self.client_id)):
            if name is not None:
                out.append((kind, None if name is DEFAULT else name))
        return out

    def path(self) -> str:
        """Its node in Kafka's ZooKeeper layout."""

        def node(name: Name) -> str:
            return layout.DEFAULT_ENTITY if name is DEFAULT else layout.sanitize(name)  # type: ignore[arg-type]

        if self.user is None:
            assert self.client_id is not None
            return f"{layout.CONFIG_CLIENTS}/{node(self.client_id)}"
        path = f"{layout.CONFIG_USERS}/{node(self.user)}"
        if self.client_id is not None:
            path += f"/clients/{node(self.client_id)}"
        return path

    def __str__(self) -> str:
        def shown(name: Name) -> str:
            return layout.DEFAULT_ENTITY if name is DEFAULT else repr(name)

        return ", ".join(
            f"{kind} {shown(name)}"
            for kind, name in ((USER, self.user), (CLIENT_ID, self.client_id))
            if name is not None
        )


def node_name(node: str) -> Name:
    """A name as a node holds it (sanitized, or ``<default>``)."""
    return DEFAULT if node == layout.DEFAULT_ENTITY else layout.desanitize(node)


def entity_from_parts(parts: Iterable[tuple[str, str | None]]) -> QuotaEntity:
    """The entity an AlterClientQuotas entry names; KafkaError(INVALID_REQUEST) with
    Kafka's message for an empty, repeated, unknown or unsupported one."""
    found: dict[str, Name] = {}
    for kind, name in parts:
        if kind in found:
            raise _invalid(f"Invalid client quota entity, duplicate entity entry {kind}")
        if kind == IP:
            raise _invalid("Unhandled client quota entity type: ip (IP connection-rate "
                           "quotas are not supported by epochlog)")  # fmt: skip
        if kind not in (USER, CLIENT_ID):
            raise _invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            raise _invalid(f"Empty {kind} not supported")
        found[kind] = DEFAULT if name is None else name
    if not found:
        raise _invalid("Invalid empty client quota entity")
    return QuotaEntity(found.get(USER), found.get(CLIENT_ID))


def check_value(key: str, value: float) -> None:
    """Kafka's rules for a value set by AlterClientQuotas (KafkaError INVALID_REQUEST)."""
    if key in NOT_ENFORCED:
        raise _invalid(f"Invalid configuration key {key}: {NOT_ENFORCED[key]} are not "
                       "supported by epochlog")  # fmt: skip
    if key not in QUOTA_KEYS:
        raise _invalid(f"Invalid configuration key {key}")
    if math.isnan(value) or value <= 0.0:
        raise _invalid(f"Quota {key} must be greater than 0")
    if QUOTA_KEYS[key]:
        if value > 2**63 - 1:
            raise _invalid(f"Proposed value for {key} is too large for a LONG.")
        if abs(math.fmod(value, 1.0)) > 1e-6:
            raise _invalid(f"{key} cannot be a fractional value.")


def stored_text(key: str, value: float) -> str:
    """A value as the node holds it: whole numbers for LONG keys, as Kafka writes them."""
    return str(int(value + 1e-6)) if QUOTA_KEYS.get(key) else repr(float(value))


def quotas_of(config: dict[str, str]) -> dict[str, float]:
    """The quota entries of an entity config node (its SCRAM credentials left aside)."""
    out = {}
    for key, text in config.items():
        if key in QUOTA_KEYS:
            try:
                out[key] = float(text)
            except ValueError:
                continue
    return out


def describe_filter(
    components: Iterable[tuple[str, int, str | None]], strict: bool
) -> Callable[[QuotaEntity], bool]:
    """What a DescribeClientQuotas filter matches, by Kafka's ClientQuotasImage rules:
    (entity type, match type, match) components, each type at most once; ``strict``
    leaves out entities with types the filter does not name. KafkaError with Kafka's
    code for a filter it refuses (UNSUPPORTED_VERSION for an unknown entity type)."""
    exact: dict[str, str | None] = {}
    present: set[str] = set()
    for kind, match_type, match in components:
        if not kind:
            raise _invalid("Invalid empty entity type.")
        if kind in exact or kind in present:
            raise _invalid(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in (USER, CLIENT_ID, IP):
            raise KafkaError(ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise _invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
            exact[kind] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise _invalid(
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
                )
            exact[kind] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise _invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."
                )
            present.add(kind)
        else:
            raise _invalid(f"Unknown match type {match_type}")
    if IP in exact or IP in present:
        if {USER, CLIENT_ID} & (set(exact) | present):
            raise _invalid(
                "Invalid entity filter component combination. IP filter component "
                "should not be used with user or clientId filter component."
            )
        return lambda _entity: False  # epochlog keeps no IP quotas

    def matches(entity: QuotaEntity) -> bool:
        parts = dict(entity.parts())
        if strict and len(parts) != len(exact) + len(present):
            return False
        return all(k in parts and parts[k] == v for k, v in exact.items()) and all(
            k in parts for k in present
        )

    return matches
