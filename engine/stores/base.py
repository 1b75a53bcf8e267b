"""The MTM store interface: per-user collections of entries with one dense vector each."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
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
class Retrievals:
    """Retrievals of one entry to count (``MTMStore.record_access``): how many, the last when."""

    times: int
    last: datetime


@dataclass(frozen=True, slots=True)
class HybridHits:
    """First-stage results of one query: by dense cosine and by BM25, each best first, equal
    scores in one order (``best_first``), whichever engine scored them."""

    dense: list[ScoredEntry]
    lexical: list[ScoredEntry]

    def __post_init__(self) -> None:
        object.__setattr__(self, "dense", best_first(self.dense))
        object.__setattr__(self, "lexical", best_first(self.lexical))


# Scores equal to this many decimals are a tie: one vector scored against copies of one
# text comes out 1e-7 apart, in an order that depends on the engine's arithmetic (a batched
# product in local mode and the reference store, SIMD in Edge), not on the text.
TIE_DIGITS = 5


def _tie(score: float) -> float:
    """``score`` as ties compare it (``TIE_DIGITS`` decimals)."""
    return round(score, TIE_DIGITS)


def best_first(found: Sequence[ScoredEntry]) -> list[ScoredEntry]:
    """``found`` best first; equal scores (to ``TIE_DIGITS`` decimals) oldest first, then by
    kind, text and id. Engines order ties their own way (an entry and its sentence, the same
    words said twice, score alike under BM25): Qdrant through qdrant-client by insertion, Edge
    by its segments. With one order for ties, every store ranks alike and so delivers alike;
    ids come last, as they are derived from the stored user id (a tenant's user under the
    service, the caller's embedded), so embedded and served memories order ties alike too.

    >>> from datetime import UTC, datetime
    >>> from tiermem.types import MemoryEntry, MemoryKind
    >>> at = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = [ScoredEntry(MemoryEntry(i, "u", "x", MemoryKind.TURN, at, at), v)
    ...      for i, v in (("b", 0.5), ("c", 0.9), ("a", 0.5))]
    >>> [x.entry.id for x in best_first(s)]
    ['c', 'a', 'b']
    """
    return sorted(
        found,
        key=lambda s: (
            -_tie(s.score),
            s.entry.created_at,
            s.entry.kind.value,
            s.entry.text,
            s.entry.id,
        ),
    )


@dataclass(frozen=True, slots=True)
class EmbedderRecord:
    """The embedder whose vectors a collection holds: its ``Embedder.name`` and dimension."""

    name: str
    dim: int

    def __str__(self) -> str:
        return f"{self.name} ({self.dim}-d)"


@dataclass(frozen=True, slots=True)
class StoredCollection:
    """A user's entries as stored, the embedder their collection records (``None``: none),
    and whether the user has a collection at all."""

    embedder: EmbedderRecord | None
    entries: list[MemoryEntry]
    found: bool = True


@dataclass(frozen=True, slots=True)
class AccessUpdate:
    """New access statistics for one entry."""

    access_count: int
    last_accessed: datetime


def with_recorded_access(
    entry: MemoryEntry, stored_count: int, stored_last: datetime | None
) -> MemoryEntry:
    """``entry`` as an upsert over a stored entry writes it: access statistics only grow, so
    an entry read before a search counted an access never takes the count back.

    >>> from datetime import UTC, datetime
    >>> from tiermem.types import MemoryKind
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> e = MemoryEntry("i", "u", "old text", MemoryKind.TURN, t, t, access_count=1)
    >>> with_recorded_access(e, 3, t).access_count
    3
    """
    last = entry.last_accessed
    if stored_last is not None and (last is None or stored_last > last):
        last = stored_last
    count = max(entry.access_count, stored_count)
    if (count, last) == (entry.access_count, entry.last_accessed):
        return entry
    return replace(entry, access_count=count, last_accessed=last)


class MTMStore(Protocol):
    """Per-user episodic memory. Every call names the user; no call reaches another user's data.

    Implementations: ``QdrantStore`` (the product) and ``ReferenceStore`` (the exact oracle
    that congruence tests compare it with).

    A store built for an embedder (``build_mtm_store(config, dim, embedder_name)``) records
    that embedder with each collection it creates, and refuses to open one that another
    embedder wrote (``EmbedderMismatchError``). A collection with no record is adopted: the
    store's embedder is recorded.

    Concurrency: every call is safe from any thread of one process, and the access counter
    is exact there (``record_access`` reads, adds and writes under the store's lock, and an
    upsert never lowers it). Across processes sharing one Qdrant server, concurrent
    ``record_access`` calls on the same entry can lose increments: the store has no
    cross-process lock. (Embedded Qdrant locks its directory to one process.)
    """

    @property
    def dim(self) -> int: ...

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        """Insert or replace entries (by id) with their vectors, all or none. A replaced
        entry keeps the larger access count and the later last access of the two (see
        ``with_recorded_access``): access statistics belong to the store."""
        ...

    def get(self, user_id: str, ids: Sequence[str]) -> list[MemoryEntry]:
        """The entries with these ids that exist for this user, in the order asked."""
        ...

    def stored_vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, Vectors]:
        """The stored (unit) vectors of the entries with these ids that exist for this user,
        by id: what a search by an entry's own meaning starts from, without embedding it
        again."""
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

    def record_access(
        self, user_id: str, retrievals: Mapping[str, Retrievals]
    ) -> dict[str, AccessUpdate]:
        """Count each entry's retrievals, atomically (read, add, write): its count grows by
        ``times``, its last access becomes ``last``. Ids the user no longer has (deleted
        since they were found) are skipped, not an error. Returns the new statistics of the
        entries that were counted."""
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

    def export_user(self, user_id: str) -> StoredCollection:
        """Every entry of the user as stored, oldest first, whatever embedder wrote the
        collection (every other call refuses one that another embedder wrote): what
        ``tiermem reindex`` embeds again."""
        ...

    def replace_user(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        """Replace the user's collection by one holding exactly ``entries`` with ``vectors``,
        recorded as written by this store's embedder (``tiermem reindex``). Access statistics
        are the entries' own. Interrupted, it leaves what a second call finishes."""
        ...

    def check_writable(self) -> None:
        """Raise ``StoreError`` when a write could not succeed now (a store down, a full or
        read-only disk under an embedded store); for readiness checks."""
        ...

    def close(self) -> None: ...


# Entries fetched past a limit, so that a group of equal scores at the cut comes back whole
# and ``best_first`` (not the engine) picks which of it stays: an entry and its sentence, or
# words said several times, tie. A group still open at the end of what was fetched (under
# BM25, dozens of entries that share one word with a question at one length) is left out:
# it is the tail of the ranking, and each engine would keep its own members of it. Fetching
# it whole instead (up to 1,000) made context() twice as slow at 1,200 tokens on real chats.
TIE_ROOM = 8


def _cut(ranked: Sequence[ScoredEntry], limit: int, fetched: int) -> list[ScoredEntry]:
    """The best ``limit`` of ``ranked`` (best first, ``fetched`` asked for), without the group
    of equal scores at the cut when it may go on past what came back."""
    if limit <= 0:
        return []
    kept = list(ranked[:limit])
    if len(ranked) > limit and len(ranked) >= fetched:
        at_cut = _tie(ranked[limit - 1].score)
        if _tie(ranked[-1].score) == at_cut:
            return [s for s in kept if _tie(s.score) != at_cut]
    return kept


def nearest(
    store: MTMStore, user_id: str, vector: Vectors, filters: SearchFilters, limit: int
) -> list[ScoredEntry]:
    """``store.search``'s best ``limit`` entries, ties in one order on every store."""
    fetched = limit + TIE_ROOM
    return _cut(best_first(store.search(user_id, vector, filters, fetched)), limit, fetched)


def hybrid_nearest(
    store: MTMStore, user_id: str, vector: Vectors, text: str, filters: SearchFilters, limit: int
) -> HybridHits:
    """``store.hybrid_search``'s best ``limit`` of each list, ties in one order on every
    store."""
    fetched = limit + TIE_ROOM
    hits = store.hybrid_search(user_id, vector, text, filters, fetched)
    return HybridHits(_cut(hits.dense, limit, fetched), _cut(hits.lexical, limit, fetched))
