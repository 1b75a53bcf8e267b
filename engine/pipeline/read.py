"""The read path: embed the query -> first-stage search under filters -> hits with
explanations -> access statistics. The controller and selector plug in around the first
stage in the SLM roles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tiermem.components import Components
from tiermem.embedding.base import EmbedMode, check_vectors
from tiermem.stores.base import AccessUpdate, ScoredEntry
from tiermem.types import ScoreExplanation, SearchFilters, SearchHit


def to_hits(scored: Sequence[ScoredEntry]) -> list[SearchHit]:
    return [
        SearchHit(s.entry, s.score, ScoreExplanation({"dense": s.score}, "cosine similarity"))
        for s in scored
    ]


def record_access(c: Components, user_id: str, hits: Sequence[SearchHit]) -> list[SearchHit]:
    """Bump access statistics of what was retrieved; return the hits as they now stand."""
    if not hits:
        return []
    now = c.clock.now()
    updates = {h.entry.id: AccessUpdate(h.entry.access_count + 1, now) for h in hits}
    c.store.set_access(user_id, updates)
    return [
        replace(
            h,
            entry=replace(
                h.entry, access_count=updates[h.entry.id].access_count, last_accessed=now
            ),
        )
        for h in hits
    ]


def run_search(
    c: Components, user_id: str, query: str, k: int, filters: SearchFilters
) -> list[SearchHit]:
    vector = check_vectors(
        c.embedder.embed([query], EmbedMode.QUERY), 1, c.store.dim, c.embedder.name
    )
    scored = c.store.search(user_id, vector[0], filters, k)
    return record_access(c, user_id, to_hits(scored))
