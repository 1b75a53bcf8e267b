"""Scoring, pure: evidence recall of delivered context, and answer F1 / BLEU-1 with the
normalisation of the official LoCoMo scoring code (snap-research/locomo, task_eval/
evaluation.py): commas dropped, lower case, punctuation removed, the words a/an/the/and
removed, Porter stems; multi-hop answers split on commas; open-domain answers cut at the
first ';'; adversarial questions score 1 when the answer says the information is not
available. Categories are the names the loaders give (``tiermem.bench.datasets``)."""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

from tiermem.bench import bench_dependency
from tiermem.bench.datasets.conversation import ADVERSARIAL

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


@lru_cache(maxsize=1)
def _stemmer() -> object:
    # no data download: the stemmer is pure code
    return bench_dependency("nltk.stem").PorterStemmer()


def _stem(word: str) -> str:
    return str(_stemmer().stem(word))  # type: ignore[attr-defined]


def normalize_answer(text: str) -> str:
    """Lower case, no commas or punctuation, without the words a/an/the/and.

    >>> normalize_answer("The Lisbon half-marathon, and a run!")
    'lisbon halfmarathon run'
    """
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def _tokens(text: str) -> list[str]:
    return [_stem(w) for w in normalize_answer(text).split()]


def token_f1(prediction: str, truth: str) -> float:
    """F1 of stemmed, normalised tokens (the official ``f1_score``)."""
    predicted, gold = _tokens(prediction), _tokens(truth)
    same = sum((Counter(predicted) & Counter(gold)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(gold)
    return 2 * precision * recall / (precision + recall)


def multi_answer_f1(prediction: str, truth: str) -> float:
    """Each comma-separated gold part takes its best-matching predicted part; the mean."""
    predictions = [p.strip() for p in prediction.split(",")]
    truths = [t.strip() for t in truth.split(",")]
    return sum(max(token_f1(p, t) for p in predictions) for t in truths) / len(truths)


# LoCoMo's own abstentions, and tiermem's (``tiermem.generator.NOTHING_IN_MEMORY``)
ABSTENTIONS = ("no information available", "not mentioned", "memory holds nothing")


def answer_f1(prediction: str, truth: str, category: str) -> float:
    """The official per-category score (any other category: plain token F1)."""
    if category == "multi-hop":
        return multi_answer_f1(prediction, truth)
    if category == "open-domain":
        return token_f1(prediction, truth.split(";")[0].strip())
    if category == ADVERSARIAL:
        return 1.0 if any(a in prediction.lower() for a in ABSTENTIONS) else 0.0
    return token_f1(prediction, truth)


def bleu1(prediction: str, truth: str) -> float:
    """BLEU-1 on normalised, unstemmed tokens: clipped unigram precision times the brevity
    penalty (0 for an empty prediction)."""
    predicted, gold = normalize_answer(prediction).split(), normalize_answer(truth).split()
    if not predicted or not gold:
        return 0.0
    clipped = sum((Counter(predicted) & Counter(gold)).values())
    brevity = 1.0 if len(predicted) > len(gold) else math.exp(1 - len(gold) / len(predicted))
    return brevity * clipped / len(predicted)


def evidence_recall(evidence: Iterable[str], delivered: set[str]) -> float:
    """Share of gold evidence turn ids among the source turns actually delivered.

    >>> evidence_recall(("D1:1", "D1:2"), {"D1:2", "D3:4"})
    0.5
    """
    gold = list(dict.fromkeys(evidence))
    return sum(e in delivered for e in gold) / len(gold) if gold else 0.0
