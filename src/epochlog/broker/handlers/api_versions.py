"""ApiVersions: advertise exactly what the broker's handlers serve (their ``API``)."""

from __future__ import annotations

from functools import cache
from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse

from epochlog.broker.handlers.context import HandlerContext
from epochlog.protocol.apis import ApiKey, ApiSpec, RequestFrame, api, encode_response
from epochlog.protocol.errors import ErrorCode
from epochlog.security.session import Session

API = api(ApiKey.API_VERSIONS, 0, 3)


@cache
def _api_keys(apis: tuple[ApiSpec, ...]) -> list[Any]:
    """Built once per table: a client asks on every connection it opens."""
    return [
        ApiVersionsResponse.ApiVersion(
            api_key=spec.key, min_version=spec.min_version, max_version=spec.max_version
        )
        for spec in apis
    ]


def unsupported_version_answer(
    apis: tuple[ApiSpec, ...], correlation_id: int
) -> list[bytes | bytearray | memoryview]:
    """Kafka's answer to an ApiVersions version it does not know: UNSUPPORTED_VERSION,
    encoded as v0 so any client can read the versions it may retry with."""
    response = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(apis), throttle_time_ms=0
    )
    return encode_response(API, 0, correlation_id, response)


async def handle(
    broker: HandlerContext, request: Any, version: int, frame: RequestFrame, session: Session
) -> Any:
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=_api_keys(broker.request_channel.apis),
        throttle_time_ms=0,
    )
