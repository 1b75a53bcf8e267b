"""Stage: from search hits to the context a generator reads (``Memory.context()``).

Hits become units, best first, each worth its rank's value: an entry's source turns, or a line
for an LTM fact or an entry whose turns are gone. A hit of several turns (an exchange) also
offers each of its turns alone, for when the whole does not fit; a hit on a piece of a long
turn offers the piece as the fallback of the whole. The later statements close to a hit (a
changed fact's new value) are offered at a share of it. A unit longer than
``Expansion.long_tokens``, or than ``long_share`` of the budget (a quarter by default), is worth
less per token: the budget it takes is worth more to the next short hits.
``tiermem.context.pack`` then fills the budget.

The turns beside a hit in its session (its reply, the lead-in, the rest of a speaker's burst)
were offered too until they lost leave-one-dataset-out (``docs/decisions.md``): they took a
third of the budget on real chats, and the exchanges that the write path indexes already
deliver a question with its answer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from dataclasses import dataclass, replace

from tiermem.components import Components
from tiermem.config.tuning import Expansion
from tiermem.context import ContextTurn, DeliveredContext, LineCosts, Unit, pack
from tiermem.embedding.base import EmbedMode, Vectors, check_vectors
from tiermem.pipeline.read import FoundTurns
from tiermem.render import index_text, render_memory
from tiermem.roles.extract import cut_in_pieces
from tiermem.stores.base import ScoredEntry, nearest
from tiermem.types import MemoryKind, SearchFilters, SearchHit, Tier, Turn


def context_turns(placed: Sequence[tuple[Turn, int]]) -> dict[str, ContextTurn]:
    """Stored turns with their places in their sessions (``Journal.placed_turns``), as the
    builder sees them."""
    return {
        t.turn_id: ContextTurn(t.turn_id, t.session_id, pos, t.speaker, t.content, t.timestamp)
        for t, pos in placed
    }


def hit_value(rank: int) -> float:
    """A hit's worth by its rank: hits far down a ranking are worth less than the replies to
    the first ones, whatever their raw scores (which are not comparable across retrievers)."""
    return 1.0 / (1.0 + rank)


def _piece(hit: SearchHit, turns: Mapping[str, ContextTurn]) -> str | None:
    """The hit's own text when it is a piece of one long turn (what matched in it): a
    shorter run of the turn's own words under its speaker. An entry whose text was edited
    (``update``) is a memory of the turn, not a piece of it; a sentence of a short turn
    (``verbatim_candidates``) stands for the whole turn, which costs little more."""
    ids = hit.source_turn_ids
    if hit.entry.kind is not MemoryKind.TURN or len(ids) != 1:
        return None
    turn = turns[ids[0]]
    if not cut_in_pieces(turn.text):
        return None
    prefix = f"{turn.speaker}: "
    if not hit.entry.text.startswith(prefix):
        return None
    part, whole = (" ".join(t.split()) for t in (hit.entry.text[len(prefix) :], turn.text))
    return render_memory(hit.item) if len(part) < len(whole) and part in whole else None


def later_statements(
    c: Components,
    user_id: str,
    hits: Sequence[SearchHit],
    expansion: Expansion,
    retrieved: Set[str],
) -> dict[str, list[ScoredEntry]]:
    """For each of the first ``expansion.later_hits`` MTM hits, the user's entries from after
    it closest to it (to the hit, not to the query) at cosine ``later_similarity`` or more,
    best first, whose turns are not ``retrieved`` (those keep their own rank, unless
    ``later_retrieved``: then they are offered too, and are delivered by the better of the
    two values): the statements that may have changed it (a moved flight, a new diet).
    ``offered`` picks what is delivered of them. The hits' stored vectors in one store read
    (no model call), then one search each (every store takes its calls in turn under its
    lock: threads would only add their start-up); by hit id."""
    chosen = [h for h in hits if h.tier is Tier.MTM][: expansion.later_hits]
    if expansion.later <= 0 or not chosen:
        return {}
    vectors = hit_vectors(c, user_id, chosen)
    # ``since`` is inclusive: the hit itself and its exchange come back too, and ``offered``
    # passes over the other speakers' statements
    room = 2 * expansion.later_per_hit + 4
    passed_over = frozenset() if expansion.later_retrieved else retrieved
    out: dict[str, list[ScoredEntry]] = {}
    for hit, vector in zip(chosen, vectors, strict=True):
        since = SearchFilters(since=hit.entry.effective_time)
        out[hit.id] = [
            s
            for s in nearest(c.store, user_id, vector, since, room)  # ties alike on every store
            if s.score >= expansion.later_similarity
            and s.entry.effective_time > hit.entry.effective_time
            and not any(t in passed_over for t in s.entry.source_turn_ids)
        ]
    return out


def hit_vectors(c: Components, user_id: str, hits: Sequence[SearchHit]) -> list[Vectors]:
    """Each hit's stored vector; a hit's entry gone meanwhile is embedded again (its index
    text, as it was stored). Reading costs a store call; embedding, a model call."""
    stored = c.store.stored_vectors(user_id, [h.id for h in hits])
    missing = [h for h in hits if h.id not in stored]
    if missing:
        texts = [index_text(h.entry) for h in missing]
        embedded = check_vectors(
            c.embedder.embed(texts, EmbedMode.DOCUMENT), len(texts), c.store.dim, c.embedder.name
        )
        stored = {**stored, **{h.id: v for h, v in zip(missing, embedded, strict=True)}}
    return [stored[h.id] for h in hits]


def offered(
    hit: SearchHit,
    found: Sequence[ScoredEntry],
    turns: Mapping[str, ContextTurn],
    costs: Callable[[ContextTurn], int],
    expansion: Expansion,
    retrieved: Set[str],
) -> list[tuple[str, ...]]:
    """What is offered of a hit's later statements (``later_statements``), best first: the
    turns of the hit's own speakers (the assistant's echo of a user's words changes none of
    the user's facts), each statement at most ``later_max_tokens`` (a changed fact is stated
    briefly; a long later turn is a discussion, and the budget it would take is worth more
    to the next hits: measured on LongMemEval-S, whose turns run to hundreds of tokens), at
    most ``later_per_hit`` of those not ``retrieved`` (the ``retrieved`` ones cost no more
    searching, and are only offered at all under ``later_retrieved``)."""
    speakers = {turns[t].speaker for t in hit.source_turn_ids if t in turns}
    out: list[tuple[str, ...]] = []
    fresh = 0  # statements retrieval did not return: at most ``later_per_hit``
    for s in found:
        ids = tuple(
            t for t in s.entry.source_turn_ids if t in turns and turns[t].speaker in speakers
        )
        cost = sum(costs(turns[t]) for t in ids)
        if not ids or ids in out or cost > expansion.later_max_tokens:
            continue
        known = all(t in retrieved for t in ids)
        if known or fresh < expansion.later_per_hit:
            out.append(ids)
            fresh += not known
    return out


def hit_units(
    hits: Sequence[SearchHit],
    turns: Mapping[str, ContextTurn],
    expansion: Expansion,
    later: Mapping[str, Sequence[tuple[str, ...]]] | None = None,
    tokens: Callable[[ContextTurn], int] | None = None,
    budget_tokens: int | None = None,
) -> list[Unit]:
    """Units for ``hits`` (best first), the parts of each hit of several turns, and the
    later statements offered for them (``offered``: turn ids by hit id, each worth
    ``expansion.later`` of its hit), best value first. With ``tokens`` (a turn's cost), a
    unit past ``expansion.long_reference(budget_tokens)`` is worth less (``length_share``; a
    piece's unit by its whole turn's cost, though its fallback line is shorter)."""

    def cost(ids: Sequence[str]) -> int:  # 0: lengths do not count (no counter, no turns)
        if tokens is None:
            return 0
        return sum(tokens(turns[t]) for t in ids if t in turns)

    units: list[Unit] = []
    found = FoundTurns()
    rank = -1
    for hit in hits:
        own = tuple(t for t in hit.source_turn_ids if t in turns)
        if expansion.distinct and found.repeats(own):
            continue  # a turn found again (alone, or in an exchange): no second rank
        rank += 1
        value = hit_value(rank)
        found.add(own)
        if hit.tier is Tier.LTM or not own:
            units.append(Unit((), value, render_memory(hit.item)))
            continue
        units.append(Unit(own, value, fallback=_piece(hit, turns)))
        if len(own) > 1 and expansion.member > 0:  # when the whole does not fit, its parts
            units.extend(Unit((t,), value * expansion.member) for t in own)
        for newer in (later or {}).get(hit.id, ()):
            units.append(Unit(newer, value * expansion.later))
    reference = expansion.long_reference(budget_tokens)
    if reference > 0 and tokens is not None:
        units = [
            replace(u, value=u.value * length_share(cost(u.turn_ids), reference)) for u in units
        ]
    units.sort(key=lambda u: -u.value)  # stable: ties keep the hits' order
    return units


def length_share(cost: int, reference: int) -> float:
    """The share of its value that a unit of ``cost`` tokens keeps: all of it up to
    ``reference`` tokens, beyond that ``reference / cost`` (a unit twice as long as the
    reference is worth half). A ``reference`` of 0 keeps all of it. The budget a long turn
    takes (a user/assistant chat's long answers) is worth more to the next short hits.

    >>> length_share(50, 200), length_share(400, 200), length_share(400, 0)
    (1.0, 0.5, 1.0)
    """
    if reference <= 0 or cost <= reference:
        return 1.0
    return reference / cost


@dataclass(frozen=True, slots=True)
class Offer:
    """What delivery offers for some hits, before packing: the units best first, the stored
    turns they name (read from the journal in one query) as the builder sees them, the
    later statements offered per hit id, and the turns' token costs, counted once."""

    units: list[Unit]
    stored: list[Turn]
    turns: dict[str, ContextTurn]
    offers: dict[str, list[tuple[str, ...]]]
    costs: LineCosts


def offer_units(
    c: Components,
    user_id: str,
    hits: Sequence[SearchHit],
    budget_tokens: int,
    expansion: Expansion,
) -> Offer:
    """The units offered for ``hits``: their turns, their parts and later statements, valued
    (``hit_units``). ``build_context`` packs them; the inspector traces them."""
    retrieved = {t for h in hits for t in h.source_turn_ids}  # these have a rank of their own
    later = later_statements(c, user_id, hits, expansion, retrieved)
    ids = sorted(
        {t for h in hits if h.tier is Tier.MTM for t in h.source_turn_ids}
        | {t for found in later.values() for s in found for t in s.entry.source_turn_ids}
    )
    placed = c.journal.placed_turns(user_id, ids)
    stored = [t for t, _ in placed]
    turns = context_turns(placed)
    hit_of = {h.id: h for h in hits}
    costs = LineCosts(c.tokens)  # each turn counted once: offering, length shares, packing
    offers = {
        h: offered(hit_of[h], found, turns, costs, expansion, retrieved)
        for h, found in later.items()
    }
    units = hit_units(hits, turns, expansion, offers, costs, budget_tokens)
    return Offer(units, stored, turns, offers, costs)


def build_context(
    c: Components,
    user_id: str,
    hits: Sequence[SearchHit],
    budget_tokens: int,
    expansion: Expansion,
) -> DeliveredContext:
    """The context for ``hits``: the units offered for them (``offer_units``), packed; it
    carries the hits delivered and their stored turns. No access is counted here
    (``Memory.context`` counts the delivered hits)."""
    offer = offer_units(c, user_id, hits, budget_tokens, expansion)
    ctx = pack(offer.units, offer.turns, budget_tokens, costs=offer.costs)
    by_id = {t.turn_id: t for t in offer.stored}
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
    "Offer",
    "build_context",
    "context_turns",
    "delivered_hits",
    "hit_units",
    "hit_value",
    "hit_vectors",
    "later_statements",
    "length_share",
    "offer_units",
    "offered",
]
