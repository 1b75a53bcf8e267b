"""Embedder registry: provider name -> factory; each factory imports its SDK on use, so
heavy dependencies stay optional and nothing loads at import."""

from __future__ import annotations

from collections.abc import Callable

from tiermem.config import EmbedderConfig
from tiermem.embedding.base import Embedder
from tiermem.errors import UnknownProviderError

EmbedderFactory = Callable[[EmbedderConfig], Embedder]


def _hash(config: EmbedderConfig) -> Embedder:
    from tiermem.embedding.hashing import HashEmbedder

    return HashEmbedder(dim=config.dim)


def _sentence_transformers(config: EmbedderConfig) -> Embedder:
    from tiermem.embedding.sentence_transformer import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(config.model, config.dim, config.batch_size, config.device)


_FACTORIES: dict[str, EmbedderFactory] = {
    "hash": _hash,
    "sentence-transformers": _sentence_transformers,
}


def register_embedder(name: str, factory: EmbedderFactory) -> None:
    """Make ``name`` usable as ``EmbedderConfig.provider`` (tests register fakes this way)."""
    _FACTORIES[name] = factory


def build_embedder(config: EmbedderConfig) -> Embedder:
    """Build the embedder that ``config.provider`` names."""
    target = _FACTORIES.get(config.provider)
    if target is None:
        raise UnknownProviderError("embedder", config.provider, list(_FACTORIES))
    return target(config)
