"""A deterministic, model-free embedder for tests: feature hashing of words and trigrams.

It is lexical, not semantic, but stable across processes and platforms, so tests can assert
on rankings. Registered as ``hash``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
from tiermem.embedding.base import EmbedMode, Vectors, l2_normalise

_WORD = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Feature-hashing embedder.

    >>> e = HashEmbedder(dim=64)
    >>> v = e.embed(["the cat sat", "the cat sat"], EmbedMode.DOCUMENT)
    >>> bool((v[0] == v[1]).all()), v.shape
    (True, (2, 64))
    """

    def __init__(self, dim: int = 384) -> None:
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        grams = [w[i : i + 3] for w in words if len(w) > 3 for i in range(len(w) - 2)]
        return words + words + grams  # words weigh twice their trigrams

    def embed(self, texts: Sequence[str], mode: EmbedMode) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                index = int.from_bytes(digest[:4], "little") % self._dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, index] += sign
        return l2_normalise(out)
