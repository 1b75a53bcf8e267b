"""The exact in-memory reference store: brute-force cosine over numpy arrays, and BM25 with
qdrant-client's own reference scorer (corpus = the user's whole collection, as in Qdrant).

It is the oracle for congruence tests (the same writes, searches and filters must give the
same ids in the same order as Qdrant) and the baseline in the MTM benchmark.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
from qdrant_client.local.bm25 import DEFAULT_B, DEFAULT_K1, bm25_scores, document_tokens
from tiermem.embedding.base import Vectors
from tiermem.errors import StoreError
from tiermem.render import index_text
from tiermem.stores.base import (
    AccessUpdate,
    HybridHits,
    Retrievals,
    ScoredEntry,
    StoredCollection,
    with_recorded_access,
)
from tiermem.stores.filtering import matches
from tiermem.types import MemoryEntry, SearchFilters


class ReferenceStore:
    """Exact, process-local MTM store."""

    def __init__(self, dim: int) -> None:
        self._dim = dim
        self._entries: dict[str, dict[str, MemoryEntry]] = {}
        self._vectors: dict[str, dict[str, Vectors]] = {}
        self._lock = threading.RLock()

    @property
    def dim(self) -> int:
        return self._dim

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        if vectors.shape != (len(entries), self._dim):
            raise StoreError(f"vectors of shape {vectors.shape} for {len(entries)} entries")
        with self._lock:
            by_id = self._entries.setdefault(user_id, {})
            vecs = self._vectors.setdefault(user_id, {})
            for entry, vector in zip(entries, vectors, strict=True):
                norm = float(np.linalg.norm(vector)) or 1.0
                stored = by_id.get(entry.id)
                by_id[entry.id] = (
                    with_recorded_access(entry, stored.access_count, stored.last_accessed)
                    if stored is not None
                    else entry
                )
                vecs[entry.id] = (vector / norm).astype(np.float32)

    def get(self, user_id: str, ids: Sequence[str]) -> list[MemoryEntry]:
        with self._lock:
            by_id = self._entries.get(user_id, {})
            return [by_id[i] for i in ids if i in by_id]

    def stored_vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, Vectors]:
        with self._lock:
            by_id = self._vectors.get(user_id, {})
            return {i: by_id[i] for i in ids if i in by_id}

    def list_entries(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        with self._lock:
            entries = list(self._entries.get(user_id, {}).values())
        if filters is not None:
            entries = [e for e in entries if matches(e, filters)]
        return sorted(entries, key=lambda e: (e.created_at, e.id))

    def search(
        self, user_id: str, vector: Vectors, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        with self._lock:
            candidates = [e for e in self._entries.get(user_id, {}).values() if matches(e, filters)]
            if not candidates:
                return []
            matrix = np.stack([self._vectors[user_id][e.id] for e in candidates])
        query = vector.reshape(-1).astype(np.float32)
        query = query / (float(np.linalg.norm(query)) or 1.0)
        scores = matrix @ query
        order = sorted(range(len(candidates)), key=lambda i: (-float(scores[i]), candidates[i].id))
        return [ScoredEntry(candidates[i], float(scores[i])) for i in order[:limit]]

    def hybrid_search(
        self, user_id: str, vector: Vectors, text: str, filters: SearchFilters, limit: int
    ) -> HybridHits:
        return HybridHits(
            self.search(user_id, vector, filters, limit), self._bm25(user_id, text, filters, limit)
        )

    def _bm25(
        self, user_id: str, text: str, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        if not text.strip():
            return []
        with self._lock:
            entries = list(self._entries.get(user_id, {}).values())
        documents = {
            i: tokens for i, e in enumerate(entries) if (tokens := document_tokens([index_text(e)]))
        }
        scores = bm25_scores(documents, text, DEFAULT_K1, DEFAULT_B)
        order = sorted(scores, key=lambda i: (-scores[i], i))
        ranked = [
            ScoredEntry(entries[i], float(np.float32(scores[i])))
            for i in order
            if matches(entries[i], filters)
        ]
        return ranked[:limit]

    def record_access(
        self, user_id: str, retrievals: Mapping[str, Retrievals]
    ) -> dict[str, AccessUpdate]:
        updates: dict[str, AccessUpdate] = {}
        with self._lock:
            by_id = self._entries.get(user_id, {})
            for entry_id, got in retrievals.items():
                entry = by_id.get(entry_id)
                if entry is None:  # deleted since the search found it
                    continue
                update = AccessUpdate(entry.access_count + got.times, got.last)
                by_id[entry_id] = replace(
                    entry, access_count=update.access_count, last_accessed=got.last
                )
                updates[entry_id] = update
        return updates

    def set_superseded(self, user_id: str, links: Mapping[str, str | None]) -> None:
        with self._lock:
            by_id = self._entries.get(user_id, {})
            for entry_id, new_id in links.items():
                if entry_id in by_id:
                    by_id[entry_id] = replace(by_id[entry_id], superseded_by=new_id)

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        with self._lock:
            for entry_id in ids:
                self._entries.get(user_id, {}).pop(entry_id, None)
                self._vectors.get(user_id, {}).pop(entry_id, None)

    def drop_user(self, user_id: str) -> None:
        with self._lock:
            self._entries.pop(user_id, None)
            self._vectors.pop(user_id, None)

    def count(self, user_id: str) -> int:
        with self._lock:
            return len(self._entries.get(user_id, {}))

    def export_user(self, user_id: str) -> StoredCollection:
        """In process, a collection lives as long as its store, whose embedder wrote it: it
        records none."""
        with self._lock:
            return StoredCollection(None, self.list_entries(user_id), user_id in self._entries)

    def replace_user(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        with self._lock:
            self.drop_user(user_id)
            self.upsert(user_id, entries, vectors)

    def check_writable(self) -> None:
        """In memory: always writable."""

    def close(self) -> None:
        with self._lock:
            self._entries.clear()
            self._vectors.clear()
