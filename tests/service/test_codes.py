"""Every ``TiermemError`` has its own stable code; the caller's errors are 4xx; a body the
service answers becomes the same exception again, with its message and attributes."""

from __future__ import annotations

import inspect

import pytest
from tiermem import errors
from tiermem.service.codes import ERROR_CODES, code_of, error_body, exception_from, status_of

CLASSES = [
    cls
    for _, cls in inspect.getmembers(errors, inspect.isclass)
    if issubclass(cls, errors.TiermemError)
]


def test_every_error_class_has_its_own_code() -> None:
    listed = [cls for _, cls, _ in ERROR_CODES]
    assert set(CLASSES) == set(listed)
    codes = [code for code, _, _ in ERROR_CODES]
    assert len(set(codes)) == len(codes)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_input_errors_are_4xx_and_only_faults_are_5xx(cls: type[errors.TiermemError]) -> None:
    exc = cls.__new__(cls)
    status = status_of(exc)
    if issubclass(cls, errors.InvalidInputError | errors.MemoryNotFoundError):
        assert 400 <= status < 500
    if status >= 500:  # the caller cannot fix these: stores, models, bugs, shutting down
        assert (
            issubclass(
                cls,
                errors.StoreError
                | errors.EmbedderError
                | errors.AuditError
                | errors.SLMError
                | errors.LTMError
                | errors.ClosedError
                | errors.ServiceError
                | errors.WrongTierError,
            )
            or cls is errors.TiermemError
        )


@pytest.mark.parametrize(
    "exc",
    [
        errors.InvalidMessageError(2, "content exceeds 10 characters"),
        errors.UnknownRoleError(0, "robot"),
        errors.KnowledgeItemError("ltm:n:1", "ana", "update"),
        errors.InvalidMemoryIdError("", "ana", "must not be empty"),
        errors.LTMLockedError("/data/ltm", 42),
        errors.SLMTimeout("writer", "no answer in 60 s"),
        errors.EmbedderMismatchError("ana", "hash-384", 384, "ollama:nomic-embed-text", 768),
        errors.EmbedderDimensionError("ollama:nomic-embed-text", 384, 768),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_body_becomes_the_same_exception(exc: errors.TiermemError) -> None:
    again = exception_from(error_body(exc), status_of(exc))
    assert type(again) is type(exc)
    assert str(again) == str(exc)
    shown = {k: v for k, v in vars(exc).items() if isinstance(v, str | int | type(None))}
    assert {k: getattr(again, k) for k in shown} == shown


def test_an_unknown_code_falls_back_by_status() -> None:
    body = {"error": {"code": "from_the_future", "message": "m", "detail": {}}}
    assert type(exception_from(body, 422)) is errors.InvalidInputError
    assert type(exception_from(body, 500)) is errors.ServiceError
    assert type(exception_from("<html>bad gateway</html>", 502)) is errors.ServiceError
    assert code_of(errors.ServiceOverloadedError("busy")) == "overloaded"
