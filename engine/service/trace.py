"""The context ``Memory.context()`` and ``answer()`` build, unit by unit, for the inspector.

The read path ranks *units* (a hit's turns, one turn of an exchange, a later statement of the
same speaker, an LTM fact as a line) and packs them best first into the budget
(``tiermem.pipeline.deliver``). It keeps no record of which unit was taken and why; this
module takes the same stages again over the same hits and replays the packing one unit at a
time, so each unit says which hit it came with, what it cost (or would have), and why it was
kept or cut. The context shown beside the units is the pipeline's own (``build_context``):
should the replay ever drift from it, the page still shows what the generator reads, and
``tests/service/test_inspect.py`` fails.

Nothing here counts a retrieval: inspecting a memory does not change what it evicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from tiermem.components import Components
from tiermem.config.tuning import Expansion
from tiermem.context import (
    DEFAULT_BUDGET_TOKENS,
    ContextTurn,
    DeliveredContext,
    LineCosts,
    Unit,
    pack,
)
from tiermem.generator import supports
from tiermem.memory import Memory
from tiermem.pipeline.deliver import build_context, hit_units, offer_units
from tiermem.pipeline.read import run_search
from tiermem.types import SearchFilters, SearchHit, Turn
from tiermem.validation import (
    validate_filters,
    validate_k,
    validate_session_id,
    validate_text,
    validate_user_id,
)

UNBOUNDED = 1 << 40  # a budget nothing reaches: what a unit would cost with room to spare


class Origin(StrEnum):
    """Why a unit was offered at all."""

    HIT = "hit"  # the hit's own turns, or its line (an LTM fact, an entry whose turns are gone)
    PART = "part"  # one turn of a hit of several turns, offered in case the whole does not fit
    LATER = "later"  # a later statement of the hit's speaker close to it (a changed fact)


@dataclass(frozen=True, slots=True)
class TracedUnit:
    """One unit, in the order the builder took them (best value first). ``hit``: the index
    in ``ContextTrace.hits`` of the hit it came with (-1: none known); ``tokens``: what it
    added to the context, or, cut, what it would have added."""

    turn_ids: tuple[str, ...]
    line: str | None
    value: float
    hit: int
    origin: Origin
    kept: bool
    tokens: int
    reason: str


@dataclass(frozen=True, slots=True)
class ContextTrace:
    """A context explained: every hit retrieved (best first, with its score explanation),
    every unit offered, the context delivered, and the stored turns the units name.
    ``refused`` (``answer`` only): why the generator read none of it; ``answer``: the
    generator's text."""

    query: str
    k: int
    budget_tokens: int
    hits: tuple[SearchHit, ...]
    units: tuple[TracedUnit, ...]
    context: DeliveredContext
    turns: Mapping[str, Turn] = field(default_factory=dict)
    refused: str | None = None
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class ReadRequest:
    """What to trace: ``context()``'s arguments, or (``for_answer``) ``answer()``'s, which
    reads ``generator.max_memories`` hits within ``delivery.answer_budget_tokens``."""

    query: str
    user_id: str
    budget_tokens: int | None = None
    k: int | None = None
    expand: bool = True
    session_id: str | None = None
    filters: SearchFilters | None = None
    for_answer: bool = False


def trace_context(memory: Memory, request: ReadRequest) -> ContextTrace:
    """The context ``memory`` builds for ``request``, unit by unit (stored user id)."""
    c = memory.components
    uid = validate_user_id(request.user_id)
    delivery = c.policy.delivery
    if request.for_answer:
        budget, limit = delivery.answer_budget_tokens, memory.config.generator.max_memories
        expansion = delivery.answer_expansion()
    else:
        given = request.budget_tokens
        budget = validate_k(DEFAULT_BUDGET_TOKENS if given is None else given, "budget_tokens")
        default_k = delivery.hits_for(budget, memory.config.default_k)
        limit = validate_k(request.k if request.k is not None else default_k)
        expansion = delivery.expansion_for(request.expand)
    sid = validate_session_id(request.session_id)
    query, filters = validate_text(request.query), validate_filters(request.filters)
    stm = c.stm.window(uid, sid)
    hits = run_search(c, uid, query, limit, filters, stm)
    units, turns = _traced_units(c, uid, hits, budget, expansion)
    ctx = build_context(c, uid, hits, budget, expansion)
    trace = ContextTrace(query, limit, budget, tuple(hits), units, ctx, turns)
    if not request.for_answer:
        return trace
    floor = memory.config.generator.support_min_similarity
    refused = None if supports(query, ctx, floor) else _refusal(floor)
    read = ctx if refused is None else pack([], {}, budget, c.tokens)
    text = c.generator.generate(query, stm, read)
    return ContextTrace(query, limit, budget, trace.hits, units, ctx, turns, refused, text)


def _refusal(floor: float) -> str:
    return (
        "no delivered memory shares a content word with the question, and none is within "
        f"cosine {floor:g} of it: the generator reads nothing and says memory holds nothing"
    )


def _traced_units(
    c: Components, uid: str, hits: Sequence[SearchHit], budget: int, expansion: Expansion
) -> tuple[tuple[TracedUnit, ...], dict[str, Turn]]:
    """``build_context``'s units for ``hits`` (``offer_units``, the same stage), each
    traced through the packing."""
    offer = offer_units(c, uid, hits, budget, expansion)
    found = origins(hits, offer.turns, expansion, offer.offers)
    traced = replay(offer.units, offer.turns, budget, offer.costs, found)
    named = {t for u in traced for t in u.turn_ids}
    return traced, {t.turn_id: t for t in offer.stored if t.turn_id in named}


Key = tuple[tuple[str, ...], str | None]


def origins(
    hits: Sequence[SearchHit],
    turns: Mapping[str, ContextTurn],
    expansion: Expansion,
    offers: Mapping[str, Sequence[tuple[str, ...]]],
) -> dict[Key, tuple[int, Origin]]:
    """Which hit each unit came with (the first hit that offers it), and as what."""
    found: dict[Key, tuple[int, Origin]] = {}
    for index, hit in enumerate(hits):
        own = tuple(t for t in hit.source_turn_ids if t in turns)
        later = set(offers.get(hit.id, ()))
        for unit in hit_units([hit], turns, expansion, {hit.id: list(later)}):
            if unit.line is not None or unit.turn_ids == own:
                origin = Origin.HIT
            elif unit.turn_ids in later:
                origin = Origin.LATER
            else:  # one turn of a hit of several
                origin = Origin.PART
            found.setdefault((unit.turn_ids, unit.line), (index, origin))
    return found


def _delivered(ctx: DeliveredContext) -> tuple[tuple[str, ...], tuple[str, ...]]:
    return ctx.turn_ids, ctx.notes


def replay(
    units: Sequence[Unit],
    turns: Mapping[str, ContextTurn],
    budget: int,
    costs: LineCosts,
    found: Mapping[Key, tuple[int, Origin]],
) -> tuple[TracedUnit, ...]:
    """Pack ``units`` one at a time, as ``pack`` takes them: a unit is kept when adding it
    changes what is delivered."""
    kept: list[Unit] = []
    now = pack([], turns, budget, costs=costs)
    traced = []
    for unit in units:
        hit, origin = found.get((unit.turn_ids, unit.line), (-1, Origin.HIT))
        trial = pack([*kept, unit], turns, budget, costs=costs)
        taken = _delivered(trial) != _delivered(now)
        if taken:
            reason = _why_kept(unit, trial, now, budget)
            tokens, kept, now = trial.tokens - now.tokens, [*kept, unit], trial
        else:
            tokens, reason = _why_cut(unit, kept, now, turns, budget, costs)
        traced.append(
            TracedUnit(unit.turn_ids, unit.line, unit.value, hit, origin, taken, tokens, reason)
        )
    return tuple(traced)


def _why_kept(unit: Unit, trial: DeliveredContext, now: DeliveredContext, budget: int) -> str:
    left = budget - now.tokens
    if unit.line is None and trial.notes != now.notes:
        return f"its turns did not fit in the {left} tokens left: the part that matched did"
    if unit.line is not None:
        return f"delivered as a line ({left} tokens were left)"
    return f"fits in the {left} tokens left"


def _why_cut(
    unit: Unit,
    kept: Sequence[Unit],
    now: DeliveredContext,
    turns: Mapping[str, ContextTurn],
    budget: int,
    costs: LineCosts,
) -> tuple[int, str]:
    """What a unit passed over would have cost, and why it was passed over."""
    if unit.line is None and any(t not in turns for t in unit.turn_ids):
        return 0, "its turns are no longer stored"
    if unit.line is None and set(unit.turn_ids) <= set(now.turn_ids):
        return 0, "its turns are delivered already"
    if unit.line is not None and unit.line in now.notes:
        return 0, "delivered already"
    before = pack(kept, turns, UNBOUNDED, costs=costs)
    after = pack([*kept, unit], turns, UNBOUNDED, costs=costs)
    if _delivered(after) == _delivered(before):
        return 0, "it only repeats turns delivered already, nearly word for word"
    cost = after.tokens - before.tokens
    return cost, f"over the budget: it needs {cost} tokens, {budget - now.tokens} are left"


__all__ = [
    "ContextTrace",
    "Origin",
    "ReadRequest",
    "TracedUnit",
    "origins",
    "replay",
    "trace_context",
]
