"""Filter semantics, as a pure predicate. The reference store applies it directly; the Qdrant
store translates the same ``SearchFilters`` into a Qdrant filter, and congruence tests check
that both agree."""

from __future__ import annotations

from qdrant_client import models
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


def to_qdrant_filter(filters: SearchFilters | None) -> models.Filter | None:
    """The same constraints as ``matches``, as a Qdrant filter (payload fields of the store)."""
    if filters is None:
        return None
    must: list[models.Condition] = []
    if not filters.include_superseded:
        must.append(models.IsNullCondition(is_null=models.PayloadField(key="superseded_by")))
    if filters.kinds:
        kinds = [kind.value for kind in filters.kinds]
        must.append(models.FieldCondition(key="kind", match=models.MatchAny(any=kinds)))
    if filters.session_id is not None:
        must.append(
            models.FieldCondition(
                key="session_id", match=models.MatchValue(value=filters.session_id)
            )
        )
    if filters.since is not None or filters.until is not None:
        must.append(
            models.FieldCondition(
                key="time_ts",
                range=models.Range(
                    gte=filters.since.timestamp() if filters.since else None,
                    lte=filters.until.timestamp() if filters.until else None,
                ),
            )
        )
    return models.Filter(must=must) if must else None
