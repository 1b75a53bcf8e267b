"""SLM-2 as a pointwise selector: is this one candidate evidence for the question?

Each candidate is scored on its own (``prompts/relevance.py``): p = P(yes) / (P(yes) + P(no))
from the first answer token's log-probabilities, never generated. The question is the first
query of the plan, which is the user's own (the controller keeps it first). A backend that
scores batches (llama.cpp in-process) gets a query's candidates in one call and evaluates the
prompt they share once; the others get one call per candidate, in first-stage order, the
shared prompt left to their cache (Ollama's, a vLLM server's prefix cache).

p is fused with the first-stage rank (``tiermem.ranking.fuse_relevance``): a weak model moves
a candidate at most ``weight`` away from where rank fusion put it. The kept candidates are those
whose fused score reaches ``threshold`` (an adaptive K: at least ``min_keep``, at most ``k``);
``calibrate_threshold`` sets it from a tune split, and a threshold of 0 keeps ``k``. (An
inverted model leaves the first-stage top a fused score of ``1 - weight``: a threshold above
that can cut it, whatever the weight.) Each kept hit's explanation carries ``relevance`` (p)
beside its ``selector`` score (the fused one).

Every candidate's scoring is metered under ``relevance`` as one call (a batch's latency shared
equally): prompt tokens, and the tokens evaluated (the rest came from a cache). Fallback
(counted under ``relevance``): when any call fails, times out, or the query's time budget (the
role's ``timeout_s``) runs out, the first ``k`` candidates in fused first-stage order, as the
listwise selector does.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from tiermem.errors import ConfigError, SLMError, SLMTimeout
from tiermem.ranking import FusedRelevance, fuse_relevance, keep_adaptive
from tiermem.render import render_memory
from tiermem.roles.plan import Candidate, Selection
from tiermem.slm.base import BatchNextTokenScorer, NextTokenScorer, ScoreRequest, TokenScores
from tiermem.slm.prompts import relevance as prompt
from tiermem.slm.roles.common import Role, RoleRuntime
from tiermem.slm.roles.selector import first_stage_fallback
from tiermem.slm.scoring import score_batch_task, score_task, yes_probability

TASK = "relevance"  # the meter's key for the scoring calls and the fallbacks
MAX_CANDIDATES = 64


@dataclass(frozen=True, slots=True)
class PointwiseSettings:
    """``weight``: how far the model may move a candidate from the first-stage rank (0: not at
    all; ``safe_relevance_weight`` gives the bound for an inverted model). ``threshold``: the
    fused score a candidate needs to be kept (0 keeps ``k``). ``min_keep``: the fewest kept.
    ``cross_encoder``: the cross-encoder selector's model directory (``tiermem train selector
    --arch cross-encoder``), and ``cross_encoder_threshold`` its cut (0 keeps ``k``; ``None``:
    the one it was calibrated with), ``cross_encoder_precision`` the dtype it runs in
    (:func:`~tiermem.slm.roles.cross_encoder.serving_precision`)."""

    weight: float = 0.3
    threshold: float = 0.0
    min_keep: int = 1
    cross_encoder: Path | None = None
    cross_encoder_threshold: float | None = 0.0
    cross_encoder_precision: str = "auto"


class FusedSelector:
    """Keeps the candidates whose relevance probability, fused with their first-stage rank,
    is highest: what the pointwise and the cross-encoder selectors share. A subclass gives
    :meth:`probabilities`; :meth:`fallback` answers when that scoring fails."""

    name = "fused-selector"

    def __init__(self, settings: PointwiseSettings) -> None:
        self._settings = settings

    @property
    def settings(self) -> PointwiseSettings:
        return self._settings

    @property
    def threshold(self) -> float:
        """The fused score a candidate needs to be kept (0 keeps ``k``)."""
        return self._settings.threshold

    def probabilities(self, question: str, candidates: Sequence[Candidate]) -> list[float]:
        """P(relevant) per candidate, in first-stage order; raises ``SLMError`` on failure."""
        raise NotImplementedError

    def fallback(self, candidates: Sequence[Candidate], k: int, exc: SLMError) -> Selection:
        raise exc

    def score(self, question: str, candidates: Sequence[Candidate]) -> list[FusedRelevance]:
        """Every candidate's fused relevance to ``question``, in first-stage order (what a
        tune split calibrates the threshold on)."""
        probabilities = self.probabilities(question, candidates)
        return fuse_relevance(probabilities, self._settings.weight, explain=True)

    def select(self, queries: Sequence[str], candidates: Sequence[Candidate], k: int) -> Selection:
        return self.select_cuts(queries, candidates, k, (self.threshold,))[0]

    def select_cuts(
        self,
        queries: Sequence[str],
        candidates: Sequence[Candidate],
        k: int,
        thresholds: Sequence[float],
    ) -> list[Selection]:
        """One selection per threshold (0 keeps ``k``) from one scoring of the candidates: how
        ``tiermem bench selector`` reports equal K beside the calibrated, adaptive K at the
        cost of one. A failed scoring gives every cut the same fallback."""
        if not candidates or not queries:
            passthrough = Selection(tuple((c, c.fused) for c in candidates[:k]), "passthrough")
            return [passthrough for _ in thresholds]
        shown = list(candidates[:MAX_CANDIDATES])
        try:
            fused = self.score(queries[0], shown)
        except SLMError as exc:
            fallback = self.fallback(candidates, k, exc)
            return [fallback for _ in thresholds]
        scores = [f.score for f in fused]
        selections = []
        for threshold in thresholds:
            kept = keep_adaptive(scores, k, threshold, self._settings.min_keep)
            explained = tuple((_explained(shown[i], fused[i]), fused[i].score) for i in kept)
            selections.append(Selection(explained, "model"))
        return selections


class PointwiseSelector(FusedSelector, Role):
    """The small model's P(yes) per candidate, fused with its first-stage rank.

    >>> from tiermem.slm.meter import Meter
    >>> from tiermem.slm.scripted import ScriptedBackend
    >>> backend = ScriptedBackend()
    >>> backend.score_with({"yes": 0.9, "no": 0.1})
    >>> selector = PointwiseSelector(RoleRuntime(backend, Meter()), PointwiseSettings(0.3, 0.5))
    >>> selector.select(["Where?"], [], k=5).source
    'passthrough'
    """

    name = "slm-pointwise-selector"

    def __init__(self, runtime: RoleRuntime, settings: PointwiseSettings | None = None) -> None:
        Role.__init__(self, runtime)
        FusedSelector.__init__(self, settings or PointwiseSettings())
        if not isinstance(runtime.backend, NextTokenScorer):
            raise ConfigError(
                f"the pointwise selector needs a backend that scores tokens; "
                f"{type(runtime.backend).__name__} cannot"
            )
        self._scorer: NextTokenScorer = runtime.backend

    def probabilities(self, question: str, candidates: Sequence[Candidate]) -> list[float]:
        """Raises ``SLMError`` when a call fails or the role's time budget runs out."""
        budget = self._rt.timeout_s
        requests = [
            ScoreRequest(
                TASK,
                prompt.build_messages(prompt.RelevanceInput(question, render_memory(c.item))),
                (prompt.YES, prompt.NO),
                budget,
            )
            for c in candidates
        ]
        if isinstance(self._scorer, BatchNextTokenScorer):
            results = score_batch_task(self._scorer, requests, self._rt.meter)
        else:
            results = self._one_by_one(requests, time.monotonic() + budget)
        return [yes_probability(r.logprobs, prompt.YES, prompt.NO) for r in results]

    def fallback(self, candidates: Sequence[Candidate], k: int, exc: SLMError) -> Selection:
        return first_stage_fallback(self._rt, TASK, candidates, k, exc)

    def _one_by_one(self, requests: Sequence[ScoreRequest], deadline: float) -> list[TokenScores]:
        results: list[TokenScores] = []
        for request in requests:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SLMTimeout(
                    TASK,
                    f"{len(results)} of {len(requests)} candidates scored "
                    f"within {self._rt.timeout_s} s",
                )
            scored = score_task(self._scorer, replace(request, timeout_s=remaining), self._rt.meter)
            results.append(scored)
        return results


def _explained(candidate: Candidate, fused: FusedRelevance) -> Candidate:
    """The candidate with the model's probability among its score components."""
    return replace(candidate, components={**candidate.components, "relevance": fused.probability})
