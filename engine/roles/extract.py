"""Stage: turn an exchange into candidate MTM entries.

``TurnExtractor`` is the model-free stage: one entry per user or assistant turn, verbatim with
its speaker, after the same small-talk rules the SLM writer applies ("thanks!" is a turn in the
journal, not a memory). The SLM writer plugs in through the same ``EntryExtractor`` interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
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


class TurnExtractor:
    """One verbatim entry per user or assistant turn that is not small talk; system turns
    are instructions, not memories. Skipped turns are reported, and stay in the journal."""

    name = "turn-v1"
    wants_existing = False

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry] = ()
    ) -> Extraction:
        split = split_small_talk(turns, context)
        return Extraction(verbatim_candidates(split.kept), split.skipped_turn_ids)
