"""The read path: intent (planner) -> budgets (``Policy``) -> first stage per query (dense +
BM25, fused by rank, filtered, ~2K/n each) -> merge to <= 2K -> LTM's share -> select <= K
(selector) -> access statistics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from tiermem.components import Components
from tiermem.embedding.base import EmbedMode, Vectors, check_vectors
from tiermem.lexical import asks_about_the_asker, content_stems, search_terms
from tiermem.policy import budget_plan
from tiermem.ranking import reciprocal_rank_fusion
from tiermem.roles.plan import Candidate, RetrievalPlan, Route
from tiermem.stores.base import HybridHits, hybrid_nearest
from tiermem.types import MemoryKind, ScoreExplanation, SearchFilters, SearchHit, Tier, Turn

# Dense + BM25 fusion over a user's own entries. Each list is short (a few times k) and its
# top is where the precise matches are (a rare name, a date), so the top ranks weigh more
# than with the usual 60: on the budgeted curve of 2 LoCoMo conversations, 60 -> 10 raised recall at
# 300/600/1,200 tokens by 7/6/3.5 points, every category at 1,200 even or better (issue #11).
# Leave-one-dataset-out over 5, 30 and 60, 10 lost no left-out set (docs/decisions.md).
HYBRID_RRF_K = 10


def query_vectors(c: Components, plan: RetrievalPlan) -> Vectors:
    """The planned queries, embedded once for every search that reads them."""
    texts = [q.text for q in plan.queries]
    return check_vectors(
        c.embedder.embed(texts, EmbedMode.QUERY), len(texts), c.store.dim, c.embedder.name
    )


def first_stage(
    c: Components, user_id: str, plan: RetrievalPlan, vectors: Vectors | None = None
) -> list[Candidate]:
    """Hybrid search per planned query, each within its candidate budget, on the tiers the
    query is routed to (LTM beside MTM when it is on); merged across queries and tiers by rank
    fusion (query weights as fusion weights) and cut to the total budget. ``vectors``: the
    queries' (``query_vectors``), embedded here if not given."""
    if vectors is None:
        vectors = query_vectors(c, plan)
    per_query: dict[str, list[str]] = {}
    weights: dict[str, float] = {}
    found: dict[str, Candidate] = {}
    use_ltm = ltm_applies(c, plan)
    mtm: list[tuple[int, int]] = []  # (query, its candidate budget), searched below
    budgets = zip(plan.queries, plan.candidate_budgets, plan.ltm_budgets, strict=True)
    for i, (query, budget, ltm_budget) in enumerate(budgets):
        if budget == 0:
            continue
        searches_ltm = use_ltm and ltm_budget > 0
        if query.route is not Route.LTM or not searches_ltm:  # no LTM: its queries search MTM
            mtm.append((i, budget))
        if searches_ltm:
            per_query[f"q{i}:ltm"] = _ltm_candidates(c, vectors[i], ltm_budget, found)
            weights[f"q{i}:ltm"] = plan.queries[i].weight
    for i, budget in mtm:  # the store takes its calls in turn, under its lock
        text = plan.queries[i].text
        hits = hybrid_nearest(
            c.store, user_id, vectors[i], search_terms(text), plan.filters, budget
        )
        hits = on_topic(hits, text)
        per_query[f"q{i}"] = _mtm_candidates(hits, budget, found)
        weights[f"q{i}"] = plan.queries[i].weight
    merged = reciprocal_rank_fusion(per_query, weights=weights)[: sum(plan.candidate_budgets)]
    candidates = []
    for f in merged:
        ranks = {f"rank_{name}": float(rank) for name, rank in f.ranks.items()}
        cand = found[f.key]
        candidates.append(
            replace(cand, fused=f.score, components={**cand.components, "rrf": f.score, **ranks})
        )
    return candidates


def ltm_applies(c: Components, plan: RetrievalPlan) -> bool:
    """LTM holds timeless, session-less general knowledge: it answers no query constrained
    to a time, a session or other kinds of memory."""
    f = plan.filters
    if c.ltm is None or plan.tier_budgets.ltm == 0:
        return False
    if f.since or f.until or f.session_id:
        return False
    return not f.kinds or MemoryKind.KNOWLEDGE in f.kinds


def on_topic(hits: HybridHits, question: str) -> HybridHits:
    """``hits`` without the BM25 hits that share no content word with ``question``. A
    first-person question's own words ("my", "have": ``search_terms``) weigh among the
    entries on its topic; alone they find nothing: in a small memory "my" is rare enough
    that "My brother works as a pilot." would outrank the greyhound for "What is my dog's
    name?". A question that BM25 reads in content words only is returned as it is.

    >>> from datetime import UTC, datetime
    >>> from tiermem.stores.base import ScoredEntry
    >>> from tiermem.types import MemoryEntry, MemoryKind
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> def hit(text):
    ...     return ScoredEntry(MemoryEntry(text, "u", text, MemoryKind.TURN, at, at), 1.0)
    >>> found = HybridHits([], [hit("My brother is a pilot."), hit("I adopted a dog.")])
    >>> [h.entry.text for h in on_topic(found, "What is my dog's name?").lexical]
    ['I adopted a dog.']
    """
    if not asks_about_the_asker(question):
        return hits
    topic = content_stems(question)
    return replace(
        hits, lexical=[h for h in hits.lexical if not topic.isdisjoint(content_stems(h.entry.text))]
    )


def _mtm_candidates(hits: HybridHits, budget: int, found: dict[str, Candidate]) -> list[str]:
    fused = reciprocal_rank_fusion(
        {"dense": [h.entry.id for h in hits.dense], "bm25": [h.entry.id for h in hits.lexical]},
        k=HYBRID_RRF_K,
    )[:budget]
    for source, hs in (("dense", hits.dense), ("bm25", hits.lexical)):
        for h in hs:
            cand = found.setdefault(h.entry.id, Candidate(h.entry, 0.0, {}))
            best = cand.components
            best[source] = max(best.get(source, float("-inf")), h.score)
    return [f.key for f in fused]


def _ltm_candidates(
    c: Components, vector: Vectors, n: int, found: dict[str, Candidate]
) -> list[str]:
    """LTM facts as candidates of their own type: shared knowledge, owned by no user."""
    assert c.ltm is not None
    keys = []
    for found_fact in c.ltm.search(vector, n, c.clock.now()):
        fact = found_fact.knowledge()
        cand = found.setdefault(fact.id, Candidate(fact, 0.0, {}))
        best = cand.components.get("ltm", float("-inf"))
        cand.components["ltm"] = max(best, found_fact.score)
        cand.components["ltm_evidence"] = float(fact.evidence)
        keys.append(fact.id)
    return keys


def within_tier_budget(candidates: Sequence[Candidate], k_ltm: int) -> list[Candidate]:
    """The one place LTM's share is enforced: candidates in order, without the LTM facts
    beyond the first ``k_ltm``. No selector can then keep more than ``k_ltm`` of them, and
    MTM fills the rest of ``k``.

    >>> from tiermem.types import KnowledgeFact, MemoryEntry, MemoryKind
    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> def fact(i):
    ...     return Candidate(KnowledgeFact(i, i, "Concept", 1, 0.5, t, t), 0.0)
    >>> cs = [fact("ltm:l1"), fact("ltm:l2"),
    ...       Candidate(MemoryEntry("m1", "u", "m1", MemoryKind.TURN, t, t), 0.0)]
    >>> [x.id for x in within_tier_budget(cs, 1)]
    ['ltm:l1', 'm1']
    """
    kept, ltm = [], 0
    for cand in candidates:
        if cand.tier is Tier.LTM:
            if ltm >= k_ltm:
                continue
            ltm += 1
        kept.append(cand)
    return kept


def relax_if_starved(
    c: Components,
    user_id: str,
    plan: RetrievalPlan,
    candidates: list[Candidate],
    filters: SearchFilters,
    vectors: Vectors | None = None,
) -> list[Candidate]:
    """The controller's constraints are hints: when they leave fewer than ``k`` candidates,
    the caller's own filters are used to fill up (constrained candidates keep their lead).
    ``vectors``: the planned queries', as the first stage had them."""
    if len(candidates) >= plan.k or plan.filters == filters:
        return candidates
    c.meter.record_event("controller", "constraints_relaxed")
    seen = {cand.id for cand in candidates}
    extra = first_stage(c, user_id, replace(plan, filters=filters), vectors)
    room = sum(plan.candidate_budgets) - len(candidates)
    return candidates + [x for x in extra if x.id not in seen][:room]


class FoundTurns:
    """The ``distinct`` rule, written once for the search (``distinct``) and for delivery
    (``tiermem.pipeline.deliver.hit_units``): an entry whose source turns better entries
    already hold repeats them.

    >>> found = FoundTurns()
    >>> found.add(("a", "b"))
    >>> found.repeats(("a",)), found.repeats(("a", "c")), found.repeats(())
    (True, False, False)
    """

    def __init__(self) -> None:
        self._found: set[str] = set()

    def repeats(self, turn_ids: Sequence[str]) -> bool:
        return bool(turn_ids) and self._found.issuperset(turn_ids)

    def add(self, turn_ids: Sequence[str]) -> None:
        self._found.update(turn_ids)


def distinct(candidates: Sequence[Candidate]) -> list[Candidate]:
    """The candidates, best first, with each MTM entry whose source turns better candidates
    already hold moved after the others: a turn found again in its exchange, a writer's entry
    beside its own turn, the pieces of one long turn. Such an entry delivers nothing the
    better one does not, so it takes one of the ``k`` places a selector keeps (``answer()``
    reads 5) only when there are not ``k`` others. LTM facts and entries without turns keep
    their place; a repeat keeps its first-stage score, so a search's scores need not fall
    along its hits when repeats fill up.

    >>> from datetime import UTC, datetime
    >>> from tiermem.types import MemoryEntry, MemoryKind
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> def cand(*turns: str) -> Candidate:
    ...     entry = MemoryEntry(",".join(turns), "u", "x", MemoryKind.TURN, at, at)
    ...     return Candidate(replace(entry, source_turn_ids=turns), 0.0)
    >>> [x.id for x in distinct([cand("a", "b"), cand("a"), cand("c"), cand("b", "c")])]
    ['a,b', 'c', 'a', 'b,c']
    """
    found = FoundTurns()
    first: list[Candidate] = []
    again: list[Candidate] = []
    for cand in candidates:
        own = cand.source_turn_ids
        if cand.tier is Tier.MTM and found.repeats(own):
            again.append(cand)
            continue
        found.add(own)
        first.append(cand)
    return first + again


def run_search(
    c: Components,
    user_id: str,
    query: str,
    k: int,
    filters: SearchFilters,
    stm: Sequence[Turn] = (),
) -> list[SearchHit]:
    """The best ``k`` hits for ``query``. No access is counted here: the caller counts what
    it hands out (``Memory.search`` every hit, ``Memory.context`` those delivered)."""
    intent = c.planner.plan(query, stm, filters, c.clock.now())
    plan = budget_plan(intent, k, c.policy)
    vectors = query_vectors(c, plan)
    candidates = first_stage(c, user_id, plan, vectors)
    candidates = relax_if_starved(c, user_id, plan, candidates, filters, vectors)
    if c.policy.delivery.expansion.distinct:
        candidates = distinct(candidates)
    candidates = within_tier_budget(candidates, plan.tier_budgets.ltm)
    selection = c.selector.select([q.text for q in plan.queries], candidates, k)
    note = f"plan={plan.source}, selection={selection.source}"
    hits = [
        SearchHit(cand.item, score, ScoreExplanation({**cand.components, "selector": score}, note))
        for cand, score in selection.kept[:k]
    ]
    return hits


__all__ = [
    "FoundTurns",
    "Route",
    "distinct",
    "first_stage",
    "ltm_applies",
    "on_topic",
    "query_vectors",
    "relax_if_starved",
    "run_search",
    "within_tier_budget",
]
