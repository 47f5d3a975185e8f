"""What AlterClientQuotas and DescribeClientQuotas accept, with Kafka's error codes and
messages (its KRaft controller's ClientQuotaControlManager and ClientQuotasImage)."""

from __future__ import annotations

import pytest

from epochlog.protocol.errors import ErrorCode, KafkaError
from epochlog.quotas.entities import (
    DEFAULT,
    MATCH_DEFAULT,
    MATCH_EXACT,
    MATCH_SPECIFIED,
    QuotaEntity,
    check_value,
    describe_filter,
    entity_from_parts,
    stored_text,
)


def test_entities_and_their_nodes() -> None:
    assert entity_from_parts([("user", "alice")]) == QuotaEntity("alice")
    pair = entity_from_parts([("client-id", None), ("user", "a b/c")])
    assert pair == QuotaEntity("a b/c", DEFAULT)
    assert pair.path() == "/config/users/a%20b%2Fc/clients/<default>"
    assert QuotaEntity(client_id="app*").path() == "/config/clients/app%2A"
    assert QuotaEntity(DEFAULT).parts() == [("user", None)]


@pytest.mark.parametrize(
    ("parts", "message"),
    [
        ([], "Invalid empty client quota entity"),
        ([("group", "g")], "Unhandled client quota entity type: group"),
        ([("user", "a"), ("user", "b")], "duplicate entity entry user"),
        ([("user", "")], "Empty user not supported"),
        ([("ip", "10.0.0.1")], "Unhandled client quota entity type: ip"),
    ],
)
def test_refused_entities(parts: list[tuple[str, str | None]], message: str) -> None:
    with pytest.raises(KafkaError) as caught:
        entity_from_parts(parts)
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert message in caught.value.message


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("producer_byte_rate", -1.0, "Quota producer_byte_rate must be greater than 0"),
        ("consumer_byte_rate", 0.0, "Quota consumer_byte_rate must be greater than 0"),
        ("request_percentage", -0.5, "Quota request_percentage must be greater than 0"),
        ("producer_byte_rate", 1.5, "producer_byte_rate cannot be a fractional value."),
        ("bogus_rate", 10.0, "Invalid configuration key bogus_rate"),
        ("controller_mutation_rate", 10.0, "Invalid configuration key controller_mutation_rate"),
    ],
)
def test_refused_values(key: str, value: float, message: str) -> None:
    with pytest.raises(KafkaError) as caught:
        check_value(key, value)
    assert caught.value.code == ErrorCode.INVALID_REQUEST
    assert message in caught.value.message


def test_accepted_values_as_stored() -> None:
    check_value("request_percentage", 12.5)
    check_value("producer_byte_rate", 1048576.0)
    assert stored_text("producer_byte_rate", 1048576.0) == "1048576"
    assert stored_text("request_percentage", 12.5) == "12.5"


ALICE_APP = QuotaEntity("alice", "app")
ENTITIES = [
    QuotaEntity("alice"),
    QuotaEntity(DEFAULT),
    ALICE_APP,
    QuotaEntity("alice", DEFAULT),
    QuotaEntity(client_id="app"),
    QuotaEntity(client_id=DEFAULT),
]


def _matching(components: list[tuple[str, int, str | None]], strict: bool) -> list[QuotaEntity]:
    matches = describe_filter(components, strict)
    return [e for e in ENTITIES if matches(e)]


def test_filters_match_as_kafkas() -> None:
    assert _matching([], strict=False) == ENTITIES
    assert _matching([], strict=True) == []
    assert _matching([("user", MATCH_EXACT, "alice")], strict=False) == [
        QuotaEntity("alice"),
        ALICE_APP,
        QuotaEntity("alice", DEFAULT),
    ]
    assert _matching([("user", MATCH_EXACT, "alice")], strict=True) == [QuotaEntity("alice")]
    assert _matching([("user", MATCH_DEFAULT, None)], strict=True) == [QuotaEntity(DEFAULT)]
    # "specified" is any name of the type, the default included (ClientQuotasImage).
    assert _matching([("client-id", MATCH_SPECIFIED, None)], strict=True) == [
        QuotaEntity(client_id="app"),
        QuotaEntity(client_id=DEFAULT),
    ]
    both = [("user", MATCH_EXACT, "alice"), ("client-id", MATCH_SPECIFIED, None)]
    assert _matching(both, strict=True) == [ALICE_APP, QuotaEntity("alice", DEFAULT)]
    assert _matching([("ip", MATCH_SPECIFIED, None)], strict=False) == []


@pytest.mark.parametrize(
    ("components", "code"),
    [
        ([("group", MATCH_EXACT, "g")], ErrorCode.UNSUPPORTED_VERSION),
        ([("", MATCH_EXACT, "g")], ErrorCode.INVALID_REQUEST),
        ([("user", MATCH_EXACT, None)], ErrorCode.INVALID_REQUEST),
        ([("user", MATCH_DEFAULT, "x")], ErrorCode.INVALID_REQUEST),
        ([("user", MATCH_SPECIFIED, "x")], ErrorCode.INVALID_REQUEST),
        ([("user", 7, None)], ErrorCode.INVALID_REQUEST),
        ([("user", MATCH_DEFAULT, None), ("user", MATCH_EXACT, "a")], ErrorCode.INVALID_REQUEST),
        (
            [("ip", MATCH_SPECIFIED, None), ("user", MATCH_SPECIFIED, None)],
            ErrorCode.INVALID_REQUEST,
        ),
    ],
)
def test_refused_filters(components: list[tuple[str, int, str | None]], code: ErrorCode) -> None:
    with pytest.raises(KafkaError) as caught:
        describe_filter(components, strict=False)
    assert caught.value.code == code
