"""Embedders, by kind (``EmbedderConfig.kind``, a ``tiermem.registry.Registry``); each
factory imports its SDK on use, so heavy dependencies stay optional and nothing loads at
import. ``hash`` and ``sentence-transformers`` are configured by ``EmbedderConfig`` itself;
``ollama``, ``openai`` and ``llamacpp`` by their own classes (``config`` of their entry), and
their factories refuse any other.

>>> {"hash", "llamacpp", "ollama", "openai", "sentence-transformers"} <= set(EMBEDDERS.names())
True
>>> EMBEDDERS.get("ollama").config.__name__
'OllamaEmbedderConfig'
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

from tiermem.config import (
    EmbedderConfig,
    LlamaCppEmbedderConfig,
    OllamaEmbedderConfig,
    OpenAIEmbedderConfig,
    ServedEmbedderConfig,
)
from tiermem.embedding.base import Embedder
from tiermem.embedding.served import (
    NO_PREFIXES,
    PrefixedEmbedder,
    Prefixes,
    RetryPolicy,
    prefixes_for,
)
from tiermem.errors import ConfigError
from tiermem.registry import Registry

EmbedderFactory = Callable[[EmbedderConfig], Embedder]
C = TypeVar("C", bound=EmbedderConfig)


def _configured_by(config_class: type[C], build: Callable[[C], Embedder]) -> EmbedderFactory:
    """A factory that builds from ``config_class`` and refuses any other configuration."""

    def factory(config: EmbedderConfig) -> Embedder:
        if not isinstance(config, config_class):
            raise ConfigError(
                f"embedder kind {config.kind!r} is configured by {config_class.__name__},"
                f" not {type(config).__name__}"
            )
        return build(config)

    return factory


def _prefixes(config: EmbedderConfig) -> Prefixes:
    return prefixes_for(config.model, config.query_prefix, config.document_prefix)


def _retry(config: ServedEmbedderConfig) -> RetryPolicy:
    return RetryPolicy(config.retries, config.retry_backoff_s)


def _prefixed(config: EmbedderConfig, embedder: Embedder) -> Embedder:
    """A local embedder, with the prefixes its configuration names (none by default)."""
    prefixes = _prefixes(config)
    return PrefixedEmbedder(embedder, prefixes) if prefixes != NO_PREFIXES else embedder


def _hash(config: EmbedderConfig) -> Embedder:
    from tiermem.embedding.hashing import HashEmbedder

    return _prefixed(config, HashEmbedder(dim=config.dim))


def _sentence_transformers(config: EmbedderConfig) -> Embedder:
    from tiermem.embedding.sentence_transformer import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder(
        config.model, config.dim, config.batch_size, config.device
    )
    return _prefixed(config, embedder)


def _ollama(config: OllamaEmbedderConfig) -> Embedder:
    from tiermem.embedding.ollama_embed import OllamaEmbedder

    return OllamaEmbedder(
        config.model,
        config.dim,
        host=config.host,
        timeout_s=config.timeout_s,
        batch_size=config.batch_size,
        keep_alive=config.keep_alive,
        prefixes=_prefixes(config),
        retry=_retry(config),
    )


def _openai(config: OpenAIEmbedderConfig) -> Embedder:
    from tiermem.embedding.openai_embed import OpenAIEmbedder

    if config.api_key is not None:
        api_key: str | None = config.api_key.get_secret_value()
    else:  # named in the configuration: read now, when the embedder is built
        api_key = os.environ.get(config.api_key_env) if config.api_key_env else None
        if config.api_key_env and not api_key:
            raise ConfigError(f"embedder.api_key_env names {config.api_key_env}, which is unset")
    return OpenAIEmbedder(
        config.model,
        config.dim,
        base_url=config.base_url,
        api_key=api_key,
        timeout_s=config.timeout_s,
        batch_size=config.batch_size,
        prefixes=_prefixes(config),
        retry=_retry(config),
    )


def _llamacpp(config: LlamaCppEmbedderConfig) -> Embedder:
    from tiermem.embedding.llamacpp_embed import LlamaCppEmbedder
    from tiermem.slm.models import resolve_model

    return LlamaCppEmbedder(
        resolve_model(config.model, config.models_dir),
        config.dim,
        n_ctx=config.n_ctx,
        n_threads=config.n_threads,
        n_gpu_layers=0 if config.device == "cpu" else -1,
        pooling=config.pooling,
        batch_size=config.batch_size,
        prefixes=_prefixes(config),
    )


EMBEDDERS: Registry[EmbedderFactory] = Registry("embedder")
EMBEDDERS.register("hash", _hash, config=EmbedderConfig)
EMBEDDERS.register("sentence-transformers", _sentence_transformers, config=EmbedderConfig)
EMBEDDERS.register(
    "ollama", _configured_by(OllamaEmbedderConfig, _ollama), config=OllamaEmbedderConfig
)
EMBEDDERS.register(
    "openai", _configured_by(OpenAIEmbedderConfig, _openai), config=OpenAIEmbedderConfig
)
EMBEDDERS.register(
    "llamacpp", _configured_by(LlamaCppEmbedderConfig, _llamacpp), config=LlamaCppEmbedderConfig
)


def register_embedder(name: str, factory: EmbedderFactory, *, replace: bool = False) -> None:
    """Make ``name`` usable as ``EmbedderConfig.kind`` (tests register fakes this way)."""
    EMBEDDERS.register(name, factory, replace=replace)


def build_embedder(config: EmbedderConfig) -> Embedder:
    """Build the embedder that ``config.kind`` names."""
    return EMBEDDERS.factory(config.kind)(config)
