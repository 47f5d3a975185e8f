"""AlterUserScramCredentials (v0, KIP-554): upsert or delete users' SCRAM credentials.
The client sends a salt and the salted password, never the password; the broker keeps
only the stored and server keys derived from them, in the metastore, where every
broker follows them. One result per user; a user with any invalid alteration has none
of its alterations applied, as Kafka does."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kafka.protocol.admin.users import AlterUserScramCredentialsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.scram_credentials import (
    MAX_ITERATIONS,
    MECHANISM_NAMES,
    MIN_ITERATIONS,
    alter_user,
    credential_from_salted,
)
from epochlog.security.session import Session

API = api(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)

_Result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult


def _refusal(alteration: Any, upsert: bool) -> tuple[ErrorCode, str] | None:
    if not alteration.name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if alteration.mechanism not in MECHANISM_NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if upsert and not MIN_ITERATIONS <= alteration.iterations <= MAX_ITERATIONS:
        return (
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Iterations must be in {MIN_ITERATIONS}..{MAX_ITERATIONS}",
        )
    if upsert and (not alteration.salt or not alteration.salted_password):
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    assert broker.cluster is not None
    alterations = [(d, False) for d in request.deletions or []] + [
        (u, True) for u in request.upsertions or []
    ]
    pairs = Counter((a.name, a.mechanism) for a, _ in alterations)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    refused = refusal(broker.authorizer, session, ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "cluster")
    if refused != ErrorCode.NONE:  # Kafka: ALTER on the cluster, for every user named
        errors = {a.name: (refused, "ALTER on the cluster is needed") for a, _ in alterations}
    for alteration, upsert in alterations:
        if pairs[(alteration.name, alteration.mechanism)] > 1:
            errors.setdefault(
                alteration.name,
                (ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in "
                 "the same request"),
            )  # fmt: skip
        invalid = _refusal(alteration, upsert)
        if invalid is not None:
            errors.setdefault(alteration.name, invalid)
    for alteration, upsert in alterations:
        if alteration.name in errors:
            continue
        mechanism = MECHANISM_NAMES[alteration.mechanism]
        credential = (
            credential_from_salted(
                mechanism,
                bytes(alteration.salt),
                bytes(alteration.salted_password),
                alteration.iterations,
            )
            if upsert
            else None
        )
        if not await alter_user(broker.cluster.store, alteration.name, mechanism, credential):
            errors[alteration.name] = (
                ErrorCode.RESOURCE_NOT_FOUND,
                f"Attempt to delete a user credential that does not exist: {mechanism}",
            )
    names = sorted({a.name for a, _ in alterations})
    return AlterUserScramCredentialsResponse(
        throttle_time_ms=0,
        results=[
            _Result(
                user=name,
                error_code=errors.get(name, (ErrorCode.NONE, None))[0],
                error_message=errors.get(name, (ErrorCode.NONE, None))[1],
            )
            for name in names
        ],
    )
