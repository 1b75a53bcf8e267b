"""Every ``TiermemError`` as a stable JSON error code and an HTTP status, and back.

The service answers an error as ``{"error": {"code", "message", "detail"}}``; the client
raises the same exception class again, with the same message and attributes. The codes are
API: they never change meaning. Errors of the caller's input are 4xx; 5xx is kept for what
the caller cannot fix (a store or model down, a bug): 503 when retrying later may work.

>>> from tiermem.errors import InvalidLimitError
>>> body = error_body(InvalidLimitError("k", 0))
>>> status_of(InvalidLimitError("k", 0)), body["error"]["code"], body["error"]["detail"]
(422, 'invalid_limit', {'name': 'k', 'value': 0, 'maximum': None})
>>> raised = exception_from(body)
>>> type(raised).__name__, str(raised), raised.name
('InvalidLimitError', 'k must be a positive integer, got 0', 'k')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tiermem import errors as e

# code, class, status. The most specific class first: a class not listed answers with its
# nearest listed ancestor's code.
ERROR_CODES: tuple[tuple[str, type[e.TiermemError], int], ...] = (
    ("invalid_user_id", e.InvalidUserIdError, 422),
    ("invalid_session_id", e.InvalidSessionIdError, 422),
    ("empty_messages", e.EmptyMessagesError, 422),
    ("unknown_role", e.UnknownRoleError, 422),
    ("naive_timestamp", e.NaiveTimestampError, 422),
    ("invalid_message", e.InvalidMessageError, 422),
    ("invalid_limit", e.InvalidLimitError, 422),
    ("invalid_query", e.InvalidQueryError, 422),
    ("invalid_filter", e.InvalidFilterError, 422),
    ("request_too_large", e.RequestTooLargeError, 413),
    # still MemoryNotFoundError: no memory of this user has such an id
    ("invalid_memory_id", e.InvalidMemoryIdError, 404),
    ("knowledge_item", e.KnowledgeItemError, 404),
    ("memory_not_found", e.MemoryNotFoundError, 404),
    ("invalid_input", e.InvalidInputError, 422),
    ("authentication_failed", e.AuthenticationError, 401),
    ("permission_denied", e.PermissionDeniedError, 403),
    ("tenant_busy", e.TenantBusyError, 429),
    ("overloaded", e.ServiceOverloadedError, 503),
    ("request_timeout", e.RequestTimeoutError, 408),
    ("service_unavailable", e.ServiceUnavailableError, 503),
    ("service_error", e.ServiceError, 500),
    ("data_dir_locked", e.DataDirLockedError, 409),
    ("journal_locked", e.JournalLockedError, 409),
    ("model_not_installed", e.ModelNotInstalledError, 409),
    ("unknown_provider", e.UnknownProviderError, 409),
    # the user's collection was written by another embedder: `tiermem reindex --user U`
    ("embedder_mismatch", e.EmbedderMismatchError, 409),
    # the knowledge graph was embedded by another embedder: `tiermem reindex --ltm`
    ("ltm_embedder_mismatch", e.LTMEmbedderMismatchError, 409),
    # the service's configuration does not allow it (e.g. consolidation with LTM off)
    ("config_error", e.ConfigError, 409),
    ("closed", e.ClosedError, 503),  # shutting down
    ("store_error", e.StoreError, 503),
    ("embedder_unavailable", e.EmbedderUnavailableError, 503),  # its server, after retries
    ("embedder_dimension", e.EmbedderDimensionError, 500),  # embedder.dim is not the model's
    ("embedder_error", e.EmbedderError, 500),
    ("journal_unavailable", e.JournalUnavailableError, 503),  # a full disk, a lock
    ("audit_error", e.AuditError, 500),
    ("slm_output_invalid", e.SLMOutputInvalid, 502),
    ("slm_timeout", e.SLMTimeout, 504),
    ("slm_unavailable", e.SLMUnavailable, 503),
    ("slm_error", e.SLMError, 502),
    ("ltm_corrupt", e.LTMCorruptError, 500),
    ("ltm_locked", e.LTMLockedError, 409),
    ("ltm_error", e.LTMError, 500),
    ("wrong_tier", e.WrongTierError, 500),
    ("tiermem_error", e.TiermemError, 500),
)
# Answers that come from the HTTP layer, not from a TiermemError: the class the client raises.
PROTOCOL_CODES: Mapping[str, type[e.TiermemError]] = {
    "invalid_request": e.InvalidInputError,  # the body or a parameter fails the schema
    "not_found": e.ServiceError,  # no such route (a client newer than the service?)
    "method_not_allowed": e.ServiceError,
    "internal_error": e.ServiceError,
}
_BY_CODE: dict[str, type[e.TiermemError]] = {code: cls for code, cls, _ in ERROR_CODES}
_BY_CLASS: dict[type[e.TiermemError], tuple[str, int]] = {
    cls: (code, status) for code, cls, status in ERROR_CODES
}
# Attributes an error carries for its caller: plain JSON values only, never a traceback.
_JSON_SCALARS = (str, int, float, bool, type(None))


def _listed(exc: e.TiermemError) -> tuple[str, int]:
    for cls in type(exc).__mro__:
        if cls in _BY_CLASS:
            return _BY_CLASS[cls]
    raise AssertionError("TiermemError is listed")  # pragma: no cover


def code_of(exc: e.TiermemError) -> str:
    return _listed(exc)[0]


def status_of(exc: e.TiermemError) -> int:
    return _listed(exc)[1]


def _detail(exc: BaseException) -> dict[str, Any]:
    return {
        name: _capped(value)
        for name, value in vars(exc).items()
        if not name.startswith("_") and isinstance(value, _JSON_SCALARS)
    }


def _capped(value: object) -> object:
    """A detail as the body carries it: a long string cut as the message cuts it, an int too
    long for JSON readers as its shown text, a float that JSON lacks as its repr.

    >>> _capped("x" * 100_000)[-25:]
    "x'... (100000 characters)"
    >>> _capped(7), _capped(10**40), _capped(math.inf)
    (7, '<int of 41 digits>', 'inf')
    """
    if isinstance(value, str) and len(value) > e.SHOWN_CHARS:
        return e.shown(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 2**63:
        return f"<int of {len(str(abs(value)))} digits>"
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return value


def error_body(
    exc: e.TiermemError, *, code: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """The JSON the service answers ``exc`` with."""
    return {
        "error": {
            "code": code or code_of(exc),
            "message": str(exc) if message is None else message,
            "detail": _detail(exc),
        }
    }


def protocol_body(code: str, message: str) -> dict[str, Any]:
    """An error of the HTTP layer (``PROTOCOL_CODES``), in the same shape."""
    return {"error": {"code": code, "message": message, "detail": {}}}


def exception_from(body: object, status: int = 500) -> e.TiermemError:
    """The exception an error body stands for: its class by code, its message, its detail
    as attributes. An unknown code (a newer service) raises the nearest class the status
    says: ``InvalidInputError`` for a 4xx, ``ServiceError`` otherwise."""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return e.ServiceError(f"HTTP {status}: {str(body)[:200]}")
    code, message = str(error.get("code")), str(error.get("message"))
    detail = error.get("detail") if isinstance(error.get("detail"), dict) else {}
    cls = _BY_CODE.get(code) or PROTOCOL_CODES.get(code)
    if cls is None:
        cls = e.InvalidInputError if 400 <= status < 500 else e.ServiceError
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)  # the message as the service said it, not re-rendered
    for name, value in (detail or {}).items():
        if isinstance(name, str) and not name.startswith("_"):
            setattr(exc, name, value)
    return exc
