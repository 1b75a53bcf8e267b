"""Memories with LTM on, the consolidation model scripted through the real registry."""

from __future__ import annotations

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
from tiermem.slm.scripted import ScriptedBackend

from tests.conftest import config_for

SECRET = SecretStr("5e" * 16)


def ltm_config(tmp_path: Path, **consolidation: Any) -> TiermemConfig:
    base = config_for("path", tmp_path)
    settings: dict[str, Any] = {
        "backend": BackendConfig(kind="scripted"),
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
def make_ltm_memory(tmp_path: Path, clock: ManualClock) -> Iterator[Callable[..., Memory]]:
    opened: list[Memory] = []

    def make(handler: Handler | None = None, **consolidation: Any) -> Memory:
        config = ltm_config(tmp_path, **consolidation)
        memory = Memory(config, clock=clock)
        if handler is not None:
            scripted(memory).respond_with(handler)
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


def scripted(memory: Memory) -> ScriptedBackend:
    pool = memory.components.pool
    assert pool is not None
    backend = pool.get(memory.config.ltm.consolidation.backend)
    assert isinstance(backend, ScriptedBackend)
    return backend


def one_node_per_memory(request: SLMRequest) -> str:
    """A model that makes one Concept node of each memory's last word."""
    nodes = []
    for m in memories_in(request):
        word = re.sub(r"\W", "", m.split()[-1]).lower() or "thing"
        nodes.append(node(word, m))
    return units(nodes)
