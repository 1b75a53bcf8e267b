"""The pointwise selector on the scripted backend: each candidate's P(yes) fused with its
first-stage rank, the adaptive K, the bound on what an inverted model can do, fallbacks and the
meter; the pure fusion and calibration functions it stands on; and the wiring from config."""

from __future__ import annotations

import itertools
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest
from tiermem import Memory, TiermemConfig
from tiermem.config import BackendConfig, LlamaCppConfig, backend_config, merge_overrides
from tiermem.errors import ConfigError, SLMTimeout, SLMUnavailable
from tiermem.ranking import (
    calibrate_threshold,
    fuse_relevance,
    keep_adaptive,
    rank_prior,
    safe_relevance_weight,
)
from tiermem.roles.plan import Candidate
from tiermem.slm.base import ScoreRequest, SLMRequest, SLMResponse
from tiermem.slm.meter import Meter
from tiermem.slm.registry import registered_backend
from tiermem.slm.roles.common import RoleRuntime
from tiermem.slm.roles.pointwise import TASK, PointwiseSelector, PointwiseSettings
from tiermem.slm.roles.selector import SLMSelector
from tiermem.slm.scripted import BatchScriptedBackend, ScriptedBackend
from tiermem.types import MemoryEntry, MemoryKind

from tests.conftest import T0, chat
from tests.fakes.scripted import ScriptedModels
from tests.slm.conftest import SISTER_AND_DOG, slm_config

QUESTION = "Where does Ines work?"


def _candidates(count: int) -> list[Candidate]:
    """``count`` candidates in first-stage order; memory i's text is ``memory i``."""
    return [
        Candidate(MemoryEntry(f"m{i}", "maya", f"memory {i}", MemoryKind.TURN, T0, T0), 1 / i)
        for i in range(1, count + 1)
    ]


def _memory_number(request: ScoreRequest) -> int:
    return int(request.messages[-1].content.rsplit("memory ", 1)[1])


def _scores(p: Callable[[int], float]) -> Callable[[ScoreRequest], Mapping[str, float]]:
    """P(yes) of memory i is ``p(i)``; the rest of the mass goes to ``no``."""

    def score(request: ScoreRequest) -> Mapping[str, float]:
        yes = p(_memory_number(request))
        return {"yes": yes, "no": 1 - yes}

    return score


@pytest.fixture(params=["one-by-one", "batch"])
def backend(request: pytest.FixtureRequest) -> ScriptedBackend:
    """The scripted scorer, called once per candidate or (as llama.cpp is) once per query."""
    return BatchScriptedBackend() if request.param == "batch" else ScriptedBackend()


def _selector(
    backend: ScriptedBackend,
    weight: float = 0.3,
    threshold: float = 0.0,
    min_keep: int = 1,
    timeout_s: float = 20.0,
) -> tuple[PointwiseSelector, Meter]:
    meter = Meter()
    runtime = RoleRuntime(backend, meter, timeout_s=timeout_s)
    return PointwiseSelector(runtime, PointwiseSettings(weight, threshold, min_keep)), meter


def _kept(selection_kept: Sequence[tuple[Candidate, float]]) -> list[int]:
    return [int(c.id[1:]) for c, _ in selection_kept]


def test_keeps_at_most_k_ranked_by_the_models_probability(backend: ScriptedBackend) -> None:
    relevant = {2: 0.9, 5: 0.8, 6: 0.7}
    backend.score_with(_scores(lambda i: relevant.get(i, 0.05)))
    selector, _ = _selector(backend, weight=1.0)
    selection = selector.select([QUESTION, "Ines bakery job"], _candidates(8), k=2)
    assert selection.source == "model"
    assert _kept(selection.kept) == [2, 5]
    assert [round(s, 6) for _, s in selection.kept] == [0.9, 0.8]
    assert [c.components["relevance"] for c, _ in selection.kept] == pytest.approx([0.9, 0.8])
    # every candidate scored once, against the user's question (the first query) only
    assert sorted(_memory_number(r) for r in backend.score_requests) == list(range(1, 9))
    assert all(QUESTION in r.messages[-1].content for r in backend.score_requests)
    assert not any("Ines bakery job" in r.messages[-1].content for r in backend.score_requests)
    assert backend.requests == []  # scored, never generated


def test_the_probability_is_yes_against_no_only(backend: ScriptedBackend) -> None:
    """Mass on other tokens does not count: 0.2 yes / 0.2 no is a coin flip, not a no."""
    coin_flip, sure_no = {"yes": 0.2, "no": 0.2}, {"yes": 0.1, "no": 0.9}
    backend.score_with(lambda r: coin_flip if _memory_number(r) == 2 else sure_no)
    selector, _ = _selector(backend)
    fused = selector.score(QUESTION, _candidates(3))
    assert [f.probability for f in fused] == pytest.approx([0.1, 0.5, 0.1])


def test_threshold_gives_an_adaptive_k(backend: ScriptedBackend) -> None:
    """An easy question (one memory the model is sure of) delivers one; a broad one more;
    never fewer than ``min_keep``, never more than ``k``."""
    selector, _ = _selector(backend, weight=0.5, threshold=0.6)
    backend.score_with(_scores(lambda i: 0.95 if i == 3 else 0.02))
    assert _kept(selector.select([QUESTION], _candidates(10), k=5).kept) == [3]
    backend.score_with(_scores(lambda i: 0.95 if i in (1, 3, 4, 7) else 0.02))
    assert _kept(selector.select([QUESTION], _candidates(10), k=5).kept) == [1, 3, 4, 7]
    backend.score_with(_scores(lambda i: 0.95))
    assert len(selector.select([QUESTION], _candidates(10), k=5).kept) == 5
    backend.score_with(_scores(lambda i: 0.0))  # nothing relevant: min_keep, the first-stage top
    assert _kept(selector.select([QUESTION], _candidates(10), k=5).kept) == [1]
    none_kept, _ = _selector(backend, weight=0.5, threshold=0.6, min_keep=0)
    assert none_kept.select([QUESTION], _candidates(10), k=5).kept == ()


def test_one_scoring_cut_at_several_thresholds(backend: ScriptedBackend) -> None:
    """``select_cuts`` scores once and cuts at each threshold it is given (not the settings'),
    as ``select`` would with that threshold."""
    backend.score_with(_scores(lambda i: 0.95 if i in (3, 4) else 0.02))
    selector, meter = _selector(backend, weight=0.5, threshold=0.0)
    fixed, adaptive = selector.select_cuts([QUESTION], _candidates(10), 5, (0.0, 0.6))
    assert meter.snapshot()[TASK]["ok"] == 10  # each candidate scored once, not once a cut
    assert _kept(adaptive.kept) == [3, 4]
    assert _kept(fixed.kept) == [3, 4, 1, 2, 5]
    assert _kept(fixed.kept) == _kept(selector.select([QUESTION], _candidates(10), 5).kept)
    at_six, _ = _selector(backend, weight=0.5, threshold=0.6)
    assert _kept(at_six.select([QUESTION], _candidates(10), 5).kept) == _kept(adaptive.kept)

    def down(request: ScoreRequest) -> Mapping[str, float]:
        raise SLMUnavailable("relevance", "down")

    backend.score_with(down)
    both = selector.select_cuts([QUESTION], _candidates(10), 5, (0.0, 0.6))
    assert [s.source for s in both] == ["fallback", "fallback"]
    assert _kept(both[0].kept) == [1, 2, 3, 4, 5]
    assert meter.snapshot()[TASK]["fallbacks"] == 1  # one failure, counted once


@pytest.mark.parametrize(("k", "multiplier"), [(1, 2), (3, 2), (5, 2), (10, 2), (4, 3), (5, 4)])
def test_an_inverted_model_cannot_push_out_the_first_stage_top_at_the_safe_weight(
    k: int, multiplier: int, backend: ScriptedBackend
) -> None:
    pool = k * multiplier
    backend.score_with(_scores(lambda i: 0.0 if i == 1 else 1.0))  # exactly wrong
    safe = safe_relevance_weight(pool, k)
    at_bound, _ = _selector(backend, weight=safe)
    assert 1 in _kept(at_bound.select([QUESTION], _candidates(pool), k=k).kept)
    # the bound is tight: a little more weight and the top is gone
    beyond, _ = _selector(backend, weight=min(1.0, safe + 0.05))
    assert 1 not in _kept(beyond.select([QUESTION], _candidates(pool), k=k).kept)


def test_weight_zero_is_rank_fusion(backend: ScriptedBackend) -> None:
    backend.score_with(_scores(lambda i: random.Random(i).random()))
    selector, _ = _selector(backend, weight=0.0)
    assert _kept(selector.select([QUESTION], _candidates(10), k=5).kept) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(
    "failure",
    [SLMUnavailable(TASK, "down"), SLMTimeout(TASK, "slow")],
    ids=["unavailable", "timeout"],
)
def test_a_failed_call_falls_back_to_first_stage_order_and_is_counted(
    failure: Exception, backend: ScriptedBackend
) -> None:

    def fails_on_the_third(request: ScoreRequest) -> Mapping[str, float]:
        if _memory_number(request) == 3:
            raise failure
        return {"yes": 0.9, "no": 0.1}

    backend.score_with(fails_on_the_third)
    selector, meter = _selector(backend)
    candidates = _candidates(6)
    selection = selector.select([QUESTION], candidates, k=4)
    assert selection.source == "fallback"
    assert [c for c, _ in selection.kept] == candidates[:4]
    assert [s for _, s in selection.kept] == [c.fused for c in candidates[:4]]
    stats = meter.snapshot()[TASK]
    assert stats["fallbacks"] == 1
    # one call per candidate up to the failed third; or one batch that failed
    batch = isinstance(backend, BatchScriptedBackend)
    assert (stats["calls"], stats["ok"]) == ((1, 0) if batch else (3, 2))
    assert stats["unavailable" if isinstance(failure, SLMUnavailable) else "timeouts"] == 1


def test_scores_missing_a_choice_are_invalid_and_fall_back(backend: ScriptedBackend) -> None:
    backend.score_with({"yes": 0.4})
    selector, meter = _selector(backend)
    assert selector.select([QUESTION], _candidates(3), k=2).source == "fallback"
    stats = meter.snapshot()[TASK]
    # the first invalid score stops one-by-one calls; a batch's scores are all checked
    invalid = 3 if isinstance(backend, BatchScriptedBackend) else 1
    assert (stats["invalid"], stats["fallbacks"]) == (invalid, 1)


def test_the_time_budget_covers_the_whole_query(backend: ScriptedBackend) -> None:

    def slow(request: ScoreRequest) -> Mapping[str, float]:
        time.sleep(0.05)
        return {"yes": 0.5, "no": 0.5}

    backend.score_with(slow)
    selector, meter = _selector(backend, timeout_s=0.12)
    selection = selector.select([QUESTION], _candidates(20), k=5)
    assert selection.source == "fallback"
    stats = meter.snapshot()[TASK]
    assert stats["fallbacks"] == 1
    if isinstance(backend, BatchScriptedBackend):  # one late batch: every candidate timed out
        assert (backend.batches, stats["timeouts"]) == ([20], 20)
    else:  # it stopped asking once the budget was spent
        assert len(backend.score_requests) < 20


def test_the_meter_counts_prompt_tokens_and_the_fewer_evaluated(backend: ScriptedBackend) -> None:
    """The scripted backend, like llama.cpp, evaluates only what follows the prefix shared with
    the previous call: the question is evaluated once per query."""
    backend.score_with({"yes": 0.5, "no": 0.5})
    selector, meter = _selector(backend)
    selector.select([QUESTION], _candidates(10), k=5)
    stats = meter.snapshot()[TASK]
    assert stats["calls"] == stats["ok"] == 10
    prompt, evaluated = stats["prompt_tokens"], stats["evaluated_tokens"]
    assert isinstance(prompt, int)
    assert isinstance(evaluated, int)
    # the first prompt whole, then only the word that differs (the memory's number)
    assert evaluated == prompt // 10 + 9
    assert stats["completion_tokens"] == 0
    if isinstance(backend, BatchScriptedBackend):
        assert backend.batches == [10]  # the query's candidates in one call


def test_a_backend_that_cannot_score_is_refused_when_built() -> None:
    class GenerateOnly:
        name = "generate-only"
        model = "g"

        def complete(self, request: SLMRequest) -> SLMResponse:
            raise AssertionError("never called")

        def close(self) -> None:
            return None

    with pytest.raises(ConfigError, match="scores tokens"):
        PointwiseSelector(RoleRuntime(GenerateOnly(), Meter()))
    built: list[str] = []

    def generate_only(config: BackendConfig, models_dir: Path, owner: str) -> GenerateOnly:
        built.append(config.kind)
        return GenerateOnly()

    with registered_backend("generate-only", generate_only):
        backend = {"kind": "generate-only", "model": "g"}
        config = merge_overrides(
            TiermemConfig.for_tests(), {"slm": {"backend": backend, "selector_mode": "pointwise"}}
        )
        with pytest.raises(ConfigError, match="'generate-only' does not"):
            Memory(config)
        assert built == []  # the kind's registration says so: nothing was built to find out
        listwise = merge_overrides(config, {"slm": {"selector_mode": "listwise"}})
        Memory(listwise).close()
        assert built == ["generate-only"]


def test_memory_reads_through_the_selector_the_config_names(
    scripted_models: ScriptedModels, slm_backend: ScriptedBackend, tmp_path: Path
) -> None:
    relevant, irrelevant = {"yes": 0.9, "no": 0.1}, {"yes": 0.1, "no": 0.9}
    slm_backend.score_with(lambda r: relevant if "bakery" in r.messages[-1].content else irrelevant)
    listwise = Memory(slm_config(writer={"enabled": False}))
    pointwise = Memory(
        slm_config(writer={"enabled": False}, selector_mode="pointwise", pointwise_weight=1.0)
    )
    try:
        assert isinstance(listwise.components.selector, SLMSelector)
        selector = pointwise.components.selector
        assert isinstance(selector, PointwiseSelector)
        assert selector.settings == PointwiseSettings(1.0, 0.0, 1)
        pointwise.add(chat(*SISTER_AND_DOG), user_id="maya")
        hits = pointwise.search("What does my sister do?", "maya", k=1)
        snapshot = pointwise.components.meter.snapshot()
    finally:
        listwise.close()
        pointwise.close()
    assert "bakery" in hits[0].entry.text
    assert hits[0].explanation.components["relevance"] == pytest.approx(0.9)
    assert "selection=model" in hits[0].explanation.note
    assert snapshot[TASK]["calls"] == 2
    assert slm_backend.calls_for("selector") == []  # the listwise call never ran


def test_lora_path_is_for_the_in_process_backend_only() -> None:
    assert LlamaCppConfig(lora_path=Path("a.gguf")).lora_path == Path("a.gguf")
    for kind in ("ollama", "openai", "none"):
        with pytest.raises(ConfigError, match=f"{kind}.lora_path\n  Extra inputs are not"):
            backend_config(kind=kind, model="m", base_url="u", lora_path=Path("a.gguf"))


# The pure functions under the selector.


def test_rank_prior_falls_from_one_and_stays_positive() -> None:
    priors = [rank_prior(r, 8) for r in range(1, 9)]
    assert priors[0] == 1.0
    assert all(a > b > 0 for a, b in itertools.pairwise(priors))
    with pytest.raises(ValueError, match="not in a pool"):
        rank_prior(9, 8)


def test_fusion_moves_a_score_at_most_the_weight_from_its_prior() -> None:
    rng = random.Random(7)
    probabilities = [rng.random() for _ in range(12)]
    for weight in (0.0, 0.2, 0.5, 1.0):
        fused = fuse_relevance(probabilities, weight, explain=True)
        assert [f.score for f in fused] == fuse_relevance(probabilities, weight)
        assert all(abs(f.score - f.prior) <= weight + 1e-12 for f in fused)
        assert "prior(rank 1)" in fused[0].explain()
    with pytest.raises(ValueError, match="not in"):
        fuse_relevance(probabilities, 1.5)


def test_keep_adaptive_breaks_ties_by_first_stage_order() -> None:
    assert keep_adaptive([0.5, 0.7, 0.5, 0.7], k=3, threshold=0.0) == [1, 3, 0]
    assert keep_adaptive([0.1, 0.2], k=5, threshold=0.9, min_keep=3) == [1, 0]


def _f(scores: Sequence[float], labels: Sequence[bool], threshold: float, beta: float) -> float:
    kept = [label for s, label in zip(scores, labels, strict=True) if s >= threshold]
    tp = sum(kept)
    if tp == 0:
        return 0.0
    precision, recall = tp / len(kept), tp / sum(labels)
    return (1 + beta**2) * precision * recall / (beta**2 * precision + recall)


@pytest.mark.parametrize("beta", [0.5, 1.0, 2.0])
def test_calibration_finds_the_best_threshold_that_brute_force_finds(beta: float) -> None:
    rng = random.Random(int(beta * 10))
    for _ in range(20):
        labels = [rng.random() < 0.3 for _ in range(40)]
        labels[0] = True
        scores = [round(rng.random() * 0.6 + (0.3 if y else 0.0), 2) for y in labels]
        choice = calibrate_threshold(scores, labels, beta=beta)
        best = max(_f(scores, labels, s, beta) for s in scores)
        assert choice.f_score == pytest.approx(best)
        assert _f(scores, labels, choice.threshold, beta) == pytest.approx(best)
        assert choice.kept == sum(s >= choice.threshold for s in scores)


def test_calibration_to_a_recall_target_keeps_as_few_as_reach_it() -> None:
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    labels = [True, False, True, False, False, True]
    choice = calibrate_threshold(scores, labels, min_recall=0.6)
    assert (choice.kept, round(choice.recall, 3)) == (3, 0.667)
    assert 0.6 < choice.threshold < 0.7
    assert calibrate_threshold(scores, labels, min_recall=1.0).kept == 6
    with pytest.raises(ValueError, match="no relevant"):
        calibrate_threshold(scores, [False] * 6)
    with pytest.raises(ValueError, match="non-empty"):
        calibrate_threshold([], [])


def test_yes_probability_is_stable_at_the_extremes() -> None:
    from tiermem.slm.scoring import yes_probability

    assert yes_probability({"yes": -1000.0, "no": 0.0}) == 0.0
    assert yes_probability({"yes": 0.0, "no": -1000.0}) == 1.0
    assert yes_probability({"yes": -math.inf, "no": -math.inf}) == 0.5
