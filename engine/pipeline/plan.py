"""Stage types of the read path: the retrieval plan (from the controller) and the selection
(from the selector), with the model-free defaults used when no SLM is configured."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from tiermem.ranking import split_budget
from tiermem.types import MemoryEntry, SearchFilters, Turn


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
class RetrievalPlan:
    """What to search: hypothetical queries with routes, each with a candidate budget that
    adds up to ``multiplier * k``; the final budget ``k`` split over the tiers."""

    queries: tuple[PlannedQuery, ...]
    filters: SearchFilters
    k: int
    candidate_budgets: tuple[int, ...]
    tier_budgets: dict[str, int]
    source: str  # "model", "fallback" or "passthrough"
    notes: tuple[str, ...] = ()


def make_plan(
    queries: Sequence[PlannedQuery],
    filters: SearchFilters,
    k: int,
    multiplier: int,
    source: str,
    notes: Sequence[str] = (),
    ltm_share: float = 1.0,
) -> RetrievalPlan:
    """Budget arithmetic: ``multiplier*k`` candidates split by query weight; ``k`` split over
    MTM and LTM by the weight routed to each (a query routed to both counts half to each),
    LTM's part capped at ``ltm_share`` of ``k``. The LTM part is a cap, not a reservation:
    MTM fills what LTM does not use."""
    weights = [q.weight for q in queries]
    mtm = sum(
        q.weight * (1.0 if q.route is Route.MTM else 0.5 if q.route is Route.BOTH else 0.0)
        for q in queries
    )
    ltm = sum(weights) - mtm
    k_mtm, k_ltm = split_budget(k, [mtm, ltm]) if ltm > 0 else (k, 0)
    cap = math.ceil(k * ltm_share - 1e-9)
    if k_ltm > cap:
        k_mtm, k_ltm = k - cap, cap
    return RetrievalPlan(
        queries=tuple(queries),
        filters=filters,
        k=k,
        candidate_budgets=tuple(split_budget(multiplier * k, weights)),
        tier_budgets={"mtm": k_mtm, "ltm": k_ltm},
        source=source,
        notes=tuple(notes),
    )


class Planner(Protocol):
    @property
    def name(self) -> str: ...

    def plan(
        self, query: str, stm: Sequence[Turn], k: int, filters: SearchFilters, now: datetime
    ) -> RetrievalPlan: ...


class PassthroughPlanner:
    """No model: the user's own query with all of the candidate budget, routed to MTM, or
    to both tiers when LTM is on."""

    name = "passthrough"

    def __init__(self, multiplier: int = 2, *, ltm_share: float = 0.0) -> None:
        self._multiplier = multiplier
        self._ltm_share = ltm_share  # > 0: LTM is on and searched beside MTM

    def plan(
        self, query: str, stm: Sequence[Turn], k: int, filters: SearchFilters, now: datetime
    ) -> RetrievalPlan:
        route = Route.BOTH if self._ltm_share > 0 else Route.MTM
        return make_plan(
            [PlannedQuery(query, route)],
            filters,
            k,
            self._multiplier,
            "passthrough",
            ltm_share=self._ltm_share,
        )


@dataclass(frozen=True, slots=True)
class Candidate:
    """A first-stage candidate with how it was found."""

    entry: MemoryEntry
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
