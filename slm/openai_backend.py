"""Any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp servers) through ``openai``.

``response_format``: ``json_schema`` is the OpenAI standard (OpenAI, vLLM, llama.cpp's C++
server); ``json_object_schema`` is the ``{"type": "json_object", "schema": ...}`` form that
``python -m llama_cpp.server`` accepts.

Scoring asks for one token with ``logprobs`` and the top 20 alternatives (the OpenAI maximum;
``python -m llama_cpp.server`` needs its default ``--logits_all true``). ``evaluated_tokens``
is the prompt less ``usage.prompt_tokens_details.cached_tokens`` where the server reports it
(OpenAI; vLLM with ``--enable-prompt-tokens-details``), else the whole prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import openai
from tiermem.errors import SLMTimeout, SLMUnavailable
from tiermem.slm.base import ChatMessage, ScoreRequest, SLMRequest, SLMResponse, TokenScores
from tiermem.slm.scoring import choice_logprobs

ResponseFormat = Literal["json_schema", "json_object_schema"]
TOP_LOGPROBS = 20  # the most the OpenAI API returns per position


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

    def _create(self, task: str, messages: Sequence[ChatMessage], **kwargs: Any) -> Any:
        try:
            sent: list[Any] = [{"role": m.role, "content": m.content} for m in messages]
            return self._client.chat.completions.create(model=self._model, messages=sent, **kwargs)
        except openai.APITimeoutError as exc:
            raise SLMTimeout(task, f"endpoint timed out: {exc}") from exc
        except openai.OpenAIError as exc:
            raise SLMUnavailable(task, f"endpoint: {exc}") from exc

    def complete(self, request: SLMRequest) -> SLMResponse:
        response = self._create(
            request.task,
            request.messages,
            response_format=self._response_format(request),
            max_tokens=request.max_tokens,
            temperature=request.temperature,
            seed=request.seed,
            timeout=request.timeout_s,
        )
        choice = response.choices[0]
        usage = response.usage
        return SLMResponse(
            text=choice.message.content or "",
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            model=response.model or self._model,
            finish_reason=choice.finish_reason or "stop",
        )

    def score_next_token(self, request: ScoreRequest) -> TokenScores:
        response = self._create(
            request.task,
            request.messages,
            max_tokens=1,
            temperature=0.0,
            seed=0,
            logprobs=True,
            top_logprobs=TOP_LOGPROBS,
            timeout=request.timeout_s,
        )
        content = response.choices[0].logprobs.content if response.choices[0].logprobs else None
        if not content:
            raise SLMUnavailable(request.task, "the endpoint returned no logprobs")
        first = content[0]
        top = [(first.token, first.logprob)]
        top += [(t.token, t.logprob) for t in first.top_logprobs or ()]
        logprobs, floored = choice_logprobs(top, request.choices)
        usage = response.usage
        prompt = int(usage.prompt_tokens) if usage else 0
        details = getattr(usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        return TokenScores(
            logprobs, prompt, max(0, prompt - cached), response.model or self._model, floored
        )

    def close(self) -> None:
        self._client.close()
