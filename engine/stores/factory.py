"""MTM stores, by ``MTMConfig.location`` (a ``tiermem.registry.Registry``): ``path`` ->
embedded Qdrant on disk, ``memory`` -> in-process Qdrant, ``url`` -> a Qdrant server,
``reference`` -> the exact in-memory oracle."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from qdrant_client import QdrantClient
from tiermem.config import MTMConfig
from tiermem.errors import StoreError
from tiermem.registry import Registry
from tiermem.stores.base import MTMStore
from tiermem.stores.files import restrict_tree
from tiermem.stores.qdrant import QdrantStore
from tiermem.stores.reference import ReferenceStore

StoreFactory = Callable[[MTMConfig, int], MTMStore]


def _qdrant(
    config: MTMConfig, dim: int, open_client: Callable[[], QdrantClient], path: Path | None
) -> MTMStore:
    try:
        client = open_client()
        if path is not None:
            restrict_tree(path)
    except (RuntimeError, ValueError, OSError, sqlite3.Error) as exc:
        # The embedded store is locked to one process: say so plainly.
        raise StoreError(f"cannot open the MTM store ({config.location}): {exc}") from exc
    server = STORES.can(config.location, SERVER)
    return QdrantStore(client, dim=dim, prefix=config.collection_prefix, server=server, path=path)


def _on_disk(config: MTMConfig, dim: int) -> MTMStore:
    assert config.path is not None
    path = config.path

    def open_client() -> QdrantClient:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        return QdrantClient(path=str(path))

    return _qdrant(config, dim, open_client, path)


def _in_memory(config: MTMConfig, dim: int) -> MTMStore:
    return _qdrant(config, dim, lambda: QdrantClient(location=":memory:"), None)


def _server(config: MTMConfig, dim: int) -> MTMStore:
    def open_client() -> QdrantClient:
        return QdrantClient(url=config.url, api_key=config.api_key, timeout=int(config.timeout_s))

    return _qdrant(config, dim, open_client, None)


SERVER = "server"  # capability: a Qdrant server (payload indexes, no local files)
STORES: Registry[StoreFactory] = Registry("mtm store")
STORES.register("path", _on_disk)
STORES.register("memory", _in_memory)
STORES.register("url", _server, capabilities={SERVER})
STORES.register("reference", lambda config, dim: ReferenceStore(dim))


def build_mtm_store(config: MTMConfig, dim: int) -> MTMStore:
    """The store ``config.location`` names."""
    return STORES.factory(config.location)(config, dim)
