"""The answer generator on a model. Fallback (counted): the extractive answer."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from tiermem.errors import SLMError
from tiermem.generator import ExtractiveGenerator
from tiermem.render import render_memory
from tiermem.slm.prompts import generator as prompt
from tiermem.slm.roles.common import RoleRuntime
from tiermem.slm.task import run_task
from tiermem.types import SearchHit, Turn

logger = logging.getLogger(__name__)


class SLMGenerator:
    name = "slm-generator"

    @property
    def runtime(self) -> RoleRuntime:
        return self._rt

    def __init__(self, runtime: RoleRuntime, stm_turns: int = 4) -> None:
        self._rt = runtime
        self._stm_turns = stm_turns

    def generate(self, query: str, stm: Sequence[Turn], hits: Sequence[SearchHit]) -> str:
        if not hits:  # nothing to ground an answer on: no call, no invention
            return ExtractiveGenerator().generate(query, stm, hits)
        ordered = sorted(hits, key=lambda h: h.entry.effective_time)
        today = stm[-1].timestamp.date().isoformat() if stm else "unknown"
        inp = prompt.GeneratorInput(
            question=query,
            recent_turns=[f"{t.speaker}: {t.content}" for t in stm[-self._stm_turns :]],
            memories=[render_memory(h.entry) for h in ordered],
            today=today,
        )
        try:
            output = run_task(
                self._rt.backend,
                prompt.SPEC,
                prompt.build_messages(inp),
                self._rt.meter,
                timeout_s=self._rt.timeout_s,
                temperature=self._rt.temperature,
                max_tokens=self._rt.max_tokens,
            )
        except SLMError as exc:
            self._rt.meter.record_fallback(prompt.SPEC.name)
            logger.warning("generator fell back to the extractive answer: %s", type(exc).__name__)
            return ExtractiveGenerator().generate(query, stm, hits)
        return output.answer.strip()
