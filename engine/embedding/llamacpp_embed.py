"""A GGUF embedding model in process, through llama-cpp-python (``embedding=True``).
Registered as ``llamacpp`` (``LlamaCppEmbedderConfig``).

The model loads on the first ``embed()``, at most once per process and settings, never at
import; its dimension is checked against the configuration's then. A llama.cpp context
answers one call at a time, so calls to one model are serialised.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from tiermem.embedding.base import EmbedMode, Vectors
from tiermem.embedding.served import NO_PREFIXES, Prefixes, embed_in_batches, to_vectors
from tiermem.errors import EmbedderDimensionError, EmbedderError, SLMUnavailable

POOLING: Final = {"mean": 1, "cls": 2, "last": 3}  # llama_cpp.LLAMA_POOLING_TYPE_*
UNSPECIFIED: Final = -1  # the GGUF's own pooling ("model")
_MODELS: dict[tuple[str, int, int | None, int, str], tuple[Any, threading.Lock]] = {}
_LOCK = threading.Lock()


class LlamaCppEmbedder:
    """The GGUF model at ``path``."""

    def __init__(
        self,
        path: Path,
        dim: int,
        *,
        n_ctx: int = 2048,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        pooling: str = "model",
        batch_size: int = 64,
        prefixes: Prefixes = NO_PREFIXES,
    ) -> None:
        self._path = path
        self._dim = dim
        self._n_ctx = n_ctx
        self._n_threads = n_threads
        self._n_gpu_layers = n_gpu_layers
        self._pooling = pooling
        self._batch_size = batch_size
        self._prefixes = prefixes

    @property
    def name(self) -> str:
        return f"llamacpp:{self._path.name}"

    @property
    def dim(self) -> int:
        return self._dim

    def _load(self) -> tuple[Any, threading.Lock]:
        key = (str(self._path), self._n_ctx, self._n_threads, self._n_gpu_layers, self._pooling)
        with _LOCK:
            if key not in _MODELS:
                _MODELS[key] = (self._open(), threading.Lock())
            return _MODELS[key]

    def _open(self) -> Any:
        from tiermem.slm.llamacpp import check_build

        try:
            check_build()  # a build this CPU cannot run would kill the process, not raise
        except SLMUnavailable as exc:
            raise EmbedderError(f"embedder {self.name}: {exc}") from exc
        from llama_cpp import Llama

        try:
            llama = Llama(
                model_path=str(self._path),
                embedding=True,
                n_ctx=self._n_ctx,
                n_batch=self._n_ctx,  # a text of up to n_ctx tokens is one batch
                n_ubatch=self._n_ctx,  # pooled embeddings need the whole text in one ubatch
                n_threads=self._n_threads,
                n_gpu_layers=self._n_gpu_layers,
                verbose=False,
                pooling_type=POOLING.get(self._pooling, UNSPECIFIED),
            )
        except (ValueError, RuntimeError, OSError) as exc:
            raise EmbedderError(f"cannot load embedder {self._path}: {exc}") from exc
        if llama.n_embd() != self._dim:
            raise EmbedderDimensionError(self.name, self._dim, int(llama.n_embd()))
        return llama

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        prepared = self._prefixes.apply(texts, mode)
        return embed_in_batches(prepared, self._batch_size, self._dim, self._embed_batch)

    def _embed_batch(self, texts: list[str]) -> Vectors:
        llama, lock = self._load()
        try:
            with lock:
                rows = llama.embed(texts, normalize=False, truncate=True)
        except (ValueError, RuntimeError) as exc:
            raise EmbedderError(f"embedder {self.name} failed: {exc}") from exc
        if rows and rows[0] and isinstance(rows[0][0], list):  # one vector per token
            raise EmbedderError(
                f"embedder {self.name} pools nothing (a vector per token): it is not an "
                "embedding model, or set embedder.pooling = 'mean'"
            )
        return to_vectors(self.name, rows, len(texts), self._dim)
