"""The answer generator on a model. Fallback (counted): the extractive answer.

Generators, by ``generator.kind``, are a ``tiermem.registry.Registry`` (``GENERATORS``): a kind
that ``CALLS_MODEL`` gets a role runtime; without one (no model configured) the extractive
answer stands in, whatever the kind.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tiermem.context import DeliveredContext
from tiermem.errors import SLMError
from tiermem.generator import NOTHING_IN_MEMORY, ExtractiveGenerator, Generator
from tiermem.registry import Registry
from tiermem.slm.prompts import generator as prompt
from tiermem.slm.roles.common import Role, RoleRuntime
from tiermem.types import Turn


def generator_input(
    query: str, stm: Sequence[Turn], context: DeliveredContext, stm_turns: int = 4
) -> prompt.GeneratorInput:
    """What the model generator reads: the question, the last ``stm_turns`` turns, the
    delivered context's lines (date headers, then that day's turns) and today's date (the
    last turn's; ``unknown`` without one)."""
    today = stm[-1].timestamp.date().isoformat() if stm else "unknown"
    return prompt.GeneratorInput(
        question=query,
        recent_turns=[f"{t.speaker}: {t.content}" for t in stm[-stm_turns:]],
        memories=context.lines,
        today=today,
    )


class SLMGenerator(Role):
    name = "slm-generator"

    def __init__(self, runtime: RoleRuntime, stm_turns: int = 4) -> None:
        super().__init__(runtime)
        self._stm_turns = stm_turns

    def generate(self, query: str, stm: Sequence[Turn], context: DeliveredContext) -> str:
        if not context.text:  # nothing to ground an answer on: no call, no invention
            return NOTHING_IN_MEMORY
        inp = generator_input(query, stm, context, self._stm_turns)
        try:
            output = self._rt.call(prompt.SPEC, prompt.build_messages(inp))
        except SLMError as exc:
            self._rt.fallback(prompt.SPEC.name, exc, "the extractive answer")
            return ExtractiveGenerator().generate(query, stm, context)
        return output.answer.strip()


GeneratorFactory = Callable[[RoleRuntime | None], Generator]
CALLS_MODEL = "calls-model"  # capability: the generator asks a model, given a runtime
GENERATORS: Registry[GeneratorFactory] = Registry("generator")
GENERATORS.register("extractive", lambda runtime: ExtractiveGenerator())
GENERATORS.register(
    "model",
    lambda runtime: SLMGenerator(runtime) if runtime else ExtractiveGenerator(),
    capabilities={CALLS_MODEL},
)
