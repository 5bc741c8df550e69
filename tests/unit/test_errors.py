"""The error numbers are Kafka's: pinned against kafka-python's independent table."""

from __future__ import annotations

import inspect

import kafka.errors as kerrors

from zlog.errors import ErrorCode, ZlogError, for_code, is_invalid_metadata

# kafka-python names a few codes differently from Kafka's Errors.java; ours follow Java.
_NAME_ALIASES = {
    2: "CorruptRecordError",
    4: "InvalidFetchRequestError",
    6: "NotLeaderForPartitionError",
    40: "InvalidConfigurationError",
    10: "MessageSizeTooLargeError",
    39: "InvalidReplicationAssignmentError",
}
# Java's CorruptRecordException extends RetriableException; kafka-python says otherwise.
_RETRIABLE_DIFFERS_FROM_KAFKA_PYTHON = {ErrorCode.CORRUPT_MESSAGE}


def _kafka_python_codes() -> dict[int, type[kerrors.BrokerResponseError]]:
    table: dict[int, type[kerrors.BrokerResponseError]] = {}
    for _, cls in inspect.getmembers(kerrors, inspect.isclass):
        errno = getattr(cls, "errno", None)
        if isinstance(errno, int) and issubclass(cls, kerrors.BrokerResponseError):
            table[errno] = cls
    return table


def _letters(name: str) -> str:
    return name.replace("_", "").lower().removesuffix("error").replace("exception", "")


def test_every_number_names_the_same_error_as_kafka_python() -> None:
    theirs = _kafka_python_codes()
    checked = 0
    for code in ErrorCode:
        if int(code) not in theirs or code in {ErrorCode.NONE, ErrorCode.UNKNOWN_SERVER_ERROR}:
            continue
        their_name = theirs[int(code)].__name__
        if int(code) in _NAME_ALIASES:
            assert their_name == _NAME_ALIASES[int(code)]
        else:
            assert _letters(their_name) == _letters(code.name), (int(code), their_name)
        checked += 1
    assert checked > 100


def test_retriable_flags_match_kafka() -> None:
    for errno, cls in _kafka_python_codes().items():
        if errno <= 0 or errno not in ErrorCode._value2member_map_:
            continue
        code = ErrorCode(errno)
        expected = bool(cls.retriable) != (code in _RETRIABLE_DIFFERS_FROM_KAFKA_PYTHON)
        assert ZlogError(code, "x").retriable == expected, code.name


def test_invalid_metadata_flags_match_kafka() -> None:
    """Kafka's InvalidMetadataException subclasses: the client refreshes before retrying."""
    for errno, cls in _kafka_python_codes().items():
        if errno <= 0 or errno not in ErrorCode._value2member_map_:
            continue
        expected = bool(getattr(cls, "invalid_metadata", False))
        assert is_invalid_metadata(ErrorCode(errno)) == expected, ErrorCode(errno).name


def test_unknown_numbers_become_unknown_server_error() -> None:
    error = for_code(4242, "surprise")
    assert error.code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert "4242" in error.message
    assert for_code(6).code == ErrorCode.NOT_LEADER_OR_FOLLOWER
