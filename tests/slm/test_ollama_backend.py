"""The ollama backend through the official client, over real HTTP, against the
Ollama-protocol test server."""

from __future__ import annotations

import ollama
import pytest
from tiermem import ManualClock, Memory
from tiermem.config import GeneratorConfig, OllamaConfig, QdrantConfig, SLMConfig
from tiermem.errors import SLMTimeout, SLMUnavailable
from tiermem.slm.base import ChatMessage, SLMRequest
from tiermem.slm.ollama_backend import OllamaBackend
from tiermem.slm.scripted import ScriptedBackend

from tests.conftest import T0, chat, config_for
from tests.fakes.ollama_server import as_role_request, serving
from tests.slm.conftest import Script, entry, plan

TAG = "llama3.2:1b-instruct-q4_K_M"


def _request(timeout_s: float = 10.0) -> SLMRequest:
    return SLMRequest(
        "probe",
        [ChatMessage("user", "hi")],
        {"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}}},
        max_tokens=33,
        temperature=0.0,
        timeout_s=timeout_s,
    )


def test_chat_sends_schema_options_keep_alive_and_reads_usage() -> None:
    with serving(ScriptedBackend([{"a": "ok"}]), TAG) as server:
        backend = OllamaBackend(TAG, host=server.url, keep_alive="5m")
        response = backend.complete(_request())
        sent = server.requests[-1]
    assert response.text == '{"a": "ok"}'
    assert response.prompt_tokens == 1
    assert response.completion_tokens == 2
    assert sent["format"]["properties"]["a"]["maxLength"] == 5
    assert sent["options"]["num_predict"] == 33
    assert sent["keep_alive"] == "5m"
    assert sent["stream"] is False


def test_tags_lists_the_served_model() -> None:
    with serving(ScriptedBackend(), TAG) as server:
        names = [m.model for m in ollama.Client(host=server.url).list().models]
    assert names == [TAG]


def test_unknown_model_and_dead_server_are_unavailable() -> None:
    with serving(ScriptedBackend(), TAG) as server:
        with pytest.raises(SLMUnavailable, match="not found"):
            OllamaBackend("no-such-model", host=server.url).complete(_request())
        url = server.url
    with pytest.raises(SLMUnavailable):
        OllamaBackend(TAG, host=url, timeout_s=2).complete(_request())


def test_slow_server_times_out() -> None:
    with (
        serving(ScriptedBackend([{"a": "late"}]), TAG, delay_s=1.5) as server,
        pytest.raises(SLMTimeout),
    ):
        OllamaBackend(TAG, host=server.url, timeout_s=0.5).complete(_request())


def test_whole_online_path_over_the_ollama_protocol(tmp_path: object) -> None:
    script = Script()
    script.queue(
        "writer",
        {
            "entries": [
                entry(
                    "Maya flies TP1351 to Lisbon on 9 October.", 1, kind="plan", date="2026-10-09"
                )
            ]
        },
    )
    script.queue("controller", plan("TP1351 flight Lisbon"))
    script.queue("selector", {"supporting": [1]})
    script.queue("generator", {"answer": "On 9 October."})

    def by_task(request: SLMRequest) -> object:
        return script(as_role_request(request))

    with serving(ScriptedBackend(default=by_task), TAG) as server:  # type: ignore[arg-type]
        base = config_for("memory", tmp_path)  # type: ignore[arg-type]
        config = base.model_copy(
            update={
                "slm": SLMConfig(
                    backend=OllamaConfig(model=TAG, host=server.url), selector_mode="listwise"
                ),
                "generator": GeneratorConfig(kind="model"),
                "mtm": QdrantConfig(location="memory"),
            }
        )
        with Memory(config, clock=ManualClock(T0)) as memory:
            memory.add(
                chat(("user", "My flight TP1351 to Lisbon is on 9 October.")), user_id="maya"
            )
            result = memory.answer("When do I fly?", "maya")
            totals = memory.components.meter.totals()
        paths = [r["path"] for r in server.requests]
    assert result.text == "On 9 October."
    assert "TP1351" in result.hits[0].entry.text
    assert paths == ["/api/chat"] * 4  # writer, controller, selector, generator
    assert (totals["calls"], totals["ok"], totals["fallbacks"]) == (4, 4, 0)
