"""Core value types: turns, MTM entries, search hits and the results of the client API.

They are frozen dataclasses: cheap on the hot path, hashable, and never mutated behind a
caller's back. Every time is timezone-aware UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class Role(StrEnum):
    """Who produced a message."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"


class MemoryKind(StrEnum):
    """What an MTM entry holds. ``TURN`` is a verbatim turn; the others come from the writer."""

    TURN = "turn"
    FACT = "fact"
    EVENT = "event"
    PREFERENCE = "preference"
    PLAN = "plan"
    KNOWLEDGE = "knowledge"  # a de-identified fact from the cross-user LTM, never stored in MTM


class AuditOp(StrEnum):
    """Every change to a memory is one of these, and each is one audit row."""

    ADD = "ADD"
    UPDATE = "UPDATE"
    MERGE = "MERGE"
    SUPERSEDE = "SUPERSEDE"
    DELETE = "DELETE"


@dataclass(frozen=True, slots=True)
class Message:
    """One message as a caller hands it to ``add()``.

    ``timestamp`` must be timezone-aware when given; ``turn_id`` is derived from the session,
    time, speaker and content when left out, so re-ingesting the same turn keeps its id.

    >>> Message(role="user", content="I moved to Porto.").role
    'user'
    """

    role: str
    content: str
    speaker: str | None = None
    timestamp: datetime | None = None
    turn_id: str | None = None


@dataclass(frozen=True, slots=True)
class Turn:
    """A validated message with every field resolved: what STM holds and MTM points back to."""

    turn_id: str
    user_id: str
    session_id: str
    role: Role
    speaker: str
    content: str
    timestamp: datetime


@dataclass(frozen=True, slots=True)
class MemoryEntry:
    """One MTM entry: a short self-contained text with its time, use and provenance."""

    id: str
    user_id: str
    text: str
    kind: MemoryKind
    created_at: datetime
    updated_at: datetime
    event_time: datetime | None = None
    access_count: int = 0
    last_accessed: datetime | None = None
    source_turn_ids: tuple[str, ...] = ()
    session_id: str | None = None
    confidence: float = 1.0
    superseded_by: str | None = None

    @property
    def effective_time(self) -> datetime:
        """When the remembered thing happened if known, else when it was written."""
        return self.event_time if self.event_time is not None else self.created_at


@dataclass(frozen=True, slots=True)
class ScoreExplanation:
    """How a hit's score was made: named components (``dense``, ``recency``, ...) and a note."""

    components: Mapping[str, float]
    note: str = ""


@dataclass(frozen=True, slots=True)
class SearchHit:
    """A memory returned by ``search()``: the entry, its final score, and why."""

    entry: MemoryEntry
    score: float
    explanation: ScoreExplanation


@dataclass(frozen=True, slots=True)
class SearchFilters:
    """Metadata constraints. ``since``/``until`` bound the entry's effective time (inclusive)."""

    since: datetime | None = None
    until: datetime | None = None
    kinds: tuple[MemoryKind, ...] = ()
    session_id: str | None = None
    include_superseded: bool = False


@dataclass(frozen=True, slots=True)
class AddResult:
    """What ``add()`` did: the turns it accepted, the entries it added, the existing entries
    it merged new information into or superseded, and what capacity pressure evicted."""

    turns: tuple[Turn, ...]
    entries: tuple[MemoryEntry, ...]
    skipped_turn_ids: tuple[str, ...] = ()
    merged: tuple[MemoryEntry, ...] = ()
    superseded: tuple[MemoryEntry, ...] = ()
    evicted_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What ``answer()`` returns: the text, the hits it used, and how large its context was."""

    text: str
    hits: tuple[SearchHit, ...]
    context_tokens: int
    source_turns: Mapping[str, Turn] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One row of the audit log."""

    seq: int
    at: datetime
    user_id: str
    memory_id: str
    op: AuditOp
    before: str | None
    after: str | None
    actor: str
    detail: Mapping[str, object] = field(default_factory=dict)
