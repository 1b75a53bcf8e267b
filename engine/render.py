"""How entries become text: for the index (with their date, which helps temporal questions)
and for the generator's context."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from tiermem.types import MemoryEntry, MemoryKind, SearchHit


def human_date(when: datetime) -> str:
    """>>> from datetime import UTC, datetime
    >>> human_date(datetime(2026, 3, 7, tzinfo=UTC))
    '7 March 2026'
    """
    return f"{when.day} {when.strftime('%B %Y')}"


def index_text(entry: MemoryEntry) -> str:
    """What the embedder sees for an entry: its date, then its text."""
    return f"[{human_date(entry.effective_time)}] {entry.text}"


def render_memory(entry: MemoryEntry) -> str:
    if entry.kind is MemoryKind.KNOWLEDGE:  # cross-user knowledge has no episode date
        return f"[general knowledge] {entry.text}"
    return f"[{human_date(entry.effective_time)}] {entry.text}"


def render_context(hits: Sequence[SearchHit]) -> str:
    """The memories handed to a generator, oldest first so that updates read in order."""
    ordered = sorted(hits, key=lambda h: h.entry.effective_time)
    return "\n".join(f"- {render_memory(h.entry)}" for h in ordered)
