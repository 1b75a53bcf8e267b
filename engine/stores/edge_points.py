"""Points of one Qdrant Edge shard as ``MemoryEntry`` values: the reads and writes that
``EdgeStore`` builds its calls from. Every point read back is checked against its ``user_id``
payload (``owned_entry``); every Edge failure is a ``StoreError`` (``edge_call``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime

import qdrant_edge as qe
from tiermem.stores.base import ScoredEntry
from tiermem.stores.edge_shards import edge_call
from tiermem.stores.payload import access_of, owned_entry, valid_point_id
from tiermem.types import MemoryEntry

logger = logging.getLogger(__name__)

PAGE = 512


def present(shard: qe.EdgeShard, ids: Sequence[str]) -> list[str]:
    """Those of ``ids`` that name a point of the shard, in order."""
    wanted: list[qe.PointId] = [i for i in ids if valid_point_id(i)]
    if not wanted:
        return []
    found = {str(r.id) for r in edge_call("retrieve", lambda: shard.retrieve(wanted, False, False))}
    return [i for i in ids if i in found]


def access_stats(
    shard: qe.EdgeShard, user_id: str, ids: Sequence[str]
) -> dict[str, tuple[int, datetime | None]]:
    """(access count, last access) of the points among ``ids`` that exist."""
    wanted: list[qe.PointId] = [i for i in ids if valid_point_id(i)]
    if not wanted:
        return {}
    fields = ["user_id", "access_count", "last_accessed"]
    records = edge_call("retrieve", lambda: shard.retrieve(wanted, fields, False))
    return access_of(user_id, ((r.id, r.payload) for r in records))


def scroll(shard: qe.EdgeShard, user_id: str, query_filter: qe.Filter | None) -> list[MemoryEntry]:
    """The user's entries in ``shard`` under ``query_filter``, oldest first."""
    entries: list[MemoryEntry] = []
    offset: qe.PointId | None = None
    while True:
        request = qe.ScrollRequest(
            offset=offset, limit=PAGE, filter=query_filter, with_payload=True, with_vector=False
        )
        records, offset = edge_call("scroll", lambda: shard.scroll(request))  # noqa: B023
        entries.extend(e for r in records if (e := owned_entry(user_id, r.id, r.payload)))
        if offset is None:
            break
    entries.sort(key=lambda e: (e.created_at, e.id))
    return entries


def scored(user_id: str, points: list[qe.ScoredPoint]) -> list[ScoredEntry]:
    return [
        ScoredEntry(entry, float(p.score))
        for p in points
        if (entry := owned_entry(user_id, p.id, p.payload)) is not None
    ]
