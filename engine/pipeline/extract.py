"""Stage: turn an exchange into candidate MTM entries.

``TurnExtractor`` is the model-free stage: one entry per user or assistant turn, verbatim with
its speaker. The SLM writer plugs in through the same ``EntryExtractor`` interface.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tiermem.types import MemoryKind, Role, Turn


@dataclass(frozen=True, slots=True)
class CandidateEntry:
    """An entry the extractor proposes, before it gets an id and is embedded."""

    text: str
    kind: MemoryKind
    source_turn_ids: tuple[str, ...]
    event_time: datetime | None
    session_id: str | None
    stable_key: str | None = None  # same key, same entry id: re-ingesting is idempotent


@dataclass(frozen=True, slots=True)
class Extraction:
    candidates: tuple[CandidateEntry, ...]
    skipped_turn_ids: tuple[str, ...]


class EntryExtractor(Protocol):
    @property
    def name(self) -> str: ...

    def extract(self, turns: Sequence[Turn], context: Sequence[Turn]) -> Extraction:
        """Propose entries for ``turns``; ``context`` is the STM window before them."""
        ...


class TurnExtractor:
    """One verbatim entry per user or assistant turn; system turns are instructions, not
    memories, and are skipped."""

    name = "turn-v1"

    def extract(self, turns: Sequence[Turn], context: Sequence[Turn]) -> Extraction:
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
