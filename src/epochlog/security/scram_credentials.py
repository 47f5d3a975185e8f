"""SCRAM credentials (RFC 5802/7677) as Kafka keeps them: per user and mechanism a salt,
an iteration count, the stored key and the server key, never the password. They live
in the metastore at ``/config/users/<user>`` (Kafka's ZooKeeper layout, the name
sanitized: ``{"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,
server_key=...,iterations=4096"}}``, beside the user's quotas) and every broker follows
them into a ``ScramUsers`` table."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass

from epochlog.metadata import layout
from epochlog.metastore.api import Metastore, NodeExistsError, NoNodeError
from epochlog.metastore.entity_config import change_entity_config, entity_names

log = logging.getLogger("epochlog.security")

# AlterUserScramCredentials' int8 mechanism (Kafka's ScramMechanism), and each hash.
MECHANISMS = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {code: name for name, code in MECHANISMS.items()}
_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's bounds on a credential's iterations (ScramMechanism.minIterations, and the
# maximum AlterUserScramCredentials accepts).
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        """Kafka's ScramCredentialUtils text."""
        return ",".join(
            (
                f"salt={base64.b64encode(self.salt).decode()}",
                f"stored_key={base64.b64encode(self.stored_key).decode()}",
                f"server_key={base64.b64encode(self.server_key).decode()}",
                f"iterations={self.iterations}",
            )
        )

    @classmethod
    def from_kafka(cls, text: str) -> ScramCredential:
        fields = dict(part.split("=", 1) for part in text.split(","))
        return cls(
            base64.b64decode(fields["salt"]),
            base64.b64decode(fields["stored_key"]),
            base64.b64decode(fields["server_key"]),
            int(fields["iterations"]),
        )


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with the mechanism's HMAC (what a client sends in
    AlterUserScramCredentials, so the password never travels)."""
    return hashlib.pbkdf2_hmac(_HASHES[mechanism], password.encode(), salt, iterations)


def credential_for_password(mechanism: str, password: str, iterations: int) -> ScramCredential:
    """A new credential for ``password``, with a fresh salt from the OS's secure source
    (never a seeded Random: salts must not be guessable)."""
    salt = secrets.token_bytes(32)
    return credential_from_salted(
        mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
    )


def credential_from_salted(
    mechanism: str, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """The stored and server keys of RFC 5802 §3 from a salted password."""
    name = _HASHES[mechanism]
    client_key = hmac.new(salted, b"Client Key", name).digest()
    return ScramCredential(
        salt,
        hashlib.new(name, client_key).digest(),
        hmac.new(salted, b"Server Key", name).digest(),
        iterations,
    )


def user_path(user: str) -> str:
    return f"{layout.CONFIG_USERS}/{layout.sanitize(user)}"


def decode_user(data: bytes) -> dict[str, ScramCredential]:
    """A user node's SCRAM credentials by mechanism (its quota entries ignored)."""
    config = layout.decode_entity_config(data)
    return {m: ScramCredential.from_kafka(config[m]) for m in MECHANISMS if m in config}


class ScramUsers:
    """Every user's SCRAM credentials as this broker last read them (what a SCRAM
    exchange looks a user up in, synchronously)."""

    def __init__(self) -> None:
        self.users: dict[str, dict[str, ScramCredential]] = {}
        self._store: Metastore | None = None
        self._watches: dict[str, object] = {}

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    async def follow(self, store: Metastore) -> None:
        """Read every user now and on every change of the users or their credentials."""
        self._store = store
        with contextlib.suppress(NodeExistsError):
            await store.create(layout.CONFIG_USERS, make_parents=True)
        await store.watch_children(layout.CONFIG_USERS, self._refresh)
        await self._refresh()

    async def _refresh(self, _event: object = None) -> None:
        assert self._store is not None
        names = {layout.desanitize(n) for n in await self._store.children(layout.CONFIG_USERS)}
        for name in sorted(names - set(self._watches)):
            self._watches[name] = await self._store.watch_data(user_path(name), self._changed)
            await self._read(name)
        for name in sorted(set(self._watches) - names):
            self._watches.pop(name).cancel()  # type: ignore[attr-defined]
            self.users.pop(name, None)

    async def _changed(self, event: object) -> None:
        name = event.path.rsplit("/", 1)[1]  # type: ignore[attr-defined]
        await self._read(layout.desanitize(name))

    async def _read(self, name: str) -> None:
        assert self._store is not None
        try:
            data, _ = await self._store.get(user_path(name))
            self.users[name] = decode_user(data)
        except NoNodeError:
            self.users.pop(name, None)
        except (ValueError, KeyError) as exc:
            log.error("unreadable SCRAM credentials of user %s: %r", name, exc)
            self.users.pop(name, None)


async def read_users(store: Metastore) -> dict[str, dict[str, ScramCredential]]:
    """Every user with SCRAM credentials, straight from the metastore."""
    users = {}
    for node_name in await entity_names(store, layout.CONFIG_USERS):
        name = layout.desanitize(node_name)
        try:
            credentials = decode_user((await store.get(user_path(name)))[0])
        except NoNodeError:
            continue
        if credentials:
            users[name] = credentials
    return users


async def alter_user(
    store: Metastore, user: str, mechanism: str, credential: ScramCredential | None
) -> bool:
    """Set (or with None remove) one mechanism's credential of ``user`` by
    compare-and-set, leaving the node's other entries (quotas) as they are; False when
    there was nothing to remove. A node left with nothing goes."""

    def change(config: dict[str, str]) -> dict[str, str]:
        if credential is None:
            config.pop(mechanism, None)
        else:
            config[mechanism] = credential.to_kafka()
        return config

    old = await change_entity_config(store, user_path(user), change, layout.CONFIG_USERS)
    return credential is not None or mechanism in old
