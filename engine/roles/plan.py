"""Stage types of the read path: the planner's intent, the retrieval plan the pipeline makes
of it (budgets from ``Policy``), and the selection (from the selector), with the model-free
defaults used when no SLM is configured."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

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
