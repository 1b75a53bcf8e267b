"""The thresholds and budgets of the online write and read paths, taken from the whole
configuration in one place (``policy_from_config``). Stages read them from here; planners and
selectors receive no budgets of their own.

>>> from tiermem.config import TiermemConfig
>>> policy_from_config(TiermemConfig.for_tests()).ltm_share  # LTM is off by default
0.0

Two budgets, both made here only: a search's candidate budget counts hits and candidates
(``budget_plan``: how many of ``k`` each tier takes, how many candidates each query
fetches); a context's token budget counts tokens (``DeliveryPolicy``: how many hits a
budget of tokens asks for, what ``answer()`` may read, which neighbours are offered).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from tiermem.config import DeliveryConfig, TiermemConfig
from tiermem.ranking import split_budget
from tiermem.roles.plan import PlanIntent, RetrievalPlan, Route, TierBudgets


@dataclass(frozen=True, slots=True)
class Expansion:
    """How much a neighbour of a hit is worth, as a share of the hit's value; 0 turns it off.

    ``burst``: a turn of the hit's own burst (the same speaker, no one between);
    ``reply`` / ``previous``: the first turn of the burst after / before, each further turn
    of that burst worth ``decay`` times the one before; ``reach``: the most neighbours
    offered on each side; ``member``: each turn of a hit of several turns (an exchange) on
    its own, for when the whole does not fit (a long answer to a short question);
    ``piece``: the share of its rank's value that a hit is worth when it is a piece of a
    long turn (``tiermem.roles.extract.CHUNK_WORDS``): it matched a part, the budget pays for
    the whole, and one long answer cut in many pieces would otherwise hold many ranks;
    ``distinct``: a hit whose turns better hits already found takes no rank of its own,
    and no place among the ``k`` hits of a search (``tiermem.pipeline.read.distinct``).
    ``later``: the share of a hit's value that a later statement close to it is worth (a
    changed fact's new value), for the first ``later_hits`` hits, at most ``later_per_hit``
    each, at cosine ``later_similarity`` or more to the hit, by the hit's own speaker, of at
    most ``later_max_tokens`` (``tiermem.pipeline.deliver.later_statements``); 0 offers
    none. ``later_retrieved``: a later statement that retrieval returned too is offered at
    that share as well, beyond ``later_per_hit`` (it keeps its own rank when that is worth
    more): the newest statement of a changed fact often ranks below the old one.
    ``neighbour_tokens``: a neighbour longer than this many tokens keeps only
    ``neighbour_tokens / its tokens`` of its share (a long assistant answer beside a user's
    short turn); ``long_tokens``: the same for every unit, hits too
    (``tiermem.pipeline.deliver.length_share``); ``long_share``: with a budget, that
    reference is at most this share of it (``long_reference``): at 300 tokens a unit of 280
    would take the room of three or four short hits. 0 drops a limit; ``neighbour_tokens`` 0
    turns its rule off, ``long_tokens`` and ``long_share`` both 0 theirs. At ``answer()``'s
    budget (1,200) the reference is 300 tokens."""

    reply: float = 0.5
    previous: float = 0.3
    burst: float = 0.8
    decay: float = 0.7
    reach: int = 4
    member: float = 0.9
    piece: float = 0.5
    distinct: bool = True
    later: float = 0.05
    later_hits: int = 4
    later_per_hit: int = 2
    later_similarity: float = 0.5
    later_max_tokens: int = 80
    later_retrieved: bool = True
    neighbour_tokens: int = 100
    long_tokens: int = 400
    long_share: float = 0.25

    def long_reference(self, budget_tokens: int | None) -> int:
        """The length past which any unit is worth less per token, for ``budget_tokens``
        (``None``: ``long_tokens`` alone); 0 when neither applies.

        >>> Expansion().long_reference(300), Expansion().long_reference(2400)
        (75, 400)
        >>> Expansion(long_tokens=0).long_reference(300), Expansion().long_reference(None)
        (75, 400)
        """
        limits = [self.long_tokens] if self.long_tokens > 0 else []
        if budget_tokens is not None and self.long_share > 0:
            limits.append(max(1, int(budget_tokens * self.long_share)))
        return min(limits, default=0)


NO_EXPANSION = Expansion(
    reply=0.0,
    previous=0.0,
    burst=0.0,
    member=0.0,
    later=0.0,
    neighbour_tokens=0,
    long_tokens=0,
    long_share=0.0,
)


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    """Every rule of spending a token budget (``Memory.context()``, ``answer()``):
    ``tokens_per_hit``, hits retrieved per token of budget (at most ``max_hits``);
    ``answer_budget_tokens``, what ``answer()`` lets the generator read; ``expansion``, the
    neighbours offered around each hit (``expand=False``: none).

    >>> DeliveryPolicy().hits_for(1200, floor=10)
    48
    """

    tokens_per_hit: int = 25
    max_hits: int = 200
    answer_budget_tokens: int = 1200
    expansion: Expansion = field(default_factory=Expansion)

    def hits_for(self, budget_tokens: int, floor: int) -> int:
        """How many hits to retrieve to fill ``budget_tokens`` (at least ``floor``)."""
        return max(floor, min(self.max_hits, budget_tokens // self.tokens_per_hit))

    answer_later: float = 0.6

    def expansion_for(self, expand: bool) -> Expansion:
        return self.expansion if expand else NO_EXPANSION

    def answer_expansion(self) -> Expansion:
        """``answer()``'s expansion: its few hits (``generator.max_memories``) miss the later
        statements that a budget's many hits find by themselves, so they are offered there
        at ``answer_later``, well above ``context()``'s share (measured: offered in
        ``context()`` at 0.6 of a hit, they cost 6.3 points of LoCoMo recall at 300 tokens;
        at 0.05 nothing measurable)."""
        return replace(self.expansion, later=self.answer_later)


def delivery_from_config(config: DeliveryConfig) -> DeliveryPolicy:
    fixed = {"tokens_per_hit", "max_hits", "answer_budget_tokens", "answer_later"}
    shares = config.model_dump(exclude=fixed)
    return DeliveryPolicy(
        tokens_per_hit=config.tokens_per_hit,
        max_hits=config.max_hits,
        answer_budget_tokens=config.answer_budget_tokens,
        answer_later=config.answer_later,
        expansion=Expansion(**shares),
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

    merge_threshold: float = 0.92
    supersede_min_similarity: float = 0.6
    capacity: int = 10_000
    candidate_multiplier: int = 2
    ltm_share: float = 0.0
    selector_min_keep: int = 1
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
