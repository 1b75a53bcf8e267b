"""The MTM store interface: per-user collections of entries with one dense vector each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from tiermem.embedding.base import Vectors
from tiermem.types import MemoryEntry, SearchFilters


@dataclass(frozen=True, slots=True)
class ScoredEntry:
    """A first-stage candidate: an entry and its cosine similarity to the query."""

    entry: MemoryEntry
    score: float


@dataclass(frozen=True, slots=True)
class HybridHits:
    """First-stage results of one query: by dense cosine and by BM25, each best first."""

    dense: list[ScoredEntry]
    lexical: list[ScoredEntry]


@dataclass(frozen=True, slots=True)
class AccessUpdate:
    """New access statistics for one entry."""

    access_count: int
    last_accessed: datetime


class MTMStore(Protocol):
    """Per-user episodic memory. Every call names the user; no call reaches another user's data.

    Implementations: ``QdrantStore`` (the product) and ``ReferenceStore`` (the exact oracle
    that congruence tests compare it with).
    """

    @property
    def dim(self) -> int: ...

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        """Insert or replace entries (by id) with their vectors, all or none."""
        ...

    def get(self, user_id: str, ids: Sequence[str]) -> list[MemoryEntry]:
        """The entries with these ids that exist for this user, in the order asked."""
        ...

    def list_entries(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        """All of the user's entries matching ``filters``, oldest first."""
        ...

    def search(
        self, user_id: str, vector: Vectors, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        """Up to ``limit`` entries by cosine similarity, best first."""
        ...

    def hybrid_search(
        self, user_id: str, vector: Vectors, text: str, filters: SearchFilters, limit: int
    ) -> HybridHits:
        """Up to ``limit`` entries by cosine and up to ``limit`` by BM25 over the index text."""
        ...

    def set_access(self, user_id: str, updates: Mapping[str, AccessUpdate]) -> None:
        """Record that entries were retrieved."""
        ...

    def set_superseded(self, user_id: str, links: Mapping[str, str | None]) -> None:
        """Point entries at the entry that replaced them (``None`` clears the link)."""
        ...

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        """Remove these entries; unknown ids are ignored."""
        ...

    def drop_user(self, user_id: str) -> None:
        """Remove everything the store holds for this user."""
        ...

    def count(self, user_id: str) -> int: ...

    def close(self) -> None: ...
