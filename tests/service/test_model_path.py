"""The service's model path: ``tiermem serve`` with its roles on the Ollama protocol (the test
server that plays Ollama), answered through ``RemoteMemory``, metered in ``/metrics``; and a
graceful shutdown that lets a slow write in flight finish and be acknowledged."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tiermem.remote import RemoteMemory
from tiermem.service.launch import ServerProcess
from tiermem.slm.base import SLMRequest
from tiermem.slm.scripted import ScriptedBackend
from tiermem.types import AddResult

from tests.fakes.ollama_server import OllamaProtocolServer, as_role_request, serving
from tests.service.conftest import Keys, make_keys, write_config
from tests.slm.conftest import Script, entry

TAG = "llama3.2:1b-instruct-q4_K_M"
MODEL_TOML = """
[slm]
selector_mode = "listwise"
[slm.backend]
kind = "ollama"
model = "{tag}"
host = "{url}"
[generator]
kind = "model"
"""


def _script() -> Script:
    script = Script()
    script.on("writer", lambda r: {"entries": [entry("Maya flies TP1351 to Lisbon.", 1)]})
    script.on("generator", lambda r: {"answer": "On 9 October."})
    return script


@pytest.fixture
def ollama() -> Iterator[OllamaProtocolServer]:
    script = _script()

    def answer(request: SLMRequest) -> object:
        return script(as_role_request(request))

    with serving(ScriptedBackend(default=answer), TAG, delay_s=0.6) as server:  # type: ignore[arg-type]
        yield server


def _server(root: Path, ollama: OllamaProtocolServer) -> tuple[ServerProcess, Keys]:
    keys = make_keys(root)
    config = write_config(root, MODEL_TOML.format(tag=TAG, url=ollama.url))
    return ServerProcess(config, keys.path, log_file=root / "serve.log"), keys


def _metric(text: str, name: str, role: str) -> float:
    found = re.search(rf'^{name}{{role="{role}"}} (\S+)$', text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_the_roles_run_on_the_ollama_protocol_and_are_metered(
    tmp_path: Path, ollama: OllamaProtocolServer
) -> None:
    server, keys = _server(tmp_path, ollama)
    key = keys.acme
    server.start()
    try:
        with RemoteMemory(server.url, key) as memory:
            added = memory.add("My flight TP1351 to Lisbon is on 9 October.", user_id="maya")
            answer = memory.answer("When is my flight?", "maya")
        admin = {"Authorization": f"Bearer {keys.admin}"}
        metrics = httpx.get(f"{server.url}/metrics", headers=admin, timeout=10).text
    finally:
        server.stop()
    assert "Maya flies TP1351 to Lisbon." in [e.text for e in added.entries]
    assert answer.text == "On 9 October."
    assert any("TP1351" in h.text for h in answer.hits)
    paths = [r["path"] for r in ollama.requests]
    assert paths == ["/api/chat"] * 4  # writer, controller, selector, generator
    for role in ("writer", "controller", "selector", "generator"):
        assert _metric(metrics, "tiermem_slm_calls_total", role) == 1, role
        assert _metric(metrics, "tiermem_slm_fallbacks_total", role) == 0, role
    assert 'tiermem_slm_tokens_total{kind="prompt",role="writer"}' in metrics


def test_sigterm_lets_a_write_in_flight_finish_and_keeps_it(
    tmp_path: Path, ollama: OllamaProtocolServer
) -> None:
    """The writer's model call takes 0.6 s; SIGTERM arrives during it. The add is still
    answered (acknowledged), the server exits, and the restarted one has the write."""
    server, keys = _server(tmp_path, ollama)
    key = keys.acme
    server.start()
    outcome: list[AddResult | BaseException] = []

    def write() -> None:
        with RemoteMemory(server.url, key) as memory:
            try:
                outcome.append(memory.add("My flight TP1351 leaves at dawn.", user_id="maya"))
            except BaseException as exc:  # noqa: BLE001 - the assertion below names it
                outcome.append(exc)

    writer = threading.Thread(target=write)
    writer.start()
    deadline = len(ollama.requests)
    while len(ollama.requests) == deadline:  # the writer's call reached the model
        threading.Event().wait(0.02)
    server.stop()
    writer.join(30)
    (result,) = outcome
    assert isinstance(result, AddResult), result
    assert server.process is not None
    assert server.process.poll() is not None  # it exited
    server.start()
    try:
        with RemoteMemory(server.url, key) as memory:
            stored = {e.id for e in memory.get_all("maya")}
    finally:
        server.stop()
    assert {e.id for e in result.entries} <= stored
    assert result.entries
