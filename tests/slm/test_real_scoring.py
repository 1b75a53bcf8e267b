"""Next-token scoring on a real GGUF model in-process (SmolLM2-135M in CI): the scores are
probabilities, a query's shared prompt is evaluated once, reusing it changes no score, and the
pointwise selector runs the read path. SmolLM2 does not judge relevance well; the assertions
are about the engine, not the model's judgement."""

from __future__ import annotations

import math

import pytest
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import BackendConfig, MTMConfig, SLMConfig
from tiermem.slm.base import ScoreRequest, TokenScores
from tiermem.slm.llamacpp import LlamaCppBackend
from tiermem.slm.models import resolve_model
from tiermem.slm.prompts.relevance import RelevanceInput, build_messages
from tiermem.slm.roles.pointwise import TASK

from tests.conftest import T0, chat

pytestmark = pytest.mark.real_model

QUESTION = "When did Caroline go to the LGBTQ support group?"
MEMORIES = [
    "[8 May 2023] Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "[8 May 2023] Melanie: I painted a sunrise last year, it was lovely.",
    "[25 May 2023] Melanie: We went camping with the kids at the beach.",
    "[9 June 2023] Caroline: I'm looking into adoption agencies for LGBTQ parents.",
    "[20 June 2023] Melanie: My son ran his first 5k race on Saturday!",
    "[3 July 2023] Caroline: The counselling course starts next month.",
    "[14 July 2023] Melanie: We adopted a puppy called Oscar.",
    "[2 August 2023] Caroline: I gave a talk at a school about being transgender.",
]


def _request(memory: str) -> ScoreRequest:
    return ScoreRequest(TASK, build_messages(RelevanceInput(QUESTION, memory)))


def _assert_probabilities(scores: TokenScores) -> None:
    assert set(scores.logprobs) == {"yes", "no"}
    assert all(math.isfinite(lp) and lp <= 0 for lp in scores.logprobs.values())
    assert sum(math.exp(lp) for lp in scores.logprobs.values()) <= 1 + 1e-6
    assert scores.floored == ()  # llama.cpp sees the whole distribution


def test_a_querys_shared_prompt_is_evaluated_once_and_reusing_it_changes_no_score() -> None:
    path = resolve_model("smollm2")
    backend = LlamaCppBackend(path, n_ctx=1536)  # a context of its own: nothing cached yet
    scored = [backend.score_next_token(_request(m)) for m in MEMORIES]
    for scores in scored:
        _assert_probabilities(scores)
    first, rest = scored[0], scored[1:]
    assert first.evaluated_tokens == first.prompt_tokens
    # each later candidate runs only its memory and the turn's end, not the question again
    assert max(s.evaluated_tokens for s in rest) < first.evaluated_tokens / 3
    assert all(s.prompt_tokens > 3 * s.evaluated_tokens for s in rest)
    # a fresh context evaluates the whole prompt and gets the same answer
    fresh = LlamaCppBackend(path, n_ctx=1600).score_next_token(_request(MEMORIES[-1]))
    assert fresh.evaluated_tokens == fresh.prompt_tokens == scored[-1].prompt_tokens
    for choice in ("yes", "no"):
        assert math.exp(fresh.logprobs[choice]) == pytest.approx(
            math.exp(scored[-1].logprobs[choice]), abs=0.01
        )


def test_the_read_path_with_the_pointwise_selector() -> None:
    config = TiermemConfig.for_tests().model_copy(
        update={
            "slm": SLMConfig(
                backend=BackendConfig(kind="llamacpp", model="smollm2"),
                writer={"enabled": False},  # type: ignore[arg-type]
                selector_mode="pointwise",
            ),
            "mtm": MTMConfig(location="memory"),
        }
    )
    turns = [("user", m.split(": ", 1)[1]) for m in MEMORIES]
    with Memory(config, clock=ManualClock(T0)) as memory:
        memory.add(chat(*turns), user_id="caroline")
        hits = memory.search(QUESTION, "caroline", k=3)
        stats = memory.components.meter.snapshot()[TASK]
    assert 1 <= len(hits) <= 3
    assert all(0 <= h.explanation.components["relevance"] <= 1 for h in hits)
    assert stats["calls"] == stats["ok"] >= 2  # type: ignore[operator]
    assert stats["fallbacks"] == 0
    assert stats["evaluated_tokens"] < stats["prompt_tokens"]  # type: ignore[operator]
