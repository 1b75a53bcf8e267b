"""Input validation for the client API. Every check raises a typed ``InvalidInputError``
before anything is stored."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from tiermem.errors import (
    EmptyMessagesError,
    InvalidFilterError,
    InvalidInputError,
    InvalidLimitError,
    InvalidMemoryIdError,
    InvalidMessageError,
    InvalidQueryError,
    InvalidSessionIdError,
    InvalidUserIdError,
    NaiveTimestampError,
    UnknownRoleError,
    shown,
)
from tiermem.types import MemoryKind, Message, Role, SearchFilters, SearchHit, Turn

MAX_ID_LENGTH = 128
# A pasted document or a long answer is kept whole in the journal and indexed in pieces
# (``tiermem.roles.extract.CHUNK_WORDS``); past this, a message is refused.
MAX_CONTENT_CHARS = 262_144
MAX_MEMORY_TEXT_CHARS = 32_000  # update() rewrites one memory's text
MAX_QUERY_CHARS = 4_000
DEFAULT_SESSION = "default"

MessageLike = str | Message | Mapping[str, Any]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# Unicode's Default_Ignorable_Code_Point set (DerivedCoreProperties.txt): characters that
# render as nothing (zero-width spaces and joiners, BOM, bidi marks, fillers, variation
# selectors, tags). Text made only of these and whitespace is blank.
_BLANK = re.compile(
    "[\\s\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f"
    "\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]*"
)
# Control, format, surrogate, private-use and unassigned (C*), line and paragraph
# separators (Zl, Zp): none of them belongs in an identifier.
_BAD_ID_CATEGORIES = ("C", "Zl", "Zp")
SURROGATE_PROBLEM = "must not hold a lone surrogate (U+D800..U+DFFF cannot be stored as UTF-8)"


def has_lone_surrogate(text: str) -> bool:
    """True when ``text`` holds a surrogate code point, which no UTF-8 store can encode."""
    return _LONE_SURROGATE.search(text) is not None


def is_blank(text: str) -> bool:
    """True when ``text`` shows nothing: only whitespace and zero-width characters.

    >>> is_blank(" \u200b\ufeff "), is_blank("\u200bhi")
    (True, False)
    """
    return _BLANK.fullmatch(text) is not None


def _identifier_problem(value: object, max_length: int = MAX_ID_LENGTH) -> str | None:
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if len(value) > max_length:
        return f"must be at most {max_length} characters"
    if has_lone_surrogate(value):
        return SURROGATE_PROBLEM
    if not value.strip():
        return "must not be empty or blank"
    if value != value.strip():
        return "must not start or end with whitespace"
    for ch in value:
        if unicodedata.category(ch).startswith(_BAD_ID_CATEGORIES):
            return (
                "must not contain control, format, line-separator or unassigned characters"
                f" (found U+{ord(ch):04X})"
            )
    return None


def _nfc_identifier(
    value: object, max_length: int = MAX_ID_LENGTH
) -> tuple[str | None, str | None]:
    """``(the NFC form, None)`` of a usable identifier, else ``(None, the problem)``."""
    if isinstance(value, str) and len(value) <= 4 * MAX_ID_LENGTH:
        # checked after NFC, so "José" is the same id whether composed or not; a longer
        # value (NFC composes at most 4 code points into 1) is refused as it stands
        value = unicodedata.normalize("NFC", value)
    problem = _identifier_problem(value, max_length)
    return (value, None) if problem is None and isinstance(value, str) else (None, problem)


def validate_user_id(user_id: object, max_length: int = MAX_ID_LENGTH) -> str:
    """Return ``user_id`` in Unicode NFC if it is a usable identifier of at most
    ``max_length`` characters, else raise ``InvalidUserIdError``. NFC makes a composed and
    a decomposed "José" one user.

    >>> validate_user_id("Jose\u0301") == "Jos\u00e9"
    True
    """
    normal, problem = _nfc_identifier(user_id, max_length)
    if normal is None:
        raise InvalidUserIdError(user_id, problem or "is not usable")
    return normal


def validate_session_id(session_id: object) -> str:
    """Return the session id in NFC (``"default"`` for ``None``) or raise
    ``InvalidSessionIdError``."""
    if session_id is None:
        return DEFAULT_SESSION
    normal, problem = _nfc_identifier(session_id)
    if normal is None:
        raise InvalidSessionIdError(session_id, problem or "is not usable")
    return normal


def validate_memory_id(memory_id: object, user_id: str) -> str:
    """A memory id as given, or ``InvalidMemoryIdError`` (a ``MemoryNotFoundError``) when no
    memory could have it. Ids are never normalised: tiermem makes them, all ASCII."""
    problem = _identifier_problem(memory_id)
    if problem is not None:
        raise InvalidMemoryIdError(memory_id, user_id, problem)
    assert isinstance(memory_id, str)
    return memory_id


def validate_k(k: object, name: str = "k") -> int:
    """A result limit must be a positive ``int`` (``bool`` is refused)."""
    if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
        raise InvalidLimitError(name, k)
    return k


def text_fault(text: object, limit: int) -> str | None:
    """What keeps ``text`` from being stored or searched, or ``None``: not a string, over
    ``limit`` characters, a lone surrogate, or nothing to show (blank or zero-width only).

    >>> text_fault("ok", 10), text_fault("x" * 11, 10)
    (None, 'exceeds 10 characters (it has 11)')
    >>> text_fault(" \u200b ", 10)
    'must not be empty, blank or only zero-width characters'
    """
    if not isinstance(text, str):
        return f"must be a non-empty string, got {type(text).__name__}"
    if len(text) > limit:
        return f"exceeds {limit} characters (it has {len(text)})"
    if has_lone_surrogate(text):
        return SURROGATE_PROBLEM
    if is_blank(text):
        return "must not be empty, blank or only zero-width characters"
    return None


def validate_text(text: object, what: str = "query", limit: int = MAX_QUERY_CHARS) -> str:
    """A query or memory text: a string of bounded length that shows something."""
    fault = text_fault(text, limit)
    if fault is not None:
        raise InvalidQueryError(f"{what} {fault}")
    assert isinstance(text, str)
    return text.strip()


def validate_memory_text(text: object) -> str:
    """The new text of ``update()``: the same rules and limit as a message's content."""
    return validate_text(text, "memory text", MAX_MEMORY_TEXT_CHARS)


NO_TIME_ZONE = "has no time zone"


def _to_utc(value: datetime, fail: Callable[[str], InvalidInputError]) -> datetime:
    """``value`` as the same instant in UTC, or ``fail(why there is none)`` raised."""
    try:
        # both calls run the caller's tzinfo.utcoffset(), which may raise anything
        offset = value.utcoffset()
        utc = None if offset is None else value.astimezone(UTC)
    except OverflowError as exc:  # datetime(1, 1, 1, tzinfo=UTC+14) is in year 0 in UTC
        raise fail("has no UTC equivalent within years 1 to 9999") from exc
    except (ValueError, TypeError) as exc:  # an offset over a day, or not a timedelta
        raise fail("has a time zone whose UTC offset is invalid") from exc
    except Exception as exc:  # the caller's tzinfo is broken: bad input, not our failure
        raise fail(f"has a time zone whose utcoffset() raised {type(exc).__name__}") from exc
    if utc is None:  # no tzinfo, or one that does not know its offset
        raise fail(NO_TIME_ZONE)
    return utc


def _filter_bound(name: str, value: object) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidFilterError(
            f"filters.{name} must be a timezone-aware datetime, got {type(value).__name__}"
        )
    return _to_utc(value, lambda why: InvalidFilterError(f"filters.{name} {shown(value)} {why}"))


def _filter_kinds(kinds: object) -> tuple[MemoryKind, ...]:
    if isinstance(kinds, str | bytes) or not isinstance(kinds, Iterable):
        raise InvalidFilterError(
            f"filters.kinds must be a tuple of MemoryKind, got {type(kinds).__name__}"
        )
    out: dict[MemoryKind, None] = {}
    for kind in kinds:
        try:
            out[MemoryKind(kind)] = None
        except (ValueError, TypeError):
            known = ", ".join(k.value for k in MemoryKind)
            raise InvalidFilterError(
                f"filters.kinds holds {shown(kind)}, which is not a kind ({known})"
            ) from None
    return tuple(out)


def validate_filters(filters: SearchFilters | None) -> SearchFilters:
    """A filter with its times in UTC and ordered, its kinds known, its session id in NFC and
    ``include_superseded`` a real bool, or ``InvalidFilterError``."""
    if filters is None:
        return SearchFilters()
    if not isinstance(filters, SearchFilters):
        raise InvalidFilterError(f"filters must be SearchFilters, got {type(filters).__name__}")
    since = _filter_bound("since", filters.since)
    until = _filter_bound("until", filters.until)
    if since is not None and until is not None and since > until:
        raise InvalidFilterError("filters.since is after filters.until")
    if not isinstance(filters.include_superseded, bool):
        raise InvalidFilterError(
            "filters.include_superseded must be True or False, got "
            + shown(filters.include_superseded)
        )
    session_id = filters.session_id
    return SearchFilters(
        since=since,
        until=until,
        kinds=_filter_kinds(filters.kinds),
        session_id=None if session_id is None else validate_session_id(session_id),
        include_superseded=filters.include_superseded,
    )


def validate_hits(hits: object) -> list[SearchHit]:
    """The hits of ``source_turns()``: an iterable of ``SearchHit`` (what ``search()``
    returns), or ``InvalidInputError``."""
    if isinstance(hits, SearchHit | str | bytes | Mapping) or not isinstance(hits, Iterable):
        raise InvalidInputError(
            f"hits must be a list of SearchHit (as search() returns), got {type(hits).__name__}"
        )
    checked = list(hits)
    for index, hit in enumerate(checked):
        if not isinstance(hit, SearchHit):
            raise InvalidInputError(f"hits[{index}] is a {type(hit).__name__}, not a SearchHit")
    return checked


# Fields of an OpenAI chat message that carry no text to remember: an agent passes its
# transcript on as it is, and a tool call's message has ``content: None``.
OPENAI_EXTRAS = frozenset({"tool_calls", "function_call", "refusal", "annotations", "audio"})


def _as_message(index: int, raw: MessageLike) -> Message:
    if isinstance(raw, Message):
        return raw
    if isinstance(raw, str):
        return Message(role=Role.USER, content=raw)
    if isinstance(raw, Mapping):
        unknown = set(raw) - {"role", "content", "speaker", "name", "timestamp", "turn_id"}
        unknown -= OPENAI_EXTRAS
        if unknown:
            names = sorted(unknown, key=repr)  # keys of any type, in a stable order
            raise InvalidMessageError(index, f"unknown fields {shown(names)}")
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


def _resolve_timestamp(index: int, value: object, now: datetime) -> datetime:
    if value is None:
        return now.astimezone(UTC)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidMessageError(index, f"timestamp {shown(value)} is not ISO 8601") from None
    if not isinstance(value, datetime):
        raise InvalidMessageError(
            index, f"timestamp must be a datetime, got {type(value).__name__}"
        )
    when = value

    def fail(why: str) -> InvalidMessageError:
        if why == NO_TIME_ZONE:
            return NaiveTimestampError(index, when)
        return InvalidMessageError(index, f"timestamp {shown(when)} {why}")

    return _to_utc(value, fail)


def _message_content(index: int, content: object) -> str | None:
    """A message's content, stripped; ``None`` for one that says nothing (``None``, blank or
    only zero-width characters, as an agent's tool-call message has)."""
    if content is None or (isinstance(content, str) and is_blank(content)):
        return None
    if not isinstance(content, str):
        raise EmptyMessagesError(f"message {index} has no text content")
    fault = text_fault(content, MAX_CONTENT_CHARS)
    if fault is not None:
        raise InvalidMessageError(index, f"content {fault}")
    return content.strip()


def derive_turn_id(
    user_id: str, session_id: str, timestamp: datetime, speaker: str, content: str
) -> str:
    """A stable id for a turn that came without one: same turn, same id."""
    key = "\x1f".join((user_id, session_id, timestamp.isoformat(), speaker, content))
    return "t_" + hashlib.blake2b(key.encode(), digest_size=10).hexdigest()


@dataclass(frozen=True, slots=True)
class Messages:
    """Validated messages: their turns, and the positions of those that said nothing."""

    turns: tuple[Turn, ...]
    empty: tuple[int, ...] = ()


def normalize_messages(
    messages: MessageLike | Iterable[MessageLike],
    user_id: str,
    session_id: str,
    now: datetime,
) -> Messages:
    """Turn whatever the caller passed into validated ``Turn`` objects, or raise. A message
    with no content is left out and its position reported, unless no message has any; one
    without a timestamp is stamped ``now``."""
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
    empty: list[int] = []
    seen: set[str] = set()
    for index, raw in enumerate(items):
        message = _as_message(index, raw)
        try:
            role = Role(message.role)
        except ValueError:
            raise UnknownRoleError(index, message.role) from None
        content = _message_content(index, message.content)
        speaker = message.speaker if message.speaker is not None else role.value
        problem = _identifier_problem(speaker)
        if problem is not None:
            raise InvalidMessageError(index, f"speaker {shown(speaker)}: {problem}")
        timestamp = _resolve_timestamp(index, message.timestamp, now)
        if message.turn_id is not None:
            problem = _identifier_problem(message.turn_id)
            if problem is not None:
                raise InvalidMessageError(index, f"turn_id {problem}")
        if content is None:
            empty.append(index)
            continue
        if message.turn_id is not None:
            turn_id = message.turn_id
        else:
            turn_id = derive_turn_id(user_id, session_id, timestamp, speaker, content)
            if turn_id in seen:  # the same words twice at the same instant: keep both
                turn_id = f"{turn_id}.{index}"
        if turn_id in seen:
            raise InvalidMessageError(index, f"turn_id {shown(turn_id)} repeats in this call")
        seen.add(turn_id)
        turns.append(Turn(turn_id, user_id, session_id, role, speaker, content, timestamp))
    if not turns:
        raise EmptyMessagesError(
            "no message has content" if len(items) > 1 else "message 0 has no content"
        )
    return Messages(tuple(turns), tuple(empty))
