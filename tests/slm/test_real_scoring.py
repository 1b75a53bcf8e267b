"""Next-token scoring on a real GGUF model in-process (SmolLM2-135M in CI): the scores are
probabilities, a query's shared prompt is evaluated once, reusing it changes no score, one
batch scores as one call per candidate does, a LoRA adapter changes the scores in both paths,
and the pointwise selector runs the read path. SmolLM2 does not judge relevance well; the
assertions are about the engine, not the model's judgement."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import LlamaCppConfig, QdrantConfig, SLMConfig
from tiermem.slm.base import ScoreRequest, TokenScores
from tiermem.slm.llamacpp import LlamaCppBackend
from tiermem.slm.models import resolve_model
from tiermem.slm.prompts.relevance import RelevanceInput, build_messages
from tiermem.slm.roles.pointwise import TASK
from tiermem.slm.scoring import yes_probability

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


def _p(scores: TokenScores) -> float:
    return yes_probability(scores.logprobs)


def test_one_batch_scores_as_one_call_per_candidate_does() -> None:
    """40 candidates: two rounds of sequences. The batch's cache cells sit in another order
    than one call's, so the scores agree to rounding, not bit for bit (``llamacpp_batch``)."""
    path = resolve_model("smollm2")
    memories = [f"{m} ({i})" for i in range(5) for m in MEMORIES]
    requests = [_request(m) for m in memories]
    batched = LlamaCppBackend(path, n_ctx=2048).score_next_tokens(requests)
    single = LlamaCppBackend(path, n_ctx=1664)
    one_by_one = [single.score_next_token(r) for r in requests]
    assert len(batched) == len(requests)
    for scores in batched:
        _assert_probabilities(scores)
    assert [b.prompt_tokens for b in batched] == [s.prompt_tokens for s in one_by_one]
    moved = [abs(_p(b) - _p(s)) for b, s in zip(batched, one_by_one, strict=True)]
    assert max(moved) < 0.1  # measured: 0.053 at most, 0.015 on average
    assert sum(moved) / len(moved) < 0.03
    first, rest = batched[0], batched[1:]
    assert first.evaluated_tokens == first.prompt_tokens  # the prefix, counted once
    assert max(s.evaluated_tokens for s in rest) < first.evaluated_tokens / 3
    # the next query's batch reuses the cached system prompt
    puppy = [RelevanceInput("Who adopted a puppy?", m) for m in MEMORIES]
    again = LlamaCppBackend(path, n_ctx=2048).score_next_tokens(
        [ScoreRequest(TASK, build_messages(inp)) for inp in puppy]
    )
    assert again[0].evaluated_tokens < again[0].prompt_tokens / 2


def _random_lora(model: Path, out: Path, scale: float) -> Path:
    """A rank-4 LoRA GGUF on every attention query projection of ``model``, random weights."""
    import gguf

    reader = gguf.GGUFReader(str(model))
    shapes = {t.name: [int(x) for x in t.shape] for t in reader.tensors if len(t.shape) == 2}
    writer = gguf.GGUFWriter(str(out), arch=reader.fields["general.architecture"].contents())
    writer.add_string("general.type", "adapter")
    writer.add_string("adapter.type", "lora")
    writer.add_float32("adapter.lora.alpha", 4.0)
    rng = np.random.default_rng(0)
    for name, (n_in, n_out) in shapes.items():
        if name.endswith("attn_q.weight"):
            base = name.removesuffix(".weight")
            a = rng.standard_normal((4, n_in)) * scale
            b = rng.standard_normal((n_out, 4)) * scale
            writer.add_tensor(f"{base}.weight.lora_a", a.astype(np.float32))
            writer.add_tensor(f"{base}.weight.lora_b", b.astype(np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out


def test_a_lora_adapter_changes_the_scores_in_one_call_and_in_a_batch(tmp_path: Path) -> None:
    path = resolve_model("smollm2")
    adapter = _random_lora(path, tmp_path / "lora.gguf", scale=0.3)
    requests = [_request(m) for m in MEMORIES]
    base = [LlamaCppBackend(path, n_ctx=1024).score_next_token(r) for r in requests]
    tuned_backend = LlamaCppBackend(path, n_ctx=1024, lora_path=adapter)
    tuned = [tuned_backend.score_next_token(r) for r in requests]
    tuned_batch = tuned_backend.score_next_tokens(requests)
    assert tuned_backend.model.endswith("+lora.gguf")
    change = [abs(_p(t) - _p(b)) for t, b in zip(tuned, base, strict=True)]
    noise = [abs(_p(x) - _p(t)) for x, t in zip(tuned_batch, tuned, strict=True)]
    assert min(change) > 0.01  # the adapter changes every score ...
    assert max(noise) < 0.05  # ... and the batch's context applies it too
    assert sum(noise) < sum(change) / 3


def test_the_read_path_with_the_pointwise_selector() -> None:
    config = TiermemConfig.for_tests().model_copy(
        update={
            "slm": SLMConfig(
                backend=LlamaCppConfig(model="smollm2"),
                writer={"enabled": False},  # type: ignore[arg-type]
                selector_mode="pointwise",
            ),
            "mtm": QdrantConfig(location="memory"),
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
