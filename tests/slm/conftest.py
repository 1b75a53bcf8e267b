"""A memory whose roles all run on the scripted backend: registered as backend kind
``scripted`` for the test, built by the real registry and pool, scripted by model name."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from tiermem import ManualClock, Memory, TiermemConfig
from tiermem.config import BackendConfig, GeneratorConfig, QdrantConfig, SLMConfig
from tiermem.slm.base import SLMRequest
from tiermem.slm.scripted import ScriptedBackend

from tests.fakes.scripted import KIND, ScriptedModels

MODEL = "scripted"  # the model name the online roles call
# Two turns, one of them the answer to "What does my sister do?"
SISTER_AND_DOG = (
    ("user", "My dog Miso hates thunderstorms."),
    ("user", "My sister Ines runs a bakery in Lisbon."),
)

Handler = Callable[[SLMRequest], dict[str, Any] | str]


def slm_config(capacity: int = 10_000, **slm: Any) -> TiermemConfig:
    """Every role on the scripted model; the selector listwise unless ``selector_mode`` says."""
    slm.setdefault("selector_mode", "listwise")
    base = TiermemConfig.for_tests()
    return base.model_copy(
        update={
            "slm": SLMConfig(backend=BackendConfig(kind=KIND, model=MODEL), **slm),
            "generator": GeneratorConfig(kind="model"),
            "mtm": QdrantConfig(location="memory", capacity=capacity),
        }
    )


class Script:
    """Answers each task with its own handler or queue, and keeps every request."""

    def __init__(self) -> None:
        self.handlers: dict[str, Handler] = {}
        self.queues: dict[str, list[dict[str, Any] | str | BaseException]] = {}

    def on(self, task: str, handler: Handler) -> None:
        self.handlers[task] = handler

    def queue(self, task: str, *outputs: dict[str, Any] | str | BaseException) -> None:
        self.queues.setdefault(task, []).extend(outputs)

    def __call__(self, request: SLMRequest) -> dict[str, Any] | str:
        queue = self.queues.get(request.task)
        if queue:
            item = queue.pop(0)
            if isinstance(item, BaseException):
                raise item
            return item
        if request.task in self.handlers:
            return self.handlers[request.task](request)
        return DEFAULTS[request.task](request)


def question(request: SLMRequest) -> str:
    return user_prompt(request).rsplit("Question: ", 1)[-1].strip()


def plan(
    *queries: str, since: str = "", until: str = "", kinds: tuple[str, ...] = ()
) -> dict[str, Any]:
    return {
        "queries": [{"text": q, "route": "mtm", "weight": 1} for q in queries],
        "since": since,
        "until": until,
        "kinds": list(kinds),
    }


DEFAULTS: dict[str, Handler] = {
    "controller": lambda r: plan(question(r)),
    "selector": lambda r: {"supporting": [1]},
    "writer": lambda r: {"entries": []},
    "generator": lambda r: {"answer": "scripted answer"},
}


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def slm_backend(scripted_models: ScriptedModels, script: Script) -> ScriptedBackend:
    """The model the roles of ``make_slm_memory`` call: it answers with ``script`` and keeps
    every request."""
    return scripted_models.serve(MODEL, script)


@pytest.fixture
def make_slm_memory(
    slm_backend: ScriptedBackend, clock: ManualClock
) -> Iterator[Callable[..., Memory]]:
    opened: list[Memory] = []

    def make(capacity: int = 10_000, **slm: Any) -> Memory:
        memory = Memory(slm_config(capacity, **slm), clock=clock)
        opened.append(memory)
        return memory

    yield make
    for memory in opened:
        memory.close()


def entry(
    text: str, *turns: int, kind: str = "fact", date: str = "", replaces: int = 0
) -> dict[str, Any]:
    return {"text": text, "kind": kind, "turns": list(turns), "date": date, "replaces": replaces}


def numbered(request: SLMRequest, section: str) -> list[str]:
    """The numbered lines of one section of a prompt ("Turns:", "Existing memories:")."""
    block = user_prompt(request).split(section, 1)[1].split("\n\n", 1)[0]
    return [line for line in block.splitlines() if line.startswith("[")]


def user_prompt(request: SLMRequest) -> str:
    return request.messages[-1].content


def as_json(text: str) -> Any:
    return json.loads(text)
