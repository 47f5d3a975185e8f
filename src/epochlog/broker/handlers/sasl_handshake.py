"""SaslHandshake (v0-v1, KIP-152): the mechanism a SASL exchange will use. An unknown
one is answered UNSUPPORTED_SASL_MECHANISM with the listener's enabled mechanisms, then
the connection is closed; v0 means the tokens that follow come raw (no SaslAuthenticate)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.sasl import SaslHandshakeResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, RequestFrame, api
from epochlog.protocol.errors import ErrorCode
from epochlog.security.session import Session

API = api(ApiKey.SASL_HANDSHAKE, 0, 1)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    auth = session.authentication
    if auth is None:  # not a SASL listener: nothing to authenticate
        return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
    code = auth.handshake(request.mechanism, version)
    return SaslHandshakeResponse(error_code=code, mechanisms=list(auth.config.enabled))
