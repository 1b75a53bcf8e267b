"""The tuning policy of delivery: how much each neighbour of a hit is worth, declared once.

Every value here was chosen by measurement (``docs/decisions.md``; ``tiermem bench locomo
--lodo`` for the read path). ``[delivery]`` in a configuration file sets them
(``tiermem.config.DeliveryConfig`` adds the budgets), and ``tiermem.policy`` hands them to
the stages. They are on the configuration reference's expert page, not its first.
"""

from __future__ import annotations

from pydantic import Field
from tiermem.config.section import Section


class Expansion(Section):
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

    reply: float = Field(default=0.5, ge=0, le=1)
    previous: float = Field(default=0.3, ge=0, le=1)
    burst: float = Field(default=0.8, ge=0, le=1)
    decay: float = Field(default=0.7, ge=0, le=1)
    reach: int = Field(default=4, ge=0)
    member: float = Field(default=0.9, ge=0, le=1)
    piece: float = Field(default=0.5, ge=0, le=1)
    distinct: bool = True
    later: float = Field(default=0.05, ge=0, le=1)  # context(); answer(): answer_later
    later_hits: int = Field(default=4, ge=0)
    later_per_hit: int = Field(default=2, ge=0)
    later_similarity: float = Field(default=0.5, ge=-1, le=1)
    later_max_tokens: int = Field(default=80, ge=0)
    later_retrieved: bool = True
    neighbour_tokens: int = Field(default=100, ge=0)
    long_tokens: int = Field(default=400, ge=0)
    long_share: float = Field(default=0.25, ge=0, le=1)

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


__all__ = ["Expansion"]
