"""Filter semantics, as a pure predicate. The reference store applies it directly; the Qdrant
store translates the same ``SearchFilters`` into a Qdrant filter, and congruence tests check
that both agree."""

from __future__ import annotations

from tiermem.types import MemoryEntry, SearchFilters


def matches(entry: MemoryEntry, filters: SearchFilters) -> bool:
    """True when ``entry`` passes every constraint in ``filters``."""
    if not filters.include_superseded and entry.superseded_by is not None:
        return False
    if filters.kinds and entry.kind not in filters.kinds:
        return False
    if filters.session_id is not None and entry.session_id != filters.session_id:
        return False
    when = entry.effective_time.timestamp()
    if filters.since is not None and when < filters.since.timestamp():
        return False
    return not (filters.until is not None and when > filters.until.timestamp())
