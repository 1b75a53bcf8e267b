"""Shared fixtures. Every memory here runs the real code path with the deterministic hash
embedder and an in-process Qdrant (or the reference store), no model, no server."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import JournalConfig, MTMConfig
from tiermem.slm.registry import registered_backend

from tests.fakes.scripted import KIND, ScriptedModels

# Real-model tests run in a child process each: a model that dies with SIGILL fails one test.
pytest_plugins = ["pytester", "tests.isolation"]

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

MemoryFactory = Callable[..., Memory]


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def scripted_models() -> Iterator[ScriptedModels]:
    """Backend kind ``scripted``, registered for this test only: a config naming it gets the
    fake of its model name, which the test scripts by that name."""
    models = ScriptedModels()
    with registered_backend(KIND, models.build):
        yield models


def config_for(location: str, tmp_path: Path) -> TiermemConfig:
    """A test config whose MTM is Qdrant in memory, Qdrant on disk, or the reference store."""
    base = TiermemConfig.for_tests()
    if location == "path":
        return base.model_copy(
            update={
                "mtm": MTMConfig(location="path", path=tmp_path / "qdrant"),
                "journal": JournalConfig(path=tmp_path / "journal.sqlite3"),
                "data_dir": tmp_path,
            }
        )
    return base.model_copy(update={"mtm": MTMConfig(location=location)})  # type: ignore[arg-type]


@pytest.fixture
def make_memory(tmp_path: Path, clock: ManualClock) -> Iterator[MemoryFactory]:
    opened: list[Memory] = []

    def make(location: str = "memory", **kwargs: object) -> Memory:
        memory = Memory(config_for(location, tmp_path), clock=clock, **kwargs)  # type: ignore[arg-type]
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


@pytest.fixture(params=["memory", "reference"])
def memory(request: pytest.FixtureRequest, make_memory: MemoryFactory) -> Memory:
    """A fresh memory on Qdrant (in memory) and, in a second run, on the reference store."""
    return make_memory(request.param)


def chat(
    *pairs: tuple[str, str], start: datetime = T0, speaker: str = "Ana"
) -> list[dict[str, object]]:
    """Messages a minute apart; user turns spoken by ``speaker``."""
    return [
        {
            "role": role,
            "content": content,
            "speaker": speaker if role == "user" else "Assistant",
            "timestamp": start + timedelta(minutes=i),
        }
        for i, (role, content) in enumerate(pairs)
    ]
