"""Ollama through the official ``ollama`` client, with ``format=<json schema>``."""

from __future__ import annotations

import httpx
import ollama
from tiermem.errors import SLMTimeout, SLMUnavailable
from tiermem.slm.base import SLMRequest, SLMResponse


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

    def complete(self, request: SLMRequest) -> SLMResponse:
        try:
            response = self._client.chat(
                model=self._model,
                messages=[{"role": m.role, "content": m.content} for m in request.messages],
                format=dict(request.json_schema),
                options={
                    "temperature": request.temperature,
                    "num_predict": request.max_tokens,
                    "seed": request.seed,
                },
                keep_alive=self._keep_alive,
                stream=False,
            )
        except httpx.TimeoutException as exc:
            raise SLMTimeout(request.task, f"ollama timed out: {exc}") from exc
        except (ollama.ResponseError, httpx.HTTPError, ConnectionError) as exc:
            raise SLMUnavailable(request.task, f"ollama: {exc}") from exc
        return SLMResponse(
            text=response.message.content or "",
            prompt_tokens=int(response.prompt_eval_count or 0),
            completion_tokens=int(response.eval_count or 0),
            model=response.model or self._model,
            finish_reason=response.done_reason or "stop",
        )

    def close(self) -> None:
        return None
