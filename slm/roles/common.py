"""What every role carries: its backend, budgets and the shared meter, and the one way a
role calls its model and records a fallback."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.errors import SLMError
from tiermem.slm.base import ChatMessage, SLMBackend
from tiermem.slm.meter import Meter
from tiermem.slm.task import OutputT, TaskSpec, run_task

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RoleRuntime:
    backend: SLMBackend
    meter: Meter
    timeout_s: float = 20.0
    temperature: float = 0.0
    max_tokens: int | None = None

    def call(
        self,
        spec: TaskSpec[OutputT],
        messages: Sequence[ChatMessage],
        schema: dict[str, Any] | None = None,
    ) -> OutputT:
        """One model call within this role's budgets; raises ``SLMError`` on failure."""
        return run_task(
            self.backend,
            spec,
            messages,
            self.meter,
            timeout_s=self.timeout_s,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            schema=schema,
        )

    def fallback(self, task: str, exc: SLMError, instead: str, *, parsed: bool = False) -> None:
        """Count a fallback (and, for an output that parsed but failed a check, re-count
        that call as invalid); log which, never what the model said."""
        if parsed:
            self.meter.mark_invalid(task)
        self.meter.record_fallback(task)
        logger.warning("%s fell back to %s: %s", task, instead, type(exc).__name__)


class Role:
    """Base of the SLM roles: holds the runtime."""

    def __init__(self, runtime: RoleRuntime) -> None:
        self._rt = runtime

    @property
    def runtime(self) -> RoleRuntime:
        return self._rt
