"""Pure ranking functions: reciprocal-rank fusion and budget arithmetic. No I/O.

>>> fused = reciprocal_rank_fusion({"dense": ["a", "b"], "bm25": ["b", "c"]}, k=60)
>>> [f.key for f in fused]
['b', 'a', 'c']
>>> split_budget(5, [2, 1, 1])
[3, 1, 1]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

RRF_K = 60  # the usual constant: damps the weight of any single list's top ranks


@dataclass(frozen=True, slots=True)
class Fused:
    """A key's fused score, and its rank (1-based) in each list that had it."""

    key: str
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)


def reciprocal_rank_fusion(
    rankings: Mapping[str, Sequence[str]],
    k: int = RRF_K,
    weights: Mapping[str, float] | None = None,
) -> list[Fused]:
    """Fuse ranked lists of keys: score = sum over lists of weight / (k + rank).

    Ties are broken by the best single rank, then by key, so the order is deterministic.
    """
    scores: dict[str, float] = {}
    ranks: dict[str, dict[str, int]] = {}
    for name, keys in rankings.items():
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for position, key in enumerate(keys, start=1):
            if key in ranks and name in ranks[key]:
                continue  # a list naming a key twice counts it once, at its best rank
            scores[key] = scores.get(key, 0.0) + weight / (k + position)
            ranks.setdefault(key, {})[name] = position
    order = sorted(scores, key=lambda key: (-scores[key], min(ranks[key].values()), key))
    return [Fused(key, scores[key], ranks[key]) for key in order]


def split_budget(total: int, weights: Sequence[float]) -> list[int]:
    """Split ``total`` into integer shares proportional to ``weights`` (largest remainder),
    giving every positive weight at least one unit when ``total`` allows."""
    if total < 0 or not weights or any(w < 0 for w in weights):
        raise ValueError("total must be >= 0 and weights non-negative and non-empty")
    positive = [i for i, w in enumerate(weights) if w > 0]
    shares = [0] * len(weights)
    if not positive or total == 0:
        return shares
    weight_sum = sum(weights[i] for i in positive)
    exact = {i: total * weights[i] / weight_sum for i in positive}
    for i in positive:
        shares[i] = math.floor(exact[i])
    by_fraction = sorted(positive, key=lambda i: (-(exact[i] - shares[i]), i))
    for i in by_fraction[: total - sum(shares)]:
        shares[i] += 1
    for i in positive:  # lift empty shares from the largest while it can spare one
        largest = max(positive, key=lambda j: (shares[j], -j))
        if shares[i] == 0 and shares[largest] > 1:
            shares[i], shares[largest] = 1, shares[largest] - 1
    return shares
