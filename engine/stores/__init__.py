"""MTM stores: Qdrant (embedded path, in-memory, or server) and the exact reference store."""

from tiermem.stores.base import MTMStore, ScoredEntry
from tiermem.stores.factory import build_mtm_store

__all__ = ["MTMStore", "ScoredEntry", "build_mtm_store"]
