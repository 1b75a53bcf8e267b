"""The SLM backend interface: send a chat request with a JSON schema, get text and usage back.

Backends only transport; ``run_task`` (in ``tiermem.slm.task``) renders the prompt, validates
the output against the task's pydantic schema and reports to the meter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

# Who a backend serves. An in-process model gives each owner its own context and lock, so the
# offline job never holds what the online path waits for.
ONLINE = "online"  # the online roles: controller, selector, writer, generator
CONSOLIDATION = "consolidation"  # the offline job


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str  # system | user | assistant
    content: str


@dataclass(frozen=True, slots=True)
class SLMRequest:
    """One model call: messages, the JSON schema the output must follow, and its budget."""

    task: str
    messages: Sequence[ChatMessage]
    json_schema: Mapping[str, Any]
    max_tokens: int
    temperature: float = 0.0
    timeout_s: float = 30.0
    seed: int = 0


@dataclass(frozen=True, slots=True)
class SLMResponse:
    text: str
    prompt_tokens: int
    completion_tokens: int
    model: str
    finish_reason: str = "stop"
    extra: Mapping[str, Any] = field(default_factory=dict)


class SLMBackend(Protocol):
    """A way to run a small model. Raises ``SLMTimeout`` or ``SLMUnavailable`` on failure."""

    @property
    def name(self) -> str: ...

    @property
    def model(self) -> str: ...

    def complete(self, request: SLMRequest) -> SLMResponse: ...

    def close(self) -> None: ...
