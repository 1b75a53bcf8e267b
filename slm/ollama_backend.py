"""Ollama through the official ``ollama`` client, with ``format=<json schema>``.

Scoring asks for one token with ``logprobs`` and the top 20 alternatives (Ollama's maximum);
Ollama reports only the prompt tokens it evaluated (a prefix it kept cached is not counted),
so a score's ``prompt_tokens`` and ``evaluated_tokens`` are both that count.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import ollama
from tiermem.errors import SLMTimeout, SLMUnavailable
from tiermem.slm.base import ChatMessage, ScoreRequest, SLMRequest, SLMResponse, TokenScores
from tiermem.slm.scoring import choice_logprobs

TOP_LOGPROBS = 20  # the most Ollama returns per position


class OllamaBackend:
    name = "ollama"

    def __init__(
        self,
        model: str,
        *,
        host: str = "http://127.0.0.1:11434",
        keep_alive: str = "30m",
        timeout_s: float = 60.0,
    ) -> None:
        self._model = model
        self._keep_alive = keep_alive
        self._client = ollama.Client(host=host, timeout=timeout_s)

    @property
    def model(self) -> str:
        return self._model

    def _chat(
        self, task: str, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ollama.ChatResponse:
        try:
            return self._client.chat(
                model=self._model,
                messages=[{"role": m.role, "content": m.content} for m in messages],
                keep_alive=self._keep_alive,
                stream=False,
                **kwargs,
            )
        except httpx.TimeoutException as exc:
            raise SLMTimeout(task, f"ollama timed out: {exc}") from exc
        except (ollama.ResponseError, httpx.HTTPError, ConnectionError) as exc:
            raise SLMUnavailable(task, f"ollama: {exc}") from exc

    def complete(self, request: SLMRequest) -> SLMResponse:
        response = self._chat(
            request.task,
            request.messages,
            format=dict(request.json_schema),
            options={
                "temperature": request.temperature,
                "num_predict": request.max_tokens,
                "seed": request.seed,
            },
        )
        return SLMResponse(
            text=response.message.content or "",
            prompt_tokens=int(response.prompt_eval_count or 0),
            completion_tokens=int(response.eval_count or 0),
            model=response.model or self._model,
            finish_reason=response.done_reason or "stop",
        )

    def score_next_token(self, request: ScoreRequest) -> TokenScores:
        response = self._chat(
            request.task,
            request.messages,
            logprobs=True,
            top_logprobs=TOP_LOGPROBS,
            options={"temperature": 0.0, "num_predict": 1, "seed": 0},
        )
        if not response.logprobs:
            raise SLMUnavailable(request.task, "ollama returned no logprobs (Ollama >= 0.12.11)")
        first = response.logprobs[0]
        top = [(first.token, first.logprob)]
        top += [(t.token, t.logprob) for t in first.top_logprobs or ()]
        logprobs, floored = choice_logprobs(top, request.choices)
        evaluated = int(response.prompt_eval_count or 0)
        return TokenScores(logprobs, evaluated, evaluated, response.model or self._model, floored)

    def close(self) -> None:
        return None
