"""Pure ranking functions: reciprocal-rank fusion, budget arithmetic, and the fusion of a
relevance model's probabilities with the first-stage rank, with its adaptive cut and the
calibration of that cut. No I/O.

>>> fused = reciprocal_rank_fusion({"dense": ["a", "b"], "bm25": ["b", "c"]}, k=60)
>>> [f.key for f in fused]
['b', 'a', 'c']
>>> split_budget(5, [2, 1, 1])
[3, 1, 1]
>>> [round(s, 3) for s in fuse_relevance([0.1, 0.9, 0.5, 0.2], weight=0.3)]
[0.73, 0.795, 0.5, 0.235]
>>> keep_adaptive([0.73, 0.795, 0.5, 0.235], k=3, threshold=0.6)
[1, 0]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar, overload

RRF_K = 60  # the usual constant: damps the weight of any single list's top ranks


T = TypeVar("T")


def in_turns(ranked: Sequence[Sequence[T]], limit: int) -> list[T]:
    """Each list's first, then each list's second, ..., each item once, ``limit`` at most.

    >>> in_turns([["a", "b"], ["c", "a", "d"], []], 4)
    ['a', 'c', 'b', 'd']
    """
    out: list[T] = []
    for rank in range(max((len(r) for r in ranked), default=0)):
        for items in ranked:
            if rank < len(items) and items[rank] not in out:
                out.append(items[rank])
                if len(out) == limit:
                    return out
    return out


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


def rank_prior(rank: int, pool: int) -> float:
    """What the first stage alone says of the candidate at ``rank`` (1-based) of ``pool``:
    1 for its top, falling linearly, above 0 for its last."""
    if not 1 <= rank <= pool:
        raise ValueError(f"rank {rank} is not in a pool of {pool}")
    return 1.0 - (rank - 1) / pool


@dataclass(frozen=True, slots=True)
class FusedRelevance:
    """A candidate's fused score: ``weight * probability + (1 - weight) * prior``."""

    rank: int  # in the first stage, 1-based
    probability: float  # the relevance model's P(relevant)
    prior: float  # rank_prior(rank, pool)
    weight: float
    score: float

    def explain(self) -> str:
        return (
            f"{self.weight:.2f} * p {self.probability:.3f} + {1 - self.weight:.2f} * "
            f"prior(rank {self.rank}) {self.prior:.3f} = {self.score:.3f}"
        )


@overload
def fuse_relevance(
    probabilities: Sequence[float], weight: float, *, explain: Literal[False] = False
) -> list[float]: ...
@overload
def fuse_relevance(
    probabilities: Sequence[float], weight: float, *, explain: Literal[True]
) -> list[FusedRelevance]: ...
def fuse_relevance(
    probabilities: Sequence[float], weight: float, *, explain: bool = False
) -> list[float] | list[FusedRelevance]:
    """Fuse a relevance model's probabilities (in first-stage order) with the first-stage rank.

    A score moves at most ``weight`` away from the rank prior, so with a weight of 0 the order
    is the first stage's, and a model can reorder only as far as its weight lets it. An
    inverted model (0 for the first-stage top, 1 for the rest) cannot push the top out of the
    best ``k`` when ``weight <= safe_relevance_weight(pool, k)``."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight {weight} is not in [0, 1]")
    pool = len(probabilities)
    fused = []
    for rank, probability in enumerate(probabilities, start=1):
        prior = rank_prior(rank, pool)
        score = weight * probability + (1.0 - weight) * prior
        fused.append(FusedRelevance(rank, probability, prior, weight, score))
    return fused if explain else [f.score for f in fused]


def safe_relevance_weight(pool: int, k: int) -> float:
    """The largest weight at which an inverted model cannot push the first-stage top out of
    the best ``k`` of ``pool``: a candidate at rank r outscores the top only if
    ``(r - 1) / pool < weight / (1 - weight)``, and ``weight <= k / (pool + k)`` leaves at most
    ``k - 1`` such ranks. (With ``candidate_multiplier`` 2, ``pool = 2k``: 1/3.)"""
    if pool < 1 or k < 1:
        raise ValueError("pool and k must be positive")
    return k / (pool + k)


def keep_adaptive(
    scores: Sequence[float], k: int, threshold: float, min_keep: int = 1
) -> list[int]:
    """Indices of the candidates to keep, best first: those scoring at least ``threshold``,
    but never fewer than ``min_keep`` nor more than ``k`` (nor more than there are). Ties keep
    the first-stage order."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    above = sum(1 for i in order if scores[i] >= threshold)
    return order[: min(k, len(order), max(above, min_keep))]


@dataclass(frozen=True, slots=True)
class ThresholdChoice:
    """A calibrated threshold and what it gives on the data it was calibrated on."""

    threshold: float
    kept: int
    precision: float
    recall: float
    f_score: float


def calibrate_threshold(
    scores: Sequence[float],
    labels: Sequence[bool],
    *,
    beta: float = 1.0,
    min_recall: float | None = None,
) -> ThresholdChoice:
    """The threshold for ``keep_adaptive`` from pooled candidates of a tune split (fused
    scores and gold labels): the one maximising F-beta (``beta`` > 1 weighs recall more), or,
    with ``min_recall``, the highest one whose recall reaches it. Ties take the higher
    threshold (fewer tokens). The threshold sits halfway between the last kept score and the
    next, so unseen scores near the cut are not decided by a float's last digit. The caps of
    ``keep_adaptive`` (``k``, ``min_keep``) are not modelled.

    >>> choice = calibrate_threshold([0.9, 0.8, 0.4, 0.3], [True, False, True, False])
    >>> round(choice.threshold, 2), choice.kept, round(choice.f_score, 2)
    (0.35, 3, 0.8)
    """
    if len(scores) != len(labels) or not scores:
        raise ValueError("scores and labels must be non-empty and of one length")
    positives = sum(labels)
    if positives == 0:
        raise ValueError("no relevant candidate to calibrate on")
    if min_recall is not None and not 0.0 <= min_recall <= 1.0:
        raise ValueError(f"min_recall {min_recall} is not in [0, 1]")
    pairs = sorted(zip(scores, labels, strict=True), key=lambda p: -p[0])
    best: ThresholdChoice | None = None
    tp = kept = 0
    for i, (score, label) in enumerate(pairs):
        tp += int(label)
        kept += 1
        if i + 1 < len(pairs) and pairs[i + 1][0] == score:
            continue  # one threshold keeps every tie or none
        nxt = pairs[i + 1][0] if i + 1 < len(pairs) else score
        precision, recall = tp / kept, tp / positives
        denominator = beta * beta * precision + recall
        f = (1 + beta * beta) * precision * recall / denominator if denominator else 0.0
        choice = ThresholdChoice((score + nxt) / 2, kept, precision, recall, f)
        if min_recall is not None:
            if recall >= min_recall:
                return choice
        elif best is None or f > best.f_score:
            best = choice
    assert best is not None  # min_recall <= 1 is reached at the last threshold
    return best
