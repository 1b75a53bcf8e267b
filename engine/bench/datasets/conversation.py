"""Dataset-neutral conversations and questions, as every benchmark and training set reads them.

A loader (:mod:`tiermem.bench.datasets.locomo` for LoCoMo-format files, LongMemEval's
included) turns a file into :class:`Conversation` values; everything downstream (the systems
compared, the aggregates, the training sets) sees only these types.

A question's *group*, the unit reports break results down by, is its ``question_type`` where
the data set has one (LongMemEval's ``knowledge-update``, ``multi-session``, ...), else its
``category``. The *headline* questions are those with gold evidence that are not adversarial
(an adversarial question asks about what was never said: its "evidence" is the turn that says
something else, and it is reported apart).

>>> q = Question("Where?", "Lisbon", ("D1:3",), "single-hop", None)
>>> q.group, q.headline
('single-hop', True)
>>> Question("Why?", "", ("D1:1",), "adversarial", None).headline
False
>>> Question("How often?", "weekly", ("D4:5",), "single-hop", "knowledge-update").group
'knowledge-update'
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

ADVERSARIAL = "adversarial"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # where a conversation with no dated session starts


@dataclass(frozen=True, slots=True)
class DialogueTurn:
    """One message: ``turn_id`` is the id gold evidence names (LoCoMo's ``D1:3``)."""

    turn_id: str
    speaker: str
    text: str


@dataclass(frozen=True, slots=True)
class Session:
    index: int
    date: datetime | None
    turns: tuple[DialogueTurn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    answer: str
    evidence: tuple[str, ...]  # turn ids
    category: str  # a name, e.g. "multi-hop", "temporal", "adversarial"
    question_type: str | None = None  # the data set's finer type, where it has one

    @property
    def group(self) -> str:
        """What reports break results down by: ``question_type``, else ``category``."""
        return self.question_type or self.category

    @property
    def headline(self) -> bool:
        """Counted in the headline: it has evidence and is not adversarial."""
        return bool(self.evidence) and self.category != ADVERSARIAL


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def speakers(self) -> tuple[str, str]:
        return self.speaker_a, self.speaker_b

    @property
    def turn_count(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    def turn_ids(self) -> set[str]:
        return {t.turn_id for s in self.sessions for t in s.turns}


@dataclass
class Quirks:
    """What a loader met and tolerated, counted per kind (reported per file)."""

    counts: Counter[str] = field(default_factory=Counter)

    def note(self, quirk: str, n: int = 1) -> None:
        if n:
            self.counts[quirk] += n


def session_messages(session: Session, fallback_date: datetime) -> list[dict[str, Any]]:
    """A session as ``add()`` messages: both speakers keep their names, turn ids are the
    dialogue ids (so gold evidence maps onto source turns), turns a minute apart.

    >>> from datetime import UTC
    >>> turns = (DialogueTurn("D1:1", "Ana", "Hi."), DialogueTurn("D1:2", "Ben", "Yo."))
    >>> s = Session(1, None, turns)
    >>> [(m["speaker"], m["turn_id"], m["timestamp"].minute) for m in
    ...  session_messages(s, datetime(2024, 1, 1, tzinfo=UTC))]
    [('Ana', 'D1:1', 0), ('Ben', 'D1:2', 1)]
    """
    start = session.date or fallback_date
    return [
        {
            "role": "user",
            "speaker": t.speaker,
            "content": t.text or "(no text)",
            "timestamp": start + timedelta(minutes=i),
            "turn_id": t.turn_id,
        }
        for i, t in enumerate(session.turns)
    ]


def session_dates(conversation: Conversation) -> list[datetime]:
    """Each session's date: its own, else a day after the session before it (counting from the
    first dated session; from 1970-01-01 UTC where none is dated). Every system of a benchmark
    and every training set dates a conversation this way.

    >>> d = datetime(2024, 5, 1, tzinfo=UTC)
    >>> c = Conversation("c", "A", "B", (Session(1, d, ()), Session(2, None, ())), ())
    >>> [x.isoformat() for x in session_dates(c)]
    ['2024-05-01T00:00:00+00:00', '2024-05-02T00:00:00+00:00']
    """
    previous = next((s.date for s in conversation.sessions if s.date), None)
    dates = []
    for session in conversation.sessions:
        when = session.date or (previous + timedelta(days=1) if previous else EPOCH)
        dates.append(when)
        previous = when
    return dates


def conversation_adds(conversation: Conversation) -> list[tuple[str, list[dict[str, Any]]]]:
    """The conversation as ``add()`` calls, one a session: its session id (``s<index>``) and
    its messages (:func:`session_messages`, dated by :func:`session_dates`)."""
    dates = session_dates(conversation)
    return [
        (f"s{session.index}", session_messages(session, when))
        for session, when in zip(conversation.sessions, dates, strict=True)
    ]


__all__ = [
    "ADVERSARIAL",
    "EPOCH",
    "Conversation",
    "DialogueTurn",
    "Question",
    "Quirks",
    "Session",
    "conversation_adds",
    "session_dates",
    "session_messages",
]
