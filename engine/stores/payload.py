"""How an ``MemoryEntry`` is laid out as a JSON payload, and back.

Times are stored twice: ISO 8601 for people and tools, and POSIX seconds (``*_ts``) for range
filters. ``time_ts`` is the effective time (event time if known, else creation time), the one
time-window filters use.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import numpy as np
from tiermem.embedding.base import Vectors
from tiermem.render import index_text
from tiermem.types import MemoryEntry, MemoryKind

logger = logging.getLogger(__name__)

PAYLOAD_VERSION = 2
INDEX_TEXT = "index_text"  # the text BM25 ranks: the entry's date, then its text


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _parse(value: object) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


def entry_to_payload(entry: MemoryEntry) -> dict[str, Any]:
    return {
        "v": PAYLOAD_VERSION,
        "user_id": entry.user_id,
        "text": entry.text,
        INDEX_TEXT: index_text(entry),
        "kind": entry.kind.value,
        "created_at": _iso(entry.created_at),
        "updated_at": _iso(entry.updated_at),
        "event_time": _iso(entry.event_time),
        "time_ts": entry.effective_time.timestamp(),
        "access_count": entry.access_count,
        "last_accessed": _iso(entry.last_accessed),
        "source_turn_ids": list(entry.source_turn_ids),
        "session_id": entry.session_id,
        "confidence": entry.confidence,
        "superseded_by": entry.superseded_by,
    }


def payload_to_entry(entry_id: str, payload: dict[str, Any]) -> MemoryEntry:
    created = _parse(payload["created_at"])
    updated = _parse(payload["updated_at"])
    if created is None or updated is None:
        raise ValueError(f"entry {entry_id} has no creation or update time")
    return MemoryEntry(
        id=entry_id,
        user_id=payload["user_id"],
        text=payload["text"],
        kind=MemoryKind(payload["kind"]),
        created_at=created,
        updated_at=updated,
        event_time=_parse(payload.get("event_time")),
        access_count=int(payload.get("access_count", 0)),
        last_accessed=_parse(payload.get("last_accessed")),
        source_turn_ids=tuple(payload.get("source_turn_ids", ())),
        session_id=payload.get("session_id"),
        confidence=float(payload.get("confidence", 1.0)),
        superseded_by=payload.get("superseded_by"),
    )


def valid_point_id(value: str) -> bool:
    """Whether ``value`` can name a point (entry ids are UUIDs); others match nothing."""
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


def owned_entry(
    user_id: str, point_id: object, payload: dict[str, Any] | None
) -> MemoryEntry | None:
    """The entry, if the point belongs to ``user_id``; anything else is a store fault."""
    if payload is None or payload.get("user_id") != user_id:
        logger.error("point %s in a user's collection belongs to someone else; dropped", point_id)
        return None
    return payload_to_entry(str(point_id), payload)


def access_of(
    user_id: str, points: Iterable[tuple[object, dict[str, Any] | None]]
) -> dict[str, tuple[int, datetime | None]]:
    """(access count, last access) of each of ``points`` (id, payload) by id: those of
    ``user_id``; another user's is a store fault, logged and left out.

    >>> access_of("ana", [("p1", {"user_id": "ana", "access_count": 2, "last_accessed": None})])
    {'p1': (2, None)}
    """
    stats: dict[str, tuple[int, datetime | None]] = {}
    for point_id, payload in points:
        if (payload or {}).get("user_id") != user_id:
            logger.error("point %s in a user's collection belongs to someone else", point_id)
            continue
        assert payload is not None
        stats[str(point_id)] = (
            int(payload.get("access_count", 0)),
            _parse(payload.get("last_accessed")),
        )
    return stats


def owned_vectors(
    user_id: str, points: Iterable[tuple[object, object, dict[str, Any] | None]], name: str
) -> dict[str, Vectors]:
    """The vector named ``name`` of each of ``points`` (id, named vectors, payload) that is
    ``user_id``'s, by id (see ``owned_entry``); points without it are left out."""
    out: dict[str, Vectors] = {}
    for point_id, vectors, payload in points:
        vector = vectors.get(name) if isinstance(vectors, dict) else None
        if vector is not None and owned_entry(user_id, point_id, payload) is not None:
            out[str(point_id)] = np.asarray(vector, dtype=np.float32)
    return out
