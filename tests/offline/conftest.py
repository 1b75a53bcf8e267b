"""Memories with LTM on, the consolidation model a ``scripted`` backend: registered for the
test, built by the real registry and pool, scripted by its model name."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import BackendConfig, ConsolidationConfig, LTMConfig
from tiermem.slm.base import SLMRequest
from tiermem.slm.registry import build_backend
from tiermem.slm.scripted import ScriptedBackend

from tests.conftest import config_for
from tests.fakes.scripted import KIND, ScriptedModels

SECRET = SecretStr("5e" * 16)


MODEL = "scripted"  # the consolidation model's name, unless make_ltm_memory names another


def ltm_config(tmp_path: Path, model: str = MODEL, **consolidation: Any) -> TiermemConfig:
    base = config_for("path", tmp_path)
    settings: dict[str, Any] = {
        "backend": BackendConfig(kind=KIND, model=model),
        "interval_minutes": 0.0,
        **consolidation,
    }
    return base.model_copy(
        update={
            "ltm": LTMConfig(
                enabled=True,
                path=tmp_path / "ltm",
                secret=SECRET,
                consolidation=ConsolidationConfig(**settings),
            )
        }
    )


def memories_in(request: SLMRequest) -> list[str]:
    """The de-identified memories the model was shown, in order."""
    block = request.messages[-1].content.split("Memories:\n", 1)[1]
    return [re.sub(r"^\(\d+\) ", "", line) for line in block.splitlines() if line.startswith("(")]


def known_in(request: SLMRequest) -> list[str]:
    block = request.messages[-1].content.split("Known knowledge:\n", 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines() if line.startswith("[")]


def node(
    name: str, text: str = "", *, action: str = "insert", anchor: int = 0, kind: str = "Concept"
) -> dict[str, Any]:
    return {"name": name, "kind": kind, "text": text or name, "action": action, "anchor": anchor}


def edge(source: str, relation: str, target: str, text: str = "") -> dict[str, Any]:
    return {
        "source": source,
        "relation": relation,
        "target": target,
        "text": text,
        "action": "insert",
    }


def units(nodes: list[dict[str, Any]], edges: list[dict[str, Any]] | None = None) -> str:
    return json.dumps({"nodes": nodes, "edges": edges or []})


Handler = Callable[[SLMRequest], Any]


@pytest.fixture
def make_ltm_memory(
    tmp_path: Path, clock: ManualClock, scripted_models: ScriptedModels
) -> Iterator[Callable[..., Memory]]:
    """Each memory calls a consolidation model of its own (a fresh model name), answering
    with ``handler`` when given."""
    opened: list[Memory] = []
    names = (f"consolidator-{i}" for i in itertools.count(1))

    def make(handler: Handler | None = None, **consolidation: Any) -> Memory:
        model = next(names)
        if handler is not None:
            scripted_models.serve(model, handler)
        memory = Memory(ltm_config(tmp_path, model, **consolidation), clock=clock)
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


def scripted(memory: Memory) -> ScriptedBackend:
    """The consolidation model ``memory``'s config names, as the registry hands it out (the
    ``scripted_models`` fixture registers the kind; each model name is one fake)."""
    backend = build_backend(memory.config.ltm.consolidation.backend, Path("."))
    assert isinstance(backend, ScriptedBackend)
    return backend


def one_node_per_memory(request: SLMRequest) -> str:
    """A model that makes one Concept node of each memory's last word."""
    nodes = []
    for m in memories_in(request):
        word = re.sub(r"\W", "", m.split()[-1]).lower() or "thing"
        nodes.append(node(word, m))
    return units(nodes)
