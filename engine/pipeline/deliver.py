"""Stage: from search hits to the context a generator reads (``Memory.context()``).

Hits become units, best first: an entry's source turns, or a line for an LTM fact or an entry
whose turns are gone. Around each turn hit its neighbours are offered too, worth a share of
the hit, walking out from it in the session: first the rest of the speaker's burst (people
send a thought in several short messages), then the burst that answers it (the answer often
sits in the reply) or the one it answers. When speakers alternate, that is the turn after and
the turn before. ``tiermem.context.pack`` then fills the budget. An adaptive cut
(``Expansion.fall_off``: hits that no retriever scored near its best are not offered) saves
tokens; it is off by default, since the budget is the caller's."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from tiermem.components import Components
from tiermem.context import ContextTurn, DeliveredContext, Unit, pack
from tiermem.policy import Expansion
from tiermem.render import render_memory
from tiermem.types import MemoryKind, SearchHit, Tier, Turn

RETRIEVERS = ("dense", "bm25", "ltm")  # the raw scores a first-stage hit carries


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


def neighbours(
    edge: ContextTurn,
    step: int,
    by_place: Mapping[tuple[str, int], ContextTurn],
    expansion: Expansion,
) -> list[tuple[str, float]]:
    """The turns beside ``edge`` in direction ``step`` (+1 after, -1 before) with their
    shares: the rest of ``edge``'s burst, then the adjacent burst of the other speaker.

    >>> from datetime import UTC, datetime
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> ts = [ContextTurn(f"t{i}", "s", i, who, "x", t) for i, who in enumerate("AABBA")]
    >>> place = {(x.session_id, x.position): x for x in ts}
    >>> [(i, round(s, 2)) for i, s in neighbours(ts[0], 1, place, Expansion())]
    [('t1', 0.8), ('t2', 0.5), ('t3', 0.35)]
    """
    share_other = expansion.reply if step > 0 else expansion.previous
    out: list[tuple[str, float]] = []
    other: str | None = None
    position = edge.position + step
    while len(out) < expansion.reach:
        turn = by_place.get((edge.session_id, position))
        if turn is None:
            break
        if other is None and turn.speaker == edge.speaker:
            share = expansion.burst
        else:
            if other is None:
                other, share = turn.speaker, share_other
            elif turn.speaker != other:
                break
            else:
                share = out[-1][1] * expansion.decay
        if share <= 0:
            break
        out.append((turn.turn_id, share))
        position += step
    return out


def _piece(hit: SearchHit, turns: Mapping[str, ContextTurn]) -> str | None:
    """The hit's own text when it is a piece of one long turn (what matched in it)."""
    ids = hit.source_turn_ids
    if hit.entry.kind is not MemoryKind.TURN or len(ids) != 1:
        return None
    return render_memory(hit.item) if hit.entry.text != turns[ids[0]].line else None


def hit_units(
    hits: Sequence[SearchHit], turns: Mapping[str, ContextTurn], expansion: Expansion
) -> list[Unit]:
    """Units for ``hits`` (best first) and their neighbours, best value first."""
    by_place = {(t.session_id, t.position): t for t in turns.values()}
    units: list[Unit] = []
    found: set[str] = set()
    rank = -1
    for hit in hits:
        own = tuple(t for t in hit.source_turn_ids if t in turns)
        if expansion.distinct and own and found.issuperset(own):
            continue  # a turn found again (alone, or in an exchange): no second rank
        rank += 1
        value = hit_value(rank)
        found.update(own)
        if hit.tier is Tier.LTM or not own:
            units.append(Unit((), value, render_memory(hit.item)))
            continue
        units.append(Unit(own, value, fallback=_piece(hit, turns)))
        if len(own) > 1 and expansion.member > 0:  # when the whole does not fit, its parts
            units.extend(Unit((t,), value * expansion.member) for t in own)
        for step, edge in ((1, turns[own[-1]]), (-1, turns[own[0]])):
            for near, share in neighbours(edge, step, by_place, expansion):
                if near not in own:
                    units.append(Unit((near,), value * share))
    units.sort(key=lambda u: -u.value)  # stable: ties keep the hits' order
    if units and expansion.cut > 0:
        floor = units[0].value * expansion.cut
        units = [u for u in units if u.value >= floor]
    return units


def strong_hits(hits: Sequence[SearchHit], fall_off: float) -> list[SearchHit]:
    """The adaptive cut: the hits that some retriever scored within ``fall_off`` of its best
    score for this query. When the scores fall away (an easy question, one clear match), the
    weak tail is not delivered, however much budget is left. A hit without raw retriever
    scores is kept.

    >>> from tiermem.types import ScoreExplanation, SearchHit
    >>> def hit(**c): return SearchHit(None, 0.0, ScoreExplanation(c))  # type: ignore[arg-type]
    >>> hs = [hit(dense=0.8, bm25=9.0), hit(dense=0.3), hit(dense=0.7), hit(bm25=7.0), hit()]
    >>> [hs.index(h) for h in strong_hits(hs, 0.7)]
    [0, 2, 3, 4]
    """
    if fall_off <= 0:
        return list(hits)
    best = {
        r: max((h.explanation.components.get(r, float("-inf")) for h in hits), default=0.0)
        for r in RETRIEVERS
    }

    def strong(hit: SearchHit) -> bool:
        scores = {r: v for r, v in hit.explanation.components.items() if r in RETRIEVERS}
        # A retriever whose best score is not positive (cosines can be) gives no fall-off.
        return not scores or any(best[r] <= 0 or v >= fall_off * best[r] for r, v in scores.items())

    return [h for h in hits if strong(h)]


def build_context(
    c: Components,
    user_id: str,
    hits: Sequence[SearchHit],
    budget_tokens: int,
    expansion: Expansion,
) -> DeliveredContext:
    """The context for ``hits``: their turns (and neighbours) read from the journal in one
    query, packed; it carries the hits delivered and their stored turns. No access is
    counted here (``Memory.context`` counts the delivered hits)."""
    hits = strong_hits(hits, expansion.fall_off)
    ids = sorted({t for h in hits if h.tier is Tier.MTM for t in h.source_turn_ids})
    stored = c.journal.sessions_of(user_id, ids)
    turns = context_turns(stored)
    ctx = pack(hit_units(hits, turns, expansion), turns, budget_tokens, c.tokens)
    by_id = {t.turn_id: t for t in stored}
    sources = {tid: by_id[tid] for tid in ctx.turn_ids if tid in by_id}
    return replace(ctx, hits=tuple(delivered_hits(ctx, hits)), source_turns=sources)


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
    "build_context",
    "context_turns",
    "delivered_hits",
    "hit_units",
    "hit_value",
    "neighbours",
    "strong_hits",
]
