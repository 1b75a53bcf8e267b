"""The whole online path on a real GGUF model: in-process, through the Ollama protocol, and
through an OpenAI-compatible endpoint (``python -m llama_cpp.server``). CI runs these with
SmolLM2-135M, which follows the output format but not the tasks: the assertions are about the
engine (every call schema-valid or counted as a fallback, nothing lost), not about answers."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import (
    BackendConfig,
    GeneratorConfig,
    LlamaCppConfig,
    OllamaConfig,
    OpenAIConfig,
    QdrantConfig,
    SLMConfig,
)
from tiermem.slm.base import ScoreRequest
from tiermem.slm.llamacpp import LlamaCppBackend
from tiermem.slm.models import resolve_model
from tiermem.slm.openai_backend import OpenAIBackend
from tiermem.slm.prompts.relevance import RelevanceInput, build_messages

from tests.conftest import T0, chat
from tests.fakes.ollama_server import serving

pytestmark = pytest.mark.real_model

EXCHANGE = chat(
    ("user", "Hi! I'm Maya."),
    ("user", "I booked flight TP1351 to Lisbon for 9 October."),
    ("assistant", "Great, TP1351 on 9 October."),
    ("user", "My sister Ines runs a bakery in Lisbon."),
    speaker="Maya",
)


def _config(backend: BackendConfig) -> TiermemConfig:
    base = TiermemConfig.for_tests()
    return base.model_copy(
        update={
            "slm": SLMConfig(backend=backend, selector_mode="listwise"),  # every role calls
            "generator": GeneratorConfig(kind="model"),
            "mtm": QdrantConfig(location="memory"),
        }
    )


def _run_online_path(config: TiermemConfig) -> dict[str, dict[str, object]]:
    with Memory(config, clock=ManualClock(T0)) as memory:
        added = memory.add(EXCHANGE, user_id="maya", session_id="s1")
        assert added.entries, "the writer (or its verbatim fallback) stored something"
        result = memory.answer("When is my flight to Lisbon?", "maya", session_id="s1")
        assert result.hits, "the selector keeps at least min_keep candidates"
        assert result.text.strip()
        turns = {t for h in result.hits for t in h.entry.source_turn_ids}
        # provenance resolves back to real turns: every hit's, plus the neighbours delivered
        assert turns <= set(result.source_turns)
        assert all(t.user_id == "maya" for t in result.source_turns.values())
        snapshot = memory.components.meter.snapshot()
    for task in ("writer", "controller", "selector", "generator"):
        stats = snapshot[task]
        assert stats["calls"] == (
            stats["ok"]
            + stats["invalid"]
            + stats["timeouts"]  # type: ignore[operator]
            + stats["unavailable"]
        )
        assert stats["calls"] >= 1
        failed = stats["calls"] - stats["ok"]  # type: ignore[operator]
        assert stats["fallbacks"] >= failed  # every failed call was caught by a fallback
    return snapshot


def test_online_path_in_process() -> None:
    snapshot = _run_online_path(_config(LlamaCppConfig(model="smollm2")))
    answered = [s for s in snapshot.values() if s["ok"]]  # type: ignore[operator]
    assert answered, "at least one role got a valid output from the real model"
    assert all(s["prompt_tokens"] > 0 for s in answered)  # type: ignore[operator]


def test_online_path_through_the_ollama_protocol() -> None:
    local = LlamaCppBackend(resolve_model("smollm2"))
    with serving(local, "smollm2:135m") as server:
        _run_online_path(_config(OllamaConfig(model="smollm2:135m", host=server.url)))
        assert len(server.requests) >= 4


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def llama_server() -> Iterator[str]:
    """``python -m llama_cpp.server`` on loopback, serving SmolLM2."""
    port = _free_port()
    model = Path(resolve_model("smollm2"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--model_alias",
            "smollm2",
            "--n_ctx",
            "4096",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise RuntimeError("llama_cpp.server did not start within 120 s")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_online_path_through_an_openai_compatible_endpoint(llama_server: str) -> None:
    _run_online_path(
        _config(
            OpenAIConfig(
                model="smollm2",
                base_url=llama_server,
                response_format="json_object_schema",
            )
        )
    )


def test_next_token_scores_through_an_openai_compatible_endpoint(llama_server: str) -> None:
    """``logprobs``/``top_logprobs`` through ``python -m llama_cpp.server``: both answers are
    among its top 20 for a yes/no prompt, so neither needs the floor."""
    backend = OpenAIBackend("smollm2", base_url=llama_server, api_key=None)
    question = "When is my flight to Lisbon?"
    memory = "[2 March 2026] I booked flight TP1351 to Lisbon for 9 October."
    request = ScoreRequest("relevance", build_messages(RelevanceInput(question, memory)))
    scores = backend.score_next_token(request)
    assert set(scores.logprobs) == {"yes", "no"}
    assert scores.floored == ()
    assert all(lp <= 0 for lp in scores.logprobs.values())
    assert 0 < scores.evaluated_tokens <= scores.prompt_tokens
