"""An MTM store that only reads, for ``tiermem inspect``: whatever path a request takes, the
inspected directory's entries never change.

Reads pass through. Every write raises ``PermissionDeniedError`` before it reaches the store,
so a ``Memory`` over it refuses to open a directory that a crash left with unfinished work (its
recovery would write: ``tiermem serve`` or ``Memory`` finish it). ``record_access`` counts
nothing: looking at a memory does not change what it evicts later.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tiermem.embedding.base import Vectors
from tiermem.errors import PermissionDeniedError
from tiermem.stores.base import (
    AccessUpdate,
    HybridHits,
    MTMStore,
    Retrievals,
    ScoredEntry,
    StoredCollection,
)
from tiermem.types import MemoryEntry, SearchFilters


def _refused(operation: str) -> PermissionDeniedError:
    return PermissionDeniedError(f"{operation}: the data directory is open read-only (inspect)")


class ReadOnlyStore:
    """``inner`` for reading; every write refused (see the module)."""

    def __init__(self, inner: MTMStore) -> None:
        self._inner = inner

    @property
    def dim(self) -> int:
        return self._inner.dim

    # -- reads ---------------------------------------------------------------------------------
    def get(self, user_id: str, ids: Sequence[str]) -> list[MemoryEntry]:
        return self._inner.get(user_id, ids)

    def stored_vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, Vectors]:
        return self._inner.stored_vectors(user_id, ids)

    def list_entries(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        return self._inner.list_entries(user_id, filters)

    def search(
        self, user_id: str, vector: Vectors, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        return self._inner.search(user_id, vector, filters, limit)

    def hybrid_search(
        self, user_id: str, vector: Vectors, text: str, filters: SearchFilters, limit: int
    ) -> HybridHits:
        return self._inner.hybrid_search(user_id, vector, text, filters, limit)

    def count(self, user_id: str) -> int:
        return self._inner.count(user_id)

    def export_user(self, user_id: str) -> StoredCollection:
        return self._inner.export_user(user_id)

    def record_access(
        self, user_id: str, retrievals: Mapping[str, Retrievals]
    ) -> dict[str, AccessUpdate]:
        return {}  # an inspection's reads are not the agent's: nothing counted

    # -- writes --------------------------------------------------------------------------------
    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        raise _refused("upsert")

    def set_superseded(self, user_id: str, links: Mapping[str, str | None]) -> None:
        raise _refused("set_superseded")

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        raise _refused("delete")

    def drop_user(self, user_id: str) -> None:
        raise _refused("drop_user")

    def replace_user(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        raise _refused("replace_user")

    def check_writable(self) -> None:
        raise _refused("write")

    def close(self) -> None:
        self._inner.close()
