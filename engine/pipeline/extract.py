"""Stage: turn an exchange into candidate MTM entries.

``TurnExtractor`` is the model-free stage: one entry per user or assistant turn, verbatim with
its speaker. The SLM writer plugs in through the same ``EntryExtractor`` interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tiermem.types import MemoryEntry, MemoryKind, Role, Turn


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


class TurnExtractor:
    """One verbatim entry per user or assistant turn; system turns are instructions, not
    memories, and are skipped."""

    name = "turn-v1"
    wants_existing = False

    def extract(
        self, turns: Sequence[Turn], context: Sequence[Turn], existing: Sequence[MemoryEntry] = ()
    ) -> Extraction:
        kept = [t for t in turns if t.role is not Role.SYSTEM]
        return Extraction(
            candidates=tuple(
                CandidateEntry(
                    text=f"{t.speaker}: {t.content}",
                    kind=MemoryKind.TURN,
                    source_turn_ids=(t.turn_id,),
                    event_time=t.timestamp,
                    session_id=t.session_id,
                    stable_key=f"turn:{t.turn_id}",
                )
                for t in kept
            ),
            skipped_turn_ids=tuple(t.turn_id for t in turns if t.role is Role.SYSTEM),
        )
