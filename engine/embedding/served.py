"""What the embedders of a model outside torch share (``ollama``, ``openai``, ``llamacpp``):
prefixes by mode, batches, retries with backoff, and the check of what came back.

A call that fails for a reason that may pass (no connection, a timeout, HTTP 429 or 5xx)
raises ``EmbedderUnavailableError`` and is tried again; anything else (an unknown model, a
refused request, a malformed answer) is an ``EmbedderError`` at once.

>>> p = prefixes_for("nomic-embed-text:latest", None, None)
>>> p.apply(["where is Ana"], EmbedMode.QUERY)
['search_query: where is Ana']
>>> prefixes_for("nomic-embed", None, None).apply(["Ana moved"], EmbedMode.DOCUMENT)
['search_document: Ana moved']
>>> prefixes_for("mxbai-embed-large", None, None).apply(["x"], EmbedMode.DOCUMENT)
['x']
>>> [round(float(x), 3) for x in to_vectors("m", [[3.0, 4.0]], count=1, dim=2)[0]]
[0.6, 0.8]
>>> to_vectors("m", [[1.0, 0.0, 0.0]], count=1, dim=2)
Traceback (most recent call last):
tiermem.errors.EmbedderDimensionError: embedder m returned 3-d vectors, but embedder.dim is 2...
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Final

import numpy as np
from tiermem.embedding.base import Embedder, EmbedMode, Vectors, l2_normalise
from tiermem.errors import EmbedderDimensionError, EmbedderError, EmbedderUnavailableError

logger = logging.getLogger(__name__)

# Models that embed a query and a document differently, by a part of their name (an Ollama
# tag, a Hugging Face id, a GGUF file name, a ``tiermem models`` alias such as nomic-embed):
# (query prefix, document prefix).
KNOWN_PREFIXES: Final[dict[str, tuple[str, str]]] = {
    "nomic-embed": ("search_query: ", "search_document: "),
}
TRANSIENT_STATUS: Final = frozenset({408, 425, 429, 500, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class Prefixes:
    """What goes before a text embedded as a query, and before one embedded as a document."""

    query: str = ""
    document: str = ""

    def apply(self, texts: Sequence[str], mode: EmbedMode) -> list[str]:
        prefix = self.query if mode is EmbedMode.QUERY else self.document
        return [prefix + text for text in texts]


NO_PREFIXES: Final = Prefixes()


def prefixes_for(model: str, query: str | None, document: str | None) -> Prefixes:
    """The configured prefixes; an unset one is the model's own (``KNOWN_PREFIXES``), or none."""
    known = next((p for name, p in KNOWN_PREFIXES.items() if name in model.lower()), ("", ""))
    return Prefixes(
        known[0] if query is None else query, known[1] if document is None else document
    )


class PrefixedEmbedder:
    """``inner`` with ``prefixes`` put before its texts: how a local embedder (``hash``,
    ``sentence-transformers``) honours configured prefixes."""

    def __init__(self, inner: Embedder, prefixes: Prefixes) -> None:
        self._inner = inner
        self._prefixes = prefixes

    @property
    def name(self) -> str:
        return self._inner.name

    @property
    def dim(self) -> int:
        return self._inner.dim

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        return self._inner.embed(self._prefixes.apply(texts, mode), mode)


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often a transient failure is tried again, and the first wait (doubled each time)."""

    retries: int = 2
    backoff_s: float = 0.5
    sleep: Callable[[float], None] = time.sleep

    def call(self, name: str, attempt: Callable[[], Vectors]) -> Vectors:
        """``attempt()``, tried again after each ``EmbedderUnavailableError`` while retries
        are left; the last one is raised, saying how many tries it took."""
        for tried in range(self.retries + 1):
            try:
                return attempt()
            except EmbedderUnavailableError as exc:
                if tried == self.retries:
                    tries = f" (after {tried + 1} tries)" if tried else ""
                    raise EmbedderUnavailableError(f"{exc}{tries}") from exc
                wait = self.backoff_s * 2**tried
                logger.warning("embedder %s failed (%s); retrying in %.1f s", name, exc, wait)
                self.sleep(wait)
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


DEFAULT_RETRY: Final = RetryPolicy()


def batches(texts: Sequence[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(texts), size):
        yield list(texts[start : start + size])


def embed_in_batches(
    texts: Sequence[str], size: int, dim: int, embed_batch: Callable[[list[str]], Vectors]
) -> Vectors:
    """``embed_batch`` over ``texts``, ``size`` at a time, stacked in order."""
    parts = [embed_batch(batch) for batch in batches(texts, size)]
    return np.concatenate(parts) if parts else np.zeros((0, dim), dtype=np.float32)


class ServedEmbedder:
    """What the server-backed embedders share: their name and size, and ``embed`` through the
    prefixes, in batches, each retried by the policy; a subclass gives ``_embed_batch``."""

    def __init__(
        self, name: str, dim: int, batch_size: int, prefixes: Prefixes, retry: RetryPolicy
    ) -> None:
        self._name, self._dim, self._batch_size = name, dim, batch_size
        self._prefixes, self._retry = prefixes, retry

    @property
    def name(self) -> str:
        return self._name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        prepared = self._prefixes.apply(texts, mode)
        return embed_in_batches(
            prepared,
            self._batch_size,
            self._dim,
            lambda batch: self._retry.call(self.name, lambda: self._embed_batch(batch)),
        )

    def _embed_batch(self, texts: list[str]) -> Vectors:
        raise NotImplementedError


def to_vectors(name: str, rows: object, count: int, dim: int) -> Vectors:
    """What embedder ``name`` returned for ``count`` texts, as L2-normalised float32 rows of
    ``dim``; ``EmbedderDimensionError`` for another dimension, ``EmbedderError`` for any
    other answer that is not ``count`` finite vectors."""
    try:
        vectors = np.asarray(rows, dtype=np.float32)
    except (ValueError, TypeError) as exc:
        raise EmbedderError(f"embedder {name} returned what is not vectors: {exc}") from exc
    if vectors.ndim != 2 or vectors.shape[0] != count:
        got = vectors.shape[0] if vectors.ndim else 0
        raise EmbedderError(f"embedder {name} returned {got} vectors for {count} texts")
    if vectors.shape[1] != dim:
        raise EmbedderDimensionError(name, dim, int(vectors.shape[1]))
    if not np.isfinite(vectors).all():
        raise EmbedderError(f"embedder {name} returned non-finite values")
    return l2_normalise(vectors)
