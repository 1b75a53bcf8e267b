"""The answer generator on a model. Fallback (counted): the extractive answer."""

from __future__ import annotations

from collections.abc import Sequence

from tiermem.context import DeliveredContext
from tiermem.errors import SLMError
from tiermem.generator import ExtractiveGenerator
from tiermem.slm.prompts import generator as prompt
from tiermem.slm.roles.common import Role, RoleRuntime
from tiermem.types import Turn


class SLMGenerator(Role):
    name = "slm-generator"

    def __init__(self, runtime: RoleRuntime, stm_turns: int = 4) -> None:
        super().__init__(runtime)
        self._stm_turns = stm_turns

    def generate(self, query: str, stm: Sequence[Turn], context: DeliveredContext) -> str:
        if not context.text:  # nothing to ground an answer on: no call, no invention
            return ExtractiveGenerator().generate(query, stm, context)
        today = stm[-1].timestamp.date().isoformat() if stm else "unknown"
        inp = prompt.GeneratorInput(
            question=query,
            recent_turns=[f"{t.speaker}: {t.content}" for t in stm[-self._stm_turns :]],
            memories=context.lines,  # date headers, then that day's turns
            today=today,
        )
        try:
            output = self._rt.call(prompt.SPEC, prompt.build_messages(inp))
        except SLMError as exc:
            self._rt.fallback(prompt.SPEC.name, exc, "the extractive answer")
            return ExtractiveGenerator().generate(query, stm, context)
        return output.answer.strip()
