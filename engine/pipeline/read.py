"""The read path: plan (controller) -> first stage per query (dense + BM25, fused by rank,
filtered, ~2K/n each) -> merge to <= 2K -> select <= K (selector) -> access statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tiermem.components import Components
from tiermem.embedding.base import EmbedMode, check_vectors
from tiermem.lexical import lexical_query
from tiermem.pipeline.plan import Candidate, RetrievalPlan, Route
from tiermem.ranking import reciprocal_rank_fusion
from tiermem.stores.base import AccessUpdate
from tiermem.types import ScoreExplanation, SearchFilters, SearchHit, Turn


def first_stage(c: Components, user_id: str, plan: RetrievalPlan) -> list[Candidate]:
    """Hybrid search per planned query, each within its candidate budget; merged across
    queries by rank fusion (query weights as fusion weights) and cut to the total budget."""
    texts = [q.text for q in plan.queries]
    vectors = check_vectors(
        c.embedder.embed(texts, EmbedMode.QUERY), len(texts), c.store.dim, c.embedder.name
    )
    per_query: dict[str, list[str]] = {}
    entries = {}
    components: dict[str, dict[str, float]] = {}
    for i, (query, budget) in enumerate(zip(plan.queries, plan.candidate_budgets, strict=True)):
        if budget == 0:
            continue
        # LTM is not built yet: a query routed there searches MTM (see plan.notes).
        hits = c.store.hybrid_search(
            user_id, vectors[i], lexical_query(query.text), plan.filters, budget
        )
        fused = reciprocal_rank_fusion(
            {
                "dense": [h.entry.id for h in hits.dense],
                "bm25": [h.entry.id for h in hits.lexical],
            }
        )[:budget]
        per_query[f"q{i}"] = [f.key for f in fused]
        for h in hits.dense + hits.lexical:
            entries[h.entry.id] = h.entry
        for source, found in (("dense", hits.dense), ("bm25", hits.lexical)):
            for h in found:
                best = components.setdefault(h.entry.id, {})
                best[source] = max(best.get(source, float("-inf")), h.score)
    weights = {f"q{i}": q.weight for i, q in enumerate(plan.queries)}
    merged = reciprocal_rank_fusion(per_query, weights=weights)[: sum(plan.candidate_budgets)]
    candidates = []
    for f in merged:
        ranks = {f"rank_{name}": float(rank) for name, rank in f.ranks.items()}
        candidates.append(
            Candidate(entries[f.key], f.score, {**components[f.key], "rrf": f.score, **ranks})
        )
    return candidates


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


def relax_if_starved(
    c: Components,
    user_id: str,
    plan: RetrievalPlan,
    candidates: list[Candidate],
    filters: SearchFilters,
) -> list[Candidate]:
    """The controller's constraints are hints: when they leave fewer than ``k`` candidates,
    the caller's own filters are used to fill up (constrained candidates keep their lead)."""
    if len(candidates) >= plan.k or plan.filters == filters:
        return candidates
    c.meter.record_event("controller", "constraints_relaxed")
    seen = {cand.entry.id for cand in candidates}
    extra = first_stage(c, user_id, replace(plan, filters=filters))
    room = sum(plan.candidate_budgets) - len(candidates)
    return candidates + [x for x in extra if x.entry.id not in seen][:room]


def run_search(
    c: Components,
    user_id: str,
    query: str,
    k: int,
    filters: SearchFilters,
    stm: Sequence[Turn] = (),
) -> list[SearchHit]:
    plan = c.planner.plan(query, stm, k, filters, c.clock.now())
    candidates = relax_if_starved(c, user_id, plan, first_stage(c, user_id, plan), filters)
    selection = c.selector.select([q.text for q in plan.queries], candidates, k)
    note = f"plan={plan.source}, selection={selection.source}"
    hits = [
        SearchHit(cand.entry, score, ScoreExplanation({**cand.components, "selector": score}, note))
        for cand, score in selection.kept[:k]
    ]
    return record_access(c, user_id, hits)


__all__ = ["Route", "first_stage", "record_access", "relax_if_starved", "run_search"]
