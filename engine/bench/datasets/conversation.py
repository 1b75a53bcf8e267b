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
from datetime import datetime, timedelta
from typing import Any, Literal

ADVERSARIAL = "adversarial"

BenchSplit = Literal["choose", "report"]


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


def split_of(position: int) -> BenchSplit:
    """The benchmark's fixed split of a file's conversations, by position in the file: seven
    in ten to choose settings on, three in ten to report (LoCoMo: conversations 0-6 choose,
    7-9 report; a longer file interleaves the same way).

    >>> [split_of(i) for i in (0, 6, 7, 9, 10, 17)]
    ['choose', 'choose', 'report', 'report', 'choose', 'report']
    """
    return "choose" if position % 10 < 7 else "report"


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


__all__ = [
    "ADVERSARIAL",
    "BenchSplit",
    "Conversation",
    "DialogueTurn",
    "Question",
    "Quirks",
    "Session",
    "session_messages",
    "split_of",
]
