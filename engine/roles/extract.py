"""Stage: turn an exchange into candidate MTM entries.

``TurnExtractor`` is the model-free stage: one entry per user or assistant turn, verbatim with
its speaker, after the same small-talk rules the SLM writer applies ("thanks!" is a turn in the
journal, not a memory), and one per exchange: a turn with the reply that follows it. The SLM
writer plugs in through the same ``EntryExtractor`` interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from typing import Protocol

from tiermem.smalltalk import split_small_talk
from tiermem.types import MemoryEntry, MemoryKind, Turn


@dataclass(frozen=True, slots=True)
class CandidateEntry:
    """An entry the extractor proposes, before it gets an id and is embedded."""

    text: str
    kind: MemoryKind
    source_turn_ids: tuple[str, ...]
    event_time: datetime | None
    session_id: str | None
    stable_key: str | None = None  # same key, same entry id: re-ingesting is idempotent
    replaces: str | None = None  # id of an existing entry this one supersedes


@dataclass(frozen=True, slots=True)
class Extraction:
    candidates: tuple[CandidateEntry, ...]
    skipped_turn_ids: tuple[str, ...]


class EntryExtractor(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def wants_existing(self) -> bool:
        """Whether ``extract`` should see the user's related memories (costs a search)."""
        ...

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry]
    ) -> Extraction:
        """Propose entries for ``turns``; ``context`` is the STM window before them and
        ``existing`` the user's stored memories most related to them."""
        ...


def verbatim_candidates(turns: Sequence[Turn]) -> tuple[CandidateEntry, ...]:
    """One verbatim entry per turn, "Speaker: content", keyed by the turn (re-adding it
    proposes the same entry id)."""
    return tuple(
        CandidateEntry(
            text=f"{t.speaker}: {t.content}",
            kind=MemoryKind.TURN,
            source_turn_ids=(t.turn_id,),
            event_time=t.timestamp,
            session_id=t.session_id,
            stable_key=f"turn:{t.turn_id}",
        )
        for t in turns
    )


def exchange_candidates(turns: Sequence[Turn], kept: Sequence[Turn]) -> tuple[CandidateEntry, ...]:
    r"""One verbatim entry per exchange in ``turns``: two consecutive turns of one session by
    different speakers, both ``kept``. A question and its answer are often said in different
    turns ("Where did you go?" / "Lisbon, for the festival."): the pair, embedded and indexed
    as one text, matches a query that neither turn matches alone.

    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> from tiermem.types import Role
    >>> said = [("Ann", "Where did you go?"), ("Bo", "Lisbon."), ("Bo", "It was hot.")]
    >>> ts = [Turn(f"t{i}", "u", "s1", Role.USER, who, text, t)
    ...       for i, (who, text) in enumerate(said)]
    >>> [(e.text, e.source_turn_ids) for e in exchange_candidates(ts, ts)]
    [('Ann: Where did you go?\nBo: Lisbon.', ('t0', 't1'))]
    """
    kept_ids = {t.turn_id for t in kept}
    return tuple(
        CandidateEntry(
            text=f"{a.speaker}: {a.content}\n{b.speaker}: {b.content}",
            kind=MemoryKind.EXCHANGE,
            source_turn_ids=(a.turn_id, b.turn_id),
            event_time=a.timestamp,
            session_id=a.session_id,
            stable_key=f"exchange:{a.turn_id}:{b.turn_id}",
        )
        for a, b in pairwise(turns)
        if a.turn_id in kept_ids
        and b.turn_id in kept_ids
        and a.session_id == b.session_id
        and a.speaker != b.speaker
    )


class TurnExtractor:
    """One verbatim entry per user or assistant turn that is not small talk, and one per
    exchange of two such turns (``exchange_candidates``); system turns are instructions, not
    memories. Skipped turns are reported, and stay in the journal.

    ``exchanges=False``: single turns only (what ``turn-v1`` wrote)."""

    wants_existing = False

    def __init__(self, exchanges: bool = True) -> None:
        self._exchanges = exchanges
        self.name = "turn-exchange-v1" if exchanges else "turn-v1"

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry] = ()
    ) -> Extraction:
        split = split_small_talk(turns, context)
        candidates = verbatim_candidates(split.kept)
        if self._exchanges:
            candidates += exchange_candidates(turns, split.kept)
        return Extraction(candidates, split.skipped_turn_ids)
