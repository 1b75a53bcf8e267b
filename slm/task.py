"""Run one SLM task: render -> call the backend -> validate against the task's schema -> meter.

Every call has a schema, a token budget, a time budget, and a counter. Failures raise
``SLMError`` subclasses; the roles catch them and take their documented fallback.
"""

from __future__ import annotations

import copy
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from tiermem.errors import SLMError, SLMOutputInvalid, SLMTimeout, SLMUnavailable
from tiermem.slm.base import ChatMessage, SLMBackend, SLMRequest
from tiermem.slm.meter import Meter

logger = logging.getLogger(__name__)

OutputT = TypeVar("OutputT", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class TaskSpec(Generic[OutputT]):
    """A task's identity and output contract."""

    name: str
    version: str
    output: type[OutputT]
    max_tokens: int

    def json_schema(self) -> dict[str, Any]:
        return inline_refs(self.output.model_json_schema())


def inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``$ref``/``$defs`` so every backend's grammar builder sees one flat schema, and
    forbid extra properties so the grammar cannot wander."""
    defs = schema.get("$defs", {})

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                target = node["$ref"].rsplit("/", 1)[-1]
                return resolve(copy.deepcopy(defs[target]))
            out = {k: resolve(v) for k, v in node.items() if k not in ("$defs", "title")}
            if out.get("type") == "object":
                out.setdefault("additionalProperties", False)
            return out
        if isinstance(node, list):
            return [resolve(item) for item in node]
        return node

    resolved: dict[str, Any] = resolve(schema)
    return resolved


def run_task(
    backend: SLMBackend,
    spec: TaskSpec[OutputT],
    messages: Sequence[ChatMessage],
    meter: Meter,
    *,
    timeout_s: float,
    temperature: float = 0.0,
    max_tokens: int | None = None,
    schema: dict[str, Any] | None = None,
) -> OutputT:
    """Call the model once and return its validated output, or raise ``SLMError``.

    ``schema`` narrows the task's schema for this call (valid ids only, say); the output is
    still validated against the task's pydantic model, and callers check the narrowing."""
    request = SLMRequest(
        task=spec.name,
        messages=tuple(messages),
        json_schema=schema if schema is not None else spec.json_schema(),
        max_tokens=max_tokens or spec.max_tokens,
        temperature=temperature,
        timeout_s=timeout_s,
    )
    started = time.perf_counter()
    try:
        response = backend.complete(request)
    except SLMError as exc:
        latency = time.perf_counter() - started
        meter.record_no_answer(spec.name, timed_out=isinstance(exc, SLMTimeout), latency_s=latency)
        raise
    latency = time.perf_counter() - started

    def record(failure: str | None) -> None:
        meter.record_call(
            spec.name,
            ok=failure is None,
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            latency_s=latency,
            failure=failure,
        )

    if latency > timeout_s:
        record("timeout")
        raise SLMTimeout(spec.name, f"answered after {latency:.1f} s, budget {timeout_s:.1f} s")
    try:
        parsed = spec.output.model_validate_json(response.text)
    except ValidationError as exc:
        record("invalid")
        if response.finish_reason == "length":  # the budget, not the model, cut it short
            meter.record_event(spec.name, "truncated")
        reason = "; ".join(e["msg"] for e in exc.errors()[:3])
        raise SLMOutputInvalid(spec.name, response.text, reason) from exc
    record(None)
    return parsed


__all__ = ["SLMOutputInvalid", "SLMUnavailable", "TaskSpec", "inline_refs", "run_task"]
