"""The thresholds and budgets of the online write and read paths, taken from the whole
configuration in one place (``policy_from_config``). Stages read them from here; planners and
selectors receive no budgets of their own.

>>> from tiermem.config import TiermemConfig
>>> policy_from_config(TiermemConfig.for_tests()).ltm_share  # LTM is off by default
0.0

Two budgets, both made here only: a search's candidate budget counts hits and candidates
(``budget_plan``: how many of ``k`` each tier takes, how many candidates each query
fetches); a context's token budget counts tokens (``DeliveryPolicy``: how many hits a
budget of tokens asks for, what ``answer()`` may read, what a hit is offered with).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tiermem.config import DeliveryConfig, MTMConfig, SLMConfig, TiermemConfig
from tiermem.config.tuning import Expansion
from tiermem.ranking import split_budget
from tiermem.roles.plan import PlanIntent, RetrievalPlan, Route, TierBudgets

NO_EXPANSION = Expansion(member=0.0, later=0.0, long_tokens=0, long_share=0.0)
"""``context(expand=False)``: each hit's own turns, whole, at its rank's value."""


# The defaults are the configuration's, declared once there.
_DELIVERY = DeliveryConfig()
_SLM = SLMConfig()


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """Every rule of spending a token budget (``Memory.context()``, ``answer()``):
    ``tokens_per_hit``, hits retrieved per token of budget (at most ``max_hits``);
    ``answer_budget_tokens``, what ``answer()`` lets the generator read; ``expansion``, what
    each hit is offered with (``expand=False``: nothing, ``NO_EXPANSION``).

    >>> DeliveryPolicy().hits_for(1200, floor=10)
    100
    """

    tokens_per_hit: int = _DELIVERY.tokens_per_hit
    max_hits: int = _DELIVERY.max_hits
    answer_budget_tokens: int = _DELIVERY.answer_budget_tokens
    expansion: Expansion = field(default_factory=Expansion)

    def hits_for(self, budget_tokens: int, floor: int) -> int:
        """How many hits to retrieve to fill ``budget_tokens`` (at least ``floor``)."""
        return max(floor, min(self.max_hits, budget_tokens // self.tokens_per_hit))

    answer_later: float = _DELIVERY.answer_later

    def expansion_for(self, expand: bool) -> Expansion:
        return self.expansion if expand else NO_EXPANSION

    def answer_expansion(self) -> Expansion:
        """``answer()``'s expansion: its few hits (``generator.max_memories``) miss the later
        statements that a budget's many hits find by themselves, so they are offered there
        at ``answer_later``, well above ``context()``'s share (measured: offered in
        ``context()`` at 0.6 of a hit, they cost 6.3 points of LoCoMo recall at 300 tokens;
        at 0.05 nothing measurable)."""
        return self.expansion.model_copy(update={"later": self.answer_later})


def delivery_from_config(config: DeliveryConfig) -> DeliveryPolicy:
    return DeliveryPolicy(
        tokens_per_hit=config.tokens_per_hit,
        max_hits=config.max_hits,
        answer_budget_tokens=config.answer_budget_tokens,
        answer_later=config.answer_later,
        expansion=Expansion.model_validate(config.model_dump(include=set(Expansion.model_fields))),
    )


@dataclass(frozen=True, slots=True)
class Policy:
    """Every threshold and budget the pipeline applies.

    - ``merge_threshold``: cosine above which a new entry merges into a stored one
      (``slm.merge_threshold``);
    - ``supersede_min_similarity``: a writer's "replaces" is accepted only this close to the
      entry it would supersede (``slm.supersede_min_similarity``);
    - ``capacity``: entries per user before eviction (``mtm.capacity``);
    - ``candidate_multiplier``: first-stage candidates per final hit
      (``slm.candidate_multiplier``);
    - ``ltm_share``: the most of ``k`` that LTM facts may take; 0 when LTM is off
      (``ltm.max_share``);
    - ``selector_min_keep``: the fewest hits a model selector may keep (``slm.selector_min_keep``);
    - ``delivery``: how a token budget is spent (``delivery``).

    The knowledge graph's own thresholds (merge, decay, search) are the LTM's, built from
    ``ltm`` by ``build_ltm``; the LTM tier's share of a search is here.
    """

    merge_threshold: float = _SLM.merge_threshold
    supersede_min_similarity: float = _SLM.supersede_min_similarity
    capacity: int = MTMConfig.model_fields["capacity"].default
    candidate_multiplier: int = _SLM.candidate_multiplier
    ltm_share: float = 0.0
    selector_min_keep: int = _SLM.selector_min_keep
    delivery: DeliveryPolicy = field(default_factory=DeliveryPolicy)


def policy_from_config(config: TiermemConfig) -> Policy:
    """The one place where configuration becomes policy."""
    slm = config.slm
    return Policy(
        merge_threshold=slm.merge_threshold,
        supersede_min_similarity=slm.supersede_min_similarity,
        capacity=config.mtm.capacity,
        candidate_multiplier=slm.candidate_multiplier,
        ltm_share=config.ltm.max_share if config.ltm.enabled else 0.0,
        selector_min_keep=slm.selector_min_keep,
        delivery=delivery_from_config(config.delivery),
    )


def budget_plan(intent: PlanIntent, k: int, policy: Policy) -> RetrievalPlan:
    """The only place budgets are made. ``multiplier*k`` candidates split by query weight;
    ``k`` split over MTM and LTM by the weight routed to each (a query routed to both counts
    half to each), LTM's part capped at ``ltm_share`` of ``k``; a query routed to LTM asks
    it for at most ``multiplier`` candidates per LTM hit (and no more than its own budget).

    >>> from tiermem.roles.plan import PlannedQuery
    >>> from tiermem.types import SearchFilters
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
