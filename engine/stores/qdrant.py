"""The MTM store on Qdrant, through qdrant-client.

The same code serves the embedded default (``QdrantClient(path=...)``), tests
(``":memory:"``) and a Qdrant server (``url=``). One collection per user, named by
``collection_name``. Every point read back is also checked against its ``user_id`` payload,
so a bug in naming could never hand out another user's entries. The check runs on the
returned points rather than as a filter condition: embedded Qdrant evaluates each condition
in Python for every point (~17 us a point), so a redundant condition would double the cost
of every search there.

Every failure of the client is a ``StoreError``, including the embedded client's own SQLite
and file errors (a full or read-only disk). The embedded store's files are its owner's alone
(0600, directories 0700), and a dropped user's collection directory is checked to be gone.

A read can meet a collection that is gone: ``forget_user`` dropped it after the read looked it
up (another thread or, on a server, another process). Such a read answers as for a user with
no memories, never with an error: if a call fails and the collection no longer exists, the
read returns its empty result.

A store built with an embedder's name records it (and the dimension) in the metadata of every
collection it creates, and refuses a collection that another embedder wrote with
``EmbedderMismatchError`` (see ``tiermem.stores.records``); one with no record is adopted.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse
from tiermem.embedding.base import Vectors
from tiermem.errors import StoreError
from tiermem.stores.base import (
    AccessUpdate,
    EmbedderRecord,
    HybridHits,
    Retrievals,
    ScoredEntry,
    StoredCollection,
    with_recorded_access,
)
from tiermem.stores.files import probe_writes, restrict_tree
from tiermem.stores.filtering import matches, to_qdrant_filter
from tiermem.stores.lexical_index import LexicalIndex
from tiermem.stores.naming import collection_name
from tiermem.stores.payload import (
    INDEX_TEXT,
    access_of,
    entry_to_payload,
    owned_entry,
    owned_vectors,
    valid_point_id,
)
from tiermem.stores.records import (
    judge_record,
    read_record,
    record_metadata,
    reindex_state,
    staging_name,
)
from tiermem.types import MemoryEntry, SearchFilters

logger = logging.getLogger(__name__)

DENSE = "dense"
OVERFETCH = 4  # embedded: unfiltered candidates per wanted hit, checked in Python first
_PAGE = 512
_T = TypeVar("_T")
# What qdrant-client raises for a failed call, locally or over the wire. The embedded client
# raises KeyError for a point that is not there (set_payload on a just-deleted point).
_QDRANT_ERRORS = (
    UnexpectedResponse,
    ResponseHandlingException,
    ValueError,
    RuntimeError,
    OSError,
    KeyError,
    sqlite3.Error,  # the embedded client's storage: "database or disk is full", read-only
)
_PROBE_BYTES = 16_384  # what the readiness probe writes (and removes) under an embedded store
_ACCESS_FIELDS = ["user_id", "access_count", "last_accessed"]


class _CollectionGoneError(StoreError):
    """A read's collection was dropped under it; the public read returns its empty result
    (a ``StoreError`` should one ever escape)."""


class QdrantStore:
    """Per-user MTM collections in Qdrant (384-d cosine by default).

    Every call runs under one lock per store (the embedded client is not safe across
    threads), so a read-modify-write such as ``record_access`` is atomic within the process,
    for the embedded and the server client alike. Processes sharing a server are not
    serialised: their access counts can lose increments (see ``MTMStore``)."""

    def __init__(
        self,
        client: QdrantClient,
        *,
        dim: int,
        prefix: str,
        server: bool,
        path: Path | None = None,
        embedder: str | None = None,
    ) -> None:
        """``path``: the embedded store's directory (``None``: in memory, or a server).
        ``embedder``: the name of the embedder whose vectors this store writes, recorded with
        each collection and checked on each opened (``None``: nothing recorded or checked)."""
        self._client = client
        self._path = path
        self._dim = dim
        self._record = EmbedderRecord(embedder, dim) if embedder is not None else None
        self._prefix = prefix
        self._server = server  # payload indexes only exist on a server
        self._known: set[str] = set()
        self._lock = threading.RLock()  # the embedded client is not safe across threads
        # Embedded only: BM25 postings per collection, built on first use, kept in step.
        self._lexical: dict[str, LexicalIndex] = {}

    @property
    def dim(self) -> int:
        return self._dim

    def _call(self, what: str, fn: Callable[[], _T]) -> _T:
        try:
            with self._lock:
                return fn()
        except _QDRANT_ERRORS as exc:
            raise StoreError(f"qdrant {what} failed: {exc}") from exc

    def _read(self, name: str, what: str, fn: Callable[[], _T]) -> _T:
        """``_call`` for a read of collection ``name``: ``_CollectionGoneError`` if it failed
        because the collection was dropped since the read looked it up."""
        try:
            return self._call(what, fn)
        except StoreError as exc:
            if self._still_there(name):
                raise
            raise _CollectionGoneError(f"collection {name} was dropped during a read") from exc

    def _still_there(self, name: str) -> bool:
        """Whether collection ``name`` exists (``True`` when that cannot be told: the
        failure then stands as it is); one that is gone is forgotten here too."""
        with self._lock:
            try:
                exists = self._call(
                    "collection_exists", lambda: self._client.collection_exists(name)
                )
            except StoreError:
                return True
            if not exists:
                self._known.discard(name)
                self._lexical.pop(name, None)
            return exists

    def _collection(self, user_id: str, *, create: bool) -> str | None:
        name = collection_name(self._prefix, user_id)
        with self._lock:  # no drop between finding the collection and checking it
            if name in self._known:
                return name
            if self._call("collection_exists", lambda: self._client.collection_exists(name)):
                self._check_schema(name, user_id)
                self._known.add(name)
                return name
            if self._record is not None:
                self._refuse_interrupted_reindex(staging_name(name))
            if not create:
                return None
            metadata = record_metadata(self._record)
            self._call("create_collection", lambda: self._create(name, metadata))
            self._call("restrict", self._restrict)
            self._known.add(name)
            return name

    def _create(self, name: str, metadata: dict[str, Any]) -> None:
        self._client.create_collection(
            name,
            vectors_config={
                DENSE: models.VectorParams(size=self._dim, distance=models.Distance.COSINE)
            },
            metadata=metadata,
        )
        self._create_text_index(name)
        if self._server:
            for key, schema in (
                ("user_id", models.PayloadSchemaType.KEYWORD),
                ("kind", models.PayloadSchemaType.KEYWORD),
                ("session_id", models.PayloadSchemaType.KEYWORD),
                ("time_ts", models.PayloadSchemaType.FLOAT),
            ):
                self._client.create_payload_index(name, key, schema)

    def _create_text_index(self, name: str) -> None:
        # BM25 over the index text: embedded Qdrant honours a scored text index too.
        self._client.create_payload_index(
            name,
            INDEX_TEXT,
            models.TextIndexParams(
                type=models.TextIndexType.TEXT,
                scoring=models.TextScoringParams(type=models.TextScoringType.BM25),
            ),
        )

    def _check_schema(self, name: str, user_id: str) -> None:
        info = self._call("get_collection", lambda: self._client.get_collection(name))
        vectors = info.config.params.vectors
        size = vectors[DENSE].size if isinstance(vectors, dict) and DENSE in vectors else None
        if self._record is not None:
            self._check_record(name, user_id, info.config.metadata, size)
        if size != self._dim:
            raise StoreError(
                f"collection {name} holds vectors of size {size}, the embedder makes {self._dim}"
            )
        if INDEX_TEXT not in (info.payload_schema or {}):
            self._call("create_payload_index", lambda: self._create_text_index(name))

    def _check_record(
        self, name: str, user_id: str, metadata: dict[str, Any] | None, size: int | None
    ) -> None:
        assert self._record is not None
        if judge_record(name, user_id, metadata, size, self._record) == "adopt":
            adopted = record_metadata(self._record)
            self._call(
                "update_collection",
                lambda: self._client.update_collection(name, metadata=adopted),
            )
            logger.info("collection %s adopted by embedder %s", name, self._record)

    def _refuse_interrupted_reindex(self, staging: str) -> None:
        """A user's collection is missing, and a finished staging copy of it is there: a
        reindex stopped between dropping the collection and filling it again."""
        if self._staged_complete(staging):
            raise StoreError(
                f"a `tiermem reindex` of this user stopped before it rebuilt the collection "
                f"from its finished copy {staging}; run it again for this user"
            )

    def _staged_complete(self, staging: str) -> bool:
        if not self._call("collection_exists", lambda: self._client.collection_exists(staging)):
            return False
        info = self._call("get_collection", lambda: self._client.get_collection(staging))
        return reindex_state(info.config.metadata) == "complete"

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        if not entries:
            return
        if vectors.shape != (len(entries), self._dim):
            raise StoreError(f"vectors of shape {vectors.shape} for {len(entries)} entries")
        name = self._collection(user_id, create=True)
        assert name is not None
        with self._lock:  # the stored access statistics cannot change before the write
            stored = self._access_stats(name, user_id, [e.id for e in entries])
            points = [
                models.PointStruct(
                    id=e.id,
                    vector={DENSE: v.tolist()},
                    payload=entry_to_payload(
                        with_recorded_access(e, *stored[e.id]) if e.id in stored else e
                    ),
                )
                for e, v in zip(entries, vectors, strict=True)
            ]
            self._call("upsert", lambda: self._client.upsert(name, points=points, wait=True))
            index = self._lexical.get(name)
            if index is not None:
                index.upsert_many((str(p.id), str((p.payload or {})[INDEX_TEXT])) for p in points)

    def _reading(self, user_id: str, empty: _T, read: Callable[[str], _T]) -> _T:
        """``read`` of the user's collection (by name), or ``empty`` for a user with none,
        or whose collection was dropped during the read."""
        name = self._collection(user_id, create=False)
        if name is None:
            return empty
        try:
            return read(name)
        except _CollectionGoneError:
            return empty

    def get(self, user_id: str, ids: Sequence[str]) -> list[MemoryEntry]:
        wanted = [i for i in ids if valid_point_id(i)]
        if not wanted:
            self._collection(user_id, create=False)  # a store error is raised all the same
            return []

        def read(name: str) -> list[MemoryEntry]:
            records = self._read(
                name, "retrieve", lambda: self._client.retrieve(name, ids=wanted, with_payload=True)
            )
            found = {str(r.id): owned_entry(user_id, r.id, r.payload) for r in records}
            return [e for e in (found.get(i) for i in wanted) if e is not None]

        return self._reading(user_id, [], read)

    def stored_vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, Vectors]:
        wanted = [i for i in ids if valid_point_id(i)]
        if not wanted:
            self._collection(user_id, create=False)  # a store error is raised all the same
            return {}

        def read(name: str) -> dict[str, Vectors]:
            records = self._read(
                name,
                "retrieve",
                lambda: self._client.retrieve(
                    name, ids=wanted, with_payload=True, with_vectors=[DENSE]
                ),
            )
            return owned_vectors(user_id, ((r.id, r.vector, r.payload) for r in records), DENSE)

        return self._reading(user_id, {}, read)

    def list_entries(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        query_filter = to_qdrant_filter(filters)
        return self._reading(user_id, [], lambda name: self._scroll(name, user_id, query_filter))

    def _scroll(
        self, name: str, user_id: str, query_filter: models.Filter | None
    ) -> list[MemoryEntry]:
        """The user's entries in collection ``name`` under ``query_filter``, oldest first."""

        def page(start: Any) -> tuple[list[models.Record], Any]:
            return self._client.scroll(
                name, scroll_filter=query_filter, limit=_PAGE, offset=start, with_payload=True
            )

        entries: list[MemoryEntry] = []
        offset: Any = None
        while True:
            records, offset = self._read(name, "scroll", lambda: page(offset))  # noqa: B023
            entries.extend(e for r in records if (e := owned_entry(user_id, r.id, r.payload)))
            if offset is None:
                break
        entries.sort(key=lambda e: (e.created_at, e.id))
        return entries

    def search(
        self, user_id: str, vector: Vectors, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        return self._reading(
            user_id, [], lambda name: self._dense(name, user_id, vector, filters, limit)
        )

    def _dense(
        self, name: str, user_id: str, vector: Vectors, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        """Dense top-``limit`` under ``filters``. Embedded Qdrant evaluates a filter in Python
        for every point, so there the unfiltered top ``4 * limit`` is checked in Python first:
        if ``limit`` of them pass, they are exactly the filtered top ``limit`` (every point
        further down scores lower); only otherwise does the filtered query run."""
        query = vector.reshape(-1).tolist()

        def ask(query_filter: models.Filter | None, n: int) -> list[ScoredEntry]:
            response = self._read(
                name,
                "query_points",
                lambda: self._client.query_points(
                    name,
                    query=query,
                    using=DENSE,
                    query_filter=query_filter,
                    limit=n,
                    with_payload=True,
                ),
            )
            return self._scored(user_id, response.points)

        query_filter = to_qdrant_filter(filters)
        if self._server or query_filter is None:
            return ask(query_filter, limit)
        passed = [h for h in ask(None, OVERFETCH * limit) if matches(h.entry, filters)]
        if len(passed) >= limit:
            return passed[:limit]
        return ask(query_filter, limit)

    def hybrid_search(
        self, user_id: str, vector: Vectors, text: str, filters: SearchFilters, limit: int
    ) -> HybridHits:
        """Dense and BM25 in one round trip (a batch of two queries); ``text`` is the BM25
        query (see ``tiermem.lexical``): when empty, only the dense query runs."""
        return self._reading(
            user_id,
            HybridHits([], []),
            lambda name: self._hybrid(name, user_id, vector, text, filters, limit),
        )

    def _hybrid(
        self,
        name: str,
        user_id: str,
        vector: Vectors,
        text: str,
        filters: SearchFilters,
        limit: int,
    ) -> HybridHits:
        query_filter = to_qdrant_filter(filters)
        requests = [
            models.QueryRequest(
                query=vector.reshape(-1).tolist(),
                using=DENSE,
                filter=query_filter,
                limit=limit,
                with_payload=True,
            ),
        ]
        if text.strip():
            requests.append(
                models.QueryRequest(
                    query=models.TextQuery(text=text),
                    using=INDEX_TEXT,
                    filter=query_filter,
                    limit=limit,
                    with_payload=True,
                )
            )
        if self._server:
            responses = self._read(
                name,
                "query_batch_points",
                lambda: self._client.query_batch_points(name, requests),
            )
            lexical = self._scored(user_id, responses[1].points) if len(responses) > 1 else []
            return HybridHits(self._scored(user_id, responses[0].points), lexical)
        dense = self._dense(name, user_id, vector, filters, limit)
        lexical = self._embedded_bm25(name, user_id, text, filters, limit) if text.strip() else []
        return HybridHits(dense, lexical)

    def _embedded_bm25(
        self, name: str, user_id: str, text: str, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        """BM25 from the in-process postings; the filter is checked on the best-scored
        points, fetched a few at a time, until ``limit`` pass."""
        with self._lock:
            scores = self._lexical_index(name).scores(text)
        ranked = sorted(scores, key=lambda d: (-np.float32(scores[d]), d))
        out: list[ScoredEntry] = []
        step = max(2 * limit, 16)
        for start in range(0, len(ranked), step):
            ids: list[models.ExtendedPointId] = list(ranked[start : start + step])
            records = self._read(
                name,
                "retrieve",
                lambda: self._client.retrieve(name, ids=ids, with_payload=True),  # noqa: B023
            )
            by_id = {str(r.id): owned_entry(user_id, r.id, r.payload) for r in records}
            for doc_id in ids:
                entry = by_id.get(str(doc_id))
                if entry is not None and matches(entry, filters):
                    out.append(ScoredEntry(entry, float(np.float32(scores[str(doc_id)]))))
                    if len(out) == limit:
                        return out
        return out

    def _lexical_index(self, name: str) -> LexicalIndex:
        """The collection's postings, built from its stored index texts on first use."""
        index = self._lexical.get(name)
        if index is not None:
            return index
        index = LexicalIndex()

        def page(start: Any) -> tuple[list[models.Record], Any]:
            return self._client.scroll(name, limit=_PAGE, offset=start, with_payload=[INDEX_TEXT])

        offset: Any = None
        while True:
            records, offset = self._read(name, "scroll", lambda: page(offset))  # noqa: B023
            index.upsert_many(
                (str(r.id), str((r.payload or {}).get(INDEX_TEXT, ""))) for r in records
            )
            if offset is None:
                break
        self._lexical[name] = index
        return index

    def _scored(self, user_id: str, points: list[models.ScoredPoint]) -> list[ScoredEntry]:
        return [
            ScoredEntry(entry, float(p.score))
            for p in points
            if (entry := owned_entry(user_id, p.id, p.payload)) is not None
        ]

    def _access_stats(
        self, name: str, user_id: str, ids: Sequence[str]
    ) -> dict[str, tuple[int, datetime | None]]:
        """(access count, last access) of the points among ``ids`` that exist."""
        wanted: list[models.ExtendedPointId] = [i for i in ids if valid_point_id(i)]
        if not wanted:
            return {}
        records = self._read(
            name,
            "retrieve",
            lambda: self._client.retrieve(name, ids=wanted, with_payload=_ACCESS_FIELDS),
        )
        return access_of(user_id, ((r.id, r.payload) for r in records))

    def record_access(
        self, user_id: str, retrievals: Mapping[str, Retrievals]
    ) -> dict[str, AccessUpdate]:
        with self._lock:  # read, add, write: no other call of this store in between
            # {} for a user forgotten since the search, here or by another process meanwhile
            return self._reading(
                user_id, {}, lambda name: self._record_access(name, user_id, retrievals)
            )

    def _record_access(
        self, name: str, user_id: str, retrievals: Mapping[str, Retrievals]
    ) -> dict[str, AccessUpdate]:
        read = self._access_stats(name, user_id, list(retrievals))
        updates = {
            i: AccessUpdate(n + retrievals[i].times, retrievals[i].last)
            for i, (n, _) in read.items()
        }
        try:
            self._write_access(name, updates)
        except StoreError:
            # Only another process can delete a point between the read and the write
            # (a shared server): drop what is gone, write again what did not land.
            now = self._access_stats(name, user_id, list(updates))
            updates = {i: u for i, u in updates.items() if i in now}
            self._write_access(name, {i: u for i, u in updates.items() if now[i][0] == read[i][0]})
        return updates

    def _write_access(self, name: str, updates: Mapping[str, AccessUpdate]) -> None:
        self._write_payloads(
            name,
            {
                i: {"access_count": u.access_count, "last_accessed": u.last_accessed.isoformat()}
                for i, u in updates.items()
            },
        )

    def set_superseded(self, user_id: str, links: Mapping[str, str | None]) -> None:
        self._set_payloads(user_id, {i: {"superseded_by": new} for i, new in links.items()})

    def _set_payloads(self, user_id: str, payloads: Mapping[str, dict[str, Any]]) -> None:
        name = self._collection(user_id, create=False)
        if name is not None:
            self._write_payloads(name, payloads)

    def _write_payloads(self, name: str, payloads: Mapping[str, dict[str, Any]]) -> None:
        if not payloads:
            return
        operations: list[models.UpdateOperation] = [
            models.SetPayloadOperation(set_payload=models.SetPayload(payload=p, points=[i]))
            for i, p in payloads.items()
        ]
        self._call(
            "batch_update_points", lambda: self._client.batch_update_points(name, operations)
        )

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        name = self._collection(user_id, create=False)
        wanted: list[models.ExtendedPointId] = [i for i in ids if valid_point_id(i)]
        if name is None or not wanted:
            return
        with self._lock:
            self._call(
                "delete",
                lambda: self._client.delete(
                    name, points_selector=models.PointIdsList(points=wanted), wait=True
                ),
            )
            index = self._lexical.get(name)
            if index is not None:
                for point_id in wanted:
                    index.remove(str(point_id))

    def drop_user(self, user_id: str) -> None:
        name = collection_name(self._prefix, user_id)
        with self._lock:
            self._drop(name)
            self._drop(staging_name(name))  # what a stopped reindex left holds the user's too
            self._call("restrict", self._restrict)  # meta.json is rewritten on every drop

    def _drop(self, name: str) -> None:
        self._known.discard(name)
        self._lexical.pop(name, None)
        if self._call("collection_exists", lambda: self._client.collection_exists(name)):
            self._call("delete_collection", lambda: self._client.delete_collection(name))
        # the embedded client removes the directory ignoring errors: check that it did
        gone = self._path is None or not (self._path / "collection" / name).exists()
        if not gone:
            raise StoreError(f"the files of collection {name} could not be removed")

    def export_user(self, user_id: str) -> StoredCollection:
        """The user's entries and the embedder their collection records, unchecked; from the
        finished staging copy of a reindex that stopped, where there is one."""
        name = collection_name(self._prefix, user_id)
        staging = staging_name(name)
        with self._lock:
            source = staging if self._staged_complete(staging) else name
            if not self._call("collection_exists", lambda: self._client.collection_exists(source)):
                return StoredCollection(None, [], found=False)
            info = self._call("get_collection", lambda: self._client.get_collection(source))
            return StoredCollection(
                read_record(info.config.metadata), self._scroll(source, user_id, None)
            )

    def replace_user(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        """Stage the new points in a collection of their own, then rebuild the user's from
        them (see ``tiermem.stores.records`` for what a stop in between leaves)."""
        if vectors.shape != (len(entries), self._dim):
            raise StoreError(f"vectors of shape {vectors.shape} for {len(entries)} entries")
        name = collection_name(self._prefix, user_id)
        staging = staging_name(name)
        points = [
            models.PointStruct(id=e.id, vector={DENSE: v.tolist()}, payload=entry_to_payload(e))
            for e, v in zip(entries, vectors, strict=True)
        ]
        with self._lock:
            self._drop(staging)
            self._fill(staging, points, "staging", "complete")
            self._drop(name)
            self._fill(name, points, "filling", None)
            self._drop(staging)
            self._known.add(name)
            self._call("restrict", self._restrict)

    def _fill(
        self,
        name: str,
        points: list[models.PointStruct],
        state: Literal["staging", "filling"],
        done: Literal["complete"] | None,
    ) -> None:
        """Create ``name`` marked ``state``, write ``points``, then mark it ``done``."""
        creating = record_metadata(self._record, state)
        self._call("create_collection", lambda: self._create(name, creating))
        for start in range(0, len(points), _PAGE):
            page = points[start : start + _PAGE]
            self._call("upsert", lambda: self._client.upsert(name, points=page, wait=True))  # noqa: B023
        finished = record_metadata(self._record, done)
        self._call(
            "update_collection", lambda: self._client.update_collection(name, metadata=finished)
        )

    def count(self, user_id: str) -> int:
        return self._reading(
            user_id,
            0,
            lambda name: self._read(
                name, "count", lambda: self._client.count(name, exact=True).count
            ),
        )

    def check_writable(self) -> None:
        """A server: it answers. Embedded on disk: a few pages can be written and synced in
        its directory (the probe file is removed again)."""
        if self._path is None:
            if self._server:
                self._call("get_collections", self._client.get_collections)
            return
        try:
            probe_writes(self._path, _PROBE_BYTES)
        except OSError as exc:
            raise StoreError(f"the MTM store's directory cannot be written: {exc}") from exc

    def _restrict(self) -> None:
        """The embedded store's files to their owner only (its client creates them 0644)."""
        if self._path is not None:
            restrict_tree(self._path)

    def close(self) -> None:
        with self._lock:
            self._client.close()
