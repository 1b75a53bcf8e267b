"""The MTM store on Qdrant Edge: Qdrant's own engine in process, one shard per user.

Each user's entries live in a shard of their own, a directory under the store's root named
like a server collection (``collection_name``: a digest, never the user id). The schema is
the server path's (``tiermem.stores.edge_schema``): dense cosine, and BM25 over the index text
with the server's tokenizer; ``hybrid_search`` returns both lists and the engine fuses them,
as it does for every store. Every point read back is checked against its ``user_id`` payload,
as in ``QdrantStore``. The embedder a shard was written by, and a reindex's state, are kept
in the shard's ``tiermem.json`` (``tiermem.stores.records`` says what they mean).

Shards are opened on first use, each locked to this process while open, at most
``max_open`` at once (``tiermem.stores.edge_shards``). Writes are durable through Edge's
write-ahead log: a process killed at any point reopens with every acknowledged write.
``drop_user`` removes the shard's directory, segments, WAL and all.

Optimize policy. Edge 0.9.0 has no background optimizer, and ``optimize()`` holds the GIL
until it is done, so no ``add()``, ``search()`` or ``context()`` ever calls it. The online path
never builds HNSW: nothing ever waits on a graph being built, and a plain shard ranks as the
exact store does, to the score. A shard that saw a delete is optimized when it is closed
(evicted from the open set, or the store closed), and there Edge plans only a vacuum of a
segment at least a fifth deleted (Qdrant's ``deleted_threshold``), else returns at once; so
the longest pause is one vacuum of one shard, at most once per fifth of it deleted (a vacuum
of a segment with a graph leaves it plain). ``build_graphs`` (``tiermem optimize``, with the
memory closed) builds the graph a Qdrant server would in every shard past its threshold.

>>> import tempfile
>>> from datetime import UTC, datetime
>>> import numpy as np
>>> from tiermem.types import MemoryEntry, MemoryKind, SearchFilters
>>> store = EdgeStore(Path(tempfile.mkdtemp()), dim=3, prefix="t_")
>>> t = datetime(2026, 1, 1, tzinfo=UTC)
>>> entry = MemoryEntry("00000000-0000-4000-8000-000000000001", "ana", "I play the oboe",
...                     MemoryKind.FACT, t, t)
>>> store.upsert("ana", [entry], np.array([[1.0, 0.0, 0.0]], dtype=np.float32))
>>> hits = store.hybrid_search("ana", np.array([1.0, 0.0, 0.0]), "oboe", SearchFilters(), 5)
>>> [h.entry.text for h in hits.dense], [h.entry.text for h in hits.lexical]
(['I play the oboe'], ['I play the oboe'])
>>> store.drop_user("ana"); store.count("ana")
0
>>> store.close()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import qdrant_edge as qe
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
from tiermem.stores.edge_points import PAGE, access_stats, present, scored, scroll
from tiermem.stores.edge_schema import (
    DENSE,
    GRAPH_THRESHOLD_KB,
    bm25_query,
    dense_query,
    to_edge_filter,
)
from tiermem.stores.edge_shards import (
    GraphReport,
    OpenShard,
    ShardPool,
    edge_call,
    require_room,
)
from tiermem.stores.files import probe_writes
from tiermem.stores.naming import collection_name
from tiermem.stores.payload import entry_to_payload, owned_entry, owned_vectors, valid_point_id
from tiermem.stores.records import (
    judge_record,
    read_record,
    record_metadata,
    reindex_state,
    staging_name,
)
from tiermem.types import MemoryEntry, SearchFilters

logger = logging.getLogger(__name__)

_PROBE_BYTES = 16_384
_T = TypeVar("_T")


class EdgeStore:
    """Per-user MTM shards in Qdrant Edge (see the module's docstring). Every call runs under
    one lock per store, so ``record_access`` (read, add, write) is atomic in the process; a
    shard is locked to one process, so no other process can interleave."""

    def __init__(
        self,
        root: Path,
        *,
        dim: int,
        prefix: str,
        embedder: str | None = None,
        max_open: int = 16,
    ) -> None:
        """``root``: the shards' directory (made, 0700, if missing). ``embedder``: the name of
        the embedder whose vectors this store writes, recorded with each shard and checked on
        each opened (``None``: nothing recorded; the vector size is still checked)."""
        try:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
            root.chmod(0o700)
        except OSError as exc:
            raise StoreError(f"cannot use {root} for the MTM shards: {exc}") from exc
        self._pool = ShardPool(root, dim=dim, max_open=max_open)
        self._dim = dim
        self._prefix = prefix
        self._record = EmbedderRecord(embedder, dim) if embedder is not None else None
        self._checked: set[str] = set()  # open shards whose record was checked on opening
        self._lock = threading.RLock()

    @property
    def dim(self) -> int:
        return self._dim

    # -- shards ---------------------------------------------------------------------------

    def _shard(self, user_id: str, *, create: bool) -> OpenShard | None:
        """The user's shard, open; ``None`` if the user has none and ``create`` is false. One
        opened from disk has its record checked first (``EmbedderMismatchError``, a reindex
        that stopped); a new one records this store's embedder."""
        name = collection_name(self._prefix, user_id)
        with self._lock:
            if self._pool.is_open(name) and name in self._checked:
                return self._pool.open(name, create=False)
            exists = self._pool.exists(name)
            if exists:
                self._check(name, user_id)
            elif self._record is not None:
                self._refuse_interrupted_reindex(staging_name(name))
            if not exists and not create:
                return None
            opened = self._pool.open(name, create=True)
            if not exists:
                self._pool.write_meta(name, record_metadata(self._record))
            self._checked.add(name)
            return opened

    def _check(self, name: str, user_id: str) -> None:
        size = self._pool.stored_dim(name)
        meta = self._pool.read_meta(name)
        if self._record is not None:
            if judge_record(name, user_id, meta, size, self._record) == "adopt":
                self._pool.write_meta(name, record_metadata(self._record))
                logger.info("MTM shard %s adopted by embedder %s", name, self._record)
        elif size != self._dim:
            raise StoreError(f"MTM shard {name} holds vectors of size {size}, not {self._dim}")

    def _refuse_interrupted_reindex(self, staging: str) -> None:
        """No shard, and beside it a finished copy: a reindex stopped between removing the
        user's shard and moving the copy in its place."""
        if self._staged_complete(staging):
            raise StoreError(
                f"a `tiermem reindex` of this user stopped before it moved its finished copy "
                f"{staging} in place; run it again for this user"
            )

    def _staged_complete(self, staging: str) -> bool:
        return (
            self._pool.exists(staging)
            and reindex_state(self._pool.read_meta(staging)) == "complete"
        )

    def _reading(self, user_id: str, empty: _T, read: Callable[[qe.EdgeShard], _T]) -> _T:
        """``read`` of the user's shard, or ``empty`` for a user with none."""
        with self._lock:
            opened = self._shard(user_id, create=False)
            return empty if opened is None else read(opened.shard)

    # -- writes ---------------------------------------------------------------------------

    def _write(self, shard: qe.EdgeShard, what: str, operation: qe.UpdateOperation) -> None:
        """One Edge update, once the disk is known to have room for it (``require_room``)."""
        require_room(self._pool.root, what)
        edge_call(what, lambda: shard.update(operation))

    def upsert(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        """One Edge update (one WAL record) for all the entries: all or none."""
        if not entries:
            return
        if vectors.shape != (len(entries), self._dim):
            raise StoreError(f"vectors of shape {vectors.shape} for {len(entries)} entries")
        with self._lock:
            opened = self._shard(user_id, create=True)
            assert opened is not None
            stored = access_stats(opened.shard, user_id, [e.id for e in entries])
            points = [
                qe.Point(
                    e.id,
                    {DENSE: v.tolist()},
                    entry_to_payload(
                        with_recorded_access(e, *stored[e.id]) if e.id in stored else e
                    ),
                )
                for e, v in zip(entries, vectors, strict=True)
            ]
            self._write(opened.shard, "upsert", qe.UpdateOperation.upsert_points(points))

    def record_access(
        self, user_id: str, retrievals: Mapping[str, Retrievals]
    ) -> dict[str, AccessUpdate]:
        def count(shard: qe.EdgeShard) -> dict[str, AccessUpdate]:
            read = access_stats(shard, user_id, list(retrievals))
            updates = {
                i: AccessUpdate(n + retrievals[i].times, retrievals[i].last)
                for i, (n, _) in read.items()
            }
            for i, u in updates.items():
                payload = {
                    "access_count": u.access_count,
                    "last_accessed": u.last_accessed.isoformat(),
                }
                self._write(shard, "set_payload", qe.UpdateOperation.set_payload([i], payload))
            return updates

        return self._reading(user_id, {}, count)

    def set_superseded(self, user_id: str, links: Mapping[str, str | None]) -> None:
        def link(shard: qe.EdgeShard) -> None:
            # only points that exist: Edge 0.9.0 fails a set_payload on a missing point
            # after writing the ones before it
            for i in present(shard, list(links)):
                operation = qe.UpdateOperation.set_payload([i], {"superseded_by": links[i]})
                self._write(shard, "set_payload", operation)

        self._reading(user_id, None, link)

    def delete(self, user_id: str, ids: Sequence[str]) -> None:
        wanted: list[qe.PointId] = [i for i in ids if valid_point_id(i)]
        with self._lock:
            opened = self._shard(user_id, create=False)
            if opened is None or not wanted:
                return
            self._write(opened.shard, "delete", qe.UpdateOperation.delete_points(wanted))
            opened.deleted = True  # optimized (a vacuum at most) when it is closed

    def drop_user(self, user_id: str) -> None:
        """Remove the user's shard directory, and what a stopped reindex left of it."""
        name = collection_name(self._prefix, user_id)
        with self._lock:
            for shard in (name, staging_name(name)):
                self._checked.discard(shard)
                self._pool.drop(shard)

    def replace_user(self, user_id: str, entries: Sequence[MemoryEntry], vectors: Vectors) -> None:
        """Fill a staging shard, mark it complete, remove the user's shard and move the copy
        in its place (a rename), then clear its mark: stopped anywhere, what is left is
        refused with a message to run the reindex again, which finishes it."""
        if vectors.shape != (len(entries), self._dim):
            raise StoreError(f"vectors of shape {vectors.shape} for {len(entries)} entries")
        name = collection_name(self._prefix, user_id)
        staging = staging_name(name)
        with self._lock:
            self._checked.discard(name)
            self._pool.drop(staging)
            opened = self._pool.open(staging, create=True)
            assert opened is not None
            self._pool.write_meta(staging, record_metadata(self._record, "staging"))
            for start in range(0, len(entries), PAGE):
                page = zip(
                    entries[start : start + PAGE], vectors[start : start + PAGE], strict=True
                )
                points = [qe.Point(e.id, {DENSE: v.tolist()}, entry_to_payload(e)) for e, v in page]
                self._write(opened.shard, "upsert", qe.UpdateOperation.upsert_points(points))
            self._pool.close(staging)
            self._pool.write_meta(staging, record_metadata(self._record, "complete"))
            self._pool.drop(name)
            self._pool.rename(staging, name)
            self._pool.write_meta(name, record_metadata(self._record))

    # -- reads ----------------------------------------------------------------------------

    def get(self, user_id: str, ids: Sequence[str]) -> list[MemoryEntry]:
        wanted: list[qe.PointId] = [i for i in ids if valid_point_id(i)]

        def read(shard: qe.EdgeShard) -> list[MemoryEntry]:
            if not wanted:
                return []
            records = edge_call("retrieve", lambda: shard.retrieve(wanted, True, False))
            found = {str(r.id): owned_entry(user_id, r.id, r.payload) for r in records}
            return [e for e in (found.get(str(i)) for i in wanted) if e is not None]

        return self._reading(user_id, [], read)

    def stored_vectors(self, user_id: str, ids: Sequence[str]) -> dict[str, Vectors]:
        wanted: list[qe.PointId] = [i for i in ids if valid_point_id(i)]

        def read(shard: qe.EdgeShard) -> dict[str, Vectors]:
            if not wanted:
                return {}
            records = edge_call("retrieve", lambda: shard.retrieve(wanted, True, [DENSE]))
            return owned_vectors(user_id, ((r.id, r.vector, r.payload) for r in records), DENSE)

        return self._reading(user_id, {}, read)

    def list_entries(self, user_id: str, filters: SearchFilters | None = None) -> list[MemoryEntry]:
        query_filter = to_edge_filter(filters)
        return self._reading(user_id, [], lambda shard: scroll(shard, user_id, query_filter))

    def search(
        self, user_id: str, vector: Vectors, filters: SearchFilters, limit: int
    ) -> list[ScoredEntry]:
        request = dense_query(vector.reshape(-1).tolist(), to_edge_filter(filters), limit)
        return self._reading(
            user_id,
            [],
            lambda shard: scored(user_id, edge_call("query", lambda: shard.query(request))),
        )

    def hybrid_search(
        self, user_id: str, vector: Vectors, text: str, filters: SearchFilters, limit: int
    ) -> HybridHits:
        """Dense and BM25 as one Edge batch; ``text`` empty: the dense query alone."""
        query_filter = to_edge_filter(filters)
        requests = [dense_query(vector.reshape(-1).tolist(), query_filter, limit)]
        if text.strip():
            requests.append(bm25_query(text, query_filter, limit))
        batch = qe.QueryBatchRequest(requests)

        def read(shard: qe.EdgeShard) -> HybridHits:
            results = edge_call("query_batch", lambda: shard.query_batch(batch))
            lexical = scored(user_id, results[1]) if len(results) > 1 else []
            return HybridHits(scored(user_id, results[0]), lexical)

        return self._reading(user_id, HybridHits([], []), read)

    def count(self, user_id: str) -> int:
        """The shard's live points as it keeps them (``info()``), not an exact ``count``
        request, which scans every point: 0.07 against 6.7 ms at 10^5 entries, and every
        ``add()`` counts (capacity)."""
        return self._reading(
            user_id, 0, lambda shard: edge_call("info", lambda: shard.info().points_count)
        )

    def export_user(self, user_id: str) -> StoredCollection:
        """The user's entries and the embedder their shard records, unchecked; from the
        finished staging copy of a reindex that stopped, where there is one."""
        name = collection_name(self._prefix, user_id)
        staging = staging_name(name)
        with self._lock:
            source = staging if self._staged_complete(staging) else name
            if not self._pool.exists(source):
                return StoredCollection(None, [], found=False)
            self._checked.discard(source)  # opened unchecked: the next call checks it
            opened = self._pool.open(source, create=False)
            assert opened is not None
            entries = scroll(opened.shard, user_id, None)
            return StoredCollection(read_record(self._pool.read_meta(source)), entries)

    def check_writable(self) -> None:
        """A few pages can be written and synced under the shards' directory (the probe file
        is removed again), and the disk has the room Edge's writes need (``require_room``)."""
        require_room(self._pool.root, "write")
        try:
            probe_writes(self._pool.root, _PROBE_BYTES)
        except OSError as exc:
            raise StoreError(f"the MTM store's directory cannot be written: {exc}") from exc

    def build_graphs(self, threshold_kb: int = GRAPH_THRESHOLD_KB) -> list[GraphReport]:
        """An HNSW graph in every shard whose vectors pass ``threshold_kb`` (a Qdrant server's
        default), one shard at a time: each blocks the process while Edge builds it (101.7 s
        for 10^5 entries on two cores, ``bench mtm``), so only ``tiermem optimize`` calls
        this. A shard that cannot be built (held by another process, of another vector size,
        unreadable) is reported with its reason and left as it was; the others are built."""
        reports = []
        with self._lock:
            for name in self._pool.names():
                size = self._pool.stored_dim(name)
                if size != self._dim:
                    why = f"holds vectors of size {size}, not {self._dim}: reindex its user first"
                    reports.append(GraphReport(name, 0, 0, 0.0, why))
                    continue
                try:
                    reports.append(self._pool.build_graph(name, threshold_kb))
                except StoreError as exc:
                    reports.append(GraphReport(name, 0, 0, 0.0, str(exc)))
        return reports

    def close(self) -> None:
        """Close every open shard (optimized first where it saw a delete)."""
        with self._lock:
            self._checked.clear()
            self._pool.close_all()
