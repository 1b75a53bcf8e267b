"""The in-process model cache without a model: a fake ``Llama`` stands in for llama.cpp, so
the real backend, registry and consolidation wiring run around it.

Each owner of a model (the online roles, the offline consolidation) gets its own context, with
its own lock and its own thread count: ``add()`` never waits behind a consolidation call.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import llama_cpp
import pytest
from tiermem import ManualClock, Memory
from tiermem.config import BackendConfig, LlamaCppConfig, RoleConfig, SLMConfig
from tiermem.errors import ConfigError
from tiermem.slm import llamacpp
from tiermem.slm.base import ChatMessage, SLMRequest
from tiermem.slm.registry import build_backend

from tests.conftest import chat
from tests.offline.conftest import ltm_config

WAIT_S = 5.0  # an upper bound on waiting for a thread, never a measured time


class FakeLlama:
    """Records how it was built and which task it served; a consolidation call blocks until
    ``release`` is set, standing in for a long run."""

    built: ClassVar[list[FakeLlama]] = []
    entered: ClassVar[threading.Event] = threading.Event()
    release: ClassVar[threading.Event] = threading.Event()

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.tasks: list[str] = []
        self.n_tokens = 0
        FakeLlama.built.append(self)

    def reset(self) -> None:
        self.n_tokens = 0

    def create_chat_completion(self, messages: list[dict[str, str]], **_: Any) -> Iterator[Any]:
        prompt = messages[-1]["content"]
        task = "consolidator" if "Memories:\n" in prompt else "writer"
        self.tasks.append(task)
        if task == "consolidator":
            FakeLlama.entered.set()
            assert FakeLlama.release.wait(WAIT_S * 2)
        answer = '{"nodes": [], "edges": []}' if task == "consolidator" else '{"entries": []}'
        self.n_tokens = 20
        yield {"choices": [{"delta": {"content": answer}, "finish_reason": None}]}
        yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}


@pytest.fixture
def gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A model file that the fake loads: the real loader runs, llama.cpp does not."""
    path = tmp_path / "tiny.gguf"
    path.write_bytes(b"GGUF")
    FakeLlama.built = []
    FakeLlama.entered = threading.Event()
    FakeLlama.release = threading.Event()
    monkeypatch.setattr(llama_cpp, "Llama", FakeLlama)
    monkeypatch.setattr(llamacpp, "check_build", lambda **_: None)
    monkeypatch.setattr(llamacpp, "_MODELS", {})
    monkeypatch.setattr(llamacpp, "grammar_for", lambda schema: None)
    yield path
    FakeLlama.release.set()


def _memory(
    tmp_path: Path, clock: ManualClock, online: BackendConfig, offline: BackendConfig
) -> Memory:
    config = ltm_config(tmp_path, backend=offline)
    off = RoleConfig(enabled=False)
    slm = SLMConfig(backend=online, controller=off, selector=off)
    return Memory(config.model_copy(update={"slm": slm}), clock=clock)


def test_add_does_not_wait_behind_a_consolidation_call_on_the_same_model(
    tmp_path: Path, clock: ManualClock, gguf: Path
) -> None:
    online = LlamaCppConfig(model=str(gguf), n_threads=2)
    offline = LlamaCppConfig(model=str(gguf), n_threads=1)
    with _memory(tmp_path, clock, online, offline) as memory:
        memory.add(chat(("user", "I bake sourdough bread every Sunday.")), "ana")
        run = threading.Thread(target=memory.consolidate_now)
        add = threading.Thread(
            target=memory.add, args=(chat(("user", "My oven broke.")), "ana", "s2")
        )
        run.start()
        try:
            assert FakeLlama.entered.wait(WAIT_S)  # a consolidation call is in flight
            add.start()
            add.join(WAIT_S)
            assert not add.is_alive(), "add() waited behind the consolidation call"
        finally:
            FakeLlama.release.set()
            run.join(WAIT_S * 2)
            if add.ident is not None:
                add.join(WAIT_S * 2)
    by_threads = {llama.kwargs["n_threads"]: llama.tasks for llama in FakeLlama.built}
    assert by_threads == {2: ["writer", "writer"], 1: ["consolidator"]}


def test_each_owner_has_its_own_context_even_with_one_configuration(
    tmp_path: Path, clock: ManualClock, gguf: Path
) -> None:
    same = LlamaCppConfig(model=str(gguf), n_threads=3)
    FakeLlama.release.set()
    with _memory(tmp_path, clock, same, same) as memory:
        memory.add(chat(("user", "I bake sourdough bread every Sunday.")), "ana")
        memory.consolidate_now()
        memory.add(chat(("user", "My oven broke.")), "ana", "s2")
    assert [(llama.kwargs["n_threads"], llama.tasks) for llama in FakeLlama.built] == [
        (3, ["writer", "writer"]),
        (3, ["consolidator"]),
    ]
    assert {llama.kwargs["model_path"] for llama in FakeLlama.built} == {str(gguf)}


def test_one_owner_loads_a_model_once_and_keeps_each_thread_count(gguf: Path) -> None:
    """Two memories in one process share the online context; a different thread count is a
    different context, not a silently ignored setting."""
    request = SLMRequest("writer", [ChatMessage("user", "Turns:")], {}, 64)
    for threads in (2, 2, 4):
        assert llamacpp.LlamaCppBackend(gguf, n_threads=threads).complete(request).text
    assert [(llama.kwargs["n_threads"], llama.tasks) for llama in FakeLlama.built] == [
        (2, ["writer", "writer"]),
        (4, ["writer"]),
    ]


def test_a_lora_adapter_is_its_own_context_and_a_missing_one_is_named(
    tmp_path: Path, gguf: Path
) -> None:
    """The registry hands the config's adapter to llama.cpp; the base and the tuned model are
    two contexts, so serving one never changes the other's answers."""
    adapter = tmp_path / "selector-lora.gguf"
    adapter.write_bytes(b"GGUF")
    request = SLMRequest("writer", [ChatMessage("user", "Turns:")], {}, 64)
    plain = LlamaCppConfig(model=str(gguf))
    tuned = plain.model_copy(update={"lora_path": adapter, "lora_scale": 0.5})
    for config in (plain, tuned, tuned):
        backend = build_backend(config, tmp_path)
        assert backend.complete(request).text
    assert backend.model == f"{gguf.name}+{adapter.name}"
    assert [(b.kwargs["lora_path"], b.kwargs["lora_scale"]) for b in FakeLlama.built] == [
        (None, 1.0),
        (str(adapter), 0.5),
    ]
    missing = plain.model_copy(update={"lora_path": tmp_path / "none.gguf"})
    with pytest.raises(ConfigError, match=r"LoRA adapter file .*none\.gguf does not exist"):
        build_backend(missing, tmp_path).complete(request)


def test_a_lora_path_under_home_is_expanded(
    tmp_path: Path, gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``lora_path = "~/..."`` in a TOML file names the adapter under the user's home."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "adapter.gguf").write_bytes(b"GGUF")
    config = LlamaCppConfig(model=str(gguf), lora_path=Path("~/adapter.gguf"))
    request = SLMRequest("writer", [ChatMessage("user", "Turns:")], {}, 64)
    assert build_backend(config, tmp_path).complete(request).text
    assert FakeLlama.built[-1].kwargs["lora_path"] == str(tmp_path / "adapter.gguf")
