"""The embedder interface."""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt
from tiermem.errors import EmbedderError

Vectors = npt.NDArray[np.float32]


class EmbedMode(StrEnum):
    """Some models embed a query differently from the document it should find."""

    QUERY = "query"
    DOCUMENT = "document"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        """Return an array of shape ``(len(texts), dim)``, each row of unit length."""
        ...


def check_vectors(vectors: Vectors, count: int, dim: int, name: str) -> Vectors:
    """Refuse an embedder's output that would corrupt the store (wrong shape, NaN)."""
    if vectors.shape != (count, dim):
        raise EmbedderError(f"{name} returned shape {vectors.shape}, expected {(count, dim)}")
    if not np.isfinite(vectors).all():
        raise EmbedderError(f"{name} returned non-finite values")
    return vectors


def l2_normalise(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0.0] = 1.0
    normalised: Vectors = (vectors / norms).astype(np.float32)
    return normalised
