"""The tuning policy of delivery: what a hit is offered with, and what a unit is worth.

Every value here was chosen by measurement (``docs/decisions.md``; ``tiermem bench locomo
--lodo`` for the read path). ``[delivery]`` in a configuration file sets them
(``tiermem.config.DeliveryConfig`` adds the budgets), and ``tiermem.policy`` hands them to
the stages. They are on the configuration reference's expert page, not its first.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator
from tiermem.config.section import Section

REMOVED = ("reply", "previous", "burst", "decay", "reach", "piece", "neighbour_tokens")
"""``[delivery]`` settings that lost leave-one-dataset-out and left (``docs/decisions.md``)."""


class Expansion(Section):
    """What a hit is offered with beyond its own turns, and how much each unit is worth.

    ``member``: each turn of a hit of several turns (an exchange) on its own, worth this share
    of the hit, for when the whole does not fit (a long answer to a short question); 0 offers
    none. ``distinct``: a hit whose turns better hits already found takes no rank of its own,
    and no place among the ``k`` hits of a search (``tiermem.pipeline.read.distinct``).
    ``later``: the share of a hit's value that a later statement close to it is worth (a
    changed fact's new value), for the first ``later_hits`` hits, at most ``later_per_hit``
    each, at cosine ``later_similarity`` or more to the hit, by the hit's own speaker, of at
    most ``later_max_tokens`` (``tiermem.pipeline.deliver.later_statements``); 0 offers
    none. ``later_retrieved``: a later statement that retrieval returned too is offered at
    that share as well, beyond ``later_per_hit`` (it keeps its own rank when that is worth
    more): the newest statement of a changed fact often ranks below the old one.
    ``long_tokens``: a unit longer than this many tokens keeps only ``long_tokens / its
    tokens`` of its value (``tiermem.pipeline.deliver.length_share``); ``long_share``: with a
    budget, that reference is at most this share of it (``long_reference``): at 300 tokens a
    unit of 280 would take the room of three or four short hits. 0 drops a limit, both 0 the
    rule. At ``answer()``'s budget (1,200) the reference is 200 tokens.

    Every value was chosen leave-one-dataset-out (``tiermem bench locomo --lodo``,
    ``docs/benchmarks.md``); the neighbours of a hit (the turns beside it in its session) and
    a discount for a hit on a piece of a long turn lost there and are gone
    (``docs/decisions.md``)."""

    member: float = Field(default=0.9, ge=0, le=1)
    distinct: bool = True
    later: float = Field(default=0.05, ge=0, le=1)  # context(); answer(): answer_later
    later_hits: int = Field(default=4, ge=0)
    later_per_hit: int = Field(default=2, ge=0)
    later_similarity: float = Field(default=0.5, ge=-1, le=1)
    later_max_tokens: int = Field(default=80, ge=0)
    later_retrieved: bool = True
    long_tokens: int = Field(default=200, ge=0)
    long_share: float = Field(default=0.25, ge=0, le=1)

    @model_validator(mode="before")
    @classmethod
    def _refuse_removed(cls, data: Any) -> Any:
        gone = sorted(set(data) & set(REMOVED)) if isinstance(data, dict) else []
        if gone:
            raise ValueError(
                f"delivery {', '.join(gone)}: removed (neighbours of a hit and the piece "
                "discount lost leave-one-dataset-out, docs/decisions.md); delete the line"
            )
        return data

    def long_reference(self, budget_tokens: int | None) -> int:
        """The length past which any unit is worth less per token, for ``budget_tokens``
        (``None``: ``long_tokens`` alone); 0 when neither applies.

        >>> Expansion().long_reference(300), Expansion().long_reference(2400)
        (75, 200)
        >>> Expansion(long_tokens=0).long_reference(300), Expansion().long_reference(None)
        (75, 200)
        """
        limits = [self.long_tokens] if self.long_tokens > 0 else []
        if budget_tokens is not None and self.long_share > 0:
            limits.append(max(1, int(budget_tokens * self.long_share)))
        return min(limits, default=0)


__all__ = ["REMOVED", "Expansion"]
