"""An embedding model an Ollama server serves, through ``/api/embed`` and the official
``ollama`` client. Registered as ``ollama`` (``OllamaEmbedderConfig``).

Ollama normalises its embeddings already; they are normalised again here all the same, so
every embedder's rows are of unit length whatever the server.
"""

from __future__ import annotations

import httpx
import ollama
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


class OllamaEmbedder(ServedEmbedder):
    """``model`` on the Ollama server at ``host``."""

    def __init__(
        self,
        model: str,
        dim: int,
        *,
        host: str = "http://127.0.0.1:11434",
        timeout_s: float = 30.0,
        batch_size: int = 32,
        keep_alive: str = "30m",
        prefixes: Prefixes = NO_PREFIXES,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        super().__init__(f"ollama:{model}", dim, batch_size, prefixes, retry)
        self._model = model
        self._host = host
        self._keep_alive = keep_alive
        self._client = ollama.Client(host=host, timeout=timeout_s)

    def _embed_batch(self, texts: list[str]) -> Vectors:
        where = f"{self.name} at {self._host}"
        try:
            response = self._client.embed(
                model=self._model, input=texts, keep_alive=self._keep_alive
            )
        except ollama.ResponseError as exc:
            message = f"{where}: {exc.error} (HTTP {exc.status_code})"
            if exc.status_code in TRANSIENT_STATUS:
                raise EmbedderUnavailableError(message) from exc
            raise EmbedderError(message) from exc
        except (httpx.TransportError, ConnectionError) as exc:  # no connection, a timeout
            raise EmbedderUnavailableError(f"{where}: {exc or type(exc).__name__}") from exc
        except ValueError as exc:  # a body that is not Ollama's (JSON, or its fields)
            raise EmbedderError(f"{where} answered what is not an embedding: {exc}") from exc
        return to_vectors(self.name, response.embeddings, len(texts), self._dim)
