"""The wire format shared by the service and ``RemoteMemory``: the request bodies, and the
client API's own result types (the dataclasses of ``tiermem.types``) as JSON, both ways.

Results are encoded from and decoded into the very dataclasses ``Memory`` returns (pydantic
reads their fields), so a result that crossed the wire compares equal to the one made in
process, and the OpenAPI document describes the same types.

>>> from datetime import UTC, datetime
>>> from tiermem.types import MemoryEntry, MemoryKind
>>> t = datetime(2026, 1, 1, tzinfo=UTC)
>>> entry = MemoryEntry("m1", "ana", "Ana lives in Lisbon.", MemoryKind.FACT, t, t)
>>> data = encode(entry, MemoryEntry)
>>> data["kind"], data["created_at"]
('fact', '2026-01-01T00:00:00Z')
>>> decode(data, MemoryEntry) == entry
True
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, fields, is_dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, TypeAdapter
from tiermem.context import DEFAULT_BUDGET_TOKENS
from tiermem.errors import InvalidFilterError, shown
from tiermem.types import Message, SearchFilters, SearchHit
from tiermem.validation import (
    MAX_CONTENT_CHARS,
    MAX_ID_LENGTH,
    MAX_MEMORY_TEXT_CHARS,
    MAX_QUERY_CHARS,
    MessageLike,
)

ISO_8601 = "an ISO 8601 time with its UTC offset, e.g. 2026-03-02T09:00:00+00:00"
# What the schema says of ids and texts, for clients and fuzzers; the service does not enforce
# it here, so that ``Memory``'s own checks refuse with their typed errors (InvalidUserIdError,
# not a generic schema error). Memory also refuses format and unassigned characters.
_EDGE = r"[^\s\x00-\x1f\x7f-\x9f]"
ID_RULES: dict[str, Any] = {
    "minLength": 1,
    "maxLength": MAX_ID_LENGTH,
    "pattern": rf"^{_EDGE}(?:[^\x00-\x1f\x7f-\x9f]*{_EDGE})?$",
}
QUERY_RULES: dict[str, Any] = {"minLength": 1, "maxLength": MAX_QUERY_CHARS, "pattern": r"\S"}
TEXT_RULES: dict[str, Any] = {"minLength": 1, "maxLength": MAX_CONTENT_CHARS, "pattern": r"\S"}
Id = Annotated[str, Field(json_schema_extra=ID_RULES)]
QueryText = Annotated[str, Field(json_schema_extra=QUERY_RULES)]
Text = Annotated[str, Field(json_schema_extra=TEXT_RULES)]
MemoryText = Annotated[
    str, Field(json_schema_extra={**TEXT_RULES, "maxLength": MAX_MEMORY_TEXT_CHARS})
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MessageIn(_Body):
    """One message of ``add()``, as ``Memory.add`` takes a mapping."""

    role: str = Field(default="user", description="user, assistant or system")
    content: Text | None = Field(
        description="null or blank: the message is left out (an assistant's tool call)"
    )
    speaker: Id | None = None
    name: Id | None = None
    timestamp: str | None = Field(default=None, description=ISO_8601)
    turn_id: Id | None = None


class FiltersIn(_Body):
    """``SearchFilters``: ``since``/``until`` bound the effective time, inclusive."""

    since: str | None = Field(default=None, description=ISO_8601)
    until: str | None = Field(default=None, description=ISO_8601)
    kinds: list[str] = []
    session_id: Id | None = None
    include_superseded: bool = False


class AddRequest(_Body):
    messages: Text | list[Text | MessageIn]
    user_id: Id
    session_id: Id | None = None


class SearchRequest(_Body):
    query: QueryText
    user_id: Id
    k: StrictInt | None = None
    filters: FiltersIn | None = None
    session_id: Id | None = None


class ContextRequest(_Body):
    query: QueryText
    user_id: Id
    budget_tokens: StrictInt = DEFAULT_BUDGET_TOKENS
    session_id: Id | None = None
    filters: FiltersIn | None = None
    k: StrictInt | None = None
    expand: StrictBool = True


class AnswerRequest(_Body):
    query: QueryText
    user_id: Id
    session_id: Id | None = None
    filters: FiltersIn | None = None


class UpdateRequest(_Body):
    text: MemoryText
    user_id: Id


class SourceTurnsRequest(_Body):
    hits: list[SearchHit]
    user_id: Id


class ConsolidateRequest(_Body):
    """One user's consolidation, or (an admin key's) every user's when ``user_id`` is unset."""

    user_id: Id | None = None


class ErrorDetail(BaseModel):
    code: str = Field(description="stable: tiermem.service.codes lists every code")
    message: str
    detail: dict[str, Any] = Field(description="the error's attributes (memory_id, ...)")


class ErrorBody(BaseModel):
    """Every error the service answers."""

    error: ErrorDetail


# -- results ------------------------------------------------------------------------------
@cache
def _adapter(kind: Any) -> TypeAdapter[Any]:
    return TypeAdapter(kind)


def encode(value: object, kind: Any) -> Any:
    """``value`` (of type ``kind``) as JSON-ready data: datetimes ISO 8601, enums their value."""
    return _adapter(kind).dump_python(value, mode="json")


def decode(data: object, kind: Any) -> Any:
    """The ``kind`` that ``encode`` made ``data`` from, its times in ``datetime.UTC`` as
    ``Memory`` gives them (pydantic would give its own UTC tzinfo: equal times, another
    ``repr``)."""
    return _in_utc(_adapter(kind).validate_python(data))


def _in_utc(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC) if value.utcoffset() == timedelta(0) else value
    if is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _in_utc(getattr(value, f.name)) for f in fields(value)}
        return replace(value, **changes)
    if isinstance(value, list | tuple):
        return type(value)(_in_utc(v) for v in value)
    if isinstance(value, dict):  # a Counter stays a Counter
        return type(value)({k: _in_utc(v) for k, v in value.items()})
    return value


# -- arguments, client side ---------------------------------------------------------------
def _json_value(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, str):  # a StrEnum such as Role as its plain value
        return str(value)
    return value


def messages_json(messages: MessageLike | Iterable[MessageLike]) -> str | list[object]:
    """What ``add()`` was given, as the service takes it. Call after the messages passed
    ``normalize_messages``: every value is then one JSON can carry."""
    if isinstance(messages, str):
        return messages
    items = [messages] if isinstance(messages, Message | Mapping) else list(messages)
    out: list[object] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
            continue
        fields = asdict(item) if isinstance(item, Message) else dict(item)
        out.append(
            {k: _json_value(v) for k, v in fields.items() if v is not None or k == "content"}
        )
    return out


def filters_json(filters: SearchFilters | None) -> dict[str, object] | None:
    """A (validated) ``SearchFilters`` as the service takes it."""
    if filters is None:
        return None
    return {
        "since": _json_value(filters.since),
        "until": _json_value(filters.until),
        "kinds": [str(k) for k in filters.kinds],
        "session_id": filters.session_id,
        "include_superseded": filters.include_superseded,
    }


# -- arguments, service side --------------------------------------------------------------
def _bound(name: str, value: str | None) -> datetime | None:
    if value is None:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        raise InvalidFilterError(f"filters.{name} {shown(value)} is not ISO 8601") from None


def filters_from(body: FiltersIn | None) -> SearchFilters | None:
    """The ``SearchFilters`` a request names; ``Memory`` validates it as it would any."""
    if body is None:
        return None
    return SearchFilters(
        since=_bound("since", body.since),
        until=_bound("until", body.until),
        kinds=tuple(body.kinds),  # type: ignore[arg-type]  # Memory checks each kind
        session_id=body.session_id,
        include_superseded=body.include_superseded,
    )


def messages_from(messages: str | list[str | MessageIn]) -> str | list[str | dict[str, Any]]:
    """A request's messages as ``Memory.add`` takes them (mappings without unset fields)."""
    if isinstance(messages, str):
        return messages
    return [
        m if isinstance(m, str) else {"content": m.content, **m.model_dump(exclude_none=True)}
        for m in messages
    ]
