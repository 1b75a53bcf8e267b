"""How entries and facts become text: for the index (with their date, which helps temporal
questions) and for the selector's and the generator's context."""

from __future__ import annotations

from datetime import datetime

from tiermem.types import KnowledgeFact, MemoryEntry


def human_date(when: datetime) -> str:
    """>>> from datetime import UTC, datetime
    >>> human_date(datetime(2026, 3, 7, tzinfo=UTC))
    '7 March 2026'
    """
    return f"{when.day} {when.strftime('%B %Y')}"


def index_text(entry: MemoryEntry) -> str:
    """What the embedder sees for an entry: its date, then its text."""
    return f"[{human_date(entry.effective_time)}] {entry.text}"


def render_memory(item: MemoryEntry | KnowledgeFact) -> str:
    """An MTM entry with its date; an LTM fact as general knowledge, which has no episode
    date and no owner."""
    if isinstance(item, KnowledgeFact):
        return f"[general knowledge] {item.text}"
    return f"[{human_date(item.effective_time)}] {item.text}"
