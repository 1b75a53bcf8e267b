"""Stage types of the read path: the planner's intent, the retrieval plan the pipeline makes
of it (budgets from ``Policy``), and the selection (from the selector), with the model-free
defaults used when no SLM is configured."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from tiermem.policy import Policy
from tiermem.ranking import split_budget
from tiermem.types import KnowledgeFact, MemoryEntry, SearchFilters, Tiered, Turn


class Route(StrEnum):
    MTM = "mtm"
    LTM = "ltm"
    BOTH = "both"


@dataclass(frozen=True, slots=True)
class PlannedQuery:
    text: str
    route: Route = Route.MTM
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class PlanIntent:
    """What a planner wants searched, without budgets: queries with their routes and
    weights, the constraints as filters, where the intent came from, and notes."""

    queries: tuple[PlannedQuery, ...]
    filters: SearchFilters
    source: str  # "model", "fallback" or "passthrough"
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class TierBudgets:
    """How many of the ``k`` final hits each tier may fill. LTM's part is a cap, not a
    reservation: MTM fills what LTM does not use."""

    mtm: int
    ltm: int


@dataclass(frozen=True, slots=True)
class RetrievalPlan:
    """An intent with its budgets: per query, MTM and LTM candidates (the MTM ones add up
    to ``multiplier * k``); the final ``k`` split over the tiers."""

    queries: tuple[PlannedQuery, ...]
    filters: SearchFilters
    k: int
    candidate_budgets: tuple[int, ...]
    ltm_budgets: tuple[int, ...]
    tier_budgets: TierBudgets
    source: str
    notes: tuple[str, ...] = ()


def budget_plan(intent: PlanIntent, k: int, policy: Policy) -> RetrievalPlan:
    """The only place budgets are made. ``multiplier*k`` candidates split by query weight;
    ``k`` split over MTM and LTM by the weight routed to each (a query routed to both counts
    half to each), LTM's part capped at ``ltm_share`` of ``k``; a query routed to LTM asks
    it for at most ``multiplier`` candidates per LTM hit (and no more than its own budget).

    >>> p = budget_plan(PlanIntent((PlannedQuery("q", Route.BOTH),), SearchFilters(), "x"), 10,
    ...                 Policy(candidate_multiplier=2, ltm_share=0.3))
    >>> p.candidate_budgets, p.ltm_budgets, p.tier_budgets
    ((20,), (6,), TierBudgets(mtm=7, ltm=3))
    """
    queries = intent.queries
    weights = [q.weight for q in queries]
    mtm = sum(
        q.weight * (1.0 if q.route is Route.MTM else 0.5 if q.route is Route.BOTH else 0.0)
        for q in queries
    )
    ltm = sum(weights) - mtm
    k_mtm, k_ltm = split_budget(k, [mtm, ltm]) if ltm > 0 else (k, 0)
    cap = math.ceil(k * policy.ltm_share - 1e-9)
    if k_ltm > cap:
        k_mtm, k_ltm = k - cap, cap
    budgets = tuple(split_budget(policy.candidate_multiplier * k, weights))
    ltm_budgets = tuple(
        min(budget, k_ltm * policy.candidate_multiplier) if q.route is not Route.MTM else 0
        for q, budget in zip(queries, budgets, strict=True)
    )
    return RetrievalPlan(
        queries=queries,
        filters=intent.filters,
        k=k,
        candidate_budgets=budgets,
        ltm_budgets=ltm_budgets,
        tier_budgets=TierBudgets(k_mtm, k_ltm),
        source=intent.source,
        notes=intent.notes,
    )


class Planner(Protocol):
    @property
    def name(self) -> str: ...

    def plan(
        self, query: str, stm: Sequence[Turn], filters: SearchFilters, now: datetime
    ) -> PlanIntent: ...


class PassthroughPlanner:
    """No model: the user's own query, on every tier the pipeline searches."""

    name = "passthrough"

    def plan(
        self, query: str, stm: Sequence[Turn], filters: SearchFilters, now: datetime
    ) -> PlanIntent:
        return PlanIntent((PlannedQuery(query, Route.BOTH),), filters, "passthrough")


@dataclass(frozen=True, slots=True)
class Candidate(Tiered):
    """A first-stage candidate (an MTM entry or an LTM fact) with how it was found."""

    item: MemoryEntry | KnowledgeFact
    fused: float
    components: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Selection:
    kept: tuple[tuple[Candidate, float], ...]  # (candidate, selector score), best first
    source: str  # "model", "fallback" or "passthrough"


class Selector(Protocol):
    @property
    def name(self) -> str: ...

    def select(
        self, queries: Sequence[str], candidates: Sequence[Candidate], k: int
    ) -> Selection: ...


class TopKSelector:
    """No model: the first ``k`` candidates in fused order."""

    name = "top-k"

    def select(self, queries: Sequence[str], candidates: Sequence[Candidate], k: int) -> Selection:
        return Selection(tuple((c, c.fused) for c in candidates[:k]), "passthrough")
