"""DescribeUserScramCredentials (v0, KIP-554): each user's SCRAM mechanisms and
iterations, read from the metastore (never a salt or key); all users when none named."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kafka.protocol.admin.users import DescribeUserScramCredentialsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.api_rules import refusal
from epochlog.security.scram_credentials import MECHANISMS, read_users
from epochlog.security.session import Session

API = api(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 0)

_Result = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
_Info = _Result.CredentialInfo


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    assert broker.cluster is not None
    refused = refusal(broker.authorizer, session, ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, "cluster")
    if refused != ErrorCode.NONE:  # Kafka: DESCRIBE on the cluster
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=refused, error_message=None, results=[]
        )
    users = await read_users(broker.cluster.store)
    named = [u.name for u in request.users or []]
    counts = Counter(named)
    results = []
    for user in sorted(set(named)) if named else sorted(users):
        result = _Result(
            user=user, error_code=ErrorCode.NONE, error_message=None, credential_infos=[]
        )
        if counts[user] > 1:
            result.error_code = ErrorCode.DUPLICATE_RESOURCE
            result.error_message = (
                f"Cannot describe SCRAM credentials for the same user twice: {user}"
            )
        elif user not in users:
            result.error_code = ErrorCode.RESOURCE_NOT_FOUND
            result.error_message = f"Attempt to describe nonexistent user {user}"
        else:
            result.credential_infos = [
                _Info(mechanism=MECHANISMS[m], iterations=c.iterations)
                for m, c in sorted(users[user].items())
            ]
        results.append(result)
    return DescribeUserScramCredentialsResponse(
        throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, results=results
    )
