"""Build the MTM store that a configuration names."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from qdrant_client import QdrantClient
from tiermem.config import MTMConfig
from tiermem.errors import StoreError
from tiermem.stores.base import MTMStore
from tiermem.stores.qdrant import QdrantStore, restrict_tree
from tiermem.stores.reference import ReferenceStore


def build_mtm_store(config: MTMConfig, dim: int) -> MTMStore:
    """``path`` -> embedded Qdrant on disk, ``memory`` -> in-process Qdrant, ``url`` -> a
    Qdrant server, ``reference`` -> the exact in-memory oracle."""
    if config.location == "reference":
        return ReferenceStore(dim)
    path: Path | None = None
    try:
        if config.location == "path":
            assert config.path is not None
            path = config.path
            path.mkdir(mode=0o700, parents=True, exist_ok=True)
            client = QdrantClient(path=str(path))
            restrict_tree(path)
        elif config.location == "memory":
            client = QdrantClient(location=":memory:")
        else:
            client = QdrantClient(
                url=config.url, api_key=config.api_key, timeout=int(config.timeout_s)
            )
    except (RuntimeError, ValueError, OSError, sqlite3.Error) as exc:
        # The embedded store is locked to one process: say so plainly.
        raise StoreError(f"cannot open the MTM store ({config.location}): {exc}") from exc
    return QdrantStore(
        client,
        dim=dim,
        prefix=config.collection_prefix,
        server=config.location == "url",
        path=path,
    )
