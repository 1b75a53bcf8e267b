"""Build the MTM store that a configuration names."""

from __future__ import annotations

from qdrant_client import QdrantClient
from tiermem.config import MTMConfig
from tiermem.errors import StoreError
from tiermem.stores.base import MTMStore
from tiermem.stores.qdrant import QdrantStore
from tiermem.stores.reference import ReferenceStore


def build_mtm_store(config: MTMConfig, dim: int) -> MTMStore:
    """``path`` -> embedded Qdrant on disk, ``memory`` -> in-process Qdrant, ``url`` -> a
    Qdrant server, ``reference`` -> the exact in-memory oracle."""
    if config.location == "reference":
        return ReferenceStore(dim)
    try:
        if config.location == "path":
            assert config.path is not None
            config.path.mkdir(parents=True, exist_ok=True)
            client = QdrantClient(path=str(config.path))
        elif config.location == "memory":
            client = QdrantClient(location=":memory:")
        else:
            client = QdrantClient(
                url=config.url, api_key=config.api_key, timeout=int(config.timeout_s)
            )
    except (RuntimeError, ValueError, OSError) as exc:
        # The embedded store is locked to one process: say so plainly.
        raise StoreError(f"cannot open the MTM store ({config.location}): {exc}") from exc
    return QdrantStore(
        client, dim=dim, prefix=config.collection_prefix, server=config.location == "url"
    )
