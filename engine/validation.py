"""Input validation for the client API. Every check raises a typed ``InvalidInputError``
before anything is stored."""

from __future__ import annotations

import hashlib
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from tiermem.clock import Clock
from tiermem.errors import (
    EmptyMessagesError,
    InvalidFilterError,
    InvalidLimitError,
    InvalidMessageError,
    InvalidQueryError,
    InvalidSessionIdError,
    InvalidUserIdError,
    NaiveTimestampError,
    UnknownRoleError,
)
from tiermem.types import MemoryKind, Message, Role, SearchFilters, Turn

MAX_ID_LENGTH = 128
MAX_CONTENT_CHARS = 32_000
MAX_QUERY_CHARS = 4_000
DEFAULT_SESSION = "default"

MessageLike = str | Message | Mapping[str, Any]


def _identifier_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value.strip():
        return "must not be empty or blank"
    if value != value.strip():
        return "must not start or end with whitespace"
    if len(value) > MAX_ID_LENGTH:
        return f"must be at most {MAX_ID_LENGTH} characters"
    if any(unicodedata.category(ch).startswith("C") for ch in value):
        return "must not contain control or unassigned characters"
    return None


def validate_user_id(user_id: object) -> str:
    """Return ``user_id`` if it is a usable identifier, else raise ``InvalidUserIdError``."""
    problem = _identifier_problem(user_id)
    if problem is not None:
        raise InvalidUserIdError(user_id, problem)
    assert isinstance(user_id, str)
    return user_id


def validate_session_id(session_id: object) -> str:
    """Return the session id (``"default"`` for ``None``) or raise ``InvalidSessionIdError``."""
    if session_id is None:
        return DEFAULT_SESSION
    problem = _identifier_problem(session_id)
    if problem is not None:
        raise InvalidSessionIdError(session_id, problem)
    assert isinstance(session_id, str)
    return session_id


def validate_k(k: object, name: str = "k") -> int:
    """A result limit must be a positive ``int`` (``bool`` is refused)."""
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise InvalidLimitError(name, k)
    return k


def validate_text(text: object, what: str = "query", limit: int = MAX_QUERY_CHARS) -> str:
    """A query or memory text: a non-blank string of bounded length."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidQueryError(f"{what} must be a non-empty string")
    if len(text) > limit:
        raise InvalidQueryError(f"{what} is {len(text)} characters; the limit is {limit}")
    return text.strip()


def validate_filters(filters: SearchFilters | None) -> SearchFilters:
    """Check that a filter's times are aware and ordered, and its kinds known."""
    if filters is None:
        return SearchFilters()
    if not isinstance(filters, SearchFilters):
        raise InvalidFilterError(f"filters must be SearchFilters, got {type(filters).__name__}")
    for name in ("since", "until"):
        value = getattr(filters, name)
        if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
            raise InvalidFilterError(f"filters.{name} must be a timezone-aware datetime")
    if filters.since and filters.until and filters.since > filters.until:
        raise InvalidFilterError("filters.since is after filters.until")
    try:
        kinds = tuple(MemoryKind(kind) for kind in filters.kinds)
    except ValueError as exc:
        raise InvalidFilterError(str(exc)) from exc
    if filters.session_id is not None:
        validate_session_id(filters.session_id)
    return SearchFilters(
        since=filters.since,
        until=filters.until,
        kinds=kinds,
        session_id=filters.session_id,
        include_superseded=filters.include_superseded,
    )


def _as_message(index: int, raw: MessageLike) -> Message:
    if isinstance(raw, Message):
        return raw
    if isinstance(raw, str):
        return Message(role=Role.USER, content=raw)
    if isinstance(raw, Mapping):
        unknown = set(raw) - {"role", "content", "speaker", "name", "timestamp", "turn_id"}
        if unknown:
            raise InvalidMessageError(index, f"unknown fields {sorted(unknown)}")
        if "content" not in raw:
            raise InvalidMessageError(index, "missing 'content'")
        return Message(
            role=raw.get("role", Role.USER),
            content=raw["content"],
            speaker=raw.get("speaker", raw.get("name")),
            timestamp=raw.get("timestamp"),
            turn_id=raw.get("turn_id"),
        )
    raise InvalidMessageError(index, f"expected str, Message or mapping, got {type(raw).__name__}")


def _resolve_timestamp(index: int, value: object, clock: Clock) -> datetime:
    if value is None:
        return clock.now().astimezone(UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError as exc:
            raise InvalidMessageError(index, f"timestamp {value!r} is not ISO 8601") from exc
    if not isinstance(value, datetime):
        raise InvalidMessageError(
            index, f"timestamp must be a datetime, got {type(value).__name__}"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        raise NaiveTimestampError(index, value)
    return value.astimezone(UTC)


def derive_turn_id(
    user_id: str, session_id: str, timestamp: datetime, speaker: str, content: str
) -> str:
    """A stable id for a turn that came without one: same turn, same id."""
    key = "\x1f".join((user_id, session_id, timestamp.isoformat(), speaker, content))
    return "t_" + hashlib.blake2b(key.encode(), digest_size=10).hexdigest()


def normalize_messages(
    messages: MessageLike | Iterable[MessageLike],
    user_id: str,
    session_id: str,
    clock: Clock,
) -> tuple[Turn, ...]:
    """Turn whatever the caller passed into validated ``Turn`` objects, or raise."""
    items: Sequence[MessageLike]
    if isinstance(messages, str | Message | Mapping):
        items = [messages]
    elif isinstance(messages, Iterable):
        items = list(messages)
    else:
        raise InvalidMessageError(0, f"messages must be a list, got {type(messages).__name__}")
    if not items:
        raise EmptyMessagesError("no messages to add")
    turns: list[Turn] = []
    seen: set[str] = set()
    for index, raw in enumerate(items):
        message = _as_message(index, raw)
        try:
            role = Role(message.role)
        except ValueError:
            raise UnknownRoleError(index, message.role) from None
        if not isinstance(message.content, str) or not message.content.strip():
            raise EmptyMessagesError(f"message {index} has no content")
        if len(message.content) > MAX_CONTENT_CHARS:
            raise InvalidMessageError(index, f"content exceeds {MAX_CONTENT_CHARS} characters")
        speaker = message.speaker if message.speaker is not None else role.value
        if _identifier_problem(speaker) is not None:
            raise InvalidMessageError(index, f"speaker {speaker!r} is not a usable name")
        timestamp = _resolve_timestamp(index, message.timestamp, clock)
        content = message.content.strip()
        if message.turn_id is not None:
            problem = _identifier_problem(message.turn_id)
            if problem is not None:
                raise InvalidMessageError(index, f"turn_id {problem}")
            turn_id = message.turn_id
        else:
            turn_id = derive_turn_id(user_id, session_id, timestamp, speaker, content)
            if turn_id in seen:  # the same words twice at the same instant: keep both
                turn_id = f"{turn_id}.{index}"
        if turn_id in seen:
            raise InvalidMessageError(index, f"turn_id {turn_id!r} repeats in this call")
        seen.add(turn_id)
        turns.append(Turn(turn_id, user_id, session_id, role, speaker, content, timestamp))
    return tuple(turns)
