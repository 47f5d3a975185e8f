"""Mixed into AsyncAdmin: SCRAM users (KIP-554, what kafka-configs.sh --alter
--add-config 'SCRAM-SHA-512=[password=...]' --entity-type users does). The password
never leaves the client: it sends a fresh salt and the salted password."""

from __future__ import annotations

import secrets
from typing import Any

from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.security.scram_credentials import (
    MECHANISM_NAMES,
    MECHANISMS,
    MIN_ITERATIONS,
    salted_password,
)

_Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
_Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion


def _mechanism(name: str) -> int:
    code = MECHANISMS.get(name.upper())
    if code is None:
        raise ValueError(f"{name} is not one of {', '.join(MECHANISMS)}")
    return code


class UserAdmin:
    _any: Any

    async def _alter(self, deletions: list[Any], upsertions: list[Any]) -> None:
        request = AlterUserScramCredentialsRequest(deletions=deletions, upsertions=upsertions)
        response = await (await self._any()).send(request, 0)
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaError(
                    ErrorCode(result.error_code), f"user {result.user}: {result.error_message}"
                )

    async def upsert_scram_credential(
        self, user: str, mechanism: str, password: str, iterations: int = MIN_ITERATIONS
    ) -> None:
        """Create or replace ``user``'s credential for ``mechanism``."""
        code = _mechanism(mechanism)
        # A salt from the OS's cryptographic source (never a seeded generator).
        salt = secrets.token_bytes(32)
        salted = salted_password(MECHANISM_NAMES[code], password, salt, iterations)
        upsertion = _Upsertion(
            name=user, mechanism=code, iterations=iterations, salt=salt, salted_password=salted
        )
        await self._alter([], [upsertion])

    async def delete_scram_credential(self, user: str, mechanism: str) -> None:
        await self._alter([_Deletion(name=user, mechanism=_mechanism(mechanism))], [])

    async def describe_scram_credentials(
        self, users: list[str] | None = None
    ) -> dict[str, dict[str, int]]:
        """Each user's mechanisms with their iterations (all users when None)."""
        names = None if users is None else [_Name(name=u) for u in users]
        response = await (await self._any()).send(
            DescribeUserScramCredentialsRequest(users=names), 0
        )
        if response.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(response.error_code), response.error_message or "")
        described = {}
        for result in response.results:
            if result.error_code != ErrorCode.NONE:
                raise KafkaError(
                    ErrorCode(result.error_code), f"user {result.user}: {result.error_message}"
                )
            described[result.user] = {
                MECHANISM_NAMES[i.mechanism]: i.iterations for i in result.credential_infos
            }
        return described


_Name = DescribeUserScramCredentialsRequest.UserName
