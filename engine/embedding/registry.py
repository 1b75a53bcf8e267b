"""Embedders, by provider name (a ``tiermem.registry.Registry``); each factory imports its
SDK on use, so heavy dependencies stay optional and nothing loads at import."""

from __future__ import annotations

from collections.abc import Callable

from tiermem.config import EmbedderConfig
from tiermem.embedding.base import Embedder
from tiermem.registry import Registry

EmbedderFactory = Callable[[EmbedderConfig], Embedder]


def _hash(config: EmbedderConfig) -> Embedder:
    from tiermem.embedding.hashing import HashEmbedder

    return HashEmbedder(dim=config.dim)


def _sentence_transformers(config: EmbedderConfig) -> Embedder:
    from tiermem.embedding.sentence_transformer import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(config.model, config.dim, config.batch_size, config.device)


EMBEDDERS: Registry[EmbedderFactory] = Registry("embedder")
EMBEDDERS.register("hash", _hash)
EMBEDDERS.register("sentence-transformers", _sentence_transformers)


def register_embedder(name: str, factory: EmbedderFactory, *, replace: bool = False) -> None:
    """Make ``name`` usable as ``EmbedderConfig.provider`` (tests register fakes this way)."""
    EMBEDDERS.register(name, factory, replace=replace)


def build_embedder(config: EmbedderConfig) -> Embedder:
    """Build the embedder that ``config.provider`` names."""
    return EMBEDDERS.factory(config.provider)(config)
