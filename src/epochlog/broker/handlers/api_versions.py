"""ApiVersions: advertise exactly the table in ``epochlog.protocol.apis``."""

from __future__ import annotations

from typing import Any

from kafka.protocol.metadata import ApiVersionsResponse

from epochlog.protocol.apis import SUPPORTED, ApiKey, RequestFrame, encode_response
from epochlog.protocol.errors import ErrorCode


def _api_keys() -> list[Any]:
    return [
        ApiVersionsResponse.ApiVersion(
            api_key=spec.key, min_version=spec.min_version, max_version=spec.max_version
        )
        for spec in sorted(SUPPORTED.values(), key=lambda s: s.key)
    ]


def unsupported_version_answer(correlation_id: int) -> list[bytes | bytearray | memoryview]:
    """Kafka's answer to an ApiVersions version it does not know: UNSUPPORTED_VERSION,
    encoded as v0 so any client can read the versions it may retry with."""
    response = ApiVersionsResponse(
        error_code=ErrorCode.UNSUPPORTED_VERSION, api_keys=_api_keys(), throttle_time_ms=0
    )
    return encode_response(SUPPORTED[ApiKey.API_VERSIONS], 0, correlation_id, response)


async def handle(broker: Any, request: Any, version: int, frame: RequestFrame) -> Any:
    return ApiVersionsResponse(
        error_code=ErrorCode.NONE,
        api_keys=_api_keys(),
        throttle_time_ms=0,
    )
