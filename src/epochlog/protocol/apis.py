"""The APIs epochlog speaks, their messages, and the codec for their frames.

Message bodies are encoded and decoded by ``kafka.protocol`` (kafka-python 3.0.12,
pinned), which is generated from Kafka's own JSON schemas and keeps unknown tagged
fields. Only the hot paths (Fetch responses, Produce record sets) are handled apart.
"""

from __future__ import annotations

import functools
import io
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreateAclsRequest,
    CreateAclsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeProducersRequest,
    DescribeProducersResponse,
    DescribeTransactionsRequest,
    DescribeTransactionsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    ListTransactionsRequest,
    ListTransactionsResponse,
)
from kafka.protocol.admin.client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)
from kafka.protocol.admin.cluster import (
    AlterReplicaLogDirsRequest,
    AlterReplicaLogDirsResponse,
    DescribeLogDirsRequest,
    DescribeLogDirsResponse,
)
from kafka.protocol.admin.users import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
)
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
    WriteTxnMarkersRequest,
    WriteTxnMarkersResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from epochlog.protocol.batch import HEADER_SIZE
from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.protocol.length_audit import LengthError, audit


class ApiKey:
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    ALTER_REPLICA_LOG_DIRS = 34
    DESCRIBE_LOG_DIRS = 35
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_CLUSTER = 60
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


@dataclass(frozen=True)
class ApiSpec:
    key: int
    request: Any
    response: Any
    min_version: int
    max_version: int

    @functools.cached_property
    def name(self) -> str:
        # Cached: every answered request is counted under it, and the library's name is
        # a class property computed on each read.
        return self.request.name.removesuffix("Request")

    def is_flexible(self, version: int) -> bool:
        return self.request.flexible_version_q(version)


# The messages of every API epochlog speaks (the client's requests and the broker's
# handlers); which versions the broker serves, each handler module declares (its ``API``).
MESSAGES: dict[int, tuple[Any, Any]] = {
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.FETCH: (FetchRequest, FetchResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    ApiKey.ALTER_CONFIGS: (AlterConfigsRequest, AlterConfigsResponse),
    ApiKey.DESCRIBE_CLUSTER: (DescribeClusterRequest, DescribeClusterResponse),
    ApiKey.DESCRIBE_LOG_DIRS: (DescribeLogDirsRequest, DescribeLogDirsResponse),
    ApiKey.ALTER_REPLICA_LOG_DIRS: (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse),
    ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    ApiKey.DELETE_RECORDS: (DeleteRecordsRequest, DeleteRecordsResponse),
    ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse),
    ApiKey.DESCRIBE_CONFIGS: (DescribeConfigsRequest, DescribeConfigsResponse),
    ApiKey.CREATE_PARTITIONS: (CreatePartitionsRequest, CreatePartitionsResponse),
    ApiKey.ELECT_LEADERS: (ElectLeadersRequest, ElectLeadersResponse),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
    ),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    ),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    ),
    ApiKey.OFFSET_COMMIT: (OffsetCommitRequest, OffsetCommitResponse),
    ApiKey.OFFSET_FETCH: (OffsetFetchRequest, OffsetFetchResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.JOIN_GROUP: (JoinGroupRequest, JoinGroupResponse),
    ApiKey.HEARTBEAT: (HeartbeatRequest, HeartbeatResponse),
    ApiKey.LEAVE_GROUP: (LeaveGroupRequest, LeaveGroupResponse),
    ApiKey.SYNC_GROUP: (SyncGroupRequest, SyncGroupResponse),
    ApiKey.DESCRIBE_GROUPS: (DescribeGroupsRequest, DescribeGroupsResponse),
    ApiKey.LIST_GROUPS: (ListGroupsRequest, ListGroupsResponse),
    ApiKey.DELETE_GROUPS: (DeleteGroupsRequest, DeleteGroupsResponse),
    ApiKey.OFFSET_DELETE: (OffsetDeleteRequest, OffsetDeleteResponse),
    ApiKey.ADD_PARTITIONS_TO_TXN: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    ApiKey.ADD_OFFSETS_TO_TXN: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    ApiKey.END_TXN: (EndTxnRequest, EndTxnResponse),
    ApiKey.WRITE_TXN_MARKERS: (WriteTxnMarkersRequest, WriteTxnMarkersResponse),
    ApiKey.TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    ApiKey.DESCRIBE_PRODUCERS: (DescribeProducersRequest, DescribeProducersResponse),
    ApiKey.DESCRIBE_TRANSACTIONS: (DescribeTransactionsRequest, DescribeTransactionsResponse),
    ApiKey.LIST_TRANSACTIONS: (ListTransactionsRequest, ListTransactionsResponse),
    ApiKey.SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
    ),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
    ),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (DescribeClientQuotasRequest, DescribeClientQuotasResponse),
    ApiKey.ALTER_CLIENT_QUOTAS: (AlterClientQuotasRequest, AlterClientQuotasResponse),
    ApiKey.DESCRIBE_ACLS: (DescribeAclsRequest, DescribeAclsResponse),
    ApiKey.CREATE_ACLS: (CreateAclsRequest, CreateAclsResponse),
    ApiKey.DELETE_ACLS: (DeleteAclsRequest, DeleteAclsResponse),
}


def api(key: int, min_version: int, max_version: int) -> ApiSpec:
    """An API served at ``min_version``..``max_version``, with its messages."""
    request, response = MESSAGES[key]
    return ApiSpec(key, request, response, min_version, max_version)


_FIXED_HEADER = struct.Struct(">hhi")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_CLIENT_ID_AT = _FIXED_HEADER.size


@dataclass(frozen=True)
class RequestFrame:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: memoryview


# Enough for any header whose client id is not unusually long.
_HEADER_PROBE_BYTES = 4096


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api_key, api_version and correlation_id: enough to answer even an undecodable request."""
    if len(frame) < _FIXED_HEADER.size:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"frame of {len(frame)} bytes has no header")
    return _FIXED_HEADER.unpack_from(frame, 0)


def decode_request_header(frame: bytes | memoryview, flexible: bool) -> RequestFrame:
    """Split a request frame (size prefix removed) into its header and body."""
    api_key, api_version, correlation_id = peek_header(frame)
    common = _common_header(frame, flexible)
    if common is not None:
        client_id, end = common
        return RequestFrame(
            api_key, api_version, correlation_id, client_id, memoryview(frame)[end:]
        )
    # BytesIO copies whatever is not ``bytes``: decode from the frame's first bytes, and
    # from the whole frame only if the header may run past them.
    head = memoryview(frame)[:_HEADER_PROBE_BYTES]
    stream = io.BytesIO(head)
    try:
        header = RequestHeader.decode(stream, flexible=flexible)
        whole = stream.tell() < len(head) or len(head) == len(frame)
    except Exception:  # noqa: BLE001 - cut short by the probe; the full decode says why
        whole = False
    if not whole:
        stream = io.BytesIO(frame)
        header = RequestHeader.decode(stream, flexible=flexible)
    return RequestFrame(
        api_key, api_version, correlation_id, header.client_id, memoryview(frame)[stream.tell() :]
    )


def _common_header(frame: bytes | memoryview, flexible: bool) -> tuple[str | None, int] | None:
    """(client id, where the body starts) of a header as every client sends it: a client
    id (or null) within the frame, and no tagged fields; read directly, as the library's
    decoder costs a small request more than its handling. None: decode it in full."""
    if len(frame) < _CLIENT_ID_AT + 2:
        return None
    (size,) = _INT16.unpack_from(frame, _CLIENT_ID_AT)
    start = _CLIENT_ID_AT + 2
    end = start + max(size, 0)
    if size < -1 or end > len(frame) or flexible and (end >= len(frame) or frame[end] != 0):
        return None
    if size == -1:
        client_id = None
    else:
        try:
            client_id = str(frame[start:end], "utf-8")
        except UnicodeDecodeError:
            return None
    return client_id, end + 1 if flexible else end


def decode_request_body(spec: ApiSpec, version: int, body: memoryview) -> Any:
    """Decode strictly: every length and count is audited first (``length_audit``: a
    negative one where Kafka forbids it, or one past the frame, is refused), since the
    library would read them as empty, null or short values."""
    request = spec.request
    flexible = request.flexible_version_q(version)
    try:
        audit(request._struct, version, flexible, body)
    except LengthError as exc:
        raise KafkaError(ErrorCode.INVALID_REQUEST, f"{spec.name} v{version}: {exc}") from None
    decode = request._struct.compiled_decode_from(
        version,
        compact=request.flexible_version_q(version),
        tagged=request.flexible_version_q(version),
        data_class=request[None],
    )
    if spec.key == ApiKey.PRODUCE:
        _records_as_views(decode)
    decoded, end = decode(body, 0)
    if end > len(body):
        raise KafkaError(
            ErrorCode.INVALID_REQUEST,
            f"{spec.name} v{version}: a length runs {end - len(body)} bytes past the frame",
        )
    return decoded


def _records_as_views(decode: Any) -> None:
    """Make one of the library's generated decoders (Produce requests, Fetch responses)
    hand out each partition's records as a view of the frame. It copies a bytes field
    with the name ``bytes`` looked up in the decoder's own globals (strings go through
    ``str``): bound to ``_view_unless_short``, the slice of the frame it was given comes
    back as it is. A megabyte request was copied twice before the log wrote it (here, then to patch
    offsets into); the log now patches the frame itself where the frame is writable.
    tests/protocol/test_produce_records.py and test_fetch_records.py fail if a version
    of the library copies another way."""
    decode.__globals__["bytes"] = _view_unless_short


def _view_unless_short(view: memoryview) -> memoryview | bytes:
    """Records as they are; anything shorter than a record batch's header (the 16 bytes
    of a topic id, which ``uuid.UUID`` wants as bytes) copied as the library would."""
    return view if len(view) >= HEADER_SIZE else bytes(view)


def encode_response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (the correlation id), or v1 with it no tagged fields."""
    header = _INT32.pack(correlation_id)
    return header + b"\x00" if flexible else header


def decode_response(response_class: Any, version: int, frame: bytes | bytearray) -> Any:
    """A response frame (size prefix removed) decoded past its header, directly: the
    library's ``decode(header=True)`` copies the whole frame to read the header's few
    bytes, and a fetch answer is megabytes. A Fetch answer's records come out as views
    of the frame (``_fetch_decoder``)."""
    flexible = (
        response_class.flexible_version_q(version) and response_class.API_KEY != ApiKey.API_VERSIONS
    )
    at = _INT32.size
    if flexible:
        if frame[at] != 0:  # header tagged fields: none are defined, the library reads them
            return response_class.decode(frame, version=version, header=True)
        at += 1
    if response_class.API_KEY == ApiKey.FETCH:
        return _fetch_decoder(response_class, version)(memoryview(frame), at)[0]
    return response_class.decode(memoryview(frame)[at:], version=version)


@functools.cache
def _fetch_decoder(response_class: Any, version: int) -> Any:
    """The library's Fetch response decoder for ``version``, handing out each
    partition's records as a view of the answer's frame: the consumer decodes them
    from there and a follower copies them once, into the buffer it appends from (they
    were copied out of the frame first, a megabyte a partition)."""
    flexible = response_class.flexible_version_q(version)
    decode = response_class._struct.compiled_decode_from(
        version, compact=flexible, tagged=flexible, data_class=response_class[None]
    )
    _records_as_views(decode)
    return decode


def frame(*parts: bytes | bytearray | memoryview) -> list[bytes | bytearray | memoryview]:
    """Prefix the parts with their total size, as every Kafka message is sent."""
    size = sum(len(p) for p in parts)
    return [struct.pack(">i", size), *parts]


def encode_response(
    spec: ApiSpec, version: int, correlation_id: int, response: Any
) -> list[bytes | bytearray | memoryview]:
    # ApiVersions answers always use header v0 so a client can read them before it
    # knows which versions the broker speaks.
    flexible_header = spec.is_flexible(version) and spec.key != ApiKey.API_VERSIONS
    header = encode_response_header(correlation_id, flexible_header)
    return frame(header, bytes(response.encode(version=version)))
