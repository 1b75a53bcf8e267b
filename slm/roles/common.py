"""What every role carries: its backend, budgets and the shared meter."""

from __future__ import annotations

from dataclasses import dataclass

from tiermem.slm.base import SLMBackend
from tiermem.slm.meter import Meter


@dataclass(frozen=True, slots=True)
class RoleRuntime:
    backend: SLMBackend
    meter: Meter
    timeout_s: float = 20.0
    temperature: float = 0.0
    max_tokens: int | None = None
