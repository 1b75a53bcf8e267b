"""Any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp servers) through ``openai``.

``response_format``: ``json_schema`` is the OpenAI standard (OpenAI, vLLM, llama.cpp's C++
server); ``json_object_schema`` is the ``{"type": "json_object", "schema": ...}`` form that
``python -m llama_cpp.server`` accepts.
"""

from __future__ import annotations

from typing import Any, Literal

import openai
from tiermem.errors import SLMTimeout, SLMUnavailable
from tiermem.slm.base import SLMRequest, SLMResponse

ResponseFormat = Literal["json_schema", "json_object_schema"]


class OpenAIBackend:
    name = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout_s: float = 60.0,
        response_format: ResponseFormat = "json_schema",
    ) -> None:
        self._model = model
        self._format = response_format
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
        )

    @property
    def model(self) -> str:
        return self._model

    def _response_format(self, request: SLMRequest) -> dict[str, Any]:
        schema = dict(request.json_schema)
        if self._format == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        return {
            "type": "json_schema",
            "json_schema": {"name": request.task, "schema": schema, "strict": True},
        }

    def complete(self, request: SLMRequest) -> SLMResponse:
        try:
            messages: list[Any] = [{"role": m.role, "content": m.content} for m in request.messages]
            response_format: Any = self._response_format(request)
            response = self._client.chat.completions.create(
                model=self._model,
                messages=messages,
                response_format=response_format,
                max_tokens=request.max_tokens,
                temperature=request.temperature,
                seed=request.seed,
                timeout=request.timeout_s,
            )
        except openai.APITimeoutError as exc:
            raise SLMTimeout(request.task, f"endpoint timed out: {exc}") from exc
        except openai.OpenAIError as exc:
            raise SLMUnavailable(request.task, f"endpoint: {exc}") from exc
        choice = response.choices[0]
        usage = response.usage
        return SLMResponse(
            text=choice.message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            model=response.model or self._model,
            finish_reason=choice.finish_reason or "stop",
        )

    def close(self) -> None:
        self._client.close()
