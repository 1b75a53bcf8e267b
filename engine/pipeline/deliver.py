"""Stage: from search hits to the context a generator reads (``Memory.context()``).

Hits become units, best first: an entry's source turns, or a line for an LTM fact or an entry
whose turns are gone. Around each turn hit, the turn that answers it and the turn it answers
are offered too, worth a share of the hit (the answer often sits in the reply to the turn that
matches). Units worth less than ``cut`` of the best are not offered: when the scores fall away,
less is delivered. ``tiermem.context.pack`` then fills the budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from tiermem.components import Components
from tiermem.context import ContextTurn, DeliveredContext, Unit, pack
from tiermem.pipeline.read import record_access
from tiermem.render import render_memory
from tiermem.types import SearchHit, Tier, Turn


@dataclass(frozen=True, slots=True)
class Expansion:
    """How much a neighbour of a hit is worth, as a share of the hit's value; 0 turns it off.

    ``cut``: units worth less than this share of the best unit are not delivered."""

    reply: float = 0.5
    previous: float = 0.3
    cut: float = 0.0


DEFAULT_EXPANSION = Expansion()
NO_EXPANSION = Expansion(reply=0.0, previous=0.0)
TOKENS_PER_HIT = 25  # about one conversational turn


def hits_for_budget(budget_tokens: int, floor: int) -> int:
    """How many hits to retrieve to fill a budget (at least ``floor``, at most 200).

    >>> hits_for_budget(1200, 10)
    48
    """
    return max(floor, min(200, budget_tokens // TOKENS_PER_HIT))


def context_turns(turns: Sequence[Turn]) -> dict[str, ContextTurn]:
    """Stored turns, in session order, as the builder sees them."""
    position: dict[str, int] = {}
    out = {}
    for t in turns:
        pos = position.get(t.session_id, 0)
        position[t.session_id] = pos + 1
        out[t.turn_id] = ContextTurn(
            t.turn_id, t.session_id, pos, t.speaker, t.content, t.timestamp
        )
    return out


def hit_value(rank: int) -> float:
    """A hit's worth by its rank: hits far down a ranking are worth less than the replies to
    the first ones, whatever their raw scores (which are not comparable across retrievers)."""
    return 1.0 / (1.0 + rank)


def hit_units(
    hits: Sequence[SearchHit], turns: Mapping[str, ContextTurn], expansion: Expansion
) -> list[Unit]:
    """Units for ``hits`` (best first) and their neighbours, best value first."""
    by_place = {(t.session_id, t.position): t.turn_id for t in turns.values()}
    units: list[Unit] = []
    for rank, hit in enumerate(hits):
        value = hit_value(rank)
        own = tuple(t for t in hit.source_turn_ids if t in turns)
        if hit.tier is Tier.LTM or not own:
            units.append(Unit((), value, render_memory(hit.item)))
            continue
        units.append(Unit(own, value))
        for step, share in ((1, expansion.reply), (-1, expansion.previous)):
            if share <= 0:
                continue
            edge = turns[own[-1] if step > 0 else own[0]]
            near = by_place.get((edge.session_id, edge.position + step))
            if near is not None:
                units.append(Unit((near,), value * share))
    units.sort(key=lambda u: -u.value)  # stable: ties keep the hits' order
    if units and expansion.cut > 0:
        floor = units[0].value * expansion.cut
        units = [u for u in units if u.value >= floor]
    return units


def build_context(
    c: Components,
    user_id: str,
    hits: Sequence[SearchHit],
    budget_tokens: int,
    expansion: Expansion,
) -> DeliveredContext:
    """The context for ``hits``: their turns (and neighbours) read from the journal, packed."""
    ids = sorted({t for h in hits if h.tier is Tier.MTM for t in h.source_turn_ids})
    sessions = sorted({t.session_id for t in c.journal.turns(user_id, ids).values()})
    turns = context_turns(c.journal.session_turns(user_id, sessions))
    ctx = pack(hit_units(hits, turns, expansion), turns, budget_tokens, c.tokens, hits)
    return replace(ctx, hits=tuple(record_access(c, user_id, delivered_hits(ctx, hits))))


def delivered_hits(ctx: DeliveredContext, hits: Sequence[SearchHit]) -> list[SearchHit]:
    """The hits that reached the context: an entry whose turns were all delivered, a fact
    or an entry delivered as a line of its own."""
    turns, notes = set(ctx.turn_ids), set(ctx.notes)
    return [
        h
        for h in hits
        if (h.tier is Tier.MTM and h.source_turn_ids and set(h.source_turn_ids) <= turns)
        or render_memory(h.item) in notes
    ]


__all__ = [
    "DEFAULT_EXPANSION",
    "NO_EXPANSION",
    "Expansion",
    "build_context",
    "context_turns",
    "delivered_hits",
    "hit_units",
    "hit_value",
    "hits_for_budget",
]
