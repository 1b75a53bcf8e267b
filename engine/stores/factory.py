"""MTM stores, by ``MTMConfig.kind`` (a ``tiermem.registry.Registry``): ``qdrant`` -> Qdrant
through qdrant-client, at its ``location`` (on disk, in process, or a server); ``edge`` ->
Qdrant Edge shards under its ``path`` (the ``edge`` extra, imported when used); ``reference`` ->
the exact in-memory oracle."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from qdrant_client import QdrantClient
from tiermem.config import MTMConfig, QdrantConfig, ReferenceStoreConfig
from tiermem.config.stores import EdgeStoreConfig
from tiermem.errors import ConfigError, StoreError
from tiermem.registry import Registry
from tiermem.stores.base import MTMStore
from tiermem.stores.files import restrict_tree
from tiermem.stores.qdrant import QdrantStore
from tiermem.stores.reference import ReferenceStore

# (config, vector dimension, the embedder's name: recorded with each collection, or None)
StoreFactory = Callable[[MTMConfig, int, str | None], MTMStore]


def _client(config: QdrantConfig) -> QdrantClient:
    """The client for where ``config`` says the store lives."""
    if config.location == "url":
        return QdrantClient(url=config.url, api_key=config.api_key, timeout=int(config.timeout_s))
    if config.location == "path" and config.path is not None:  # the config checks the path
        config.path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return QdrantClient(path=str(config.path))
    return QdrantClient(location=":memory:")


def _qdrant(config: MTMConfig, dim: int, embedder: str | None) -> MTMStore:
    if not isinstance(config, QdrantConfig):
        raise ConfigError(
            f"mtm store 'qdrant' is configured by QdrantConfig, not {type(config).__name__}"
        )
    path = config.path if config.location == "path" else None
    try:
        client = _client(config)
        if path is not None:
            restrict_tree(path)
    except (RuntimeError, ValueError, OSError, sqlite3.Error) as exc:
        # The embedded store is locked to one process: say so plainly.
        raise StoreError(f"cannot open the MTM store ({config.location}): {exc}") from exc
    server = config.location == "url"  # payload indexes, no local files
    return QdrantStore(
        client,
        dim=dim,
        prefix=config.collection_prefix,
        server=server,
        path=path,
        embedder=embedder,
    )


def _edge(config: MTMConfig, dim: int, embedder: str | None) -> MTMStore:
    if not isinstance(config, EdgeStoreConfig):
        raise ConfigError(
            f"mtm store 'edge' is configured by EdgeStoreConfig, not {type(config).__name__}"
        )
    from tiermem.stores.edge import EdgeStore  # imports qdrant_edge: only when configured

    return EdgeStore(
        config.path.expanduser(),
        dim=dim,
        prefix=config.collection_prefix,
        embedder=embedder,
        max_open=config.max_open_shards,
    )


STORES: Registry[StoreFactory] = Registry("mtm store")
STORES.register("qdrant", _qdrant, config=QdrantConfig)
STORES.register("edge", _edge, config=EdgeStoreConfig)
STORES.register(
    "reference", lambda config, dim, embedder: ReferenceStore(dim), config=ReferenceStoreConfig
)


def build_mtm_store(config: MTMConfig, dim: int, embedder: str | None = None) -> MTMStore:
    """The store ``config.kind`` names, for vectors of ``dim``. ``embedder``: the name of the
    embedder that writes them, which a store that persists its collections records with each
    and checks on each it opens (``EmbedderMismatchError``)."""
    return STORES.factory(config.kind)(config, dim, embedder)
