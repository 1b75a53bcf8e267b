"""The SLM backend interface: send a chat request with a JSON schema, get text and usage back;
and, for a backend that can, score the next token of a chat instead of generating it.

Backends only transport; ``run_task`` (in ``tiermem.slm.task``) renders the prompt, validates
the output against the task's pydantic schema and reports to the meter; ``score_task`` (in
``tiermem.slm.scoring``) does the same for a ``ScoreRequest``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

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


@dataclass(frozen=True, slots=True)
class ScoreRequest:
    """Score the assistant's first answer token after ``messages`` (chat-templated, with the
    assistant turn opened) against ``choices``, instead of generating it."""

    task: str
    messages: Sequence[ChatMessage]
    choices: tuple[str, ...] = ("yes", "no")
    timeout_s: float = 30.0


@dataclass(frozen=True, slots=True)
class TokenScores:
    """The log-probability of each choice as the first answer token, summed over the tokens
    that spell it (``yes``, ``Yes``, `` yes``, ...).

    ``prompt_tokens`` is the templated prompt's length, ``evaluated_tokens`` how many of them
    this call ran through the model (the rest were a prefix cached by an earlier call; a server
    that reports only what it evaluated gives both the same). ``floored`` names the choices a
    server did not list among its top log-probabilities: each was given the smallest
    log-probability listed, an upper bound on its own."""

    logprobs: Mapping[str, float]
    prompt_tokens: int
    evaluated_tokens: int
    model: str
    floored: tuple[str, ...] = ()


@runtime_checkable
class NextTokenScorer(Protocol):
    """A backend that can score the next token. Raises ``SLMTimeout`` or ``SLMUnavailable``
    on failure, as ``complete`` does."""

    @property
    def model(self) -> str: ...

    def score_next_token(self, request: ScoreRequest) -> TokenScores: ...


@runtime_checkable
class BatchNextTokenScorer(NextTokenScorer, Protocol):
    """A scorer that takes many requests at once (the candidates of one query), in order."""

    def score_next_tokens(self, requests: Sequence[ScoreRequest]) -> list[TokenScores]: ...
