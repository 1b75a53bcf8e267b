"""Core value types: turns, MTM entries, LTM knowledge facts, search hits and the results of
the client API.

They are frozen dataclasses: cheap on the hot path, hashable, and never mutated behind a
caller's back. Every time is timezone-aware UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from tiermem.errors import WrongTierError


class Role(StrEnum):
    """Who produced a message."""

    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"


class MemoryKind(StrEnum):
    """What an MTM entry holds. ``TURN`` is a verbatim turn and ``EXCHANGE`` a verbatim turn
    with the reply to it (indexed beside the single turns: a question often matches across the
    two, and neither alone); the others come from the writer."""

    TURN = "turn"
    EXCHANGE = "exchange"
    FACT = "fact"
    EVENT = "event"
    PREFERENCE = "preference"
    PLAN = "plan"
    # Never an MTM entry's kind: in ``SearchFilters.kinds`` it lets the shared LTM answer too.
    KNOWLEDGE = "knowledge"


VERBATIM_KINDS = frozenset({MemoryKind.TURN, MemoryKind.EXCHANGE})  # never merged or rewritten


class Tier(StrEnum):
    """Where a search hit comes from: the user's own MTM, or the shared, de-identified LTM."""

    MTM = "mtm"
    LTM = "ltm"


LTM_ID_PREFIX = "ltm:"


def is_knowledge_id(memory_id: str) -> bool:
    """Whether an id names an LTM knowledge item (as search hits show it) rather than an entry.

    >>> is_knowledge_id("ltm:n:1f2e"), is_knowledge_id("3b9c0d")
    (True, False)
    """
    return memory_id.startswith(LTM_ID_PREFIX)


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
    content: str | None  # None or blank: the message is left out (see ``AddResult``)
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
class KnowledgeFact:
    """One item of the cross-user knowledge graph (LTM), as a search shows it.

    It is shared by every user and owned by none: it has no user id, no session and no source
    turns, only the number of (de-identified) MTM entries that support it. ``kind`` is the node
    kind (``Entity``, ``Concept``) or the edge relation (``IsA``, ``HasProperty``, ...);
    ``confidence`` decays from ``last_supported``. Only consolidation changes it;
    ``Memory.knowledge_history(id)`` lists its changes.
    """

    id: str  # "ltm:" + the graph id
    text: str
    kind: str
    evidence: int
    confidence: float
    first_supported: datetime
    last_supported: datetime


class Tiered:
    """What a search hit and a read-path candidate share: one item from one tier, with the
    accessors that hold for both tiers (``id``, ``text``, ``tier``, ``source_turn_ids``) and
    those that hold for one (``entry`` of MTM, ``fact`` of LTM; the other tier raises
    ``WrongTierError``)."""

    __slots__ = ()
    item: MemoryEntry | KnowledgeFact

    @property
    def tier(self) -> Tier:
        return Tier.LTM if isinstance(self.item, KnowledgeFact) else Tier.MTM

    @property
    def id(self) -> str:
        return self.item.id

    @property
    def text(self) -> str:
        return self.item.text

    @property
    def source_turn_ids(self) -> tuple[str, ...]:
        """The user's turns behind an MTM entry; none for LTM knowledge, which is
        de-identified and keeps no turn of anyone."""
        return self.item.source_turn_ids if isinstance(self.item, MemoryEntry) else ()

    @property
    def entry(self) -> MemoryEntry:
        """The user's MTM entry. ``WrongTierError`` on an LTM hit: check ``tier`` first."""
        if not isinstance(self.item, MemoryEntry):
            raise WrongTierError(self.item.id, Tier.LTM, "entry")
        return self.item

    @property
    def fact(self) -> KnowledgeFact:
        """The shared LTM fact. ``WrongTierError`` on an MTM hit: check ``tier`` first."""
        if not isinstance(self.item, KnowledgeFact):
            raise WrongTierError(self.item.id, Tier.MTM, "fact")
        return self.item


@dataclass(frozen=True, slots=True)
class ScoreExplanation:
    """How a hit's score was made: named components (``dense``, ``recency``, ...) and a note."""

    components: Mapping[str, float]
    note: str = ""


@dataclass(frozen=True, slots=True)
class SearchHit(Tiered):
    """What ``search()`` returns: an item from one tier, its final score, and why.

    ``hit.tier`` says where it comes from. An MTM hit's ``hit.entry`` is the user's own
    entry; an LTM hit's ``hit.fact`` is shared knowledge, no user's memory. ``hit.id`` and
    ``hit.text`` hold for both.

    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> fact = KnowledgeFact("ltm:n:1f", "sourdough (Concept): bread", "Concept", 3, 0.8, t, t)
    >>> hit = SearchHit(fact, 0.5, ScoreExplanation({}))
    >>> hit.tier, hit.id, hit.source_turn_ids
    (<Tier.LTM: 'ltm'>, 'ltm:n:1f', ())
    """

    item: MemoryEntry | KnowledgeFact
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
    it merged new information into or superseded, and what capacity pressure evicted. A
    message with no content (an assistant's tool call has ``content: None``) is no turn: it is
    left out, and its position in the call is in ``empty_messages``.

    The capacity eviction runs after the add is written and never undoes it: if the eviction
    fails, the add still stands, ``eviction_error`` says why (``None`` when it succeeded or
    was not needed), the eviction itself is rolled back (or, if the store refuses that too,
    finished before the next write), and the next add enforces capacity again."""

    turns: tuple[Turn, ...]
    entries: tuple[MemoryEntry, ...]
    skipped_turn_ids: tuple[str, ...] = ()
    merged: tuple[MemoryEntry, ...] = ()
    superseded: tuple[MemoryEntry, ...] = ()
    evicted_ids: tuple[str, ...] = ()
    eviction_error: str | None = None
    empty_messages: tuple[int, ...] = ()  # positions of messages with no content, left out


@dataclass(frozen=True, slots=True)
class AnswerResult:
    """What ``answer()`` returns: the text, the hits it used, and how large its context was."""

    text: str
    hits: tuple[SearchHit, ...]
    context_tokens: int
    source_turns: Mapping[str, Turn] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """What one change did to a memory: when, to which entry, its text before and after, who
    made it, and how it was decided (``detail``). Stored, it is an ``AuditEvent``."""

    at: datetime
    user_id: str
    memory_id: str
    op: AuditOp
    before: str | None
    after: str | None
    actor: str
    detail: Mapping[str, object] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AuditEvent(AuditRecord):
    """One row of the audit log: its record and ``seq``, its place in the log."""

    seq: int = field(kw_only=True)
