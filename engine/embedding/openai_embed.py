"""Any OpenAI-compatible ``/v1/embeddings`` (OpenAI, vLLM, llama.cpp's server, Ollama's
``/v1``) through the official ``openai`` client. Registered as ``openai``
(``OpenAIEmbedderConfig``).

The vectors are asked for as floats (``encoding_format="float"``): the client's own default
is base64, which not every compatible server speaks. The client's retries are off: the
embedder's ``RetryPolicy`` retries, as it does for every served kind.
"""

from __future__ import annotations

import openai
from tiermem.embedding.base import Vectors
from tiermem.embedding.served import (
    DEFAULT_RETRY,
    NO_PREFIXES,
    TRANSIENT_STATUS,
    Prefixes,
    RetryPolicy,
    ServedEmbedder,
    to_vectors,
)
from tiermem.errors import EmbedderError, EmbedderUnavailableError


class OpenAIEmbedder(ServedEmbedder):
    """``model`` at the OpenAI-compatible ``base_url``."""

    def __init__(
        self,
        model: str,
        dim: int,
        *,
        base_url: str,
        api_key: str | None = None,
        timeout_s: float = 30.0,
        batch_size: int = 64,
        prefixes: Prefixes = NO_PREFIXES,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        super().__init__(f"openai:{model}", dim, batch_size, prefixes, retry)
        self._model = model
        self._base_url = base_url
        # a local server takes any key; the client refuses to start without one
        self._client = openai.OpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
        )

    def _embed_batch(self, texts: list[str]) -> Vectors:
        where = f"{self.name} at {self._base_url}"
        try:
            response = self._client.embeddings.create(
                model=self._model, input=texts, encoding_format="float"
            )
        except openai.APIConnectionError as exc:  # no connection, or a timeout
            raise EmbedderUnavailableError(f"{where}: {exc}") from exc
        except openai.APIStatusError as exc:
            message = f"{where}: {exc.message} (HTTP {exc.status_code})"
            if exc.status_code in TRANSIENT_STATUS:
                raise EmbedderUnavailableError(message) from exc
            raise EmbedderError(message) from exc
        except openai.OpenAIError as exc:
            raise EmbedderError(f"{where}: {exc}") from exc
        try:
            rows = [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        except (AttributeError, TypeError) as exc:  # a body that is not an embeddings list
            raise EmbedderError(f"{where} answered what is not an embedding: {exc}") from exc
        return to_vectors(self.name, rows, len(texts), self._dim)
