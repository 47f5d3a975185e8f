"""SaslAuthenticate (v0-v2, KIP-152): one token of the exchange each way; v1+ answers
the session's lifetime (KIP-368), after which the client must re-authenticate. A
failure is SASL_AUTHENTICATION_FAILED with its reason, then the connection closes."""

from __future__ import annotations

from typing import Any

from kafka.protocol.sasl import SaslAuthenticateResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.session import Session

API = api(ApiKey.SASL_AUTHENTICATE, 0, 2)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    auth = session.authentication
    if auth is None:
        return SaslAuthenticateResponse(
            error_code=ErrorCode.ILLEGAL_SASL_STATE,
            error_message=f"listener {session.listener} does not use SASL",
            auth_bytes=b"",
            session_lifetime_ms=0,
        )
    result = auth.authenticate(bytes(request.auth_bytes), broker.seams.clock.time_ms())
    return SaslAuthenticateResponse(
        error_code=result.error,
        error_message=result.message,
        auth_bytes=result.reply,
        session_lifetime_ms=result.session_lifetime_ms,
    )
